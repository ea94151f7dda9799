"""``mbfg mechanisms``: list the built-in planar mechanisms, or describe mechanism files.

::

    mbfg mechanisms [MECHANISM ...]
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from mbfg.cli.args import MECHANISM_HELP, Subparsers
from mbfg.cli.common import describe_mechanism

if TYPE_CHECKING:  # mbfg.planar loads JAX: not at every command's start
    from mbfg.planar import PlanarMechanism

DESCRIPTION = """\
Without arguments: list the built-in mechanisms with their generalized
coordinates and degrees of freedom. With arguments (built-in names or YAML
paths): describe those mechanisms. The degrees of freedom are the coordinates
minus the rank of the constraint Jacobian at the initial configuration; where
constraint rows are redundant (rank below the number of rows) a line says so.
"""

EPILOG = "examples:\n  mbfg mechanisms\n  mbfg mechanisms fourbar-crank path/to/mechanism.yaml\n"


def add_parser(sub: Subparsers) -> None:
    """Register ``mechanisms`` on the ``mbfg`` subcommand parsers ``sub``."""
    mechs = sub.add_parser(
        "mechanisms",
        help="list the built-in mechanisms, or describe mechanism files",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    mechs.add_argument("mechanism", nargs="*", metavar="MECHANISM", help=MECHANISM_HELP)
    mechs.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """The ``mechanisms`` subcommand (see :data:`DESCRIPTION`)."""
    from mbfg.datasets import builtin_mechanisms, load_mechanism

    if args.mechanism:
        for name in args.mechanism:
            mech = load_mechanism(name)
            print(describe_mechanism(name, mech))
            if mech.redundant_rows:
                print(f"  {_redundancy(mech)}")
        return 0
    print("built-in mechanisms (use the name wherever a MECHANISM is asked for):")
    for name, text in builtin_mechanisms().items():
        mech = load_mechanism(name)
        print(f"  {name}")
        print(f"      {text}")
        print(f"      coordinates: {', '.join(mech.coordinate_names)}   dof: {mech.dof}")
        if mech.redundant_rows:
            print(f"      {_redundancy(mech)}")
    return 0


def _redundancy(mech: PlanarMechanism) -> str:
    """One line on redundant constraint rows (call only when there are some)."""
    k = len(mech.redundant_rows)
    return (
        f"redundant constraints: {mech.m} rows of rank {mech.rank} at the initial configuration "
        f"({k} redundant, e.g. row{'s' if k > 1 else ''} {', '.join(map(str, mech.redundant_rows))}, 0-based); "
        f"dof = {mech.n} - {mech.rank} = {mech.dof}"
    )
