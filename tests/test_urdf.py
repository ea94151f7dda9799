"""URDF import (mbfg.urdf): hand-written URDF files against the same robots built in code, and every bad
file refused with a ModelError naming the file and the link or joint."""

from __future__ import annotations

import dataclasses
import shutil
import textwrap
from pathlib import Path

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from mbfg import spook
from mbfg.cli import main
from mbfg.errors import ModelError
from mbfg.models import AXIS_FRAMES, SOFT, double_pendulum, load_model
from mbfg.parameters import Parameter, ParameterSet
from mbfg.rigid import WORLD, Body, Frame, Hinge, Prismatic, RigidModel
from mbfg.urdf import joint_limits, load_urdf, urdf_from_string

DATA = Path(__file__).resolve().parent / "data" / "urdf"
DOUBLE_PENDULUM = DATA / "double_pendulum.urdf"
ARM = DATA / "arm.urdf"
H, DURATION = 1e-3, 2.0


def _observations(model: RigidModel, coordinates: dict, rates: dict | None = None,
                  controls: np.ndarray | None = None) -> np.ndarray:
    x0 = model.initial_state(coordinates, rates)
    return spook.simulate(model, DURATION, H, initial=x0, controls=controls).observations


# --------------------------------------------------------------------------- round trips


def test_double_pendulum_urdf_simulates_as_the_builtin_double_pendulum():
    builtin, urdf = double_pendulum(), load_urdf(DOUBLE_PENDULUM)
    ours = builtin.parameters.numpy_values()
    theirs = urdf.parameters.numpy_values()
    expected = {"m_link1": ours["m1"], "m_link2": ours["m2"], "J2_link1": ours["J1"], "J2_link2": ours["J2"],
                "J1_link1": ours["J_perp"], "J3_link1": ours["J_perp"], "J1_link2": ours["J_perp"],
                "J3_link2": ours["J_perp"], "b_q1": ours["b1"], "b_q2": ours["b2"],
                **{k: ours[k] for k in ("eps_lin", "eps_rot", "tau", "g")}}
    assert theirs == expected
    assert urdf.observations == builtin.observations == ("q1", "q2")
    start = {"q1": 1.0, "q2": -0.5}
    np.testing.assert_allclose(_observations(urdf, start), _observations(builtin, start), rtol=0, atol=1e-10)


def test_motors_drive_the_joints_as_the_builtin_torque_inputs():
    builtin = double_pendulum(torques=True)
    urdf = load_urdf(DOUBLE_PENDULUM, motors=["q1", "q2"], name="dp")
    assert urdf.name == "dp" and urdf.controls == ("u_q1", "u_q2")
    for joint in ("q1", "q2"):
        assert urdf.parameters[f"K_{joint}"].default == builtin.parameters[f"K_{joint}"].default
        assert urdf.parameters[f"J_s_{joint}"].default == builtin.parameters[f"J_s_{joint}"].default
    t = np.arange(round(DURATION / H)) * H
    u = np.stack([0.3 * np.sin(3 * t), -0.2 * np.cos(2 * t)], axis=1)
    start = {"q1": 0.2}
    np.testing.assert_allclose(_observations(urdf, start, controls=u), _observations(builtin, start, controls=u),
                               rtol=0, atol=1e-10)


# The arm of arm.urdf, by hand. The carriage carries the tool (0.25 kg, CoM 0.1 m out along x): the
# combined CoM is x_c out and the offsets along x leave the combined inertia diagonal.
M_CARRIAGE, M_TOOL = 0.5, 0.25
M_C = M_CARRIAGE + M_TOOL
X_C = M_TOOL * 0.1 / M_C
J_C = (0.001 + 0.0005,
       0.002 + M_CARRIAGE * X_C**2 + 0.0005 + M_TOOL * (0.1 - X_C) ** 2,
       0.002 + M_CARRIAGE * X_C**2 + 0.0005 + M_TOOL * (0.1 - X_C) ** 2)


def _arm_by_hand() -> RigidModel:
    """The arm with bodies of our choosing: the hand's axes are the carriage's at zero angles (the URDF's
    wrist frame is turned 90 deg about z, so its inertias 4e-4 about x and 3e-4 about y swap)."""
    eps_lin, eps_rot, tau = SOFT
    common = dict(eps_lin=eps_lin, eps_rot=eps_rot, tau=tau)
    bodies = [Body("upper", 2.0, (0.002, 0.02, 0.02)), Body("carriage", M_C, J_C),
              Body("hand", 0.3, (0.0003, 0.0004, 0.0002))]
    joints = [
        Hinge("shoulder", Frame(WORLD, (0.0, 0.0, 0.1)), Frame("upper", (-0.15, 0.0, 0.0)), viscous=0.01, **common),
        Prismatic("slide", Frame("upper", (0.1 - 0.15, 0.0, 0.0), AXIS_FRAMES["x"]),
                  Frame("carriage", (-X_C, 0.0, 0.0), AXIS_FRAMES["x"]), viscous=0.5, **common),
        Hinge("wrist", Frame("carriage", (0.15 - X_C, 0.0, 0.0), AXIS_FRAMES["y"]),
              Frame("hand", (0.0, 0.0, 0.05), AXIS_FRAMES["y"]), viscous=0.002, **common),
    ]
    return RigidModel("arm-by-hand", bodies, joints, parameters=ParameterSet([Parameter("g", 9.81, "m/s^2")]))


def test_arm_urdf_merges_the_fixed_tool_and_simulates_as_the_arm_built_by_hand():
    urdf = load_urdf(ARM)
    p = urdf.parameters.numpy_values()
    assert [b.name for b in urdf.bodies] == ["upper", "carriage", "hand"]
    assert [j.name for j in urdf.joints] == ["shoulder", "slide", "wrist"]
    assert isinstance(urdf.joints[1], Prismatic)
    assert p["m_carriage"] == pytest.approx(M_C, rel=1e-15)
    np.testing.assert_allclose([p[f"J{k}_carriage"] for k in (1, 2, 3)], J_C, rtol=1e-14)
    np.testing.assert_allclose([p[f"J{k}_hand"] for k in (1, 2, 3)], [0.0004, 0.0003, 0.0002], rtol=0)
    assert (p["b_shoulder"], p["b_slide"], p["b_wrist"]) == (0.01, 0.5, 0.002)
    assert "tool into carriage" in urdf.description and "slide 50 N" in urdf.description
    coordinates = {"shoulder": 0.3, "slide": 0.1, "wrist": 0.5}
    rates = {"shoulder": 1.0, "slide": 0.05, "wrist": -1.0}
    hand = _arm_by_hand()
    x_urdf, x_hand = urdf.initial_state(coordinates, rates), hand.initial_state(coordinates, rates)
    np.testing.assert_allclose(x_urdf.r, x_hand.r, atol=1e-15)  # same CoMs; the hand's axes differ
    np.testing.assert_allclose(_observations(urdf, coordinates, rates), _observations(hand, coordinates, rates),
                               rtol=0, atol=1e-10)


def test_principal_axes_of_a_rotated_inertial_carry_the_urdf_tensor():
    # Products of inertia and an <inertial> turned by rpy: the body frame is along the principal axes,
    # right-handed, and the body's world tensor at zero angle is the URDF's.
    I_in = np.array([[0.03, 0.004, -0.002], [0.004, 0.02, 0.001], [-0.002, 0.001, 0.015]])
    rpy = (0.3, -0.2, 0.7)
    text = _robot(f"""
      <link name="base"/>
      <link name="l1">{_inertial(1.5, "0.1 0.02 -0.3", I_in, " ".join(map(str, rpy)))}</link>
      <joint name="j1" type="revolute"><parent link="base"/><child link="l1"/>
        <origin xyz="0 0 1" rpy="0.1 0 0"/><axis xyz="0.6 0.8 0"/></joint>""")
    model = urdf_from_string(text)
    from scipy.spatial.transform import Rotation

    R_inertial = Rotation.from_euler("xyz", rpy).as_matrix()
    R_joint = Rotation.from_euler("xyz", (0.1, 0.0, 0.0)).as_matrix()
    x = model.initial_state(numpy=True)
    from mbfg.quaternion import to_matrix

    R_wb = np.asarray(to_matrix(x.e[0]))
    J = np.array([model.parameters[f"J{k}_l1"].default for k in (1, 2, 3)])
    np.testing.assert_allclose(R_wb @ np.diag(J) @ R_wb.T, R_joint @ R_inertial @ I_in @ R_inertial.T @ R_joint.T,
                               atol=1e-15)
    np.testing.assert_allclose(x.r[0], np.array([0.0, 0.0, 1.0]) + R_joint @ [0.1, 0.02, -0.3], atol=1e-15)
    # The hinge turns about the URDF axis (in the joint frame) through the joint origin.
    a = model.joints[0].a
    np.testing.assert_allclose(a.R()[:, 2], R_joint @ [0.6, 0.8, 0.0], atol=1e-15)


def test_friction_limits_and_names():
    text = _robot(f"""
      <link name="base"/>
      <link name="arm-1">{_inertial(1.0)}</link>
      <link name="slider.2">{_inertial(1.0)}</link>
      <joint name="hinge 1" type="continuous"><parent link="base"/><child link="arm-1"/>
        <dynamics damping="0.1" friction="0.2"/></joint>
      <joint name="slide" type="prismatic"><parent link="arm-1"/><child link="slider.2"/>
        <limit effort="30" velocity="1" lower="0" upper="0.5"/><dynamics friction="0"/></joint>""")
    model = urdf_from_string(text, motors=["slide"])
    hinge, slide = model.joints
    assert (hinge.viscous, hinge.coulomb, slide.coulomb) == ("b_hinge_1", "fc_hinge_1", None)
    assert model.parameters["fc_hinge_1"].unit == "N m" and model.parameters["b_slide"].unit == "N s/m"
    assert model.parameters["J_s_slide"].unit == "kg" and model.controls == ("u_slide",)
    assert {"m_arm_1", "J1_slider_2"} <= set(model.parameters)
    assert not any(p.free for p in model.parameters.values())
    assert model.has_dry_friction and "slide 30 N" in model.description


# --------------------------------------------------------------------------- bad files


def _inertial(mass: float, xyz: str = "0 0 -0.1", I: np.ndarray | None = None, rpy: str = "0 0 0") -> str:
    I = np.diag([0.01, 0.01, 0.01]) if I is None else I
    return (f'<inertial><origin xyz="{xyz}" rpy="{rpy}"/><mass value="{mass}"/>'
            f'<inertia ixx="{I[0, 0]}" ixy="{I[0, 1]}" ixz="{I[0, 2]}" iyy="{I[1, 1]}" iyz="{I[1, 2]}" '
            f'izz="{I[2, 2]}"/></inertial>')


def _robot(body: str) -> str:
    return f'<?xml version="1.0"?>\n<robot name="r">{textwrap.dedent(body)}\n</robot>\n'


def _joint(name: str, parent: str, child: str, kind: str = "revolute", axis: str = "0 1 0") -> str:
    return (f'<joint name="{name}" type="{kind}"><parent link="{parent}"/><child link="{child}"/>'
            f'<axis xyz="{axis}"/></joint>')


GOOD = f'<link name="base"/><link name="l1">{_inertial(1.0)}</link>'

BAD = {
    "missing inertial": ('<link name="base"/><link name="l1"/>' + _joint("j1", "base", "l1"),
                         ["link 'l1'", "no <inertial>"]),
    "zero mass": (f'<link name="base"/><link name="l1">{_inertial(0.0)}</link>' + _joint("j1", "base", "l1"),
                  ["link 'l1'", "mass must be > 0"]),
    "negative mass of a fixed link": (GOOD + f'<link name="tool">{_inertial(-1.0)}</link>'
                                      + _joint("j1", "base", "l1") + _joint("f", "l1", "tool", "fixed"),
                                      ["link 'tool'", "mass"]),
    "inertia not positive definite": (
        f'<link name="base"/><link name="l1">{_inertial(1.0, I=np.diag([0.01, 0.01, -0.01]))}</link>'
        + _joint("j1", "base", "l1"), ["link 'l1'", "positive"]),
    "triangle inequality": (
        f'<link name="base"/><link name="l1">{_inertial(1.0, I=np.diag([0.01, 0.01, 0.03]))}</link>'
        + _joint("j1", "base", "l1"), ["link 'l1'", "triangle inequality"]),
    "inertia attribute missing": ('<link name="base"/><link name="l1"><inertial><mass value="1"/>'
                                  '<inertia ixx="1" iyy="1" izz="1"/></inertial></link>' + _joint("j1", "base", "l1"),
                                  ["link 'l1'", "ixy"]),
    "unknown joint type": (GOOD + _joint("j1", "base", "l1", "spherical"), ["joint 'j1'", "unknown type 'spherical'"]),
    "floating base": (GOOD + _joint("j1", "base", "l1", "floating"), ["joint 'j1'", "floating bases"]),
    "planar joint": (GOOD + _joint("j1", "base", "l1", "planar"), ["joint 'j1'", "fixed joint"]),
    "link with two parents": (GOOD + f'<link name="l2">{_inertial(1.0)}</link>' + _joint("j1", "base", "l1")
                              + _joint("j2", "l1", "l2") + _joint("j3", "base", "l2"), ["link 'l2'", "a loop"]),
    "cycle": (GOOD + f'<link name="l2">{_inertial(1.0)}</link>' + _joint("j1", "l2", "l1")
              + _joint("j2", "l1", "l2"), ["a loop", "l2 -> l1 -> l2"]),
    "two roots": (GOOD + '<link name="other"/>' + _joint("j1", "base", "l1"), ["base, other", "root"]),
    "zero axis": (GOOD + _joint("j1", "base", "l1", axis="0 0 0"), ["joint 'j1'", "zero length"]),
    "unknown link": (GOOD + _joint("j1", "base", "l7"), ["joint 'j1'", "'l7'"]),
    "name clash": (GOOD + f'<link name="l-2">{_inertial(1.0)}</link><link name="l_2">{_inertial(1.0)}</link>'
                   + _joint("j1", "base", "l1") + _joint("j2", "l1", "l-2") + _joint("j3", "l1", "l_2"),
                   ["'l-2'", "'l_2'", "m_l_2"]),
    "bad damping": (GOOD + '<joint name="j1" type="revolute"><parent link="base"/><child link="l1"/>'
                    '<dynamics damping="-1"/></joint>', ["joint 'j1'", "damping"]),
    "no moving joint": (GOOD + _joint("j1", "base", "l1", "fixed"), ["nothing moves"]),
    "malformed XML": ('<link name="base"><link name="l1"/>', ["not well-formed XML", "line"]),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_urdf_is_refused_naming_the_file_and_the_part(case, tmp_path):
    body, expected = BAD[case]
    path = tmp_path / "robot.urdf"
    path.write_text(_robot(body))
    with pytest.raises(ModelError) as info:
        load_urdf(path)
    message = str(info.value)
    assert message.startswith(f"{path}: ")
    for part in expected:
        assert part in message


@pytest.mark.parametrize(("motors", "expected"), [(["nope"], "motor joint 'nope'"), (["f"], "is fixed")])
def test_bad_motor_names_are_refused(motors, expected):
    text = _robot(GOOD + f'<link name="tool">{_inertial(1.0)}</link>' + _joint("j1", "base", "l1")
                  + _joint("f", "l1", "tool", "fixed"))
    with pytest.raises(ModelError, match=expected):
        urdf_from_string(text, motors=motors, source="mine.urdf")


def test_unreadable_and_non_urdf_files(tmp_path):
    with pytest.raises(ModelError, match="missing.urdf: cannot read URDF file"):
        load_urdf(tmp_path / "missing.urdf")
    (tmp_path / "x.urdf").write_text("<sdf version='1.6'/>")
    with pytest.raises(ModelError, match=r"x.urdf: expected a URDF <robot> element, got <sdf>"):
        load_urdf(tmp_path / "x.urdf")


# --------------------------------------------------------------------------- load_model and the CLI


def test_load_model_dispatches_urdf_paths(tmp_path):
    shutil.copy(ARM, tmp_path / "Arm.URDF")
    model = load_model(str(tmp_path / "Arm.URDF"))
    assert model.name == "arm" and model.observations == ("shoulder", "slide", "wrist")
    assert joint_limits(ARM)["slide"] == {"effort": 50.0, "velocity": 0.5, "lower": 0.0, "upper": 0.3}


def test_mbfg_models_describes_a_urdf_robot(capsys):
    assert main(["models", str(ARM)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("arm: URDF arm.urdf: 3 bodies")
    for name in ("m_carriage", "J1_carriage", "J3_hand", "b_slide", "eps_lin", "g"):
        assert f"    {name} " in out


def test_stream_readout_of_a_slider_on_a_turning_link_equals_observe_and_its_rates():
    """The stream's NumPy read-out (graphs/stream/readout.py) of the arm: displacements and angles equal
    RigidModel.observe, rates equal the joint rates the state was built with, and the Jacobians with
    respect to the GTSAM tangent (Pose3: R Exp(dw), t + R dt; V as is) equal central differences."""
    from mbfg import quaternion as quat
    from mbfg.graphs.stream import joint_coordinates
    from mbfg.graphs.stream.readout import Readout

    arm = load_urdf(ARM)
    # The slide's frame a moved off the axis through the upper link's CoM, so that every term counts.
    slide = dataclasses.replace(arm.joints[1], a=dataclasses.replace(arm.joints[1].a, position=(-0.05, 0.02, 0.03)))
    model = arm._copy(joints=[arm.joints[0], slide, arm.joints[2]])
    coordinates = {"shoulder": 0.3, "slide": 0.1, "wrist": 0.5}
    rates = {"shoulder": 1.0, "slide": 0.05, "wrist": -1.0}
    x = model.initial_state(coordinates, rates, numpy=True)
    states = type(x)(*(np.asarray(a)[None] for a in x))
    q, qd = joint_coordinates(model, states)
    np.testing.assert_allclose(q[0], np.asarray(model.observe(model.initial_state(coordinates, rates),
                                                              model.parameters.arrays())), atol=1e-14)
    np.testing.assert_allclose(qd[0], [rates[name] for name in model.observations], atol=1e-14)

    readout = Readout(model)
    R = quat.to_matrix_np(np.asarray(x.e))
    r = np.asarray(x.r)
    vel = np.concatenate([x.v, x.w], axis=1).reshape(-1)
    _, _, Jq, Jv = readout(R[None], r[None], vel[None], jacobians=True)
    nb, step = model.nb, 1e-6

    def read(delta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The read-out at the state moved by delta (12 nb,): poses [dw, dt] per body, then V."""
        dR = np.stack([R[i] @ Rotation.from_rotvec(delta[6 * i : 6 * i + 3]).as_matrix() for i in range(nb)])
        dr = np.stack([r[i] + R[i] @ delta[6 * i + 3 : 6 * i + 6] for i in range(nb)])
        out = readout(dR[None], dr[None], (vel + delta[6 * nb :])[None])
        return out[0][0], out[1][0]

    for k in range(12 * nb):
        e = np.zeros(12 * nb)
        e[k] = step
        (q_plus, qd_plus), (q_minus, qd_minus) = read(e), read(-e)
        if k < 6 * nb:  # the read-out's Jq holds the coordinates' pose derivatives
            np.testing.assert_allclose(Jq[0, :, k], (q_plus - q_minus) / (2 * step), atol=1e-8)
        else:  # and Jv the rates' velocity derivatives
            np.testing.assert_allclose(Jv[0, :, k], (qd_plus - qd_minus) / (2 * step), atol=1e-8)


def test_mbfg_simulate_takes_a_urdf_and_starts_at_its_slider_coordinate(capsys, tmp_path):
    out = tmp_path / "arm.csv"
    assert main(["simulate", str(ARM), "--duration", "0.05", "--dt", "0.001", "--init", "slide=0.1", "shoulder=0.3",
                 "--quiet", "--out", str(out)]) == 0
    header, first = out.read_text().splitlines()[:2]
    assert header == "t,shoulder,slide,wrist"
    assert [float(v) for v in first.split(",")] == pytest.approx([0.0, 0.3, 0.1, 0.0], abs=1e-12)
