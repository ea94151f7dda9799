"""The damped step of a chain's linear system by a banded Cholesky: the LM's linear solve for a
:class:`~mbfg.vectorized.VectorizedGraph` whose unbounded blocks, in its elimination order, couple only with
their near neighbours (a log's states in time order: state k with k-1 and k+1), plus a few bounded columns
(the parameters) coupled with all.

The normal equations of the whitened system ``J delta + r`` are assembled from the factor types' Jacobian
arrays (:meth:`~mbfg.vectorized.VectorizedGraph.linearize_arrays`) without a GTSAM factor per row: the states'
block ``H_ss`` in LAPACK's lower band storage (bandwidth :attr:`BandLayout.bandwidth`), their coupling with the
bounded columns ``H_sp`` and those columns' own ``H_pp``, dense. The damped step minimizes
``0.5 |J delta + r|^2 + 0.5 delta^T Lambda delta`` (Marquardt's diagonal ``Lambda``) with the box on the bounded
columns: ``H_ss + Lambda_s`` is factored once by LAPACK's banded Cholesky (``pbtrf``), which solves for
``H_sp`` and ``g_s`` together; the Schur complement ``S = H_pp + Lambda_p - H_sp^T (H_ss + Lambda_s)^-1 H_sp``
carries the bounded columns' box QP (:func:`mbfg.box.box_qp`, as the general path's, Marklund, Servin, Larson
2025, App. C), and back-substitution gives the states. This is the block elimination of the general path
(:func:`mbfg.lm_systems.bounded_schur_step`, states first, parameters last) in the same order and by the same
kind of factorization (Cholesky of the damped normal equations); it costs O(n b^2) for n state columns of
bandwidth b, where building and eliminating a GTSAM factor graph costs microseconds per factor. Where the damped
band is not positive definite to round-off (the normal equations square a stiff system's condition number), the
step falls back to the general path's QR of the same system (:meth:`mbfg.lm_systems.BlockedSystem.step`), as the
general path's own Cholesky does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.linalg import cho_solve_banded, cholesky_banded

from mbfg.box import box_qp
from mbfg.vectorized import LinearArrays, VectorizedGraph

#: The widest band (columns below the diagonal) the banded path takes; wider problems take the general path. A
#: one-body chain's states have 12 columns and a bandwidth of 23; a five-body chain's, 60 and 119.
BAND_LIMIT = 200


@dataclass
class FlatStep:
    """A step over the flat block columns (``Blocks.start``), (total,): the banded path's twin of the
    ``gtsam.VectorValues`` over blocks that :meth:`BandedLinear.error` evaluates."""

    x: np.ndarray

    def scale(self, alpha: float) -> FlatStep:
        return FlatStep(alpha * self.x)


class BandLayout:
    """Where each flat column of a :class:`VectorizedGraph` sits in the banded system: the unbounded blocks in
    the graph's order first (the band, ``n_band`` columns), the bounded blocks last (``n_tail``, dense)."""

    def __init__(self, graph: VectorizedGraph, bounded_blocks: Sequence[int]) -> None:
        blocks = graph.blocks
        self.position = np.empty(blocks.total, dtype=np.int64)
        column = 0
        tail = [b for b in graph.order if b in set(bounded_blocks)]
        for block in [b for b in graph.order if b not in set(bounded_blocks)] + tail:
            start, size = blocks.start[block], blocks.size[block]
            self.position[start : start + size] = column + np.arange(size)
            column += size
        self.n_band = column - sum(blocks.size[b] for b in tail)
        self.n_tail = column - self.n_band
        self.bandwidth = 0
        for columns in graph.columns:  # per group, per slot (N, block size) flat columns
            self.bandwidth = max(self.bandwidth, self._spread(np.concatenate(columns, axis=1)))
        for i in range(graph.others.size()):  # the ordinary factors: all columns of every block they touch
            factor = graph.others.at(i)
            if factor is None:
                continue
            touched = {blocks.of[key][0] for key in factor.keys()}
            cols = np.concatenate([blocks.start[b] + np.arange(blocks.size[b]) for b in touched])
            self.bandwidth = max(self.bandwidth, self._spread(cols[None, :]))

    def _spread(self, columns: np.ndarray) -> int:
        """The widest gap between two band columns of one factor (rows of ``columns``, flat columns)."""
        pos = self.position[columns]
        band = pos < self.n_band
        if not band.any():
            return 0
        high = np.where(band, pos, -1).max(axis=1)
        low = np.where(band, pos, np.iinfo(np.int64).max).min(axis=1)
        return int(np.max(np.where(high >= 0, high - low, 0)))

    @classmethod
    def of(cls, graph: VectorizedGraph, bounded_blocks: Sequence[int]) -> BandLayout | None:
        """The layout where the graph's factors make a band of at most :data:`BAND_LIMIT` columns, None
        otherwise."""
        if not graph.groups:
            return None
        layout = cls(graph, bounded_blocks)
        return layout if layout.bandwidth <= BAND_LIMIT and layout.n_band > 0 else None


@dataclass
class NormalEquations:
    """``J^T J`` and ``g = J^T r`` in a :class:`BandLayout`: band (bandwidth + 1, n_band) in LAPACK's lower band
    storage (``band[i - j, j] = H[i, j]``, i >= j), coupling (n_band, n_tail), tail (n_tail, n_tail), gradient
    over the flat block columns (total,)."""

    band: np.ndarray
    coupling: np.ndarray
    tail: np.ndarray
    gradient: np.ndarray


def normal_equations(arrays: LinearArrays, layout: BandLayout) -> NormalEquations:
    """The normal equations of ``arrays``' system in ``layout``: every factor's Gram matrix, summed, one pair of
    its slots (blocks) at a time over all factors of a group."""
    nb, nt, width = layout.n_band, layout.n_tail, layout.bandwidth + 1
    band = np.zeros((width, nb))
    coupling = np.zeros((nb, nt))
    tail = np.zeros((nt, nt))
    gradient = np.zeros(layout.position.size)
    parts: list[tuple[list[np.ndarray], np.ndarray, list[np.ndarray]]] = [
        (A, r, columns) for r, A, columns, _ in arrays.groups]
    for _, A_f, r_f, cols_f in arrays.others:  # an ordinary factor's columns as two slots: its band and its tail ones
        in_band = layout.position[cols_f] < nb
        slots = [side for side in (in_band, ~in_band) if side.any()]
        parts.append(([A_f[None][:, :, side] for side in slots], r_f[None], [cols_f[None][:, side] for side in slots]))
    for A, r, columns in parts:
        for a, cols in zip(A, columns):
            gradient += np.bincount(cols.ravel(), weights=np.einsum("nmi,nm->ni", a, r).ravel(),
                                    minlength=gradient.size)
        pos = [layout.position[cols] for cols in columns]
        for s in range(len(A)):
            for t in range(len(A)):
                i, j = pos[s], pos[t]  # (N, size_s), (N, size_t): the positions of the pair's rows and columns
                row_tail, column_tail = i[0, 0] >= nb, j[0, 0] >= nb  # a block is all band or all tail
                if (row_tail and not column_tail) or (
                        not row_tail and not column_tail and np.all(i.max(axis=1) < j.min(axis=1))):
                    continue  # the transpose of a pair that is added, or all above the diagonal
                gram = np.matmul(A[s].transpose(0, 2, 1), A[t])  # (N, size_s, size_t)
                if row_tail:
                    _add_tail(tail, i - nb, j - nb, gram)
                elif column_tail:
                    _add_coupling(coupling, i, j - nb, gram)
                else:
                    _add_band(band, i, j, gram)
    return NormalEquations(band, coupling, tail, gradient)


def _strided(first: np.ndarray, size: int) -> bool:
    """Whether blocks of ``size`` columns starting at ``first`` (N,) lie one after another (a chain's states)."""
    return bool(np.array_equal(first, first[0] + size * np.arange(first.size)))


def _add_band(band: np.ndarray, i: np.ndarray, j: np.ndarray, gram: np.ndarray) -> None:
    """The lower-triangle cells (i >= j) of a slot pair's Gram matrices (N, size_i, size_j) at the band positions
    i (N, size_i) and j (N, size_j), into LAPACK's lower band storage ``band[i - j, j]``."""
    n, size_i, size_j = gram.shape
    offset = i[:, 0] - j[:, 0]
    if np.all(offset == offset[0]) and _strided(j[:, 0], size_j):
        # A chain: the pair's cells sit at the same band rows in every factor, and the factors' columns are
        # consecutive, so the band is a (rows, N, size_j) view and each cell of the pair one strided add.
        view = band[:, j[0, 0] : j[0, 0] + n * size_j].reshape(band.shape[0], n, size_j)
        for a in range(size_i):
            for b in range(size_j):
                if offset[0] + a - b >= 0:
                    view[offset[0] + a - b, :, b] += gram[:, a, b]
        return
    I, J = np.broadcast_arrays(i[:, :, None], j[:, None, :])
    keep = I >= J
    np.add.at(band, ((I - J)[keep], J[keep]), gram[keep])


def _add_coupling(coupling: np.ndarray, i: np.ndarray, j: np.ndarray, gram: np.ndarray) -> None:
    """A band slot's (positions i (N, size_i)) coupling with a tail slot (tail columns j (N, size_j))."""
    n, size_i, _ = gram.shape
    if _strided(i[:, 0], size_i) and np.all(j == j[0]):
        coupling[i[0, 0] : i[0, 0] + n * size_i].reshape(n, size_i, -1)[:, :, j[0]] += gram
        return
    I, J = np.broadcast_arrays(i[:, :, None], j[:, None, :])
    np.add.at(coupling, (I, J), gram)


def _add_tail(tail: np.ndarray, i: np.ndarray, j: np.ndarray, gram: np.ndarray) -> None:
    """A pair of tail slots (tail columns i (N, size_i), j (N, size_j))."""
    if np.all(i == i[0]) and np.all(j == j[0]):
        tail[np.ix_(i[0], j[0])] += gram.sum(axis=0)
        return
    I, J = np.broadcast_arrays(i[:, :, None], j[:, None, :])
    np.add.at(tail, (I, J), gram)


class BandedLinear:
    """The LM's linear system at one point on the banded path: the arrays (for the step's predicted decrease,
    exactly as GTSAM's ``GaussianFactorGraph.error`` evaluates it) and their normal equations."""

    def __init__(self, arrays: LinearArrays, layout: BandLayout) -> None:
        self.arrays, self.layout = arrays, layout
        self.normal = normal_equations(arrays, layout)

    def error(self, step: FlatStep) -> float:
        """0.5 |J x + r|^2 at the step ``x``."""
        x, total = step.x, 0.0
        for r, A, columns, _ in self.arrays.groups:
            e = r.copy()
            for a, cols in zip(A, columns):
                e += np.einsum("nmi,ni->nm", a, x[cols])
            total += float(np.sum(e * e))
        for _, A_f, r_f, cols_f in self.arrays.others:
            e = A_f @ x[cols_f] + r_f
            total += float(e @ e)
        return 0.5 * total

    def gradient(self) -> np.ndarray:
        """J^T r over the flat block columns (the cost's gradient at the zero step)."""
        return self.normal.gradient


def banded_step(linear: BandedLinear, damping: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> FlatStep:
    """The damped step (module docstring): ``damping`` (total,) Marquardt's diagonal Lambda over the flat
    columns; lo, hi (n_tail,): the box of the tail columns' step, in the layout's tail order.

    Raises ``numpy.linalg.LinAlgError`` where the damped band is not positive definite to round-off."""
    layout, normal = linear.layout, linear.normal
    nb, nt = layout.n_band, layout.n_tail
    ordered = np.empty(nb + nt)
    ordered[layout.position] = damping
    g = np.empty(nb + nt)
    g[layout.position] = normal.gradient
    band = normal.band.copy()
    band[0] += ordered[:nb]
    factor = cholesky_banded(band, lower=True, check_finite=False)
    solved = cho_solve_banded((factor, True), np.column_stack([normal.coupling, g[:nb]]), check_finite=False)
    x = np.empty(nb + nt)
    if nt:
        schur = normal.tail + np.diag(ordered[nb:]) - normal.coupling.T @ solved[:, :nt]
        schur = 0.5 * (schur + schur.T)
        eta = -(g[nb:] - normal.coupling.T @ solved[:, nt])
        x[nb:] = box_qp(schur, eta, lo, hi).x
        x[:nb] = -(solved[:, nt] + solved[:, :nt] @ x[nb:])
    else:
        x[:nb] = -solved[:, 0]
    return FlatStep(x[layout.position])


__all__ = ["BAND_LIMIT", "BandLayout", "BandedLinear", "FlatStep", "NormalEquations", "banded_step",
           "normal_equations"]
