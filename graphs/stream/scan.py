"""The elimination of a regular chain update in one compiled scan (:func:`eliminate_regular`), and the rows of
a :class:`~mbfg.graphs.stream.chain.ChainWindow` update that it takes (:func:`regular_rows`).

The chain smoother (:mod:`mbfg.graphs.stream.chain`) eliminates its states oldest first; where an update's
factors are factor groups lying alike on every new state (any number of kinds, one state or two consecutive
ones each), their whitened rows stack into per-state arrays and the QR of each state runs in one
``jax.lax.scan``: the same least squares as the NumPy loop, one call.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from mbfg._jax import jax, jnp

#: A state's column is determined where its triangular factor's diagonal entry exceeds this fraction of the
#: column's norm in the rows stacked for its QR: the part of the column independent of the columns before it.
#: Relative to each column, not to the largest entry of R: with rigid joints (compliance 1e-10 m/N) the joint
#: rows weigh about 1/eps more than the readings, and a test against max |R| took every column the readings
#: determine for an undetermined one.
DETERMINED = 1e-13


@dataclass
class Block:
    """Whitened rows of N factors of one kind, each on ``span`` consecutive states from ``first[i]``:
    ``A[i] [delta_first; delta_first+1] = b[i]`` in the least-squares sense. A: (N, m, span * n), b: (N, m)."""

    first: np.ndarray
    span: int
    A: np.ndarray
    b: np.ndarray
    grouped: bool = True  # the rows of a factor group (one kind); False: a single GTSAM factor


def regular_rows(blocks: Sequence[Block], first: int, last: int, frontier: np.ndarray | None
                  ) -> tuple[np.ndarray, ...] | None:
    """The arrays of :func:`eliminate_regular` when the update is a plain extension of the chain: a
    frontier on state ``first``, factor groups of any number of kinds, each kind's rows between consecutive
    states of the update (binary) or on its new states (unary), at most one row set per kind and state
    (missing ones as zeros), and binary rows of at least a state's dimension per step. None otherwise (a
    start, a factor on the frontier state alone, a gap's single factors: their count of blocks varies)."""
    if frontier is None or last - first < 2:  # one new state: NumPy's two QRs cost less than a call
        return None
    if not all(block.grouped for block in blocks):
        return None
    L, n = last - first, frontier.shape[1] - 1
    binary = [b for b in blocks if b.span == 2]
    unary = [b for b in blocks if b.span == 1]
    if not binary or sum(block.b.shape[1] for block in binary) < n:
        return None  # the scan carries n rows to the next state: the binary rows must leave them

    def stacked(kind: list[Block], offset: int, width: int) -> tuple[np.ndarray, np.ndarray] | None:
        """Each kind's rows at their steps (idx = block.first - first - offset in 0 .. L - 1), side by side."""
        m = sum(block.b.shape[1] for block in kind)
        A, b = np.zeros((L, m, width)), np.zeros((L, m))
        row = 0
        for block in kind:
            idx = block.first - first - offset
            if np.any(idx < 0) or np.any(idx >= L) or len(np.unique(idx)) != len(idx):
                return None
            m_k = block.b.shape[1]
            A[idx, row : row + m_k], b[idx, row : row + m_k] = block.A, block.b
            row += m_k
        return A, b

    pair, single = stacked(binary, 0, 2 * n), stacked(unary, 1, n)
    if pair is None or single is None:
        return None
    carried = np.zeros((n, n + 1))
    carried[: len(frontier)] = frontier
    return carried, *pair, *single


@jax.jit
def eliminate_regular(carried: jnp.ndarray, A: jnp.ndarray, b: jnp.ndarray, A_u: jnp.ndarray, b_u: jnp.ndarray
                       ) -> tuple[jnp.ndarray, jnp.ndarray, jnp.ndarray, jnp.ndarray, jnp.ndarray]:
    """QR elimination along the chain in one compiled scan (the regular case of :func:`regular_rows`).

    Args:
        carried: (n, n + 1) [R | d] on the first state (the old frontier, zero rows below its rank).
        A, b: (L, m, 2n), (L, m) the binary rows between states i and i + 1 (L new states).
        A_u, b_u: (L, m_u, n), (L, m_u) the unary rows on each new state i + 1.
    Returns:
        G (L, n, n), a (L, n): the conditionals ``delta_i = a_i - G_i delta_i+1``; R (L, n, n) their
        square-root information; the frontier (n, n + 1) on the newest state; ok (L + 1,): each state's
        triangular factor has no zero on its diagonal.
    """
    n = carried.shape[0]
    m_u = A_u.shape[1]

    def determined(R: jnp.ndarray, M: jnp.ndarray) -> jnp.ndarray:
        return jnp.all(jnp.abs(jnp.diag(R[:n, :n])) > DETERMINED * jnp.linalg.norm(M[:, :n], axis=0))

    # One QR per state: state i's rows are what elimination left on it (n rows), its own unary rows and
    # the binary rows to state i + 1, stacked (the same least squares as two QRs, half the LAPACK calls).
    unary = jnp.concatenate([A_u, b_u[:, :, None]], axis=2)  # (L, m_u, n + 1): on states 1 .. L
    unary_on_i = jnp.concatenate([jnp.zeros((1, m_u, n + 1)), unary[:-1]])  # the old frontier's are in carried

    def step(carry: jnp.ndarray, rows: tuple[jnp.ndarray, ...]) -> tuple[jnp.ndarray, tuple[jnp.ndarray, ...]]:
        A_i, b_i, U_i = rows
        on_i = jnp.concatenate([carry, U_i])
        top = jnp.concatenate([on_i[:, :n], jnp.zeros((n + m_u, n)), on_i[:, n:]], axis=1)
        M = jnp.concatenate([top, jnp.concatenate([A_i, b_i[:, None]], axis=1)])
        R = jnp.linalg.qr(M, mode="r")
        sol = jax.scipy.linalg.solve_triangular(R[:n, :n], R[:n, n:])
        return R[n : 2 * n, n:], (sol[:, :n], sol[:, n], R[:n, :n], determined(R, M))

    carry, (G, a, R, ok) = jax.lax.scan(step, carried, (A, b, unary_on_i))
    M_f = jnp.concatenate([carry, unary[-1]])
    R_f = jnp.linalg.qr(M_f, mode="r")[:n]
    return G, a, R, R_f, jnp.concatenate([ok, determined(R_f, M_f)[None]])


__all__ = ["DETERMINED", "Block", "eliminate_regular", "regular_rows"]
