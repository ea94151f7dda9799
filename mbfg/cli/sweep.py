"""``mbfg sweep``: a grid of method parameters x recordings -> calibrations and the cross-validation
matrix, on a local or remote Dask cluster (:mod:`mbfg.sweep`).

::

    mbfg sweep MODEL LOG... [--dt H,...] [--weight W,...] [--eps E,...] [--free NAME,...] [--params FILE]
               [--scheduler ADDR | --workers N] [--no-crossval] [--simulate S] [--retry-failed]
               [--allow-failures] [--jax-cache DIR] --out SWEEP.csv [--plot FIG.png] [--resample H]
               [--columns T,NAMES...] [--quiet]
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from mbfg.cli.args import MARKLUND_2025, Subparsers, add_resample_option, iteration_count, positive_float, whole_number
from mbfg.cli.common import (
    check_figure,
    check_output,
    check_outputs,
    check_time_step,
    model_input,
    model_with_params,
    parse_free,
    save_figure,
    start_clock,
    wall_seconds,
)

if TYPE_CHECKING:
    from mbfg.logs import Log

DESCRIPTION = """\
Sweep the method parameters of a calibration (Marklund et al. 2025, sec. 4):
every combination of the time-steps --dt, the state error weights --weight and
the compliances --eps, on every recording LOG, is one calibration ('mbfg
calibrate' of MODEL); then every tuned model is scored on every other
recording (the cross-validation of 'mbfg crossval', at its own h, w and eps).
The tasks run on a Dask cluster: by default one started here with one worker
process per core (--workers N for another number), or the running scheduler
at --scheduler ADDR (e.g. tcp://head-node:8786, started with 'dask scheduler'
and 'dask worker ADDR' on the cluster's machines; they need mbfg installed).

Each LOG is a log in the standard format or a lab's own recording (a DFKI
double pendulum trajectory_NN.csv, a QUBE-Servo episode CSV), read as by
'mbfg calibrate'; --resample H puts every recording on a uniform grid of step
H [s], which the DFKI files (not uniformly sampled) need.

--eps sets every compliance parameter of the model (eps_lin [m/N], eps_rot
[rad/(N m)], a contact's eps) to the same value, the global hinge compliance
of Marklund et al. 2025; without it the model's own compliances are used.

Results (--out): a CSV file, one row per task: kind (calibration or crossval),
log (the recording tuned on), scored_log, h [s], weight, eps, status (ok or
error), error (the message of a failed task: the others still run), cost,
cost_observation, cost_impulse (per time-step), score (cross-validation cost
per time-step), iterations, converged, solve_status (converged,
not_converged or failed) and solve_message (the solver's reason) (of the
calibration, or of the cross-validation's state estimation),
sigma_observation, sigma_impulse,
wall_s, compile_s, worker, then value:NAME and std:NAME per free parameter.
The file is rewritten after every finished task; running the same command
again skips the rows it already has (--retry-failed runs failed ones again),
so an interrupted sweep resumes. When a row failed the command exits with
status 1 (--allow-failures: 0), so that a script sees it.

Workers reuse compiled JAX functions: each keeps the model for the whole
sweep, and JAX's persistent compilation cache lives in --jax-cache (default:
the worker's own, MBFG_CACHE_DIR or ~/.cache/mbfg/jax on its machine; a local
cluster's workers share this command's). One progress line per finished
task goes to stderr unless --quiet; a summary and the cross-validation matrix
are printed at the end. --plot FIG.png draws Figures 4 and 6 of Marklund et al.
2025 (identified parameters and cost against each swept w, eps and h) and the
cross-validation heat map
(needs matplotlib: pip install 'mbfg[plot]'; checked before the sweep starts).
"""

EPILOG = f"""\
examples:
  mbfg sweep pendulum rec1.csv rec2.csv --free J,b --dt 1e-3,2e-3 --weight 1e4,1e6 --out sweep.csv
  mbfg sweep furuta swingup.csv release.csv --weight 1e4,1e6,1e8 --eps 1e-8,1e-6 --out sweep.csv --plot sweep.png
  mbfg sweep furuta run*.csv --dt 2e-3 --scheduler tcp://head-node:8786 --out sweep.csv --quiet
  mbfg sweep dfki-double-pendulum trajectory_00.csv trajectory_01.csv --resample 0.002 --dt 4e-3 --out sweep.csv

reference:
{MARKLUND_2025}
"""


def _number_list(what: str, example: str) -> Callable[[str], list[float]]:
    def parse(text: str) -> list[float]:
        items = [item.strip() for item in text.split(",")]
        values = []
        for item in items:
            try:
                value = float(item)
            except ValueError:
                raise argparse.ArgumentTypeError(
                    f"expected comma-separated numbers > 0 ({what}), e.g. {example}; got {item!r}") from None
            if not (math.isfinite(value) and value > 0):
                raise argparse.ArgumentTypeError(f"expected finite numbers > 0 ({what}), got {item!r}")
            values.append(value)
        return values

    return parse


def _address(text: str) -> str:
    """A Dask scheduler address: ``[protocol://]host:port`` (tcp, tls, ws, wss, ucx, inproc)."""
    if not re.fullmatch(r"((tcp|tls|ws|wss|ucx|inproc)://)?(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.\-]+)(:\d{1,5})?/?", text):
        raise argparse.ArgumentTypeError(f"expected a Dask scheduler address such as tcp://host:8786, got {text!r}")
    return text


def add_parser(sub: Subparsers) -> None:
    """Register ``sweep`` on the ``mbfg`` subcommand parsers ``sub``."""
    p = sub.add_parser(
        "sweep",
        help="calibrations over a grid of h, w, eps and recordings, and the cross-validation matrix, on Dask",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("model", metavar="MODEL", help="built-in model name (see 'mbfg models') or path of a model file")
    p.add_argument("logs", nargs="+", metavar="LOG",
                   help="recordings in the standard log format (CSV), or lab recordings: DFKI double pendulum "
                        "trajectory_NN.csv, QUBE-Servo episode CSV (see --resample)")
    p.add_argument("--dt", type=_number_list("time-steps [s]", "1e-3,2e-3"), default=None, metavar="H,...",
                   help="estimation time-steps [s], each a whole multiple of the sample period "
                        "(default: each log's period)")
    p.add_argument("--weight", type=_number_list("state error weights", "1e4,1e6"), default=None, metavar="W,...",
                   help="state error weights w (default: the model's, 1e6 for most; 'mbfg models MODEL')")
    p.add_argument("--eps", type=_number_list("compliances", "1e-8,1e-6"), default=None, metavar="E,...",
                   help="global compliances for every compliance parameter (default: the model's own)")
    p.add_argument("--free", metavar="NAME,...", help="parameters to estimate (default: the model's free ones)")
    p.add_argument("--params", metavar="FILE", help="parameter file: initial values, bounds, free flags")
    p.add_argument("--max-iterations", type=iteration_count, default=20, metavar="N",
                   help="Levenberg-Marquardt iterations at most, per calibration (default: %(default)s)")
    p.add_argument("--crossval-iterations", type=iteration_count, default=None, metavar="N",  # None: sweep()'s default
                   help="Levenberg-Marquardt iterations at most, per cross-validation's state estimation (default: "
                        "50, as 'mbfg crossval')")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--scheduler", type=_address, metavar="ADDR", help="address of a running Dask scheduler, e.g. tcp://host:8786")
    where.add_argument("--workers", type=whole_number(1, "a whole number of workers", "at least 1 worker"),
                       default=None, metavar="N", help="worker processes of the local cluster (default: one per core)")
    p.add_argument("--no-crossval", action="store_true", help="calibrations only, no cross-validation matrix")
    p.add_argument("--simulate", type=positive_float, default=None, metavar="S",
                   help="also free-simulate each tuned model over the first S seconds of every other recording "
                        "(columns sim_rms:NAME [rad] and sim_drift:NAME [s] of the cross-validation rows)")
    p.add_argument("--retry-failed", action="store_true", help="run the failed rows of --out again")
    p.add_argument("--allow-failures", action="store_true",
                   help="exit 0 even when some cells failed (default: exit status 1 then, the rows say why)")
    p.add_argument("--jax-cache", metavar="DIR", default=None,
                   help="JAX persistent compilation cache folder on the workers (default: each worker's own, "
                        "MBFG_CACHE_DIR or ~/.cache/mbfg/jax)")
    p.add_argument("--out", required=True, metavar="SWEEP.csv", help="results file (CSV); resumed if it exists")
    p.add_argument("--plot", metavar="FIG.png", help="also draw the parameters and cost against each swept w, eps "
                                                     "and h, and the cross-validation heat map (needs matplotlib)")
    add_resample_option(p)
    p.add_argument("--quiet", action="store_true", help="no progress lines (the summary is still printed)")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """The ``sweep`` subcommand (see :data:`DESCRIPTION`)."""
    from mbfg.cli.recordings import read_recording
    from mbfg.errors import DataError, ModelError
    from mbfg.graphs.joint import time_step
    from mbfg.optional import require
    from mbfg.sweep import sweep

    start_clock(args)
    require("distributed", "mbfg sweep")  # the sweep extra: said before anything is read
    inputs = [model_input(args.model), ("--params", args.params), *(("LOG", path) for path in args.logs)]
    check_output(args.out, inputs=inputs)  # the results file is read too (resumed), but never a recording
    if args.plot:
        check_output(args.plot, "figure", "--plot", inputs=[*inputs, ("--out", args.out)])
        check_outputs([("--out", args.out), ("--plot", args.plot)])
        check_figure(args.plot, "plotting a sweep")  # a missing matplotlib is said now, not after the sweep
    model = model_with_params(args.model, args.params)
    free = parse_free(model, args.free) if args.free is not None else None
    if not (free if free is not None else list(model.parameters.free)):
        raise ModelError(f"{model.name} marks no parameter free; name those to estimate with --free "
                         f"(its parameters: {', '.join(model.parameters)})")
    logs = {}
    for path in args.logs:
        if path in logs:
            raise DataError(f"{path}: recording given twice")
        logs[path] = read_recording(path, model, args.resample, args.quiet, "mbfg sweep", args.columns)
        time_step(logs[path], None)  # a recording no cell can use (one row, irregular) is refused now, as calibrate
    for h in args.dt or []:
        # An h no recording can use is a user error (exit 2); one that only some can use fails their cells.
        if all(_fails(log, h) for log in logs.values()):
            check_time_step(next(iter(logs.values())), h, f"--dt {h:g}")
    print(f"mbfg sweep: {model.name}, {len(logs)} recordings x {len(args.dt or [None])} h x "
          f"{len(args.weight or [None])} w x "
          f"{len(args.eps or [None])} eps; " + (f"scheduler {args.scheduler}" if args.scheduler
                                                else f"local cluster of {args.workers or 'one per core'} workers"),
          file=sys.stderr, flush=True)
    result = sweep(model, logs, h=args.dt, weight=args.weight, eps=args.eps, free=free, out=args.out,
                   crossval=not args.no_crossval, scheduler=args.scheduler, n_workers=args.workers,
                   retry_failed=args.retry_failed, cache_dir=args.jax_cache, max_iterations=args.max_iterations,
                   crossval_iterations=args.crossval_iterations,
                   simulate=args.simulate, quiet=args.quiet)
    frame = result.frame
    failed = int((frame["status"] != "ok").sum())
    if not args.no_crossval and len(logs) > 1:
        import pandas as pd

        with pd.option_context("display.width", 160, "display.max_columns", 20):
            print("cross-validation (rows: tuned on; columns: scored on; diagonal: own cost)")
            print(result.matrix().to_string(float_format=lambda x: f"{x:.4g}"))
        sys.stdout.flush()
    if args.plot:
        save_figure(result.plot(), args.plot)
    written = " and ".join([args.out, *([args.plot] if args.plot else [])])
    print(f"mbfg sweep: {len(frame)} rows ({result.computed} computed now, {len(frame) - result.computed} from "
          f"{args.out}), {failed} failed; {wall_seconds(args):.1f} s wall in all (sweep {result.wall_s:.1f} s, cluster "
          f"start included); wrote {written}", file=sys.stderr, flush=True)
    if failed and not args.allow_failures:
        print(f"mbfg sweep: {failed} of {len(frame)} rows failed (their 'error' column says why; --retry-failed runs "
              f"them again); exit status 1 (--allow-failures: 0)", file=sys.stderr, flush=True)
        return 1
    return 0


def _fails(log: Log, h: float) -> bool:
    from mbfg.errors import DataError

    try:
        check_time_step(log, h, "")
    except DataError:
        return True
    return False
