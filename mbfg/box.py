"""The exact minimizer of a strictly convex quadratic in a box: ``min 0.5 x^T H x - eta^T x, lo <= x <= hi``.

A primal active-set method (Nocedal & Wright, *Numerical Optimization*, 2006, Algorithm 16.3, specialised to
bounds; the same iteration as Stark & Parker's BVLS, 1995, on the normal equations). A working set W of
components held on a bound; each iteration solves the quadratic over the other components with those held, and

- if that minimizer leaves the box, moves towards it as far as the box allows and holds the component that
  blocks (the first one to reach its bound);
- else takes it, and checks the multipliers of the held components, ``g = H x - eta``: a component held on its
  lower bound needs ``g_i >= 0``, on its upper ``g_i <= 0``; the one whose sign is most wrong is released
  (the quadratic then falls when it moves inwards). When every sign is right, x is the optimum: the KKT
  conditions of the box hold (projected gradient zero, multipliers of the right sign).

H must be symmetric positive definite (the damped Gauss-Newton matrix of the Levenberg-Marquardt, a ridge-
regularised plan's normal equations). Sides may be infinite; ``lo == hi`` fixes a component. The objective
falls strictly at every step that is not blocked at once, so no working set repeats; the number of iterations
is bounded in practice by a small multiple of n (the cap here is :func:`iteration_cap`).

:func:`box_qp` is the NumPy solver (the Levenberg-Marquardt steps of :mod:`mbfg.solvers`);
``mbfg.graphs.control_linearized`` runs the same iteration inside a compiled program. Each is tested against
scipy's BVLS (``tests/test_box_solve.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mbfg.errors import MbfgError

#: Relative size, against the terms that make it up, under which a multiplier's wrong sign is round-off.
SIGN_TOL = 1e-12


def iteration_cap(n: int) -> int:
    """The most working-set changes :func:`box_qp` (and its compiled version) take for n unknowns."""
    return 6 * n + 10


@dataclass
class BoxQPResult:
    """x (n,): the minimizer; gradient (n,): ``H x - eta`` there; at_lower, at_upper (n,) bool: the components
    held on a bound (their gradient entries are the multipliers); iterations: working-set changes;
    optimal: the KKT conditions hold (False only where the iteration cap was reached)."""

    x: np.ndarray
    gradient: np.ndarray
    at_lower: np.ndarray
    at_upper: np.ndarray
    iterations: int
    optimal: bool


def _check(H: np.ndarray, eta: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> None:
    n = eta.shape[0]
    if H.shape != (n, n) or lo.shape != (n,) or hi.shape != (n,):
        raise MbfgError(f"box_qp: H must be (n, n) and eta, lo, hi (n,), got H {H.shape}, eta {eta.shape}, "
                        f"lo {lo.shape}, hi {hi.shape}")
    if np.any(np.isnan(lo)) or np.any(np.isnan(hi)) or np.any(lo > hi):
        bad = np.flatnonzero(~(lo <= hi))
        raise MbfgError(f"box_qp: components {bad.tolist()} need lo <= hi, got lo {lo[bad]}, hi {hi[bad]}")
    if not (np.all(np.isfinite(H)) and np.all(np.isfinite(eta))):
        raise MbfgError("box_qp: H and eta must be finite")


def box_qp(H: np.ndarray, eta: np.ndarray, lo: np.ndarray, hi: np.ndarray,
           x0: np.ndarray | None = None) -> BoxQPResult:
    """``argmin 0.5 x^T H x - eta^T x`` over ``lo <= x <= hi`` (module docstring).

    Args:
        H: (n, n) symmetric positive definite; eta: (n,); lo, hi: (n,), -inf / +inf allowed, ``lo <= hi``.
        x0: (n,) the start (default 0), clipped into the box; the components it has on a bound start held.

    Raises :class:`~mbfg.errors.MbfgError` on inconsistent shapes, ``lo > hi`` or non-finite H, eta.
    """
    H, eta = np.asarray(H, dtype=float), np.asarray(eta, dtype=float)
    lo, hi = np.asarray(lo, dtype=float), np.asarray(hi, dtype=float)
    _check(H, eta, lo, hi)
    n = eta.shape[0]
    x = np.clip(np.zeros(n) if x0 is None else np.asarray(x0, dtype=float), lo, hi)
    fixed = lo == hi
    at_lower, at_upper = (x == lo) & ~fixed, (x == hi) & ~fixed
    for iteration in range(iteration_cap(n) + 1):
        held = at_lower | at_upper | fixed
        free = ~held
        target = x.copy()
        if free.any():
            rhs = eta[free] - H[np.ix_(free, held)] @ x[held]
            target[free] = np.linalg.solve(H[np.ix_(free, free)], rhs)
        below, above = free & (target < lo), free & (target > hi)
        if below.any() or above.any():
            # Move towards the target until the first free component reaches its bound; hold it.
            d = target - x
            with np.errstate(divide="ignore", invalid="ignore"):
                ratio = np.where(below, (lo - x) / d, np.where(above, (hi - x) / d, np.inf))
            j = int(np.argmin(ratio))
            alpha = min(max(float(ratio[j]), 0.0), 1.0)
            x = np.clip(x + alpha * d, lo, hi)
            x[j] = lo[j] if below[j] else hi[j]
            at_lower[j], at_upper[j] = bool(below[j]), bool(above[j])
            continue
        x = np.clip(target, lo, hi)  # free components are inside; round-off only
        gradient = H @ x - eta
        scale = np.abs(H) @ np.abs(x) + np.abs(eta)
        wrong = np.where(at_lower, -gradient, 0.0) + np.where(at_upper, gradient, 0.0)
        wrong = np.where(wrong > SIGN_TOL * scale, wrong / np.maximum(scale, 1e-300), 0.0)
        if not wrong.any():
            return BoxQPResult(x, gradient, at_lower, at_upper, iteration, True)
        j = int(np.argmax(wrong))
        at_lower[j] = at_upper[j] = False
    return BoxQPResult(x, H @ x - eta, at_lower, at_upper, iteration_cap(n), False)


def kkt_violation(H: np.ndarray, eta: np.ndarray, lo: np.ndarray, hi: np.ndarray, x: np.ndarray) -> float:
    """How far x is from the box QP's KKT conditions, relative to the size of the terms of the gradient:
    ``max_i |x_i - clip(x_i - g_i, lo_i, hi_i)| / (|H| |x| + |eta|)_i`` with ``g = H x - eta`` (0 at the
    optimum: each component's gradient zero, or pointing out of the box at the bound it sits on), and
    infinity where x leaves the box."""
    if np.any(x < lo) or np.any(x > hi):
        return float("inf")
    g = H @ x - eta
    projected = x - np.clip(x - g, lo, hi)
    scale = np.abs(H) @ np.abs(x) + np.abs(eta)
    return float(np.max(np.abs(projected) / np.maximum(scale, 1e-300), initial=0.0))


__all__ = ["BoxQPResult", "box_qp", "iteration_cap", "kkt_violation"]
