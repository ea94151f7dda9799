"""Batch calibration of a rigid-body model from a log, with the results a calibrating engineer reads.

:func:`calibrate` builds the joint state-parameter problem
(:func:`mbfg.graphs.joint.build_joint_problem`), solves it with box-constrained
Levenberg-Marquardt, and returns a :class:`CalibrationResult`: the parameters
with linearized standard deviations, the per-step cost, flags for parameters
the data does not excite, a simulation of the identified model against the
log (Marklund et al. (2025) Figure 5), and the cross-validation score on another log
(section 4.5). Results convert to a pandas DataFrame and to JSON.

Standard deviations (Marklund et al. (2025) section 3.7): the noise variances of the
observations and of the impulses are estimated from the residuals at the
solution (3.22-3.23, ``sum r^2 / (N - 1)``); with those as the weights, the
parameter covariance is the parameter block of the inverse of J^T W J at the
solution (what 3.25-3.28 compute by variable projection), taken from GTSAM's
marginals (:mod:`mbfg.covariance`). A parameter whose standard deviation exceeds its value is flagged
as not excited (section 4.6). Parameter priors are left out of this covariance
on purpose: the standard deviations say what the data determine, so a
parameter that only its prior holds is still flagged. The user's own factors (``factors``) are in it.
"""

from __future__ import annotations

import json
import os
import time
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import gtsam
import numpy as np

from mbfg import identifiability as ident
from mbfg import keys
from mbfg.calibration_arguments import check_calibrate_arguments
from mbfg.calibration_options import CalibrationOptions, calibration_lm
from mbfg.covariance import covariance_of_r, marginal_r
from mbfg.errors import MbfgError
from mbfg.graphs.restarts import joint_compliances
from mbfg.lm_config import LMConfig
from mbfg.logs import Log
from mbfg.parameters import ROTATION
from mbfg.rigid import RigidModel
from mbfg.roles import noise_units, unit_fields, weight_unit
from mbfg.solvers import STATUSES, LMResult, Status, status_words

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

    from mbfg.graphs.user_factors import UserFactors
    from mbfg.spook import Trajectory



@dataclass(frozen=True)
class ParameterEstimate:
    """One identified parameter (a tilt contributes three, its rotation vector components [rad])."""

    name: str
    value: float
    std: float
    unit: str
    lower: float
    upper: float
    #: estimated error of ``value`` from the discrete model (:func:`discretization_bias`), NaN if not estimated
    bias: float = float("nan")

    @property
    def biased(self) -> bool:
        """The estimated bias exceeds the standard deviation: the error is the model's, not the noise's."""
        return bool(np.isfinite(self.bias) and abs(self.bias) > self.std)

    @property
    def excited(self) -> bool:
        """False when the data cannot tell the value from zero: std > |value| (Marklund et al. (2025) section 4.6)."""
        return bool(np.isfinite(self.std) and self.std <= abs(self.value))

    @property
    def at_bound(self) -> bool:
        """The value sits on its lower or upper bound: a constrained optimum, where the linearized
        std (which assumes the minimum is interior) does not describe the uncertainty."""
        return bool(self.value <= self.lower or self.value >= self.upper)


@dataclass
class CalibrationResult:
    """What :func:`calibrate` found.

    model: the model with the identified parameters; parameters: the estimates
    (free ones); covariance: their covariance, in the order of ``parameters``;
    singular_values: of the covariance relative to the values,
    ``diag(1/|value|) C diag(1/|value|)`` (unit-free; a large one marks a
    combination the data does not determine); cost: objective per time-step
    (``sum |Delta y|^2 + w sum |Delta p|^2`` with the priors' and user factors' squared whitened residuals, divided
    by n); cost_observation, cost_impulse: its two main parts; per_step_cost: (n,); sigma_observation,
    sigma_impulse: the estimated noise standard deviations (3.22-3.23);
    iterations, status, wall_s, history: of the LM solve (wall_s: all of
    calibrate; status: "converged", "not_converged" or "failed", :mod:`mbfg.solvers`; ``converged`` is True
    only for "converged"; message: the solver's reason); start_iterations: LM iterations of the states-only
    initialization of a model with dry friction (:func:`mbfg.graphs.joint.smooth_initial_states`), 0 without;
    bias_parts: with ``CalibrationOptions(bias=True)``, the two parts of each parameter's bias estimate,
    ``{"h": {name: ...}, "compliance": {name: ...}}`` (:func:`discretization_bias`), else empty;
    information: (n_p, n_p) the parameters' information matrix (``R^T R``, finite where a direction is
    undetermined), from which :mod:`mbfg.identifiability` finds the combinations the data determine.
    """

    model: RigidModel
    parameters: list[ParameterEstimate]
    covariance: np.ndarray
    singular_values: np.ndarray
    cost: float
    cost_observation: float
    cost_impulse: float
    per_step_cost: np.ndarray
    sigma_observation: float
    sigma_impulse: float
    iterations: int
    status: Status
    wall_s: float
    h: float
    weight: float
    history: list[dict[str, float]] = field(default_factory=list)
    bias_parts: dict[str, dict[str, float]] = field(default_factory=dict)
    problem: Any = field(default=None, repr=False)
    solution: Any = field(default=None, repr=False)
    information: np.ndarray | None = field(default=None, repr=False)
    message: str = ""

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise MbfgError(f"CalibrationResult status must be one of {STATUSES}, got {self.status!r}")

    @property
    def converged(self) -> bool:
        """True only for status "converged" (:mod:`mbfg.solvers`)."""
        return self.status == "converged"

    @property
    def outcome(self) -> str:
        """The solve's outcome in words: "converged", "NOT converged (reason)" or "FAILED (reason)"."""
        return status_words(self.status, self.message)

    @property
    def start_iterations(self) -> int:
        start = getattr(self.problem, "smooth_start", None)
        return start.iterations if start is not None else 0

    @property
    def values(self) -> dict[str, float]:
        """name -> identified value."""
        return {p.name: p.value for p in self.parameters}

    @property
    def not_excited(self) -> list[str]:
        """Names of the parameters whose standard deviation exceeds their value (infinite where the data leave
        them undetermined); a parameter without a standard deviation (``covariance=False``) is not judged."""
        return [p.name for p in self.parameters if not p.excited and not np.isnan(p.std)]

    @property
    def at_bound(self) -> list[str]:
        """Names of the parameters that ended on a bound of their box (their std is not meaningful)."""
        return [p.name for p in self.parameters if p.at_bound]

    @property
    def biased(self) -> list[str]:
        """Names of the parameters whose estimated bias exceeds their std (``CalibrationOptions(bias=True)``)."""
        return [p.name for p in self.parameters if p.biased]

    def combinations(self, threshold: float = 1.0) -> list[ident.Combination]:
        """The parameter combinations the data determine and those they leave free
        (:func:`mbfg.identifiability.result_combinations`)."""
        return ident.result_combinations(self, threshold=threshold)

    @property
    def not_determined(self) -> list[str]:
        """Labels of the combinations the data do not determine (the not-excited flag, by combination)."""
        return [c.label for c in self.combinations() if not c.determined]

    def base_parameters(self, fix: Mapping[str, ident.FixedValue] | None = None) -> ident.BaseParameters:
        """The determined combinations as base parameters, mapped back to named parameters with ``fix``
        held (:func:`mbfg.identifiability.base_parameters`)."""
        return ident.base_parameters(self, fix)

    def to_dataframe(self) -> pd.DataFrame:
        """pandas DataFrame indexed by parameter: value, std, bias, unit, lower, upper, excited, at_bound,
        biased (bias NaN unless ``CalibrationOptions(bias=True)``); ``attrs``: "combinations" and "base", DataFrames
        (:func:`mbfg.identifiability.combinations_dataframe`) of the directions and of the determined ones as
        base parameters, and "not_determined", the labels of the others."""
        import pandas as pd

        rows = [dict(name=p.name, value=p.value, std=p.std, bias=p.bias, unit=p.unit, lower=p.lower, upper=p.upper,
                     excited=p.excited, at_bound=p.at_bound, biased=p.biased) for p in self.parameters]
        frame = pd.DataFrame(rows).set_index("name")
        combos = self.combinations() if self.parameters else []
        frame.attrs["combinations"] = ident.combinations_dataframe(combos)
        frame.attrs["base"] = ident.combinations_dataframe(ident.base_parameters(combos).base if combos else [])
        frame.attrs["not_determined"] = [c.label for c in combos if not c.determined]
        return frame

    def to_dict(self) -> dict[str, Any]:
        """The JSON object of ``mbfg calibrate --json``; a tilt is its rotation vector (3,) [rad]."""
        params: dict[str, Any] = {}
        for p in self.parameters:
            base, _, comp = p.name.partition("[")
            if comp:  # tilt[x] / tilt[y] / tilt[z] -> one entry with 3-vectors
                entry = params.setdefault(base, {"value": [], "std": [], "unit": "rad (rotation vector)"})
                entry["value"].append(p.value)
                entry["std"].append(p.std)
                if self.bias_parts:
                    entry.setdefault("bias", []).append(p.bias)
            else:
                params[p.name] = {"value": p.value, "std": p.std, "unit": p.unit, "lower": _finite(p.lower),
                                  "upper": _finite(p.upper), "excited": p.excited, "at_bound": p.at_bound}
                if self.bias_parts:
                    params[p.name] |= {"bias": p.bias, "biased": p.biased}
        # The parameters held at their given values, so that the file alone is the whole model
        # (crossval, smooth and simulate read it; parameters.result_changes).
        from scipy.spatial.transform import Rotation

        fixed: dict[str, Any] = {}
        combos = self.combinations() if self.parameters else []
        for name, par in self.model.parameters.items():
            if name in params:
                continue
            if par.kind == ROTATION:
                rotvec = Rotation.from_matrix(np.asarray(par.default)).as_rotvec()
                fixed[name] = {"value": [float(x) for x in rotvec], "unit": "rad (rotation vector)"}
            else:
                fixed[name] = {"value": float(par.default), "unit": par.unit, "lower": _finite(par.lower),
                               "upper": _finite(par.upper)}
        return {
            "model": self.model.name,
            "parameters": params,
            "fixed": fixed,
            "cost": self.cost,
            "cost_observation": self.cost_observation,
            "cost_impulse": self.cost_impulse,
            "iterations": self.iterations,
            "start_iterations": self.start_iterations,
            "converged": self.converged,
            "status": self.status,
            "message": self.message,
            "wall_s": self.wall_s,
            "h": self.h,
            **({"period": self.problem.period} if self.problem is not None else {}),
            "weight": self.weight,
            "sigma_observation": self.sigma_observation,
            "sigma_impulse": self.sigma_impulse,
            **unit_fields(self.model),
            "singular_values": [float(s) for s in self.singular_values],
            "not_excited": self.not_excited,
            "at_bound": self.at_bound,
        } | ident.combinations_json(combos) | (
            {"biased": self.biased, "bias_parts": self.bias_parts, "bias_method": BIAS_METHOD} if self.bias_parts
            else {})

    def to_json(self, **kwargs: Any) -> str:
        return json.dumps(self.to_dict(), **kwargs)

    def table(self) -> str:
        """A printable table of the parameters and the cost."""
        with_bias = bool(self.bias_parts)
        lines = [f"{'parameter':<12} {'value':>13} {'std':>11} " + (f"{'bias':>11} " if with_bias else "")
                 + f"{'unit':<12} {'bounds':<24}"]
        for p in self.parameters:
            bounds = f"[{p.lower:.3g}, {p.upper:.3g}]"
            flag = "  std not computed" if np.isnan(p.std) else "" if p.excited else "  not excited (std > |value|)"
            flag += "  at its bound (std not meaningful)" if p.at_bound else ""
            flag += "  biased (|bias| > std)" if p.biased else ""
            bias = f"{p.bias:>11.3g} " if with_bias else ""
            lines.append(f"{p.name:<12} {p.value:>13.6g} {p.std:>11.3g} {bias}{p.unit:<12} {bounds:<24}{flag}")
        lines += ident.combinations_table(self.combinations()) if self.parameters else []
        lines.append(
            f"cost {self.cost:.4g} per step (observation {self.cost_observation:.4g}, impulse {self.cost_impulse:.4g}); "
            f"reading noise sigma_y {self.sigma_observation:.3g} {noise_units(self.model)[0]}, w {self.weight:g} "
            f"{weight_unit(self.model)}; "
            f"{self.iterations} LM iterations, {self.outcome}, "
            + (f"after {self.start_iterations} states-only ones, " if self.start_iterations else "")
            + (f"{restarted.iterations} of them before the restart from a free simulation, "
               if (restarted := getattr(self.problem, "restarted_from", None)) is not None else "")
            + (f"{soft.iterations} of them with softer joints, "
               if (soft := getattr(self.problem, "softened_from", None)) is not None else "")
            + f"{self.wall_s:.1f} s"
        )
        return "\n".join(lines)

    def simulate(self, log: Log | None = None) -> tuple[Trajectory, dict[str, float]]:
        """Simulate the identified model from the estimated x_0 with the log's controls (Marklund et al. (2025) Figure 5).

        Returns (trajectory, rmse) where rmse maps each observation to the RMS of
        (simulated - logged) over the logged readings at the state times.
        """
        traj = self.problem.free_simulation(self.solution, self.model)
        diff = self.problem.simulation_residuals(traj)
        rmse = {}
        for i, name in enumerate(self.model.observations):
            ok = np.isfinite(diff[:, i])
            rmse[name] = float(np.sqrt(np.mean(diff[ok, i] ** 2)))
        return traj, rmse

    def plot(self, log: Log | None = None, path: str | os.PathLike[str] | None = None) -> Figure:
        """A figure of the calibration (:func:`mbfg.plots.calibration_figure`): per observation the log and
        the estimated states' observation against t [s] and the residual (log - estimated) [rad, m]; the
        per-step cost (n,); each free parameter's value / |value| with +-1 std / |value| error bars,
        not excited and at-bound ones marked.

        Args:
            log: the calibration's log, drawn at its own rate (default: its readings at the state times,
                kept in the result); another log raises :class:`~mbfg.errors.DataError`.
            path: also write the figure there (format from the extension, e.g. ``fit.png``).

        Returns the matplotlib Figure. Needs matplotlib (``pip install 'mbfg[plot]'``; else
        :class:`~mbfg.errors.MbfgError`).
        """
        from mbfg.plots import calibration_figure

        return calibration_figure(self, log, path)

    def cross_validate(self, log: Log, **kwargs: Any) -> float:
        """Cross-validation score on another log (section 4.5): state estimation with these parameters fixed,
        cost per time-step."""
        from mbfg.graphs.joint import cross_validation_score

        free = self.problem.variables.free if self.problem is not None else ()  # its compiled programs reused
        return cross_validation_score(self.model, log, self.model.parameters.numpy_values(), h=self.h,
                                      weight=self.weight, **({"free": free} | kwargs))


def _finite(x: float) -> float | None:
    return float(x) if np.isfinite(x) else None


def calibrate(
    model: RigidModel,
    log: Log,
    *,
    free: Sequence[str] | None = None,
    h: float | None = None,
    weight: float | None = None,
    priors: Mapping[str, float] | None = None,
    factors: Sequence[UserFactors | gtsam.NonlinearFactor] = (),
    cutoff_hz: float | None = None,
    lm: LMConfig | None = None,
    options: CalibrationOptions = CalibrationOptions(),
) -> CalibrationResult:
    """Identify the free parameters of ``model`` (and the states) from ``log``.

    The problem is given by keywords; how it is solved by two frozen objects (:mod:`mbfg.calibration_options`):
    ``lm``, the Levenberg-Marquardt's options, and ``options``, the workflow's. Change one field with
    ``dataclasses.replace(calibration_lm(model), max_iterations=50)``.

    Args:
        model: the model; its parameter values are the initial guess, its bounds the box B.
        log: the log (columns: the model's observations and controls, uniform sampling).
        free: the parameters to identify (default: those the model marks free).
        h: time-step [s], a multiple of the log's sample period (default: the period).
        weight: the state error weight w (see :mod:`mbfg.graphs.joint`; default the model's,
            ``model.weight``: 1e6, or 1e3 for ``dfki-double-pendulum``, a real rig's model).
        priors: parameter -> prior sigma at its initial value.
        factors: the user's own factors in the joint problem (:mod:`mbfg.graphs.user_factors`):
            :class:`~mbfg.graphs.user_factors.UserFactors` (a ``@factor_type`` of the user's over ``keys.X(k, i)``,
            ``keys.V(k)``, ``keys.P()`` (the free parameters in ``free``'s order), ``keys.T()``; a function step ->
            keys, constants per step, a noise model; vectorized like the built-in factors) and plain GTSAM factors
            on those keys. Their noise models are in their residuals' units: after the first solve the problem is
            solved again with the objective in the readings' units (their sigma estimated, 3.22), so that the
            user's factors weigh against the readings as stated. They are in the cost and in the covariance (a
            user's prior on a parameter combination narrows its std, unlike ``priors``).
        cutoff_hz: initialization filter cut-off [Hz] (default :data:`~mbfg.graphs.joint.DEFAULT_CUTOFF_HZ`).
        lm: the LM's options (:class:`~mbfg.lm_config.LMConfig`) in every solve of the calibration; its
            ``damping_update`` that of the states-only start too. None: :func:`calibration_lm` of the model (20
            iterations, ``relative_tol`` 1e-3, backtracking for a model with contacts).
        options: the workflow (:class:`CalibrationOptions`): the states-only start, a softer first solve or a
            restart from free simulations, the bias estimate, the covariance.

    Progress lines are INFO records of the ``mbfg.progress`` logger (:mod:`mbfg.progress`).

    Raises:
        ModelError: an argument of the wrong type or out of its range (``free`` as one string, an unknown parameter,
            a non-positive weight, a user's factor on a key the problem lacks ...), named in the message.
        DataError: ``log`` is not a :class:`~mbfg.logs.Log`, or its columns or times do not fit the model.
    """
    from mbfg.graphs.joint import DEFAULT_CUTOFF_HZ, SMOOTH_START_ITERATIONS, build_joint_problem, solve
    from mbfg.graphs.restarts import (
        RESTART_LAMBDA_INITIAL,
        restarts_from_simulations,
        softened,
        stiffen,
        weighed_by_noise,
    )

    start = time.perf_counter()
    free = check_calibrate_arguments(model, log, free, h, weight, priors, cutoff_hz, lm, options)
    weight = model.weight if weight is None else weight
    lm = calibration_lm(model) if lm is None else lm
    soft_start = options.soft_start
    smooth = SMOOTH_START_ITERATIONS if options.smooth_start is None else options.smooth_start
    problem = build_joint_problem(softened(model, soft_start) if soft_start is not None else model, log, h=h,
                                  free=free, weight=weight, priors=priors,
                                  cutoff_hz=DEFAULT_CUTOFF_HZ if cutoff_hz is None else cutoff_hz,
                                  smooth_start=LMConfig(max_iterations=smooth, damping_update=lm.damping_update)
                                  if smooth else None, factors=factors)
    solved: LMResult = solve(problem, lm, label=f"calibrate {model.name}, joints {soft_start:g} x softer"
                             if soft_start else None)
    seconds, second_lm, label = [], lm, None
    if soft_start is not None:
        seconds = [stiffen(problem, solved, model, priors=priors)]
    if options.restart_weight is not None:
        seconds = restarts_from_simulations(problem, solved, options.restart_weight, priors=priors,
                                            search=options.restart_search)
        label, weight = "restarted", options.restart_weight
        second_lm = replace(lm, lambda_initial=RESTART_LAMBDA_INITIAL)
    if seconds:  # the result is the second solve's (the lowest cost of several); its iterations count all solves
        first, runs = solved, []
        for i, second in enumerate(seconds):
            run = solve(second, second_lm, label=(f"calibrate {model.name}, {label}" + (
                f" from search start {i}" if i else "")) if label else None)
            runs.append((run.history[-1]["cost"], i, second, run))
        _, _, problem, solved = min(runs, key=lambda run: run[:2])
        spent = sum(run.iterations for *_, run in runs)
        solved = replace(solved, iterations=first.iterations + spent, history=first.history + solved.history)
    if problem.user_factors and not solved.failed:
        # The objective weighs the readings at unit sigma; the user's factors are in their own units. Solved
        # again from here with the objective in the readings' units (their sigma estimated there), they weigh
        # against the readings at their stated sigmas.
        first = solved
        solved = solve(weighed_by_noise(problem, solved, problem.noise_sigmas(solved.values)[0], priors=priors), lm,
                       label=f"calibrate {model.name}, at the noise sigmas")
        solved = replace(solved, iterations=first.iterations + solved.iterations,
                         history=first.history + solved.history)
    values = solved.values
    found = problem.parameter_values(values)
    identified = problem.model.with_parameters({name: found[name] for name in problem.variables.names})
    costs = problem.step_costs(values)  # in the objective's weights, whichever solve came last
    n = problem.n
    obs_sq = costs["observation"].sum()
    imp_sq = costs["impulse"].sum()  # includes the weight w
    sigma_y, sigma_p = problem.noise_sigmas(values)  # (3.22-3.23)
    # A failed solve's point is no estimate: no covariance (its stds NaN), and its costs may not be finite.
    estimates, cov, info = _estimates(problem, values, identified, sigma_y, sigma_p,
                                      options.covariance and not solved.failed)
    # Relative to the values; a parameter at zero (e.g. on its bound) is scaled by its std instead (by 1 where
    # that is infinite: an undetermined direction, whose covariance entries are infinite or NaN anyway).
    scale = np.array([abs(p.value) if p.value != 0 else (p.std if 0 < p.std < np.inf else 1.0) for p in estimates])
    rel = cov / np.outer(scale, scale) if cov.size else cov
    sv = np.linalg.svd(rel, compute_uv=False) if rel.size and np.all(np.isfinite(rel)) else np.array([])
    parts: dict[str, dict[str, float]] = {}
    if options.bias:
        # The stiffer joints need soft_start most; the restart is done (its weight is this one's from here on).
        parts = discretization_bias(identified, log, {p.name: p.value for p in estimates}, problem.h,
                                    options=replace(options, restart_weight=None, restart_search=0),
                                    free=problem.variables.names, weight=weight, priors=priors, cutoff_hz=cutoff_hz,
                                    factors=factors, lm=lm)
        estimates = [replace(p, bias=parts["h"][p.name] + parts["compliance"][p.name]) for p in estimates]
    wall = time.perf_counter() - start
    return CalibrationResult(
        identified, estimates, cov, sv, float((obs_sq + imp_sq + costs["prior"].sum() + costs["user"].sum()) / n),
        float(obs_sq / n),
        float(imp_sq / n), costs["observation"] + costs["impulse"], sigma_y, sigma_p, solved.iterations,
        solved.status, wall, problem.h, weight, solved.history, parts, problem, values, info, solved.message,
    )


#: How :func:`discretization_bias` estimates the bias (written into the result JSON).
BIAS_METHOD = ("bias = (estimate at 2h - estimate at h) + (estimate - estimate at a tenth of the joint "
               "compliances) * 10/9: first-order extrapolation of the estimate to h -> 0 and to rigid joints")


def discretization_bias(
    identified: RigidModel, log: Log, values: Mapping[str, float], h: float, *,
    options: CalibrationOptions = CalibrationOptions(), **calibrate_kwargs: Any,
) -> dict[str, dict[str, float]]:
    """The error of calibrated values that comes from the discrete model, not from the noise.

    Spook is first order in the time-step h (Marklund et al. (2025)), and the joints are compliant (a constraint
    row with compliance eps deflects by eps times its force), so an estimate carries a bias
    ``c_h h + c_eps eps`` that no amount of data removes; the standard deviation does not show it.
    Both parts are estimated to first order by calibrating again from the identified model:

    - ``h``: at 2h (every other log sample a state): ``value(2h) - value(h)`` = c_h h;
    - ``compliance``: with every joint compliance parameter (:func:`joint_compliances`) a tenth of
      its value: ``(value - value(eps / 10)) * 10 / 9`` = c_eps eps.

    ``value - bias`` is then the extrapolation to h -> 0 and rigid joints. Where the log
    is too short for three steps of 2h, or the model has no compliance parameter, that part is 0; where
    one of the two calibrations does not converge, its part is NaN (with a warning).

    Args:
        identified: the calibrated model (start of both calibrations); log: the calibration's log;
        values: name -> calibrated value (``CalibrationResult.parameters``, tilt components included);
        h: the calibration's time-step [s]; options: the calibration's workflow (its ``covariance`` and ``bias``
        are turned off for these two); calibrate_kwargs: the calibration's other arguments (``lm`` among them).

    Returns:
        ``{"h": {name: bias part}, "compliance": {name: bias part}}`` in the parameters' units.
    """
    def calibrated(model: RigidModel, step: float) -> dict[str, float]:
        result = calibrate(model, log, h=step, **calibrate_kwargs, options=replace(options, covariance=False, bias=False))
        if not result.converged:  # no estimate rather than a wrong one
            warnings.warn(f"bias estimate: the calibration at h = {step:g} s"
                          f"{' with the compliances / 10' if step == h else ''} did not converge in "
                          f"{result.iterations} iterations; that part of the bias is NaN", stacklevel=3)
            return {p.name: float("nan") for p in result.parameters}
        return {p.name: p.value for p in result.parameters}

    coarse = calibrated(identified, 2 * h) if 3 * 2 * h <= log.t[-1] - log.t[0] else dict(values)
    compliances = [c for c in joint_compliances(identified) if c not in values]
    stiffer = (calibrated(identified.with_parameters({c: identified.parameters[c].default / 10
                                                      for c in compliances}), h)
               if compliances else dict(values))
    return {"h": {name: coarse[name] - v for name, v in values.items()},
            "compliance": {name: (v - stiffer[name]) * 10 / 9 for name, v in values.items()}}


def _estimates(problem, values: gtsam.Values, identified: RigidModel, sigma_y: float, sigma_p: float,
               with_covariance: bool) -> tuple[list[ParameterEstimate], np.ndarray, np.ndarray | None]:
    """Parameter estimates with standard deviations from the re-weighted graph's marginals, their covariance
    and their information matrix (None without ``with_covariance``)."""
    from scipy.spatial.transform import Rotation

    from mbfg.graphs.joint import build_joint_problem

    variables = problem.variables
    model = identified
    params = model.parameters
    names: list[str] = list(variables.free)
    vals = [params[n].default for n in names]
    units = [params[n].unit for n in names]
    bounds = [(params[n].lower, params[n].upper) for n in names]
    if variables.tilt_free:
        rotvec = Rotation.from_matrix(params[variables.tilt].default).as_rotvec()
        names += [f"{model.tilt}[{ax}]" for ax in "xyz"]
        vals += list(rotvec)
        units += ["rad"] * 3
        bounds += [(-np.pi, np.pi)] * 3
    n_p = len(names)
    cov = np.full((n_p, n_p), np.nan)
    info = None
    if with_covariance and n_p:
        reweighted = build_joint_problem(
            problem.model, problem.state_log(), free=variables.names,
            weight=problem.weight, sigmas=(max(sigma_y, 1e-300), max(sigma_p, 1e-300)),
            states=problem.state_list(values), factors=problem.user_factors,
        )
        # The vectorized linearization over blocks: the parameter block B() stacks P and T in that order.
        assert reweighted.vectorized is not None  # build_joint_problem builds it
        linear, diag = reweighted.vectorized.linearize(values)
        blocks = reweighted.vectorized.blocks
        R = marginal_r(linear, [keys.B()], {block: diag[blocks.start[block] : blocks.start[block] + size]
                                            for block, size in blocks.size.items()})
        cov, info = covariance_of_r(R), R.T @ R
    std = np.sqrt(np.clip(np.diag(cov), 0, None)) if n_p else np.zeros(0)
    estimates = [ParameterEstimate(n, float(v), float(s), u, float(lo), float(hi))
                 for n, v, s, u, (lo, hi) in zip(names, vals, std, units, bounds)]
    return estimates, cov, info
