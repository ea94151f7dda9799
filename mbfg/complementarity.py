"""The complementarity multipliers of inverse dynamics in closed form (Marklund et al. (2025) eq. 2.31, 2.24).

In the inverse-dynamics impulse residual (Marklund et al. (2025) eqs. 3.6-3.7) the next
velocity v_{k+1} is a variable, not an unknown of the step, so the mixed LCP of
the Spook stepper loses its coupling through the mass matrix: what is left,

    Sigma_B lam_B + q = w_B >= 0,   lam_B >= 0,   lam_B . w_B = 0,   q = b + B v_{k+1},

splits into independent groups, one per frictional hinge (F.4) or contact
(2.21, 2.24), each of which has a closed-form solution. A group holds

- normal rows N (a contact's gap row; a frictional hinge's constraint rows
  written twice, +g >= 0 and -g >= 0) with a diagonal Sigma_NN and nothing
  else in their rows of Sigma_B, so ``lam_N = max(0, -q_N) / diag(Sigma_NN)``;
- m tangent directions written as 2m rows, ``+d_i`` then ``-d_i``
  (``q_T = [omega; -omega]``, omega = D v_{k+1} the slip rates), with compliance
  eps_t on the diagonal and +1 in the bound's column (E);
- one bound row ``U lam_N - E^T lam_T + Delta sigma + q_sigma = w_sigma`` (U = the friction
  coefficients on the normal multipliers, Delta the regularization, q_sigma = b_sigma a
  load-independent bound: 0 in Marklund et al. (2025), ``h F_c`` for a Coulomb force F_c).

With the friction bound f = U lam_N + q_sigma, the tangent rows give
``lam_T+_i = max(0, -omega_i - sigma) / eps_t`` and ``lam_T-_i = max(0, omega_i - sigma) / eps_t``,
and sigma is the root of the decreasing, convex, piecewise-linear

    phi(sigma) = sum_i max(0, |omega_i| - sigma) / eps_t - f - Delta sigma,

or 0 where phi(0) <= 0 (sticking). phi is the maximum over the subsets S of the
directions of the lines ``(sum_{i in S} |omega_i| - |S| sigma) / eps_t - f - Delta sigma``,
so its root is the largest of their roots,
``sigma = max(0, max_S (sum_{i in S} |omega_i| - eps_t f) / (|S| + eps_t Delta))``.
This is the LCP's unique solution (the group's matrix is a P-matrix: positive
diagonal plus a skew-symmetric coupling), so nothing is approximated: the
tests compare it with Lemke's method (:func:`mbfg.lcp.solve_lcp`) on random
groups. JAX differentiates the max / abs branches directly, which gives the
derivative of the active set the solution has, as App. D.1's implicit rule does.
It costs a few dozen operations per group, with no loop; the pivoting solver
stays in the stepper (:mod:`mbfg.spook`), where the groups couple through M.
"""

from __future__ import annotations

import itertools
from typing import NamedTuple

import numpy as np

from mbfg._jax import jax, jnp


class Group(NamedTuple):
    """Row indices (into the complementarity rows B) of one friction group; static NumPy ints.

    normals: (n_N,); plus, minus: (m,) the +d_i and -d_i tangent rows; bound: the sigma row.
    """

    normals: np.ndarray
    plus: np.ndarray
    minus: np.ndarray
    bound: int


class GroupData(NamedTuple):
    """The entries of Sigma_B that one group uses, without the dense matrix (its zeros carry
    derivatives too: a dense (n_B, n_B) Sigma_B made the impulse Jacobian several times dearer).

    sigma_N: (n_N,) diagonal of the normal rows; U: (n_N,) the bound row's friction coefficients on
    them; eps_t: (m,) the tangent rows' compliance (the same for +d_i and -d_i); delta: the bound's
    regularization Delta.
    """

    sigma_N: jnp.ndarray
    U: jnp.ndarray
    eps_t: jnp.ndarray
    delta: jnp.ndarray


def group(normals: slice, tangents_start: int, m: int) -> Group:
    """The :class:`Group` whose 2m tangent rows start at ``tangents_start`` (+ rows first), bound right after."""
    plus = np.arange(tangents_start, tangents_start + m)
    return Group(np.arange(normals.start, normals.stop), plus, plus + m, tangents_start + 2 * m)


def _subsets(m: int) -> np.ndarray:
    """(2^m - 1, m) 0/1 indicators of the nonempty subsets of m directions (m is 1 or 2 in practice)."""
    return np.array([s for s in itertools.product((0.0, 1.0), repeat=m) if any(s)])


class Batch(NamedTuple):
    """G friction groups of one shape (n_N normals, m directions), solved as one vectorized expression.

    rows: (G, n_N + 2m + 1) static row indices into B of each group, in the order [normals, plus, minus, bound].
    """

    rows: np.ndarray
    n_N: int
    m: int


def _solve_local(q_N: jnp.ndarray, q_bound: jnp.ndarray, omega: jnp.ndarray, data: GroupData
                 ) -> tuple[jnp.ndarray, jnp.ndarray, jnp.ndarray]:
    """One group's (lam_N (n_N,), lam_T (2m,) [plus; minus], sigma) from its rows' q: normals q_N (n_N,), the
    bound's q_bound, the slip rates omega = q_plus (m,) (module docstring)."""
    lam_N = jnp.maximum(-q_N, 0.0) / data.sigma_N
    # The friction bound: U lam_N, plus the bound row's own q (its b; a load-independent bound such as
    # a slider's h F_c, 0 for Marklund et al.'s (2025) friction, whose bound grows with the normal impulses only).
    f = data.U @ lam_N + q_bound
    a = jnp.abs(omega)
    S = jnp.asarray(_subsets(omega.shape[0]))
    # Per subset of directions, the root of its line: (sum |omega_i| / eps_i - f) / (sum 1 / eps_i + Delta).
    roots = (S @ (a / data.eps_t) - f) / (S @ (1.0 / data.eps_t) + data.delta)
    sigma = jnp.maximum(jnp.max(roots), 0.0)
    lam_plus = jnp.maximum(-omega - sigma, 0.0) / data.eps_t
    lam_minus = jnp.maximum(omega - sigma, 0.0) / data.eps_t
    return lam_N, jnp.concatenate([lam_plus, lam_minus]), sigma


def solve_group(q: jnp.ndarray, g: Group, data: GroupData) -> tuple[jnp.ndarray, jnp.ndarray, jnp.ndarray]:
    """One group's multipliers from the LCP's q (n_B,) and the group's entries of Sigma_B.

    Returns (lam_N (n_N,), lam_T (2m,) in the order [plus; minus], sigma scalar), in the units
    of q over those of Sigma_B (impulses [N s, N m s] in the stepper's rows).
    """
    return _solve_local(q[g.normals], q[g.bound], q[g.plus], data)


def solve_batch(q_local: jnp.ndarray, batch: Batch, data: GroupData) -> jnp.ndarray:
    """(G, n_N + 2m + 1) multipliers [lam_N, lam_T+, lam_T-, sigma] of the batch's G groups, from their rows' q
    ``q_local`` (G, n_N + 2m + 1) in the same order; ``data`` holds each field with a leading axis G."""
    n_N, m = batch.n_N, batch.m
    lam_N, lam_T, sigma = jax.vmap(_solve_local)(q_local[:, :n_N], q_local[:, -1], q_local[:, n_N : n_N + m], data)
    return jnp.concatenate([lam_N, lam_T, sigma[:, None]], axis=1)


def solve_batches(q: jnp.ndarray, batches: tuple[Batch, ...], data: tuple[GroupData, ...], order: np.ndarray
                  ) -> jnp.ndarray:
    """lam_B (n_B,) of LCP(Sigma_B, q) for rows made of independent friction groups stacked in ``batches`` (one
    vectorized expression per batch, never per group); ``order`` (n_B,) places row i of B at entry
    ``order[i]`` of the batches' flattened multipliers (every row belongs to exactly one group)."""
    if not batches:
        return jnp.zeros(q.shape[0])
    local = [solve_batch(_take(q, b.rows.reshape(-1)).reshape(b.rows.shape), b, d).reshape(-1)
             for b, d in zip(batches, data)]  # a loop over batches (group shapes: a small constant), not groups
    return _take(jnp.concatenate(local) if len(local) > 1 else local[0], order)


def batch_groups(groups: tuple[Group, ...]) -> tuple[tuple[Batch, ...], list[list[int]], np.ndarray]:
    """The groups as batches of one shape each: (batches, for each batch the indices of its groups in ``groups``,
    order (n_B,) as :func:`solve_batches` takes it, n_B the rows the groups hold)."""
    by_shape: dict[tuple[int, int], list[int]] = {}
    for k, g in enumerate(groups):
        by_shape.setdefault((len(g.normals), len(g.plus)), []).append(k)
    batches, members, flat = [], [], []
    for (n_N, m), ks in by_shape.items():
        rows = np.array([np.concatenate([groups[k].normals, groups[k].plus, groups[k].minus, [groups[k].bound]])
                         for k in ks], dtype=np.int64).reshape(len(ks), n_N + 2 * m + 1)
        batches.append(Batch(rows, n_N, m))
        members.append(ks)
        flat.append(rows.reshape(-1))
    flat_rows = np.concatenate(flat) if flat else np.zeros(0, dtype=np.int64)
    order = np.zeros(len(flat_rows), dtype=np.int64)
    order[flat_rows] = np.arange(len(flat_rows))
    return tuple(batches), members, order


def solve(q: jnp.ndarray, groups: tuple[Group, ...], data: tuple[GroupData, ...]) -> jnp.ndarray:
    """lam_B (n_B,) of LCP(Sigma_B, q) for rows made of independent friction ``groups`` (module docstring).

    The groups are stacked into batches of one shape (:func:`batch_groups`) and solved by :func:`solve_batches`;
    rows of q that no group holds get 0."""
    batches, members, order = batch_groups(groups)
    stacked = tuple(GroupData(*(jnp.stack([jnp.asarray(data[k][f]) for k in ks]) for f in range(4)))
                    for ks in members)
    held = np.zeros(q.shape[0], dtype=bool)
    held[[int(r) for b in batches for r in b.rows.reshape(-1)]] = True
    if held.all():
        return solve_batches(q, batches, stacked, order)
    lam = jnp.zeros(q.shape[0])
    rows = np.flatnonzero(held)
    return lam.at[rows].set(solve_batches(q, batches, stacked, order[rows]))


def _take(x: jnp.ndarray, index: np.ndarray) -> jnp.ndarray:
    from mbfg.rigid.arrays import take  # the rigid package imports this module

    return take(x, index)


__all__ = ["Batch", "Group", "GroupData", "batch_groups", "group", "solve", "solve_batch", "solve_batches", "solve_group"]
