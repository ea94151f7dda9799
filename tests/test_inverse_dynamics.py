"""Inverse dynamics factor graph (Blanco-Claraco et al. (2021) sections 5.3, 7.2) against MSC Adams and the closed form."""

from __future__ import annotations

import numpy as np
import pytest
from references import crank_trajectory, fourbar_inverse_torque, load_adams_torque

from mbfg import DataError, load_mbse_yaml
from mbfg.graphs import inverse, load_mbse_trajectory, solve_inverse_dynamics


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
    assert result.converged and result.stage_converged == [True] * 4


def test_non_uniform_trajectory_time_is_reported(mbse_dir):
    mech = load_mbse_yaml(mbse_dir / "fourbars1-with-rel-angle.yaml")
    t = np.array([0.0, 0.005, 0.01, 0.02, 0.025])
    with pytest.raises(DataError, match=r"row 3 \(0-based\): time step is not uniform"):
        solve_inverse_dynamics(mech, t, np.zeros(5), [4])


def test_nan_in_trajectory_is_reported(mbse_dir):
    mech = load_mbse_yaml(mbse_dir / "fourbars1-with-rel-angle.yaml")
    theta = np.zeros(5)
    theta[2] = np.nan
    with pytest.raises(DataError, match=r"row 2 \(0-based\): non-finite"):
        solve_inverse_dynamics(mech, 0.005 * np.arange(5), theta, [4])


def test_malformed_trajectory_file_names_the_line(tmp_path):
    path = tmp_path / "traj.txt"
    path.write_text("% t angle\n0 0\n0.005 zero\n")
    with pytest.raises(DataError, match="line 3"):
        load_mbse_trajectory(path)


@pytest.mark.parametrize(
    ("bad_row", "needle"),
    [
        ("0.015 nan", "line 6: non-finite"),
        ("0.010 0.0003", "line 6: time 0.01 s is not after the previous row's 0.01 s"),
        ("0.016 0.0003", "line 6: time step is not uniform (0.006 s from the previous row, 0.005 s between"),
    ],
)
def test_trajectory_file_errors_name_the_file_and_its_line(tmp_path, bad_row, needle):
    """Line numbers are the file's (1-based, comment and blank lines counted), not the data rows'
    (the bad row is data row 3, 0-based)."""
    path = tmp_path / "crank.txt"
    path.write_text(f"% t theta1\n\n0.000 0.0\n0.005 0.0001\n0.010 0.0002\n{bad_row}\n")
    with pytest.raises(DataError) as raised:
        load_mbse_trajectory(path)
    message = str(raised.value)
    assert message.startswith(f"{path}: ") and needle in message, message


def test_trajectory_file_with_too_few_rows_is_named(tmp_path):
    path = tmp_path / "short.txt"
    path.write_text("% t theta1\n0.0 0.0\n0.005 0.0\n")
    with pytest.raises(DataError, match=r"short\.txt: 2 data row\(s\); at least 3"):
        load_mbse_trajectory(path)


def test_inverse_dynamics_stopped_by_its_iteration_limit_is_not_converged(mbse_dir):
    """At max_iterations=1 a stage that needs more steps says so (converged False); at the default
    every stage converges."""
    mech = load_mbse_yaml(mbse_dir / "fourbars1-with-rel-angle.yaml")
    t, theta = load_mbse_trajectory(mbse_dir / "fourbars1-with-rel-angle-trajectory.txt")
    t, theta = t[:40], theta[:40]
    full = solve_inverse_dynamics(mech, t, theta, ["theta1"], g=9.81)
    assert full.converged and full.stage_converged == [True] * 4
    one = solve_inverse_dynamics(mech, t, theta, ["theta1"], g=9.81, max_iterations=1)
    assert one.stage_iterations == [1, 1, 1, 1]
    cut = [stage for stage, n in enumerate(full.stage_iterations) if n > 1]
    assert cut, full.stage_iterations  # some stage needs more than one step, so the limit of 1 cuts it short
    assert not one.converged
    assert [one.stage_converged[stage] for stage in cut] == [False] * len(cut)


def test_gauss_newton_step_that_raises_the_cost_is_not_convergence():
    """r(x) = x^2 - 1 from x = 0.1: the undamped step overshoots to x = 5.05 and raises the cost,
    which must not count as converged; further steps reach x = 1."""
    import gtsam

    def residual(_: gtsam.CustomFactor, values: gtsam.Values, H: list | None) -> np.ndarray:
        x = values.atVector(1)[0]
        if H is not None:
            H[0] = np.array([[2.0 * x]])
        return np.array([x * x - 1.0])

    graph, values = gtsam.NonlinearFactorGraph(), gtsam.Values()
    graph.add(gtsam.CustomFactor(gtsam.noiseModel.Unit.Create(1), [1], residual))
    values.insert(1, np.array([0.1]))
    one = inverse.gauss_newton(graph, values, max_iterations=1)
    assert one.values.atVector(1)[0] == pytest.approx(5.05)
    assert one.cost > graph.error(values) and not one.converged
    solved = inverse.gauss_newton(graph, values, max_iterations=50)
    assert solved.converged and solved.values.atVector(1)[0] == pytest.approx(1.0, abs=1e-4)  # cost < 1e-10
