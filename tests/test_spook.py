"""The Spook stepper on 3D rigid bodies (Marklund et al. (2025) section 2, Marklund et al. (2025) App. F) against independent references.

References: minimal-coordinate Lagrange equations integrated by scipy's DOP853
at rtol 1e-12 (tests/rigid_references.py), closed-form solutions (Hooke's law
of a regularized constraint, Berard and Trinkle's (2008) falling and sliding particle), the
energy of a conservative system, and central differences for derivatives.
"""

from __future__ import annotations

import gtsam
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from mbfg import quaternion as quat
from mbfg.errors import ModelError
from mbfg.models import STIFF, double_pendulum, furuta, particle, pendulum
from mbfg.parameters import Parameter, ParameterSet
from mbfg.rigid import Body, Frame, Hinge, RigidModel, State
from mbfg.spook import simulate, step

try:  # tests/ on sys.path (pytest's default import of this file)
    import rigid_references as R
except ImportError:  # tests/ imported as a package
    from tests import rigid_references as R

STEPS_MS = (4.0, 2.0, 1.0, 0.5)


# ----------------------------------------------------------------- rotations (2.13-2.16, 3.20)


def test_boxplus_eq_2_13_is_gtsam_rot3_retract() -> None:
    rng = np.random.default_rng(0)
    for _ in range(20):
        e = rng.normal(size=4)
        e /= np.linalg.norm(e)
        psi = rng.normal(size=3) * rng.choice([1e-9, 1e-3, 0.5, 2.5])
        R_gtsam = gtsam.Rot3(np.asarray(quat.to_matrix(e))).retract(psi).matrix()
        np.testing.assert_allclose(quat.to_matrix(quat.boxplus(e, psi)), R_gtsam, atol=1e-12)
        # eq. 2.15: boxminus inverts boxplus (angles below pi).
        if np.linalg.norm(psi) < np.pi:
            np.testing.assert_allclose(quat.boxminus(quat.boxplus(e, psi), e), psi, atol=1e-10)


def test_small_angle_rotation_residual_eq_3_20_agrees_to_third_order() -> None:
    rng = np.random.default_rng(1)
    e0 = quat.exp(rng.normal(size=3))
    axis = rng.normal(size=3)
    axis /= np.linalg.norm(axis)
    for angle in (1e-1, 1e-2, 1e-3):
        e1 = quat.boxplus(e0, angle * axis)
        err = np.linalg.norm(quat.boxminus_small(e1, e0) - angle * axis)
        assert err < 0.2 * angle**3
        # The same rotation written as -e gives the same residual (double cover).
        np.testing.assert_allclose(quat.boxminus_small(-e1, e0), quat.boxminus_small(e1, e0), atol=1e-15)
    J = jax.jacfwd(lambda psi: quat.boxminus_small(quat.boxplus(e0, psi), e0))(jnp.zeros(3))
    np.testing.assert_allclose(J, np.eye(3), atol=1e-12)


def test_rotation_matrix_quaternion_round_trip() -> None:
    rng = np.random.default_rng(2)
    for _ in range(20):
        e = quat.exp(rng.normal(size=3) * 2.0)
        e = np.asarray(e) * np.sign(e[0])
        np.testing.assert_allclose(quat.from_matrix(quat.to_matrix(e)), e, atol=1e-12)


def test_from_matrix_np_is_shepperds_method_of_from_matrix_on_every_branch() -> None:
    """The batched quaternion of a rotation matrix equals the scalar one, also at rotations by pi about
    each axis (where a branch other than the trace's must be taken) and near them."""
    rng = np.random.default_rng(3)
    e = rng.standard_normal((40, 4))
    e /= np.linalg.norm(e, axis=1, keepdims=True)
    R = list(quat.to_matrix_np(e))
    for axis in np.eye(3):
        for angle in (np.pi, np.pi - 1e-7):
            R.append(Rotation.from_rotvec(angle * axis).as_matrix())
    R = np.stack(R)
    want = np.stack([quat.from_matrix(Ri) for Ri in R])
    got = quat.from_matrix_np(R.reshape(2, -1, 3, 3)).reshape(-1, 4)
    np.testing.assert_allclose(got, want, atol=1e-15)
    np.testing.assert_allclose(quat.to_matrix_np(got), R, atol=1e-14)


def test_batched_body_poses_equal_the_initial_state_of_each_configuration() -> None:
    """poses_from_coordinates (a log's initial trajectory at once) against initial_state per configuration,
    on every built-in model: hinges, sliders, a free body."""
    from mbfg.models import BUILTIN
    from mbfg.rigid import poses_from_coordinates

    rng = np.random.default_rng(4)
    for name, build in BUILTIN.items():
        model = build()
        coords = {j.name: rng.uniform(-3.0, 3.0, size=7) for j in model.axial}
        r, e = poses_from_coordinates(model, coords, n=7)
        for k in range(7):
            x = model.initial_state({n: float(c[k]) for n, c in coords.items()}, numpy=True)
            np.testing.assert_allclose(r[k], x.r, atol=1e-14, err_msg=name)
            np.testing.assert_allclose(e[k], x.e, atol=1e-14, err_msg=name)


def test_numpy_set_up_helpers_equal_eq_2_15_and_the_rotation_matrix_in_jax() -> None:
    """boxminus_np / to_matrix_np (batched NumPy, for building thousands of states) against the
    single-quaternion JAX functions, at angles from 1e-7 rad (the series branch) to near pi,
    with e and -e (the same rotation)."""
    rng = np.random.default_rng(5)
    e0 = np.stack([np.asarray(quat.exp(rng.normal(size=3))) for _ in range(40)])
    scales = np.concatenate([np.full(10, 1e-7), np.full(10, 0.3), np.full(10, 2.0), np.full(10, 3.1)])
    psi = rng.normal(size=(40, 3))
    psi *= (scales / np.linalg.norm(psi, axis=1))[:, None]
    e1 = np.stack([np.asarray(quat.boxplus(a, p)) for a, p in zip(e0, psi)])
    e1[::2] *= -1.0
    got = quat.boxminus_np(e1.reshape(4, 10, 4), e0.reshape(4, 10, 4)).reshape(40, 3)
    want = np.stack([np.asarray(quat.boxminus(b, a)) for a, b in zip(e0, e1)])
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(got, psi, atol=1e-9)
    np.testing.assert_allclose(quat.to_matrix_np(e1), np.stack([np.asarray(quat.to_matrix(b)) for b in e1]),
                               atol=1e-15)


# ----------------------------------------------------------------- convergence to the references


def _convergence(model, init, reference, controls=None, duration=4.0):
    """Max |observation - reference| over [0, duration] for each h in STEPS_MS."""
    errors = []
    for h_ms in STEPS_MS:
        h = h_ms * 1e-3
        n = int(round(duration / h))
        t = np.arange(n + 1) * h
        u = None if controls is None else controls(t[:-1])
        traj = simulate(model, duration, h, initial=model.initial_state(init),
                        controls=None if u is None else u[:, None])
        errors.append(np.abs(np.unwrap(traj.observations, axis=0) - reference(t, u)).max())
    orders = np.log2(np.array(errors[:-1]) / np.array(errors[1:]))
    print(f"\n{model.name}: max angle error at h = {STEPS_MS} ms: "
          + ", ".join(f"{e:.3e}" for e in errors) + "; observed orders " + ", ".join(f"{o:.2f}" for o in orders))
    return np.array(errors), orders


def test_pendulum_converges_to_minimal_coordinate_reference() -> None:
    model = pendulum().with_parameters(STIFF)  # viscous, stiff hinge: eps 1e-8 m/N, 1e-6 rad/(N m)
    P = model.parameters.numpy_values()
    errors, orders = _convergence(
        model, {"theta": 1.0}, lambda t, u: R.simulate_reference(R.pendulum_ode, [1.0, 0.0], t, P)[:, :1]
    )
    assert np.all((orders > 0.9) & (orders < 1.1))  # Spook is first order
    assert errors[-1] < 2e-3


def test_double_pendulum_converges_to_minimal_coordinate_reference() -> None:
    model = double_pendulum().with_parameters(STIFF)
    P = model.parameters.numpy_values()
    y0 = [1.0, -0.5, 0.0, 0.0]
    errors, orders = _convergence(
        model, {"q1": 1.0, "q2": -0.5}, lambda t, u: R.simulate_reference(R.double_pendulum_ode, y0, t, P)[:, :2]
    )
    assert np.all((orders > 0.9) & (orders < 1.1))
    assert errors[-1] < 3e-3


def test_furuta_with_motor_converges_to_minimal_coordinate_reference() -> None:
    model = furuta(dry=False).with_parameters(STIFF)  # motor gain and shaft inertia (F.3), viscous hinges (F.2)
    P = model.parameters.numpy_values()

    def control(t: np.ndarray) -> np.ndarray:
        # Held over 4 ms blocks, so every h of the study samples the same zero-order-held signal.
        return 0.5 * np.sin(2 * np.pi * 0.5 * np.floor(t / 4e-3 + 1e-9) * 4e-3)

    def reference(t: np.ndarray, u: np.ndarray) -> np.ndarray:
        t_blocks = np.arange(0.0, t[-1] + 1e-9, 4e-3)
        y = R.simulate_reference_zoh(R.furuta_ode, [0.0, 0.5, 0.0, 0.0], t_blocks, control(t_blocks[:-1]), P)
        from scipy.interpolate import CubicHermiteSpline

        return np.stack([CubicHermiteSpline(t_blocks, y[:, i], y[:, i + 2])(t) for i in range(2)], axis=1)

    errors, orders = _convergence(model, {"alpha": 0.5}, reference, controls=control)
    assert np.all((orders > 0.8) & (orders < 1.2))
    assert errors[-1] < 1e-2


# ----------------------------------------------------------------- constraints and energy


def test_regularized_hinge_obeys_hookes_law_eq_2_10() -> None:
    """At rest, Spook's compliance is a spring: the hinge stretches by eps * m * g."""
    eps = 1e-4
    model = pendulum().with_parameters({"eps_lin": eps, "b": 0.1})
    traj = simulate(model, 2.0, 1e-3)
    P = model.parameters.numpy_values()
    stretch = -(traj.states.r[-1, 0, 2] + P["d"])  # the CoM hangs this far below (0, 0, -d)
    assert stretch == pytest.approx(eps * P["m"] * P["g"], rel=1e-6)


def test_constraint_violation_of_stiff_hinge_is_linearization_error_order_h2() -> None:
    """With stiff compliance what remains is the local linearization of g (Marklund et al. (2025) sec. 1).

    It drifts by O(h^2) per step and relaxes over tau, so with tau a fixed multiple of h it is O(h^2).
    """
    violations = []
    for h in (2e-3, 1e-3, 5e-4):
        model = pendulum().with_parameters({"tau": 2 * h, **STIFF})
        traj = simulate(model, 2.0, h, initial=model.initial_state({"theta": 1.0}), chunk=4000)
        theta = traj.observations[:, 0]
        d = model.parameters["d"].default
        expected = np.stack([-d * np.sin(theta), 0 * theta, -d * np.cos(theta)], axis=1)
        violations.append(np.abs(traj.states.r[:, 0] - expected).max())
    print(f"\npendulum max hinge violation at h = 2, 1, 0.5 ms: {violations}")
    ratios = np.array(violations[:-1]) / np.array(violations[1:])
    assert np.all(ratios > 3.0)  # ~4 for O(h^2)
    assert violations[-1] < 2e-6


def _mechanical_energy(model, traj) -> tuple[np.ndarray, np.ndarray]:
    """(kinetic + gravitational + motor shaft energy, kinetic energy) per step [J]."""
    p = model.parameters.numpy_values()
    M = np.asarray(model.mass_diagonal(model.parameters.arrays())).reshape(-1, 6)
    g_vec = np.asarray(model.gravity(model.parameters.arrays()))
    kinetic = 0.5 * (np.sum(M[:, :3] * traj.states.v**2, axis=(1, 2)) + np.sum(M[:, 3:] * traj.states.w**2, axis=(1, 2)))
    potential = -np.sum(M[:, 0] * (traj.states.r @ g_vec), axis=1)
    shaft = 0.0
    if model.controls:  # the Furuta motor shaft turns with the arm
        shaft = 0.5 * p["J_s"] * (np.einsum("kij,kj->ki", np.stack([np.asarray(quat.to_matrix(e)) for e in traj.states.e[:, 0]]), traj.states.w[:, 0])[:, 2]) ** 2
    return kinetic + potential + shaft, kinetic


@pytest.mark.parametrize("which", ["pendulum", "double-pendulum"])
def test_energy_error_stays_bounded_over_20_s_without_damping(which: str) -> None:
    """Spook is variational: without friction or constraint damping the energy oscillates, it does not drift."""
    if which == "pendulum":
        model = pendulum().with_parameters({"b": 0.0, "tau": 0.0, **STIFF})
        init = {"theta": 2.0}
    else:
        model = double_pendulum().with_parameters({"b1": 0.0, "b2": 0.0, "tau": 0.0, **STIFF})
        init = {"q1": 2.0, "q2": 0.5}
    traj = simulate(model, 20.0, 1e-3, initial=model.initial_state(init))
    E, kinetic = _mechanical_energy(model, traj)
    first, last = E[:5000], E[-5000:]
    print(f"\n{model.name}: energy range {np.ptp(E):.3e} J of peak kinetic {kinetic.max():.3e} J; "
          f"mean of last 5 s - first 5 s {last.mean() - first.mean():.3e} J")
    # The O(h) oscillation is small, the same at the start and the end, and its mean does not move.
    assert np.ptp(E) < 0.01 * kinetic.max()
    assert np.ptp(last) < 1.2 * np.ptp(first)
    assert abs(last.mean() - first.mean()) < 0.05 * np.ptp(first)


def test_furuta_energy_drift_is_first_order_in_h() -> None:
    """The Furuta pendulum spins about two axes, so the gyroscopic force, taken at step k in
    eq. 2.28, is not variational: the energy drifts, by an amount that vanishes with h."""
    drifts = []
    for h in (1e-3, 5e-4):
        model = furuta(dry=False).with_parameters({"b_1": 0.0, "b_2": 0.0, "tau": 2 * h, **STIFF})
        traj = simulate(model, 10.0, h, initial=model.initial_state({"alpha": 2.5}), chunk=4000)
        E, kinetic = _mechanical_energy(model, traj)
        n = int(round(2.0 / h))
        drifts.append(E[-n:].mean() - E[:n].mean())
    print(f"\nfuruta energy drift over 8 s at h = 1, 0.5 ms: {drifts} J (peak kinetic {kinetic.max():.3e} J)")
    assert abs(drifts[0]) < 0.05 * kinetic.max()
    assert abs(drifts[1]) < 0.6 * abs(drifts[0])


# ----------------------------------------------------------------- dry friction (F.4, 2.24)


def _assert_complementarity(traj) -> None:
    lam, w = traj.info.lam_B, traj.info.w_B
    scale = max(np.abs(lam).max(), 1e-12) * max(np.abs(w).max(), 1e-12)
    assert lam.min() > -1e-10 * max(np.abs(lam).max(), 1e-12)
    assert w.min() > -1e-7 * max(np.abs(w).max(), 1e-12)
    assert np.abs(lam * w).max() < 1e-8 * scale


def test_dry_friction_pendulum_comes_to_rest_at_nonzero_angle() -> None:
    mu_r = 0.02  # friction torque bound ~ mu_r * m g: sticks where m g d sin(theta) < mu_r m g
    model = pendulum("dry").with_parameters({"mu_r": mu_r, "b": 0.0})
    traj = simulate(model, 8.0, 1e-3, initial=model.initial_state({"theta": 0.6}))
    theta = traj.observations[:, 0]
    d = model.parameters["d"].default
    final = theta[-1]
    print(f"\ndry pendulum rests at {final:.5f} rad; sticking bound asin(mu_r/d) = {np.arcsin(mu_r / d):.5f}")
    assert np.abs(theta[-1000:] - final).max() < 1e-6  # at rest for the last second
    assert abs(final) > 1e-2  # not at the bottom
    assert abs(final) <= np.arcsin(mu_r / d) * 1.01  # static torque below the friction bound
    assert np.abs(np.diff(theta[:2000])).max() > 1e-4  # it did swing first
    _assert_complementarity(traj)


def test_dry_friction_holds_below_and_releases_above_the_friction_bound() -> None:
    mu_r = 0.02
    model = pendulum("dry").with_parameters({"mu_r": mu_r, "b": 0.0})
    d = model.parameters["d"].default
    bound = np.arcsin(mu_r / d)
    held = simulate(model, 0.5, 1e-3, initial=model.initial_state({"theta": 0.8 * bound}))
    slips = simulate(model, 0.5, 1e-3, initial=model.initial_state({"theta": 1.2 * bound}))
    assert abs(held.observations[-1, 0] - 0.8 * bound) < 1e-5
    assert slips.observations[-1, 0] < 1.2 * bound - 1e-2
    _assert_complementarity(held)
    _assert_complementarity(slips)


def test_stribeck_friction_eq_4_1_sticks_harder_than_kinetic() -> None:
    """Static friction mu_r + dmu_r holds an angle that kinetic friction mu_r alone lets slip."""
    base = pendulum("stribeck").with_parameters({"mu_r": 0.01, "dmu_r": 0.015, "omega_s": 0.1, "b": 0.0})
    d = base.parameters["d"].default
    theta0 = np.arcsin(0.02 / d)  # between the kinetic (0.01/d) and static (0.025/d) bounds
    held = simulate(base, 0.5, 1e-3, initial=base.initial_state({"theta": theta0}))
    assert abs(held.observations[-1, 0] - theta0) < 1e-5
    kinetic_only = pendulum("dry").with_parameters({"mu_r": 0.01, "b": 0.0})
    slips = simulate(kinetic_only, 0.5, 1e-3, initial=kinetic_only.initial_state({"theta": theta0}))
    assert slips.observations[-1, 0] < theta0 - 1e-2
    _assert_complementarity(held)


def test_furuta_with_dry_friction_satisfies_complementarity_every_step() -> None:
    model = furuta(dry=True)
    u = 0.8 * np.sign(np.sin(2 * np.pi * 0.5 * np.arange(3000) * 1e-3))
    traj = simulate(model, 3.0, 1e-3, initial=model.initial_state({"alpha": 0.3}), controls=u[:, None])
    _assert_complementarity(traj)
    assert np.all(traj.info.lcp_ok)


# ----------------------------------------------------------------- Berard and Trinkle (2008): particle falling and sliding


def _particle_closed_form(t: np.ndarray, P: dict) -> tuple[np.ndarray, np.ndarray]:
    """Free fall with the push F_x, then (after an inelastic impact whose friction impulse is
    mu times the normal impulse, Coulomb's law applied to impulses) sliding at (F_x - mu m g)/m."""
    g, m, mu, F, z0 = P["g"], P["m"], P["mu"], P["F_x"], 3.0
    t_c = np.sqrt(2 * z0 / g)
    vx_after = F / m * t_c - mu * g * t_c
    x = np.where(t < t_c, 0.5 * F / m * t**2,
                 0.5 * F / m * t_c**2 + vx_after * (t - t_c) + 0.5 * (F - mu * m * g) / m * (t - t_c) ** 2)
    z = np.where(t < t_c, z0 - 0.5 * g * t**2, 0.0)
    return x, z


def test_particle_seed_002_matches_closed_form_within_step_error() -> None:
    errors = []
    for h in (0.05, 0.01, 0.002):
        # A stiff (rigid-like), critically damped contact: the closed form has a rigid ground.
        model = particle().with_parameters({"tau": 2 * h, "eps": 1e-8})
        traj = simulate(model, 5.0, h, chunk=2500)
        P = model.parameters.numpy_values()
        x, z = _particle_closed_form(traj.t, P)
        errors.append(max(np.abs(traj.observations[:, 0] - x).max(), np.abs(traj.observations[:, 1] - z).max()))
        # Once sliding, the acceleration is exactly (F_x - mu m g) / m.
        sliding = traj.t > 1.5
        acc = 2 * np.polyfit(traj.t[sliding], traj.observations[sliding, 0], 2)[0]
        assert acc == pytest.approx((P["F_x"] - P["mu"] * P["m"] * P["g"]) / P["m"], rel=1e-4)
        # No penetration beyond the compliance under the largest contact force lam / h (the impact's).
        assert traj.observations[:, 1].min() > -P["eps"] * traj.info.lam_B[:, 0].max() / h
        _assert_complementarity(traj)
    print(f"\nparticle max error at h = 0.05, 0.01, 0.002 s: {errors}")
    assert errors[0] < 8 * 0.05 and errors[-1] < 8 * 0.002  # first order in h
    assert errors[0] / errors[-1] > 15


# ----------------------------------------------------------------- derivatives (App. D.1)


def _flat_step(model, state, u, p_names, h):
    base = model.parameters.arrays()

    def f(vel, chi):
        p = dict(base, **{n: chi[i] for i, n in enumerate(p_names)})
        x_next, _ = step(model, state.with_velocity(vel), u, p, h)
        return x_next.velocity()

    chi0 = jnp.array([base[n] for n in p_names])
    return f, state.velocity(), chi0


@pytest.mark.parametrize("regime", ["sliding", "sticking"])
def test_spook_step_derivatives_through_the_lcp_match_central_differences(regime: str) -> None:
    model = furuta(dry=True)
    init = {"alpha": 0.4, "theta": 0.2}
    rates = {"theta": 3.0, "alpha": -2.0} if regime == "sliding" else {}
    state = model.initial_state(init, rates)
    u = jnp.array([0.3])
    names = ["K", "J_Az", "J_Bx", "b_1", "b_2", "mu_r1", "mu_r2"]
    f, vel0, chi0 = _flat_step(model, state, u, names, 1e-3)
    f = jax.jit(f)
    J_vel, J_chi = jax.jit(jax.jacfwd(f, argnums=(0, 1)))(vel0, chi0)

    def central(fun, x0, i, step):
        dx = jnp.zeros_like(x0).at[i].set(step)
        return (fun(x0 + dx) - fun(x0 - dx)) / (2 * step)

    for i in range(vel0.shape[0]):
        fd = central(lambda v: f(v, chi0), vel0, i, 1e-6)
        np.testing.assert_allclose(J_vel[:, i], fd, rtol=1e-5, atol=1e-6 * np.abs(J_vel).max())
    for i in range(chi0.shape[0]):
        # Relative steps of 1e-4: smaller ones drown in round-off (the hinge rows are stiff).
        fd = central(lambda c: f(vel0, c), chi0, i, 1e-4 * abs(float(chi0[i])))
        np.testing.assert_allclose(J_chi[:, i], fd, rtol=1e-5, atol=1e-6 * np.abs(J_chi[:, i]).max())
    # The LCP really is in play: in this state some friction multiplier is active.
    _, info = step(model, state, u, model.parameters.arrays(), 1e-3)
    assert np.asarray(info.lam_B).max() > 0


# ----------------------------------------------------------------- bad model input


def _one_body_params(**over) -> ParameterSet:
    values = dict(m=1.0, g=9.81)
    values.update(over)
    return ParameterSet([Parameter(k, v) for k, v in values.items()])


def test_negative_mass_is_named() -> None:
    with pytest.raises(ModelError, match=r"body 'bob' mass must be > 0, got m = -1"):
        RigidModel("bad", [Body("bob", "m", (1.0, 1.0, 1.0))], parameters=_one_body_params(m=-1.0))


def test_constraint_naming_unknown_body_is_named() -> None:
    hinge = Hinge("h", Frame("world"), Frame("nobody"))
    with pytest.raises(ModelError, match=r"joint 'h'.b names unknown body 'nobody'"):
        RigidModel("bad", [Body("bob", "m", (1.0, 1.0, 1.0))], [hinge], parameters=_one_body_params())


def test_unknown_parameter_is_named() -> None:
    with pytest.raises(ModelError, match=r"names unknown parameter 'J_missing'"):
        RigidModel("bad", [Body("bob", "m", (1.0, "J_missing", 1.0))], parameters=_one_body_params())


def test_non_unit_quaternion_is_named() -> None:
    model = pendulum()
    x0 = model.initial_state()
    bad = State(x0.r, x0.e * 1.1, x0.v, x0.w)
    with pytest.raises(ModelError, match=r"body 'pendulum' quaternion has norm 1.1"):
        simulate(model, 0.01, 1e-3, initial=bad)


def test_singular_hinge_configuration_is_named() -> None:
    """Turned 90 degrees about x, the pendulum's hinge axis lies along the body's own hinge-normal axis:
    the two rotational rows of F.1 lose rank."""
    model = pendulum()
    x0 = model.initial_state()
    turned = State(x0.r, jnp.asarray(quat.exp(jnp.array([np.pi / 2, 0.0, 0.0])))[None], x0.v, x0.w)
    with pytest.raises(ModelError, match=r"joint 'theta' is singular at this configuration"):
        simulate(model, 0.01, 1e-3, initial=turned)


def test_bounds_with_lower_above_upper_are_named() -> None:
    with pytest.raises(ModelError, match=r"parameter 'J': lower bound 2.0 is above the upper bound 1.0"):
        pendulum().with_parameters({"J": {"lower": 2.0, "upper": 1.0}})


def test_tilted_gravity_section_4_6_matches_the_reference_with_the_same_tilt() -> None:
    from scipy.spatial.transform import Rotation

    tilt = Rotation.from_rotvec([0.1, -0.05, 0.3]).as_matrix()  # the z part does not change gravity
    model = furuta(dry=False).with_parameters({"tilt": tilt, **STIFF})
    P = model.parameters.numpy_values()
    traj = simulate(model, 2.0, 1e-3, initial=model.initial_state({"alpha": 0.5}))
    g_vec = tilt @ np.array([0.0, 0.0, -P["g"]])
    ref = R.simulate_reference(R.furuta_ode, [0.0, 0.5, 0.0, 0.0], traj.t, P, g_vec)[:, :2]
    untilted = R.simulate_reference(R.furuta_ode, [0.0, 0.5, 0.0, 0.0], traj.t, P)[:, :2]
    err = np.abs(np.unwrap(traj.observations, axis=0) - ref).max()
    print(f"\ntilted Furuta: max angle error {err:.3e} rad (tilt's own effect {np.abs(ref - untilted).max():.3e} rad)")
    assert err < 1e-2
    assert np.abs(ref - untilted).max() > 10 * err  # the tilt matters more than the step error
