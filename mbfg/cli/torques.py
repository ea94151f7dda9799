"""``mbfg torques``: the joint torques a URDF robot's model predicts for a recorded trajectory (inverse dynamics).

::

    mbfg torques ROBOT.urdf LOG.csv [--smoothing LAM] [--out TORQUES.csv]
"""

from __future__ import annotations

import argparse

from mbfg.cli.args import Subparsers, finite_float
from mbfg.cli.common import check_output, eprint, start_clock, wall_seconds, write_csv

DESCRIPTION = """\
Inverse dynamics of a fixed-base URDF robot along a recorded trajectory: the
joint torques [N m; N for prismatic joints] its model needs to follow the
recorded joint angles, to set beside the torques the rig measured.

LOG is a CSV log in the standard format: a column t [s] (strictly increasing)
and one column per moving joint, named as the URDF's joint, holding its angle
[rad] (or position [m]); other columns are ignored. Every angle must be given
(no empty cells).

Rates and accelerations: each joint's angles are fitted by a cubic smoothing
spline (scipy's make_smoothing_spline; penalty LAM times the integral of the
squared second derivative, LAM chosen by generalized cross-validation unless
--smoothing gives it), and the spline's value, first and second derivatives
at the samples are used. Cross-validation costs seconds of CPU per joint per
10 000 samples; --smoothing skips it. Within a few samples of either end of the log the
accelerations are biased (the spline's ends are natural: zero curvature).

Torques: the recursive Newton-Euler algorithm on the URDF's tree (links fixed
to each other merged; full inertia tensors), gravity 9.81 m/s^2 along -z of
the base link.

Output CSV columns: t [s], then tau_<joint> for each moving joint in tree
order (parents first): the torque (force) the joint's actuator applies to its
child link, positive about (along) the joint's axis.
"""

EPILOG = """\
examples:
  mbfg torques panda.urdf log.csv --out torques.csv
  mbfg torques panda.urdf log.csv --smoothing 1e-9 --out - | head
"""


def add_parser(sub: Subparsers) -> None:
    """Register ``torques`` on the ``mbfg`` subcommand parsers ``sub``."""
    cmd = sub.add_parser(
        "torques",
        help="joint torques of a URDF robot along a recorded trajectory (inverse dynamics)",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    cmd.add_argument("robot", metavar="ROBOT.urdf", help="the robot's URDF file (fixed base)")
    cmd.add_argument("log", metavar="LOG.csv", help="log: t and one angle column per moving joint")
    cmd.add_argument("--smoothing", type=finite_float, default=None, metavar="LAM",
                     help="the smoothing spline's penalty LAM (>= 0; 0 interpolates); default: chosen by "
                     "generalized cross-validation, per joint")
    cmd.add_argument("--out", default="-", metavar="TORQUES.csv", help="output CSV ('-', the default: standard output)")
    cmd.add_argument("--quiet", action="store_true", help="no summary line on stderr")
    cmd.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """The ``torques`` subcommand (see :data:`DESCRIPTION`)."""
    import pandas as pd

    from mbfg.errors import DataError
    from mbfg.inverse_dynamics import inverse_dynamics
    from mbfg.joint_derivatives import DerivativeOptions, joint_derivatives
    from mbfg.kinematic_tree import load_tree
    from mbfg.logs import read_log

    start_clock(args)
    check_output(args.out, inputs=[("ROBOT.urdf", args.robot), ("LOG.csv", args.log)])
    if args.smoothing is not None and args.smoothing < 0.0:
        raise DataError(f"--smoothing {args.smoothing:g}: expected a number >= 0")
    tree = load_tree(args.robot)
    log = read_log(args.log, tree.joints)
    q, qd, qdd = joint_derivatives(log.t, log.y, tree.joints, DerivativeOptions(args.smoothing))
    tau = inverse_dynamics(tree, q, qd, qdd)
    frame = pd.DataFrame({"t": log.t, **{f"tau_{j}": tau[:, k] for k, j in enumerate(tree.joints)}})
    write_csv(frame, args.out)
    if not args.quiet:
        eprint(f"mbfg torques: {tree.name}, {tree.n} joints, {len(log)} samples of {args.log}; "
                f"wall in all {wall_seconds(args):.1f} s")
    return 0
