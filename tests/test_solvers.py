"""The box-constrained Levenberg-Marquardt of mbfg.solvers against scipy on small problems with known optima."""

from __future__ import annotations

import gtsam
import numpy as np
import pytest
from scipy import optimize

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
    result = bounded_levenberg_marquardt(graph_of(rosenbrock, rosenbrock_jacobian), start([-1.2, 1.0]),
                                         max_iterations=200, relative_tol=1e-12, damping_update=damping_update,
                                         quiet=True)
    np.testing.assert_allclose(result.values.atVector(KEY), [1.0, 1.0], atol=1e-6)
    assert result.converged


@pytest.mark.parametrize("damping_update", ["tenfold", "nielsen"])
def test_box_constrained_rosenbrock_matches_scipy_trf(damping_update: str) -> None:
    """x0 <= 0.5 cuts the valley: the optimum is on that bound, where scipy's trust-region reflective puts it."""
    lower, upper = np.array([-2.0, -2.0]), np.array([0.5, 2.0])
    peer = optimize.least_squares(rosenbrock, [-1.2, 1.0], jac=rosenbrock_jacobian, bounds=(lower, upper),
                                  method="trf", xtol=1e-14, ftol=1e-14, gtol=1e-14)
    result = bounded_levenberg_marquardt(graph_of(rosenbrock, rosenbrock_jacobian), start([-1.2, 1.0]),
                                         {KEY: (lower, upper)}, max_iterations=200, relative_tol=1e-12,
                                         damping_update=damping_update, quiet=True)
    x = result.values.atVector(KEY)
    assert x[0] == 0.5  # exactly on the bound, not one ulp outside
    np.testing.assert_allclose(x, peer.x, atol=1e-6)
    costs = [row["cost"] for row in result.history]
    assert all(b <= a for a, b in zip(costs, costs[1:]))  # only cost-lowering steps are accepted


def test_unknown_damping_update_is_named() -> None:
    with pytest.raises(ValueError, match="damping_update must be 'tenfold' or 'nielsen', got 'fast'"):
        bounded_levenberg_marquardt(graph_of(rosenbrock, rosenbrock_jacobian), start([0.0, 0.0]),
                                    damping_update="fast", quiet=True)
