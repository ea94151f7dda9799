"""Exact linear complementarity solver in pure JAX, with an implicit derivative.

Problem. LCP(M, q): given ``M`` (n, n) and ``q`` (n,), find ``z`` (n,) with

    z >= 0,    w = M z + q >= 0,    z_i w_i = 0 for every i.

In the Spook time-stepper ``z`` collects contact and friction impulses (or
multipliers) and ``w`` the matching gap / slip velocities; the module itself is
unit-agnostic: ``z`` has the units of ``q`` divided by those of ``M``, ``w`` the
units of ``q``.

Algorithm. Lemke's complementary pivoting method with an artificial variable
``z0`` and covering vector ``d = 1`` (Cottle, Pang & Stone, *The Linear
Complementarity Problem*, sec. 4.4; Murty & Yu, ch. 2). The dense tableau
``[I, -M, -d, q]`` of fixed shape (n, 2n + 2) is pivoted inside a
``jax.lax.while_loop``, so the solver is jit-, vmap- and jvp-compatible and never
branches in Python on array values. The ratio test is lexicographic (rows of the
basis inverse, which the tableau carries in its first n columns, break ties),
preferring ``z0`` to leave whenever it ties; this is the standard rule that
keeps Lemke from cycling on degenerate problems. If ``q >= 0`` the answer is
``z = 0`` with zero pivots.

When Lemke stops without a solution. The method ends either with ``z0`` leaving
the basis (a solution) or on a *secondary ray* (the entering column has no
positive entry). For P-matrices (including symmetric positive definite and
nonsymmetric positive definite matrices) and for copositive-plus matrices such
as the regularised Stewart-Trinkle / Anitescu-Potra frictional-contact matrices
the ray cannot occur when the LCP is feasible, and for the first two classes
and the strictly copositive regularised contact matrices a solution exists for
every ``q``. Outside these classes a secondary ray means "no solution found"
(the LCP may be infeasible). The pivot limit ``max_pivots`` is a safeguard
against round-off-induced cycling. In both failure cases ``ok`` is False and
``z`` is the last complementary iterate, which is *not* a solution; callers
must check ``ok``.

Derivative rule (Marklund et al. (2025), Appendix D.1). At a solution let
``alpha = {i : z_i > w_i}`` (the active set, basic ``z``) and ``beta`` its
complement. Under a small perturbation of ``(M, q)`` the active set persists,
so ``z_beta_dot = 0`` and ``(M_dot z + M z_dot + q_dot)_alpha = 0``, i.e.
``M_{alpha,alpha} z_alpha_dot = -(M_dot z + q_dot)_alpha``. With fixed shapes,
using the 0/1 indicator ``a`` of ``alpha``:

    K = diag(a) M diag(a) + diag(1 - a),    K z_dot = -a * (M_dot z + q_dot),

and ``w_dot = M_dot z + M z_dot + q_dot``. The rule is exact where strict
complementarity holds (``z_i + w_i > 0`` for all i); at degenerate points it
returns the one-sided derivative for the active set above. Being linear in the
tangents, it is also transposable, so reverse mode (``jax.grad``) works.
"""

from __future__ import annotations

from typing import NamedTuple

from mbfg._jax import jax, jnp
from mbfg.errors import MbfgError

__all__ = ["LCPSolution", "solve_lcp"]

_RUNNING, _SOLVED, _RAY = 0, 1, 2


class LCPSolution(NamedTuple):
    """Result of :func:`solve_lcp`.

    Attributes:
        z: (n,) complementary variable, units of ``q`` / units of ``M``.
        w: (n,) slack ``M z + q``, units of ``q``.
        ok: bool scalar; True iff Lemke terminated with ``z0`` leaving the basis
            (or ``q >= 0``). False on a secondary ray or at the pivot limit, in
            which case ``z`` and ``w`` are not a solution.
        pivots: int32 scalar, number of tableau pivots performed (0 if ``q >= 0``).
    """

    z: jnp.ndarray
    w: jnp.ndarray
    ok: jnp.ndarray
    pivots: jnp.ndarray


def _pivot(T: jnp.ndarray, r: jnp.ndarray, c: jnp.ndarray | int) -> jnp.ndarray:
    """Gauss-Jordan pivot of tableau ``T`` on entry (r, c)."""
    prow = T[r] / T[r, c]
    # x / x == 1 exactly in IEEE arithmetic, so column c becomes an exact unit vector.
    return (T - jnp.outer(T[:, c], prow)).at[r].set(prow)


def _pivot_unless(T: jnp.ndarray, r: jnp.ndarray, col: jnp.ndarray, skip: jnp.ndarray) -> jnp.ndarray:
    """:func:`_pivot` of ``T`` on (r, c), ``col = T[:, c]``, or ``T`` itself where ``skip``.

    One elementwise expression over the tableau, which XLA fuses into a single pass: the pivot is the
    loop's whole cost on large problems, and a select between two pivoted copies reads T three times.
    """
    prow = T[r] / col[r]
    row_r = jnp.arange(T.shape[0]) == r
    factor = jnp.where(skip, 0.0, jnp.where(row_r, 0.0, col))
    keep_r = jnp.where(skip, T[r], prow)
    return jnp.where(row_r[:, None], keep_r[None, :], T - factor[:, None] * prow[None, :])


def _lex_min_ratio_row(
    T: jnp.ndarray, basis: jnp.ndarray, col: jnp.ndarray, cand: jnp.ndarray, ratio_tol: float
) -> jnp.ndarray:
    """Leaving row of the lexicographic minimum-ratio test for entering column ``col``.

    ``cand`` marks rows with a positive pivot entry (at least one is True).
    """
    n = T.shape[0]
    safe_col = jnp.where(cand, col, 1.0)
    col_max = jnp.max(jnp.where(cand, col, 0.0))

    def keep_minimisers(ties: jnp.ndarray, values: jnp.ndarray) -> jnp.ndarray:
        ratios = values / safe_col
        rmin = jnp.min(jnp.where(ties, ratios, jnp.inf))
        # Ratios carry round-off; a tie is a ratio within a relative tolerance of the
        # minimum, with a floor in the ratio's own scale so that exact-zero
        # (degenerate) ratios still tie with round-off-sized ones.
        atol = ratio_tol * (jnp.abs(rmin) + jnp.max(jnp.abs(values)) / col_max)
        return ties & (ratios <= rmin + atol)

    ties = keep_minimisers(cand, T[:, -1])
    # Letting z0 leave as soon as it is among the minimisers ends the method with a
    # solution; any other choice may only prolong it.
    z0_row = basis == 2 * n
    z0_ties = jnp.any(ties & z0_row)
    ties = jnp.where(z0_ties, z0_row, ties)
    # Rows of B^-1 are linearly independent, so after at most n more stages one row
    # remains: this is what rules out cycling on degenerate problems. A stage keeps a
    # lone row (its own ratio is the minimum), so stopping as soon as one is left picks
    # the row the n stages would: without a tie (the usual case) no stage runs.
    def more_than_one(carry: tuple[jnp.ndarray, jnp.ndarray]) -> jnp.ndarray:
        j, t = carry
        return (j < n) & (jnp.sum(t) > 1)

    def stage(carry: tuple[jnp.ndarray, jnp.ndarray]) -> tuple[jnp.ndarray, jnp.ndarray]:
        j, t = carry
        return j + 1, keep_minimisers(t, T[:, j])

    _, ties = jax.lax.while_loop(more_than_one, stage, (jnp.asarray(0, jnp.int32), ties))
    return jnp.argmax(ties)  # first True: smallest index if round-off left a tie


def _lemke(
    M: jnp.ndarray, q: jnp.ndarray, max_pivots: int, pivot_tol: float, ratio_tol: float
) -> tuple[jnp.ndarray, jnp.ndarray, jnp.ndarray]:
    """Lemke's method on the tableau [I, -M, -1, q]; returns (z, ok, pivots).

    Tableau columns: 0..n-1 are w, n..2n-1 are z, 2n is z0, 2n+1 the right-hand side.
    ``basis[i]`` is the column index of the variable basic in row i.
    """
    n = q.shape[0]
    dtype = jnp.result_type(M.dtype, q.dtype, jnp.float64)
    M = M.astype(dtype)
    q = q.astype(dtype)
    z0_col = 2 * n
    T = jnp.concatenate([jnp.eye(n, dtype=dtype), -M, -jnp.ones((n, 1), dtype), q[:, None]], axis=1)
    basis = jnp.arange(n)

    trivial = jnp.all(q >= 0)
    # z0 enters at the level -min(q) that makes every w nonnegative; the row of the
    # most negative q leaves. Taking the last of tied rows makes the resulting
    # tableau lexico-positive (rows (q_i - q_r, e_i - e_r) with i < r lead with +1),
    # which the lexicographic rule needs.
    is_min = q <= jnp.min(q)
    r0 = n - 1 - jnp.argmax(is_min[::-1])
    T = jnp.where(trivial, T, _pivot(T, r0, z0_col))
    basis = jnp.where(trivial, basis, basis.at[r0].set(z0_col))
    state = (
        T,
        basis,
        n + r0,  # the complement of the w that just left enters next
        jnp.where(trivial, 0, 1).astype(jnp.int32),
        jnp.where(trivial, _SOLVED, _RUNNING).astype(jnp.int32),
    )

    def cond(state):
        _, _, _, pivots, status = state
        return (status == _RUNNING) & (pivots < max_pivots)

    def body(state):
        T, basis, entering, pivots, status = state
        col = T[:, entering]
        # Relative threshold: pivot entries are compared to the column's own scale
        # so that scaling M (e.g. changing impulse units) does not change the path.
        cand = col > pivot_tol * jnp.max(jnp.abs(col))
        ray = ~jnp.any(cand)
        r = _lex_min_ratio_row(T, basis, col, cand | ray, ratio_tol)
        leaving = basis[r]
        T_new = _pivot_unless(T, r, col, ray)
        basis_new = jnp.where(ray, basis, basis.at[r].set(entering))
        complement = jnp.where(leaving < n, leaving + n, leaving - n)
        status_new = jnp.where(ray, _RAY, jnp.where(leaving == z0_col, _SOLVED, _RUNNING))
        return (
            T_new,
            basis_new,
            complement,
            pivots + jnp.where(ray, 0, 1).astype(jnp.int32),
            status_new.astype(jnp.int32),
        )

    T, basis, _, pivots, status = jax.lax.while_loop(cond, body, state)
    values = jnp.zeros(2 * n + 1, dtype).at[basis].set(T[:, -1])
    # Basic values are nonnegative by the ratio test up to round-off; clipping keeps
    # z >= 0 exact, which downstream friction cones rely on.
    z = jnp.maximum(values[n : 2 * n], 0.0)
    return z, status == _SOLVED, pivots


def _active_set_matrix(M: jnp.ndarray, a: jnp.ndarray) -> jnp.ndarray:
    """K = diag(a) M diag(a) + diag(1 - a): M_{alpha,alpha} embedded in the identity."""
    return a[:, None] * M * a[None, :] + jnp.diag(1.0 - a)


def _solve(K: jnp.ndarray, b: jnp.ndarray) -> jnp.ndarray:
    """Solve ``K x = b`` (K (n, n), b (n,)) by LU with partial pivoting, written in JAX loops.

    Not ``jnp.linalg.solve``: jaxlib 0.10's CPU LAPACK LU, once batched by ``vmap``
    (the estimation graphs linearize thousands of impulse factors in one call),
    runs its batch on XLA's intra-op thread pool and can deadlock there when that
    pool is small (2 cores). For the small LCPs of contact and friction (tens of
    rows) the loops cost about what the LAPACK call does. The factorization uses
    K only and the substitutions are linear in b, so JAX can transpose the solve
    (reverse mode through the derivative rule). A zero pivot gives non-finite
    entries, as LU does.
    """
    n = K.shape[0]
    idx = jnp.arange(n)

    def eliminate(j, carry):
        LU, perm = carry
        p = jnp.argmax(jnp.where(idx >= j, jnp.abs(LU[:, j]), -1.0))
        LU = LU.at[p].set(LU[j]).at[j].set(LU[p])
        perm = perm.at[p].set(perm[j]).at[j].set(perm[p])
        multipliers = jnp.where(idx > j, LU[:, j] / LU[j, j], 0.0)
        LU = LU - multipliers[:, None] * jnp.where(idx > j, LU[j], 0.0)[None, :]
        return LU.at[:, j].set(jnp.where(idx > j, multipliers, LU[:, j])), perm

    LU, perm = jax.lax.fori_loop(0, n, eliminate, (K, idx))

    def forward(i, y):  # L y = P b, L unit lower triangular
        return y.at[i].add(-jnp.where(idx < i, LU[i], 0.0) @ y)

    def backward(i_from_end, x):  # U x = y
        i = n - 1 - i_from_end
        return x.at[i].set((x[i] - jnp.where(idx > i, LU[i], 0.0) @ x) / LU[i, i])

    y = jax.lax.fori_loop(0, n, forward, b[perm])
    return jax.lax.fori_loop(0, n, backward, y)


def _natural_residual(M: jnp.ndarray, q: jnp.ndarray, z: jnp.ndarray) -> jnp.ndarray:
    """max_i |min(z_i, (M z + q)_i)|: zero exactly at solutions of LCP(M, q)."""
    return jnp.max(jnp.abs(jnp.minimum(z, M @ z + q)))


def _polish(M: jnp.ndarray, q: jnp.ndarray, z: jnp.ndarray) -> jnp.ndarray:
    """Re-solve M_{alpha,alpha} z_alpha = -q_alpha for the active set Lemke found.

    Lemke pivots on whatever entry the ratio test picks, not the numerically best
    one, so on ill-conditioned contact matrices the tableau loses digits that one
    elimination with partial pivoting keeps. The polished point is kept only if it is
    at least as complementary as the tableau's, so a poor active set (ok False)
    cannot make things worse.
    """
    a = (z > 0).astype(z.dtype)
    z_pol = jnp.maximum(_solve(_active_set_matrix(M, a), -a * q), 0.0)
    better = jnp.all(jnp.isfinite(z_pol)) & (_natural_residual(M, q, z_pol) <= _natural_residual(M, q, z))
    return jnp.where(better, z_pol, z)


@jax.custom_jvp
def _with_implicit_jvp(M: jnp.ndarray, q: jnp.ndarray, z: jnp.ndarray) -> jnp.ndarray:
    """Identity on the solution ``z`` of LCP(M, q) that carries its implicit tangent.

    The tangent of ``z`` passed in is ignored: ``z`` is a function of ``(M, q)``
    only, and its tangent is given by the rule of Marklund et al. (2025) App. D.1.
    """
    return z


@_with_implicit_jvp.defjvp
def _with_implicit_jvp_rule(primals, tangents):
    M, q, z = primals
    M_dot, q_dot, _ = tangents
    w = M @ z + q
    # Active set alpha: basic z. Complementarity with the same active set pins
    # z_beta_dot = 0 and w_alpha_dot = 0; the identity rows of K enforce the first.
    a = (z > w).astype(z.dtype)
    z_dot = _solve(_active_set_matrix(M, a), -a * (M_dot @ z + q_dot))
    return z, z_dot


def solve_lcp(
    M: jnp.ndarray,
    q: jnp.ndarray,
    *,
    max_pivots: int | None = None,
    pivot_tol: float = 1e-12,
    ratio_tol: float = 1e-11,
) -> LCPSolution:
    """Solve LCP(M, q) exactly with Lemke's method (see the module docstring).

    Args:
        M: (n, n) matrix, any float dtype (computed in float64). Lemke is
            guaranteed to succeed for P-matrices and, for feasible q, for
            copositive-plus matrices such as regularised frictional-contact ones.
        q: (n,) vector.
        max_pivots: pivot limit (static Python int); default ``50 * n``. Lemke
            needs about n pivots on typical contact problems.
        pivot_tol: an entering-column entry counts as positive if it exceeds
            ``pivot_tol`` times the column's largest magnitude.
        ratio_tol: relative tolerance under which ratios tie in the ratio test.

    Returns:
        :class:`LCPSolution` ``(z, w, ok, pivots)``; ``w = M z + q``.

    Differentiable in ``M`` and ``q`` by the implicit rule of Marklund et al. (2025) App. D.1
    (custom JVP, transposable for reverse mode); ``ok`` and ``pivots`` carry no
    derivative, and where ``ok`` is False the tangent is as meaningless as ``z``. Works under ``jax.jit``, ``jax.vmap``, ``jax.jvp``, ``jax.jacfwd``.
    """
    M = jnp.asarray(M)
    q = jnp.asarray(q)
    if q.ndim != 1 or M.shape != (q.shape[0], q.shape[0]) or q.shape[0] == 0:
        raise MbfgError(
            f"solve_lcp: expected M of shape (n, n) and q of shape (n,) with n >= 1, got M {M.shape} and q {q.shape}"
        )
    n = q.shape[0]
    dtype = jnp.result_type(M.dtype, q.dtype, jnp.float64)
    M = M.astype(dtype)
    q = q.astype(dtype)
    limit = 50 * n if max_pivots is None else int(max_pivots)
    # The pivoting itself is not differentiated: its tangent would be the derivative of
    # one particular elimination path, not of the solution map.
    M_val, q_val = jax.lax.stop_gradient(M), jax.lax.stop_gradient(q)
    z, ok, pivots = _lemke(M_val, q_val, limit, pivot_tol, ratio_tol)
    z = _polish(M_val, q_val, z)
    z = _with_implicit_jvp(M, q, z)
    return LCPSolution(z=z, w=M @ z + q, ok=ok, pivots=pivots)
