"""``mbfg models``: list the built-in 3D rigid-body models, or describe models and their parameters.

::

    mbfg models [MODEL ...]
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from mbfg.cli.args import MODEL_HELP, Subparsers
from mbfg.cli.common import rigid_model

if TYPE_CHECKING:
    from mbfg.rigid import RigidModel

DESCRIPTION = """\
Without arguments: list the built-in 3D rigid-body models, one line each. With
arguments (built-in names or model-file paths): describe those models: bodies,
joints, observations (the log columns), controls, the state error weight w with
its unit (readings against impulses: m^2/(N s)^2 for a slider read in metres,
rad^2/(N m s)^2 for a hinge read in radians), every parameter with its value,
unit, bounds [lower, upper] and whether calibration estimates it (free) or holds
it (fixed); then the equation of motion along each joint as the model's parts
write it (e.g. the linear stage's (M + J_r) x'' = K_F current - F_v x' - F_c
sign(x') + F_0: its carriage mass M and reflected rotor inertia J_r enter only
as their sum, and a positive offset F_0 pushes towards +x), and each
parameter's role in it.
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


def describe(model: RigidModel) -> str:
    """The model's summary (:meth:`mbfg.rigid.RigidModel.summary`) with w's unit, then its equations of motion and
    its parameters' roles (:func:`mbfg.roles.roles_text`)."""
    from mbfg.roles import roles_text, weight_unit

    summary = model.summary()
    line = f"state error weight w: {model.weight:g} (calibration's default)"
    roles = roles_text(model)
    if line in summary:  # the unit where the value is; the roles' own line about it is then not needed
        summary = summary.replace(line, f"state error weight w: {model.weight:g} {weight_unit(model)} "
                                        "(calibration's default)")
        roles = roles.split("\n", 1)[1] if "\n" in roles else ""
    return summary + ("\n" + roles if roles else "")


def run(args: argparse.Namespace) -> int:
    """The ``models`` subcommand (see :data:`DESCRIPTION`)."""
    from mbfg.models import BUILTIN

    if args.model:
        for i, name in enumerate(args.model):
            if i:
                print()
            print(describe(rigid_model(name)))
        return 0
    print("built-in models (use the name wherever a MODEL is asked for; 'mbfg models NAME' for its parameters):")
    width = max(len(name) for name in BUILTIN)
    for name in BUILTIN:
        model = rigid_model(name)
        print(f"  {name:<{width}}  {model.description}")
    return 0
