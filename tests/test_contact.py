"""Unilateral contact (Berard and Trinkle's (2008) discrete rule, Marklund et al. (2025) eq. 2.21): no impulse while the gap stays open.

Berard and Trinkle's (2008) time-stepping is ``0 <= h lam_n  perp  psi_n(q_{k+1}) >= 0``: the ground pushes only when
the step would otherwise end inside it. Checked on Berard and Trinkle's (2008) particle against the closed form of
free fall, an inelastic impact with Coulomb's law on impulses, then sliding.
"""

from __future__ import annotations

import numpy as np

from mbfg._jax import jax, jnp
from mbfg.models import particle
from mbfg.rigid import contact_normal_b
from mbfg.spook import simulate


def _closed_form(t: np.ndarray, P: dict) -> tuple[np.ndarray, np.ndarray]:
    """Berard and Trinkle's (2008) particle: free fall from z0 = 3 m with the push F_x until t_c = sqrt(2 z0 / g); at
    impact the normal impulse m v_z removes mu v_z of the tangential velocity; then sliding at
    (F_x - mu m g) / m on z = 0."""
    g, m, mu, F, z0 = P["g"], P["m"], P["mu"], P["F_x"], 3.0
    t_c = np.sqrt(2 * z0 / g)
    vx_after = F / m * t_c - mu * g * t_c
    x = np.where(t < t_c, 0.5 * F / m * t**2,
                 0.5 * F / m * t_c**2 + vx_after * (t - t_c) + 0.5 * (F - mu * m * g) / m * (t - t_c) ** 2)
    z = np.where(t < t_c, z0 - 0.5 * g * t**2, 0.0)
    return x, z


def test_seed_002_discrete_contact_rule_no_push_at_a_distance_and_first_order_convergence() -> None:
    """The model as shipped (tau = 0.1 s, eps = 1e-4 m/N): the largest error in x and in z over 5 s
    shrinks at least 5-fold from h = 50 ms to 5 ms, and while the gap is larger than one free step
    closes, the vertical velocity changes by exactly -g h (no contact impulse)."""
    model = particle()
    P = model.parameters.numpy_values()
    errors = {}
    for h in (0.05, 0.005):
        traj = simulate(model, 5.0, h, chunk=100)  # one chunk shape: one compile for both h
        x, z = _closed_form(traj.t, P)
        errors[h] = (np.abs(traj.observations[:, 0] - x).max(), np.abs(traj.observations[:, 1] - z).max())
        zk, vz = traj.states.r[:, 0, 2], traj.states.v[:, 0, 2]
        free_next_gap = zk[:-1] + h * (vz[:-1] - P["g"] * h)  # where a step without contact would end
        open_ = free_next_gap > 0
        assert open_.sum() > 0.5 / h  # the whole fall
        np.testing.assert_allclose(vz[1:][open_], vz[:-1][open_] - P["g"] * h, rtol=0, atol=1e-12)
        assert np.all(traj.info.lam_B[open_, 0] == 0.0)
        # The step that would cross the ground stops at it: no deeper than the compliance eps
        # under the largest contact force lam / h (the paper's rigid ground has eps = 0).
        assert zk.min() > -P["eps"] * traj.info.lam_B[:, 0].max() / h
    print(f"\nparticle max |error| (x, z) [m]: h = 50 ms {errors[0.05]}, h = 5 ms {errors[0.005]}")
    assert errors[0.05][0] / errors[0.005][0] >= 5 and errors[0.05][1] / errors[0.005][1] >= 5


def test_contact_normal_b_is_seed_002_when_open_spook_clipped_when_penetrating() -> None:
    h, gamma = 0.01, 1.0 / (1.0 + 4.0 * 0.1 / 0.01)
    f = jax.jit(jax.vmap(lambda g, cv: contact_normal_b(g, cv, gamma, h)))
    gap = jnp.array([0.3, 1e-3, 1e-3, -1e-3, -1e-3, -1e-3, 0.0, 0.0])
    cv = jnp.array([-0.1, -5.0, 5.0, 0.0, -5.0, 5.0, -1.0, 1.0])
    b = np.asarray(f(gap, cv))
    spook = 4 / h * gamma * np.asarray(gap) - gamma * np.asarray(cv)
    np.testing.assert_allclose(b[:3], np.asarray(gap[:3]) / h)  # open: gap + h C v_{k+1} >= 0
    assert b[3] == spook[3]  # resting overlap: Spook's relaxation
    assert b[4] == 0.0  # approaching while overlapping: the approach ends, no more
    assert b[5] == -1e-3 / h  # separating: never pushed out faster than one step removes the overlap
    np.testing.assert_array_equal(b[6:], 0.0)  # continuous at gap = 0
    grad = jax.grad(lambda g: contact_normal_b(g, -0.1, gamma, h))(0.3)
    assert grad == 1 / h


# ----------------------------------------------------------------- a sphere on a tilted plane


def _sphere_on_incline(angle: float, mu: float):
    from mbfg.parameters import ParameterSet
    from mbfg.rigid import Body, Contact, RigidModel, parameter

    n = (np.sin(angle), 0.0, np.cos(angle))  # the plane through the origin, tilted about y
    params = ParameterSet([parameter("R", 0.1, "m", 0.0), parameter("mu", mu, "", 0.0, 1.0),
                           parameter("g", 9.81, "m/s^2", 0.0)])
    m, J = 2.0, 0.4 * 2.0 * 0.1**2  # a solid sphere of 2 kg, radius 0.1 m
    centre = tuple(0.1 * np.asarray(n))  # touching the plane, at rest
    return RigidModel("sphere-incline", [Body("ball", m, (J, J, J), position=centre)],
                      contacts=[Contact("plane", "ball", normal=n, mu="mu", radius="R", eps=1e-8, tau=0.01)],
                      parameters=params), np.asarray(n)


def test_sphere_on_tilted_plane_slides_at_g_sin_minus_mu_cos_and_sticks_when_tan_below_mu() -> None:
    """Coulomb block on an incline (the sphere's friction acts through its centre, so it slides
    without rolling): at rest if tan(angle) <= mu, else accelerating down the slope at
    g (sin(angle) - mu cos(angle)); the centre stays at the radius from the plane."""
    h, T = 2e-3, 1.0
    for angle, mu in ((0.5, 0.3), (0.5, 0.8), (0.3, 0.1)):
        model, n = _sphere_on_incline(angle, mu)
        traj = simulate(model, T, h, chunk=500)
        r = traj.states.r[:, 0]
        down = np.array([np.cos(angle), 0.0, -np.sin(angle)])  # the downhill direction in the plane
        s = (r - r[0]) @ down
        height = r @ n
        np.testing.assert_allclose(height, 0.1, atol=1e-6)  # on the plane: gap 0 up to the compliance
        if np.tan(angle) < mu:
            assert np.abs(s).max() < 1e-6  # sticks (up to the friction compliance's creep)
        else:
            a = 9.81 * (np.sin(angle) - mu * np.cos(angle))
            acc = 2 * np.polyfit(traj.t[10:], s[10:], 2)[0]
            assert abs(acc - a) < 1e-3 * a, (angle, mu, acc, a)
            np.testing.assert_allclose(s, 0.5 * a * traj.t**2, atol=a * h * T)  # first order in h
