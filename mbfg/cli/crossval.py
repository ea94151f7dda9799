"""``mbfg crossval``: the cross-validation score of calibrated parameters on another log.

::

    mbfg crossval MODEL LOG.csv --params CALIB.json [--dt H] [--weight W] [--max-iterations N] [--simulate S]
                  [--resample H] [--json] [--quiet]
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from mbfg.cli.args import (
    LOG_HELP,
    MARKLUND_2025,
    MODEL_HELP,
    Subparsers,
    _iterations,
    _positive_float,
    add_resample_option,
)
from mbfg.cli.common import (
    _calibration_settings,
    _check_time_step,
    _compile_notice,
    _eprint,
    _json_safe,
    _model_with_params,
    _rigid_model,
    _start,
    _wall,
)
from mbfg.errors import DataError

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
calibrated model over the first S seconds of LOG, from its first angles (and
rates fitted to its first samples) with its controls, at the time-step h,
without any correction from the readings; reported per observed coordinate as
the RMS error against the log and the time at which the error first exceeds
0.1 rad (or m).

Output on stdout: 'score VALUE', with --simulate one line per coordinate
'simulate NAME rms VALUE drift_time SECONDS' (inf: within 0.1 for the whole
span); with --json one JSON object {"score", "log", "model", "params", "h",
"weight", "n", "iterations", "converged", "status", "message"} (n: the number
of time-steps; iterations, converged, status (converged, not_converged or
failed), message (the solver's reason): of the state estimation), with
--simulate also
"simulation": {"seconds", "threshold", "rms": {NAME: VALUE}, "drift_time":
{NAME: SECONDS or null for never}}. Progress lines go to stderr unless
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
        "--dt", type=_positive_float, default=None, metavar="H",
        help="estimation time-step [s] (default: the calibration's h, else the log's sample period)",
    )
    cv.add_argument(
        "--weight", type=_positive_float, default=None, metavar="W",
        help="state error weight w [rad^2/(N s)^2] (default: the calibration's w, else the model's)",
    )
    cv.add_argument(
        "--max-iterations", type=_iterations, default=50, metavar="N",  # graphs.joint.STATE_ESTIMATION_ITERATIONS
        help="iteration limit of the state estimation (default: 50); unconverged at the limit: exit status 1",
    )
    cv.add_argument(
        "--simulate", type=_positive_float, default=None, metavar="S",
        help="also free-simulate the calibrated model over the first S seconds of LOG and report the RMS error "
             "and the time until it exceeds 0.1 rad, per observed coordinate",
    )
    add_resample_option(cv)
    cv.add_argument("--json", action="store_true", help="print one JSON object instead of 'score VALUE'")
    cv.add_argument("--quiet", action="store_true", help="no progress lines (the summary line is still printed)")
    cv.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """The ``crossval`` subcommand (see :data:`DESCRIPTION`)."""
    from mbfg.cli.recordings import read_recording
    from mbfg.graphs.joint import cross_validation, not_converged_message, time_step
    from mbfg.solvers import status_words

    _start(args)
    model = _rigid_model(args.model)
    fitted = _model_with_params(args.model, args.params)
    recorded = _calibration_settings(args.params)
    if recorded.get("model") not in (None, model.name):
        _eprint(
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
    _check_time_step(log, h, what)
    if args.simulate is not None and len(log.t) and args.simulate > log.t[-1] - log.t[0]:
        raise DataError(f"--simulate {args.simulate:g}: {args.log} spans only {log.t[-1] - log.t[0]:.6g} s")
    # The estimation's own h and stride: the JSON's h is then exact to the log's decimals (0.001, not the
    # 0.0010000000000000009 of a difference of times), even from a calibration file that recorded the noisy one.
    step, stride = time_step(log, h)
    n = len(range(0, len(log.t), stride))
    if not args.quiet:
        _eprint(
            f"mbfg crossval: {model.name} with the parameters of {args.params}; state estimation over "
            f"{len(log.t)} rows of {args.log}, h = {step:.6g} s, weight {weight:g}"
        )
    start = time.perf_counter()
    # The calibration's free parameters held at their values: its factor types, so its compiled programs.
    free = [name for name in recorded.get("free", []) if name in model.parameters]
    with _compile_notice("crossval", args.quiet):
        score, estimate = cross_validation(model, log, fitted.parameters.numpy_values(), h=step, weight=weight,
                                           quiet=args.quiet, free=free, max_iterations=args.max_iterations)
    wall = time.perf_counter() - start
    if not estimate.converged:  # not converged (a limit) or failed: the message says which, and why
        _eprint(f"mbfg crossval: warning: {not_converged_message(log, estimate, '--max-iterations')}")
    simulation = None
    if args.simulate is not None:
        from mbfg.validation import free_simulation, log_at_step

        # The stepper compiles on a first run: seconds that would otherwise pass without a line.
        if not args.quiet:
            _eprint(f"mbfg crossval: compiling the {model.name} stepper (JAX) and simulating the first "
                    f"{args.simulate:g} s ...")
        started = time.perf_counter()
        simulation = free_simulation(fitted, log_at_step(log, step), seconds=args.simulate)
        if not args.quiet:
            _eprint(f"mbfg crossval: compiled and simulated in {time.perf_counter() - started:.1f} s")
    if args.json:
        doc = {"score": score, "log": args.log, "model": model.name, "params": args.params, "h": step,
               "weight": weight, "n": n, "iterations": estimate.iterations, "converged": estimate.converged,
               "status": estimate.status, "message": estimate.message}
        if simulation is not None:
            doc["simulation"] = {"seconds": simulation.seconds, "threshold": simulation.threshold,
                                 "rms": simulation.rms, "drift_time": simulation.drift_time}
        print(json.dumps(_json_safe(doc)))
    else:
        print(f"score {score:.6g}")
        if simulation is not None:
            for name, rms in simulation.rms.items():
                print(f"simulate {name} rms {rms:.6g} drift_time {simulation.drift_time[name]:.6g}")
    sys.stdout.flush()
    _eprint(
        f"mbfg crossval: score {score:.4g} per time-step over {n} time-steps of {step:.6g} s "
        f"(weight {weight:g}), state estimation {estimate.iterations} iterations, "
        f"{status_words(estimate.status, estimate.message)}; {_wall(args):.1f} s wall in all (state "
        f"estimation {wall:.1f} s, compiling included)"
    )
    return 0 if estimate.converged else 1
