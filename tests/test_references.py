"""Tests of the independent physics references in ``tests/references.py``.

These check the references themselves (geometry, Lagrangian, integration,
agreement with the MSC Adams inverse dynamics result of MBSE), not ``mbfg``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.optimize import brentq
from scipy.special import ellipk

try:  # tests/ on sys.path (pytest's default rootdir-less import of this file)
    import references as R
except ImportError:  # tests/ imported as a package
    from tests import references as R

G = 9.81


# --------------------------------------------------------------------------
# Four-bar geometry
# --------------------------------------------------------------------------

def test_fourbar_points_initial_configuration_is_upper_branch():
    x1, y1, x2, y2 = R.fourbar_points(0.0)
    np.testing.assert_allclose([x1, y1, x2, y2], [1.0, 0.0, 1.0, 2.0], atol=1e-15)


def test_fourbar_points_vectorized_shapes():
    th = np.linspace(0.0, 1.0, 12).reshape(3, 4)
    out = R.fourbar_points(th)
    assert all(np.shape(o) == (3, 4) for o in out)
    k = R.fourbar_kinematics(th)
    assert k["p2"].shape == (3, 4, 2) and k["ddp2"].shape == (3, 4, 2)


def test_loop_closure_constraint_residuals_below_1e_12():
    th = np.linspace(-4 * np.pi, 4 * np.pi, 20001)
    x1, y1, x2, y2 = R.fourbar_points(th)
    np.testing.assert_allclose(np.hypot(x1, y1), R.FB_L1, rtol=0, atol=1e-12)
    np.testing.assert_allclose(np.hypot(x2 - x1, y2 - y1), 2.0, rtol=0, atol=1e-12)
    np.testing.assert_allclose(np.hypot(x2 - 4.0, y2), math.sqrt(13.0), rtol=0, atol=1e-12)


def test_assembly_branch_is_continuous_and_never_degenerate():
    # Grashof crank-rocker: P2 stays on the branch with P2 left of P1->D and
    # moves continuously (no jump to the mirror solution) for all crank angles.
    th = np.linspace(-4 * np.pi, 4 * np.pi, 80001)
    x1, y1, x2, y2 = R.fourbar_points(th)
    step = np.hypot(np.diff(x2), np.diff(y2))
    assert step.max() < 10 * (th[1] - th[0])
    side = (4.0 - x1) * (y2 - y1) - (0.0 - y1) * (x2 - x1)  # (D - P1) x (P2 - P1)
    assert side.min() > 0.5  # P2 strictly on the left of P1 -> D
    # 2 pi periodic
    np.testing.assert_allclose(R.fourbar_points(th[:100] + 2 * np.pi),
                               R.fourbar_points(th[:100]), atol=1e-12)


# --------------------------------------------------------------------------
# Four-bar Lagrangian terms
# --------------------------------------------------------------------------

def test_mass_and_gravity_torque_at_start_match_hand_derivation():
    # theta = 0: v1 = (0, 1), v2 = (2/3, 1) per unit crank rate,
    # coupler rate -1/3, rocker rate 1/3.
    # M = 1/3 + 2*(10/9) + (2/3)(1/9) + (4*13/3)(1/9) = 41/9
    # dV/dtheta = g (1*0.5 + 2*1 + 4*0.5) = 4.5 g
    M, dM, V, dV = R.fourbar_terms(0.0, G)
    assert M == pytest.approx(41.0 / 9.0, rel=1e-14)
    assert dV == pytest.approx(4.5 * G, rel=1e-14)
    assert V == pytest.approx(G * (1 * 0.0 + 2 * 1.0 + 4 * 1.0), rel=1e-14)
    # Required torque for the prescribed motion at t = 0 (alpha = 4.8).
    assert R.fourbar_inverse_torque(0.0, 0.0, 4.8, G) == pytest.approx(41 / 9 * 4.8 + 4.5 * G)


def test_analytic_derivatives_match_jax_autodiff_of_own_geometry():
    """Position derivatives, M, M', V, V' against jax autodiff.

    The jax side rebuilds the geometry independently (P2 by rotating the
    coupler from P1 with the cosine rule) and the link angles by atan2.
    """
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    with jax.enable_x64(True):
        A = jnp.array([0.0, 0.0])
        D = jnp.array([4.0, 0.0])
        L1, L2, L3 = 1.0, 2.0, jnp.sqrt(13.0)

        def points(th):
            p1 = A + L1 * jnp.array([jnp.cos(th), jnp.sin(th)])
            e = D - p1
            d = jnp.linalg.norm(e)
            # angle at P1 between P1->D and P1->P2 (cosine rule), P2 to the left
            beta = jnp.arccos((L2**2 + d**2 - L3**2) / (2 * L2 * d))
            gam = jnp.arctan2(e[1], e[0]) + beta
            p2 = p1 + L2 * jnp.array([jnp.cos(gam), jnp.sin(gam)])
            return p1, p2

        def links(th):
            p1, p2 = points(th)
            def ang(a, b):
                return jnp.arctan2(b[1] - a[1], b[0] - a[0])

            # (mass, I_cog, cog, angle)
            return [
                (1.0, 1.0 / 12, 0.5 * (A + p1), ang(A, p1)),
                (2.0, 2.0 * 4 / 12, 0.5 * (p1 + p2), ang(p1, p2)),
                (4.0, 4.0 * 13 / 12, 0.5 * (p2 + D), ang(p2, D)),
            ]

        def cogs_and_angles(th):
            ls = links(th)
            return jnp.stack([l[2] for l in ls]), jnp.stack([l[3] for l in ls])

        masses = jnp.array([1.0, 2.0, 4.0])
        inertias = jnp.array([1.0 / 12, 8.0 / 12, 52.0 / 12])

        def M_fn(th):
            dc, dphi = jax.jacfwd(cogs_and_angles)(th)
            return jnp.sum(masses * jnp.sum(dc**2, axis=-1)) + jnp.sum(inertias * dphi**2)

        def V_fn(th):
            c, _ = cogs_and_angles(th)
            return G * jnp.sum(masses * c[:, 1])

        def p2_fn(th):
            return points(th)[1]

        def all_terms(th):
            return dict(p2=p2_fn(th), dp2=jax.jacfwd(p2_fn)(th),
                        ddp2=jax.jacfwd(jax.jacfwd(p2_fn))(th),
                        M=M_fn(th), dM=jax.grad(M_fn)(th),
                        V=V_fn(th), dV=jax.grad(V_fn)(th))

        ths = np.linspace(-2 * np.pi, 2 * np.pi, 41)
        ref = {k: np.asarray(v) for k, v in
               jax.jit(jax.vmap(all_terms))(jnp.asarray(ths)).items()}
    k = R.fourbar_kinematics(ths)
    M, dM, V, dV = R.fourbar_terms(ths, G)
    for name, val in [("p2", k["p2"]), ("dp2", k["dp2"]), ("ddp2", k["ddp2"]),
                      ("M", M), ("dM", dM), ("V", V), ("dV", dV)]:
        np.testing.assert_allclose(val, ref[name], rtol=1e-10, atol=1e-10, err_msg=name)


def test_scalar_ode_terms_match_vectorized_terms():
    th = np.linspace(-7.0, 7.0, 301)
    vec = np.array(R.fourbar_terms(th, G))
    sca = np.array([R._fourbar_terms_scalar(float(t), G) for t in th]).T
    np.testing.assert_allclose(sca, vec, rtol=1e-13, atol=1e-12)


# --------------------------------------------------------------------------
# Four-bar forward dynamics
# --------------------------------------------------------------------------

@pytest.fixture(scope="module")
def free_swing():
    t = np.linspace(0.0, 5.0, 5001)
    return R.fourbar_forward(t, g=G)


def test_fourbar_energy_conserved_over_5s_free_swing(free_swing):
    E = free_swing["energy"]
    rel = np.max(np.abs(E - E[0])) / abs(E[0])
    print(f"\nfour-bar free swing, 5 s: max |E - E0| / |E0| = {rel:.2e}")
    assert rel < 1e-8


def test_fourbar_free_swing_turning_point_matches_potential_level(free_swing):
    # Released at rest: the crank turns back where V(theta) = V(0).
    V0 = R.fourbar_potential(0.0, G)[0]
    def f(th):
        return float(R.fourbar_potential(th, G)[0] - V0)

    th_turn = brentq(f, -3.9, -3.5, xtol=1e-14)
    assert free_swing["theta"].min() == pytest.approx(th_turn, abs=1e-6)
    assert free_swing["theta"].max() == pytest.approx(0.0, abs=1e-6)


def test_fourbar_forward_outputs_are_consistent(free_swing):
    s = free_swing
    x1, y1, x2, y2 = R.fourbar_points(s["theta"])
    np.testing.assert_allclose(s["x2"], x2, atol=1e-14)
    np.testing.assert_allclose(s["y1"], y1, atol=1e-14)
    # velocities: compare with a finite difference of the sampled positions
    dt = s["t"][1] - s["t"][0]
    for p, v in [("x1", "vx1"), ("y1", "vy1"), ("x2", "vx2"), ("y2", "vy2")]:
        fd = (s[p][2:] - s[p][:-2]) / (2 * dt)
        np.testing.assert_allclose(fd, s[v][1:-1], atol=5e-4 * np.abs(s[v]).max())
    fd = (s["omega"][2:] - s["omega"][:-2]) / (2 * dt)
    np.testing.assert_allclose(fd, s["alpha"][1:-1], atol=5e-4 * np.abs(s["alpha"]).max())


# --------------------------------------------------------------------------
# Four-bar inverse dynamics vs the prescribed trajectory and MSC Adams
# --------------------------------------------------------------------------

def test_trajectory_file_matches_crank_trajectory():
    d = R.load_crank_trajectory()
    assert d["t"].shape == (2000,)
    np.testing.assert_allclose(d["t"], 0.005 * np.arange(2000), atol=1e-12)
    th, _, _ = R.crank_trajectory(d["t"])
    # the file holds 8 significant digits
    np.testing.assert_allclose(d["theta"], th, rtol=1e-7, atol=1e-9)


def test_crank_trajectory_derivatives_are_consistent():
    t = np.linspace(0.0, 10.0, 100001)
    th, om, al = R.crank_trajectory(t)
    np.testing.assert_allclose(np.gradient(th, t)[1:-1], om[1:-1], atol=1e-6)
    np.testing.assert_allclose(np.gradient(om, t)[1:-1], al[1:-1], atol=1e-6)


def test_adams_angle_column_follows_crank_trajectory():
    a = R.load_adams_torque()
    assert a["t"].shape == (2000,)
    th, _, _ = R.crank_trajectory(a["t"])
    np.testing.assert_allclose(a["angle_deg"], np.rad2deg(th), atol=1e-4)


def test_adams_torque_matches_closed_form_inverse_dynamics():
    """Closed-form driving torque == MINUS the Adams torque column.

    Sign convention: fourbar_inverse_torque returns the torque applied to the
    crank (positive along +theta, counter-clockwise); Adams lists the opposite
    sign (-66.003 N m at t = 0 where the driving torque is +66.012 N m).
    """
    a = R.load_adams_torque()
    th, om, al = R.crank_trajectory(a["t"])
    tau = R.fourbar_inverse_torque(th, om, al, g=9.81)
    peak = np.abs(a["torque"]).max()
    rms_minus = np.sqrt(np.mean((tau - (-a["torque"])) ** 2)) / peak
    rms_plus = np.sqrt(np.mean((tau - a["torque"]) ** 2)) / peak
    max_minus = np.abs(tau + a["torque"]).max() / peak
    print(f"\nAdams four-bar inverse dynamics: peak |torque| = {peak:.4f} N m; "
          f"RMS(tau - (-adams)) = {100 * rms_minus:.4f} % of peak "
          f"(max {100 * max_minus:.4f} %); RMS(tau - (+adams)) = {100 * rms_plus:.1f} % of peak")
    assert rms_minus < 5e-4
    assert rms_plus > 0.5  # the other sign is clearly wrong
    assert tau[0] == pytest.approx(-a["torque"][0], rel=2e-4)


def test_inverse_torque_as_applied_torque_reproduces_crank_trajectory():
    t = np.linspace(0.0, 2.0, 401)

    def torque(tt):
        return float(R.fourbar_inverse_torque(*R.crank_trajectory(tt), g=G))

    s = R.fourbar_forward(t, g=G, theta0=0.0, omega0=0.0, torque=torque)
    th, om, _ = R.crank_trajectory(t)
    err = np.abs(s["theta"] - th).max()
    print(f"\nforward(inverse torque) vs prescribed crank angle, 2 s: max error = {err:.2e} rad")
    assert err < 1e-6
    np.testing.assert_allclose(s["omega"], om, atol=1e-6)


# --------------------------------------------------------------------------
# Simple pendulum
# --------------------------------------------------------------------------

@pytest.fixture(scope="module")
def pendulum():
    return R.pendulum_forward(np.linspace(0.0, 5.0, 5001), g=G)


def test_pendulum_initial_tip_position(pendulum):
    assert pendulum["x1"][0] == pytest.approx(2 * math.cos(math.radians(45)), abs=1e-15)
    assert pendulum["y1"][0] == pytest.approx(2 * math.sin(math.radians(45)), abs=1e-15)
    np.testing.assert_allclose(np.hypot(pendulum["x1"], pendulum["y1"]), 2.0, atol=1e-14)


def test_pendulum_energy_conserved_over_5s(pendulum):
    E = pendulum["energy"]
    scale = R.PEND_M * G * 0.5 * R.PEND_L  # m g L/2, the potential's amplitude
    rel = np.max(np.abs(E - E[0])) / scale
    print(f"\npendulum, 5 s: max |E - E0| / (m g L/2) = {rel:.2e}")
    assert rel < 1e-8


def test_pendulum_swing_amplitude_and_period_match_elliptic_integral():
    # Angle from the downward vertical: psi = phi + 90 deg, amplitude 135 deg.
    amp = math.radians(135.0)
    w0 = math.sqrt(R.PEND_M * G * 0.5 * R.PEND_L / R.PEND_I0)
    period = 4.0 / w0 * ellipk(math.sin(amp / 2) ** 2)
    s = R.pendulum_forward(np.array([0.0, period / 2, period]), g=G)
    # half a period: the opposite extreme, phi = -90 - 135 = -225 deg, at rest
    assert s["phi"][1] == pytest.approx(math.radians(-225.0), abs=1e-8)
    assert s["omega"][1] == pytest.approx(0.0, abs=1e-7)
    assert s["phi"][2] == pytest.approx(math.radians(45.0), abs=1e-8)
