"""Convergence only where the point is stationary: the Gauss-Newton check of mbfg.solvers against the exact
least-squares solution (numpy's lstsq) of ill-conditioned linear problems, and the rigid-joint pendulum whose
calibration stalled at a cost a thousand times its minimum and reported it converged."""

from __future__ import annotations

import gtsam
import numpy as np
import pytest

from mbfg.calibration_options import CalibrationOptions
from mbfg.lm_config import LMConfig
from mbfg.lm_systems import OrdinarySystem
from mbfg.solvers import LAMBDA_INITIAL, bounded_levenberg_marquardt, gauss_newton_check

KEY = gtsam.symbol("p", 0)


def linear_graph(A: np.ndarray, b: np.ndarray) -> gtsam.NonlinearFactorGraph:
    """The cost 0.5 |A x - b|^2 as one factor on a Vector variable."""
    def error(this: gtsam.CustomFactor, values: gtsam.Values, H: list[np.ndarray] | None) -> np.ndarray:
        if H is not None:
            H[0] = A
        return A @ values.atVector(this.keys()[0]) - b

    graph = gtsam.NonlinearFactorGraph()
    graph.add(gtsam.CustomFactor(gtsam.noiseModel.Unit.Create(A.shape[0]), [KEY], error))
    return graph


def ill_conditioned(weak: float) -> tuple[np.ndarray, np.ndarray, gtsam.Values]:
    """A 3 x 2 problem with singular values 1 and ``weak`` (equal column norms, so Marquardt's scaling leaves the
    conditioning as it is) and a residual 0.1 out of its range, started where the rest of the residual lies along
    the weak direction: the cost is 0.505 there and 0.005 at the solution, and each column's cosine with the
    residual is about ``weak``."""
    U = np.linalg.qr(np.random.default_rng(1).standard_normal((3, 3)))[0]
    V = np.array([[1.0, 1.0], [1.0, -1.0]]) / np.sqrt(2.0)
    A = U[:, :2] @ np.diag([1.0, weak]) @ V.T
    x_star = np.array([0.3, -0.2])
    b = A @ x_star + 0.1 * U[:, 2]
    values = gtsam.Values()
    values.insert(KEY, x_star - V[:, 1] / weak)  # A (x0 - x*) = -U[:, 1]: the weak left singular vector
    return A, b, values


@pytest.mark.parametrize("damping_update", ["tenfold", "nielsen"])
def test_a_small_damped_step_in_an_ill_conditioned_problem_is_not_convergence(damping_update: str) -> None:
    """Singular values 1 and 1e-5: a step damped by lam = 1e-5 of the diagonal moves 1e-5 / (1e-10 + 1e-5) of
    the way along the weak direction, lowering the cost 0.5 by 2e-5 of it, below relative_tol 1e-4, and the
    columns' cosines are 1e-5, below its square root: both tests held, and the solve used to stop there,
    converged at cost 0.505, a hundred times its minimum. The Gauss-Newton step predicts the whole cost away; the solve takes it and converges
    at lstsq's solution."""
    A, b, values = ill_conditioned(1e-5)
    result = bounded_levenberg_marquardt(linear_graph(A, b), values, quiet=True,
                                         config=LMConfig(relative_tol=1e-4, damping_update=damping_update))
    first = result.history[1]
    assert first["lam"] <= LAMBDA_INITIAL and (result.history[0]["cost"] - first["cost"]) < 1e-4 * first["cost"]
    assert result.history[1]["gradient"] < 1e-2  # the cosine test alone would have passed here
    assert result.status == "converged", result.message
    # x along the weak direction is determined to 1e-5 times less than the cost: compare in the data's metric.
    x = result.values.atVector(KEY)
    assert np.linalg.norm(A @ (x - np.linalg.lstsq(A, b, rcond=None)[0])) < 1e-6
    assert result.history[-1]["cost"] == pytest.approx(0.005, rel=1e-9)


def test_an_iteration_limit_at_such_a_stall_is_not_converged_and_says_why() -> None:
    """The same stall with no iteration left to take the Gauss-Newton step: not converged, and the message
    names the stall and the decrease the Gauss-Newton step predicts."""
    A, b, values = ill_conditioned(1e-5)
    result = bounded_levenberg_marquardt(linear_graph(A, b), values, quiet=True,
                                         config=LMConfig(relative_tol=1e-4, max_iterations=1))
    assert result.status == "not_converged" and not result.converged, result.message
    assert "stalled at iteration 1" in result.message and "Gauss-Newton step predicts a decrease of 0.99 " in \
        result.message, result.message
    assert result.history[-1]["cost"] > 0.5  # it stayed where the damping held it


def test_a_well_conditioned_minimum_still_converges_without_an_extra_iteration() -> None:
    """Singular values 1 and 0.5: the LM reaches lstsq's solution and the check agrees at once (the Gauss-Newton
    step there predicts nothing more), with as many linearizations as without the check: the first step at
    lam = 1e-5 lands within 1e-5 of the solution, the second's decrease is below relative_tol, and the third
    linearization confirms."""
    A, b, values = ill_conditioned(0.5)
    result = bounded_levenberg_marquardt(linear_graph(A, b), values, quiet=True, config=LMConfig(relative_tol=1e-4))
    assert result.status == "converged" and "Gauss-Newton step predicts a decrease of" in result.message, result
    assert result.iterations == 2, [row["cost"] for row in result.history]
    np.testing.assert_allclose(result.values.atVector(KEY), np.linalg.lstsq(A, b, rcond=None)[0], atol=1e-6)


def stiff_valley(stiffness: float) -> gtsam.NonlinearFactorGraph:
    """The cost 0.5 (x^2 + M^2 (y - x^2)^2 + 0.1^2): a reading of x, a stiff row (M = ``stiffness``) holding the
    point on the parabola y = x^2, as a joint row holds two bodies, and a residual of 0.1 that nothing explains;
    its minimum is 0.005 at the origin."""
    def error(this: gtsam.CustomFactor, values: gtsam.Values, H: list[np.ndarray] | None) -> np.ndarray:
        x, y = values.atVector(this.keys()[0])
        if H is not None:
            H[0] = np.array([[1.0, 0.0], [-2.0 * stiffness * x, stiffness], [0.0, 0.0]])
        return np.array([x, stiffness * (y - x * x), 0.1])

    graph = gtsam.NonlinearFactorGraph()
    graph.add(gtsam.CustomFactor(gtsam.noiseModel.Unit.Create(3), [KEY], error))
    return graph


def newton_check_at(graph: gtsam.NonlinearFactorGraph, point: tuple[float, float]):
    values = gtsam.Values()
    values.insert(KEY, np.array(point))
    system = OrdinarySystem(graph, values, {})
    linear, diag = system.linearize(values)
    return gauss_newton_check(system, linear, diag, values, system.error(values), linear.error(system.zeros), {},
                              1e-3)


def test_a_gauss_newton_step_too_long_for_a_stiff_row_is_no_proof_of_a_minimum() -> None:
    """At (1, 1) on the valley of M = 1e3 the linearization predicts 99 % of the cost away (the step (-1, -2)), but
    the stiff row's curvature makes every fraction down to 1/8 of it cost more: along the step the cost is
    0.5 ((1 - a)^2 + M^2 a^4 + 0.01), lower only for a < (2 / M^2)^(1/3) = 0.0126. The check used to call the
    point stationary (a kink the linearization does not see); the fraction 1/128 lowers the cost by
    (1 - (127/128)^2 - 1e6 / 128^4) / 1.01 = 1.17 %, so it is not. At the minimum it is stationary."""
    graph = stiff_valley(1e3)
    check = newton_check_at(graph, (1.0, 1.0))
    assert not check.stationary and check.predicted == pytest.approx(1.0 / 1.01), check.words
    expected = (1.0 - (127 / 128) ** 2 - 1e6 / 128**4) / 1.01
    assert check.realized == pytest.approx(expected, rel=1e-12) and "0.0078125 of it" in check.words, check.words
    assert newton_check_at(graph, (0.0, 0.0)).stationary


def test_a_calibration_at_rigid_joints_is_not_converged_where_the_damping_stalled_it() -> None:
    """The pendulum at rigid joint compliance (mbfg.trees.RIGID), 0.3 s of readings with 1e-3 rad noise, J and b
    freed from 1.25 J and 0.5 b, no soft start. The joints' rows weigh 1e10 times the readings', and the LM
    damped by lam >= 1e-8 of the diagonal barely moves the states across them: at iteration 3 the cost 12 fell by
    less than relative_tol, the cosines were 7e-7, and the solve reported converged with J 34 % off. A
    Gauss-Newton step from there lowers the actual cost by 88 %: the solve goes on, and where its iterations end
    it says it stalled and did not converge."""
    from mbfg.calibration import calibrate
    from mbfg.logs import Log
    from mbfg.models import pendulum
    from mbfg.spook import simulate, unwrap_angles
    from mbfg.trees import RIGID

    model = pendulum().with_parameters({"eps_lin": RIGID[0], "eps_rot": RIGID[1]})
    traj = simulate(model, 0.3, 1e-3, initial=model.initial_state({"theta": 2.5}))
    y = unwrap_angles(model, traj.observations) + 1e-3 * np.random.default_rng(0).standard_normal(
        traj.observations.shape)
    log = Log(traj.t, y, np.zeros((len(traj.t), 0)), model.observations, model.controls, "synthetic")
    truth = model.parameters.numpy_values()
    start = model.with_parameters({"J": 1.25 * truth["J"], "b": 0.5 * truth["b"]})
    result = calibrate(start, log, free=["J", "b"], options=CalibrationOptions(covariance=False))
    assert not result.converged and result.status == "not_converged", result.message
    assert "stalled at iteration" in result.message and "Gauss-Newton step predicts" in result.message, result.message
    stalled_at = int(result.message.split("stalled at iteration ")[1].split(":")[0])
    costs = [row["cost"] for row in result.history]
    # The stall was no minimum: the iterations after it went a hundred times lower.
    assert costs[-1] < 1e-2 * costs[stalled_at], costs
