"""``mbfg excite``: an exciting trajectory for identifying a URDF robot's inertial parameters.

::

    mbfg excite ROBOT.urdf --duration T --harmonics N [--base-frequency F] [--out-trajectory REF.csv]
                [--out-controls TORQUES.csv] [--seed S]
"""

from __future__ import annotations

import argparse

from mbfg.cli.args import Subparsers, iteration_count, positive_float, seed_value, whole_number
from mbfg.cli.common import check_output, check_outputs, eprint, start_clock, wall_seconds, write_csv

DESCRIPTION = """\
An exciting trajectory for a fixed-base URDF robot: a finite Fourier series
per joint (Swevers, Ganseman, Tukel, De Schutter, Van Brussel 1997),

  q_i(t) = q_i0 + sum_k a_ik/(w k) sin(w k t) - b_ik/(w k) cos(w k t),

k = 1 .. N (--harmonics), w = 2 pi F (--base-frequency; default 1/T, one
period over --duration T), periodic with period 1/F. Its coefficients minimize
the condition number of the base-parameter regressor (joint torques are linear
in the base parameters; the regressor stacked at --samples times of [0, T))
with scipy's L-BFGS-B and a penalty on the URDF's <limit>s (the result is the
best point visited within all of them): angle (lower, upper) and
rate (velocity) at every t by Swevers et al.'s amplitude bounds; torque
(effort) at the sample times, at 0.9 of the limit, by inverse dynamics of the
URDF's inertial parameters. The start is a random Fourier trajectory (--seed)
within the limits; the summary line on stderr gives both condition numbers,
and standard output gets them as a line when no output goes there. After the
optimization the limits are checked on the output grid (every --dt); a
violation between samples is an error.

--out-trajectory: the reference to follow, CSV columns t [s] and one column per
moving joint named as in the URDF [rad or m], t = 0, dt, ..., T (the log format
'mbfg torques' reads). --out-controls: the joint torques [N m or N] of that
trajectory by inverse dynamics (no friction), columns t and u_<joint>: the
controls of the URDF loaded with a motor on every joint (gain 1, so u is the
torque; the motor's shaft inertia is not included), as a controls file read with
a zero-order hold.
"""

EPILOG = """\
examples:
  mbfg excite panda.urdf --duration 10 --harmonics 5 --out-trajectory ref.csv --out-controls torques.csv
  mbfg excite panda.urdf --duration 20 --harmonics 4 --base-frequency 0.1 --seed 3
"""

_harmonics = whole_number(1, "a whole number of harmonics", "at least 1 harmonic")
_sample_count = whole_number(2, "a whole number of samples", "at least 2 samples")


def add_parser(sub: Subparsers) -> None:
    """Register ``excite`` on the ``mbfg`` subcommand parsers ``sub``."""
    cmd = sub.add_parser(
        "excite",
        help="an exciting trajectory of a URDF robot (Fourier series, optimized condition number)",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    cmd.add_argument("robot", metavar="ROBOT.urdf", help="the robot's URDF file (fixed base)")
    cmd.add_argument("--duration", type=positive_float, required=True, metavar="T", help="duration [s]")
    cmd.add_argument("--harmonics", type=_harmonics, required=True, metavar="N", help="harmonics per joint")
    cmd.add_argument("--base-frequency", type=positive_float, default=None, metavar="F",
                     help="base frequency [Hz] (default 1/T)")
    cmd.add_argument("--samples", type=_sample_count, default=150, metavar="S",
                     help="sample times of the regressor and the torque limits (default 150)")
    cmd.add_argument("--dt", type=positive_float, default=0.001, metavar="H",
                     help="time step of the output files [s] (default 0.001)")
    cmd.add_argument("--max-iterations", type=iteration_count, default=100, metavar="N", help="of L-BFGS-B (default 100)")
    cmd.add_argument("--seed", type=seed_value, default=0, metavar="S", help="of the random start (default 0)")
    cmd.add_argument("--out-trajectory", default=None, metavar="REF.csv", help="the trajectory ('-': standard output)")
    cmd.add_argument("--out-controls", default=None, metavar="TORQUES.csv",
                     help="its joint torques ('-': standard output)")
    cmd.add_argument("--quiet", action="store_true", help="no summary line on stderr")
    cmd.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """The ``excite`` subcommand (see :data:`DESCRIPTION`)."""
    import numpy as np
    import pandas as pd

    from mbfg.errors import DataError
    from mbfg.excitation import ExcitationOptions, check_limits, excite
    from mbfg.kinematic_tree import load_tree

    start_clock(args)
    outputs = [("--out-trajectory", args.out_trajectory), ("--out-controls", args.out_controls)]
    if args.out_trajectory == "-" and args.out_controls == "-":
        raise DataError("--out-trajectory and --out-controls: both are '-'; at most one may go to standard output")
    for option, path in outputs:
        if path is not None:
            check_output(path, option=option, inputs=[("ROBOT.urdf", args.robot)])
    check_outputs(outputs)
    if args.dt >= args.duration:
        raise DataError(f"--dt {args.dt:g}: expected a step shorter than --duration {args.duration:g} s")
    options = ExcitationOptions(duration=args.duration, harmonics=args.harmonics, base_frequency=args.base_frequency,
                                samples=args.samples, seed=args.seed, max_iterations=args.max_iterations)
    tree = load_tree(args.robot)
    result = excite(tree, options)
    t = np.arange(int(np.floor(args.duration / args.dt + 1e-9)) + 1) * args.dt
    q, _, tau = check_limits(tree, result.trajectory, t, options)
    if args.out_trajectory is not None:
        write_csv(pd.DataFrame({"t": t, **{j: q[:, k] for k, j in enumerate(tree.joints)}}), args.out_trajectory)
    if args.out_controls is not None:
        write_csv(pd.DataFrame({"t": t, **{_control_name(j): tau[:, k] for k, j in enumerate(tree.joints)}}),
                  args.out_controls)
    figures = (f"condition number {result.condition:.4g} (optimized) vs {result.random_condition:.4g} (random "
               f"Fourier start, seed {args.seed})")
    if "-" not in (args.out_trajectory, args.out_controls):
        print(figures)
    if not args.quiet:
        eprint(f"mbfg excite: {tree.name}, {tree.n} joints, {result.base_rank} base parameters, {args.harmonics} "
                f"harmonics at {options.frequency:g} Hz over {args.duration:g} s; {figures}; L-BFGS-B {result.iterations} "
                f"iterations ({result.message}); limits held every {args.dt:g} s; wall in all {wall_seconds(args):.1f} s")
    return 0


def _control_name(joint: str) -> str:
    """The control of a motor on ``joint`` as :func:`mbfg.urdf.load_urdf` names it: ``u_`` and the joint's name
    with characters outside A-Z, a-z, 0-9 and _ replaced."""
    from mbfg.urdf import identifier

    return f"u_{identifier(joint)}"
