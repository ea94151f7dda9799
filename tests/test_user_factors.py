"""The user's own factors in the joint state-parameter problem (mbfg.graphs.user_factors): a factor type of the
user's and a plain GTSAM factor in a calibration of the pendulum (Marklund et al. (2025) section 4.2), checked
against the Gaussian fusion of the plain calibration's estimate with the user's priors."""

from __future__ import annotations

import gtsam
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mbfg import keys
from mbfg.calibration import calibrate
from mbfg.covariance import covariance_of_r, marginal_r
from mbfg.errors import ModelError
from mbfg.factor_type import VectorVar, factor_type
from mbfg.graphs.joint import build_joint_problem, cross_validation
from mbfg.graphs.user_factors import UserFactors
from mbfg.lm_config import LMConfig
from mbfg.logs import Log
from mbfg.models import pendulum
from mbfg.spook import simulate, unwrap_angles

FREE = ["J", "b"]
#: Every solve to its minimum: the comparisons below are of minima, to fractions of a std (calibrate's default
#: tolerance stops where the cost creeps, a few tenths of a std from it).
TIGHT = LMConfig(relative_tol=1e-12, max_iterations=60)


@factor_type(name="test_parameter_combination")
def combination(p: VectorVar, a: jax.Array, target: jax.Array) -> jax.Array:
    """(1,): the combination a . p of the free parameters minus its target value."""
    return jnp.atleast_1d(jnp.dot(a, p) - target)


def _log(model, seconds: float, theta0: float, sigma: float, seed: int) -> Log:
    traj = simulate(model, seconds, 1e-3, initial=model.initial_state({"theta": theta0}))
    rng = np.random.default_rng(seed)
    y = unwrap_angles(model, traj.observations) + sigma * rng.standard_normal(traj.observations.shape)
    return Log(traj.t, y, np.zeros((len(traj.t), 0)), model.observations, model.controls, "synthetic")


@pytest.fixture(scope="module")
def plain() -> tuple:
    """The pendulum, a 0.5 s log, a start off the truth, and the calibration without user factors."""
    model = pendulum()
    log = _log(model, 0.5, 2.5, 1e-3, seed=0)
    start = model.with_parameters({"J": 1.1 * model.parameters["J"].default,
                                   "b": 0.8 * model.parameters["b"].default})
    result = calibrate(start, log, free=FREE, lm=TIGHT)
    assert result.converged
    return model, log, start, result


def _fused(x0: np.ndarray, c0: np.ndarray, rows: list[tuple[np.ndarray, np.ndarray, np.ndarray]]
           ) -> tuple[np.ndarray, np.ndarray]:
    """The Gaussian fusion of the estimate x0 (covariance c0) with linear measurements A x = z of sigmas s:
    (x, covariance) of the information form, (C0^-1 + sum A^T S^-2 A)^-1 (C0^-1 x0 + sum A^T S^-2 z)."""
    info = np.linalg.inv(c0)
    vec = info @ x0
    for A, z, s in rows:
        W = np.diag(1.0 / s**2)
        info = info + A.T @ W @ A
        vec = vec + A.T @ W @ z
    cov = np.linalg.inv(info)
    return cov @ vec, cov


def _objective_covariance(problem, values: gtsam.Values) -> np.ndarray:
    """(2, 2) the parameter block of (J^T J)^-1 of ``problem``'s objective (readings at unit sigma) at ``values``."""
    linear, diag = problem.vectorized.linearize(values)
    blocks = problem.vectorized.blocks
    R = marginal_r(linear, [keys.B()], {block: diag[blocks.start[block] : blocks.start[block] + size]
                                        for block, size in blocks.size.items()})
    return covariance_of_r(R)


def test_user_prior_on_a_parameter_combination_and_a_gtsam_prior_fuse_like_gaussians(plain) -> None:
    """A factor type of the user's (a prior on J + c b) and gtsam.PriorFactorVector on P() in one calibration:
    the combination holds to within its prior's sigma, its std shrinks to about that sigma, and estimate and
    covariance are those of the plain calibration fused with both priors (information form).

    Two informations of the data enter: the covariance's is the plain calibration's (the readings and impulses at
    their estimated sigmas, 3.22-3.23); the estimate's is that of the objective it minimizes (impulses at 1/sqrt(w)
    of the readings' sigma): the parameter marginal of the plain problem's graph (unit reading sigma) times
    sigma_y^2."""
    model, log, start, base = plain
    x0 = np.array([p.value for p in base.parameters])
    c0 = base.covariance
    std0 = np.sqrt(np.diag(c0))
    a = np.array([1.0, x0[0] / x0[1]])  # both terms of the same size
    s_comb = float(np.sqrt(a @ c0 @ a))
    sigma_tight = 0.05 * s_comb
    target = float(a @ x0) + 2.0 * s_comb  # two of the data's stds away: the prior must pull
    # GTSAM's own factor: a prior on b alone, one std of the data away, with the data's sigma.
    b_prior = x0[1] - std0[1]
    gtsam_prior = gtsam.PriorFactorVector(keys.P(), np.array([x0[0], b_prior]),
                                          gtsam.noiseModel.Diagonal.Sigmas(np.array([1e3 * x0[0], std0[1]])))
    tight = UserFactors(combination, lambda k: [keys.P()], gtsam.noiseModel.Isotropic.Sigma(1, sigma_tight),
                        constants=(a, np.array(target)), steps=[0])
    result = calibrate(start, log, free=FREE, lm=TIGHT, factors=[tight, gtsam_prior])
    assert result.converged
    x1 = np.array([p.value for p in result.parameters])
    priors = [(a[None, :], np.array([target]), np.array([sigma_tight])),
              (np.eye(2), np.array([x0[0], b_prior]), np.array([1e3 * x0[0], std0[1]]))]
    _, cov = _fused(x0, c0, priors)
    objective = _objective_covariance(base.problem, base.solution)
    expected, _ = _fused(x0, base.sigma_observation**2 * objective, priors)
    print(f"\nplain {x0} +- {std0}\nwith the priors {x1} +- {np.sqrt(np.diag(result.covariance))}\n"
          f"fused {expected} +- {np.sqrt(np.diag(cov))}")
    std_comb = float(np.sqrt(a @ result.covariance @ a))
    print(f"combination: target {target:.6g} sigma {sigma_tight:.3g}; estimate {a @ x1:.6g} std {std_comb:.3g}"
          f" (data alone {s_comb:.3g})")
    assert abs(a @ x1 - target) < sigma_tight
    assert std_comb == pytest.approx(float(np.sqrt(a @ cov @ a)), rel=0.05)
    assert std_comb < 1.05 * sigma_tight
    off = np.abs(x1 - expected) / np.sqrt(np.diag(cov))
    print(f"estimate - fused, in stds: {off}")
    assert np.all(off < 0.1), off
    np.testing.assert_allclose(np.sqrt(np.diag(result.covariance)), np.sqrt(np.diag(cov)), rtol=0.05)


def test_loose_user_prior_leaves_the_plain_calibration(plain) -> None:
    """A prior on the combination 1000 times wider than the data's std moves nothing: the estimate is the plain
    calibration's to within 1 % of its std, and so are the stds."""
    model, log, start, base = plain
    x0 = np.array([p.value for p in base.parameters])
    std0 = np.sqrt(np.diag(base.covariance))
    a = np.array([1.0, x0[0] / x0[1]])
    s_comb = float(np.sqrt(a @ base.covariance @ a))
    loose = UserFactors(combination, lambda k: [keys.P()], gtsam.noiseModel.Isotropic.Sigma(1, 1e3 * s_comb),
                        constants=(a, np.array(float(a @ x0) + s_comb)), steps=[0])
    result = calibrate(start, log, free=FREE, lm=TIGHT, factors=[loose])
    x1 = np.array([p.value for p in result.parameters])
    off = np.abs(x1 - x0) / std0
    print(f"\nloose prior: estimate - plain, in stds: {off}")
    assert np.all(off < 0.01), off
    np.testing.assert_allclose(np.sqrt(np.diag(result.covariance)), std0, rtol=0.01)


def test_per_step_user_factor_rows_are_one_vectorized_group_and_its_cost_is_labelled(plain) -> None:
    """A UserFactors over every time-step with a per-step constant is one group of the batch solver (not N
    factors left to GTSAM); its residual at the states is the per-step formula; cross-validation takes it."""
    model, log, _, _ = plain

    @factor_type(name="test_velocity_reading")
    def velocity(v: VectorVar, omega_y: jax.Array) -> jax.Array:
        """(1,): body 0's angular velocity about its body y axis (the hinge's) [rad/s] minus a reading."""
        return v[4:5] - omega_y

    readings = np.full(len(log.t), 0.25)
    spec = UserFactors(velocity, lambda k: [keys.V(k)], gtsam.noiseModel.Isotropic.Sigma(1, 0.1),
                       constants=(lambda k: readings[k : k + 1],))
    problem = build_joint_problem(model, log, free=FREE, factors=[spec])
    assert problem.vectorized is not None
    groups = [g for g in problem.vectorized.groups if g.ft is velocity]
    assert len(groups) == 1 and len(groups[0]) == problem.n
    # Only the initial-state factor is left to GTSAM (as without user factors).
    assert problem.vectorized.others.size() == 1
    omega = np.array([problem.initial.atVector(keys.V(k))[4] for k in range(problem.n)])
    np.testing.assert_allclose(problem.step_costs(problem.initial)["user"], ((omega - 0.25) / 0.1) ** 2, rtol=1e-9)
    score, result = cross_validation(model, log, model.parameters.numpy_values(), free=FREE, factors=[spec])
    assert np.isfinite(score) and score > 0


def test_a_user_factor_on_a_key_the_problem_lacks_is_named(plain) -> None:
    model, log, _, _ = plain
    past = UserFactors(combination, lambda k: [keys.P()], gtsam.noiseModel.Isotropic.Sigma(1, 1.0),
                       constants=(np.ones(2), np.array(0.0)), steps=[0])
    with pytest.raises(ModelError, match=r"'test_parameter_combination' at step 0: key p0 \(parameters\)"):
        build_joint_problem(model, log, free=[], factors=[past])
    stray = gtsam.PriorFactorVector(keys.V(100000), np.zeros(6), gtsam.noiseModel.Isotropic.Sigma(6, 1.0))
    with pytest.raises(ModelError, match=r"factors\[1\] \(PriorFactorVector\): key v100000"):
        build_joint_problem(model, log, free=FREE, factors=[past, stray])
    with pytest.raises(ModelError, match="step 9999 is outside"):
        build_joint_problem(model, log, free=FREE, factors=[UserFactors(
            combination, lambda k: [keys.P()], gtsam.noiseModel.Isotropic.Sigma(1, 1.0),
            constants=(np.ones(2), np.array(0.0)), steps=[9999])])
    with pytest.raises(ModelError, match=r"factors\[0\]: expected a UserFactors or a gtsam.NonlinearFactor"):
        build_joint_problem(model, log, free=FREE, factors=["prior"])
