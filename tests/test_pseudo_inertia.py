"""The log-Cholesky parametrization of the pseudo-inertia (mbfg.pseudo_inertia; Rucker and Wensing 2022): checked
against a body built from point masses, the Panda's URDF inertials, the centre-of-mass form of physical
consistency (positive principal moments and their triangle inequalities), and finite differences."""

from __future__ import annotations

from pathlib import Path

import jax
import numpy as np
import pytest

from mbfg.errors import MbfgError
from mbfg.kinematic_tree import load_tree, standard_parameters
from mbfg.pseudo_inertia import (
    is_physically_consistent,
    log_cholesky_from_standard,
    pseudo_inertia,
    standard_from_log_cholesky,
)

PANDA = Path(__file__).resolve().parents[1] / "datasets" / "panda.urdf"


def _principal_moments_about_com(pi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Masses (n,) and principal moments (n, 3) about the centre of mass, by Steiner's theorem from pi (n, 10)."""
    m, h = pi[:, 0], pi[:, 1:4]
    c = h / m[:, None]
    xx, xy, yy, xz, yz, zz = (pi[:, 4 + k] for k in range(6))
    I = np.stack([np.stack([xx, xy, xz], -1), np.stack([xy, yy, yz], -1), np.stack([xz, yz, zz], -1)], -2)
    Ic = I - m[:, None, None] * (np.einsum("ni,ni->n", c, c)[:, None, None] * np.eye(3) - np.einsum("ni,nj->nij", c, c))
    return m, np.linalg.eigvalsh(Ic)


def test_pseudo_inertia_of_point_masses_is_the_sum_of_their_outer_products():
    """J = sum_k m_k [r_k; 1] [r_k; 1]^T for a body of point masses m_k at r_k (Wensing, Kim, Slotine 2017), and
    pi from the same points by hand: m, sum m r, sum m (|r|^2 1 - r r^T)."""
    rng = np.random.default_rng(1)
    masses, points = rng.uniform(0.1, 2.0, 5), rng.normal(0.0, 0.3, (5, 3))
    I = sum(mk * (r @ r * np.eye(3) - np.outer(r, r)) for mk, r in zip(masses, points, strict=True))
    pi = np.array([[masses.sum(), *(masses @ points), I[0, 0], I[0, 1], I[1, 1], I[0, 2], I[1, 2], I[2, 2]]])
    expected = sum(mk * np.outer(np.append(r, 1.0), np.append(r, 1.0)) for mk, r in zip(masses, points, strict=True))
    np.testing.assert_allclose(np.asarray(pseudo_inertia(pi))[0], expected, rtol=1e-12, atol=1e-14)
    theta = log_cholesky_from_standard(pi)
    np.testing.assert_allclose(np.asarray(standard_from_log_cholesky(theta)), pi, rtol=1e-12, atol=1e-14)


def test_log_cholesky_round_trip_on_the_panda_links():
    """pi -> theta -> pi on the seven links of the Panda's URDF (Gaz et al. 2019's inertials, full tensors); the
    mass is e^(2 alpha) and t is the centre of mass (U's last column)."""
    tree = load_tree(PANDA)
    theta = log_cholesky_from_standard(tree.pi, tree.links)
    np.testing.assert_allclose(np.asarray(standard_from_log_cholesky(theta)), tree.pi, rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(np.exp(2.0 * theta[:, 0]), tree.pi[:, 0], rtol=1e-13)
    np.testing.assert_allclose(theta[:, 7:], tree.pi[:, 1:4] / tree.pi[:, :1], rtol=1e-12, atol=1e-15)


def test_every_unconstrained_vector_is_a_physically_consistent_body():
    """J positive definite for random theta in R^10 (wide: alpha, d in [-4, 4], s, t normal of std 1), and the
    same bodies in the centre-of-mass form: m > 0, principal moments > 0, each at most the sum of the others."""
    rng = np.random.default_rng(0)
    theta = np.concatenate([rng.uniform(-4.0, 4.0, (500, 4)), rng.normal(0.0, 1.0, (500, 6))], axis=1)
    pi = np.asarray(standard_from_log_cholesky(theta))
    J = np.asarray(pseudo_inertia(pi))
    eig = np.linalg.eigvalsh(J)
    assert np.all(eig[:, 0] > 1e-12 * eig[:, -1])
    assert is_physically_consistent(pi).all()
    m, moments = _principal_moments_about_com(pi)
    assert np.all(m > 0.0)
    scale = moments.max(axis=1)
    assert np.all(moments > -1e-12 * scale[:, None])
    assert np.all(moments[:, 0] + moments[:, 1] >= moments[:, 2] * (1.0 - 1e-10))


def test_a_body_that_breaks_the_triangle_inequality_is_refused_by_name():
    """Principal moments (1, 1, 3) about the centre of mass: 1 + 1 < 3, no mass distribution has them (J is
    indefinite), so no theta reaches them."""
    pi = standard_parameters(2.0, np.array([0.1, 0.0, 0.0]), np.diag([1.0, 1.0, 3.0]))
    assert not is_physically_consistent(pi[None, :])[0]
    with pytest.raises(MbfgError, match="forearm: its pseudo-inertia is not positive definite"):
        log_cholesky_from_standard(pi[None, :], ("forearm",))


def test_jacobian_of_the_map_matches_central_differences():
    """d pi / d theta by JAX (jacfwd) against central differences of step 1e-6, at random theta of three links."""
    rng = np.random.default_rng(3)
    theta = np.concatenate([rng.uniform(-2.0, 1.0, (3, 4)), rng.normal(0.0, 0.2, (3, 6))], axis=1)

    def flat(x):
        return standard_from_log_cholesky(x.reshape(3, 10)).ravel()

    jac = np.asarray(jax.jacfwd(flat)(theta.ravel()))
    eps = 1e-6
    fd = np.stack([(np.asarray(flat(theta.ravel() + eps * e)) - np.asarray(flat(theta.ravel() - eps * e))) / (2 * eps)
                   for e in np.eye(30)], axis=1)
    np.testing.assert_allclose(jac, fd, rtol=1e-7, atol=1e-9 * np.abs(jac).max())
    # links do not mix: block diagonal
    assert np.all(jac.reshape(3, 10, 3, 10)[0, :, 1:, :] == 0.0)
