"""The chain's conditionals in LAPACK's banded storage: a back-substitution in one call.

Eliminated oldest first, the chain smoother (:mod:`mbfg.graphs.stream.chain`) leaves each window state
``j`` but the newest a conditional ``delta_j + G_j delta_j+1 = a_j`` (G: (n, n), n the state's tangent
dimension). Stacked, they are one unit upper-triangular system with ``2n - 1`` diagonals above the
main one, which LAPACK's ``dtbtrs`` solves in one call. Solved state by state in Python instead, the
window's ~100 states made the back-substitution a fixed cost of every update larger than its
arithmetic (``python benchmarks/stream.py --only timing`` splits an update's time).

The band is kept across updates: a state's block is written when its conditional is set, and
marginalizing the oldest states only moves the window's start. Row ``r`` of ``G_j`` lies in the
columns of state ``j + 1``: in LAPACK's storage of an upper band with ``kd`` superdiagonals,
``ab[kd + i - c, c] = A[i, c]``, so ``G_j[r, c]`` is at ``ab[n - 1 + r - c, (j + 1) n + c]``. The
entries a window's first column block holds from a state marginalized before it lie above the
window's matrix, where LAPACK does not read.
"""

from __future__ import annotations

import numpy as np
from scipy.linalg.lapack import dtbtrs


class ConditionalBand:
    """The conditionals of the window's states, by window position (0: the oldest state).

    Args:
        n: the tangent dimension of every state.
        capacity: the states the storage holds before it grows (it doubles; marginalized states' room
            is reused by moving the window back to the start).
    """

    def __init__(self, n: int, capacity: int = 256) -> None:
        self.n = n
        self._kd = 2 * n - 1
        self._ab = np.zeros((self._kd + 1, capacity * n), order="F")
        self._rhs = np.zeros(capacity * n)
        self._start = 0  # the storage slot of window position 0
        self._count = 0  # the window positions in use

    def set(self, first: int, G: np.ndarray, a: np.ndarray) -> None:
        """The conditionals of window positions ``first`` .. ``first + L - 1``: G (L, n, n), a (L, n)."""
        L = len(a)
        self._reserve(first + L + 1)  # G_j's entries lie in the columns of position j + 1
        slot = self._start + first
        self._blocks()[slot : slot + L] = np.swapaxes(G, 1, 2)
        self._rhs[slot * self.n : (slot + L) * self.n] = np.ravel(a)
        self._count = max(self._count, first + L + 1)

    def G(self, position: int) -> np.ndarray:
        """The conditional's G (n, n) of window position ``position`` (a view into the storage)."""
        return self._blocks()[self._start + position].T

    def shift(self, position: int, delta: np.ndarray) -> None:
        """The conditional of window position ``position`` about the next state's point moved by ``delta`` (n,):
        ``a -= G delta`` (its G unchanged)."""
        lo = (self._start + position) * self.n
        self._rhs[lo : lo + self.n] -= self.G(position) @ delta

    def _blocks(self) -> np.ndarray:
        """The storage as a view V (slots, n, n) with ``V[s, c, r] = G_s[r, c]``: column c of G_s is the
        contiguous run of rows n - 1 - c .. 2n - 2 - c of the storage's column (s + 1) n + c."""
        n, ld = self.n, self._kd + 1
        item = self._ab.itemsize
        start = self._ab[n - 1 :, n:]  # G_0[0, 0]: row n - 1 of column n
        return np.lib.stride_tricks.as_strided(start, shape=(self._ab.shape[1] // n - 1, n, n),
                                               strides=(n * ld * item, (ld - 1) * item, item), writeable=True)

    def drop(self, count: int) -> None:
        """Forget the ``count`` oldest window positions (marginalized states)."""
        self._start += count
        self._count = max(self._count - count, 0)

    def solve(self, count: int, delta_last: np.ndarray) -> np.ndarray:
        """Every window state's update (count, n), newest to oldest from ``delta_last`` (the newest's, (n,))
        through the conditionals of positions 0 .. count - 2."""
        n = self.n
        self._reserve(count)
        lo, hi = self._start * n, (self._start + count) * n
        rhs = self._rhs[lo:hi].copy()
        rhs[-n:] = delta_last
        x, info = dtbtrs(self._ab[:, lo:hi], rhs[:, None], uplo="U", trans="N", diag="U")
        if info != 0:  # a unit diagonal cannot be singular: only a malformed call gets here
            raise ValueError(f"dtbtrs: argument {-info} is illegal")
        return x.reshape(count, n)

    def _reserve(self, positions: int) -> None:
        """Room in the storage for window positions 0 .. ``positions`` - 1."""
        if self._start + positions <= self._ab.shape[1] // self.n:
            return
        n, live = self.n, max(self._count, positions)
        capacity = max(self._ab.shape[1] // n, 2 * live)
        ab = np.zeros((self._kd + 1, capacity * n), order="F")
        rhs = np.zeros(capacity * n)
        kept = min(self._count, self._ab.shape[1] // n - self._start)
        ab[:, : kept * n] = self._ab[:, self._start * n : (self._start + kept) * n]
        rhs[: kept * n] = self._rhs[self._start * n : (self._start + kept) * n]
        self._ab, self._rhs, self._start = ab, rhs, 0
