"""Joint state-parameter estimation over a log (Marklund et al. (2025) sections 3.1-3.3, Marklund et al. (2025) sections 3.4-4.5).

The graph over states x_0 .. x_{n-1} at time-step h (a whole multiple of the
log's sample period) and the free parameters chi:

- one initial-state factor on x_0 (3.14-3.15),
- one impulse factor per step k -> k+1 (3.6-3.7) with the logged control u_k,
- one observation factor per state (3.5) with the reading logged at t_k
  (readings between state times are not used; empty cells are skipped),
- optional priors on parameters, and, when the tilt is free, a prior on its
  rotation about the vertical, which gravity cannot observe.

Weights (how the state error weight enters): the objective is

    sum_k |Delta y_k|^2  +  w * sum_k |Delta p_k|^2

i.e. R = I for the observations and Omega = I / w for the impulse residuals
(and the initial-state residual) of 3.17: in GTSAM the observation factors
have unit sigma and the impulse factors sigma 1/sqrt(w). ``cost`` everywhere
is this objective divided by the number of time-steps (Marklund et al. (2025) section 4.5:
"mean squared errors, the squared residuals divided by the number of time-steps").

Initialization (Marklund et al. (2025) section 4.4): the readings low-pass filtered, configurations
placed through the joints at the filtered angles, velocities by finite differences
(:mod:`mbfg.graphs.initialization`).

A model with dry friction gets one more initialization stage (ours, not the
seed's): :func:`smooth_initial_states`. The states above carry no joint forces,
since a compliant hinge carries its force through a small deflection and the
states have none. With the hinge rows as equality rows, finding the deflections
is a linear problem that one Gauss-Newton step solves; with dry friction the rows
are complementarity pairs and the LM crawled through their kinks instead.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import replace
from typing import Any

import gtsam
import numpy as np

from mbfg import keys
from mbfg.adapter import FactorGroup, PerFactor, noise_model
from mbfg.errors import DataError, ModelError
from mbfg.factors._rigid import Variables, fixed_values, trajectory_values, variables_for
from mbfg.factors.impulse import impulse_keys, impulse_type
from mbfg.factors.initial_state import initial_state_factor
from mbfg.factors.observation import observation_keys, observation_type
from mbfg.factors.prior import partial_prior_factor, tilt_yaw_prior_factor
from mbfg.graph_builder import GraphBuilder
from mbfg.graphs.initialization import butterworth2, filtered_observations, filtfilt, initial_states
from mbfg.graphs.joint_problem import JointProblem
from mbfg.graphs.user_factors import UserFactors, add_user_factors
from mbfg.lm_config import LMConfig
from mbfg.logs import Log, grid_period, round_time, sample_period
from mbfg.rigid import RigidModel, State
from mbfg.solvers import LMResult, bounded_levenberg_marquardt
from mbfg.vectorized import Blocks, VectorizedGraph

#: Default cut-off of the initialization low-pass filter [Hz] (the paper's value is stripped).
DEFAULT_CUTOFF_HZ = 20.0
#: LM iterations of :func:`smooth_initial_states` for a model with dry friction (0: skip that stage).
SMOOTH_START_ITERATIONS = 3
#: The LM options of :func:`smooth_initial_states` (:func:`build_joint_problem`'s default ``smooth_start``).
SMOOTH_START = LMConfig(max_iterations=SMOOTH_START_ITERATIONS)


def time_step(log: Log, h: float | None) -> tuple[float, int]:
    """(h, stride) of an estimation over ``log``: h [s] a whole multiple ``stride`` of the log's (uniform)
    sample period, the period if ``h`` is None.

    h is the stride times the period rounded to the period's decimals (:func:`mbfg.logs.sample_period`,
    :func:`mbfg.logs.round_time`): 0.001 for a 1 kHz log, not the median difference of its times
    0.0010000000000000009, so that the h a calibration reports is the one written in the log.

    Raises:
        DataError: a log of fewer than 3 rows, a non-uniform sample period (naming the row), rows off the
            uniform grid by more than :data:`mbfg.logs.SNAP_TOLERANCE` of the period (their count), an h that is
            not a whole multiple of the period.
    """
    if len(log.t) < 3:
        raise DataError(f"{log.source}: a log needs at least 3 rows, got {len(log.t)}")
    dt = np.diff(log.t)
    period = sample_period(log.t)
    bad = np.flatnonzero(np.abs(dt - period) > 0.01 * period)
    if bad.size:
        raise DataError(
            f"{log.source}: sample period is not uniform: row {bad[0] + 2} is {dt[bad[0]]:.6g} s after the "
            f"previous one, the median period is {period:.6g} s (resample it onto a uniform grid first)"
        )
    period = grid_period(log)  # jitter within mbfg.logs.SNAP_TOLERANCE: the grid's period; beyond it refused
    if h is None:
        return period, 1
    stride = int(round(h / period))
    if stride < 1 or abs(stride * period - h) > 1e-6 * h:
        raise DataError(f"time-step h = {h} s must be a whole multiple of the log's sample period {period:.6g} s")
    return round_time(stride, period), stride


def _check_log(model: RigidModel, log: Log) -> None:
    if tuple(log.observations) != tuple(model.observations):
        raise DataError(
            f"{log.source}: observation columns {list(log.observations)} do not match the model "
            f"{model.name!r}, which observes {list(model.observations)}"
        )
    if tuple(log.controls) != tuple(model.controls):
        raise DataError(
            f"{log.source}: control columns {list(log.controls)} do not match the model {model.name!r}, "
            f"which is driven by {list(model.controls)}"
        )
    hinge = model.angle_observation_mask()
    for j in np.flatnonzero(hinge):
        col = log.y[:, j]
        ok = np.flatnonzero(np.isfinite(col))
        jumps = np.abs(np.diff(col[ok]))
        if jumps.size and jumps.max() > np.pi:
            i = int(np.argmax(jumps))
            raise DataError(
                f"{log.source}: column {log.observations[j]!r} jumps by {jumps[i]:.4g} rad between rows "
                f"{ok[i] + 1} and {ok[i + 1] + 1}; an angle cannot move more than pi between two readings "
                f"(degrees instead of radians? encoder counts? a wrapped angle that should be unwrapped?)"
            )
    all_missing = np.flatnonzero(np.all(np.isnan(log.y), axis=0))
    if all_missing.size:
        raise DataError(f"{log.source}: column {log.observations[all_missing[0]]!r} has no reading at all")


def smooth_initial_states(
    model: RigidModel, log: Log, *, h: float | None = None, weight: float = 1e6,
    cutoff_hz: float = DEFAULT_CUTOFF_HZ, lm: LMConfig = SMOOTH_START, quiet: bool = False,
) -> tuple[list[State], LMResult]:
    """Initial states for a model with frictional joints (F.4): the states of its smooth twin, parameters fixed.

    The twin is :meth:`~mbfg.rigid.RigidModel.without_dry_friction` (every hinge
    row an equality row) at the same parameter values; its states are estimated
    from the section-4.4 initialization by ``iterations`` LM iterations with
    every parameter fixed (``lm``: the options of that LM, :class:`~mbfg.lm_config.LMConfig`; its
    ``max_iterations`` are the ``iterations``). What that buys, on a dry pendulum
    (``pytest -s tests/test_calibration.py -k smooth_start``): the dry model's
    impulse cost per time-step at the initial states falls from 34.5 to 5.6e-5
    after one twin iteration. From the section-4.4 states the LM on a dry model
    spent its first iterations at lambda 1 to 100.

    Returns (states, the twin's LM result).
    """
    twin = model.without_dry_friction()
    problem = build_joint_problem(twin, log, h=h, free=(), weight=weight, cutoff_hz=cutoff_hz)
    result = solve(problem, lm, quiet=quiet, label=f"initialize states {twin.name}")
    return problem.state_list(result.values), result


def build_joint_problem(
    model: RigidModel,
    log: Log,
    *,
    h: float | None = None,
    free: Sequence[str] | None = None,
    weight: float = 1e6,
    cutoff_hz: float = DEFAULT_CUTOFF_HZ,
    priors: Mapping[str, float] | None = None,
    initial_parameters: Mapping[str, Any] | None = None,
    states: Sequence[State] | None = None,
    sigmas: tuple[float, float] | None = None,
    smooth_start: LMConfig | None = SMOOTH_START,
    quiet: bool = False,
    hold: bool = False,
    factors: Sequence[UserFactors | gtsam.NonlinearFactor] = (),
) -> JointProblem:
    """The joint state-parameter problem of ``model`` over ``log`` (see the module docstring).

    Args:
        model: the rigid-body model; its parameter values are the initial guess.
        log: the log (:func:`mbfg.logs.read_log`); its columns must be the model's
            observations and controls, its sample period uniform.
        h: time-step [s], a whole multiple of the sample period (default: the period).
        free: parameters to estimate (default: those the model marks free; ``[]``
            for state estimation with fixed parameters). The tilt is a Rot3 variable.
        weight: the state error weight w (module docstring) [(reading unit)^2 / (impulse unit)^2: :func:`mbfg.roles.weight_unit`].
        cutoff_hz: cut-off of the initialization filter [Hz].
        priors: parameter name -> prior sigma [its unit], a prior at its initial value.
        initial_parameters: parameter values to start from (default: the model's).
        states: initial states (default: :func:`initial_states` of the filtered log, and
            for a model with dry friction then :func:`smooth_initial_states`).
        sigmas: (observation sigma, impulse sigma) instead of (1, 1/sqrt(weight)), used
            for the covariance with estimated noise variances (3.22-3.24).
        smooth_start: the LM options of :func:`smooth_initial_states` (:class:`~mbfg.lm_config.LMConfig`, its
            ``max_iterations`` the iterations; None: the section-4.4 states as they are); only for a model with
            dry friction and no ``states``.
        quiet: no progress lines from :func:`smooth_initial_states`.
        hold: the free scalar parameters stay variables but are held at their initial values
            (a box of zero width): state estimation with the factor types of a calibration over
            ``free``, whose compiled programs it shares (:func:`estimate_states`).
        factors: the user's own factors (:class:`~mbfg.graphs.user_factors.UserFactors` and plain GTSAM
            factors on the problem's keys, :mod:`mbfg.graphs.user_factors`), labelled ``"user"``; a user's
            factor type's rows join the vectorized batch solve as one group.

    Raises:
        DataError: columns that do not match the model, a non-uniform log, a bad h.
        ModelError: an unknown free parameter, a non-positive weight, a user's factor on a key the problem
            does not have (naming the key).
    """
    _check_log(model, log)
    user = (factors,) if isinstance(factors, (UserFactors, gtsam.NonlinearFactor)) else tuple(factors)
    if not (np.isfinite(weight) and weight > 0):
        raise ModelError(f"state error weight must be a positive number, got {weight}")
    if initial_parameters is not None:
        model = model.with_parameters(dict(initial_parameters))
    h, stride = time_step(log, h)
    variables = variables_for(model, free)
    idx = np.arange(0, len(log.t), stride)
    t, y, u = log.t[idx] - log.t[0], log.y[idx], log.u[idx]
    n = len(t)
    if n < 3:
        raise DataError(f"{log.source}: h = {h} s leaves {n} time-steps; at least 3 are needed")
    p0 = model.parameters.numpy_values()
    start: LMResult | None = None
    # Only frictional joint rows need it (F.4: the joint forces live in complementarity rows); the
    # twin of a Coulomb-only joint would just lose its friction force and start the states off it.
    if states is None and model.has_frictional_joint_rows and smooth_start is not None:
        states, start = smooth_initial_states(model, log, h=h, weight=weight, cutoff_hz=cutoff_hz,
                                              lm=smooth_start, quiet=quiet)
    if states is None:
        states = initial_states(model, filtered_observations(log.t, log.y, cutoff_hz)[idx], h, p0)
    fixed = fixed_values(model)
    sigma_y, sigma_p = sigmas if sigmas is not None else (1.0, 1.0 / np.sqrt(weight))

    builder = GraphBuilder()
    nb = model.nb
    impulse_noise = noise_model(sigma_p, 12 * nb)
    # The initial-state projection weighs like an impulse: step 0's share of the impulse cost.
    builder.add(initial_state_factor(variables, h, impulse_noise, fixed), label="impulse", step=0)
    builder.add_group(impulse_type(variables), [impulse_keys(variables, k) for k in range(n - 1)], impulse_noise,
                      fixed, PerFactor(u[:-1]), h, label="impulse", steps=range(1, n))
    observed = np.isfinite(y)
    obs_rows = [k for k in range(n) if observed[k].any()]
    mask = observed.astype(float)
    builder.add_group(observation_type(variables), [observation_keys(variables, k) for k in obs_rows],
                      noise_model(sigma_y, y.shape[1]), fixed, PerFactor(np.nan_to_num(y[obs_rows])),
                      PerFactor(mask[obs_rows]), label="observation", steps=obs_rows)

    values = gtsam.Values()
    poses, velocities = trajectory_values(model, states)  # all states at once: set-up is per state otherwise
    for k in range(len(states)):
        for i in range(nb):
            values.insert(keys.X(k, i), gtsam.Pose3(poses[k, i]))
        values.insert(keys.V(k), velocities[k])
    bounds: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    if variables.free:
        chi0 = np.array([p0[name] for name in variables.free], dtype=float)
        values.insert(keys.P(), chi0)
        lo = np.array([model.parameters[name].lower for name in variables.free])
        hi = np.array([model.parameters[name].upper for name in variables.free])
        bounds[keys.P()] = (chi0.copy(), chi0.copy()) if hold else (lo, hi)
        for name, sigma in (priors or {}).items():
            if name not in variables.free:
                raise ModelError(f"prior on {name!r}, which is not a free parameter ({', '.join(variables.free)})")
            i = variables.free.index(name)
            builder.add(partial_prior_factor(keys.P(), [i], [chi0[i]], sigma), label="prior")
    if variables.tilt_free:
        values.insert(keys.T(), gtsam.Rot3(np.asarray(p0[variables.tilt])))
        builder.add(tilt_yaw_prior_factor(keys.T(), np.asarray(p0[variables.tilt]), 1e-3), label="prior")
    add_user_factors(builder, user, n, values)
    vectorized = _vectorized(variables, n, builder.groups, builder.others, values)
    return JointProblem(model, variables, t, y, u, h, stride, weight, builder.graph, values, bounds, builder,
                        start, vectorized, user_factors=user)


def _vectorized(variables: Variables, n: int, groups: list[FactorGroup], others: gtsam.NonlinearFactorGraph,
                values: gtsam.Values) -> VectorizedGraph:
    """The problem for the vectorized LM: state k's poses and velocity form block S(k), the parameters
    block B(); states eliminated in time order, the parameters last."""
    nb = variables.model.nb
    zeros = values.zeroVectors()
    dims = {key: zeros.at(key).shape[0] for key in values.keys()}
    members: list[tuple[int, list[int]]] = [(keys.S(k), [keys.X(k, i) for i in range(nb)] + [keys.V(k)])
                                            for k in range(n)]
    order = [keys.S(k) for k in range(n)]
    parameters = keys.parameter_keys(variables)
    if parameters:
        members.append((keys.B(), parameters))
        order.append(keys.B())
    return VectorizedGraph([g for g in groups if len(g)], others, Blocks(members, dims), order)


#: The report of the innermost :func:`reporting_compiles` block, None outside one. A context variable, not an
#: argument: the CLI reports the solves inside :func:`mbfg.calibration.calibrate` without threading it through.
_COMPILE_REPORT: ContextVar[Callable[[str, float | None], None] | None] = ContextVar(
    "mbfg_compile_report", default=None)


@contextmanager
def reporting_compiles(report: Callable[[str, float | None], None]) -> Iterator[None]:
    """Within the block, every :func:`solve` compiles its problem's programs before the LM starts, calling
    ``report(label, None)`` before and ``report(label, seconds)`` after (label: the LM's progress label).

    On a first run JAX traces and compiles for seconds inside the LM's first iteration, which says nothing
    until it ends; a command can say "compiling ..." instead (``mbfg calibrate``, ``mbfg crossval``). The
    price is one evaluation of the residuals and Jacobians at the initial values, which the LM repeats.
    """
    token = _COMPILE_REPORT.set(report)
    try:
        yield
    finally:
        _COMPILE_REPORT.reset(token)


def _compile(problem: JointProblem) -> None:
    """Trace and compile (or load from the disk cache) every program the LM calls on ``problem``: the
    linearization and the error-only path its trial steps take."""
    if problem.vectorized is not None:
        problem.vectorized.linearize(problem.initial)
        problem.vectorized.error(problem.initial)
    else:
        problem.graph.linearize(problem.initial)
        problem.graph.error(problem.initial)


#: The default ``backtracking`` of :func:`mbfg.calibration.calibrate` and :func:`estimate_states` for a model with
#: contacts: halvings of a rejected LM step, down to 1/256 of it. Where a contact engages, the impulse residual
#: steepens a hundredfold, and the full step across that kink is rejected; the plain LM then damps it into a
#: short gradient step and creeps, or stops with states in the wrong contact mode.
CONTACT_BACKTRACKING = 8


def default_backtracking(model: RigidModel, backtracking: int | None) -> int:
    """``backtracking``, or where it is None, :data:`CONTACT_BACKTRACKING` for a model with contacts and 0 (the plain
    LM) for others: the default of :func:`mbfg.calibration.calibrate` and :func:`estimate_states`."""
    if backtracking is not None:
        return backtracking
    return CONTACT_BACKTRACKING if model.contacts else 0


def solve(problem: JointProblem, lm: LMConfig = LMConfig(), *, quiet: bool = False,
          label: str | None = None) -> LMResult:
    """Box-constrained Levenberg-Marquardt on the problem (:func:`mbfg.solvers.bounded_levenberg_marquardt` with
    the options ``lm``); inside :func:`reporting_compiles`, its programs are compiled first and the compile time
    reported."""
    label = label or f"calibrate {problem.model.name}"
    report = _COMPILE_REPORT.get()
    if report is not None:
        report(label, None)
        start = time.perf_counter()
        _compile(problem)
        report(label, time.perf_counter() - start)
    return bounded_levenberg_marquardt(
        problem.vectorized or problem.graph, problem.initial, problem.bounds, lm, quiet=quiet, label=label)


#: :func:`estimate_states`'s default iteration limit. The DFKI rig's held-out recording (2 s at h = 4 ms) takes 25
#: to 36 iterations to converge from the readings, scored with the lab's or the calibrated parameters.
STATE_ESTIMATION_ITERATIONS = 50


def state_estimation_lm(model: RigidModel, **changes: Any) -> LMConfig:
    """:func:`estimate_states`'s default LM options for ``model``: :data:`STATE_ESTIMATION_ITERATIONS` iterations
    at most, and :data:`CONTACT_BACKTRACKING` halvings of a rejected step for a model with contacts (0 for others,
    the plain LM), as :func:`mbfg.calibration.calibrate` takes them; ``changes``: fields that differ, e.g.
    ``state_estimation_lm(model, max_iterations=10)``."""
    default = LMConfig(max_iterations=STATE_ESTIMATION_ITERATIONS, backtracking=default_backtracking(model, None))
    return replace(default, **changes)


def estimate_states(model: RigidModel, log: Log, *, h: float | None = None, weight: float = 1e6,
                    parameters: Mapping[str, Any] | None = None, lm: LMConfig | None = None,
                    quiet: bool = True, cutoff_hz: float = DEFAULT_CUTOFF_HZ, free: Sequence[str] = (),
                    factors: Sequence[UserFactors | gtsam.NonlinearFactor] = (),
                    sigmas: tuple[float, float] | None = None) -> tuple[JointProblem, LMResult]:
    """State estimation with every parameter fixed (Marklund et al. (2025) section 4.5's cross-validation).

    ``lm``: the LM's options (:class:`~mbfg.lm_config.LMConfig`); None: :func:`state_estimation_lm` of the model.

    ``free``: the parameters a calibration estimated (e.g. the one that produced ``parameters``). They
    are then variables held at their values (``build_joint_problem(hold=True)``), so that the problem
    has that calibration's factor types and runs on its compiled programs instead of compiling its own
    (the same score: the residuals see the same values). A free tilt is held as a constant.

    ``factors``: the user's own factors (:mod:`mbfg.graphs.user_factors`), e.g. those of the calibration; they
    join the state estimation, and :func:`cross_validation`'s score counts their cost too. Their noise models are
    in their residuals' units, so give ``sigmas``, the (readings', impulses') noise sigmas (a calibration's
    ``sigma_y``, ``sigma_p``), for them to weigh against the data as stated; without, the readings weigh at unit
    sigma and the impulses at 1/sqrt(weight) (the objective, module docstring), and the score is in those units."""
    held = [name for name in free if name != model.tilt]
    problem = build_joint_problem(model, log, h=h, free=held, weight=weight, cutoff_hz=cutoff_hz,
                                  initial_parameters=parameters, hold=True, factors=factors,
                                  sigmas=sigmas)
    return problem, solve(problem, state_estimation_lm(model) if lm is None else lm, quiet=quiet,
                          label=f"states {model.name}")


def cross_validation(model: RigidModel, log: Log, parameters: Mapping[str, Any], **kwargs: Any
                     ) -> tuple[float, LMResult]:
    """Marklund et al. (2025) section 4.5: the cost per time-step of state estimation on ``log`` with ``parameters`` fixed
    (``kwargs``: :func:`estimate_states`'s), and that state estimation's solve (its ``converged``: a score of
    an unconverged one is above the minimum's)."""
    problem, result = estimate_states(model, log, parameters=parameters, **kwargs)
    return 2.0 * problem.graph.error(result.values) / problem.n, result


def cross_validation_score(model: RigidModel, log: Log, parameters: Mapping[str, Any], **kwargs: Any) -> float:
    """:func:`cross_validation`'s score, with a :class:`UserWarning` where its state estimation stopped
    unconverged."""
    score, result = cross_validation(model, log, parameters, **kwargs)
    if not result.converged:
        warnings.warn(not_converged_message(log, result), stacklevel=2)
    return score


def not_converged_message(log: Log, result: LMResult, limit: str = "LMConfig.max_iterations") -> str:
    """What a cross-validation says when its state estimation ``result`` on ``log`` stopped unconverged;
    ``limit``: the name of the iteration limit where the caller reads it (a keyword, a command-line option)."""
    if result.status == "failed":
        return (f"cross-validation on {log.source!r}: the state estimation failed after {result.iterations} "
                f"iterations ({result.message}), so the score is not a minimum's")
    return (f"cross-validation on {log.source!r}: the state estimation did not converge in {result.iterations} "
            f"iterations ({result.message}), so the score is above its minimum's; raise {limit}")


__all__ = [
    "CONTACT_BACKTRACKING",
    "JointProblem",
    "build_joint_problem",
    "butterworth2",
    "cross_validation",
    "cross_validation_score",
    "default_backtracking",
    "estimate_states",
    "filtered_observations",
    "filtfilt",
    "initial_states",
    "reporting_compiles",
    "smooth_initial_states",
    "solve",
    "state_estimation_lm",
    "time_step",
]
