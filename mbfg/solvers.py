"""Levenberg-Marquardt on a GTSAM graph that keeps Vector variables inside a box (seed 001 eq. 3.18, App. C).

Each iteration linearizes the graph once (GTSAM calls our JAX factors), then
tries damped steps ``(J^T J + lam D) delta = -J^T r`` with Marquardt's scaling
D = diag(J^T J) (floored), solved by sparse multifrontal QR with a COLAMD
ordering computed once. Bounds: the box B of the parameters is enforced on the
step, by an active-set loop: if ``x + delta`` leaves the box, the offending
components are pinned to their bound (a stiff linear row on that component
of delta; the step is then put exactly on the bound) and the damped system is
solved again, until the step stays inside. This is the solution of the box-constrained linear least-squares
subproblem of App. C whenever the pinned set is the optimal active set (the
common case near convergence); the paper solves that subproblem as an MLCP.
A :class:`~mbfg.vectorized.VectorizedGraph` in place of the GTSAM graph takes the vectorized
path: each factor type linearized in one call, and the damped step solved by GTSAM's sparse
Cholesky over the graph's blocks in its explicit order (states in time order, parameters last),
where every block without a bound is eliminated first and the box is handled on the small
system of the bounded blocks that remains (the same active-set rule, solved exactly).
A step is accepted when it lowers the cost. The damping then follows one of two rules
(``damping_update``): "tenfold" divides lam by 10 after an accepted step and multiplies it
by 10 per rejected trial; "nielsen" (Madsen, Nielsen & Tingleff, *Methods for non-linear
least squares problems*, 2004, with Nielsen's growth factor nu) sets lam *= max(1/3, 1 - (2 rho - 1)^3)
after an accepted step, so a step the linearization predicted badly keeps its damping, and
doubles the growth factor with each rejected trial in a row. With ``backtracking`` > 0, a rejected step is first halved
along its direction (up to that many times) before lam grows. The gain ratio rho = (actual decrease) / (decrease the
linearization predicts) is reported per iteration: with complementarity
(friction, contact) a full step often crosses a kink where a multiplier switches,
and rho far from 1 shows it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import gtsam
import numpy as np

from mbfg.progress import Progress
from mbfg.vectorized import VectorizedGraph


@dataclass
class LMResult:
    """values: the solution; iterations: accepted + rejected linearizations; converged: a tolerance was met;
    history: per iteration (iteration, cost, lambda, rho = the step's gain ratio, wall s, linearize s, solve s,
        alpha = the fraction of the damped step taken: 1, or less after backtracking);
    message: why it stopped."""

    values: gtsam.Values
    iterations: int
    converged: bool
    history: list[dict[str, float]] = field(default_factory=list)
    message: str = ""


#: Accepted steps in a row, each lowering the cost by less than ``relative_tol``, after which
#: :func:`bounded_levenberg_marquardt` stops even though their damping stayed above ``lambda_initial``.
STALL_STEPS = 3

#: The LM's damping at its start (:func:`bounded_levenberg_marquardt`'s ``lambda_initial``), GTSAM's default.
LAMBDA_INITIAL = 1e-5


def hessian_diagonal(linear: gtsam.GaussianFactorGraph, dims: Mapping[int, int] | None = None) -> dict[int, np.ndarray]:
    """diag(J^T J) per key of a linear (Jacobian) factor graph; ``dims``: tangent dimension per key (default:
    read from the graph)."""
    if dims is None:
        gradient = linear.gradientAtZero()  # a vector per key: its dimension
        dims = {key: gradient.at(key).shape[0] for key in linear.keyVector()}
    diag: dict[int, np.ndarray] = {}
    for i in range(linear.size()):
        factor = linear.at(i)
        if factor is None:
            continue
        A, _ = factor.jacobian()
        col = 0
        for key in factor.keys():
            dim = dims[key]
            block = A[:, col : col + dim]
            d = np.einsum("ij,ij->j", block, block)
            diag[key] = diag.get(key, 0.0) + d
            col += dim
    return diag


def bounded_levenberg_marquardt(
    graph: gtsam.NonlinearFactorGraph | VectorizedGraph,
    values: gtsam.Values,
    bounds: Mapping[int, tuple[np.ndarray, np.ndarray]] | None = None,
    *,
    max_iterations: int = 20,
    relative_tol: float = 1e-6,
    absolute_tol: float = 0.0,
    lambda_initial: float = LAMBDA_INITIAL,
    lambda_max: float = 1e10,
    damping_update: str = "tenfold",
    quiet: bool = False,
    label: str = "LM",
    on_iteration: Callable[[dict[str, float], gtsam.Values], None] | None = None,
    backtracking: int = 0,
) -> LMResult:
    """Minimize ``graph.error`` from ``values`` with Vector variables kept in ``bounds``.

    Args:
        graph, values: the problem and the initial guess (inside the bounds); a
            :class:`~mbfg.vectorized.VectorizedGraph` takes the vectorized path (module docstring).
        bounds: key -> (lower (n,), upper (n,)) for Vector variables; +-inf where unbounded.
        max_iterations: linearizations at most.
        relative_tol: stop when an accepted step taken with ``lam <= lambda_initial`` lowers the
            cost by less than this fraction, or when :data:`STALL_STEPS` accepted steps in a row
            do, whatever their damping (a nonsmooth cost, e.g. friction kinks the linearization
            cannot see across, keeps lambda above its start and creeps down at round-off rates).
        absolute_tol: stop when the cost is below this.
        lambda_initial, lambda_max: LM damping start and give-up value.
        damping_update: "tenfold" or "nielsen", the rule for lam between trials (module docstring).
        quiet: no progress lines (iteration, cost, lambda, time) on stderr.
        on_iteration: called after each iteration with its history row and the current values.
        backtracking: halvings of a rejected step tried, along its direction, before the damping grows
            (0: none, the plain LM). A step accepted at a fraction ``alpha`` < 1 (in the history row) keeps
            its damping for the next linearization. For costs with kinks that the linearization cannot see,
            such as an impulse residual where a contact engages: the damped step's direction holds up to the
            kink, and raising the damping instead turns it towards the damping's scaled gradient, which
            along the heavily weighted rows moves little.
    """
    if damping_update not in ("tenfold", "nielsen"):
        raise ValueError(f"damping_update must be 'tenfold' or 'nielsen', got {damping_update!r}")
    if isinstance(backtracking, bool) or not isinstance(backtracking, (int, np.integer)) or backtracking < 0:
        raise ValueError(f"backtracking must be a whole number of halvings >= 0, got {backtracking!r}")
    bounds = dict(bounds or {})
    for key, (lo, hi) in bounds.items():
        x = values.atVector(key)
        if np.any(x < lo) or np.any(x > hi):
            raise ValueError(f"initial value of bounded variable {gtsam.DefaultKeyFormatter(key)} is outside its box")
    system = _Blocked(graph, values, bounds) if isinstance(graph, VectorizedGraph) else _Ordinary(graph, values, bounds)
    progress = Progress(label, max_iterations, quiet=quiet, interval_s=0.0)
    start = time.perf_counter()
    cost = system.error(values)
    lam = lambda_initial
    history: list[dict[str, float]] = [
        dict(iteration=0, cost=cost, lam=lam, rho=float("nan"), wall_s=0.0, linearize_s=0.0, solve_s=0.0)
    ]
    message, converged = "iteration limit", False
    stalled = 0
    for iteration in range(1, max_iterations + 1):
        t0 = time.perf_counter()
        diag: Any  # the Hessian's diagonal: flat (_Blocked) or per key (_Ordinary)
        linear, diag = system.linearize(values)
        t_lin = time.perf_counter() - t0
        t0 = time.perf_counter()
        linear_cost = linear.error(system.zeros)
        accepted = False
        growth = 10.0 if damping_update == "tenfold" else 2.0
        alpha = 1.0
        while lam <= lambda_max:
            try:
                delta, delta_linear = system.step(linear, diag, lam, values)
                lengths = [0.5**i for i in range(backtracking + 1)]  # the fractions of the step to try
            except RuntimeError:
                # GTSAM found the damped system indeterminate (round-off in a stiff system under
                # a tiny damping): a rejected trial, so more damping.
                lengths = []
            for alpha in lengths:
                new_values, new_cost = _trial(system, values, delta if alpha == 1.0 else delta.scale(alpha), bounds)
                if np.isfinite(new_cost) and new_cost < cost:
                    accepted = True
                    break
            if accepted:
                break
            lam *= growth
            if damping_update == "nielsen":
                growth *= 2.0
        t_solve = time.perf_counter() - t0
        if not accepted:
            message = "no damped step lowers the cost (converged to the tolerance of the linearization)"
            converged = True
            history.append(dict(iteration=iteration, cost=cost, lam=lam, rho=float("nan"),
                                wall_s=time.perf_counter() - start,
                                linearize_s=t_lin, solve_s=t_solve))
            break
        decrease = cost - new_cost
        predicted = linear_cost - linear.error(delta_linear if alpha == 1.0 else delta_linear.scale(alpha))
        rho = decrease / predicted if predicted > 0 else 0.0
        # A small decrease of a heavily damped step (just after lambda grew), or of a step cut short at a
        # kink, says nothing about convergence.
        undamped = lam <= lambda_initial and alpha == 1.0
        values, cost = new_values, new_cost
        # A step cut short keeps its damping: its direction held up to a kink the linearization did not see.
        if alpha == 1.0 and damping_update == "tenfold":
            lam = max(lam / 10.0, 1e-12)
        elif alpha == 1.0:
            lam = max(lam * max(1.0 / 3.0, 1.0 - (2.0 * rho - 1.0) ** 3), 1e-12)
        row = dict(iteration=iteration, cost=cost, lam=lam, rho=rho, wall_s=time.perf_counter() - start,
                   linearize_s=t_lin, solve_s=t_solve, alpha=alpha)
        history.append(row)
        # Where steps are halved, the fraction taken shows how often a kink cut a step short.
        progress.update(iteration, cost=cost, lam=lam, rho=rho, **({"alpha": alpha} if backtracking else {}))
        if on_iteration is not None:
            on_iteration(row, values)
        small = decrease <= relative_tol * (cost + decrease)
        stalled = stalled + 1 if small else 0
        if (undamped and small) or cost <= absolute_tol:
            message, converged = "relative decrease below tolerance", True
            break
        if stalled >= STALL_STEPS:
            message, converged = f"relative decrease below tolerance in {STALL_STEPS} damped steps in a row", True
            break
    return LMResult(values, len(history) - 1, converged, history, message)


def _trial(system: Any, values: gtsam.Values, delta: gtsam.VectorValues,
           bounds: Mapping[int, tuple[np.ndarray, np.ndarray]]) -> tuple[gtsam.Values, float]:
    """The values ``values + delta`` (bounded variables landed exactly on the bound they reach) and their cost."""
    new_values = values.retract(delta)
    for key, (lo, hi) in bounds.items():
        # x + (bound - x) can miss the bound by one ulp; land on it exactly.
        new_values.update(key, np.clip(new_values.atVector(key), lo, hi))
    return new_values, system.error(new_values)


class _Ordinary:
    """The generic path: GTSAM linearizes the graph; damped QR with a COLAMD ordering; stiff rows for the box."""

    def __init__(self, graph: gtsam.NonlinearFactorGraph, values: gtsam.Values,
                 bounds: Mapping[int, tuple[np.ndarray, np.ndarray]]) -> None:
        self.graph, self.bounds = graph, bounds
        self.zeros = values.zeroVectors()
        self.dims = {key: self.zeros.at(key).shape[0] for key in values.keys()}
        self.ordering: gtsam.Ordering | None = None

    def error(self, values: gtsam.Values) -> float:
        return self.graph.error(values)

    def linearize(self, values: gtsam.Values) -> tuple[gtsam.GaussianFactorGraph, dict[int, np.ndarray]]:
        linear = self.graph.linearize(values)
        if self.ordering is None:
            self.ordering = gtsam.Ordering.ColamdGaussianFactorGraph(linear)
        return linear, hessian_diagonal(linear, self.dims)

    def step(self, linear: gtsam.GaussianFactorGraph, diag: Mapping[int, np.ndarray], lam: float,
             values: gtsam.Values) -> tuple[gtsam.VectorValues, gtsam.VectorValues]:
        assert self.ordering is not None  # set by linearize()
        delta = _bounded_step(linear, diag, lam, values, self.bounds, self.ordering)
        return delta, delta


class _Blocked:
    """The vectorized path over a :class:`VectorizedGraph`'s blocks (module docstring)."""

    def __init__(self, graph: VectorizedGraph, values: gtsam.Values,
                 bounds: Mapping[int, tuple[np.ndarray, np.ndarray]]) -> None:
        self.graph, self.bounds = graph, bounds
        blocks = graph.blocks
        self.zeros = gtsam.VectorValues()
        for block, size in blocks.size.items():
            self.zeros.insert(block, np.zeros(size))
        # Columns of the bounded variables within the small system of the bounded blocks.
        self.bounded_blocks = [b for b in graph.order if any(blocks.of[k][0] == b for k in bounds)]
        starts = np.cumsum([0] + [blocks.size[b] for b in self.bounded_blocks])
        self.bounded_columns = {}
        for key in bounds:
            block, offset = blocks.of[key]
            first = int(starts[self.bounded_blocks.index(block)]) + offset
            self.bounded_columns[key] = np.arange(first, first + blocks.dims[key])
        self.free_order = gtsam.Ordering([b for b in graph.order if b not in self.bounded_blocks])
        self.small_order = gtsam.Ordering(self.bounded_blocks)
        self.full_order = gtsam.Ordering(graph.order)

    def error(self, values: gtsam.Values) -> float:
        return self.graph.error(values)

    def linearize(self, values: gtsam.Values) -> tuple[gtsam.GaussianFactorGraph, np.ndarray]:
        return self.graph.linearize(values)

    def _damped(self, linear: gtsam.GaussianFactorGraph, diag: np.ndarray, lam: float) -> gtsam.GaussianFactorGraph:
        blocks = self.graph.blocks
        # Marquardt's scaling with the ordinary path's floor per variable (each variable's segment of
        # the flat diagonal), for all blocks at once.
        floor = 1e-12 * np.maximum(np.maximum.reduceat(diag, blocks.segments), 1e-300) + 1e-30
        lengths = np.diff(np.append(blocks.segments, blocks.total))
        scale = np.sqrt(lam * np.maximum(diag, np.repeat(floor, lengths)))
        damped = gtsam.GaussianFactorGraph()
        damped.push_back(linear)
        for block, size in blocks.size.items():
            start = blocks.start[block]
            unit = self.graph._unit_noise(size)
            damped.push_back(gtsam.JacobianFactor(block, np.diag(scale[start : start + size]), np.zeros(size), unit))
        return damped

    def step(self, linear: gtsam.GaussianFactorGraph, diag: np.ndarray, lam: float,
             values: gtsam.Values) -> tuple[gtsam.VectorValues, gtsam.VectorValues]:
        damped = self._damped(linear, diag, lam)
        try:
            return self._solve(damped, values, cholesky=True)
        except RuntimeError:
            # GTSAM's Cholesky met a pivot lost to round-off (J^T J of stiff constraint rows squares
            # their condition number): the same elimination by QR works on J itself.
            return self._solve(damped, values, cholesky=False)

    def _solve(self, damped: gtsam.GaussianFactorGraph, values: gtsam.Values,
               cholesky: bool) -> tuple[gtsam.VectorValues, gtsam.VectorValues]:
        eliminate = () if cholesky else (gtsam.EliminateQR,)  # the default is GTSAM's sparse Cholesky
        if not self.bounded_blocks:
            delta = damped.eliminateSequential(self.full_order, *eliminate).optimize()
            return self.graph.blocks.split(delta), delta
        # Eliminate every unbounded block in the explicit order: what remains is the damped system
        # of the bounded blocks alone (its Schur complement), a few dozen columns.
        conditionals, remaining = damped.eliminatePartialSequential(self.free_order, *eliminate)
        H, eta = remaining.hessian(self.small_order)
        x_small = self._bounded_small_solve(H, eta, values)
        given = gtsam.VectorValues()
        col = 0
        for block in self.bounded_blocks:
            size = self.graph.blocks.size[block]
            given.insert(block, x_small[col : col + size])
            col += size
        delta = conditionals.optimize(given)  # back-substitution; holds the given blocks too
        return self.graph.blocks.split(delta), delta

    def _bounded_small_solve(self, H: np.ndarray, eta: np.ndarray, values: gtsam.Values) -> np.ndarray:
        """argmin 0.5 x^T H x - eta^T x with the components that leave their box pinned to the bound
        (the ordinary path's active-set rule, here solved exactly on the small system)."""
        n = H.shape[0]
        lo, hi = np.full(n, -np.inf), np.full(n, np.inf)
        for key, (lower, upper) in self.bounds.items():
            x = values.atVector(key)
            lo[self.bounded_columns[key]] = lower - x
            hi[self.bounded_columns[key]] = upper - x
        return pinned_box_solve(H, eta, lo, hi)


def pinned_box_solve(H: np.ndarray, eta: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """argmin ``0.5 x^T H x - eta^T x`` (H (n, n) positive definite) with ``lo <= x <= hi`` by the active-set
    rule of this module: components that leave their box are pinned to the bound and the rest solved again,
    until none leaves (at most n + 1 solves)."""
    n = H.shape[0]
    pinned = np.zeros(n, dtype=bool)
    target = np.zeros(n)
    for _ in range(n + 1):
        free = ~pinned
        rhs = eta[free] - H[np.ix_(free, pinned)] @ target[pinned]
        x = target.copy()
        x[free] = np.linalg.solve(H[np.ix_(free, free)], rhs)
        out = free & ((x < lo) | (x > hi))
        if not out.any():
            break
        target[out] = np.clip(x[out], lo[out], hi[out])
        pinned |= out
    return np.clip(x, lo, hi)


def _bounded_step(
    linear: gtsam.GaussianFactorGraph,
    diag: Mapping[int, np.ndarray],
    lam: float,
    values: gtsam.Values,
    bounds: Mapping[int, tuple[np.ndarray, np.ndarray]],
    ordering: gtsam.Ordering,
) -> gtsam.VectorValues:
    """The damped step, with components that would leave their box pinned to the bound (active set)."""
    damped = gtsam.GaussianFactorGraph()
    damped.push_back(linear)
    for key, d in diag.items():
        # Marquardt's scaling; the floor keeps directions the data does not see damped too.
        scale = np.sqrt(lam * np.maximum(d, 1e-12 * max(float(d.max()), 1e-300) + 1e-30))
        damped.push_back(gtsam.JacobianFactor(key, np.diag(scale), np.zeros(d.shape[0]),
                                              gtsam.noiseModel.Unit.Create(d.shape[0])))
    pinned: dict[int, dict[int, float]] = {key: {} for key in bounds}
    for _ in range(1 + sum(len(lo) for lo, _ in bounds.values())):
        graph = gtsam.GaussianFactorGraph()
        graph.push_back(damped)
        for key, comps in pinned.items():
            if comps:
                n = values.atVector(key).shape[0]
                idx = sorted(comps)
                A = np.zeros((len(idx), n))
                A[np.arange(len(idx)), idx] = 1.0
                target = np.array([comps[i] for i in idx])
                # A stiff ordinary row, not a Constrained noise model: GTSAM's constrained QR
                # drops columns of low precision, and the columns of parameters the data do not
                # excite carry only the damping floor, so it reported the system indeterminate.
                stiffness = 1e6 * np.sqrt(max(float(diag[key].max()), 1.0)) if key in diag else 1e6
                graph.push_back(gtsam.JacobianFactor(key, stiffness * A, stiffness * target,
                                                     gtsam.noiseModel.Unit.Create(len(idx))))
        delta = graph.eliminateMultifrontal(ordering, gtsam.EliminateQR).optimize()
        violated = False
        for key, (lo, hi) in bounds.items():
            x = values.atVector(key)
            step = delta.at(key)
            new = x + step
            for i in np.flatnonzero((new < lo) | (new > hi)):
                if i not in pinned[key]:
                    pinned[key][int(i)] = float(np.clip(new[i], lo[i], hi[i]) - x[i])
                    violated = True
        if not violated:
            # Round-off of the constrained solve: put pinned components exactly on the bound.
            for key, (lo, hi) in bounds.items():
                x = values.atVector(key)
                clipped = gtsam.VectorValues()
                clipped.insert(key, np.clip(x + delta.at(key), lo, hi) - x)
                delta.update(clipped)
            return delta
    return delta
