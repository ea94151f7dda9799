"""Tests of the minimal-coordinate 3D rigid-body references in
``tests/rigid_references.py`` (pendulum, double pendulum, Furuta pendulum).

These check the references themselves, not ``mbfg``: energy conservation and
dissipation, work-energy balance of the motors, the closed-form periods, the
DFKI mass-matrix form, and Lagrange's equations evaluated numerically from the
position/rotation-based energy (which is independent of the hand-derived
mass matrices and Coriolis terms).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.special import ellipk

try:  # tests/ on sys.path (pytest's default import of this file)
    import rigid_references as R
except ImportError:  # tests/ imported as a package
    from tests import rigid_references as R

G = 9.81
G_DOWN = np.array([0.0, 0.0, -G])
# A tilted gravity (magnitude 9.81) with components along all three axes.
G_TILT = G * np.array([0.35, -0.25, -1.0]) / np.linalg.norm([0.35, -0.25, -1.0])

PEND = dict(m=0.2, J=1.6e-3, d=0.12, b=2e-3)
DPEND = dict(m1=0.6, m2=0.6, l1=0.3, r1=0.3, r2=0.2, J1=1.0e-3, J2=1.0e-3, b1=1e-3, b2=1e-3)
FURUTA = dict(m_A=0.095, m_B=0.024, r_A=0.04, L_A=0.085, r_B=0.0645,
              J_Ax=1e-6, J_Ay=6e-5, J_Az=6e-5, J_Bx=3.3e-5, J_By=3.3e-5, J_Bz=1e-7,
              K=0.04, J_s=4e-6, b_1=5e-4, b_2=1e-5)


def frictionless(p):
    q = dict(p)
    for k in ("b", "b1", "b2", "b_1", "b_2"):
        if k in q:
            q[k] = 0.0
    return q


# name: (ode, energy, params, y0, friction power(y, p))
SYSTEMS = {
    "pendulum": (R.pendulum_ode, R.pendulum_energy, PEND, [2.0, 1.0],
                 lambda y, p: p["b"] * y[1] ** 2),
    "double_pendulum": (R.double_pendulum_ode, R.double_pendulum_energy, DPEND,
                        [1.2, -0.8, 0.5, 2.0],
                        lambda y, p: p["b1"] * y[2] ** 2 + p["b2"] * y[3] ** 2),
    "furuta": (R.furuta_ode, R.furuta_energy, FURUTA, [0.3, 2.5, 3.0, -4.0],
               lambda y, p: p["b_1"] * y[2] ** 2 + p["b_2"] * y[3] ** 2),
}


def energies(energy_fn, Y, p, g):
    """Total energy, kinetic and potential along a trajectory Y (rows = states)."""
    n = Y.shape[1] // 2
    E = np.array([energy_fn(y, p, g) for y in Y])
    V = np.array([energy_fn(np.concatenate([y[:n], np.zeros(n)]), p, g) for y in Y])
    return E, E - V, V


def energy_scale(T, V):
    return max(np.max(np.abs(T)), np.max(np.abs(V)))


# --------------------------------------------------------------------------
# Geometry conventions
# --------------------------------------------------------------------------

def test_positions_follow_the_stated_conventions():
    p_com, Rm = R.pendulum_positions([math.pi / 2, 0.0], PEND)
    np.testing.assert_allclose(p_com, [-PEND["d"], 0.0, 0.0], atol=1e-15)
    np.testing.assert_allclose(Rm, R.Ry(math.pi / 2), atol=1e-15)

    p1, p2, R1, R2 = R.double_pendulum_positions([0.0, math.pi / 2, 0, 0], DPEND)
    np.testing.assert_allclose(p1, [0.0, 0.0, -DPEND["r1"]], atol=1e-15)
    np.testing.assert_allclose(p2, [-DPEND["r2"], 0.0, -DPEND["l1"]], atol=1e-15)
    np.testing.assert_allclose(R2, R.Ry(math.pi / 2), atol=1e-15)

    pa, pb, RA, RB = R.furuta_positions([0.0, 0.0, 0, 0], FURUTA)
    np.testing.assert_allclose(pa, [FURUTA["r_A"], 0, 0], atol=1e-15)
    np.testing.assert_allclose(pb, [FURUTA["L_A"], 0, -FURUTA["r_B"]], atol=1e-15)
    # arm at 90 deg, pendulum swung by +90 deg about the arm (A's x = world y)
    pa, pb, RA, RB = R.furuta_positions([math.pi / 2, math.pi / 2, 0, 0], FURUTA)
    np.testing.assert_allclose(pa, [0, FURUTA["r_A"], 0], atol=1e-15)
    np.testing.assert_allclose(pb, [-FURUTA["r_B"], FURUTA["L_A"], 0], atol=1e-15)
    np.testing.assert_allclose(RB, R.Rz(math.pi / 2) @ R.Rx(math.pi / 2), atol=1e-15)


# --------------------------------------------------------------------------
# Mass matrices
# --------------------------------------------------------------------------

def test_double_pendulum_mass_matrix_matches_dfki_form():
    p = DPEND
    I1 = p["J1"] + p["m1"] * p["r1"] ** 2
    I2 = p["J2"] + p["m2"] * p["r2"] ** 2
    for q2 in np.linspace(-3.0, 3.0, 13):
        c = math.cos(q2)
        expected = np.array([
            [I1 + I2 + p["m2"] * p["l1"] ** 2 + 2 * p["m2"] * p["l1"] * p["r2"] * c,
             I2 + p["m2"] * p["l1"] * p["r2"] * c],
            [I2 + p["m2"] * p["l1"] * p["r2"] * c, I2]])
        np.testing.assert_allclose(R.double_pendulum_mass_matrix([0.7, q2], p), expected,
                                   rtol=1e-14)


def numeric_mass_matrix(energy_fn, q, p, g):
    """Hessian of the position-based kinetic energy in the rates (polarisation)."""
    n = len(q)
    q = np.asarray(q, float)

    def T(qd):
        return energy_fn(np.concatenate([q, qd]), p, g) - energy_fn(np.concatenate([q, np.zeros(n)]), p, g)

    E = np.eye(n)
    M = np.empty((n, n))
    for i in range(n):
        for j in range(n):
            M[i, j] = T(E[i] + E[j]) - T(E[i]) - T(E[j]) if i != j else 2.0 * T(E[i])
    return M


@pytest.mark.parametrize("name", ["double_pendulum", "furuta"])
def test_mass_matrix_equals_hessian_of_position_based_kinetic_energy(name):
    _, energy_fn, p, _, _ = SYSTEMS[name]
    mass = {"double_pendulum": R.double_pendulum_mass_matrix, "furuta": R.furuta_mass_matrix}[name]
    rng = np.random.default_rng(1)
    for _ in range(10):
        q = rng.uniform(-math.pi, math.pi, 2)
        M_num = numeric_mass_matrix(energy_fn, q, p, G_TILT)
        M = mass(q, p)
        np.testing.assert_allclose(M, M_num, rtol=1e-10, atol=1e-12 * np.abs(M).max())
        assert np.all(np.linalg.eigvalsh(M) > 0)


# --------------------------------------------------------------------------
# Lagrange's equations from the independent energy function
# --------------------------------------------------------------------------

def lagrange_residual(ode, energy_fn, y, p, g, ctrl, Q):
    """d/dt dT/dq' - dT/dq + dV/dq - Q with T, V from the position-based energy,
    q'' from the reference ODE; returns (residual, scale)."""
    y = np.asarray(y, float)
    n = y.size // 2
    q, qd = y[:n], y[n:]
    zero = np.zeros(n)

    def V(qq):
        return energy_fn(np.concatenate([qq, zero]), p, g)

    def T(qq, vv):
        return energy_fn(np.concatenate([qq, vv]), p, g) - V(qq)

    E = np.eye(n)

    def momentum(qq, vv):  # exact for T quadratic in the rates
        return np.array([(T(qq, vv + E[i]) - T(qq, vv - E[i])) / 2.0 for i in range(n)])

    M = np.column_stack([momentum(q, E[j]) for j in range(n)])
    h = 1e-5
    dmom_along_q = (momentum(q + h * qd, qd) - momentum(q - h * qd, qd)) / (2 * h)
    dT_dq = np.array([(T(q + h * E[i], qd) - T(q - h * E[i], qd)) / (2 * h) for i in range(n)])
    dV_dq = np.array([(V(q + h * E[i]) - V(q - h * E[i])) / (2 * h) for i in range(n)])
    args = (p, g) if ctrl is None else (p, g, ctrl)
    qdd = ode(0.0, y, *args)[n:]
    res = M @ qdd + dmom_along_q - dT_dq + dV_dq - Q
    scale = np.abs(M @ qdd).max() + np.abs(dV_dq).max() + np.abs(dT_dq).max()
    return res, scale


@pytest.mark.parametrize("name", list(SYSTEMS))
@pytest.mark.parametrize("g", [G_DOWN, G_TILT], ids=["g_down", "g_tilted"])
def test_reference_ode_satisfies_lagrange_equations_of_position_based_energy(name, g):
    ode, energy_fn, p, _, _ = SYSTEMS[name]
    rng = np.random.default_rng(7)
    for _ in range(8):
        n = 1 if name == "pendulum" else 2
        y = np.concatenate([rng.uniform(-math.pi, math.pi, n), rng.uniform(-6, 6, n)])
        if name == "pendulum":
            ctrl, Q = None, np.array([-p["b"] * y[1]])
        elif name == "double_pendulum":
            tau = np.array([0.3, -0.2])
            ctrl = lambda t, tau=tau: tau  # noqa: E731
            Q = tau - np.array([p["b1"] * y[2], p["b2"] * y[3]])
        else:
            u = 1.7
            ctrl = lambda t, u=u: u  # noqa: E731
            Q = np.array([p["K"] * u - p["b_1"] * y[2], -p["b_2"] * y[3]])
        res, scale = lagrange_residual(ode, energy_fn, y, p, g, ctrl, Q)
        assert np.abs(res).max() < 1e-7 * scale, (y, res, scale)


# --------------------------------------------------------------------------
# Energy conservation and dissipation
# --------------------------------------------------------------------------

@pytest.mark.parametrize("name", list(SYSTEMS))
@pytest.mark.parametrize("g", [G_DOWN, G_TILT], ids=["g_down", "g_tilted"])
def test_energy_conserved_without_friction_or_controls(name, g):
    ode, energy_fn, p, y0, _ = SYSTEMS[name]
    p = frictionless(p)
    t = np.linspace(0.0, 8.0, 801)
    Y = R.simulate_reference(ode, y0, t, p, g)
    E, T, V = energies(energy_fn, Y, p, g)
    # the motion is non-trivial: kinetic and potential energy exchange
    assert np.ptp(T) > 0.1 * energy_scale(T, V)
    assert np.max(np.abs(E - E[0])) < 1e-9 * energy_scale(T, V)


def test_furuta_all_inertias_and_offsets_nonzero_in_energy_test():
    # guard: the Furuta energy test really exercises every parameter
    for k in ("m_A", "m_B", "r_A", "L_A", "r_B", "J_Ax", "J_Ay", "J_Az", "J_Bx", "J_By",
              "J_Bz", "J_s"):
        assert FURUTA[k] > 0
    # and the arm actually moves (tilted gravity drives it too)
    Y = R.simulate_reference(R.furuta_ode, SYSTEMS["furuta"][3], [0.0, 1.0, 2.0],
                             frictionless(FURUTA), G_TILT)
    assert np.ptp(Y[:, 0]) > 0.1 and np.ptp(Y[:, 1]) > 0.1


@pytest.mark.parametrize("name", list(SYSTEMS))
def test_energy_decreases_monotonically_with_viscous_friction(name):
    ode, energy_fn, p, y0, _ = SYSTEMS[name]
    t = np.linspace(0.0, 6.0, 601)
    Y = R.simulate_reference(ode, y0, t, p, G_TILT)
    E, T, V = energies(energy_fn, Y, p, G_TILT)
    scale = energy_scale(T, V)
    assert np.all(np.diff(E) <= 1e-12 * scale)
    assert E[0] - E[-1] > 1e-3 * scale


@pytest.mark.parametrize("name", list(SYSTEMS))
def test_energy_loss_equals_integrated_friction_power(name):
    ode, energy_fn, p, y0, power = SYSTEMS[name]

    def aug(t, z):
        return np.append(ode(t, z[:-1], p, G_TILT), power(z[:-1], p))

    t = np.linspace(0.0, 5.0, 51)
    Z = R.simulate_reference(aug, np.append(y0, 0.0), t)
    E, T, V = energies(energy_fn, Z[:, :-1], p, G_TILT)
    assert Z[-1, -1] > 1e-3 * energy_scale(T, V)
    np.testing.assert_allclose(E[0] - E, Z[:, -1], rtol=0, atol=1e-9 * energy_scale(T, V))


# --------------------------------------------------------------------------
# Pendulum periods
# --------------------------------------------------------------------------

def test_pendulum_small_angle_period_is_2pi_sqrt_inertia_over_mgd():
    p = frictionless(PEND)
    T = 2 * math.pi * math.sqrt((p["J"] + p["m"] * p["d"] ** 2) / (p["m"] * G * p["d"]))
    th0 = 1e-3  # amplitude correction to the period ~ th0^2/16 = 6e-8
    Y = R.simulate_reference(R.pendulum_ode, [th0, 0.0], [0, T / 4, T / 2, 3 * T / 4, T], p, G_DOWN)
    np.testing.assert_allclose(Y[:, 0], [th0, 0.0, -th0, 0.0, th0], rtol=0, atol=1e-5 * th0)


def test_pendulum_large_amplitude_period_matches_elliptic_integral():
    p = frictionless(PEND)
    th0 = 1.0
    w0 = math.sqrt(p["m"] * G * p["d"] / (p["J"] + p["m"] * p["d"] ** 2))
    T = 4.0 * ellipk(math.sin(th0 / 2) ** 2) / w0
    Y = R.simulate_reference(R.pendulum_ode, [th0, 0.0], [0, T / 4, T / 2, T], p, G_DOWN)
    np.testing.assert_allclose(Y[:, 0], [th0, 0.0, -th0, th0], rtol=0, atol=1e-8)


def test_pendulum_tilted_gravity_equilibrium_and_period():
    # gravity in the x-z plane plus a component along the hinge axis (no effect)
    g = np.array([3.0, 4.0, -9.0])
    g_perp = math.hypot(3.0, 9.0)
    th_eq = math.atan2(-3.0, 9.0)  # CoM (-d sin th, -d cos th) along (gx, gz)
    p = frictionless(PEND)
    Y = R.simulate_reference(R.pendulum_ode, [th_eq, 0.0], np.linspace(0, 2, 5), p, g)
    np.testing.assert_allclose(Y[:, 0], th_eq, rtol=0, atol=1e-12)
    T = 2 * math.pi * math.sqrt((p["J"] + p["m"] * p["d"] ** 2) / (p["m"] * g_perp * p["d"]))
    a = 1e-3
    Y = R.simulate_reference(R.pendulum_ode, [th_eq + a, 0.0], [0, T / 4, T / 2, T], p, g)
    np.testing.assert_allclose(Y[:, 0] - th_eq, [a, 0.0, -a, a], rtol=0, atol=1e-5 * a)


# --------------------------------------------------------------------------
# Work done by joint torques / the Furuta motor
# --------------------------------------------------------------------------

def test_furuta_motor_work_equals_energy_change():
    p = frictionless(FURUTA)

    def u(t):
        return 2.0 * math.sin(3.0 * t) + 0.5

    def aug(t, z):
        return np.append(R.furuta_ode(t, z[:4], p, G_TILT, u), p["K"] * u(t) * z[2])

    t = np.linspace(0.0, 6.0, 301)
    Z = R.simulate_reference(aug, [0.3, 2.5, 3.0, -4.0, 0.0], t)
    E, T, V = energies(R.furuta_energy, Z[:, :4], p, G_TILT)
    W = Z[:, 4]
    assert np.max(np.abs(W)) > 0.1 * energy_scale(T, V)  # the motor does real work
    np.testing.assert_allclose(E - E[0], W, rtol=0, atol=1e-9 * energy_scale(T, V))


def test_furuta_zoh_motor_work_equals_energy_change():
    # u held on each interval: motor work is exactly K * sum u_k (theta_{k+1} - theta_k)
    p = frictionless(FURUTA)
    rng = np.random.default_rng(3)
    t = np.arange(0.0, 2.0 + 1e-12, 0.01)
    u = rng.uniform(-4.0, 4.0, t.size - 1)
    Y = R.simulate_reference_zoh(R.furuta_ode, [0.0, 0.2, 0.0, 0.0], t, u, p, G_TILT)
    assert Y.shape == (t.size, 4)
    E, T, V = energies(R.furuta_energy, Y, p, G_TILT)
    W = np.concatenate([[0.0], np.cumsum(p["K"] * u * np.diff(Y[:, 0]))])
    assert np.max(np.abs(W)) > 0.1 * energy_scale(T, V)
    np.testing.assert_allclose(E - E[0], W, rtol=0, atol=1e-9 * energy_scale(T, V))


def test_double_pendulum_zoh_joint_torque_work_equals_energy_change():
    p = frictionless(DPEND)
    rng = np.random.default_rng(4)
    t = np.arange(0.0, 2.0 + 1e-12, 0.02)
    tau = rng.uniform(-1.0, 1.0, (t.size - 1, 2))
    Y = R.simulate_reference_zoh(R.double_pendulum_ode, [0.5, -0.3, 0.0, 0.0], t, tau, p, G_TILT)
    E, T, V = energies(R.double_pendulum_energy, Y, p, G_TILT)
    dq = np.diff(Y[:, :2], axis=0)
    W = np.concatenate([[0.0], np.cumsum(np.sum(tau * dq, axis=1))])
    assert np.max(np.abs(W)) > 0.1 * energy_scale(T, V)
    np.testing.assert_allclose(E - E[0], W, rtol=0, atol=1e-9 * energy_scale(T, V))


def test_zoh_with_constant_control_matches_single_solve():
    p = FURUTA
    t = np.linspace(0.0, 1.0, 21)
    Yz = R.simulate_reference_zoh(R.furuta_ode, [0.1, 0.3, 0.0, 1.0], t, np.full(20, 1.5), p, G_DOWN)
    Ys = R.simulate_reference(R.furuta_ode, [0.1, 0.3, 0.0, 1.0], t, p, G_DOWN, lambda s: 1.5)
    np.testing.assert_allclose(Yz, Ys, rtol=0, atol=1e-9)
    assert np.ptp(Ys[:, 0]) > 0.1
