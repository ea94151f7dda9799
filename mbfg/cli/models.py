"""``mbfg models``: list the built-in 3D rigid-body models, or describe models and their parameters.

::

    mbfg models [MODEL ...]
"""

from __future__ import annotations

import argparse

from mbfg.cli.args import MODEL_HELP, Subparsers
from mbfg.cli.common import _rigid_model

DESCRIPTION = """\
Without arguments: list the built-in 3D rigid-body models, one line each. With
arguments (built-in names or model-file paths): describe those models: bodies,
joints, observations (the log columns), controls, and every parameter with its
value, unit, bounds [lower, upper] and whether calibration estimates it (free)
or holds it (fixed).
"""

EPILOG = ("examples:\n  mbfg models\n  mbfg models furuta\n  mbfg models pendulum path/to/chain.yaml\n"
          "  mbfg models path/to/robot.urdf\n")


def add_parser(sub: Subparsers) -> None:
    """Register ``models`` on the ``mbfg`` subcommand parsers ``sub``."""
    models = sub.add_parser(
        "models",
        help="list the built-in 3D rigid-body models, or describe models and their parameters",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    models.add_argument("model", nargs="*", metavar="MODEL", help=MODEL_HELP)
    models.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """The ``models`` subcommand (see :data:`DESCRIPTION`)."""
    from mbfg.models import BUILTIN

    if args.model:
        for i, name in enumerate(args.model):
            if i:
                print()
            print(_rigid_model(name).summary())
        return 0
    print("built-in models (use the name wherever a MODEL is asked for; 'mbfg models NAME' for its parameters):")
    width = max(len(name) for name in BUILTIN)
    for name in BUILTIN:
        model = _rigid_model(name)
        print(f"  {name:<{width}}  {model.description}")
    return 0
