"""Planar natural-coordinate model (Blanco-Claraco et al. (2021) section 2 and Appendix III) against rigid-body mechanics."""

from __future__ import annotations

import numpy as np
import pytest
from references import fourbar_acceleration, fourbar_kinematics

import mbfg
from mbfg import Body, ModelError, PlanarMechanism, Point, RelativeAngle


def bar(i: int, j: int, L: float, m: float) -> Body:
    """Uniform bar: cog at mid-link, I0 = m L^2 / 3 about its first point."""
    return Body((i, j), mass=m, I0=m * L**2 / 3, cog=(L / 2, 0.0))


def fourbar() -> PlanarMechanism:
    points = [Point(0, 0, fixed=True), Point(1, 0), Point(1, 2), Point(4, 0, fixed=True)]
    return PlanarMechanism(points, [bar(0, 1, 1, 1), bar(1, 2, 2, 2), bar(2, 3, np.sqrt(13), 4)], name="fourbar")


def test_kinetic_energy_of_mass_matrix_equals_rigid_body_energy():
    """1/2 qdot^T M qdot == sum 1/2 m |v_cog|^2 + 1/2 I_cog omega^2 for a body with an offset cog."""
    rng = np.random.default_rng(1)
    m, I0, a, b = 3.0, 2.5, 0.7, -0.4
    mech = PlanarMechanism([Point(0.3, -0.2), Point(1.8, 0.9)], [Body((0, 1), mass=m, I0=I0, cog=(a, b))])
    r_i, r_j = mech.q0[:2], mech.q0[2:]
    L = np.linalg.norm(r_j - r_i)
    u = (r_j - r_i) / L
    for _ in range(5):
        v_i, omega = rng.standard_normal(2), rng.standard_normal()
        perp = np.array([-u[1], u[0]])
        # Rigid motion: point j moves with v_i + omega x (r_j - r_i).
        v_j = v_i + omega * L * perp
        r_cog_rel = a * u + b * perp
        v_cog = v_i + omega * np.array([-r_cog_rel[1], r_cog_rel[0]])
        I_cog = I0 - m * (a**2 + b**2)
        T_rigid = 0.5 * m * v_cog @ v_cog + 0.5 * I_cog * omega**2
        assert mech.kinetic_energy(np.concatenate([v_i, v_j])) == pytest.approx(T_rigid, rel=1e-12)


def test_gravity_forces_are_minus_gradient_of_cog_height():
    """Q_g . dq == -m g d(y_cog) for every body."""
    mech = fourbar()
    g = 9.81
    Q = mech.gravity_forces(g)
    # y of the cogs is linear in q: y_cog = mean of the link's end points.
    dy = np.array([[0, 0.5, 0, 0], [0, 0.5, 0, 0.5], [0, 0, 0, 0.5]])  # d y_cog / dq, per link
    masses = np.array([1.0, 2.0, 4.0])
    np.testing.assert_allclose(Q, -g * masses @ dy, atol=1e-12)


def test_constraint_jacobian_matches_central_differences():
    mech = mbfg.PlanarMechanism(
        [Point(0, 0, fixed=True), Point(1, 0), Point(1, 2), Point(4, 0, fixed=True)],
        [bar(0, 1, 1, 1), bar(1, 2, 2, 2), bar(2, 3, np.sqrt(13), 4)],
        [RelativeAngle(0, 1)],
    )
    rng = np.random.default_rng(2)
    for theta in (0.1, 1.2, -2.0):  # both branches of the relative-angle equation
        q = np.array([np.cos(theta), np.sin(theta), 1, 2, theta]) + 0.01 * rng.standard_normal(5)
        J = mech.phi_q(q)
        eps = 1e-6
        J_fd = np.stack([(mech.phi(q + eps * e) - mech.phi(q - eps * e)) / (2 * eps) for e in np.eye(5)], axis=1)
        np.testing.assert_allclose(J, J_fd, atol=1e-8)


def test_eq6_acceleration_of_the_fourbar_released_from_rest_matches_lagrange():
    """qddot of eq. (6) at the release equals the crank-angle Lagrange equation mapped to the points."""
    mech = fourbar()
    for theta in (0.0, -0.7, -2.1):
        kin = fourbar_kinematics(theta)
        q = np.concatenate([kin["p1"], kin["p2"]])
        omega = 0.8
        qdot = np.concatenate([kin["dp1"], kin["dp2"]]) * omega
        alpha = fourbar_acceleration(theta, omega, g=9.81)
        expected = np.concatenate([kin["dp1"], kin["dp2"]]) * alpha + np.concatenate([kin["ddp1"], kin["ddp2"]]) * omega**2
        qddot = mech.qddot(q, qdot, mech.gravity_forces(9.81))
        np.testing.assert_allclose(qddot, expected, atol=1e-10)


def test_eq15_independent_accelerations_equal_the_dependent_ones():
    from mbfg import planar
    from mbfg._jax import jnp

    mech = fourbar()
    kin = fourbar_kinematics(-1.0)
    q = np.concatenate([kin["p1"], kin["p2"]])
    qdot = 0.5 * np.concatenate([kin["dp1"], kin["dp2"]])
    Q = mech.gravity_forces(9.81)
    qddot = mech.qddot(q, qdot, Q)
    for idx in ([0], [3]):
        zddot = planar.zddot_independent(
            mech.arrays, jnp.asarray(mech.mass_matrix), jnp.asarray(Q), jnp.asarray(q), jnp.asarray(qdot), jnp.asarray(idx)
        )
        np.testing.assert_allclose(np.asarray(zddot), qddot[idx], atol=1e-10)


def test_multi_point_body_is_rigid_with_2p_minus_3_constraints():
    """A four-point body: 5 independent distances; a rigid rotation keeps Phi = 0."""
    pts = [Point(0, 0, fixed=True), Point(2, 0), Point(2, -1), Point(0, -1)]
    mech = PlanarMechanism(pts, [Body((0, 1, 2, 3), mass=2.0, I0=2.0, cog=(1.0, -0.5))])
    assert (mech.n, mech.m, mech.dof) == (6, 5, 1)
    assert np.linalg.matrix_rank(mech.phi_q(mech.q0)) == 5
    c, s = np.cos(0.4), np.sin(0.4)
    rotated = (np.array([[c, -s], [s, c]]) @ mech.q0.reshape(3, 2).T).T.reshape(-1)
    np.testing.assert_allclose(mech.phi(rotated), 0.0, atol=1e-12)


def test_relative_angle_coordinate_adds_its_angle():
    mech = PlanarMechanism(
        [Point(0, 0, fixed=True), Point(0.6, 0.8)], [bar(0, 1, 1.0, 1.0)], [RelativeAngle(0, 1)]
    )
    assert mech.coordinate_names == ("x1", "y1", "theta1")
    assert mech.q0[2] == pytest.approx(np.arctan2(0.8, 0.6))
    np.testing.assert_allclose(mech.phi(mech.q0), 0.0, atol=1e-12)


@pytest.mark.parametrize(
    "points, bodies, relative, message",
    [
        ([Point(0, 0), Point(1, 0)], [Body((0,), 1.0, 1.0)], [], r"planar_bodies\[0\] has 1 point"),
        ([Point(0, 0), Point(1, 0)], [Body((0, 5), 1.0, 1.0)], [], r"planar_bodies\[0\] names point 5"),
        ([Point(0, 0), Point(1, 0)], [Body((0, 1), -1.0, 1.0)], [], r"planar_bodies\[0\]: mass must be > 0"),
        ([Point(0, 0), Point(1, 0)], [Body((0, 1), 1.0, 1.0)], [RelativeAngle(0, 9)], r"relative_coordinates\[0\]"),
    ],
)
def test_bad_mechanism_raises_model_error_naming_the_entry(points, bodies, relative, message):
    with pytest.raises(ModelError, match=message):
        PlanarMechanism(points, bodies, relative)


def test_unknown_coordinate_name_is_reported():
    with pytest.raises(ModelError, match="unknown coordinate 'x9'"):
        fourbar().coordinate_index("x9")
