"""The linear systems of one Levenberg-Marquardt iteration (:func:`mbfg.solvers.bounded_levenberg_marquardt`): the
damped step with the box on the bounded variables solved exactly, the gradient's first-order test, and the factors
that make a cost or a Jacobian non-finite.

Two paths (the solver's module docstring): :class:`OrdinarySystem`, a GTSAM graph linearized by GTSAM and eliminated
by QR in a COLAMD ordering with the bounded variables last; :class:`BlockedSystem`, a
:class:`~mbfg.vectorized.VectorizedGraph` linearized per factor type in one call and eliminated by GTSAM's sparse
Cholesky over its blocks in their explicit order (states in time order, parameters last); where its unbounded blocks
form a band in that order (a log's states), the same elimination by a banded Cholesky of the normal equations
assembled from the Jacobian arrays, without a GTSAM factor per row (:mod:`mbfg.banded`). All eliminate every
unbounded variable first and solve the bounded ones' box-constrained quadratic on the Schur complement that remains
(:func:`mbfg.box.box_qp`; Marklund, Servin, Larson 2025, App. C).
"""

from __future__ import annotations

from collections.abc import Mapping

import gtsam
import numpy as np

from mbfg.banded import BandedLinear, BandLayout, FlatStep, banded_step
from mbfg.box import box_qp
from mbfg.keys import name as key_name
from mbfg.vectorized import VectorizedGraph


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


def projected_gradient_cosine(gradient: np.ndarray, diag: np.ndarray, cost: float,
                              at_lower: np.ndarray, at_upper: np.ndarray) -> float:
    """The first-order optimality of a least-squares point in a box, free of units:
    ``max_i |g_i| / (|J_i| |r|)`` over the components whose descent is not blocked by the bound they sit on
    (g = J^T r's gradient of the cost, (n,); diag = |J_i|^2, (n,); |r| = sqrt(2 cost); at_lower, at_upper
    (n,) bool: the component is on that bound). MINPACK's gtol test (the cosine of the angle between the residual
    and a column of the Jacobian, Moré, Garbow, Hillstrom 1980) with the components held by a bound whose
    multiplier has the right sign left out, as the projected gradient of a box leaves them: 0 exactly where the
    bounded KKT conditions hold. A Gauss-Newton step lowers the cost by at least this squared, relatively, so
    a cosine below ``sqrt(relative_tol)`` is what a converged undamped step implies. Columns that no residual
    sees (|J_i| = 0) have g_i = 0 and count 0."""
    blocked = (at_lower & (gradient > 0)) | (at_upper & (gradient < 0))
    norm = np.sqrt(diag) * np.sqrt(max(2.0 * cost, 0.0))
    with np.errstate(divide="ignore", invalid="ignore"):
        cosine = np.where(blocked | (norm == 0), 0.0, np.abs(gradient) / norm)
    return float(np.max(cosine, initial=0.0))


def step_box(bounds: Mapping[int, tuple[np.ndarray, np.ndarray]], columns: Mapping[int, np.ndarray], n: int,
              values: gtsam.Values) -> tuple[np.ndarray, np.ndarray]:
    """The box of the step ``delta`` over n columns: ``lower - x <= delta <= upper - x`` on each bounded
    variable's columns, unbounded elsewhere."""
    lo, hi = np.full(n, -np.inf), np.full(n, np.inf)
    for key, (lower, upper) in bounds.items():
        x = values.atVector(key)
        lo[columns[key]] = lower - x
        hi[columns[key]] = upper - x
    return lo, hi


def bounded_schur_step(damped: gtsam.GaussianFactorGraph, free_order: gtsam.Ordering,
                        small_order: gtsam.Ordering, small_sizes: list[int], lo: np.ndarray, hi: np.ndarray,
                        eliminate: tuple) -> gtsam.VectorValues:
    """The damped step with the box on the bounded variables solved exactly: eliminate the variables of
    ``free_order``, solve the bounded ones' box QP (:func:`mbfg.box.box_qp`) on the Schur complement that
    remains, back-substitute."""
    conditionals, remaining = damped.eliminatePartialSequential(free_order, *eliminate)
    H, eta = remaining.hessian(small_order)
    x_small = box_qp(H, eta, lo, hi).x
    given = gtsam.VectorValues()
    col = 0
    for i, size in enumerate(small_sizes):
        given.insert(small_order.at(i), x_small[col : col + size])
        col += size
    return conditionals.optimize(given)  # back-substitution; holds the given variables too


class OrdinarySystem:
    """The generic path: GTSAM linearizes the graph; damped QR in a COLAMD ordering, bounded variables last."""

    def __init__(self, graph: gtsam.NonlinearFactorGraph, values: gtsam.Values,
                 bounds: Mapping[int, tuple[np.ndarray, np.ndarray]]) -> None:
        self.graph, self.bounds = graph, bounds
        self.zeros = values.zeroVectors()
        self.dims = {key: self.zeros.at(key).shape[0] for key in values.keys()}
        self.ordering: gtsam.Ordering | None = None
        self.bounded = [int(k) for k in bounds]
        starts = np.cumsum([0] + [self.dims[k] for k in self.bounded])
        self.columns = {k: np.arange(starts[i], starts[i + 1]) for i, k in enumerate(self.bounded)}
        self.small_order = gtsam.Ordering(self.bounded)

    def error(self, values: gtsam.Values) -> float:
        return self.graph.error(values)

    def linearize(self, values: gtsam.Values) -> tuple[gtsam.GaussianFactorGraph, dict[int, np.ndarray]]:
        linear = self.graph.linearize(values)
        if self.ordering is None:
            if self.bounded:
                full = gtsam.Ordering.ColamdConstrainedLastGaussianFactorGraph(linear, self.bounded, False)
                self.free_order = gtsam.Ordering([full.at(i) for i in range(full.size())
                                                  if full.at(i) not in self.columns])
            self.ordering = gtsam.Ordering.ColamdGaussianFactorGraph(linear)
        return linear, hessian_diagonal(linear, self.dims)

    def gradient_cosine(self, linear: gtsam.GaussianFactorGraph, diag: Mapping[int, np.ndarray],
                        values: gtsam.Values, cost: float) -> float:
        gradient = linear.gradientAtZero()
        parts = []
        for key, d in diag.items():
            g = gradient.at(key)
            lower = upper = np.zeros(d.shape[0], dtype=bool)
            if key in self.bounds:
                x = values.atVector(key)
                lower, upper = x == self.bounds[key][0], x == self.bounds[key][1]
            parts.append(projected_gradient_cosine(g, d, cost, lower, upper))
        return float(np.max(parts, initial=0.0))  # NaN, where a Jacobian is not finite, survives

    def nonfinite(self, values: gtsam.Values, linear: gtsam.GaussianFactorGraph | None = None) -> str:
        """Which factors have a non-finite error (or, given ``linear``, Jacobian or residual) at ``values``."""
        named = []
        for i in range(self.graph.size()):
            factor = self.graph.at(i)
            if factor is None:
                continue
            if linear is None:
                bad = not np.isfinite(factor.error(values))
            else:
                bad = not finite_factor(linear.at(i))
            if bad:
                keys = ", ".join(key_name(k) for k in factor.keys())
                named.append(f"factor {i} ({type(factor).__name__} on {keys})")
        return listed(named)

    def step(self, linear: gtsam.GaussianFactorGraph, diag: Mapping[int, np.ndarray], lam: float,
             values: gtsam.Values) -> tuple[gtsam.VectorValues, gtsam.VectorValues]:
        assert self.ordering is not None  # set by linearize()
        damped = gtsam.GaussianFactorGraph()
        damped.push_back(linear)
        for key, d in diag.items():
            # Marquardt's scaling; the floor keeps directions the data does not see damped too.
            scale = np.sqrt(lam * np.maximum(d, 1e-12 * max(float(d.max()), 1e-300) + 1e-30))
            damped.push_back(gtsam.JacobianFactor(key, np.diag(scale), np.zeros(d.shape[0]),
                                                  gtsam.noiseModel.Unit.Create(d.shape[0])))
        if not self.bounded:
            delta = damped.eliminateMultifrontal(self.ordering, gtsam.EliminateQR).optimize()
            return delta, delta
        lo, hi = step_box(self.bounds, self.columns, int(sum(len(c) for c in self.columns.values())), values)
        delta = bounded_schur_step(damped, self.free_order, self.small_order,
                                    [self.dims[k] for k in self.bounded], lo, hi, (gtsam.EliminateQR,))
        return delta, delta


class BlockedSystem:
    """The vectorized path over a :class:`VectorizedGraph`'s blocks (module docstring)."""

    def __init__(self, graph: VectorizedGraph, values: gtsam.Values,
                 bounds: Mapping[int, tuple[np.ndarray, np.ndarray]], banded: bool = True) -> None:
        self.graph, self.bounds = graph, bounds
        blocks = graph.blocks
        # Columns of the bounded variables within the small system of the bounded blocks.
        self.bounded_blocks = [b for b in graph.order if any(blocks.of[k][0] == b for k in bounds)]
        starts = np.cumsum([0] + [blocks.size[b] for b in self.bounded_blocks])
        self.bounded_columns = {}
        self.flat_columns = {}  # the same within the whole flat column layout (blocks.start)
        for key in bounds:
            block, offset = blocks.of[key]
            first = int(starts[self.bounded_blocks.index(block)]) + offset
            self.bounded_columns[key] = np.arange(first, first + blocks.dims[key])
            self.flat_columns[key] = blocks.start[block] + offset + np.arange(blocks.dims[key])
        self.n_small = int(starts[-1])
        self.free_order = gtsam.Ordering([b for b in graph.order if b not in self.bounded_blocks])
        self.small_order = gtsam.Ordering(self.bounded_blocks)
        self.full_order = gtsam.Ordering(graph.order)
        #: The banded path's layout (:mod:`mbfg.banded`) where the graph is a chain (``banded``), None: the
        #: general path.
        self.band = BandLayout.of(graph, self.bounded_blocks) if banded else None
        self.zeros: gtsam.VectorValues | FlatStep
        if self.band is not None:
            self.zeros = FlatStep(np.zeros(blocks.total))
        else:
            self.zeros = gtsam.VectorValues()
            for block, size in blocks.size.items():
                self.zeros.insert(block, np.zeros(size))

    def error(self, values: gtsam.Values) -> float:
        return self.graph.error(values)

    def linearize(self, values: gtsam.Values) -> tuple[gtsam.GaussianFactorGraph | BandedLinear, np.ndarray]:
        """The linear system at ``values`` (a :class:`~mbfg.banded.BandedLinear` on the banded path, GTSAM's graph
        over blocks on the general one) and diag(J^T J) over the flat block columns."""
        if self.band is None:
            return self.graph.linearize(values)
        arrays = self.graph.linearize_arrays(values)
        return BandedLinear(arrays, self.band), arrays.diag

    def gradient_cosine(self, linear: gtsam.GaussianFactorGraph | BandedLinear, diag: np.ndarray,
                        values: gtsam.Values, cost: float) -> float:
        blocks = self.graph.blocks
        if isinstance(linear, BandedLinear):
            g = linear.gradient()
        else:
            g = blocks.flat(linear.gradientAtZero())
        lower, upper = np.zeros(blocks.total, dtype=bool), np.zeros(blocks.total, dtype=bool)
        for key, (lo, hi) in self.bounds.items():
            x = values.atVector(key)
            lower[self.flat_columns[key]] = x == lo
            upper[self.flat_columns[key]] = x == hi
        return projected_gradient_cosine(g, diag, cost, lower, upper)

    def nonfinite(self, values: gtsam.Values, linear: gtsam.GaussianFactorGraph | BandedLinear | None = None) -> str:
        """Which factor types (and which of the ordinary factors) have a non-finite residual, error or Jacobian."""
        if isinstance(linear, BandedLinear):
            linear = self.graph.gaussian(linear.arrays)
        linear = self.graph.linearize(values)[0] if linear is None else linear
        named, i = [], 0
        for group in self.graph.groups:  # VectorizedGraph.linearize: each group's factors in turn, then the others
            count = 0
            for _ in range(len(group.keys)):
                count += not finite_factor(linear.at(i))
                i += 1
            if count:
                named.append(f"factor type {group.ft.name!r} ({count} of its {len(group.keys)} factors)")
        others = self.graph.others
        for j in range(others.size()):
            factor = others.at(j)
            if factor is None:
                continue
            finite = finite_factor(linear.at(i))
            i += 1
            if not finite:
                keys = ", ".join(key_name(k) for k in factor.keys())
                named.append(f"factor {j} of the others ({type(factor).__name__} on {keys})")
        return listed(named)

    def damping(self, diag: np.ndarray, lam: float) -> np.ndarray:
        """Marquardt's damping diagonal over the flat block columns, lam diag(J^T J) with the ordinary path's
        floor per variable (each variable's segment of the flat diagonal)."""
        blocks = self.graph.blocks
        floor = 1e-12 * np.maximum(np.maximum.reduceat(diag, blocks.segments), 1e-300) + 1e-30
        lengths = np.diff(np.append(blocks.segments, blocks.total))
        return lam * np.maximum(diag, np.repeat(floor, lengths))

    def _damped(self, linear: gtsam.GaussianFactorGraph, diag: np.ndarray, lam: float) -> gtsam.GaussianFactorGraph:
        blocks = self.graph.blocks
        scale = np.sqrt(self.damping(diag, lam))
        damped = gtsam.GaussianFactorGraph()
        damped.push_back(linear)
        for block, size in blocks.size.items():
            start = blocks.start[block]
            unit = self.graph._unit_noise(size)
            damped.push_back(gtsam.JacobianFactor(block, np.diag(scale[start : start + size]), np.zeros(size), unit))
        return damped

    def step(self, linear: gtsam.GaussianFactorGraph | BandedLinear, diag: np.ndarray, lam: float,
             values: gtsam.Values) -> tuple[gtsam.VectorValues, gtsam.VectorValues | FlatStep]:
        """The damped step at damping ``lam``: (over the GTSAM variables, over the linear system's columns)."""
        if isinstance(linear, BandedLinear):
            lo, hi = step_box(self.bounds, self.bounded_columns, self.n_small, values)
            try:
                flat = banded_step(linear, self.damping(diag, lam), lo, hi)
            except np.linalg.LinAlgError:
                # A pivot lost to round-off (J^T J squares a stiff system's condition number): the general
                # path's QR on J itself, as its own Cholesky falls back to.
                delta, blocked = self._solve(self._damped(self.graph.gaussian(linear.arrays), diag, lam), values,
                                             cholesky=False)
                return delta, FlatStep(self.graph.blocks.flat(blocked))
            return self.graph.blocks.variables(flat.x), flat
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
        lo, hi = step_box(self.bounds, self.bounded_columns, self.n_small, values)
        delta = bounded_schur_step(damped, self.free_order, self.small_order,
                                    [self.graph.blocks.size[b] for b in self.bounded_blocks], lo, hi, eliminate)
        return self.graph.blocks.split(delta), delta


def finite_factor(factor: gtsam.GaussianFactor) -> bool:
    """Whether a linear factor's Jacobian, residual and error 0.5 |b|^2 are finite (a finite residual of
    1e200 overflows its square)."""
    A, b = factor.jacobian()
    with np.errstate(over="ignore"):
        return bool(np.all(np.isfinite(A)) and np.all(np.isfinite(b)) and np.isfinite(b @ b))


def listed(named: list[str]) -> str:
    if not named:
        return "no single factor is non-finite there (their sum overflows)"
    return "non-finite in " + "; ".join(named[:5]) + (f"; and {len(named) - 5} more" if len(named) > 5 else "")


__all__ = ["BlockedSystem", "OrdinarySystem", "hessian_diagonal", "projected_gradient_cosine"]
