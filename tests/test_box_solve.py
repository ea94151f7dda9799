"""The exact box-constrained quadratic (mbfg.box and its compiled version in the linearized horizon) against
scipy's BVLS (Stark & Parker 1995) and against the KKT conditions of the box.

``min 0.5 x^T H x - eta^T x, lo <= x <= hi`` is the least squares ``min 0.5 |L^T x - L^-1 eta|^2`` with
H = L L^T (Cholesky), which ``scipy.optimize.lsq_linear(method="bvls")`` solves independently.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import optimize

from mbfg._jax import jax
from mbfg.box import box_qp, kkt_violation
from mbfg.errors import MbfgError
from mbfg.graphs.control_linearized import box_qp_jax

PROBLEMS = 2000
OPTIMAL = 1e-9  # objective above BVLS's, relative to the objective's scale
KKT = 1e-9  # gradient components, relative to the terms that make them up


def bvls(H: np.ndarray, eta: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """scipy's BVLS on the least-squares form; components with ``lo == hi`` (which scipy refuses) are
    substituted first."""
    fixed = lo == hi
    x = np.where(fixed, lo, 0.0)
    free = ~fixed
    if free.any():
        H_f, eta_f = H[np.ix_(free, free)], eta[free] - H[np.ix_(free, fixed)] @ x[fixed]
        L = np.linalg.cholesky(H_f)
        x[free] = optimize.lsq_linear(L.T, np.linalg.solve(L, eta_f), bounds=(lo[free], hi[free]), method="bvls",
                                      tol=1e-15).x
    return x


def objective(H: np.ndarray, eta: np.ndarray, x: np.ndarray) -> float:
    return float(0.5 * x @ H @ x - eta @ x)


def random_problem(rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    """A random strictly convex box QP of 2-6 unknowns: sides at random distances, some infinite, some at 0
    (the start on a bound, as an LM step's box has it for a parameter on its bound)."""
    n = int(rng.integers(2, 7))
    root = rng.normal(size=(n, n))
    H = root @ root.T + rng.uniform(0.01, 1.0) * np.eye(n)
    eta = rng.normal(size=n) * rng.uniform(0.5, 5.0)
    lo, hi = -rng.uniform(0.0, 2.0, n), rng.uniform(0.0, 2.0, n)
    lo[rng.uniform(size=n) < 0.15] = -np.inf
    hi[rng.uniform(size=n) < 0.15] = np.inf
    lo[rng.uniform(size=n) < 0.1] = 0.0
    hi[rng.uniform(size=n) < 0.1] = 0.0
    return H, eta, lo, hi


def degenerate_problems() -> list[tuple[str, tuple[np.ndarray, ...]]]:
    """Cases an active set can trip on, each (name, (H, eta, lo, hi))."""
    H2 = np.array([[2.0, 1.0], [1.0, 2.0]])
    H3 = np.array([[4.0, 1.0, 0.5], [1.0, 3.0, 0.2], [0.5, 0.2, 2.0]])
    inf = np.inf
    cases = [
        # Two identical components leave their box at the same step length (a tie in the ratio test).
        ("tie in the blocking step", (H2, np.array([6.0, 6.0]), np.array([-1.0, -1.0]), np.array([1.0, 1.0]))),
        # The unconstrained minimizer lies exactly on a bound: that multiplier is zero.
        ("minimizer exactly on a bound", (H3, H3 @ np.array([1.0, -0.5, 0.25]), np.array([-2.0, -0.5, -2.0]),
                                          np.array([1.0, 2.0, 2.0]))),
        # Every component pushed out of its box, with opposite signs.
        ("all bounds active", (H3, np.array([20.0, -20.0, 20.0]), -np.ones(3), np.ones(3))),
        # No bound at all.
        ("infinite sides only", (H3, np.array([1.0, 2.0, 3.0]), np.full(3, -inf), np.full(3, inf))),
        # One side infinite per component.
        ("half-infinite boxes", (H3, np.array([-9.0, 9.0, 1.0]), np.array([-inf, 0.0, -0.1]),
                                 np.array([0.5, inf, inf]))),
        # The start (0) on both of a component's sides: it is fixed there.
        ("a fixed component", (H3, np.array([3.0, -4.0, 5.0]), np.array([-1.0, 0.0, -1.0]),
                               np.array([1.0, 0.0, 1.0]))),
        # A fixed component away from the start.
        ("a fixed component off the start", (H3, np.array([3.0, -4.0, 5.0]), np.array([-1.0, 0.7, -1.0]),
                                             np.array([1.0, 0.7, 1.0]))),
        # Every side through the start: the answer is 0 whatever the multipliers say.
        ("a box of one point", (H2, np.array([1.0, -1.0]), np.zeros(2), np.zeros(2))),
        # The start on a bound whose multiplier says to leave it.
        ("start on a bound to release", (H2, np.array([-3.0, 3.0]), np.array([0.0, -1.0]), np.array([2.0, 0.0]))),
        # A nearly singular H (condition number ~1e8).
        ("ill-conditioned", (np.array([[1.0, 1.0 - 1e-8], [1.0 - 1e-8, 1.0]]), np.array([1.0, 0.5]),
                             np.array([-10.0, -10.0]), np.array([10.0, 10.0]))),
    ]
    return cases


def assert_kkt(H: np.ndarray, eta: np.ndarray, lo: np.ndarray, hi: np.ndarray, x: np.ndarray, what: str) -> None:
    """The box's KKT conditions at x: inside the box, the gradient g = H x - eta zero on free components,
    g >= 0 (the multiplier's sign) on a component at its lower bound, g <= 0 at its upper."""
    assert np.all(lo <= x) and np.all(x <= hi), (what, x, lo, hi)
    g = H @ x - eta
    scale = np.abs(H) @ np.abs(x) + np.abs(eta) + 1e-300
    at_lo, at_hi = x == lo, x == hi
    free = ~at_lo & ~at_hi
    assert np.all(np.abs(g[free]) <= KKT * scale[free]), (what, "free gradient", g, x)
    assert np.all(g[at_lo & ~at_hi] >= -KKT * scale[at_lo & ~at_hi]), (what, "lower multiplier", g, x)
    assert np.all(g[at_hi & ~at_lo] <= KKT * scale[at_hi & ~at_lo]), (what, "upper multiplier", g, x)
    assert kkt_violation(H, eta, lo, hi, x) <= KKT, (what, kkt_violation(H, eta, lo, hi, x))


def assert_optimal(H: np.ndarray, eta: np.ndarray, lo: np.ndarray, hi: np.ndarray, x: np.ndarray,
                   what: str) -> None:
    """x is no worse than BVLS's point (relative to the objective's scale) and meets the KKT conditions."""
    reference = bvls(H, eta, lo, hi)
    scale = 0.5 * abs(reference @ H @ reference) + abs(eta @ reference) + 1e-300
    assert objective(H, eta, x) <= objective(H, eta, reference) + OPTIMAL * scale, (what, x, reference)
    assert_kkt(H, eta, lo, hi, x, what)


def test_the_issues_2d_case_holds_the_second_component_on_its_upper_bound():
    """H = [[2.745, 1.056], [1.056, 4.129]], eta = [5.11, 1.89], 0 <= x1 <= 0.1, x0 <= 0.8: the unconstrained
    minimizer (1.869, -0.020) leaves both boxes, and pinning both where they leave gives (0.8, 0), x1 on its
    lower bound. With x0 held at 0.8 the quadratic's minimum in x1 is (1.89 - 1.056 * 0.8) / 4.129 = 0.253, so
    x1's multiplier at 0 has the wrong sign: the optimum is (0.8, 0.1), x1 on its upper bound."""
    H = np.array([[2.745, 1.056], [1.056, 4.129]])
    eta = np.array([5.11, 1.89])
    lo, hi = np.array([-1.0, 0.0]), np.array([0.8, 0.1])
    result = box_qp(H, eta, lo, hi)
    assert result.optimal and np.array_equal(result.x, [0.8, 0.1]), result
    assert result.at_upper.tolist() == [True, True]
    pinned = np.array([0.8, 0.0])  # where pinning every leaving component ends
    assert (H @ pinned - eta)[1] < 0  # its multiplier at x1's lower bound has the wrong sign
    # 0.5 x^T H x - eta^T x by hand: -3.293475 at the optimum, -3.2096 where pinning ends.
    assert objective(H, eta, result.x) == pytest.approx(-3.293475, rel=1e-12)
    assert objective(H, eta, pinned) == pytest.approx(-3.2096, rel=1e-12)
    np.testing.assert_allclose(result.x, bvls(H, eta, lo, hi), atol=1e-12)
    x, optimal = jax.jit(box_qp_jax)(H, eta, lo, hi)
    assert bool(optimal) and np.array_equal(np.asarray(x), [0.8, 0.1])


def test_box_qp_is_bvls_optimal_and_meets_the_kkt_conditions_on_random_problems():
    rng = np.random.default_rng(52)
    changes = []
    for i in range(PROBLEMS):
        H, eta, lo, hi = random_problem(rng)
        result = box_qp(H, eta, lo, hi)
        assert result.optimal, i
        assert_optimal(H, eta, lo, hi, result.x, f"problem {i}")
        changes.append(result.iterations)
    print(f"\nbox_qp: {PROBLEMS} problems, working-set changes mean {np.mean(changes):.2f}, max {max(changes)}")


@pytest.mark.parametrize("name, problem", degenerate_problems(), ids=[n for n, _ in degenerate_problems()])
def test_box_qp_is_bvls_optimal_on_degenerate_problems(name, problem):
    H, eta, lo, hi = problem
    result = box_qp(H, eta, lo, hi)
    assert result.optimal, name
    assert_optimal(H, eta, lo, hi, result.x, name)
    x, optimal = jax.jit(box_qp_jax)(H, eta, lo, hi)
    assert bool(optimal), name
    assert_optimal(H, eta, lo, hi, np.asarray(x), f"compiled: {name}")


def test_box_qp_from_a_start_on_its_bounds_is_the_same_optimum():
    """A start (x0) with components on their bounds begins with them held; the result is still BVLS's."""
    rng = np.random.default_rng(7)
    for i in range(200):
        H, eta, lo, hi = random_problem(rng)
        x0 = np.where(rng.uniform(size=lo.shape) < 0.5, lo, hi)
        x0 = np.where(np.isfinite(x0), x0, 0.0)
        result = box_qp(H, eta, lo, hi, x0=x0)
        assert result.optimal, i
        assert_optimal(H, eta, lo, hi, result.x, f"start on bounds {i}")


def test_compiled_box_qp_is_bvls_optimal_and_meets_the_kkt_conditions_on_random_problems():
    """The compiled version (fixed shapes, bounded iterations) against BVLS, not against :func:`box_qp`."""
    rng = np.random.default_rng(520)
    compiled = jax.jit(box_qp_jax)  # one program per size
    for i in range(PROBLEMS):
        H, eta, lo, hi = random_problem(rng)
        x, optimal = compiled(H, eta, lo, hi)
        assert bool(optimal), i
        assert_optimal(H, eta, lo, hi, np.asarray(x), f"compiled problem {i}")


def test_bad_boxes_are_refused_by_name():
    H = np.eye(2)
    with pytest.raises(MbfgError, match=r"components \[1\] need lo <= hi"):
        box_qp(H, np.ones(2), np.array([0.0, 1.0]), np.array([1.0, 0.0]))
    with pytest.raises(MbfgError, match="H must be \\(n, n\\)"):
        box_qp(np.eye(3), np.ones(2), np.zeros(2), np.ones(2))
    with pytest.raises(MbfgError, match="must be finite"):
        box_qp(H, np.array([np.nan, 1.0]), np.zeros(2), np.ones(2))
