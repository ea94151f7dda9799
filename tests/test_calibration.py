"""Joint state-parameter estimation (Marklund et al. (2025) sections 2.6-3.3, Marklund et al. (2025) sections 3.4-4.7, Berard and Trinkle (2008)).

Synthetic logs come from the Spook simulator with known parameters; the
estimates are checked against those, within their linearized standard
deviations (Marklund et al. (2025) section 3.7).
"""

from __future__ import annotations

import warnings

import gtsam
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mbfg import residuals
from mbfg.calibration import calibrate
from mbfg.calibration_options import CalibrationOptions, calibration_lm
from mbfg.covariance import parameter_covariance
from mbfg.errors import DataError, ModelError
from mbfg.graphs.joint import build_joint_problem, filtered_observations, solve, time_step
from mbfg.graphs.restarts import RESTART_LAMBDA_INITIAL
from mbfg.lm_config import LMConfig
from mbfg.logs import Log, round_time, sample_period
from mbfg.models import furuta, particle, particles, pendulum
from mbfg.solvers import LAMBDA_INITIAL
from mbfg.spook import simulate, step, unwrap_angles


def _log(model, traj, sigma: float, seed: int = 0, source: str = "synthetic") -> Log:
    rng = np.random.default_rng(seed)
    y = unwrap_angles(model, traj.observations) + sigma * rng.standard_normal(traj.observations.shape)
    u = np.vstack([traj.controls, traj.controls[-1:]]) if len(traj.controls) else np.zeros((len(traj.t), 0))
    return Log(traj.t, y, u, model.observations, model.controls, source)


# ----------------------------------------------------------------- the residuals


@pytest.mark.parametrize("name", ["furuta", "pendulum-stribeck", "particle"])
def test_impulse_residual_eqs_3_6_3_7_vanish_on_the_spook_step(name: str) -> None:
    """Inverse dynamics (2.29-2.31) inverts the forward step (2.26-2.28), complementarity included."""
    from mbfg.models import BUILTIN

    model = BUILTIN[name]()
    p = model.parameters.arrays()
    rng = np.random.default_rng(3)
    coords = {j.name: rng.uniform(-1, 1) for j in model.hinges}
    rates = {j.name: rng.uniform(-3, 3) for j in model.hinges}
    x0 = model.initial_state(coords, rates)
    if not model.hinges:  # the particle resting on the ground, sliding
        x0 = x0._replace(r=x0.r.at[0, 2].set(-1e-6), v=x0.v.at[0, 0].set(1.0))
    u = jnp.full(len(model.controls), 0.7)
    x1, info = jax.jit(lambda x, u, p: step(model, x, u, p, 1e-3))(x0, u, p)
    assert np.abs(np.asarray(info.lam_B)).max(initial=0.0) > 0 or model.layout.n_B == 0
    r = np.asarray(jax.jit(lambda a, b, u, p: residuals.impulse(model, a, b, u, p, 1e-3))(x0, x1, u, p))
    nv = 6 * model.nb
    scale = np.abs(np.asarray(model.mass_diagonal(p)) * np.asarray(x1.velocity())).max()
    assert np.abs(r[:nv]).max() < 1e-10 * scale  # Delta p_u: exact
    assert np.abs(r[nv:]).max() < 1e-6 * scale  # Delta p_q: up to the small-angle difference (3.20)


def test_observation_residual_eq_3_5_masks_missing_readings_and_wraps_angles() -> None:
    model = furuta()
    p = model.parameters.arrays()
    x = model.initial_state({"theta": 3.0, "alpha": -0.5})
    y = jnp.array([3.0 - 2 * np.pi + 1e-3, 123.0])  # theta one turn off; alpha missing
    r = np.asarray(residuals.observation(model, x, p, y, jnp.array([1.0, 0.0])))
    np.testing.assert_allclose(r, [-1e-3, 0.0], atol=1e-12)


def test_initial_state_residual_eqs_3_14_3_15_is_zero_on_the_constraint_manifold() -> None:
    model = furuta()
    p = model.parameters.arrays()
    x = model.initial_state({"theta": 0.3, "alpha": 1.0}, {"theta": 2.0, "alpha": -1.0})
    assert np.abs(np.asarray(residuals.initial_state(model, x, p, 1e-3))).max() < 1e-9
    # Off the manifold (hinge 2 pulled apart, a velocity along the constraint normal) it is not.
    bad = x._replace(r=x.r.at[1, 0].add(1e-4), v=x.v.at[1, 2].add(0.1))
    assert np.abs(np.asarray(residuals.initial_state(model, bad, p, 1e-3))).max() > 1e-6


# ----------------------------------------------------------------- initialization (Marklund et al. (2025) section 4.4)


def test_butterworth_filtfilt_initialization_has_no_lag_and_bridges_missing_readings() -> None:
    t = np.arange(2000) * 1e-3
    clean = np.sin(2 * np.pi * 1.0 * t)
    rng = np.random.default_rng(0)
    y = (clean + 0.01 * rng.standard_normal(t.shape))[:, None]
    y[500:510, 0] = np.nan
    f = filtered_observations(t, y, cutoff_hz=20.0)[:, 0]
    assert np.all(np.isfinite(f))
    assert np.abs(f - clean)[100:-100].max() < 0.01  # forward-backward: no phase lag, noise reduced
    assert np.isnan(y[505, 0])  # the log itself is not filled in


# ----------------------------------------------------------------- calibration


def test_butterworth_section_4_4_is_scipys_butter_and_filtfilt() -> None:
    """The initialization filter is written out (scipy.signal takes seconds to import): the same
    coefficients as scipy.signal.butter(2, wn) and the same output as scipy.signal.filtfilt."""
    from scipy import signal

    from mbfg.graphs.joint import butterworth2, filtfilt

    rng = np.random.default_rng(0)
    x = np.cumsum(rng.standard_normal((800, 3)), axis=0)
    for wn in (0.005, 0.04, 0.3, 0.95):
        b, a = butterworth2(wn)
        b_ref, a_ref = signal.butter(2, wn)
        np.testing.assert_allclose(b, b_ref, rtol=1e-12, atol=1e-18)
        np.testing.assert_allclose(a, a_ref, rtol=1e-12, atol=1e-15)
        for padlen in (6, 150, 799):
            np.testing.assert_allclose(filtfilt(b, a, x, padlen), signal.filtfilt(b_ref, a_ref, x, axis=0,
                                                                                   padlen=padlen),
                                       rtol=0, atol=1e-9 * np.abs(x).max())


@pytest.fixture(scope="module")
def pendulum_log() -> tuple:
    model = pendulum()
    traj = simulate(model, 2.0, 1e-3, initial=model.initial_state({"theta": 2.5}))
    return model, _log(model, traj, sigma=1e-3)


def test_pendulum_calibration_recovers_parameters_within_two_std(pendulum_log) -> None:
    model, log = pendulum_log
    truth = model.parameters.numpy_values()
    start = model.with_parameters({"J": 1.25 * truth["J"], "b": 0.5 * truth["b"]})
    result = calibrate(start, log, free=["J", "b"])
    print("\n" + result.table())
    assert result.converged and result.iterations <= 20
    for p in result.parameters:
        assert abs(p.value - truth[p.name]) < 2 * p.std, p
        assert p.std < 1e-2 * abs(p.value)  # and the data do determine them
    # The noise estimate (3.22) finds the 1e-3 rad that was added.
    assert result.sigma_observation == pytest.approx(1e-3, rel=0.1)
    # Figure 5: the identified model, simulated from the estimated x_0, follows the log.
    _, rmse = result.simulate()
    assert rmse["theta"] < 3e-3


def test_missing_readings_are_skipped_not_filled(pendulum_log) -> None:
    model, log = pendulum_log
    y = log.y.copy()
    y[::3, 0] = np.nan  # a third of the readings missing
    holey = Log(log.t, y, log.u, log.observations, log.controls, "holey")
    problem = build_joint_problem(model, holey, free=[])
    n_obs_factors = sum(kind == "observation" for kind in problem.factor_kinds)
    assert n_obs_factors == np.isfinite(y[:, 0]).sum()


@pytest.mark.slow
def test_smooth_start_puts_the_joint_forces_of_a_dry_hinge_into_the_initial_states() -> None:
    """The section-4.4 states sit at zero constraint violation, so a compliant hinge carries no force there;
    the states of the model's smooth twin (no dry friction) do carry it, and the dry model's impulse
    residuals (3.6-3.7) at them are far smaller."""
    model = pendulum("dry")
    twin = model.without_dry_friction()
    assert model.has_dry_friction and not twin.has_dry_friction
    assert model.layout.n_B > 0 and twin.layout.n_B == 0
    assert twin.parameters.numpy_values().keys() == model.parameters.numpy_values().keys()
    traj = simulate(model, 0.5, 1e-3, initial=model.initial_state({"theta": 2.0}))
    log = traj.to_log(ppr=4096)
    costs = {}
    for iterations in (0, 1, 3):
        problem = build_joint_problem(model, log, free=(), quiet=True,
                                      smooth_start=LMConfig(max_iterations=iterations) if iterations else None)
        costs[iterations] = problem.step_costs(problem.initial)["impulse"].mean()
        assert (problem.smooth_start is None) == (iterations == 0)
    print(f"\ndry pendulum, impulse cost per step at the initial states after 0 / 1 / 3 smooth-twin "
          f"iterations: {costs[0]:.3g} / {costs[1]:.3g} / {costs[3]:.3g}")
    assert costs[1] < 1e-2 * costs[0]
    assert costs[3] <= costs[1]


@pytest.mark.slow
def test_cross_validation_score_section_4_5_is_the_noise_level_on_another_log(pendulum_log) -> None:
    model, _ = pendulum_log
    # As long as the calibration log: the same compiled shapes as the test below.
    other = simulate(model, 2.0, 1e-3, initial=model.initial_state({"theta": -1.5}))
    score_true = calibrate(model, _log(model, other, 1e-3, seed=5), free=[]).cost
    from mbfg.graphs.joint import cross_validation_score

    wrong = model.parameters.numpy_values() | {"J": 2 * model.parameters["J"].default}
    score_wrong = cross_validation_score(model, _log(model, other, 1e-3, seed=5), wrong)
    print(f"\ncross-validation: true parameters {score_true:.3e}, J doubled {score_wrong:.3e}")
    assert score_true < 3e-6  # ~ sigma^2 = 1e-6 rad^2 per step
    assert score_wrong > 3 * score_true


def test_cross_validation_with_the_calibrations_parameters_held_is_the_fixed_parameter_score(pendulum_log) -> None:
    """Section 4.5 scored with the calibration's free parameters as variables held at their values
    (what CalibrationResult.cross_validate, mbfg crossval and the sweep do): the score of the problem
    with those parameters as constants, on the calibration's compiled programs (no new ones)."""
    from mbfg import _programs
    from mbfg.graphs.joint import cross_validation_score

    model, log = pendulum_log
    result = calibrate(model.with_parameters({"J": 1.1 * model.parameters["J"].default}), log, free=["J", "b"],
                       options=CalibrationOptions(covariance=False))
    # Without a covariance no parameter is judged: no std, so neither "not excited" nor excited.
    assert result.not_excited == [] and result.table().count("std not computed") == 2, result.table()
    other = _log(model, simulate(model, 2.0, 1e-3, initial=model.initial_state({"theta": -1.5})), 1e-3, seed=5)
    programs = len(_programs._LOADED)
    held = result.cross_validate(other)
    assert len(_programs._LOADED) == programs  # the calibration's programs served the held problem
    fixed = cross_validation_score(result.model, other, result.model.parameters.numpy_values(), h=result.h)
    assert held == pytest.approx(fixed, rel=1e-6)
    assert held < 3e-6  # ~ sigma^2 = 1e-6 rad^2 per step


def test_parameter_covariance_section_3_7_is_the_inverse_of_r_t_r() -> None:
    """(R^T R)^-1 of the marginal on the parameters; a direction the data leave undetermined gets an
    infinite variance for the parameters it involves instead of an error."""
    values = gtsam.Values()
    values.insert(1, np.zeros(3))

    def covariance_of(J: np.ndarray) -> np.ndarray:
        graph = gtsam.NonlinearFactorGraph()
        graph.push_back(gtsam.LinearContainerFactor(
            gtsam.JacobianFactor(1, J, np.zeros(3), gtsam.noiseModel.Unit.Create(3)), values))
        return parameter_covariance(graph, values, [1])

    J = np.array([[2.0, 1.0, 0.0], [0.0, 3.0, 0.0], [0.0, 0.0, 0.5]])
    np.testing.assert_allclose(covariance_of(J), np.linalg.inv(J.T @ J), rtol=1e-12)

    J[1, 1] = 1e-17  # the first two parameters are only seen through their sum
    cov = covariance_of(J)
    assert np.isinf(cov[0, 0]) and np.isinf(cov[1, 1])
    assert cov[2, 2] == pytest.approx(4.0)


def test_trajectory_to_log_adds_noise_and_quantizes_like_an_encoder() -> None:
    model = pendulum()
    traj = simulate(model, 0.2, 1e-3, initial=model.initial_state({"theta": 1.0}))
    exact = traj.to_log()
    np.testing.assert_array_equal(exact.y, unwrap_angles(model, traj.observations))
    noisy = traj.to_log(noise=1e-3, seed=3)
    assert np.std(noisy.y - exact.y) == pytest.approx(1e-3, rel=0.2)
    step = 2 * np.pi / 1024
    quantized = traj.to_log(ppr=1024).y
    np.testing.assert_allclose(quantized / step, np.round(quantized / step), atol=1e-9)
    assert np.abs(quantized - exact.y).max() <= step / 2 + 1e-12
    assert exact.u.shape == (len(traj.t), 0) and exact.observations == model.observations


# Marklund et al. (2025) Table 3 (viscous, dry and Stribeck friction compared by cost and cross-validation on a log
# simulated with Stribeck friction) is checked by notebooks/pendulum_friction.ipynb, which the tests run.


# ----------------------------------------------------------------- bad input


def test_log_whose_columns_do_not_match_the_model_is_named(pendulum_log) -> None:
    model, log = pendulum_log
    wrong = Log(log.t, log.y, log.u, ("phi",), log.controls, "wrong.csv")
    with pytest.raises(DataError, match=r"wrong.csv: observation columns \['phi'\] do not match the model"):
        build_joint_problem(model, wrong)


def test_non_uniform_sampling_is_named_with_its_row(pendulum_log) -> None:
    model, log = pendulum_log
    t = log.t.copy()
    t[10:] += 5e-4
    with pytest.raises(DataError, match=r"row 11 is 0.0015 s after the previous one"):
        build_joint_problem(model, Log(t, log.y, log.u, log.observations, log.controls, "gap.csv"))


def test_time_step_not_a_multiple_of_the_sample_period_is_named(pendulum_log) -> None:
    model, log = pendulum_log
    with pytest.raises(DataError, match=r"h = 0.0015 s must be a whole multiple"):
        build_joint_problem(model, log, h=1.5e-3)


def test_time_step_is_the_stride_times_the_period_exact_to_the_logs_decimals() -> None:
    """Issue 21: h comes from the stride times the period rounded to the period's decimals, not from the median
    difference of the times (0.0010000000000000009 at 1 kHz) times the stride (0.30000000000000004 for 3 x 0.1)."""
    def log(t: np.ndarray) -> Log:
        return Log(t, np.zeros((len(t), 1)), np.zeros((len(t), 0)), ("theta",), (), "grid.csv")

    khz = np.array([float(repr(k * 0.001)) for k in range(1001)])  # as written and read back
    assert float(np.median(np.diff(khz))) != 0.001  # the float noise this is about
    assert time_step(log(khz), None) == (0.001, 1)
    assert time_step(log(khz), 0.002) == (0.002, 2)
    assert time_step(log(khz), 0.007) == (0.007, 7)
    assert time_step(log(np.arange(30) * 0.1), 0.3) == (0.3, 3)
    # A clock that starts late: the differences carry the rounding error of times near 1e4 s (1e-12).
    assert sample_period(1e4 + np.arange(100) * 0.001) == 0.001
    # A real, jittered period is not rounded away, and neither is a fine one.
    assert sample_period(np.arange(100) * 0.0010000004) == 0.0010000004
    assert sample_period(np.arange(100) * 0.00025) == 0.00025
    assert round_time(3, 0.1) == 0.3 and round_time(1899, 0.001) == 1.899
    assert np.isnan(sample_period([0.0]))


def test_angles_in_degrees_are_detected(pendulum_log) -> None:
    model, log = pendulum_log
    every = slice(None, None, 20)  # a 50 Hz log: the pendulum turns ~0.1 rad = ~6 degrees per reading
    degrees = Log(log.t[every], np.degrees(log.y[every]), log.u[every], log.observations, log.controls, "deg.csv")
    with pytest.raises(DataError, match=r"deg.csv: column 'theta' jumps by .* rad between rows .*degrees"):
        build_joint_problem(model, degrees)


def test_unknown_free_parameter_and_bad_weight_are_named(pendulum_log) -> None:
    model, log = pendulum_log
    with pytest.raises(ModelError, match=r"unknown parameter 'J_nosuch'"):
        build_joint_problem(model, log, free=["J_nosuch"])
    with pytest.raises(ModelError, match=r"state error weight must be a positive number, got -1"):
        build_joint_problem(model, log, weight=-1.0)


# ----------------------------------------------------------------- Berard and Trinkle (2008): the particle's friction coefficient

#: Berard and Trinkle's (2008) table (KNITRO, MPEC): uniform observation noise in [-eps, eps] -> (mu found, iterations).
SEED_002 = {5e-5: (0.2, 301), 5e-4: (0.2, 443), 5e-3: (0.2, 19), 5e-2: (0.200022, 149), 5e-1: (0.199873, 96)}


def _seed_002_log(eps: float, draw: int) -> Log:
    """Berard and Trinkle's (2008) particle (mu = 0.2), 5 s at h = 0.05 s, x and z read with uniform noise in [-eps, eps] [m]."""
    model = particle()
    traj = simulate(model, 5.0, 0.05)
    y = traj.observations + np.random.default_rng(draw).uniform(-eps, eps, traj.observations.shape)
    return Log(traj.t, y, np.zeros((len(traj.t), 0)), model.observations, (), f"particle eps={eps}")


def _seed_002_calibration(eps: float, covariance: bool = False, draw: int = 1, restart_search: int = 0,
                          backtracking: int | None = None):
    """mu of Berard and Trinkle's (2008) particle (N = 100 steps of h = 0.05 s, as in the seed) from x, z with uniform noise in
    [-eps, eps] [m] (noise draw ``draw``), started at the paper's mu = 1: a first solve at w = 1e-5, restarted at
    w = 1e3; ``backtracking``: calibrate's (None: its default for a model with contacts, 8)."""
    model = particle()
    return calibrate(model.with_parameters({"mu": 1.0}), _seed_002_log(eps, draw), free=["mu"], weight=1e-5,
                     cutoff_hz=1e9,
                     lm=calibration_lm(model.with_parameters({"mu": 1.0}), max_iterations=40,
                                       **({} if backtracking is None else {"backtracking": backtracking})),
                     options=CalibrationOptions(restart_weight=1e3, covariance=covariance,
                                                restart_search=restart_search))


def test_particle_friction_coefficient_seed_002_is_recovered_at_every_noise_level() -> None:
    """mu = 0.2 from positions with uniform noise in [-eps, eps], starting from mu = 1 (Berard and Trinkle's (2008) initial guess).

    The log comes from the same soft-contact model (1e-4 m/N) that estimates. A first solve at w = 1e-5
    lets the positions (unit sigma, in metres) hold the states; it is restarted at w = 1e3 from a free
    simulation of its result (``restart_weight``), whose states are in no contact mode the noise chose.
    Without the restart mu is 0.191 at 5e-2 and 0.389 at 5e-1; solved at w = 1e3 from the readings
    alone it stops at 0.223 and 0.253. The error of least squares grows in proportion to the noise (from
    the true states and mu the minimum of this log is 0.2 + 7.7e-3 eps, ``benchmarks/particles.py
    --weight 1e3``), so the bound is proportional to eps.
    """
    rows = []
    for eps, (seed_mu, seed_iters) in SEED_002.items():
        result = _seed_002_calibration(eps)
        mu = result.values["mu"]
        rows.append((eps, mu, abs(mu - 0.2), result.iterations, seed_mu, seed_iters))
        assert result.converged, rows[-1]
        assert abs(mu - 0.2) < max(0.02 * eps, 1e-5), rows[-1]
    print("\nnoise eps   mu (mbfg)   |error|    LM iterations   Berard and Trinkle (2008): mu, KNITRO iterations")
    for eps, mu, err, it, smu, sit in rows:
        print(f"{eps:8.0e}  {mu:.7f}  {err:9.2e}  {it:6d}           {smu}, {sit}")


@pytest.mark.slow
def test_seed_002_mu_std_section_3_7_is_the_exact_marginal_despite_the_particles_free_directions() -> None:
    """The particle's y translation and rotation are free (it moves in x-z, observed in x and z), a gauge
    freedom of the eliminated states. Its mu std is still the exact marginal: the inverse of mu's information
    once the states are projected out of the re-weighted system, computed here densely (SVD); and the estimate
    lies within three of it. Without the gauge damping (mbfg.covariance, with GAUGE_DAMPING = 0) GTSAM's QR
    loses part of that information at random: 3.3e-6 here where 2.8e-6 is exact. (The std grows in proportion
    to the noise, as the spread of the estimate over noise draws does: ``benchmarks/particles.py
    --draws 50``.)"""
    result = _seed_002_calibration(5e-4, covariance=True)
    problem, values = result.problem, result.solution
    reweighted = build_joint_problem(problem.model, problem.state_log(), free=["mu"], weight=problem.weight,
                                     sigmas=(result.sigma_observation, result.sigma_impulse),
                                     states=problem.state_list(values))
    linear, _ = reweighted.vectorized.linearize(values)
    A, _ = linear.jacobian(gtsam.Ordering(reweighted.vectorized.order))  # the parameter block last
    U, s, _ = np.linalg.svd(A[:, :-1], full_matrices=False)
    U = U[:, s > 1e-13 * s.max()]
    a = A[:, -1]
    exact_std = 1.0 / np.sqrt(a @ a - (U.T @ a) @ (U.T @ a))
    std = result.parameters[0].std
    assert std == pytest.approx(exact_std, rel=1e-6), (std, exact_std)
    assert abs(result.values["mu"] - 0.2) < 3 * std, (result.values["mu"], std)


def test_a_restart_search_leaves_the_contact_mode_the_first_solve_chose_at_seed_002s_largest_noise() -> None:
    """eps = 5e-1, noise draw 4, the plain LM (backtracking=0). The first solve used to end at mu = 0.53, above
    the push over m g (0.51), with mu not determined, where no fraction down to 1/8 of the Gauss-Newton step lowered
    the cost; a shorter one does (mbfg.solvers.newton_fractions), and the solve now goes on to the least-squares
    minimum near 0.2, within three standard deviations. With restart_search=10 two more restarts start from
    sampled mu whose free simulations come closest to the readings; the lowest cost of the three is the same
    minimum."""
    plain = _seed_002_calibration(0.5, covariance=True, draw=4, backtracking=0)
    searched = _seed_002_calibration(0.5, covariance=True, draw=4, restart_search=10, backtracking=0)
    for result in (plain, searched):
        assert result.converged and not result.not_excited, result.message
        assert abs(result.values["mu"] - 0.2) < 3 * result.parameters[0].std, result.parameters
    assert searched.cost <= plain.cost * (1 + 1e-6), (searched.cost, plain.cost)
    # The iterations count the first solve and all three restarted ones; the history is the first and the chosen
    # one's, so the other two restarts (at least one iteration each) make the difference.
    assert searched.iterations - (len(searched.history) - 1) >= 2, (searched.iterations, len(searched.history))


def test_halved_steps_reach_seed_002s_mu_in_fewer_iterations_where_the_contact_engages() -> None:
    """eps = 5e-3: the plain LM's full steps cross the kinks where the contact engages (the impulse residual
    steepens a hundredfold) and are rejected until the damping has turned them into short gradient steps, so
    the first solve creeps (33 iterations). Halving the rejected step along its direction instead
    (backtracking=8, calibrate's default for a model with contacts) reaches the same least-squares minimum,
    within a tenth of mu's standard deviation, in fewer than two thirds of the iterations."""
    plain = _seed_002_calibration(5e-3, covariance=True, backtracking=0)
    halved = _seed_002_calibration(5e-3)  # calibrate's default for a model with contacts
    assert plain.converged and halved.converged
    std = plain.parameters[0].std
    assert abs(halved.values["mu"] - plain.values["mu"]) < 0.1 * std, (halved.values["mu"], plain.values["mu"], std)
    assert halved.iterations < 2 / 3 * plain.iterations, (halved.iterations, plain.iterations)
    assert any(row.get("alpha", 1.0) < 1.0 for row in halved.history), halved.history


def test_seed_002s_cross_validation_scores_the_readings_noise_variance_with_halved_steps() -> None:
    """Section 4.5's score of the particle calibrated at eps = 5e-3, on another noise draw: uniform noise in
    [-eps, eps] on x and z has the variance eps^2 / 3 each, so parameters that explain the readings score
    about 2 eps^2 / 3 per time-step. The state estimation takes the calibration's halved steps for a model with
    contacts (22 iterations here); with the plain LM it stopped, called converged, at a score of 82, five million
    times that, its states in contact modes the noise chose."""
    eps = 5e-3
    result = _seed_002_calibration(eps)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an unconverged state estimation warns
        score = result.cross_validate(_seed_002_log(eps, draw=7))
    assert 0.8 < score / (2 * eps**2 / 3) < 1.25, score


def test_a_restart_search_needs_a_restart_and_finite_bounds(pendulum_log) -> None:
    model, log = pendulum_log
    with pytest.raises(ModelError, match="restart_search: a search picks the starts of a restart"):
        calibrate(model, log, free=["J"], options=CalibrationOptions(restart_search=4))
    with pytest.raises(ModelError, match=r"restart_search: free parameter 'J' has the bounds \[1e-09, inf\]"):
        calibrate(model, log, free=["J"], options=CalibrationOptions(restart_weight=1e3, restart_search=4))


def test_a_solve_restarted_from_a_free_simulation_starts_at_the_smaller_damping_and_needs_fewer_steps() -> None:
    """The restarted solve starts at RESTART_LAMBDA_INITIAL, not the calibration's LAMBDA_INITIAL: from its
    dynamics-consistent states (Berard and Trinkle's (2008) particle, noise 5e-4 m) the undamped steps hold, and the same
    restarted problem solved from the larger damping takes more iterations to the same mu."""
    result = _seed_002_calibration(5e-4)
    first = result.problem.restarted_from
    restarted_history = result.history[first.iterations + 1:]
    assert restarted_history[0]["lam"] == RESTART_LAMBDA_INITIAL < LAMBDA_INITIAL
    damped = solve(result.problem, LMConfig(max_iterations=40, lambda_initial=LAMBDA_INITIAL), quiet=True)
    mu_damped = result.problem.parameter_values(damped.values)["mu"]
    assert result.converged and damped.converged
    assert abs(mu_damped - result.values["mu"]) < 1e-6, (mu_damped, result.values["mu"])
    assert result.iterations - first.iterations < damped.iterations, (result.iterations, first.iterations,
                                                                      damped.iterations)


def test_seed_002_multiple_particles_model_draws_the_seeds_ranges_and_refuses_a_bad_count() -> None:
    """mbfg.particles(n, seed): n bodies, each on its own contact with its own mu_i in (0, 0.5], released at
    x0 in [-10, 10] m, z0 in [0, 5] m; the same seed gives the same model; n < 1 is refused by name."""
    model = particles(4, seed=7)
    mus = [model.parameters[f"mu_{i}"].default for i in range(4)]
    assert len(model.bodies) == 4 and len(model.contacts) == 4 and len({c.mu for c in model.contacts}) == 4
    assert all(0 < mu <= 0.5 for mu in mus) and len(set(mus)) == 4
    for body in model.bodies:
        x, _, z = body.position
        assert -10 <= x <= 10 and 0 <= z <= 5
    assert mus == [particles(4, seed=7).parameters[f"mu_{i}"].default for i in range(4)]
    with pytest.raises(ModelError, match="n: expected a whole number of particles"):
        particles(0)


@pytest.mark.slow
def test_section_4_7_release_recovery_shadow_parameter_bias_shrinks_with_h() -> None:
    """Marklund et al. (2025) section 4.7: J_Az, J_Bx, b_1, b_2 of the viscous Furuta pendulum from a release log.

    The log is a Spook simulation at 0.25 ms (a stand-in for the continuous
    system) with 1e-4 rad noise; the estimates at h = 2 and 1 ms carry the
    shadow-parameter bias of the discretization, far larger than their
    standard deviations, which must shrink with h (Spook is first order).
    b_2 is left out of the shrinking check: its error is within 1 % at both h
    and not monotone (the viscous drag of the pendulum hinge is the weakest
    term of this log). Figures: ``benchmarks/furuta_release_recovery.py``.
    """
    model = furuta(dry=False)
    traj = simulate(model, 2.0, 2.5e-4, initial=model.initial_state({"alpha": np.pi - 0.2}))
    log = traj.to_log(noise=1e-4, seed=0, source="release")
    truth = model.parameters.numpy_values()
    free = ["J_Az", "J_Bx", "b_1", "b_2"]
    start = model.with_parameters({k: 1.2 * truth[k] for k in free})
    rel = {}
    for h in (2e-3, 1e-3):
        # The standard deviations are not checked here: skip their extra factorization.
        result = calibrate(start, log, free=free, h=h, lm=calibration_lm(start, max_iterations=15),
                           options=CalibrationOptions(covariance=False))
        assert result.converged, (h, result.iterations, result.message)
        rel[h] = {p.name: (p.value - truth[p.name]) / truth[p.name] for p in result.parameters}
    assert all(abs(e) < 0.01 for e in rel[1e-3].values()), rel
    for name in ("J_Az", "J_Bx", "b_1"):
        assert abs(rel[1e-3][name]) < 0.7 * abs(rel[2e-3][name]), (name, rel)


# ------------------------------------------------- issue 27 item 3: the bias column


@pytest.mark.slow
def test_bias_estimate_from_2h_and_stiffer_joints_covers_the_error_against_the_minimal_coordinate_ode() -> None:
    """The pendulum of a minimal-coordinate ODE (no discretization, rigid hinge; DOP853 at rtol 1e-12),
    1 s at 1 kHz, 1e-4 rad noise: J and b calibrated at h = 1 ms carry the discrete model's bias (Spook's first
    order in h and the hinge's compliance, each about -0.09 % of J), far beyond their std. The
    reported bias (:func:`mbfg.calibration.discretization_bias`) must cover the true error:
    |error| <= 2 |bias|, and the table, JSON and DataFrame must carry it, flagged where it exceeds the std."""
    try:
        import rigid_references as R
    except ImportError:
        from tests import rigid_references as R

    model = pendulum()
    truth = model.parameters.numpy_values()
    t = np.arange(0.0, 1.0 + 1e-9, 1e-3)
    theta = R.simulate_reference(R.pendulum_ode, [2.5, 0.0], t, truth)[:, :1]
    noise = 1e-4 * np.random.default_rng(0).standard_normal(theta.shape)
    log = Log(t, theta + noise, np.zeros((len(t), 0)), model.observations, model.controls, "minimal-coordinate ODE")
    start = model.with_parameters({"J": 1.25 * truth["J"], "b": 0.5 * truth["b"]})
    result = calibrate(start, log, free=["J", "b"], options=CalibrationOptions(bias=True))
    print("\n" + result.table() + f"\nbias parts: {result.bias_parts}")
    assert result.converged
    for p in result.parameters:
        error = p.value - truth[p.name]
        assert abs(error) <= 2 * abs(p.bias), (p.name, error, p.bias, result.bias_parts)
        assert abs(error) > 3 * p.std  # the situation the column is for: the std alone would mislead
    assert "J" in result.biased
    frame = result.to_dataframe()
    assert frame.loc["J", "bias"] == result.parameters[0].bias and bool(frame.loc["J", "biased"])
    doc = result.to_dict()
    assert doc["parameters"]["J"]["bias"] == result.parameters[0].bias and doc["biased"] == result.biased
    assert set(doc["bias_parts"]) == {"h", "compliance"} and "biased (|bias| > std)" in result.table()


def test_joint_compliances_are_the_hinge_eps_parameters() -> None:
    from mbfg.graphs.restarts import joint_compliances

    assert joint_compliances(pendulum()) == ["eps_lin", "eps_rot"]
    assert joint_compliances(furuta()) == ["eps_lin", "eps_rot"]
