"""Planar mechanisms with redundant constraints (issue 19, item 3).

The mechanism is the built-in ``parallelogram`` (datasets/parallelogram.yaml):
three equal parallel cranks A-P1, B-P2, C-P3 of length L carry a triangular
coupler P1-P2-P3 congruent to the fixed triangle A-B-C. Its 7 constraint rows
(3 crank lengths, the coupler's 3 distances, the angle theta1 of crank 1) have
rank 6 at every configuration: 1 degree of freedom, where n - m says 0.

The physics reference is independent of natural coordinates and of mbfg: the
coupler only translates (every crank turns by the same theta, so the coupler
moves on a circle of radius L without rotating), hence with the crank angle
theta as the one coordinate

    T = 1/2 M theta'^2,   M = sum_i I0_i + m_c L^2                  [kg m^2]
    V = g [ sum_i m_i (a_i sin theta + b_i cos theta) + m_c L sin theta ] + const

(crank i: mass m_i, centre of gravity (a_i, b_i) in its frame, inertia I0_i =
m_i L^2 / 3 + m_i b_i^2 about its pivot; the coupler's own inertia never
enters). M is constant, so Lagrange's equation is

    M theta'' + dV/dtheta = tau,
    dV/dtheta = g [ sum_i m_i (a_i cos theta - b_i sin theta) + m_c L cos theta ],

tau being a torque on theta. Point k of the coupler is its crank's pivot plus
L (cos theta, sin theta). Units: SI (m, kg, s, rad, N m).

Print the measured figures with ``python -m pytest -n 0 -q -s tests/test_redundant_constraints.py``.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy.integrate import solve_ivp

from mbfg import planar
from mbfg._jax import jax, jnp
from mbfg.cli import main
from mbfg.datasets import fourbar_crank_trajectory, load_mechanism, mechanism_path
from mbfg.errors import ModelError
from mbfg.graphs import simulate_forward, solve_inverse_dynamics
from mbfg.planar import Body, PlanarMechanism, Point

G_SEED = 9.8  # Blanco-Claraco et al. (2021) section 7.1, as the four-bar forward tests
L = 1.0  # crank length [m]
PIVOTS = np.array([[0.0, 0.0], [2.0, 0.0], [1.0, 1.0]])  # A, B, C [m]
CRANKS = [(1.0, 0.5, 0.0), (1.5, 0.5, 0.0), (0.5, 0.5, 0.1)]  # (m [kg], a [m], b [m]) of cranks 1-3
M_COUPLER = 3.0  # [kg]
M_THETA = sum(m * L**2 / 3 + m * b**2 for m, _, b in CRANKS) + M_COUPLER * L**2  # [kg m^2]


def dV_dtheta(theta: np.ndarray, g: float) -> np.ndarray:
    """dV/dtheta [N m] of the minimal-coordinate model (module docstring)."""
    c, s = np.cos(theta), np.sin(theta)
    return g * (sum(m * (a * c - b * s) for m, a, b in CRANKS) + M_COUPLER * L * c)


def energy(theta: np.ndarray, theta_dot: np.ndarray, g: float) -> np.ndarray:
    """T + V [J] of the minimal-coordinate model (V = 0 at theta = 0 up to a constant)."""
    c, s = np.cos(theta), np.sin(theta)
    V = g * (sum(m * (a * s + b * c) for m, a, b in CRANKS) + M_COUPLER * L * s)
    return 0.5 * M_THETA * theta_dot**2 + V


def crank_reference(t: np.ndarray, theta0: float, g: float) -> np.ndarray:
    """theta (N,) [rad] of the free motion from rest at theta0, by DOP853 at rtol 1e-11."""
    sol = solve_ivp(
        lambda _, y: [y[1], -dV_dtheta(y[0], g) / M_THETA],
        (t[0], t[-1]), [theta0, 0.0], method="DOP853", t_eval=t, rtol=1e-11, atol=1e-12,
    )
    assert sol.success
    return sol.y[0]


def points_of(theta: np.ndarray) -> np.ndarray:
    """[x1 y1 x2 y2 x3 y3] (N, 6) [m] of the crank tips at crank angles theta (N,)."""
    u = np.stack([np.cos(theta), np.sin(theta)], axis=1)
    return np.concatenate([PIVOTS[k] + L * u for k in range(3)], axis=1)


def theta_of(q: np.ndarray, qdot: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Crank angle [rad] and rate [rad/s] from the points of crank 1 (not from theta1)."""
    x, y, vx, vy = q[:, 0], q[:, 1], qdot[:, 0], qdot[:, 1]
    return np.unwrap(np.arctan2(y, x)), (x * vy - y * vx) / L**2


@pytest.fixture(scope="module")
def mech() -> PlanarMechanism:
    return load_mechanism("parallelogram")


def _state(mech: PlanarMechanism, theta: float, theta_dot: float) -> tuple[np.ndarray, np.ndarray]:
    """q, qdot (7,) of the mechanism at crank angle theta and rate theta_dot (exact, from the geometry)."""
    du = np.array([-math.sin(theta), math.cos(theta)])
    q = np.concatenate([points_of(np.array([theta]))[0], [theta]])
    qdot = np.concatenate([du, du, du, [1.0]]) * theta_dot
    assert np.max(np.abs(mech.phi(q))) < 1e-12 and np.max(np.abs(mech.phi_q(q) @ qdot)) < 1e-12
    return q, qdot


# --------------------------------------------------------------------------------------
# Degrees of freedom from the rank
# --------------------------------------------------------------------------------------


def test_dof_is_coordinates_minus_the_rank_of_phi_q_not_minus_the_rows(mech):
    assert (mech.n, mech.m, mech.rank, mech.dof) == (7, 7, 6, 1)
    assert mech.n - mech.m == 0  # the old count: a locked mechanism
    assert len(mech.redundant_rows) == 1
    # Rank 6 at every pose of a full turn, with a clear gap: the redundancy is structural,
    # and the third crank removes the parallelogram's singular poses at 0 and 180 degrees.
    gaps = []
    for theta in np.linspace(-math.pi, math.pi, 37):
        s = np.linalg.svd(mech.phi_q(_state(mech, theta, 0.0)[0]), compute_uv=False)
        assert s[-1] < 1e-14 * s[0]
        gaps.append(s[-2] / s[0])
    print(f"\nparallelogram: smallest non-zero singular value of Phi_q over a turn >= {min(gaps):.3f} of the largest")
    assert min(gaps) > 1e-2
    assert mech.null_space().shape == (7, 1) and len(mech.independent_coordinates()) == 1
    assert "rank 6: 1 redundant" in repr(mech)


def test_two_dof_mechanism_with_a_redundant_parallelogram():
    """The parallelogram (no theta1) with a pendulum hanging from P3: 8 coordinates, 7 rows, rank 6, 2 dof."""
    points = [Point(0, 0, True), Point(1, 0), Point(2, 0, True), Point(3, 0), Point(1, 1, True), Point(2, 1),
              Point(2, 0)]
    bar = dict(mass=1.0, I0=1.0 / 3.0, cog=(0.5, 0.0))
    bodies = [Body((0, 1), **bar), Body((2, 3), **bar), Body((4, 5), **bar), Body((1, 3, 5), 3.0, 5.0, (1.0, 1 / 3)),
              Body((5, 6), **bar)]
    two = PlanarMechanism(points, bodies, name="parallelogram+pendulum")
    assert (two.n, two.m, two.rank, two.dof) == (8, 7, 6, 2)
    assert two.n - two.m == 1  # the old count
    # Without the redundant crank: no redundant row, the same 2 dof. (Drawn with the cranks upright: with them
    # horizontal, as above, two parallel cranks sit at their singular pose, where the rank drops.)
    points = [Point(0, 0, True), Point(0, 1), Point(2, 0, True), Point(2, 1), Point(1, 2), Point(1, 1)]
    bodies = [Body((0, 1), **bar), Body((2, 3), **bar), Body((1, 3, 4), 3.0, 5.0, (1.0, 1 / 3)), Body((4, 5), **bar)]
    plain = PlanarMechanism(points, bodies, name="two-crank parallelogram+pendulum")
    assert (plain.n, plain.m, plain.rank, plain.dof, plain.redundant_rows) == (8, 6, 6, 2, ())


def test_non_redundant_mechanisms_keep_n_minus_m():
    for name in ("fourbar", "fourbar-crank", "pendulum"):
        m = load_mechanism(name)
        assert m.redundant_rows == () and m.dof == m.n - m.m == 1


def test_locked_mechanism_is_still_refused():
    """Two bars pinning a point to the ground, one of them drawn twice: 3 rows of rank 2 on 2 coordinates."""
    points = [Point(0, 0, True), Point(1, 0, True), Point(0.5, 1)]
    bar = dict(mass=1.0, I0=0.3)
    bodies = [Body((0, 2), **bar), Body((1, 2), **bar), Body((0, 2), **bar)]
    with pytest.raises(ModelError, match="3 constraints of rank 2 for 2 coordinates; the mechanism is locked"):
        PlanarMechanism(points, bodies, name="triangle")


def test_initial_configuration_at_a_singular_pose_is_refused():
    """A plain parallelogram drawn with its cranks along the ground line: rank 2 of 3 there, 3 elsewhere. That is
    a singular pose, not redundancy: taking it for redundancy would report 2 dof and drop a genuine direction."""
    points = [Point(0, 0, True), Point(1, 0), Point(2, 0, True), Point(3, 0)]
    bodies = [Body((0, 1), 1.0, 1 / 3), Body((2, 3), 1.0, 1 / 3), Body((1, 3), 2.0, 8 / 3)]
    with pytest.raises(ModelError, match="singular pose: Phi_q has rank 2 there but 3 at an assembled configuration"):
        PlanarMechanism(points, bodies, name="flat parallelogram")
    upright = [Point(0, 0, True), Point(0, 1), Point(2, 0, True), Point(2, 1)]
    assert PlanarMechanism(upright, bodies).dof == 1


def test_mbfg_mechanisms_prints_the_redundancy(capsys):
    assert main(["mechanisms", "parallelogram", "fourbar"]) == 0
    out = capsys.readouterr().out
    assert "parallelogram: 7 coordinates" in out and "1 dof" in out
    assert "redundant constraints: 7 rows of rank 6 at the initial configuration" in out
    assert out.count("redundant constraints") == 1  # not for the four-bar


# --------------------------------------------------------------------------------------
# Accelerations (eq. 6 and eq. 15) at single states
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("theta, theta_dot", [(0.0, 0.0), (0.3, 1.7), (-math.pi, -2.0), (2.0, 3.1)])
def test_accelerations_match_the_minimal_coordinate_lagrangian(mech, theta, theta_dot):
    q, qdot = _state(mech, theta, theta_dot)
    Q = mech.gravity_forces(G_SEED)
    theta_ddot = -dV_dtheta(theta, G_SEED) / M_THETA
    u, du = np.array([math.cos(theta), math.sin(theta)]), np.array([-math.sin(theta), math.cos(theta)])
    tip = L * (du * theta_ddot - u * theta_dot**2)
    expected = np.concatenate([tip, tip, tip, [theta_ddot]])
    np.testing.assert_allclose(mech.qddot(q, qdot, Q), expected, atol=1e-10)
    for indep in ([6], [int(mech.independent_coordinates(q)[0])]):
        zddot = planar.zddot_independent(mech.arrays, jnp.asarray(mech.mass_matrix), jnp.asarray(Q),
                                         jnp.asarray(q), jnp.asarray(qdot), jnp.asarray(indep))
        np.testing.assert_allclose(np.asarray(zddot), expected[indep], atol=1e-10)


def test_accelerations_off_the_constraint_manifold_stay_close(mech):
    """A solver's iterate is off the manifold, where the redundant row is only nearly dependent: eq. (6) must
    change by O(delta), not invert the near-zero singular value (a rank threshold would, above ~1e-8 off)."""
    q, qdot = _state(mech, 0.3, 1.7)
    Q = mech.gravity_forces(G_SEED)
    exact = mech.qddot(q, qdot, Q)
    rng = np.random.default_rng(19)
    worst = 0.0
    for _ in range(5):
        r, w = rng.standard_normal((2, 7))
        for delta in (1e-8, 1e-6, 1e-4, 1e-3):
            q_off, qdot_off = q + delta * r / np.linalg.norm(r), qdot + delta * w / np.linalg.norm(w)
            worst = max(worst, np.max(np.abs(mech.qddot(q_off, qdot_off, Q) - exact)) / delta)
    print(f"\nmax |qddot(q + delta) - qddot(q)| / delta = {worst:.2f} (1/s^2) for delta 1e-8 .. 1e-3")
    assert worst < 50.0


def test_dynamics_residual_jacobians_match_central_differences(mech):
    """The pseudo-inverse's JVP (factors' Jacobians) against central differences, at a slightly off-manifold point."""
    q, qdot = _state(mech, 2.0, -1.3)
    rng = np.random.default_rng(3)
    q, qdot = q + 1e-7 * rng.standard_normal(7), qdot + 1e-7 * rng.standard_normal(7)
    F = rng.standard_normal(7)
    M, Q = jnp.asarray(mech.mass_matrix), jnp.asarray(mech.gravity_forces(G_SEED))

    def accel(x: jnp.ndarray) -> jnp.ndarray:  # x = [q, qdot, F]
        return planar.qddot_dependent(mech.arrays, M, Q + x[14:], x[:7], x[7:14])

    x = jnp.asarray(np.concatenate([q, qdot, F]))
    ours = np.asarray(jax.jacfwd(accel)(x))
    h = 1e-6
    fd = np.stack([(np.asarray(accel(x.at[i].add(h))) - np.asarray(accel(x.at[i].add(-h)))) / (2 * h)
                   for i in range(21)], axis=1)
    error = np.max(np.abs(ours - fd)) / np.max(np.abs(fd))
    print(f"\nJacobian of eq. (6), redundant case, vs central differences: {error:.2e} relative")
    assert error < 1e-6


# --------------------------------------------------------------------------------------
# Forward dynamics
# --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def forward_dependent(mech):
    """Released from rest with the cranks horizontal: 5 s at dt = 1 ms, window 2 (as the four-bar test)."""
    return simulate_forward(mech, dt=1e-3, duration=5.0, g=G_SEED, window=2)


@pytest.mark.slow
def test_forward_dependent_coordinates_match_the_ode_reference_over_5_s(forward_dependent):
    """RMSE of the point coordinates over 5 s at dt = 1 ms, window 2: below the four-bar's bound at the same settings
    (1e-3 m, tests/test_forward_dynamics.py) and below what the four-bar reaches there today (2.76e-5 m)."""
    result = forward_dependent
    ref = points_of(crank_reference(result.t, 0.0, G_SEED))
    rmse = float(np.sqrt(np.mean((result.q[:, :6] - ref) ** 2)))
    theta_error = np.max(np.abs(result.q[:, 6] - crank_reference(result.t, 0.0, G_SEED)))
    print(f"\nparallelogram DC FG Nw=2, 5 s: RMSE {rmse:.3e} m, max |theta1 error| {theta_error:.3e} rad, "
          f"{result.wall_s:.1f} s wall")
    assert rmse < 1e-3
    assert rmse < 2.8e-5
    assert theta_error < 1e-4


def test_forward_without_friction_conserves_energy(mech, forward_dependent):
    """|E(t) - E(0)| <= 1e-3 of the peak kinetic energy (the pendulum files' bound), E from the minimal model."""
    result = forward_dependent
    theta, theta_dot = theta_of(result.q, result.qdot)
    E = energy(theta, theta_dot, G_SEED)
    kinetic = 0.5 * M_THETA * theta_dot**2
    deviation = np.max(np.abs(E - E[0]))
    print(f"\nparallelogram energy drift over 5 s: {deviation:.3e} J = {deviation / kinetic.max():.2e} of peak T "
          f"({kinetic.max():.2f} J)")
    assert deviation <= 1e-3 * kinetic.max()
    # The mechanism's own energy (natural-coordinate mass matrix) agrees with the minimal model's.
    own = np.array([mech.kinetic_energy(v) + mech.potential_energy(q, G_SEED) for q, v in zip(result.q, result.qdot)])
    np.testing.assert_allclose(own - own[0], E - E[0], atol=1e-6 * kinetic.max())
    assert max(np.max(np.abs(mech.phi(q))) for q in result.q) < 1e-8


def test_forward_independent_coordinates_match_the_ode_reference(mech):
    """Figure 3 graph (z switches as needed), 2 s: below the four-bar's independent-coordinate bound 0.017 m and
    below what the four-bar reaches over 5 s today (3.39e-4 m)."""
    result = simulate_forward(mech, dt=1e-3, duration=2.0, g=G_SEED, coordinates="independent", window=2)
    ref = points_of(crank_reference(result.t, 0.0, G_SEED))
    rmse = float(np.sqrt(np.mean((result.q[:, :6] - ref) ** 2)))
    print(f"\nparallelogram IC FG Nw=2, 2 s: RMSE {rmse:.3e} m, {result.wall_s:.1f} s wall")
    assert rmse < 0.017
    assert rmse < 3.4e-4


def test_batch_and_fixed_lag_solutions_agree_on_the_redundant_mechanism(mech):
    """Whole-horizon batch, iSAM2 and LM fixed-lag smoothers, 0.2 s: the four-bar test's bounds."""
    batch = simulate_forward(mech, dt=1e-3, duration=0.2, g=G_SEED, window=None)
    lag = simulate_forward(mech, dt=1e-3, duration=0.2, g=G_SEED, window=3)
    lm_lag = simulate_forward(mech, dt=1e-3, duration=0.2, g=G_SEED, window=3, smoother="batch")
    assert batch.converged
    np.testing.assert_allclose(batch.q, lag.q, atol=1e-7)
    np.testing.assert_allclose(lm_lag.q, lag.q, atol=1e-7)
    ref = points_of(crank_reference(batch.t, 0.0, G_SEED))
    assert np.sqrt(np.mean((batch.q[:, :6] - ref) ** 2)) < 1e-5


# --------------------------------------------------------------------------------------
# Inverse dynamics
# --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def inverse(mech):
    t, theta = fourbar_crank_trajectory(duration=3.0, dt=0.005)
    return t, theta, solve_inverse_dynamics(mech, t, theta, ["theta1"], g=9.81)


def test_inverse_dynamics_torque_matches_the_minimal_coordinate_lagrangian(inverse):
    """tau = M theta'' + dV/dtheta for theta = 1.2 (1 - cos 2t): RMS error below 5e-4 of the peak, the bound of the
    four-bar's closed-form test (tests/test_inverse_dynamics.py)."""
    t, theta, result = inverse
    theta_ddot = 4.8 * np.cos(2.0 * t)
    tau = M_THETA * theta_ddot + dV_dtheta(theta, 9.81)
    rms = float(np.sqrt(np.mean((result.forces[:, 0] - tau) ** 2)))
    print(f"\nparallelogram inverse dynamics, 3 s: RMS torque error {rms:.3e} N m = "
          f"{100 * rms / np.max(np.abs(tau)):.4f} % of peak {np.max(np.abs(tau)):.2f} N m, "
          f"stage iterations {result.stage_iterations}")
    assert result.converged
    assert rms < 5e-4 * np.max(np.abs(tau))


def test_inverse_dynamics_tracks_the_crank_on_the_constraints(mech, inverse):
    _, theta, result = inverse
    assert np.max(np.abs(result.q[:, 6] - theta)) < 1e-3
    assert max(np.max(np.abs(mech.phi(q))) for q in result.q) < 1e-8
    np.testing.assert_allclose(result.q[:, :6], points_of(theta), atol=1e-3)


# The parallelogram with a pendulum (uniform bar, length LP, mass MP) hanging from P3, and the pendulum's absolute
# angle phi as a second relative coordinate: 2 dof, 10 coordinates, 9 rows of rank 8 (n - m says 1).
LP, MP = 1.0, 0.8
TWO_DOF_YAML = mechanism_path("parallelogram").read_text().replace(
    "relative_coordinates:", f"""  - points: [5, 6]                # pendulum P3-P4
    length: auto
    mass: {MP}
    I0: mass*length^2/3
    cog: [0.5*length, 0.0]
relative_coordinates:""").replace(
    "  - {x: xC + L, y: yC}            # 5: P3, tip of crank 3 -> x3, y3",
    f"  - {{x: xC + L, y: yC}}            # 5: P3, tip of crank 3 -> x3, y3\n  - {{x: x5, y: y5 - {LP}}}"
) + "  - {type: RelativeAngleAbsoluteDOF, points: [5, 6]}\n"


def two_dof_generalized_forces(theta, phi, derivatives) -> np.ndarray:
    """(tau_theta, tau_phi) (N, 2) [N m] of the parallelogram + pendulum from its 2-dof Lagrangian.

    With the coupler translating, v_P3 = L theta' (-sin theta, cos theta), so the pendulum (centre of gravity a = LP/2
    along it, inertia I0p about P3) adds T = 1/2 MP L^2 theta'^2 + MP a L cos(theta - phi) theta' phi' + 1/2 I0p phi'^2
    and V = MP g (L sin theta + a sin phi); Lagrange's equations give

        tau_theta = (M + MP L^2) theta'' + MP a L [cos(theta - phi) phi'' + sin(theta - phi) phi'^2] + dV/dtheta
        tau_phi   = I0p phi'' + MP a L [cos(theta - phi) theta'' - sin(theta - phi) theta'^2] + MP g a cos(phi)
    """
    (dth, ddth), (dph, ddph) = derivatives
    a, I0p, g = LP / 2, MP * LP**2 / 3, 9.81
    c, s = np.cos(theta - phi), np.sin(theta - phi)
    tau_theta = ((M_THETA + MP * L**2) * ddth + MP * a * L * (c * ddph + s * dph**2)
                 + dV_dtheta(theta, g) + MP * g * L * np.cos(theta))
    tau_phi = I0p * ddph + MP * a * L * (c * ddth - s * dth**2) + MP * g * a * np.cos(phi)
    return np.stack([tau_theta, tau_phi], axis=1)


def test_two_dof_inverse_dynamics_through_the_cli_matches_the_lagrangian(capsys, tmp_path):
    """`mbfg inverse FILE TRAJ --coordinate theta1,theta2` on the 2-dof mechanism (refused while dof was n - m)."""
    path = tmp_path / "parallelogram-pendulum.yaml"
    path.write_text(TWO_DOF_YAML)
    mech = load_mechanism(path)
    assert (mech.n, mech.m, mech.rank, mech.dof) == (10, 9, 8, 2)
    assert mech.coordinate_names[-2:] == ("theta1", "theta2")
    t = 0.005 * np.arange(400)  # 2 s
    theta, phi = 1.2 * (1 - np.cos(2 * t)), -math.pi / 2 + 0.5 * np.sin(3 * t)
    derivatives = ((2.4 * np.sin(2 * t), 4.8 * np.cos(2 * t)), (1.5 * np.cos(3 * t), -4.5 * np.sin(3 * t)))
    trajectory = tmp_path / "trajectory.txt"
    np.savetxt(trajectory, np.stack([t, theta, phi], axis=1), header="t theta1 theta2", comments="% ")
    out = tmp_path / "forces.csv"
    code = main(["inverse", str(path), str(trajectory), "--coordinate", "theta1,theta2", "--quiet", "--out", str(out)])
    assert code == 0, capsys.readouterr().err
    frame = pd.read_csv(out)
    assert list(frame.columns) == ["t", "Q_theta1", "Q_theta2"]
    tau = two_dof_generalized_forces(theta, phi, derivatives)
    rms = np.sqrt(np.mean((frame[["Q_theta1", "Q_theta2"]].to_numpy() - tau) ** 2, axis=0))
    peak = np.max(np.abs(tau), axis=0)
    print(f"\nparallelogram + pendulum (2 dof) inverse dynamics, 2 s: RMS error {rms[0]:.2e}, {rms[1]:.2e} N m = "
          f"{100 * rms[0] / peak[0]:.4f} %, {100 * rms[1] / peak[1]:.4f} % of peaks {peak[0]:.2f}, {peak[1]:.2f} N m")
    assert np.all(rms < 5e-4 * peak)


def test_cli_inverse_accepts_the_crank_of_the_redundant_parallelogram(capsys, tmp_path):
    out = tmp_path / "forces.csv"
    code = main(["inverse", "parallelogram", "builtin:fourbar-crank", "--coordinate", "theta1",
                 "--until", "0.1", "--quiet", "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 0, err
    frame = pd.read_csv(out)
    assert list(frame.columns) == ["t", "Q_theta1"] and len(frame) == 21
    # At t = 0: at rest, theta'' = 4.8 rad/s^2 at theta = 0.
    expected = M_THETA * 4.8 + dV_dtheta(0.0, 9.81)
    assert frame["Q_theta1"].iloc[0] == pytest.approx(expected, abs=0.05)
    # One imposed coordinate per degree of freedom: two are refused, naming the count.
    code = main(["inverse", "parallelogram", "builtin:fourbar-crank", "--coordinate", "theta1,x1",
                 "--quiet", "--out", str(out)])
    assert code != 0
    assert "has 1 degree(s) of freedom" in capsys.readouterr().err
