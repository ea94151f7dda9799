"""Redundant constraints: the numerical rank of Phi_q, its dependent rows, and the
fixed-rank pseudo-inverse that the planar solves use when rows are redundant.

A redundant row (a parallelogram's third crank, a loop closed twice) is dependent on
the others identically on the constraint manifold. Off it (a solver's iterate) the
rows are only nearly dependent, with a singular value of the order of the distance
to the manifold; so the solves drop a fixed number of singular directions (the
mechanism's count of redundant rows, decided once at q0), never those under a
threshold, which would invert that tiny value once it passed the threshold.
"""

from __future__ import annotations

from functools import partial

import numpy as np

from mbfg._jax import jax, jnp

#: Relative tolerance of the numerical rank of Phi_q at q0: a singular value below
#: RANK_RTOL times the largest counts as zero.
#: A redundant row's singular value is float64 round-off (~1e-16 relative); a genuine one
#: of a mechanism away from a singular pose is many orders above 1e-9.
RANK_RTOL = 1e-9



def numerical_rank(J: np.ndarray, rtol: float = RANK_RTOL) -> int:
    """Rank of J (m, n): its singular values above ``rtol`` times the largest."""
    if J.size == 0:
        return 0
    s = np.linalg.svd(J, compute_uv=False)
    return int(np.sum(s > rtol * s[0])) if s[0] > 0 else 0


def dependent_rows(J: np.ndarray, rank: int) -> np.ndarray:
    """Indices (m - rank,) of rows of J (m, n) that depend on the others: the rows QR with
    column pivoting on J^T leaves for last (the first ``rank`` pivots span the row space)."""
    import scipy.linalg

    if rank >= J.shape[0]:
        return np.zeros(0, dtype=np.int32)
    _, _, piv = scipy.linalg.qr(J.T, pivoting=True)
    return np.sort(piv[rank:]).astype(np.int32)


def singular_pose_rank(phi_q, solve_position, q0: np.ndarray, rank: int, step: float) -> int:
    """Rank of Phi_q at an assembled configuration about ``step`` away from q0 along its
    null space: larger than ``rank`` when q0 is a singular pose (a rank drop there only),
    equal when the rank deficiency is structural (redundant rows).

    Args:
        phi_q: q (n,) -> Phi_q (m, n); solve_position: q guess (n,) -> assembled q (n,).
        q0: (n,) the initial configuration; rank: the rank of Phi_q at q0.
        step: length of the move [m or rad], small against the mechanism, large against round-off.
    """
    _, _, vt = np.linalg.svd(phi_q(q0), full_matrices=True)
    null = vt[rank:].T  # (n, n - rank): every direction the linearization lets q0 move in
    q1 = solve_position(q0 + step * null.sum(axis=1) / np.sqrt(null.shape[1]))
    return numerical_rank(phi_q(q1))


@partial(jax.custom_jvp, nondiff_argnums=(1,))
def pinv_drop(a: jnp.ndarray, drop: int) -> jnp.ndarray:
    """Pseudo-inverse (n, m) of a (m, n) with its ``drop`` smallest singular values taken as zero.

    ``drop`` is a Python int (static). Its JVP is Golub and Pereyra's derivative of
    the pseudo-inverse at constant rank (SIAM J. Numer. Anal. 10, 1973),
    so nothing differentiates the SVD itself (whose derivative is undefined at
    repeated zero singular values).
    """
    u, s, vh = jnp.linalg.svd(a, full_matrices=False)
    r = s.shape[0] - drop
    return (vh[:r].T / s[:r]) @ u[:, :r].T


@pinv_drop.defjvp
def _pinv_drop_jvp(drop: int, primals: tuple, tangents: tuple) -> tuple:
    (a,), (da,) = primals, tangents
    p = pinv_drop(a, drop)
    m, n = a.shape
    dp = (-p @ da @ p + p @ p.T @ da.T @ (jnp.eye(m) - a @ p)
          + (jnp.eye(n) - p @ a) @ da.T @ p.T @ p)
    return p, dp
