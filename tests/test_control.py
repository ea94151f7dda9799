"""Control (the control note): the implicit-Euler step with activations, its gradients, the control graphs, ``mbfg control``.

Independent checks: the step against the Spook stepper (:func:`mbfg.spook.step`, another
elimination of the same equations); the direct and adjoint gradients against JAX's derivative of
the Spook step and against central differences; the controls against a simulation with them.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
from scipy import optimize

from mbfg import control, spook
from mbfg._jax import jax, jnp
from mbfg.cli import main, rigid_model
from mbfg.errors import ModelError
from mbfg.factors.control import horizon_residual, step_residual
from mbfg.graphs.control import RecedingHorizon, solve_one_step
from mbfg.graphs.control_linearized import RIDGE, LinearizedHorizon, linearized_horizon
from mbfg.graphs.stream import StreamEstimator
from mbfg.logs import read_log
from mbfg.rigid import State
from mbfg.testing import motor_link

H = 1e-3


def _state(model, rng: np.random.Generator) -> State:
    coords = {j.name: rng.uniform(-1.0, 1.0) for j in model.hinges}
    rates = {j.name: rng.uniform(-3.0, 3.0) for j in model.hinges}
    return State(*(jnp.asarray(c) for c in model.initial_state(coords, rates)))


@pytest.mark.parametrize("name", ["furuta-viscous", "double-pendulum-torque"])
def test_seed_004_step_is_the_spook_step_and_its_gradients_match_jax_and_finite_differences(name):
    # One compiled function per model checks both (the compilation is most of the cost):
    # - the step in the note's Schur form equals the Spook step (states, multipliers) and zeroes the
    #   step factor's residual (Q = 0, R_q = 0);
    # - dL/da by the direct and the adjoint method equals JAX's derivative of the Spook step and
    #   central differences (L is quadratic in a at a fixed state: exact up to round-off), to 1e-8.
    model = rigid_model(name)
    p = model.parameters.arrays()
    n_a = len(model.controls)
    hol = control.constraint_rows(model)

    def spook_cost(x, a, obj):  # the unrolled Spook step, differentiated by JAX
        x1, info = spook.step(model, x, a, p, H)
        r_v = obj.qdot_star - obj.P @ x1.velocity()
        r_f = H * obj.lambda_star - obj.P_lambda @ info.lam_A[hol]
        return 0.5 * (r_v @ r_v + r_f @ r_f)

    @jax.jit
    def check(x, a, obj):
        x_spook, info = spook.step(model, x, a, p, H)
        x_ctrl, lam = control.step(model, x, a, p, H)
        steps = (x_spook, info.lam_A[hol], x_ctrl, lam, step_residual(model, x, a, x_ctrl, p, H))
        L_d, g_d = control.gradient_direct(model, x, a, p, H, obj)
        L_a, g_a = control.gradient_adjoint(model, x, a, p, H, obj)
        g_jax = jax.grad(spook_cost, argnums=1)(x, a, obj)
        step = 1e-2
        E = step * jnp.eye(n_a)
        g_fd = jax.vmap(lambda e: spook_cost(x, a + e, obj) - spook_cost(x, a - e, obj))(E) / (2 * step)
        return steps, (L_d, L_a, spook_cost(x, a, obj), g_d, g_a, g_jax, g_fd)

    rng = np.random.default_rng(40)
    joints = [j.name for j in model.joints]
    for _ in range(3):
        x = _state(model, rng)
        a = jnp.asarray(rng.uniform(-1.0, 1.0, n_a))
        P = control.velocity_projection(model, [model.hinges[0].name, f"{model.bodies[-1].name}.vx"], x, p)
        obj = control.Objective(P, jnp.asarray(rng.normal(size=2)),
                                jnp.asarray(control.force_projection(model, [f"{joints[0]}.fx", f"{joints[-1]}.fz"])),
                                jnp.asarray(rng.normal(size=2)))
        (x_spook, lam_spook, x_ctrl, lam, residual), grads = check(x, a, obj)
        for u, v in zip(x_spook, x_ctrl):
            np.testing.assert_allclose(v, u, rtol=0, atol=1e-12)
        np.testing.assert_allclose(lam, lam_spook, rtol=1e-10, atol=1e-15)
        assert np.abs(residual).max() < 1e-12
        L_d, L_a, L_ref, g_d, g_a, g_jax, g_fd = (np.asarray(v) for v in grads)
        np.testing.assert_allclose([L_d, L_a], [L_ref, L_ref], rtol=1e-10)
        scale = np.abs(g_jax).max()
        for label, g in (("direct", g_d), ("adjoint", g_a), ("finite differences", g_fd)):
            assert np.abs(g - g_jax).max() <= 1e-8 * scale, f"{name}: {label} {g} vs jax.grad {g_jax}"


def test_models_with_dry_friction_are_refused_naming_the_joint():
    with pytest.raises(ModelError, match=r"joint 'theta' has dry friction.*furuta-viscous"):
        RecedingHorizon(rigid_model("furuta"), H, rates={"theta": 1.0})
    with pytest.raises(ModelError, match="no controls"):
        control.check_controllable(rigid_model("double-pendulum"))
    with pytest.raises(ModelError, match="unknown rate 'nope'"):
        RecedingHorizon(rigid_model("furuta-viscous"), H, rates={"nope": 1.0})
    with pytest.raises(ModelError, match="unknown reaction 'theta.fw'"):
        RecedingHorizon(rigid_model("furuta-viscous"), H, forces={"theta.fw": 1.0})


def test_one_step_solution_equals_the_closed_form_pseudo_inverse():
    # The step is affine in a at a fixed state, and link.wy (the angular rate about the hinge axis,
    # body frame) is a constant projection: a = (P dqdot/da)^+ (qdot* - P qdot_free) exactly.
    model = motor_link()
    p = model.parameters.arrays()
    x = State(*(jnp.asarray(c) for c in model.initial_state({"q": 0.7}, {"q": -1.5})))
    target = 0.4
    result = solve_one_step(model, x, H, rates={"link.wy": target})

    @jax.jit
    def closed_form(x):
        sys = control.step_system(model, x, jnp.zeros(1), p, H)
        v_free, _ = control.solve_step(sys)
        dv, _ = control.sensitivities(sys)
        P = control.velocity_projection(model, ["link.wy"], x, p)
        return jnp.linalg.pinv(P @ dv) @ (jnp.array([target]) - P @ v_free)

    np.testing.assert_allclose(result.controls[0], closed_form(x), rtol=1e-8)
    assert abs(float(result.states[0].w[0, 1]) - target) < 1e-9  # and the step reaches it


def test_null_variation_a_locked_velocity_does_not_make_the_activation_grow():
    # The control note: "the variation of activation needed to reach a new state will be null if a
    # constraint prevents to do so". On the Furuta, the arm's vertical velocity is locked by the
    # motor hinge; its variation is of the order of the joints' compliance (the pendulum's
    # reaction bends the compliant hinge): 1000 times stiffer joints, hundreds of times less.
    model = rigid_model("furuta-viscous")
    values = model.parameters.arrays()
    x = _state(model, np.random.default_rng(7))

    @jax.jit
    def sensitivity_ratio(scale):
        p = {**values, "eps_lin": values["eps_lin"] * scale, "eps_rot": values["eps_rot"] * scale}
        dv, _ = control.sensitivities(control.step_system(model, x, jnp.zeros(1), p, H))
        free = control.velocity_projection(model, ["theta"], x, p) @ dv
        locked = control.velocity_projection(model, ["arm.vz"], x, p) @ dv
        return jnp.abs(locked).max() / jnp.abs(free).max()

    soft, stiff = float(sensitivity_ratio(1.0)), float(sensitivity_ratio(1e-3))
    assert soft < 1e-2 and stiff < 1e-2 * soft, (soft, stiff)
    # A single link on its hinge: the motor cannot move it along the hinge axis at all. The
    # unreachable target leaves the activation at zero, with no bound and no effort cost.
    link = motor_link()
    x = link.initial_state({"q": 0.5}, {"q": 1.0})
    loop = RecedingHorizon(link, H, 1, rates={"link.vy": 1.0}).run(x, 20)
    assert np.abs(loop.controls).max() < 1e-9, loop.controls.ravel()
    assert np.abs(loop.rates).max() < 1e-9


@pytest.mark.slow
def test_receding_horizon_drives_the_furuta_arm_and_a_simulation_with_the_controls_reaches_it():
    model = rigid_model("furuta-viscous")  # the CLI's instance: the CLI test reuses the compiled factor
    x0 = model.initial_state()
    loop = RecedingHorizon(model, H, 1, rates={"theta": 2.0}, lower=[-10.0], upper=[10.0]).run(x0, 30)
    assert loop.controls[0, 0] == 10.0  # saturated while the arm speeds up
    trajectory = spook.simulate(model, 30 * H, H, initial=x0, controls=loop.controls)
    rates = control.rate_function(model, ["theta", "alpha"])
    p = model.parameters.arrays()
    achieved = np.array([rates(trajectory.state(k), p) for k in (10, 20, 30)])
    np.testing.assert_allclose(achieved[:, 0], 2.0, atol=1e-9)  # velocity error per step, after the transient
    assert np.all(np.abs(loop.rate_error()[5:]) < 1e-9)
    alpha = trajectory.observations[:, model.observations.index("alpha")]
    assert np.abs(alpha).max() < 0.1  # the pendulum hangs: it only sways back as the arm speeds up


@pytest.mark.slow
def test_receding_horizon_follows_a_stream_estimate_of_quantized_encoders():
    """The loop closed through the encoders: the controller sees only the stream estimator's filtered
    state, from 4096-count encoders at 1 kHz (one count per sample is 1.5 rad/s of rate), and the true arm
    rate of the simulated plant still holds its target to a few mrad/s."""
    model = rigid_model("furuta-viscous")
    estimator = StreamEstimator(model, period=H, lag=0.05, ppr=4096)
    loop = RecedingHorizon(model, H, 1, rates={"theta": 2.0}, lower=[-10.0], upper=[10.0]).run(
        model.initial_state(), 150, estimator=estimator)
    assert estimator.status.samples == 150 and estimator.status.updates > 0
    assert loop.controls[0, 0] == 10.0  # saturated while the arm speeds up, as with the true state
    error = loop.rate_error()[50:, 0]  # the plant's true rate, after the transient
    print(f"\nfollowing the stream: true arm rate error RMS {np.sqrt(np.mean(error ** 2)):.2e} rad/s, "
          f"max {np.abs(error).max():.2e} rad/s")
    assert np.sqrt(np.mean(error ** 2)) < 1e-2
    with pytest.raises(ModelError, match="one sample per control step"):
        RecedingHorizon(model, H, 1, rates={"theta": 2.0}).run(
            model.initial_state(), 1, estimator=StreamEstimator(model, period=2 * H, ppr=4096))


@pytest.mark.slow
def test_receding_horizon_holds_a_double_pendulum_hinge_reaction():
    model = rigid_model("double-pendulum-torque")
    x0 = model.initial_state()
    target = 2.0  # N along world x on link 1, from the top hinge
    loop = RecedingHorizon(model, H, 1, forces={"q1.fx": target}, lower=[-5.0, -5.0], upper=[5.0, 5.0]).run(x0, 20)
    trajectory = spook.simulate(model, 20 * H, H, initial=x0, controls=loop.controls)
    fx = np.asarray(trajectory.info.lam_A)[:, control.constraint_rows(model)] @ control.force_projection(
        model, ["q1.fx"])[0] / H
    np.testing.assert_allclose(fx, target, atol=1e-8)  # force error per step, every step
    assert np.abs(loop.controls).max() < 5.0


@pytest.mark.slow
def test_horizon_plan_with_rate_cost_and_warm_start():
    model = motor_link()
    x = model.initial_state()
    controller = RecedingHorizon(model, H, 5, rates={"q": 1.0}, rate_sigma=2.0, lower=[-50.0], upper=[50.0])
    first = controller.solve(x)
    assert first.controls.shape == (5, 1) and np.all(np.abs(first.controls) <= 50.0)
    second = controller.solve(State(*first.states[0]))  # warm-started from the shifted plan
    assert second.iterations <= first.iterations
    # The rate cost smooths the plan: without it the first step jumps to the rate and the rest holds it.
    rough = RecedingHorizon(model, H, 5, rates={"q": 1.0}, lower=[-50.0], upper=[50.0]).solve(x)
    assert np.abs(np.diff(first.controls[:, 0])).max() < np.abs(np.diff(rough.controls[:, 0])).max()


@pytest.mark.parametrize("scheme", [[], ["--linearized"]], ids=["LM", "linearized"])
def test_cli_control_writes_controls_that_simulate_replays(tmp_path, capsys, scheme):
    out = tmp_path / "u.csv"
    log = tmp_path / "log.csv"
    assert main(["control", "furuta-viscous", "--target", "theta=2.0", "--duration", "0.03", "--dt", "0.001",
                 "--horizon", "1", "--limit", "10", "--out", str(out), "--quiet", *scheme]) == 0
    err = capsys.readouterr().err
    assert "theta: |error| after the last step" in err
    controls = read_log(str(out), observations=(), controls=("u",))
    assert len(controls.t) == 31 and controls.u[0, 0] == 10.0
    assert main(["simulate", "furuta-viscous", "--duration", "0.03", "--dt", "0.001", "--controls", str(out),
                 "--out", str(log), "--quiet"]) == 0
    sim = read_log(str(log), observations=("theta", "alpha"), controls=("u",))
    rate = np.diff(sim.y[:, 0]) / 0.001  # the arm turns about the fixed world z: its angle rate exactly
    np.testing.assert_allclose(rate[-10:], 2.0, atol=1e-6)


def test_cli_control_bad_input_exits_2(tmp_path, capsys):
    out = str(tmp_path / "u.csv")
    assert main(["control", "furuta", "--target", "theta=1", "--out", out]) == 2
    assert "dry friction" in capsys.readouterr().err
    assert main(["control", "furuta-viscous", "--target", "arm.vq=1", "--out", out]) == 2
    assert "no rate or reaction 'arm.vq'" in capsys.readouterr().err
    assert main(["control", "furuta-viscous", "--target", "theta=1", "--bounds=3:1", "--out", out]) == 2
    assert "LO < HI" in capsys.readouterr().err
    assert main(["control", "furuta-viscous", "--target", "theta", "--out", out]) == 2


# --------------------------------------------------------------------------- the linearized horizon


def test_linearized_horizons_saturated_plans_are_the_bvls_optimum_of_its_least_squares():
    """The plan the compiled program applies is the optimum of the linearized horizon's box least squares:
    scipy's BVLS on the same rows (the weighted targets over Gamma, the rate and effort rows, the ridge), built
    here in NumPy from :func:`linearized_horizon`, gives the same plan, with some activations on their bounds
    and some inside, and the KKT conditions hold (gradient zero inside, multipliers of the right sign)."""
    model = rigid_model("furuta-viscous")
    p = model.parameters.arrays()
    rng = np.random.default_rng(11)
    N, saturated = 6, 0
    horizon = LinearizedHorizon(model, H, N, rates={"theta": 4.0}, lower=[-2.5], upper=[1.5], rate_sigma=0.5,
                                effort_sigma=20.0)
    linearize = jax.jit(linearized_horizon(model, ("theta",), N))
    for trial in range(6):
        x = _state(model, rng)
        guess = np.full((N, 1), rng.uniform(-2.0, 1.0))
        horizon.applied = np.array([rng.uniform(-2.5, 1.5)])
        plan = horizon._plan(x, guess)
        assert plan.converged, plan.message
        a_bar = guess[0]
        Y_free, Gamma = linearize(x, jnp.asarray(a_bar), p, H, jnp.asarray(horizon.P_lambda))
        J_costs, r_costs = horizon._cost_rows(a_bar)
        J = np.vstack([horizon._weights[:, None] * np.asarray(Gamma), J_costs])
        r = np.concatenate([horizon._weights * (horizon._targets - np.asarray(Y_free).reshape(-1)), r_costs])
        ridge = np.sqrt(RIDGE * np.max(np.sum(J * J, axis=0)))
        J, r = np.vstack([J, ridge * np.eye(N)]), np.concatenate([r, np.zeros(N)])
        lo, hi = horizon.lower[0] - a_bar[0], horizon.upper[0] - a_bar[0]
        reference = optimize.lsq_linear(J, r, bounds=(np.full(N, lo), np.full(N, hi)), method="bvls", tol=1e-15)
        delta = plan.controls[:, 0] - a_bar[0]
        np.testing.assert_allclose(delta, reference.x, rtol=0, atol=1e-9 * (1 + np.abs(reference.x).max()))
        g = J.T @ (J @ delta - r)  # the gradient of 0.5 |J delta - r|^2
        scale = np.abs(J.T) @ (np.abs(J) @ np.abs(delta) + np.abs(r))
        on_lo, on_hi = plan.controls[:, 0] == horizon.lower[0], plan.controls[:, 0] == horizon.upper[0]
        inside = ~on_lo & ~on_hi
        assert np.all(np.abs(g[inside]) <= 1e-9 * scale[inside]), (trial, g, plan.controls)
        assert np.all(g[on_lo] >= -1e-9 * scale[on_lo]) and np.all(g[on_hi] <= 1e-9 * scale[on_hi]), (trial, g)
        saturated += int(on_lo.any() or on_hi.any()) * int(inside.any())
    assert saturated >= 2, saturated  # plans with activations both on a bound and inside were checked


@pytest.mark.slow
def test_linearized_horizon_is_exact_for_one_step_and_first_order_over_the_horizon():
    """Gamma against JAX's Jacobian of the nonlinear horizon residual (the LM's factor): for one step the
    linearization is the step's own derivative; over N steps the model is frozen at x_0, so its error is of
    the order of the motion over the horizon (here up to 3 rad/s for 4 ms: 1 %) and halves with h."""
    model = rigid_model("furuta-viscous")
    p = model.parameters.arrays()
    x = _state(model, np.random.default_rng(5))
    a_bar = jnp.asarray([0.3])
    P_lambda = jnp.zeros((0, len(control.constraint_rows(model))))

    def mismatch(N: int, h: float) -> tuple[float, float]:
        Y_free, Gamma = _linearization(N)(x, a_bar, p, h, P_lambda)
        Y, J = _rollout_rates_and_jacobian(N)(jnp.full(N, a_bar[0]), h)
        return (float(jnp.abs(Y_free.reshape(-1) - Y).max() / jnp.abs(Y).max()),
                float(jnp.abs(Gamma - J).max() / jnp.abs(J).max()))

    @functools.cache
    def _linearization(N: int):  # compiled once per N; h is an argument
        return jax.jit(linearized_horizon(model, ("theta",), N))

    @functools.cache
    def _rollout_rates_and_jacobian(N: int):
        def outputs(plan, h):  # the named rate after every step of the nonlinear roll-out
            zeros = jnp.zeros((N, 1))
            return zeros.reshape(-1) - horizon_residual(model, ("theta",), x, plan.reshape(N, 1), p, h, zeros,
                                                        P_lambda, jnp.zeros((N, 0)))

        return jax.jit(lambda plan, h: (outputs(plan, h), jax.jacfwd(outputs)(plan, h)))

    one = mismatch(1, H)
    assert max(one) < 1e-12, one
    coarse, fine = mismatch(4, H), mismatch(4, H / 2)
    print(f"\nlinearized horizon, N = 4: relative error of (Y_free, Gamma) {coarse} at h = 1 ms, {fine} at 0.5 ms")
    assert coarse[1] < 1.2e-2 and 1.6 < coarse[1] / fine[1] < 3.0, (coarse, fine)  # first order: 2; second: 4


@pytest.mark.slow
def test_linearized_horizon_applies_the_converged_lms_activations_in_closed_loop():
    """The real-time scheme (one linearization and one box solve per step) and the LM solved to convergence
    drive the Furuta arm to the same rate with the same applied voltages, saturated start included."""
    model = rigid_model("furuta-viscous")
    x0 = model.initial_state()
    targets = dict(rates={"theta": 2.0}, lower=[-10.0], upper=[10.0])
    fast = LinearizedHorizon(model, H, 5, **targets).run(x0, 30)
    exact = RecedingHorizon(model, H, 5, **targets).run(x0, 30)
    assert fast.controls[0, 0] == 10.0 and np.all(fast.iterations == 1)
    np.testing.assert_allclose(fast.controls, exact.controls, rtol=0, atol=1e-8)
    assert np.all(np.abs(fast.rate_error()[5:]) < 1e-9)
