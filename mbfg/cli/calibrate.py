"""``mbfg calibrate``: estimate a 3D rigid-body model's parameters and states jointly from a log.

::

    mbfg calibrate MODEL LOG.csv [--params FILE] [--free NAME,...] [--prior NAME=SIGMA,...] [--dt H] [--weight W]
                   [--max-iterations N] [--bias] [--hold NAME=VALUE,...] [--json] [--out RESULT.json]
                   [--plot FIG.png] [--resample H] [--quiet]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import statistics
import sys
from typing import TYPE_CHECKING, Any

from mbfg.cli.args import (
    LOG_HELP,
    MARKLUND_2025,
    MODEL_HELP,
    Subparsers,
    add_resample_option,
    halving_count,
    iteration_count,
    positive_float,
    sample_count,
)
from mbfg.cli.common import (
    check_figure,
    check_output,
    check_outputs,
    check_time_step,
    compile_notice,
    eprint,
    json_safe,
    log_sample_period,
    model_input,
    model_with_params,
    parse_free,
    save_figure,
    start_clock,
    wall_seconds,
    write_json,
)
from mbfg.errors import DataError, MbfgError, ModelError

if TYPE_CHECKING:
    from mbfg.rigid import RigidModel

DESCRIPTION = """\
Calibrate a 3D rigid-body model from a log: estimate its free parameters and
its state trajectory jointly (Marklund et al. 2025), by box-constrained
Levenberg-Marquardt on the objective  sum_k |Delta y_k|^2 + w sum_k |Delta p_k|^2  (observation
errors [rad or m] and impulse errors of the Spook steps [N s, N m s]).

LOG is a log in the standard format (what 'mbfg simulate' writes): columns t
[s], the model's observations, its controls; uniformly sampled, empty cells are
missing readings. LOG may also be a lab's own recording, recognised by its
header: a DFKI double pendulum trajectory_NN.csv (q1, q2, tau1, tau2 from
pos_meas1/2 and tau_meas1/2: models double-pendulum-torque and
dfki-double-pendulum) or a QUBE-Servo episode CSV (theta, alpha = pi - the
file's alpha, u = plant_input: the furuta models); one made for another model's
observations and controls is refused. A recording that is not uniformly sampled
(the DFKI files have gaps) is refused unless --resample H puts it on a uniform
grid of step H [s] (observations interpolated linearly, controls held; a line
on stderr says what was done). A time column as a rig's clock writes it may
jitter: by less than 1e-6 of the period it is snapped onto the uniform grid
(a line on stderr says by how much), so --dt takes multiples of the period;
a log with rows further off is refused with their count, or put on its own
grid by --resample at its period (readings interpolated at the grid times,
each row's control kept). The model's parameter values (or those of
--params) are the initial guess and its bounds the box the estimates stay in.

--free names the parameters to estimate, comma-separated (default: those the
model marks free, see 'mbfg models MODEL'); the gravity tilt rotation may be
named too (e.g. tilt), it is then estimated as a rotation. --dt is the
estimation time-step h [s], a whole multiple of the log's sample period
(default: the period); a larger h is faster but its Spook steps are coarser.
--weight is the state error weight w (default: the model's, 1e6 for every
built-in model but dfki-double-pendulum, a real rig's, at 1e3): larger trusts the
model's dynamics more than the readings. Its unit is the readings' over the
impulses', squared: m^2/(N s)^2 for a slider read in metres (the linear stage),
rad^2/(N m s)^2 for a hinge read in radians; 'mbfg models MODEL' gives the
model's, and the table and the JSON ("weight_unit", "sigma_observation_unit",
"sigma_impulse_unit") say it beside the values. --weight estimate takes w from
the data instead: the w of maximum marginal likelihood on LOG
(mbfg.noise_weight.estimate_weight: a search over w, each point a solve),
printed on stderr with its spread and the reading and impulse noise it implies,
and recorded in the JSON as "weight_estimate": {"weight", "log10_std",
"sigma_observation", "sigma_impulse", "at_limit", "lower_bound", "solves"};
the calibration then runs at that w. --prior NAME=SIGMA,... adds prior knowledge: a
Gaussian prior on each named free parameter at its initial value, standard
deviation SIGMA in the parameter's unit (e.g. rough CAD values of inertias the
log does not excite, which otherwise fall to their bound and slow the fit down).
The printed std stays the data's: a parameter only its prior holds is still
flagged as not excited.

Output on stdout: a table of the estimates (value, linearized standard
deviation, unit, bounds; 'not excited' where std > |value|, the data cannot
tell the value from zero; 'at its bound' where the value ended on a bound,
where the linearized std means nothing) and the cost per time-step. Where the
data determine only combinations of the free parameters (planar motion
determines a link's inertia about its joint, J1 + m1 r1^2 + m2 l1^2, not how
it splits; a link's and a rotor's inertia behind one joint enter only as their
sum), the table names each combination the data leave free, e.g. 'not
determined by the data: J_link - J_rotor' (moving the parameters along it fits
as well), and writes the determined ones as base parameters, each one free
parameter plus a combination of others held at the estimate, with value and
std (e.g. 'J_link + J_rotor = 0.00160156 +- 1.64e-06', the 0.5 s log of
tests/test_base_parameters.py). --hold NAME=VALUE,... maps those back to named
parameters with the named free parameters held at VALUE (e.g. a rotor inertia
from the motor's data sheet): a second table of the implied parameters with
stds propagated from the covariance (exact where the parameters enter
linearly, first order otherwise). With --json
instead one JSON object: {"model", "parameters": {NAME: {"value", "std", "unit",
"lower", "upper", "excited", "at_bound"}}, "fixed": {NAME: {"value", "unit",
"lower", "upper"}} (every other parameter of the model, at the value it was
held at: the file is the whole model), "cost", "cost_observation",
"cost_impulse", "iterations", "start_iterations", "converged", "status",
"message", "wall_s", "h",
"weight", "sigma_observation", "sigma_impulse", "weight_unit",
"sigma_observation_unit", "sigma_impulse_unit", "singular_values",
"not_excited", "at_bound", "combinations", "not_determined", "base_parameters",
"base_held", "log", "params", "priors"} ("combinations": every direction the
covariance has, [{"label", "coefficients" {NAME: c}, "value", "std",
"relative_std", "determined", "scale"}], the determined ones as uncorrelated
functions of the parameters, the others as the direction the data leave free;
mbfg.identifiability.base_parameters(FILE, fix={NAME: VALUE}) maps them back;
"base_parameters": the determined ones in base form; "base_held": the parameters
that form holds; with --hold also "base": {"base", "parameters": {NAME:
{"value", "std", "held"}}}) (a free
tilt is one entry whose value and std are rotation vectors [rad]; a std that
cannot be computed is null). --out FILE also writes that JSON object to FILE: feed it
back with --params FILE, or to 'mbfg crossval'. --plot FIG.png draws the fit: per
observation the log with the estimated states' observation and the residual
against t, the cost per time-step, and each estimate relative to its value with
its std (format from the extension: .png, .pdf, .svg ...; needs matplotlib,
pip install 'mbfg[plot]', checked before the calibration starts).

The std says what the noise allows; the discrete model adds a bias no data removes
(Spook is first order in h, and the joints are compliant). --bias estimates it by
calibrating twice more from the result, at 2h and with the joint compliances
divided by 10 (bias = first-order extrapolation to h -> 0 and rigid joints;
value - bias is the extrapolated estimate): a 'bias' column, flagged 'biased'
where |bias| > std, and in the JSON "bias"/"biased" per parameter, plus
"biased", "bias_parts" {"h", "compliance"} and "bias_method".

Progress lines (LM iteration, cost, lambda, elapsed time) go to stderr unless
--quiet, and so does a one-line summary (iterations, the solve's outcome, cost,
the command's whole wall time and the calibration's part of it).

Every solve ends in one of three states ("status" in the JSON, with the
solver's reason in "message"): converged (the last steps lowered the cost by
less than the tolerance and the projected gradient is small: the bounded
first-order conditions hold), not_converged (the iteration limit came first)
or failed (a non-finite cost or Jacobian, naming the factors that made it so,
or no step lowering the cost at the largest damping while the gradient is not
small). The table and the JSON are still written, and the summary says the
reason; the exit status is 1 unless the solve converged.
"""

EPILOG = """\
examples:
  mbfg simulate pendulum --duration 2 --dt 0.001 --init theta=2.5 --noise 0.001 --out log.csv
  mbfg calibrate pendulum log.csv --free J,b --json
  mbfg calibrate pendulum log.csv --free J,b --bias
  mbfg calibrate pendulum log.csv --params start.yaml --free J,b,d --out calib.json --plot fit.png
  mbfg calibrate furuta furuta.csv --dt 0.002 --weight 1e5 --max-iterations 50 --quiet
  mbfg calibrate furuta furuta.csv --free K,b_1,b_2,tilt --params calib.json
  mbfg calibrate furuta furuta.csv --prior J_Ax=1.2e-6,J_Ay=7.2e-5
  mbfg calibrate rotor.yaml log.csv --free J_link,J_rotor,b --hold J_rotor=6e-4
  mbfg calibrate dfki-double-pendulum trajectory_00.csv --resample 0.002 --out dfki.json

trajectory_00.csv: a DFKI double pendulum recording as the lab published it
(../shared/data/dfki_double_pendulum/ beside this repository), resampled onto a
2 ms grid: it has gaps, and without --resample it is refused. The model's weight
1e3 converges in 6 iterations; at --weight 1e6 it takes 38 (the real rig's
unmodelled effects dominate the cost; see mbfg.dfki).

rotor.yaml: a model file whose link inertia is "J_link + J_rotor" (as in
tests/test_base_parameters.py), so that only the sum is determined.

A start file (--params; YAML or JSON, name: value or name: {value, lower, upper, free}):
  J: 2.0e-3
  b: {value: 1.0e-3, lower: 0, upper: 0.1}

reference:
""" + MARKLUND_2025 + "\n"


def add_parser(sub: Subparsers) -> None:
    """Register ``calibrate`` on the ``mbfg`` subcommand parsers ``sub``."""
    cal = sub.add_parser(
        "calibrate",
        help="estimate a 3D rigid-body model's parameters (with standard deviations) from a log",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    cal.add_argument("model", metavar="MODEL", help=MODEL_HELP)
    cal.add_argument("log", metavar="LOG.csv", help=LOG_HELP)
    cal.add_argument(
        "--params", metavar="FILE",
        help="parameter file (YAML or JSON, or the JSON of a calibration): initial values, bounds, free flags",
    )
    cal.add_argument(
        "--free", metavar="NAME,...",
        help="comma-separated parameters to estimate (default: the model's free parameters)",
    )
    cal.add_argument(
        "--prior", metavar="NAME=SIGMA,...",
        help="Gaussian priors on free parameters at their initial values, standard deviation SIGMA [their unit]",
    )
    cal.add_argument(
        "--dt", type=positive_float, default=None, metavar="H",
        help="estimation time-step [s], a whole multiple of the log's sample period (default: the period)",
    )
    cal.add_argument(
        "--weight", type=_weight, default=None, metavar="W",
        help="state error weight w [(reading unit)^2/(impulse unit)^2: m^2/(N s)^2 for a slider read in m, "
             "rad^2/(N m s)^2 for a hinge read in rad] (default: the model's, 1e6 for most; 'mbfg models MODEL' "
             "gives it with its unit); 'estimate': the w of maximum marginal likelihood on this log "
             "(mbfg.noise_weight.estimate_weight), reported with the reading and impulse noise it implies",
    )
    cal.add_argument(
        "--restart-weight", type=positive_float, default=None, metavar="W2",
        help="after the LM, solve again at this w from a free simulation of the result (contacts at large "
             "noise: a small --weight first, then a large W2; see CalibrationOptions.restart_weight)",
    )
    cal.add_argument(
        "--restart-search", type=sample_count, default=0, metavar="N",
        help="with --restart-weight: also free-simulate N parameter vectors spread over the free parameters' "
             "bounds and restart from the two closest to the log too, keeping the lowest cost (a contact the "
             "first solve left in the wrong mode; see CalibrationOptions.restart_search)",
    )
    cal.add_argument(
        "--backtracking", type=halving_count, default=None, metavar="N",
        help="halve a rejected LM step up to N times along its direction before raising the damping (default: "
             "8 for a model with contacts, whose impulse residuals steepen where a contact engages, else 0; see "
             "LMConfig.backtracking)",
    )
    cal.add_argument(
        "--soft-start", type=positive_float, default=None, metavar="F",
        help="solve first with every joint compliance F times softer (e.g. 100), then the model's own from that "
             "solution: for stiff joints, eps_lin of 1e-8 m/N and less (see CalibrationOptions.soft_start)",
    )
    cal.add_argument(
        "--max-iterations", type=iteration_count, default=20, metavar="N",
        help="Levenberg-Marquardt iterations at most (default: %(default)s)",
    )
    cal.add_argument(
        "--bias", action="store_true",
        help="also estimate each parameter's bias from the discrete model (calibrates again at 2h and with "
             "the joint compliances / 10; flagged where it exceeds the std)",
    )
    cal.add_argument(
        "--hold", metavar="NAME=VALUE,...",
        help="map the parameter combinations the data determine back to named parameters, with these free "
             "parameters held at VALUE [their unit] (prints the implied parameters with stds)",
    )
    cal.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    cal.add_argument("--out", metavar="RESULT.json", help="also write the JSON result to this file")
    cal.add_argument(
        "--plot", metavar="FIG.png",
        help="also draw the fit (log, estimate and residual per observation; parameters with std) to this "
             "figure file (needs matplotlib: pip install 'mbfg[plot]')",
    )
    add_resample_option(cal)
    cal.add_argument("--quiet", action="store_true", help="no progress lines (the summary line is still printed)")
    cal.set_defaults(handler=run)


def _weight(text: str) -> float | str:
    """``--weight``: a number > 0, or ``estimate``."""
    return "estimate" if text.strip() == "estimate" else positive_float(text)


def _parse_priors(model: RigidModel, names: list[str], text: str) -> dict[str, float]:
    """``--prior NAME=SIGMA,...`` as {name: sigma}, each name a scalar parameter being estimated, each sigma > 0."""
    priors: dict[str, float] = {}
    for item in text.split(","):
        name, sep, value = (part.strip() for part in item.partition("="))
        if not sep or not name:
            raise ModelError(
                f"--prior {text}: expected NAME=SIGMA items separated by commas, e.g. J=1e-4, got {item!r}"
            )
        if name not in names:
            raise ModelError(f"--prior {text}: {name!r} is not a parameter being estimated ({', '.join(names)})")
        if name == model.tilt:
            raise ModelError(f"--prior {text}: {name!r} is a rotation; priors are for scalar parameters")
        if name in priors:
            raise ModelError(f"--prior {text}: parameter {name!r} is given twice")
        try:
            priors[name] = positive_float(value)
        except argparse.ArgumentTypeError:
            message = f"--prior {text}: the sigma of {name!r} must be a positive number, got {value!r}"
            raise ModelError(message) from None
    return priors


def _parse_hold(model: RigidModel, names: list[str], text: str) -> dict[str, float]:
    """``--hold NAME=VALUE,...`` as {name: value}, each name a scalar parameter being estimated."""
    held: dict[str, float] = {}
    for item in text.split(","):
        name, sep, value = (part.strip() for part in item.partition("="))
        if not sep or not name:
            raise ModelError(f"--hold {text}: expected NAME=VALUE items separated by commas, e.g. J_s=4e-6, "
                             f"got {item!r}")
        if name not in names or name == model.tilt:
            raise ModelError(f"--hold {text}: {name!r} is not a scalar parameter being estimated ({', '.join(names)})")
        if name in held:
            raise ModelError(f"--hold {text}: parameter {name!r} is given twice")
        try:
            held[name] = float(value)
        except ValueError:
            raise ModelError(f"--hold {text}: the value of {name!r} must be a number, got {value!r}") from None
        if not math.isfinite(held[name]):
            raise ModelError(f"--hold {text}: the value of {name!r} must be finite, got {value!r}")
    return held


def why_not_converged(history: list[dict[str, float]], piecewise: bool) -> str:
    """Why the LM stopped unconverged (at the iteration limit), from its last iterations: how much the last one
    still lowered the cost against the tolerance (:func:`mbfg.calibration_options.calibration_lm`'s ``relative_tol``), what
    the steps' gain ratios say, and what to try.

    Two cases are told apart by the median gain ratio rho (actual / predicted decrease) of the last eight steps:
    near 1, the steps did what their linearization predicted and only their reach was short (piecewise
    residuals: samples switching between sticking and sliding at dry friction; the QUBE-Servo at its weight,
    median 0.95 over its last eight of 20, a few dips among ratios of 0.99: ``python benchmarks/real_rigs.py
    --rig qube --max-iterations 20``); well below 1, the linearization is poor where the steps go (a
    large-residual problem, unmodelled effects of a real rig, or a start far off; the DFKI double pendulum at
    w = 1e6, median 0.34, every ratio from its fifth step on below 0.6: ``python benchmarks/real_rigs.py --rig
    dfki --lab-model --seconds 2 --dt 2e-3 --weights 1e6 --max-iterations 20``). Both commands print the ratios.
    ``piecewise``: the model has complementarity rows (dry friction, contacts), whose kinks are then named as
    the likely cause of the first case."""
    from mbfg.calibration_options import RELATIVE_TOL as tol
    costs = [row["cost"] for row in history[-2:]]
    if len(costs) < 2 or not costs[0] > 0:
        return "raise --max-iterations?"
    fell = (costs[0] - costs[1]) / costs[0]
    said = f"its last iteration still lowered the cost by {100 * fell:.2g} %, converged is below {100 * tol:g} %"
    rhos = [row["rho"] for row in history[-8:] if math.isfinite(row.get("rho", math.nan))]
    if not rhos:
        return f"{said}: raise --max-iterations"
    rho = statistics.median(rhos)
    if rho >= 0.75:
        kinks = (", as at the kinks of dry friction and contacts, where samples switch between sticking and sliding"
                 if piecewise else "")
        return (f"{said}; its last steps won what their linearization predicted (gain ratio {rho:.2f}) but reach "
                f"little each{kinks}: raise --max-iterations")
    # A lower weight is not a free fix: it converges sooner because the states follow the readings closer, and
    # below the sensor's noise they fit it (the QUBE-Servo's encoders at 1e3, benchmarks/README.md).
    return (f"{said}; its last steps won {rho:.2g} of the decrease their linearization predicted (a large-residual "
            "problem, or a start far off): raise --max-iterations; a lower --weight converges sooner, but keep "
            "the table's sigma_y at or above the sensor's noise")


def _check_restarts(args: argparse.Namespace, model: RigidModel, names: list[str]) -> None:
    """--soft-start, --restart-weight and --restart-search checked together, named as options (CalibrationOptions
    checks the same under its field names), before the log is read."""
    if args.soft_start is not None and not args.soft_start > 1:
        raise ModelError(f"--soft-start {args.soft_start:g}: expected a factor > 1, e.g. 100")
    if args.soft_start is not None and args.restart_weight is not None:
        raise ModelError("--soft-start and --restart-weight: give one of them; each starts a second solve")
    if args.restart_search:
        if args.restart_weight is None:
            raise ModelError(f"--restart-search {args.restart_search}: a search picks the starts of a restart; "
                             f"give --restart-weight W2 too")
        unbounded = model.parameters.unbounded(names)
        if unbounded:
            par = model.parameters[unbounded[0]]
            raise ModelError(f"--restart-search {args.restart_search}: free parameter {unbounded[0]!r} has the "
                             f"bounds [{par.lower}, {par.upper}]; a search samples the free parameters' bounds, so "
                             f"each needs finite ones (set them in a --params file, or search without it)")


def _estimate_json(estimate: Any) -> dict[str, Any]:
    """The JSON of ``--weight estimate`` (:class:`mbfg.noise_weight.WeightEstimate`): weight, log10_std,
    sigma_observation, sigma_impulse, at_limit, lower_bound, solves."""
    return {"weight": estimate.weight, "log10_std": estimate.log10_std,
            "sigma_observation": estimate.sigma_observation, "sigma_impulse": estimate.sigma_impulse,
            "at_limit": estimate.at_limit, "lower_bound": estimate.lower_bound, "solves": len(estimate.evaluations)}


def run(args: argparse.Namespace) -> int:
    """The ``calibrate`` subcommand (see :data:`DESCRIPTION`)."""
    from mbfg.calibration import calibrate
    from mbfg.calibration_options import CalibrationOptions, calibration_lm
    from mbfg.cli.recordings import read_recording
    from mbfg.progress import silenced
    from mbfg.roles import weight_unit

    start_clock(args)
    if args.out == "-":
        raise DataError("--out -: use --json to print the result on standard output")
    inputs = [model_input(args.model), ("LOG", args.log), ("--params", args.params)]
    if args.out:
        check_output(args.out, "JSON", inputs=inputs)
    plot = args.plot
    if plot:
        check_output(plot, "figure", "--plot", inputs=inputs)
        check_outputs([("--out", args.out), ("--plot", plot)])
        check_figure(plot, "plotting a calibration")  # a missing matplotlib is said now, not after the fit
    model = model_with_params(args.model, args.params)
    free = parse_free(model, args.free) if args.free is not None else None
    names = free if free is not None else list(model.parameters.free)
    if not names:
        raise ModelError(
            f"{model.name} marks no parameter free; name those to estimate with --free "
            f"(its parameters: {', '.join(model.parameters)})"
        )
    priors = _parse_priors(model, names, args.prior) if args.prior is not None else None
    _check_restarts(args, model, names)
    hold = _parse_hold(model, names, args.hold) if args.hold is not None else None
    log = read_recording(args.log, model, args.resample, args.quiet, "mbfg calibrate", args.columns)
    check_time_step(log, args.dt, f"--dt {args.dt:g}" if args.dt is not None else "")
    estimate = None
    if args.weight == "estimate":
        from mbfg.noise_weight import estimate_weight
        from mbfg.roles import noise_units

        with compile_notice("calibrate", args.quiet):
            estimate = estimate_weight(model, log, free=free, h=args.dt, priors=priors, quiet=args.quiet)
        eprint(f"mbfg calibrate: --weight estimate: {estimate.summary((weight_unit(model), *noise_units(model)))}")
    weight = model.weight if args.weight is None else estimate.weight if estimate is not None else args.weight
    if not args.quiet:
        period = log_sample_period(log)
        h = args.dt if args.dt is not None else period
        eprint(
            f"mbfg calibrate: {model.name}, free {', '.join(names)}; {len(log.t)} rows of {args.log} "
            f"(sample period {period:.6g} s), h = {h:.6g} s, weight {weight:g} {weight_unit(model)}"
            + (f"; start from {args.params}" if args.params else "; start from the model's values")
        )
    lm = calibration_lm(model, max_iterations=args.max_iterations,
                        **({} if args.backtracking is None else {"backtracking": args.backtracking}))
    options = CalibrationOptions(bias=args.bias, restart_weight=args.restart_weight, soft_start=args.soft_start,
                                 restart_search=args.restart_search)
    with compile_notice("calibrate", args.quiet), silenced() if args.quiet else contextlib.nullcontext():
        result = calibrate(model, log, free=free, h=args.dt, weight=weight, priors=priors, lm=lm, options=options)
    # Which held parameters pin down the others is known only now; a --hold that leaves one free is an error,
    # raised once the calibration's own table and file are out (it is not lost with the mapping).
    base, base_error = None, None
    if hold is not None:
        try:
            base = result.base_parameters(hold)
        except MbfgError as exc:
            base_error = exc
    doc = json_safe({**result.to_dict(), "log": args.log, "params": args.params, "priors": priors or {}}
                     | ({"base": base.to_dict()} if base is not None else {})
                     | ({"weight_estimate": _estimate_json(estimate)} if estimate is not None else {}))
    if args.out:
        write_json(doc, args.out)
    if args.json:
        print(json.dumps(doc))
    else:
        print(result.table())
        if base is not None:
            print(base.table())
    sys.stdout.flush()
    if plot:
        save_figure(result.plot(log), plot)
    written = [path for path in (args.out, plot) if path]
    if result.status == "not_converged" and result.message.startswith("iteration limit"):
        outcome = f"NOT converged ({result.message}; {why_not_converged(result.history, result.model.layout.n_B > 0)})"
    else:
        outcome = result.outcome
    eprint(
        f"mbfg calibrate: {result.iterations} LM iterations, {outcome}"
        + f", cost {result.cost:.4g} per step; {wall_seconds(args):.1f} s wall in all "
        f"(calibration {result.wall_s:.1f} s, compiling included)"
        + (f"; wrote {' and '.join(written)}" if written else "")
    )
    if base_error is not None:
        raise ModelError(f"--hold {args.hold}: {base_error}")
    return 0 if result.converged else 1
