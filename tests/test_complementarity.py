"""The closed-form multipliers of inverse dynamics (mbfg.complementarity) against Lemke's method.

With v_{k+1} given, the LCP of Marklund et al. (2025) eq. 2.31 splits into one friction group
per frictional hinge (App. F.4) or contact (2.21, 2.24); each has a closed form.
Lemke's method (mbfg.lcp, checked on its own against enumeration) on the whole
dense LCP is the independent reference.
"""

from __future__ import annotations

import numpy as np
import pytest

from mbfg import complementarity, residuals
from mbfg._jax import jax, jnp
from mbfg.lcp import solve_lcp
from mbfg.rigid import SIGMA_REGULARIZATION, friction_data, friction_rows
from mbfg.testing import example_model, example_step


def _random_groups(rng: np.random.Generator, shapes: list[tuple[int, int]], scale: float):
    """Groups of (n_N normals, m directions) with random data, their dense Sigma_B and a random q.

    A group without normals is a load-independent (Coulomb) bound: its bound row's q is a random
    h F_c > 0 instead of 0."""
    groups, data, i0 = [], [], 0
    for n_N, m in shapes:
        groups.append(complementarity.group(slice(i0, i0 + n_N), i0 + n_N, m))
        data.append(friction_data(jnp.asarray(rng.uniform(0.1, 10.0, n_N)), jnp.asarray(rng.uniform(0.0, 0.5, n_N)),
                                   m, rng.uniform(1e-4, 1e-2)))
        i0 += n_N + 2 * m + 1
    n_B = i0
    Sigma_B = jnp.zeros((n_B, n_B))
    B = jnp.zeros((n_B, 1))
    for g, d in zip(groups, data):
        normals = slice(int(g.normals[0]), int(g.normals[-1]) + 1) if len(g.normals) else slice(0, 0)
        _, Sigma_B = friction_rows(B, Sigma_B, int(g.plus[0]), jnp.zeros((2 * len(g.plus), 1)), normals, d)
    q = np.zeros(n_B)
    for g in groups:
        q[g.normals] = scale * rng.standard_normal(len(g.normals))
        if not len(g.normals):
            q[g.bound] = scale * rng.uniform(0.0, 0.5)
        omega = scale * rng.standard_normal(len(g.plus)) * 1e-2
        q[g.plus], q[g.minus] = omega, -omega
    return tuple(groups), tuple(data), Sigma_B, jnp.asarray(q)


@pytest.mark.parametrize("shapes", [[(10, 1)], [(1, 2)], [(0, 1)], [(10, 1), (1, 2), (0, 1), (10, 1)]])
def test_eq_2_31_closed_form_equals_lemke_on_random_friction_groups(shapes):
    """Sticking and sliding, hinge-like (10 normals, 1 direction), contact-like (1 normal, 2 directions) and
    a slider's Coulomb force (no normals, a constant bound)."""
    rng = np.random.default_rng(len(shapes))
    lemke = jax.jit(solve_lcp)
    for scale in np.repeat([1e-3, 1.0, 1e3], 10):
        groups, data, Sigma_B, q = _random_groups(rng, shapes, scale)
        lam = np.asarray(complementarity.solve(q, groups, data))
        ref = lemke(Sigma_B, q)
        assert bool(ref.ok)
        w = np.asarray(Sigma_B @ lam + q)
        # A solution of the LCP: nonnegative, complementary (the matrix is a P-matrix: it is the only one).
        assert lam.min() >= 0.0 and w.min() >= -1e-9 * max(1.0, np.abs(q).max())
        assert np.abs(lam * w).max() <= 1e-9 * max(1.0, np.abs(lam).max() * np.abs(q).max())
        np.testing.assert_allclose(lam, np.asarray(ref.z), rtol=1e-8, atol=1e-10 * max(1.0, np.abs(lam).max()))


def test_friction_group_sticks_below_and_slides_at_the_bound():
    """One hinge-like group: a slip rate the friction can stop sticks (sigma = 0); a larger one slides
    with the friction impulse at its bound U lam_N + Delta sigma (eq. 2.24, bound row)."""
    g = complementarity.group(slice(0, 1), 1, 1)
    data = friction_data(jnp.array([1.0]), jnp.array([0.5]), 1, 1e-2)
    lam_N = 2.0  # q_N = -2 with sigma_N = 1
    for omega, sliding in ((0.5e-2, False), (2.0e-2, True)):
        q = jnp.array([-lam_N, omega, -omega, 0.0])
        n, t, sigma = complementarity.solve_group(q, g, data)
        assert float(n[0]) == pytest.approx(lam_N)
        friction = float(t[1] - t[0])  # the impulse opposing a positive slip
        if sliding:
            assert float(sigma) > 0.0
            assert friction == pytest.approx(0.5 * lam_N + SIGMA_REGULARIZATION * float(sigma), rel=1e-12)
        else:
            assert float(sigma) == 0.0
            assert friction == pytest.approx(omega / 1e-2, rel=1e-12)


@pytest.mark.parametrize("name", ["furuta", "pendulum-stribeck", "particle", "linear-stage"])
def test_impulse_residual_eq_3_6_with_closed_form_equals_lemke(name):
    """The impulse residual (3.6-3.7) and its Jacobian with the closed-form multipliers equal those with
    Lemke's method on the whole LCP, at random moving states (friction sliding and sticking)."""
    model = example_model(name)
    p = model.parameters.arrays()
    rng = np.random.default_rng(5)

    def value_and_jacobian(lcp):
        """(d r / d v_{k+1}, r) in one compiled function."""
        def r(v1, x0, x1, u):
            out = residuals.impulse(model, x0, x1._replace(v=v1), u, p, 1e-3, lcp)
            return out, out

        return jax.jit(jax.jacfwd(r, has_aux=True))

    closed, lemke = value_and_jacobian(False), value_and_jacobian(True)
    for _ in range(5):
        x0, x1, u = example_step(rng, model)
        (d_closed, r_closed), (d_lemke, r_lemke) = closed(x1.v, x0, x1, u), lemke(x1.v, x0, x1, u)
        # Lemke's round-off is relative to the scale of the whole vector, not of each entry.
        np.testing.assert_allclose(np.asarray(r_closed), np.asarray(r_lemke), rtol=0,
                                   atol=1e-10 * np.abs(np.asarray(r_lemke)).max())
        np.testing.assert_allclose(np.asarray(d_closed), np.asarray(d_lemke), rtol=1e-8, atol=1e-8)
