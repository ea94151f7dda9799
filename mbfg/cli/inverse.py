"""``mbfg inverse``: the generalized forces that produce a prescribed motion of a planar mechanism.

::

    mbfg inverse MECHANISM TRAJECTORY --coordinate I[,J,...] --out forces.csv
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from mbfg.cli.args import (
    BLANCO_CLARACO_2021,
    GRAVITY_HELP,
    MECHANISM_HELP,
    Subparsers,
    finite_float,
    gravity_value,
)
from mbfg.cli.common import (
    check_output,
    describe_mechanism,
    eprint,
    max_phi,
    start_clock,
    wall_seconds,
    write_csv,
)
from mbfg.errors import DataError, ModelError

if TYPE_CHECKING:
    from mbfg.planar import PlanarMechanism

BUILTIN_TRAJECTORY = "builtin:fourbar-crank"

DESCRIPTION = f"""\
Inverse dynamics: given the prescribed motion of some coordinates ("imposed"
coordinates, e.g. a crank angle), find the generalized force on each of them
that produces it, under gravity along -y, with an inverse-dynamics factor
graph (Blanco-Claraco et al. 2021). Impose as many coordinates as the
mechanism has degrees of freedom, chosen so that they determine its
configuration (for a four-bar, the crank angle).

TRAJECTORY is a text file in the MBSE format: lines starting with % (or #) are
comments; every other line is a row 't v1 [v2 ...]' of whitespace-separated
numbers: time [s], uniformly spaced, then the values of the imposed
coordinates [m or rad] in the order given by --coordinate. The first row is
the initial configuration: the other coordinates are solved from it, starting
from the mechanism's YAML positions (which pick the assembly branch).
The word {BUILTIN_TRAJECTORY} instead of a file uses the built-in crank
motion theta1(t) = 1.2 (1 - cos 2t) rad, t = 0 .. 9.995 s every 5 ms
(2000 samples), meant for the fourbar-crank mechanism with --coordinate theta1.

Output CSV columns: t [s], then Q_<name> for each imposed coordinate in the
order given: the generalized force on it [N for x, y coordinates; N m for
angles], positive along the coordinate.

The graph is solved in four Gauss-Newton stages (positions; velocities and
accelerations; velocity constraints; forces). Progress lines (the start and
end of every stage) and a one-line summary go to stderr. A stage that does
not converge within its iterations is reported on stderr, the forces are
still written, and the exit status is 1.
"""

EPILOG = f"""\
examples:
  mbfg inverse fourbar-crank {BUILTIN_TRAJECTORY} --coordinate theta1 --out torque.csv
  mbfg inverse fourbar-crank {BUILTIN_TRAJECTORY} --coordinate theta1 --until 2 --out - > first2s.csv
  mbfg inverse fourbar-crank crank.txt --coordinate 4 --out torque.csv
  mbfg inverse my_mechanism.yaml motion.txt --coordinate x1,y1 --out forces.csv

A trajectory file for 'mbfg inverse fourbar-crank crank.txt --coordinate theta1':
  % t[s]   theta1[rad]
  0.000    0.0
  0.005    5.99995e-05
  0.010    2.39992e-04
  ...

reference:
{BLANCO_CLARACO_2021}
"""


def add_parser(sub: Subparsers) -> None:
    """Register ``inverse`` on the ``mbfg`` subcommand parsers ``sub``."""
    inv = sub.add_parser(
        "inverse",
        help="generalized forces that produce a prescribed motion (inverse dynamics)",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    inv.add_argument("mechanism", metavar="MECHANISM", help=MECHANISM_HELP)
    inv.add_argument(
        "trajectory",
        metavar="TRAJECTORY",
        help=f"MBSE trajectory file (rows 't v1 [v2 ...]'), or {BUILTIN_TRAJECTORY}",
    )
    inv.add_argument(
        "--coordinate",
        required=True,
        metavar="I[,J,...]",
        help="the imposed coordinates, comma-separated: 0-based indices into q or names (x1, theta1, ...), "
        "in the order of the trajectory's value columns",
    )
    inv.add_argument(
        "--until",
        type=finite_float,
        default=None,
        metavar="T",
        help="use only the trajectory rows with t <= T [s] (default: all rows)",
    )
    inv.add_argument("--gravity", type=gravity_value, default=9.81, help=GRAVITY_HELP)
    inv.add_argument("--out", required=True, metavar="FILE.csv", help="output CSV ('-' for standard output)")
    inv.add_argument("--quiet", action="store_true", help="no progress lines (the summary line is still printed)")
    inv.set_defaults(handler=run)


def _parse_coordinates(mech: PlanarMechanism, text: str) -> list[int]:
    items = [item.strip() for item in text.split(",")]
    if not text.strip() or any(not item for item in items):
        raise ModelError(
            f"--coordinate {text!r}: expected comma-separated indices or names, e.g. 4 or theta1 or x1,y1; "
            f"{mech.name} has {list(mech.coordinate_names)}"
        )
    try:
        indices = [mech.coordinate_index(item) for item in items]
    except ModelError as exc:
        raise ModelError(f"--coordinate {text!r}: {exc}") from None
    seen: dict[int, str] = {}
    for item, index in zip(items, indices):
        if index in seen:
            raise ModelError(
                f"--coordinate {text!r}: coordinate {mech.coordinate_names[index]} is given twice "
                f"({seen[index]!r} and {item!r})"
            )
        seen[index] = item
    return indices


def _load_trajectory(spec: str) -> tuple[np.ndarray, np.ndarray, str]:
    from mbfg.datasets import fourbar_crank_trajectory
    from mbfg.graphs import load_mbse_trajectory

    if spec == BUILTIN_TRAJECTORY:
        t, theta = fourbar_crank_trajectory()
        return t, theta[:, None], spec
    if spec.startswith("builtin:"):
        raise DataError(f"unknown built-in trajectory {spec!r}; built-in trajectories: {BUILTIN_TRAJECTORY}")
    path = Path(spec)
    if not path.exists():
        raise DataError(f"{spec}: trajectory file not found")
    if path.is_dir():
        raise DataError(f"{spec}: is a folder; expected a trajectory file")
    t, values = load_mbse_trajectory(spec)
    return t, values, spec


def run(args: argparse.Namespace) -> int:
    """The ``inverse`` subcommand (see :data:`DESCRIPTION`)."""
    from mbfg.datasets import load_mechanism
    from mbfg.graphs import solve_inverse_dynamics

    start_clock(args)
    check_output(args.out, inputs=[("MECHANISM", args.mechanism), ("TRAJECTORY", args.trajectory)])
    mech = load_mechanism(args.mechanism)
    imposed = _parse_coordinates(mech, args.coordinate)
    names = [mech.coordinate_names[i] for i in imposed]
    if len(imposed) != mech.dof:
        raise ModelError(
            f"--coordinate {args.coordinate!r}: {mech.name} has {mech.dof} degree(s) of freedom "
            f"({mech.n} coordinates minus the rank {mech.rank} of its {mech.m} constraint rows), "
            f"so impose exactly {mech.dof} coordinate(s); got {len(imposed)} ({', '.join(names)})"
        )
    t, values, source = _load_trajectory(args.trajectory)
    if args.until is not None:
        keep = t <= args.until + 1e-9 * max(1.0, abs(args.until))
        if keep.sum() < 3:
            raise DataError(
                f"--until {args.until:g}: keeps {int(keep.sum())} row(s) of {source} (t from {t[0]:g} s); "
                "at least 3 samples are needed"
            )
        t, values = t[keep], values[keep]
    if values.shape[1] != len(imposed):
        raise DataError(
            f"{source}: {values.shape[1]} value column(s) after t, but --coordinate names "
            f"{len(imposed)} coordinate(s) ({', '.join(names)}); expected one column per imposed coordinate"
        )
    if not args.quiet:
        eprint(
            f"mbfg inverse: {describe_mechanism(mech.name, mech)}; {len(t)} samples from {source}, "
            f"imposed {', '.join(names)}, g = {args.gravity:g} m/s^2"
        )
    start = time.perf_counter()
    result = solve_inverse_dynamics(mech, t, values, imposed, g=args.gravity, quiet=args.quiet)
    wall = time.perf_counter() - start
    write_csv(result.to_dataframe(), args.out)
    eprint(
        f"mbfg inverse: {len(result.t)} samples, {float(t[-1] - t[0]):g} s in {wall_seconds(args):.2f} s wall in all "
        f"(solve {wall:.2f} s), "
        f"Gauss-Newton iterations per stage {result.stage_iterations}, "
        f"max |Phi(q)| = {max_phi(mech, result.q):.2e}"
        + ("" if args.out == "-" else f"; wrote {args.out}")
    )
    if not result.converged:
        failed = [str(stage) for stage, ok in enumerate(result.stage_converged, start=1) if not ok]
        eprint(
            f"mbfg inverse: warning: Gauss-Newton stage(s) {', '.join(failed)} of 4 did not converge in "
            f"{result.stage_iterations[int(failed[0]) - 1]} iterations; the forces written are not a solution. "
            "Check that --coordinate determines the configuration and that the trajectory is smooth and "
            "sampled finely enough"
        )
        return 1
    return 0
