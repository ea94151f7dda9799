"""Inverse dynamics of URDF trees (mbfg.inverse_dynamics): the recursive Newton-Euler torques against MuJoCo's
``mj_inverse`` on the same URDF (an independent implementation), and the regressor Y(q, qd, qdd) against the
torques: Y @ pi == tau, and Y is d tau / d pi (finite differences in pi)."""

from __future__ import annotations

from pathlib import Path

import mujoco
import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from mbfg.errors import MbfgError
from mbfg.inverse_dynamics import inverse_dynamics, regressor
from mbfg.kinematic_tree import load_tree, moved_parameters, standard_parameters, tree_from_string

PANDA = Path(__file__).resolve().parents[1] / "datasets" / "panda.urdf"
SAMPLES = 6  # one sample count in every call: the compiled programs are keyed by shape

#: A branched tree: a revolute chain, a prismatic branch on the first link, a link fixed to a moving link
#: (merged into it) and one fixed to the base (dropped); full inertia tensors, origins with rotations and
#: an axis that is not a unit vector.
BRANCHED = """<robot name="branched">
  <link name="base"/>
  <link name="plate"><inertial><mass value="3"/><inertia ixx="1" ixy="0" ixz="0" iyy="1" iyz="0" izz="1"/></inertial></link>
  <link name="a"><inertial><origin xyz="0.05 0.02 0.1" rpy="0.1 -0.2 0.3"/><mass value="2.0"/>
    <inertia ixx="0.03" ixy="0.002" ixz="-0.003" iyy="0.04" iyz="0.001" izz="0.05"/></inertial></link>
  <link name="b"><inertial><origin xyz="0.2 -0.01 0.03"/><mass value="1.2"/>
    <inertia ixx="0.01" ixy="-0.001" ixz="0.002" iyy="0.02" iyz="0.0015" izz="0.025"/></inertial></link>
  <link name="tool"><inertial><origin xyz="0.02 0.03 -0.01" rpy="0.3 0.2 0.1"/><mass value="0.5"/>
    <inertia ixx="0.002" ixy="0.0001" ixz="0" iyy="0.003" iyz="-0.0002" izz="0.004"/></inertial></link>
  <link name="c"><inertial><origin xyz="0 0.05 0.02"/><mass value="0.7"/>
    <inertia ixx="0.006" ixy="0.0005" ixz="0.0004" iyy="0.005" iyz="0.0003" izz="0.007"/></inertial></link>
  <joint name="weld" type="fixed"><parent link="base"/><child link="plate"/><origin xyz="0 0 0.1"/></joint>
  <joint name="j1" type="revolute"><parent link="plate"/><child link="a"/><origin xyz="0 0 0.2" rpy="0 0 0.4"/>
    <axis xyz="0 0 1"/><limit lower="-3" upper="3" effort="50" velocity="3"/></joint>
  <joint name="j2" type="continuous"><parent link="a"/><child link="b"/><origin xyz="0.1 0.05 0.3" rpy="1.2 0.3 -0.5"/>
    <axis xyz="0 2 1"/></joint>
  <joint name="mount" type="fixed"><parent link="b"/><child link="tool"/><origin xyz="0.35 0 0" rpy="0 0.5 0"/></joint>
  <joint name="j3" type="prismatic"><parent link="a"/><child link="c"/><origin xyz="-0.1 0 0.15" rpy="0.2 0 0"/>
    <axis xyz="1 1 0"/><limit lower="-0.2" upper="0.2" effort="100" velocity="1"/></joint>
</robot>
"""


def _states(n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return (rng.uniform(-2.5, 2.5, (SAMPLES, n)), rng.uniform(-2.0, 2.0, (SAMPLES, n)),
            rng.uniform(-5.0, 5.0, (SAMPLES, n)))


def _mujoco_inverse(model: mujoco.MjModel, q: np.ndarray, qd: np.ndarray, qdd: np.ndarray) -> np.ndarray:
    """qfrc_inverse of each sample: M(q) qdd + c(q, qd) + g(q), with no joint limits, damping or armature."""
    model.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_CONSTRAINT  # joint limits are not dynamics
    data = mujoco.MjData(model)
    out = []
    for k in range(len(q)):
        data.qpos[:], data.qvel[:], data.qacc[:] = q[k], qd[k], qdd[k]
        mujoco.mj_inverse(model, data)
        out.append(data.qfrc_inverse.copy())
    return np.array(out)


@pytest.fixture(scope="module")
def panda():
    tree = load_tree(PANDA)
    q, qd, qdd = _states(tree.n, seed=1)
    return tree, (q, qd, qdd), inverse_dynamics(tree, q, qd, qdd), regressor(tree, q, qd, qdd)


def test_rnea_torques_equal_mujoco_mj_inverse_on_the_panda(panda):
    tree, (q, qd, qdd), tau, _ = panda
    model = mujoco.MjModel.from_xml_path(str(PANDA))
    assert model.nv == tree.n == 7
    reference = _mujoco_inverse(model, q, qd, qdd)
    assert np.abs(tau - reference).max() <= 1e-9 * np.abs(reference).max()


def test_rnea_torques_equal_mujoco_on_a_branched_tree_with_prismatic_and_fixed_joints():
    tree = tree_from_string(BRANCHED)
    assert tree.joints == ("j1", "j2", "j3") and tree.parent.tolist() == [-1, 0, 0]
    q, qd, qdd = _states(tree.n, seed=2)
    q[:, 2] *= 0.05  # a slide of a few centimetres
    model = mujoco.MjModel.from_xml_string(BRANCHED)
    assert [model.joint(k).name for k in range(model.njnt)] == list(tree.joints)
    reference = _mujoco_inverse(model, q, qd, qdd)
    tau = inverse_dynamics(tree, q, qd, qdd)
    assert np.abs(tau - reference).max() <= 1e-9 * np.abs(reference).max()


def test_regressor_times_standard_parameters_equals_rnea_torques(panda):
    tree, _, tau, Y = panda
    assert Y.shape == (SAMPLES, 7, 70)
    assert np.abs(Y @ tree.pi.ravel() - tau).max() <= 1e-12 * np.abs(tau).max()


def test_regressor_is_the_derivative_of_the_torques_in_the_parameters_finite_differences(panda):
    """tau is linear in pi: (tau(pi + h d) - tau(pi - h d)) / 2h == Y d for any direction d and step h."""
    tree, (q, qd, qdd), tau, Y = panda
    rng = np.random.default_rng(3)
    for h in (1e-3, 1.0):
        d = rng.normal(size=tree.pi.shape)
        plus = inverse_dynamics(tree, q, qd, qdd, pi=tree.pi + h * d)
        minus = inverse_dynamics(tree, q, qd, qdd, pi=tree.pi - h * d)
        assert np.abs((plus - minus) / (2 * h) - Y @ d.ravel()).max() <= 1e-8 * np.abs(Y @ d.ravel()).max()
        assert np.abs(plus - 2 * tau + minus).max() <= 1e-10 * np.abs(tau).max() * max(h, 1.0)  # no curvature


def test_standard_parameters_move_between_frames_as_the_parallel_axis_theorem_says():
    """A body moved into another frame and back is unchanged; its mass, CoM and CoM inertia move as a rigid body's."""
    rng = np.random.default_rng(4)
    A = rng.normal(size=(3, 3))
    I_com = A @ A.T + np.eye(3) * 0.1
    pi = standard_parameters(2.5, np.array([0.1, -0.2, 0.3]), I_com)
    T = np.eye(4)
    T[:3, :3] = Rotation.random(random_state=5).as_matrix()
    T[:3, 3] = [0.4, 0.5, -0.6]
    moved = moved_parameters(pi, T)
    c_new = T[:3, :3] @ np.array([0.1, -0.2, 0.3]) + T[:3, 3]
    assert np.allclose(moved, standard_parameters(2.5, c_new, T[:3, :3] @ I_com @ T[:3, :3].T), rtol=0, atol=1e-12)
    back = np.linalg.inv(T)
    assert np.allclose(moved_parameters(moved, back), pi, rtol=0, atol=1e-12)


@pytest.mark.parametrize("field, bad", [("q", np.zeros((SAMPLES, 3))), ("qdd", np.full((SAMPLES, 7), np.nan))])
def test_bad_states_are_refused_naming_the_argument(panda, field, bad):
    tree, (q, qd, qdd), _, _ = panda
    given = {"q": q, "qd": qd, "qdd": qdd, field: bad}
    with pytest.raises(MbfgError, match=f"^{field}: "):
        inverse_dynamics(tree, given["q"], given["qd"], given["qdd"])
