"""``mbfg mechanisms``: list the built-in planar mechanisms, or describe mechanism files.

::

    mbfg mechanisms [MECHANISM ...]
"""

from __future__ import annotations

import argparse

from mbfg.cli.args import MECHANISM_HELP, Subparsers
from mbfg.cli.common import _describe

DESCRIPTION = """\
Without arguments: list the built-in mechanisms with their generalized
coordinates and degrees of freedom. With arguments (built-in names or YAML
paths): describe those mechanisms.
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
            print(_describe(name, load_mechanism(name)))
        return 0
    print("built-in mechanisms (use the name wherever a MECHANISM is asked for):")
    for name, text in builtin_mechanisms().items():
        mech = load_mechanism(name)
        print(f"  {name}")
        print(f"      {text}")
        print(f"      coordinates: {', '.join(mech.coordinate_names)}   dof: {mech.dof}")
    return 0
