"""``mbfg forward``: forward dynamics of a planar mechanism released from rest, written to CSV.

::

    mbfg forward MECHANISM [--dt 0.001] [--duration 5] [--lag N | --batch] --out q.csv
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from mbfg.cli.args import (
    BLANCO_CLARACO_2021,
    GRAVITY_HELP,
    MECHANISM_HELP,
    Subparsers,
    gravity_value,
    positive_float,
    positive_steps,
)
from mbfg.cli.common import check_output, describe_mechanism, eprint, max_phi, start_clock, wall_seconds, write_csv
from mbfg.errors import ModelError

DESCRIPTION = """\
Simulate a mechanism released from rest in its initial configuration (the
positions written in its YAML file), under gravity along -y, with a
forward-dynamics factor graph (Blanco-Claraco et al. 2021). By default the
problem is solved online with a fixed-lag smoother over a window of --lag
steps; --batch solves the whole horizon at once (Gauss-Newton,
Levenberg-Marquardt where a step fails, started from the trajectory of a
fixed-lag run; memory grows with the number of steps). A batch solve that does
not reach a minimum within its iterations is reported on stderr, its result
still written, and the exit status is 1.

Output CSV columns: t [s], then every generalized coordinate of the mechanism,
named as 'mbfg mechanisms' lists them: x1,y1,x2,y2,... [m] for the free points
in the order they appear in the YAML file (fixed points are not coordinates),
then theta1,theta2,... [rad] for relative-angle coordinates. One row per time
step, t = 0, dt, ..., duration. With --velocities, the velocities follow as
dx1,dy1,... [m/s, rad/s].

Progress lines (with --batch: those of the fixed-lag start, then every
iteration with its cost) and a final one-line summary (steps, the command's
wall time, the solve's wall time and simulated seconds per wall second of it,
mean solver iterations, largest constraint residual max |Phi(q)| over the
output) go to stderr. With --batch the summary also gives how far the solve
moved its fixed-lag start (the largest coordinate difference): the
discretization is overdetermined, and the whole-horizon least squares spreads
its compromise over the horizon, so the two differ more the longer it is (the
four-bar: 1.7e-8 m at 1 s, 3.2e-6 m at 5 s).
"""

EPILOG = f"""\
examples:
  mbfg forward fourbar --duration 5 --out fourbar.csv
  mbfg forward pendulum --dt 0.002 --duration 3 --coords independent --out pendulum.csv
  mbfg forward fourbar --duration 0.2 --batch --out fourbar-batch.csv
  mbfg forward path/to/mechanism.yaml --duration 2 --lag 10 --smoother batch --out - > q.csv

reference:
{BLANCO_CLARACO_2021}
"""


def add_parser(sub: Subparsers) -> None:
    """Register ``forward`` on the ``mbfg`` subcommand parsers ``sub``."""
    fwd = sub.add_parser(
        "forward",
        help="simulate a mechanism (forward dynamics) and write its coordinates to CSV",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    fwd.add_argument("mechanism", metavar="MECHANISM", help=MECHANISM_HELP)
    fwd.add_argument("--dt", type=positive_float, default=0.001, help="time step [s] (default: %(default)s)")
    fwd.add_argument("--duration", type=positive_float, default=5.0, help="simulated time [s] (default: %(default)s)")
    horizon = fwd.add_mutually_exclusive_group()
    horizon.add_argument(
        "--lag", type=positive_steps, default=2, metavar="N",
        help="fixed-lag smoother window, in time steps (default: %(default)s)",
    )
    horizon.add_argument(
        "--batch", action="store_true", help="solve the whole horizon at once instead of with a fixed-lag smoother"
    )
    fwd.add_argument(
        "--coords",
        choices=("dependent", "independent"),
        default="dependent",
        help="formulation: all natural coordinates (dependent) or dof independent ones (independent) "
        "(default: %(default)s)",
    )
    fwd.add_argument(
        "--smoother",
        choices=("incremental", "batch"),
        default="incremental",
        help="fixed-lag smoother: iSAM2-based (incremental) or Levenberg-Marquardt in the window (batch) "
        "(default: %(default)s)",
    )
    fwd.add_argument("--gravity", type=gravity_value, default=9.81, help=GRAVITY_HELP)
    fwd.add_argument("--velocities", action="store_true", help="also write the velocities d<name>")
    fwd.add_argument("--out", required=True, metavar="FILE.csv", help="output CSV ('-' for standard output)")
    fwd.add_argument("--quiet", action="store_true", help="no progress lines (the summary line is still printed)")
    fwd.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """The ``forward`` subcommand (see :data:`DESCRIPTION`)."""
    from mbfg.datasets import load_mechanism
    from mbfg.graphs import simulate_forward
    from mbfg.limits import steps_of

    start_clock(args)
    check_output(args.out, inputs=[("MECHANISM", args.mechanism)])
    mech = load_mechanism(args.mechanism)
    window = None if args.batch else args.lag
    n_steps = int(round(steps_of(args.duration, args.dt, "--duration", "--dt")))
    if n_steps < 1:
        raise ModelError(f"--duration {args.duration} s is shorter than one time step --dt {args.dt} s")
    if not args.quiet:
        how = "batch over the whole horizon" if window is None else f"fixed-lag window {window} steps, {args.smoother}"
        eprint(
            f"mbfg forward: {describe_mechanism(mech.name, mech)}; {n_steps} steps of {args.dt:g} s, "
            f"{args.coords} coordinates, {how}, g = {args.gravity:g} m/s^2"
        )
    start = time.perf_counter()
    result = simulate_forward(
        mech,
        args.dt,
        args.duration,
        g=args.gravity,
        coordinates=args.coords,
        window=window,
        smoother=args.smoother,
        quiet=args.quiet,
    )
    wall = time.perf_counter() - start
    frame = result.to_dataframe()
    if not args.velocities:
        frame = frame[["t", *result.coordinate_names]]
    write_csv(frame, args.out)
    simulated = float(result.t[-1] - result.t[0])
    if window is None:  # one solve: its count, and whether it converged (0: the start was a minimum)
        per = "iterations (batch solve)"
        iterations = (f"{result.iterations[0]}, {'converged' if result.converged else 'NOT converged'}, "
                      f"{result.start_difference:.2e} from its fixed-lag start")
    else:
        per = "mean solver iterations per step"
        iterations = "n/a" if not result.iterations else f"{np.mean(result.iterations):.2f}"
    eprint(
        f"mbfg forward: {len(result.t) - 1} steps, {simulated:g} s simulated in {wall_seconds(args):.2f} s wall in all "
        f"(solve {wall:.2f} s, {simulated / wall if wall > 0 else float('inf'):.3g} simulated s per wall s), "
        f"{per} {iterations}, max |Phi(q)| = {max_phi(mech, result.q):.2e}"
        + ("" if args.out == "-" else f"; wrote {args.out}")
    )
    if result.converged is False:
        eprint(
            f"mbfg forward: warning: the batch solve did not converge in {result.iterations[0]} iterations "
            f"(its Gauss-Newton model still predicts a decrease); the trajectory written is not a solution. "
            f"Use the fixed-lag smoother (drop --batch) or a shorter --duration"
        )
        return 1
    return 0
