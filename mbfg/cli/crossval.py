"""``mbfg crossval``: the cross-validation score of calibrated parameters on another log.

::

    mbfg crossval MODEL LOG.csv --params CALIB.json [--dt H] [--weight W] [--max-iterations N] [--simulate S]
                  [--drift-threshold [NAME=]VALUE,...] [--out CV.json] [--simulation-out SIM.csv]
                  [--resample H] [--json] [--quiet]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace

from mbfg.cli.args import (
    LOG_HELP,
    MARKLUND_2025,
    MODEL_HELP,
    Subparsers,
    add_resample_option,
    iteration_count,
    positive_float,
)
from mbfg.cli.common import (
    calibration_settings,
    check_output,
    check_outputs,
    check_time_step,
    compile_notice,
    eprint,
    json_safe,
    model_input,
    model_with_params,
    rigid_model,
    start_clock,
    wall_seconds,
    write_json,
)
from mbfg.errors import DataError
from mbfg.validation import DRIFT_FRACTION

DESCRIPTION = """\
Cross-validation score of calibrated parameters on another log (Marklund et
al. 2025, sec. 4.5): state estimation on LOG with every parameter fixed at the values
of --params, and the resulting cost per time-step
  (sum_k |Delta y_k|^2 + w sum_k |Delta p_k|^2) / n,
the same objective as 'mbfg calibrate'. A log the parameters explain well
scores about the variance of the observation noise [rad^2 or m^2]; compare
scores computed with the same --dt and --weight.

--params is usually the JSON of 'mbfg calibrate --out' (any parameter file is
accepted); a calibration result gives the whole model, estimated and fixed
parameters, and one made for another model is refused. LOG is a log in the
standard format or a lab's own recording (a DFKI double pendulum
trajectory_NN.csv, a QUBE-Servo episode CSV), read as by 'mbfg calibrate'; one
that is not uniformly sampled needs --resample H (e.g. 0.002: the DFKI files),
best the H its calibration was given. --dt and --weight default to the h and w
of that calibration when the file records them, else to the log's sample period
and the model's weight (1e6 for most; 'mbfg models MODEL').

The state estimation is a Levenberg-Marquardt solve of at most
--max-iterations (default 50). One that stops before it converges (the
iteration limit) leaves a score above the minimum's, and one that fails (a
non-finite cost or Jacobian, or no step lowering the cost at the largest
damping) leaves none worth reading: either is said on stderr with the solver's
reason, the score is still printed, and the exit status is 1.

--simulate S adds the check a lab trusts beside the score, which re-estimates
the states and so never lets an error build up: a free simulation of the
calibrated model over the first S seconds of LOG, from its first coordinates (and
rates fitted to its first samples) with its controls, at the time-step h,
without any correction from the readings; reported per observed coordinate as
the RMS error against the log [rad or m] and the time at which the error first
exceeds that coordinate's drift threshold: by default 0.1 of the range the log
spans in it (a stage over 0.25 m of stroke: 2.5 cm; a pendulum swinging over
3 rad: 0.3 rad), or --drift-threshold: one VALUE for every coordinate, or
NAME=VALUE,... one per coordinate [rad for a hinge angle, m for a slider].

Output on stdout: 'score VALUE', with --simulate one line per coordinate
'simulate NAME rms VALUE drift_time SECONDS threshold VALUE' (inf: within
the threshold for the whole span); with --json one JSON object {"score",
"log", "model", "params", "h", "weight", "n", "iterations", "converged",
"status", "message"} (n: the number of time-steps; iterations, converged,
status (converged, not_converged or failed), message (the solver's reason): of
the state estimation), with --simulate also "simulation": {"seconds",
"threshold": {NAME: VALUE}, "threshold_source", "rms": {NAME: VALUE},
"drift_time": {NAME: SECONDS or null for never}}. --out CV.json also writes
that JSON object to a file; --simulation-out SIM.csv (with --simulate) writes
the free simulation: columns t [s, from LOG's first row], then per coordinate
NAME (recorded), NAME_simulated and NAME_error (simulated - recorded; hinge
angles wrapped to (-pi, pi]). Both are written whole or not at all, and never
over LOG, --params or the model file. Progress lines go to stderr unless
--quiet, and so does a one-line summary (the score, the state estimation's
iterations and whether it converged, the command's whole wall time and the
state estimation's part of it).
"""

EPILOG = f"""\
examples:
  mbfg simulate pendulum --duration 2 --dt 0.001 --init theta=2.5 --noise 0.001 --seed 1 --out log.csv
  mbfg simulate pendulum --duration 2 --dt 0.001 --init theta=1.5 --noise 0.001 --seed 2 --out other.csv
  mbfg calibrate pendulum log.csv --free J,b --out calib.json
  mbfg crossval pendulum other.csv --params calib.json
  mbfg crossval pendulum other.csv --params calib.json --dt 0.002 --json
  mbfg crossval pendulum other.csv --params calib.json --simulate 1
  mbfg crossval pendulum other.csv --params calib.json --simulate 1 --drift-threshold theta=0.05 \\
      --out cv.json --simulation-out sim.csv
  mbfg crossval dfki-double-pendulum trajectory_01.csv --params dfki.json --resample 0.002

reference:
{MARKLUND_2025}
"""


def add_parser(sub: Subparsers) -> None:
    """Register ``crossval`` on the ``mbfg`` subcommand parsers ``sub``."""
    cv = sub.add_parser(
        "crossval",
        help="cross-validation score of calibrated parameters on another log",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    cv.add_argument("model", metavar="MODEL", help=MODEL_HELP)
    cv.add_argument("log", metavar="LOG.csv", help=LOG_HELP)
    cv.add_argument(
        "--params", required=True, metavar="CALIB.json",
        help="the parameters to score: the JSON of 'mbfg calibrate --out', or any parameter file",
    )
    cv.add_argument(
        "--dt", type=positive_float, default=None, metavar="H",
        help="estimation time-step [s] (default: the calibration's h, else the log's sample period)",
    )
    cv.add_argument(
        "--weight", type=positive_float, default=None, metavar="W",
        help="state error weight w [m^2/(N s)^2 for a slider, rad^2/(N m s)^2 for a hinge: 'mbfg models MODEL'] "
             "(default: the calibration's w, else the model's)",
    )
    cv.add_argument(
        "--max-iterations", type=iteration_count, default=50, metavar="N",  # graphs.joint.STATE_ESTIMATION_ITERATIONS
        help="iteration limit of the state estimation (default: 50); unconverged at the limit: exit status 1",
    )
    cv.add_argument(
        "--simulate", type=positive_float, default=None, metavar="S",
        help="also free-simulate the calibrated model over the first S seconds of LOG and report the RMS error "
             "and the time until it exceeds its drift threshold, per observed coordinate",
    )
    cv.add_argument(
        "--drift-threshold", type=_thresholds, default=None, metavar="[NAME=]VALUE,...",
        help="with --simulate: the drift threshold [rad or m], one VALUE for every coordinate or NAME=VALUE per "
             f"coordinate (default: {DRIFT_FRACTION:g} of the range the log spans in each)",
    )
    cv.add_argument("--out", metavar="CV.json", help="also write the JSON result (as --json prints it) to this file")
    cv.add_argument(
        "--simulation-out", metavar="SIM.csv",
        help="with --simulate: write the free simulation to this CSV (t; per coordinate NAME, NAME_simulated, "
             "NAME_error)",
    )
    add_resample_option(cv)
    cv.add_argument("--json", action="store_true", help="print one JSON object instead of 'score VALUE'")
    cv.add_argument("--quiet", action="store_true", help="no progress lines (the summary line is still printed)")
    cv.set_defaults(handler=run)


def _thresholds(text: str) -> float | dict[str, float]:
    """``--drift-threshold``: one number > 0, or NAME=VALUE items separated by commas, each VALUE > 0."""
    if "=" not in text:
        return positive_float(text)
    out: dict[str, float] = {}
    for item in text.split(","):
        name, sep, value = (part.strip() for part in item.partition("="))
        if not sep or not name:
            raise argparse.ArgumentTypeError(f"expected one VALUE or NAME=VALUE items separated by commas, e.g. "
                                             f"x=0.005, got {item!r}")
        if name in out:
            raise argparse.ArgumentTypeError(f"coordinate {name!r} is given twice")
        try:
            out[name] = positive_float(value)
        except argparse.ArgumentTypeError as exc:
            raise argparse.ArgumentTypeError(f"the threshold of {name!r}: {exc}") from None
    return out


def run(args: argparse.Namespace) -> int:
    """The ``crossval`` subcommand (see :data:`DESCRIPTION`)."""
    from mbfg.cli.recordings import read_recording
    from mbfg.graphs.joint import cross_validation, not_converged_message, state_estimation_lm, time_step
    from mbfg.roles import weight_unit
    from mbfg.solvers import status_words

    start_clock(args)
    for option, value in (("--drift-threshold", args.drift_threshold), ("--simulation-out", args.simulation_out)):
        if value is not None and args.simulate is None:
            raise DataError(f"{option}: is for the free simulation; give --simulate S too")
    for option, value in (("--out", args.out), ("--simulation-out", args.simulation_out)):
        if value == "-":
            raise DataError(f"{option} -: give a file name (--json prints the result on standard output)")
    inputs = [model_input(args.model), ("LOG", args.log), ("--params", args.params)]
    for option, value, kind in (("--out", args.out, "JSON"), ("--simulation-out", args.simulation_out, "CSV")):
        if value:
            check_output(value, kind, option, inputs=inputs)
    check_outputs([("--out", args.out), ("--simulation-out", args.simulation_out)])
    model = rigid_model(args.model)
    fitted = model_with_params(args.model, args.params)
    recorded = calibration_settings(args.params)
    if recorded.get("model") not in (None, model.name):
        eprint(
            f"mbfg crossval: note: {args.params} is a calibration of model {recorded['model']!r}, "
            f"scored here with {model.name!r}"
        )
    log = read_recording(args.log, model, args.resample, args.quiet, "mbfg crossval", args.columns)
    if args.dt is not None:
        h, what = args.dt, f"--dt {args.dt:g}"
    else:
        h = recorded.get("h")
        what = f"h = {h:g} s, the time-step recorded in {args.params} (choose another with --dt)" if h else ""
    weight = args.weight if args.weight is not None else recorded.get("weight", model.weight)
    check_time_step(log, h, what)
    if args.simulate is not None and len(log.t) and args.simulate > log.t[-1] - log.t[0]:
        raise DataError(f"--simulate {args.simulate:g}: {args.log} spans only {log.t[-1] - log.t[0]:.6g} s")
    if args.simulate is not None:
        from mbfg.validation import drift_thresholds

        try:  # checked now, not after the state estimation: names, and a coordinate that never moves
            drift_thresholds(log, args.drift_threshold)
        except DataError as exc:
            option = "--drift-threshold" if args.drift_threshold is not None else "--simulate (default threshold)"
            raise DataError(f"{option}: {exc}") from None
    # The estimation's own h and stride: the JSON's h is then exact to the log's decimals (0.001, not the
    # 0.0010000000000000009 of a difference of times), even from a calibration file that recorded the noisy one.
    step, stride = time_step(log, h)
    n = len(range(0, len(log.t), stride))
    if not args.quiet:
        eprint(
            f"mbfg crossval: {model.name} with the parameters of {args.params}; state estimation over "
            f"{len(log.t)} rows of {args.log}, h = {step:.6g} s, weight {weight:g} {weight_unit(model)}"
        )
    start = time.perf_counter()
    # The calibration's free parameters held at their values: its factor types, so its compiled programs.
    free = [name for name in recorded.get("free", []) if name in model.parameters]
    with compile_notice("crossval", args.quiet):
        score, estimate = cross_validation(model, log, fitted.parameters.numpy_values(), h=step, weight=weight,
                                           quiet=args.quiet, free=free,
                                           lm=state_estimation_lm(model, max_iterations=args.max_iterations))
    wall = time.perf_counter() - start
    if not estimate.converged:  # not converged (a limit) or failed: the message says which, and why
        eprint(f"mbfg crossval: warning: {not_converged_message(log, estimate, '--max-iterations')}")
    simulation = None
    if args.simulate is not None:
        from mbfg.validation import free_simulation, log_at_step

        # The stepper compiles on a first run: seconds that would otherwise pass without a line.
        if not args.quiet:
            eprint(f"mbfg crossval: compiling the {model.name} stepper (JAX) and simulating the first "
                    f"{args.simulate:g} s ...")
        started = time.perf_counter()
        # The thresholds of the whole log's range (checked above), not of the span simulated.
        thresholds, source = drift_thresholds(log, args.drift_threshold)
        simulation = free_simulation(fitted, log_at_step(log, step), seconds=args.simulate, threshold=thresholds)
        simulation = replace(simulation, threshold_source=source)
        if not args.quiet:
            eprint(f"mbfg crossval: compiled and simulated in {time.perf_counter() - started:.1f} s")
    doc = {"score": score, "log": args.log, "model": model.name, "params": args.params, "h": step,
           "weight": weight, "n": n, "iterations": estimate.iterations, "converged": estimate.converged,
           "status": estimate.status, "message": estimate.message}
    if simulation is not None:
        doc["simulation"] = simulation.to_dict()
    doc = json_safe(doc)
    if args.out:
        write_json(doc, args.out)
    if args.simulation_out and simulation is not None:
        from mbfg.logs import write_log

        try:
            write_log(args.simulation_out, simulation.t, simulation.columns())  # atomic (mbfg.atomic)
        except DataError as exc:
            raise DataError(f"--simulation-out {args.simulation_out}: {exc}") from None
    if args.json:
        print(json.dumps(doc))
    else:
        print(f"score {score:.6g}")
        if simulation is not None:
            for name, rms in simulation.rms.items():
                print(f"simulate {name} rms {rms:.6g} drift_time {simulation.drift_time[name]:.6g} "
                      f"threshold {simulation.threshold[name]:.6g}")
    sys.stdout.flush()
    eprint(
        f"mbfg crossval: score {score:.4g} per time-step over {n} time-steps of {step:.6g} s "
        f"(weight {weight:g}), state estimation {estimate.iterations} iterations, "
        f"{status_words(estimate.status, estimate.message)}; {wall_seconds(args):.1f} s wall in all (state "
        f"estimation {wall:.1f} s, compiling included)"
    )
    return 0 if estimate.converged else 1
