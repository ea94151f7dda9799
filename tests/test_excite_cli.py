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
