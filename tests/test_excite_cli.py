"""``mbfg excite``: the written reference and controls are readable log-format files, and the controls are the
torques of mbfg.inverse_dynamics along the written angles (their rates and accelerations by finite differences);
bad options are named."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from mbfg.cli import main
from mbfg.inverse_dynamics import inverse_dynamics
from mbfg.kinematic_tree import load_tree
from mbfg.logs import read_log
from mbfg.urdf import load_urdf

PANDA = str(Path(__file__).resolve().parents[1] / "datasets" / "panda.urdf")


def test_written_controls_are_the_inverse_dynamics_of_the_written_trajectory(tmp_path: Path,
                                                                              capsys: pytest.CaptureFixture[str]) -> None:
    ref, controls = tmp_path / "ref.csv", tmp_path / "u.csv"
    code = main(["excite", PANDA, "--duration", "4", "--harmonics", "2", "--samples", "40", "--max-iterations", "10",
                 "--dt", "0.002", "--out-trajectory", str(ref), "--out-controls", str(controls)])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "condition number" in out and "(random Fourier start, seed 0)" in err
    tree = load_tree(PANDA)
    log = read_log(ref, tree.joints)
    np.testing.assert_allclose(log.t, np.arange(2001) * 0.002, atol=1e-12)
    motors = load_urdf(PANDA, motors=tree.joints)  # what 'mbfg simulate --controls' reads: its controls
    u = read_log(controls, observations=(), controls=motors.controls)
    h = 0.002
    q = log.y[1:-1]
    qd = (log.y[2:] - log.y[:-2]) / (2 * h)
    qdd = (log.y[2:] - 2 * log.y[1:-1] + log.y[:-2]) / h**2
    tau = inverse_dynamics(tree, q, qd, qdd)
    # central differences at h = 2 ms of harmonics below 1 Hz: relative errors ~ (2 pi h)^2 / 12 < 1e-4
    np.testing.assert_allclose(u.u[1:-1], tau, rtol=0, atol=2e-3 * np.abs(tau).max())


@pytest.mark.parametrize("argv, match", [
    (["--duration", "4", "--harmonics", "2", "--out-trajectory", "-", "--out-controls", "-"],
     "--out-trajectory and --out-controls: both are '-'"),
    (["--duration", "4", "--harmonics", "2", "--dt", "5"], "--dt 5: expected a step shorter than --duration 4"),
])
def test_bad_excite_options_are_named(argv: list[str], match: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["excite", PANDA, *argv]) == 2
    assert match in capsys.readouterr().err


def test_zero_harmonics_is_refused_by_the_parser(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["excite", PANDA, "--duration", "4", "--harmonics", "0"]) == 2
    assert "--harmonics: expected at least 1 harmonic, got 0" in capsys.readouterr().err


ARM2 = """<robot name="arm2"><link name="base"/>
  <link name="l1"><inertial><origin xyz="0.1 0 -0.05"/><mass value="1.0"/>
    <inertia ixx="0.004" ixy="0.0004" ixz="0.0002" iyy="0.006" iyz="0.0001" izz="0.005"/></inertial></link>
  <link name="l2"><inertial><origin xyz="0.08 0.01 0"/><mass value="0.6"/>
    <inertia ixx="0.002" ixy="0.0001" ixz="0" iyy="0.003" iyz="0.0002" izz="0.003"/></inertial></link>
  <joint name="j1" type="continuous"><parent link="base"/><child link="l1"/><axis xyz="0 1 0"/></joint>
  <joint name="j2" type="continuous"><parent link="l1"/><child link="l2"/><origin xyz="0.25 0 0"/>
    <axis xyz="0 1 0"/></joint>
</robot>"""


def _reference(t: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """q, q', q'' (len(t), 2) of a smooth two-joint motion [rad, rad/s, rad/s^2]."""
    w1, w2 = np.pi, 2 * np.pi
    q = np.c_[0.4 * np.sin(w1 * t), 0.2 + 0.3 * np.sin(w2 * t)]
    qd = np.c_[0.4 * w1 * np.cos(w1 * t), 0.3 * w2 * np.cos(w2 * t)]
    qdd = np.c_[-0.4 * w1**2 * np.sin(w1 * t), -0.3 * w2**2 * np.sin(w2 * t)]
    return q, qd, qdd


def test_simulate_replays_joint_torques_on_a_urdf_and_follows_the_motion_they_were_computed_for(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The torques of mbfg.inverse_dynamics (recursive Newton-Euler, exact rates and accelerations) along a motion,
    replayed by ``mbfg simulate ROBOT.urdf --controls`` (a motor on each joint its u_<joint> columns name): the
    Spook simulation follows the motion to within its discretization error, where the same robot without the
    torques falls far from it."""
    urdf = tmp_path / "arm2.urdf"
    urdf.write_text(ARM2)
    h, duration = 1e-3, 1.0
    t = np.arange(int(round(duration / h)) + 1) * h
    q, qd, qdd = _reference(t)
    # Torques held over each step [t_k, t_k + h): the mean of the step's two ends is first-order accurate.
    tau = inverse_dynamics(load_tree(urdf), q, qd, qdd)
    held = 0.5 * (tau[:-1] + tau[1:])
    controls = tmp_path / "tau.csv"
    np.savetxt(controls, np.c_[t[:-1], held], delimiter=",", header="t,u_j1,u_j2", comments="", fmt="%.10g")
    init = ["--init", f"j1={q[0, 0]}:{qd[0, 0]}", f"j2={q[0, 1]}:{qd[0, 1]}"]
    run = ["simulate", str(urdf), "--duration", str(duration), "--dt", str(h), *init, "--quiet"]
    assert main([*run, "--controls", str(controls), "--out", str(tmp_path / "replay.csv")]) == 0, capsys.readouterr()
    assert main([*run, "--out", str(tmp_path / "free.csv")]) == 0, capsys.readouterr()
    replay = read_log(tmp_path / "replay.csv", ["j1", "j2"])
    free = read_log(tmp_path / "free.csv", ["j1", "j2"])
    steps = len(replay.t)
    error = np.abs(replay.y - q[:steps]).max()
    fall = np.abs(free.y - q[:steps]).max()
    print(f"\nreplayed torques: {error:.3g} rad from the motion; without them {fall:.3g} rad")
    assert fall > 0.3 and error < 0.01, (error, fall)


def test_a_controls_file_of_a_urdf_must_name_its_joints(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    urdf = tmp_path / "arm2.urdf"
    urdf.write_text(ARM2)
    controls = tmp_path / "tau.csv"
    controls.write_text("t,u_j1,u_nope\n0,0,0\n")
    code = main(["simulate", str(urdf), "--duration", "0.01", "--dt", "0.001", "--controls", str(controls),
                 "--out", str(tmp_path / "out.csv"), "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and "u_nope names no moving joint" in err and "u_j1, u_j2" in err, err
    assert not (tmp_path / "out.csv").exists()
