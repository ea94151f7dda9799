"""Inverse dynamics factor graph (seed 003 sections 5.3, 7.2) against MSC Adams and the closed form."""

from __future__ import annotations

import numpy as np
import pytest
from references import crank_trajectory, fourbar_inverse_torque, load_adams_torque

from mbfg import DataError, load_mbse_yaml
from mbfg.graphs import load_mbse_trajectory, solve_inverse_dynamics


@pytest.fixture(scope="module")
def fourbar_inverse(mbse_dir):
    mech = load_mbse_yaml(mbse_dir / "fourbars1-with-rel-angle.yaml")
    t, theta = load_mbse_trajectory(mbse_dir / "fourbars1-with-rel-angle-trajectory.txt")
    return mech, t, theta, solve_inverse_dynamics(mech, t, theta, ["theta1"], g=9.81)


def test_figure8_torque_matches_msc_adams_over_10_s(fourbar_inverse):
    """RMS error against the Adams torque (README: compare with minus its column) < 0.1 % of the peak."""
    _, t, _, result = fourbar_inverse
    adams = load_adams_torque()
    np.testing.assert_allclose(adams["t"], t, atol=1e-9)
    tau_adams = -adams["torque"]
    rms = np.sqrt(np.mean((result.forces[:, 0] - tau_adams) ** 2))
    peak = np.max(np.abs(tau_adams))
    print(f"\nRMS torque error vs Adams: {rms:.4f} N m = {100 * rms / peak:.4f} % of peak {peak:.2f} N m")
    assert rms < 1e-3 * peak


def test_torque_matches_the_closed_form_one_dof_inverse_dynamics(fourbar_inverse):
    _, t, _, result = fourbar_inverse
    tau = fourbar_inverse_torque(*crank_trajectory(t), g=9.81)
    rms = np.sqrt(np.mean((result.forces[:, 0] - tau) ** 2))
    print(f"\nRMS torque error vs closed form: {100 * rms / np.max(np.abs(tau)):.4f} % of peak")
    assert rms < 5e-4 * np.max(np.abs(tau))


def test_crank_tracking_error_below_1_mrad(fourbar_inverse):
    mech, _, theta, result = fourbar_inverse
    error = np.max(np.abs(result.q[:, 4] - theta[:, 0]))
    print(f"\ncrank tracking error: {1e3 * error:.2e} mrad")
    assert error < 1e-3
    assert max(np.max(np.abs(mech.phi(q))) for q in result.q) < 1e-8


def test_inverse_dynamics_staged_solves_converge(fourbar_inverse):
    *_, result = fourbar_inverse
    assert len(result.stage_iterations) == 4
    assert max(result.stage_iterations) < 10


def test_non_uniform_trajectory_time_is_reported(mbse_dir):
    mech = load_mbse_yaml(mbse_dir / "fourbars1-with-rel-angle.yaml")
    t = np.array([0.0, 0.005, 0.01, 0.02, 0.025])
    with pytest.raises(DataError, match="not uniform at row 3"):
        solve_inverse_dynamics(mech, t, np.zeros(5), [4])


def test_nan_in_trajectory_is_reported(mbse_dir):
    mech = load_mbse_yaml(mbse_dir / "fourbars1-with-rel-angle.yaml")
    theta = np.zeros(5)
    theta[2] = np.nan
    with pytest.raises(DataError, match="row 2"):
        solve_inverse_dynamics(mech, 0.005 * np.arange(5), theta, [4])


def test_malformed_trajectory_file_names_the_line(tmp_path):
    path = tmp_path / "traj.txt"
    path.write_text("% t angle\n0 0\n0.005 zero\n")
    with pytest.raises(DataError, match="line 3"):
        load_mbse_trajectory(path)
