"""The box-constrained Levenberg-Marquardt of mbfg.solvers against scipy on small problems with known optima."""

from __future__ import annotations

import gtsam
import numpy as np
import pytest
from scipy import optimize

from mbfg.errors import MbfgError
from mbfg.lm_config import LMConfig
from mbfg.solvers import bounded_levenberg_marquardt

KEY = gtsam.symbol("p", 0)


def rosenbrock(x: np.ndarray) -> np.ndarray:
    """Rosenbrock's function as two residuals; its minimum is 0 at (1, 1)."""
    return np.array([10.0 * (x[1] - x[0] ** 2), 1.0 - x[0]])


def rosenbrock_jacobian(x: np.ndarray) -> np.ndarray:
    return np.array([[-20.0 * x[0], 10.0], [-1.0, 0.0]])


def graph_of(residual, jacobian) -> gtsam.NonlinearFactorGraph:
    def error(this: gtsam.CustomFactor, values: gtsam.Values, H: list[np.ndarray] | None) -> np.ndarray:
        x = values.atVector(this.keys()[0])
        if H is not None:
            H[0] = jacobian(x)
        return residual(x)

    graph = gtsam.NonlinearFactorGraph()
    graph.add(gtsam.CustomFactor(gtsam.noiseModel.Unit.Create(2), [KEY], error))
    return graph


def start(x: list[float]) -> gtsam.Values:
    values = gtsam.Values()
    values.insert(KEY, np.array(x))
    return values


@pytest.mark.parametrize("damping_update", ["tenfold", "nielsen"])
def test_unbounded_rosenbrock_reaches_its_minimum(damping_update: str) -> None:
    result = bounded_levenberg_marquardt(graph_of(rosenbrock, rosenbrock_jacobian), start([-1.2, 1.0]), quiet=True,
                                         config=LMConfig(max_iterations=200, relative_tol=1e-12,
                                                         damping_update=damping_update))
    np.testing.assert_allclose(result.values.atVector(KEY), [1.0, 1.0], atol=1e-6)
    assert result.converged


@pytest.mark.parametrize("damping_update", ["tenfold", "nielsen"])
def test_box_constrained_rosenbrock_matches_scipy_trf(damping_update: str) -> None:
    """x0 <= 0.5 cuts the valley: the optimum is on that bound, where scipy's trust-region reflective puts it."""
    lower, upper = np.array([-2.0, -2.0]), np.array([0.5, 2.0])
    peer = optimize.least_squares(rosenbrock, [-1.2, 1.0], jac=rosenbrock_jacobian, bounds=(lower, upper),
                                  method="trf", xtol=1e-14, ftol=1e-14, gtol=1e-14)
    result = bounded_levenberg_marquardt(graph_of(rosenbrock, rosenbrock_jacobian), start([-1.2, 1.0]),
                                         {KEY: (lower, upper)}, quiet=True,
                                         config=LMConfig(max_iterations=200, relative_tol=1e-12,
                                                         damping_update=damping_update))
    x = result.values.atVector(KEY)
    assert x[0] == 0.5  # exactly on the bound, not one ulp outside
    np.testing.assert_allclose(x, peer.x, atol=1e-6)
    costs = [row["cost"] for row in result.history]
    assert all(b <= a for a, b in zip(costs, costs[1:]))  # only cost-lowering steps are accepted


def test_options_that_are_not_an_lm_config_are_refused_by_name() -> None:
    with pytest.raises(MbfgError, match="config: expected an mbfg.LMConfig .*, got dict"):
        bounded_levenberg_marquardt(graph_of(rosenbrock, rosenbrock_jacobian), start([0.0, 0.0]),
                                    config={"max_iterations": 3}, quiet=True)  # type: ignore[arg-type]


def kinked(x: np.ndarray) -> np.ndarray:
    """A residual whose slope grows 101-fold past x0 = 1, as an impulse residual's does where a contact
    engages; its minimum is 0 at x0 = 103/101, just past the kink, and x1 = 0."""
    return np.array([x[0] - 3.0 + 100.0 * max(x[0] - 1.0, 0.0), x[1]])


def kinked_jacobian(x: np.ndarray) -> np.ndarray:
    return np.array([[1.0 + (100.0 if x[0] > 1.0 else 0.0), 0.0], [0.0, 1.0]])


def test_a_step_across_a_kink_is_halved_along_its_direction_before_the_damping_grows() -> None:
    """From x0 = 0 the Gauss-Newton step of the gentle side lands at x0 = 3, far up the steep side (cost 2e4
    against 4.5); halved twice it stops at 0.75, short of the kink, and lowers the cost. Raising the damping
    instead shortens the step as well, but only after six rejected solves, and leaves the damping at 1."""
    graph, lower = graph_of(kinked, kinked_jacobian), 1e-5
    halved = bounded_levenberg_marquardt(graph, start([0.0, 0.0]), quiet=True, config=LMConfig(max_iterations=20,
                                                                                               relative_tol=1e-12,
                                                                                               lambda_initial=lower,
                                                                                               backtracking=8))
    np.testing.assert_allclose(halved.values.atVector(KEY), [103.0 / 101.0, 0.0], atol=1e-9)
    first = halved.history[1]
    assert first["alpha"] == 0.25 and first["lam"] == lower, first
    damped = bounded_levenberg_marquardt(graph, start([0.0, 0.0]), quiet=True, config=LMConfig(max_iterations=20,
                                                                                               relative_tol=1e-12,
                                                                                               lambda_initial=lower,
                                                                                               backtracking=0))
    assert damped.history[1]["alpha"] == 1.0 and damped.history[1]["lam"] == pytest.approx(1.0), damped.history[1]
    assert halved.iterations <= damped.iterations, (halved.iterations, damped.iterations)


# --------------------------------------------------------------------------- the exact bounded step


def test_one_lm_step_on_a_linear_problem_is_the_bounded_least_squares_optimum_of_scipys_bvls() -> None:
    """Residual r(x) = A x - b over a bounded key (3 components) and an unbounded one (2): at a tiny damping
    one LM step solves the box-constrained linear least squares, so it lands on BVLS's optimum (with bounds
    active where pinning every component that leaves its box would not: for this draw that rule's step is 0.2
    away from the optimum). The unbounded key is eliminated first; the bounded key's box QP is solved on what
    remains."""
    rng = np.random.default_rng(1)
    bounded, other = gtsam.symbol("p", 1), gtsam.symbol("q", 1)
    A = rng.normal(size=(8, 5))
    b = rng.normal(size=8) * 4.0
    lower, upper = np.array([-0.3, 0.0, -0.2]), np.array([0.2, 0.1, 0.4])

    def error(this: gtsam.CustomFactor, values: gtsam.Values, H: list[np.ndarray] | None) -> np.ndarray:
        x = np.concatenate([values.atVector(bounded), values.atVector(other)])
        if H is not None:
            H[0], H[1] = A[:, :3], A[:, 3:]
        return A @ x - b

    graph = gtsam.NonlinearFactorGraph()
    graph.add(gtsam.CustomFactor(gtsam.noiseModel.Unit.Create(8), [bounded, other], error))
    values = gtsam.Values()
    values.insert(bounded, np.zeros(3))
    values.insert(other, np.zeros(2))
    inf = np.inf
    peer = optimize.lsq_linear(A, b, bounds=(np.r_[lower, -inf, -inf], np.r_[upper, inf, inf]), method="bvls",
                               tol=1e-15)
    result = bounded_levenberg_marquardt(graph, values, {bounded: (lower, upper)}, quiet=True,
                                         config=LMConfig(max_iterations=1, lambda_initial=1e-12))
    x = np.concatenate([result.values.atVector(bounded), result.values.atVector(other)])
    np.testing.assert_allclose(x, peer.x, atol=1e-9)
    assert np.sum((x[:3] == lower) | (x[:3] == upper)) >= 1, x  # a bound active, exactly on it


# --------------------------------------------------------------------------- the three outcomes


def test_a_nan_residual_fails_naming_the_factor() -> None:
    def nan_residual(x: np.ndarray) -> np.ndarray:
        return np.array([np.nan, x[1]])

    result = bounded_levenberg_marquardt(graph_of(nan_residual, rosenbrock_jacobian), start([0.0, 0.0]), quiet=True)
    assert result.status == "failed" and not result.converged and result.iterations == 0, result
    assert "the cost at the initial values is nan" in result.message
    assert "CustomFactor on p0" in result.message, result.message


def test_a_nan_jacobian_fails_naming_the_factor() -> None:
    result = bounded_levenberg_marquardt(graph_of(rosenbrock, lambda x: np.full((2, 2), np.nan)), start([0.0, 0.0]),
                                         quiet=True)
    assert result.status == "failed" and not result.converged, result
    assert "the Jacobian is not finite" in result.message and "CustomFactor on p0" in result.message, result.message


def test_no_decreasing_step_up_to_the_damping_limit_is_a_failure_not_convergence() -> None:
    """A Jacobian of the wrong sign: every damped step climbs, so none lowers the cost up to lambda_max. The
    old rule called this converged ("to the tolerance of the linearization"); the gradient is not small."""
    result = bounded_levenberg_marquardt(graph_of(rosenbrock, lambda x: -rosenbrock_jacobian(x)),
                                         start([-1.2, 1.0]), quiet=True)
    assert result.status == "failed" and not result.converged, result
    assert result.message.startswith("no damped step lowers the cost up to lambda_max"), result.message
    assert result.values.atVector(KEY).tolist() == [-1.2, 1.0]


def test_the_iteration_limit_is_not_convergence() -> None:
    result = bounded_levenberg_marquardt(graph_of(rosenbrock, rosenbrock_jacobian), start([-1.2, 1.0]), quiet=True,
                                         config=LMConfig(max_iterations=3))
    assert result.status == "not_converged" and not result.converged, result
    assert result.iterations == 3 and result.message.startswith("iteration limit 3"), result


def test_small_steps_are_not_convergence_while_the_projected_gradient_is_large() -> None:
    """A Jacobian 1e7 times too large (a units slip): every step is 1e7 times too short, so each lowers the
    cost by a relative 1e-7 or so, below relative_tol = 1e-6, at the smallest damping. Far from the minimum the
    projected gradient's cosine is of order 1, so the solve is not converged (the old rule stopped after the
    first such step as converged)."""
    result = bounded_levenberg_marquardt(graph_of(rosenbrock, lambda x: 1e7 * rosenbrock_jacobian(x)),
                                         start([-1.2, 1.0]), quiet=True,
                                         config=LMConfig(max_iterations=6, relative_tol=1e-6))
    costs = [row["cost"] for row in result.history]
    assert costs[1] < costs[0] and (costs[0] - costs[1]) / costs[0] < 1e-6, costs  # a small accepted step
    assert result.history[1]["gradient"] > 0.1, result.history[1]
    assert result.status == "not_converged" and result.iterations == 6, (result.status, result.message)


def test_a_minimum_on_a_bound_converges_with_its_multiplier_outward() -> None:
    """At the bounded Rosenbrock's optimum x0 = 0.5 the gradient along x0 is not zero (it points out of the
    box): the projected gradient leaves it out, and the solve converges there."""
    lower, upper = np.array([-2.0, -2.0]), np.array([0.5, 2.0])
    result = bounded_levenberg_marquardt(graph_of(rosenbrock, rosenbrock_jacobian), start([-1.2, 1.0]),
                                         {KEY: (lower, upper)}, quiet=True,
                                         config=LMConfig(max_iterations=200, relative_tol=1e-12))
    assert result.converged and result.status == "converged", result.message
    assert result.history[-1]["gradient"] <= 1e-6, result.history[-1]
