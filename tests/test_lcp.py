"""Lemke's LCP solver and its implicit derivative (Marklund et al. (2025) Appendix D.1).

References are numpy: brute-force enumeration of all 2^n active sets for small
P-matrix problems (whose solution is unique), and central differences for the
derivative rule.
"""

from __future__ import annotations

import functools
import itertools

import numpy as np
import pytest

from mbfg import MbfgError
from mbfg._jax import jax
from mbfg.lcp import LCPSolution, solve_lcp

# Module-level jits: each shape compiles once and tests share them (compiles dominate runtime).
solve = jax.jit(solve_lcp)
solve_batch = jax.jit(jax.vmap(solve_lcp))
jacobians_zw = jax.jit(jax.jacfwd(lambda M, q: tuple(solve_lcp(M, q)[:2]), argnums=(0, 1)))
jacrev_z_q = jax.jit(jax.jacrev(lambda M, q: solve_lcp(M, q).z, argnums=1))


@jax.jit
def jvp_zw(M, q, M_dot, q_dot):
    return jax.jvp(lambda M_, q_: tuple(solve_lcp(M_, q_)[:2]), (M, q), (M_dot, q_dot))


# --------------------------------------------------------------------------- generators


def spd_matrix(rng: np.random.Generator, n: int) -> np.ndarray:
    A = rng.standard_normal((n, n))
    return A @ A.T + 0.1 * np.eye(n)


def nonsymmetric_pd_matrix(rng: np.random.Generator, n: int) -> np.ndarray:
    """Positive definite (x^T M x > 0) but nonsymmetric: a P-matrix."""
    S = rng.standard_normal((n, n))
    return spd_matrix(rng, n) + (S - S.T)


def diagonally_dominant_matrix(rng: np.random.Generator, n: int) -> np.ndarray:
    """Strictly row-diagonally-dominant with positive diagonal: a P-matrix, often indefinite."""
    M = 2.0 * rng.standard_normal((n, n))
    np.fill_diagonal(M, 0.0)
    np.fill_diagonal(M, np.abs(M).sum(axis=1) + 0.5)
    return M


def friction_lcp_matrix(rng: np.random.Generator, n_c: int, k: int, m: int = 6) -> np.ndarray:
    """Stewart-Trinkle / Anitescu-Potra frictional-contact LCP matrix.

    Unknowns [c_n (n_c), beta (n_c k), sigma (n_c)] for n_c contacts with k = 2 or 4
    tangential directions each (rows +t and -t of D for every tangent t) on a body
    with m velocity coordinates:

        [[C Minv C^T + S_c,  C Minv D^T,        0    ],
         [D Minv C^T,        D Minv D^T + S_t,  E    ],
         [U,                 -E^T,              Delta]]
    """
    A = rng.standard_normal((m, m))
    Minv = np.linalg.inv(A @ A.T + 0.5 * np.eye(m))
    C = rng.standard_normal((n_c, m))
    tangents = rng.standard_normal((n_c * k // 2, m))
    D = np.repeat(tangents, 2, axis=0) * np.tile([1.0, -1.0], n_c * k // 2)[:, None]  # rows +t, -t
    S_c = np.diag(10.0 ** rng.uniform(-8, -4, n_c))
    S_t = np.diag(10.0 ** rng.uniform(-8, -4, n_c * k))
    E = np.kron(np.eye(n_c), np.ones((k, 1)))
    U = np.diag(rng.uniform(0.1, 1.0, n_c))
    Delta = 1e-10 * np.eye(n_c)
    return np.block(
        [
            [C @ Minv @ C.T + S_c, C @ Minv @ D.T, np.zeros((n_c, n_c))],
            [D @ Minv @ C.T, D @ Minv @ D.T + S_t, E],
            [U, -E.T, Delta],
        ]
    )


def friction_q(rng: np.random.Generator, n_c: int, k: int) -> np.ndarray:
    """Random normal and tangential velocities of both signs, scale 1e-2..1e2; the sigma
    rows of a contact LCP have q = 0 (a nonzero q there is divided by Delta ~ 1e-10)."""
    q = rng.standard_normal(n_c * (k + 1)) * 10.0 ** rng.uniform(-2, 2)
    return np.concatenate([q, np.zeros(n_c)])


def enumerate_lcp_solutions(M: np.ndarray, q: np.ndarray, tol: float = 1e-10) -> list[np.ndarray]:
    """All solutions of LCP(M, q) with nonsingular active block, by trying all 2^n active sets."""
    n = len(q)
    solutions = []
    for mask in itertools.product([False, True], repeat=n):
        a = np.array(mask)
        z = np.zeros(n)
        if a.any():
            z[a] = np.linalg.solve(M[np.ix_(a, a)], -q[a])
        w = M @ z + q
        if z.min() >= -tol and w.min() >= -tol:
            solutions.append(z)
    return solutions


def assert_solves_lcp(M, q, sol: LCPSolution, rtol: float = 1e-11) -> None:
    """Complementarity, feasibility and w = M z + q, relative to the magnitude of the
    terms that make up w (ill-conditioned contact matrices have large z)."""
    z, w = np.asarray(sol.z), np.asarray(sol.w)
    scale = 1.0 + np.abs(q).max() + np.abs(M).max() * np.abs(z).sum()
    assert bool(sol.ok)
    assert z.min() >= -1e-12
    assert w.min() >= -1e-9 * scale / (1.0 + np.abs(q).max())  # 1e-9 for unit-sized terms
    assert w.min() >= -rtol * scale
    assert np.abs(z * w).max() <= rtol * scale * (1.0 + np.abs(z).max())
    np.testing.assert_allclose(w, M @ z + q, rtol=0, atol=1e-12 * scale)


# --------------------------------------------------------------------------- solve


@pytest.mark.parametrize("n", range(1, 9))
def test_lemke_solves_p_matrix_lcp_like_enumeration(n):
    """SPD, nonsymmetric positive definite and diagonally dominant P-matrices: the unique
    solution found by enumerating all 2^n active sets."""
    rng = np.random.default_rng(100 + n)
    kinds = [spd_matrix, nonsymmetric_pd_matrix, diagonally_dominant_matrix]
    Ms = np.array([kinds[i % 3](rng, n) for i in range(12)])
    qs = rng.standard_normal((12, n))
    sols = solve_batch(Ms, qs)
    assert not np.all(np.asarray(sols.pivots) == 0)  # the batch is not all trivial
    for i in range(12):
        (z_ref,) = enumerate_lcp_solutions(Ms[i], qs[i])  # P-matrix: exactly one
        sol = LCPSolution(*(x[i] for x in sols))
        assert bool(sol.ok)
        np.testing.assert_allclose(np.asarray(sol.z), z_ref, rtol=0, atol=1e-9)
        assert_solves_lcp(Ms[i], qs[i], sol)


@pytest.mark.parametrize("n_c, k", [(1, 2), (2, 4), (3, 2), (4, 4)])
def test_lemke_solves_frictional_contact_lcp_for_any_q(n_c, k):
    """Regularised Stewart-Trinkle matrices are (strictly) copositive: Lemke ends with a
    solution for every q, here random q of both signs over four decades."""
    rng = np.random.default_rng(10 * n_c + k)
    batch = 25
    Ms = np.array([friction_lcp_matrix(rng, n_c, k) for _ in range(batch)])
    qs = np.array([friction_q(rng, n_c, k) for _ in range(batch)])
    sols = solve_batch(Ms, qs)
    assert np.all(np.asarray(sols.ok))
    assert np.any(np.asarray(sols.z)[:, n_c : n_c * (k + 1)] > 0)  # friction actually engaged
    for i in range(batch):
        assert_solves_lcp(Ms[i], qs[i], LCPSolution(*(x[i] for x in sols)))


def test_nonnegative_q_gives_zero_z_without_pivots():
    rng = np.random.default_rng(3)
    M = nonsymmetric_pd_matrix(rng, 5)
    q = np.abs(rng.standard_normal(5))
    q[2] = 0.0
    sol = solve(M, q)
    assert bool(sol.ok) and int(sol.pivots) == 0
    np.testing.assert_array_equal(np.asarray(sol.z), np.zeros(5))
    np.testing.assert_array_equal(np.asarray(sol.w), q)


def test_vmap_over_problems_equals_loop():
    rng = np.random.default_rng(4)
    n, batch = 5, 12
    Ms = np.array([nonsymmetric_pd_matrix(rng, n) for _ in range(batch)])
    qs = rng.standard_normal((batch, n))
    qs[0] = np.abs(qs[0])  # one trivial member beside pivoting ones
    batched = solve_batch(Ms, qs)
    for i in range(batch):
        single = solve(Ms[i], qs[i])
        np.testing.assert_allclose(np.asarray(batched.z[i]), np.asarray(single.z), rtol=0, atol=1e-13)
        np.testing.assert_allclose(np.asarray(batched.w[i]), np.asarray(single.w), rtol=0, atol=1e-13)
        assert bool(batched.ok[i]) == bool(single.ok)
        assert int(batched.pivots[i]) == int(single.pivots)
    assert int(batched.pivots[0]) == 0 and int(batched.pivots.max()) > 1


@pytest.mark.parametrize(
    "M, q",
    [
        # All of q tied: after z0 enters every other basic variable sits at zero.
        (spd_matrix(np.random.default_rng(5), 5), -np.ones(5)),
        # Cyclic P-matrix with q = -1: a fully degenerate path to z = (1/3, 1/3, 1/3).
        (np.array([[1.0, 2.0, 0.0], [0.0, 1.0, 2.0], [2.0, 0.0, 1.0]]), -np.ones(3)),
        # Zeros and repeated values in q with an integer matrix: exact ties at every step.
        (np.array([[2.0, 1, 0, 1], [1, 2, 1, 0], [0, 1, 2, 1], [1, 0, 1, 2]]), np.array([-1.0, -1, 0, 0])),
        # Identity rows and repeated columns give ties in the later ratio tests too.
        (np.eye(4) + np.ones((4, 4)), np.array([-2.0, -2.0, -2.0, 0.0])),
    ],
)
def test_degenerate_ratio_ties_terminate_with_solution(M, q):
    sol = solve(M, q)
    n = len(q)
    assert bool(sol.ok) and int(sol.pivots) <= 3 * n
    assert_solves_lcp(M, q, sol)
    solutions = enumerate_lcp_solutions(M, q)
    assert any(np.allclose(np.asarray(sol.z), z, atol=1e-9) for z in solutions)


def test_cyclic_degenerate_problem_reaches_known_solution():
    sol = solve(np.array([[1.0, 2.0, 0.0], [0.0, 1.0, 2.0], [2.0, 0.0, 1.0]]), -np.ones(3))
    np.testing.assert_allclose(np.asarray(sol.z), np.full(3, 1.0 / 3.0), rtol=0, atol=1e-14)


def test_secondary_ray_is_reported_not_ok():
    """w = -z - 1 >= 0 has no solution with z >= 0: Lemke ends on a secondary ray."""
    sol = solve(np.array([[-1.0]]), np.array([-1.0]))
    assert not bool(sol.ok)
    # Infeasible two-variable problem: w_1 = z_2 - 1, w_2 = -z_1 - z_2 - 1.
    sol = solve(np.array([[0.0, 1.0], [-1.0, -1.0]]), np.array([-1.0, -1.0]))
    assert not bool(sol.ok)


def test_pivot_limit_is_reported_not_ok():
    rng = np.random.default_rng(6)
    M, q = spd_matrix(rng, 5), -np.abs(rng.standard_normal(5)) - 0.1
    full = solve(M, q)
    assert bool(full.ok) and int(full.pivots) > 3
    sol = jax.jit(functools.partial(solve_lcp, max_pivots=3))(M, q)
    assert int(sol.pivots) == 3 and not bool(sol.ok)


def bvls_reference(M: np.ndarray, q: np.ndarray) -> np.ndarray:
    """The solution of LCP(M, q) for symmetric positive definite M, independently of Lemke: the LCP is the
    KKT system of min 1/2 z^T M z + q^T z over z >= 0, i.e. with M = L L^T the bounded least-squares problem
    min |L^T z + L^-1 q|^2, z >= 0, which scipy's BVLS (Stark and Parker's active-set method) solves exactly."""
    from scipy.optimize import lsq_linear

    L = np.linalg.cholesky(M)
    fit = lsq_linear(L.T, -np.linalg.solve(L, q), bounds=(0.0, np.inf), method="bvls", tol=1e-15)
    assert fit.success
    return fit.x


def dry_friction_like_lcp(rng: np.random.Generator, n_joints: int, rows: int = 3) -> np.ndarray:
    """Symmetric PD matrix with the pattern of a dry-friction hinge's rows: each constraint row written twice,
    +g and -g (rows [G; -G] of B), so B Minv B^T + eps I has pairs of rows that are negatives of each other.
    G has full row rank (6 more velocity coordinates than rows), as a chain's joint rows do."""
    m = n_joints * rows + 6
    A = rng.standard_normal((m, m))
    Minv = np.linalg.inv(A @ A.T + 0.5 * np.eye(m))
    G = rng.standard_normal((n_joints * rows, m))
    B = np.concatenate([G, -G])
    return B @ Minv @ B.T + 1e-6 * np.eye(2 * n_joints * rows)


@pytest.mark.parametrize("n", [20, 48, 96])
def test_lemke_equals_bounded_least_squares_reference_on_large_spd_lcp(n):
    """Many rows, many pivots: the LCP's unique solution (M symmetric PD) against scipy's BVLS."""
    rng = np.random.default_rng(100 + n)
    M, q = spd_matrix(rng, n), rng.standard_normal(n)
    sol = solve(M, q)
    assert_solves_lcp(M, q, sol)
    assert int(sol.pivots) >= n // 4  # a path long enough to exercise the pivoting
    np.testing.assert_allclose(np.asarray(sol.z), bvls_reference(M, q), rtol=0, atol=1e-9 * np.abs(sol.z).max())


@pytest.mark.parametrize("n_joints", [4, 12])
def test_lemke_equals_bounded_least_squares_on_paired_plus_minus_rows(n_joints):
    """Rows in +g / -g pairs (dry friction's doubled constraint rows): q = [b; -b] ties the pairs' ratios."""
    rng = np.random.default_rng(7 + n_joints)
    M = dry_friction_like_lcp(rng, n_joints)
    b = rng.standard_normal(M.shape[0] // 2)
    q = np.concatenate([b, -b])
    sol = solve(M, q)
    assert_solves_lcp(M, q, sol)
    np.testing.assert_allclose(np.asarray(sol.z), bvls_reference(M, q), rtol=0, atol=1e-9 * np.abs(sol.z).max())


@pytest.mark.parametrize("copies", [2, 5])
def test_exact_ratio_ties_between_identical_blocks_solve_like_bvls(copies):
    """M = I_copies (x) A and q repeated: every ratio test ties exactly between the copies, so each pivot goes
    through the lexicographic tie-break; the solution is the single block's, repeated."""
    rng = np.random.default_rng(11)
    A, qa = spd_matrix(rng, 6), rng.standard_normal(6)
    M, q = np.kron(np.eye(copies), A), np.tile(qa, copies)
    sol = solve(M, q)
    assert_solves_lcp(M, q, sol)
    np.testing.assert_allclose(np.asarray(sol.z), np.tile(bvls_reference(A, qa), copies), rtol=0, atol=1e-10)


def test_zero_rows_with_zero_q_are_complementary_and_leave_the_rest_to_the_reduced_problem():
    """Rows i with M[i] = 0, M[:, i] = 0 and q_i = 0 give w_i = 0 for any z_i: any z_i >= 0 is complementary, and
    the other rows form the LCP of the rest, whose solution (BVLS) they must have."""
    rng = np.random.default_rng(12)
    n, zero = 10, [2, 7]
    keep = [i for i in range(n) if i not in zero]
    M = np.zeros((n, n))
    M[np.ix_(keep, keep)] = spd_matrix(rng, len(keep))
    q = rng.standard_normal(n)
    q[zero] = 0.0
    sol = solve(M, q)
    assert_solves_lcp(M, q, sol)
    np.testing.assert_allclose(np.asarray(sol.z)[keep], bvls_reference(M[np.ix_(keep, keep)], q[keep]),
                               rtol=0, atol=1e-10)


def lexicographic_rule_reference(T: np.ndarray, basis: np.ndarray, entering: int, tol: float = 1e-11) -> int:
    """The leaving row of the lexicographic minimum-ratio test written out directly: among rows with a positive
    entering entry, the lexicographically smallest of (rhs_i, B^-1_i) / col_i (ties within ``tol``); z0 leaves
    whenever it ties at the first stage."""
    n = T.shape[0]
    col = T[:, entering]
    rows = [i for i in range(n) if col[i] > 1e-12 * np.abs(col).max()]
    keys = {i: np.concatenate([[T[i, -1]], T[i, :n]]) / col[i] for i in rows}
    first = min(keys[i][0] for i in rows)
    ties = [i for i in rows if keys[i][0] <= first + tol * (abs(first) + 1.0)]
    if any(basis[i] == 2 * n for i in ties):
        return next(i for i in ties if basis[i] == 2 * n)
    for stage in range(1, n + 1):
        if len(ties) == 1:
            break
        low = min(keys[i][stage] for i in ties)
        ties = [i for i in ties if keys[i][stage] <= low + tol * (abs(low) + 1.0)]
    return ties[0]


def test_lexicographic_ratio_test_picks_the_directly_computed_row_on_tied_tableaus():
    """The ratio test, which stops as soon as one row is left, against the rule written out in NumPy, on
    tableaus of Lemke's form [B^-1, -B^-1 M, -B^-1 1, B^-1 q] for random bases with tied right-hand sides."""
    from mbfg.lcp import _lex_min_ratio_row

    pick = jax.jit(_lex_min_ratio_row, static_argnums=4)
    rng = np.random.default_rng(13)
    checked_ties = 0
    for trial in range(60):
        n = 8
        M = np.round(spd_matrix(rng, n) * 4) / 4
        q = rng.choice([-1.0, 0.0, 1.0], n)
        full = np.concatenate([np.eye(n), -M, -np.ones((n, 1))], axis=1)
        basis = np.sort(rng.choice(2 * n + 1, n, replace=False))
        Bmat = full[:, basis]
        if abs(np.linalg.det(Bmat)) < 1e-3:
            continue
        Binv = np.linalg.inv(Bmat)
        T = np.concatenate([Binv @ full, (Binv @ q)[:, None]], axis=1)
        T[:, -1] = np.abs(np.round(T[:, -1], 1))  # a feasible basis with repeated (tied) values
        nonbasic = [j for j in range(2 * n + 1) if j not in basis]
        entering = int(rng.choice(nonbasic))
        col = T[:, entering]
        cand = col > 1e-12 * np.abs(col).max()
        if not cand.any():
            continue
        if trial % 2:  # make two or more candidates tie with the minimum ratio
            idx = np.flatnonzero(cand)
            tied = rng.choice(idx, min(len(idx), int(rng.integers(2, 4))), replace=False)
            T[tied, -1] = col[tied] * np.min(T[idx, -1] / col[idx])
        expected = lexicographic_rule_reference(T, basis, entering)
        got = int(pick(T, basis, col, cand, 1e-11))
        assert got == expected, (trial, got, expected)
        ratios = T[cand, -1] / col[cand]
        checked_ties += int(np.sum(ratios <= ratios.min() + 1e-9) > 1)
    assert checked_ties >= 5  # the trials exercised the tie-break, not only the first stage


def test_bad_shapes_raise():
    with pytest.raises(MbfgError, match="solve_lcp"):
        solve_lcp(np.eye(3), np.ones(2))


# --------------------------------------------------------------------------- derivative


def nondegenerate_problem(rng: np.random.Generator, make_M, n: int, margin: float = 0.05):
    """A random problem with strict complementarity (min(z + w) > margin) and both active
    and passive indices, so that central differences see one smooth branch."""
    while True:
        M = make_M(rng, n)
        q = rng.standard_normal(n)
        sol = solve(M, q)
        z, w = np.asarray(sol.z), np.asarray(sol.w)
        if np.min(z + w) > margin and 0 < np.sum(z > 0) < n:
            return M, q


def central_difference_jacobian(f, x: np.ndarray, h: float = 1e-6) -> np.ndarray:
    """d f / d x, shape f(x).shape + x.shape."""
    cols = []
    for idx in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[idx] = h
        cols.append((np.asarray(f(x + e)) - np.asarray(f(x - e))) / (2 * h))
    return np.moveaxis(np.array(cols).reshape(x.shape + cols[0].shape), range(x.ndim), range(-x.ndim, 0))


def assert_matches_central_differences(J, J_fd) -> None:
    J, J_fd = np.asarray(J), np.asarray(J_fd)
    np.testing.assert_allclose(J, J_fd, rtol=1e-6, atol=1e-6 * np.abs(J_fd).max())


@pytest.mark.parametrize("make_M", [spd_matrix, nonsymmetric_pd_matrix], ids=["spd", "nonsymmetric"])
def test_lcp_jacfwd_matches_central_differences_appendix_d1(make_M):
    """Jacobians of z (and w) with respect to q and to M by the App. D.1 rule."""
    rng = np.random.default_rng(7)
    M, q = nondegenerate_problem(rng, make_M, 5)
    (dz_dM, dz_dq), (dw_dM, dw_dq) = jacobians_zw(M, q)
    assert dz_dM.shape == (5, 5, 5) and dz_dq.shape == (5, 5)
    assert np.abs(np.asarray(dz_dq)).max() > 0.1  # the active block is really there

    assert_matches_central_differences(dz_dq, central_difference_jacobian(lambda q_: solve(M, q_).z, q))
    assert_matches_central_differences(dw_dq, central_difference_jacobian(lambda q_: solve(M, q_).w, q))
    assert_matches_central_differences(dz_dM, central_difference_jacobian(lambda M_: solve(M_, q).z, M))
    assert_matches_central_differences(dw_dM, central_difference_jacobian(lambda M_: solve(M_, q).w, M))

    # The rule is linear in the tangents, so JAX transposes it: reverse mode agrees.
    np.testing.assert_allclose(np.asarray(jacrev_z_q(M, q)), np.asarray(dz_dq), rtol=1e-12, atol=1e-12)


def test_lcp_jvp_matches_central_differences_appendix_d1():
    """One jax.jvp in a joint direction (M_dot, q_dot) against a central difference."""
    rng = np.random.default_rng(8)
    M, q = nondegenerate_problem(rng, diagonally_dominant_matrix, 5)
    M_dot, q_dot = rng.standard_normal(M.shape), rng.standard_normal(q.shape)
    (z, w), (z_dot, w_dot) = jvp_zw(M, q, M_dot, q_dot)
    h = 1e-6
    plus, minus = solve(M + h * M_dot, q + h * q_dot), solve(M - h * M_dot, q - h * q_dot)
    z_fd = (np.asarray(plus.z) - np.asarray(minus.z)) / (2 * h)
    w_fd = (np.asarray(plus.w) - np.asarray(minus.w)) / (2 * h)
    assert_matches_central_differences(z_dot, z_fd)
    assert_matches_central_differences(w_dot, w_fd)
    # Passive z and active w stay at zero along the perturbation (App. D.1).
    np.testing.assert_array_equal(np.asarray(z_dot)[np.asarray(z) == 0], 0.0)
    assert np.abs(np.asarray(w_dot)[np.asarray(z) > 0]).max() <= 1e-12 * np.abs(np.asarray(w_dot)).max()


def test_lcp_jvp_of_frictional_contact_problem_under_vmap():
    """Tangents in q of contact problems, batched: the calibration's use case."""
    rng = np.random.default_rng(9)
    n_c, k = 2, 2
    Ms, qs = [], []
    while len(Ms) < 4:
        M, q = friction_lcp_matrix(rng, n_c, k, m=12), friction_q(rng, n_c, k)
        sol = solve(M, q)
        z, w = np.asarray(sol.z), np.asarray(sol.w)
        if np.min(z + w) > 1e-3 * np.abs(q).max() and np.any(z[n_c : n_c * (k + 1)] > 0):
            Ms.append(M)
            qs.append(q)
    Ms, qs = np.array(Ms), np.array(qs)
    q_dots = rng.standard_normal(qs.shape)
    q_dots[:, -n_c:] = 0.0  # the sigma rows keep q = 0
    jvp = jax.jit(jax.vmap(lambda M, q, qd: jax.jvp(lambda q_: solve_lcp(M, q_).z, (q,), (qd,))[1]))
    z_dots = np.asarray(jvp(Ms, qs, q_dots))
    h = 1e-6
    for i in range(len(Ms)):
        z_plus = np.asarray(solve(Ms[i], qs[i] + h * q_dots[i]).z)
        z_minus = np.asarray(solve(Ms[i], qs[i] - h * q_dots[i]).z)
        assert_matches_central_differences(z_dots[i], (z_plus - z_minus) / (2 * h))
