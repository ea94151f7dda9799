"""``mbfg control``: the controls that drive a model to a target rate or joint reaction (the note
"Dynamical system control").

::

    mbfg control MODEL [--params CALIB.json] --target NAME=VALUE [...] [--duration T] [--dt H]
                       [--horizon N] [--limit U | --bounds=LO:HI] [--rate-sigma S] [--effort-sigma S]
                       [--init JOINT=ANGLE ...] [--linearized] --out CONTROLS.csv [--quiet]

A receding-horizon controller (:class:`mbfg.graphs.control.RecedingHorizon`, or with
``--linearized`` the real-time :class:`mbfg.graphs.control_linearized.LinearizedHorizon`) runs in
closed loop on the Spook simulator; the applied controls are written as a log-format CSV (``t``, one
column per control) that ``mbfg simulate --controls`` replays.
"""

from __future__ import annotations

import argparse
import math
import sys
from typing import TYPE_CHECKING

import numpy as np

from mbfg.cli.args import CONTROL_NOTE, Subparsers, assignment, iteration_count, positive_float, positive_steps
from mbfg.cli.common import (
    calibration_settings,
    check_output,
    eprint,
    model_input,
    model_with_params,
    start_clock,
    wall_seconds,
)
from mbfg.errors import ModelError
from mbfg.lm_config import LMConfig

if TYPE_CHECKING:
    from mbfg.rigid import RigidModel

DESCRIPTION = """\
Compute the controls (the activations of the note "Dynamical system control")
that drive a 3D rigid-body model to a target: a joint rate or a body velocity
component, and/or a joint reaction force. A receding-horizon controller
re-solves at every step, from the current state, for the activations of the
next N steps that bring every step of the horizon closest to the targets
through the model's implicit-Euler (Spook) steps, warm-started from its
previous plan, and applies the first one to the simulated model (closed loop,
--duration seconds from rest at the --init angles). Where a joint prevents a
target velocity, the step's sensitivity along it is of the order of the joint
compliance and the controller does not chase it (--effort-sigma keeps the
leftover compliant leak from being used).

--target NAME=VALUE (repeatable, or comma-separated) names what to reach:
  JOINT=RATE      a hinge's angle rate [rad/s], e.g. theta=2.0
  BODY=RATE       the rate of the hinge that attaches BODY, e.g. arm=2.0
  BODY.vx=V       a body velocity component: vx, vy, vz [m/s] (world axes),
                  wx, wy, wz [rad/s] (body axes)
  JOINT.fx=F      a joint reaction [N] along world x (also .fy, .fz): the force
                  the joint exerts on its child body, e.g. q1.fx=2.0
The model's controls (e.g. the Furuta motor voltage u [V], the double
pendulum's torques tau1, tau2 [N m]) are the activations. Models with dry
friction or contacts are refused (their steps are not smooth): use the viscous
twin (furuta-viscous).

--params reads parameter values (the JSON of 'mbfg calibrate --out' or any
parameter file; its h is the default --dt). --limit U bounds every control to
[-U, U]; --bounds=LO:HI bounds every control (or NAME=LO:HI per control,
comma-separated; the '=' lets LO be negative). --rate-sigma S adds a cost
on the change of the controls per step (std S, control units); --effort-sigma
S a zero-mean prior on them. --velocity-sigma and --force-sigma weigh the
targets against each other (default 1 rad/s or m/s, 1 N).

Output (--out, '-' for standard output): a log-format CSV, t [s] then one
column per control, one row per step (the control held over [t_k, t_k+1)),
the last row repeating the last control; 'mbfg simulate MODEL --duration T
--dt H --controls FILE' replays it. A summary of the target errors per step
(the simulated rate or reaction after each step, minus the target), the
solve times and the command's whole wall time goes to stderr; progress lines
too unless --quiet.
"""

EPILOG = f"""\
examples:
  mbfg control furuta-viscous --target theta=2.0 --duration 0.5 --dt 0.001 --horizon 10 \\
      --limit 10 --out voltage.csv
  mbfg simulate furuta-viscous --duration 0.5 --dt 0.001 --controls voltage.csv --out log.csv
  mbfg control double-pendulum-torque --target q1.fx=2.0 --duration 0.2 --bounds=-5:5 --out torques.csv
  mbfg control furuta-viscous --params calib.json --target arm=1.0 --rate-sigma 0.5 --out voltage.csv

reference:
{CONTROL_NOTE}
"""


def _target(text: str) -> list[tuple[str, float]]:
    """``NAME=VALUE[,NAME=VALUE...]`` as (name, value) pairs (argparse type)."""
    out = []
    for item in text.split(","):
        name, sep, value = (part.strip() for part in item.partition("="))
        if not sep or not name:
            raise argparse.ArgumentTypeError(f"expected NAME=VALUE, e.g. theta=2.0 or q1.fx=1.5, got {item!r}")
        try:
            number = float(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{item!r}: expected a number after '=', got {value!r}") from None
        if not math.isfinite(number):
            raise argparse.ArgumentTypeError(f"{item!r}: expected a finite number")
        out.append((name, number))
    return out


def add_parser(sub: Subparsers) -> None:
    """Register ``control`` on the ``mbfg`` subcommand parsers ``sub``."""
    p = sub.add_parser(
        "control",
        help="controls that drive a model to a target rate or joint reaction (receding horizon), as a CSV",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("model", metavar="MODEL", help="built-in model name (see 'mbfg models') or path of a model file")
    p.add_argument("--params", metavar="CALIB.json", help="parameter values (a calibration JSON or parameter file)")
    p.add_argument("--target", type=_target, action="extend", required=True, metavar="NAME=VALUE",
                   help="a rate (JOINT=RAD_PER_S, BODY=RAD_PER_S, BODY.vx=M_PER_S ...) or a reaction "
                        "(JOINT.fx=N, .fy, .fz); repeatable")
    p.add_argument("--duration", type=positive_float, default=0.5, metavar="T",
                   help="closed-loop time [s] (default: %(default)s)")
    p.add_argument("--dt", type=positive_float, default=None, metavar="H",
                   help="time-step [s] (default: the calibration's h, else 0.001)")
    p.add_argument("--horizon", type=positive_steps, default=10, metavar="N",
                   help="steps of the receding horizon (1: the one-step problem of the control note; "
                        "default: %(default)s)")
    p.add_argument("--bounds", metavar="LO:HI", help="bounds of every control, or NAME=LO:HI,... per control "
                   "(a negative LO needs the '=' form: --bounds=-10:10)")
    p.add_argument("--limit", type=positive_float, default=None, metavar="U",
                   help="bound every control to [-U, U] (the same as --bounds=-U:U)")
    p.add_argument("--rate-sigma", type=positive_float, default=None, metavar="S",
                   help="std of the control change per step (default: no rate cost)")
    p.add_argument("--effort-sigma", type=positive_float, default=None, metavar="S",
                   help="std of a zero-mean prior on the controls (default: none)")
    p.add_argument("--velocity-sigma", type=positive_float, default=1.0, metavar="S",
                   help="sigma of the rate targets [rad/s or m/s] (default: %(default)s)")
    p.add_argument("--force-sigma", type=positive_float, default=1.0, metavar="S",
                   help="sigma of the reaction targets [N] (default: %(default)s)")
    p.add_argument("--init", type=assignment, nargs="+", action="extend", default=[], metavar="JOINT=ANGLE",
                   help="initial hinge angle [rad] by joint name (default: 0, at rest)")
    p.add_argument("--max-iterations", type=iteration_count, default=20, metavar="N",
                   help="Levenberg-Marquardt iterations per solve at most (default: %(default)s)")
    p.add_argument("--linearized", action="store_true",
                   help="the real-time scheme: each solve linearizes one step at the current state and solves the "
                        "horizon's least squares exactly, no LM iterations (--max-iterations is then unused)")
    p.add_argument("--out", required=True, metavar="CONTROLS.csv", help="output CSV ('-' for standard output)")
    p.add_argument("--quiet", action="store_true", help="no progress lines (the summary is still printed)")
    p.set_defaults(handler=run)


def _bounds(model: RigidModel, text: str | None) -> tuple[np.ndarray | None, np.ndarray | None]:
    """``LO:HI`` for every control or ``NAME=LO:HI,...`` per control, as (lower, upper) arrays."""
    if text is None:
        return None, None
    n = len(model.controls)
    lower, upper = np.full(n, -np.inf), np.full(n, np.inf)

    def pair(item: str) -> tuple[float, float]:
        lo, sep, hi = item.partition(":")
        try:
            values = float(lo), float(hi)
        except ValueError:
            values = (math.nan, math.nan)
        if not sep or any(math.isnan(v) for v in values) or not values[0] < values[1]:
            raise ModelError(f"--bounds {text}: expected LO:HI with LO < HI (e.g. -10:10), got {item!r}")
        return values

    if "=" not in text:
        lower[:], upper[:] = pair(text.strip())
        return lower, upper
    for item in text.split(","):
        name, _, rest = (part.strip() for part in item.partition("="))
        if name not in model.controls:
            raise ModelError(f"--bounds {text}: {model.name} has no control {name!r}; its controls: "
                             f"{', '.join(model.controls) or 'none'}")
        i = model.controls.index(name)
        lower[i], upper[i] = pair(rest)
    return lower, upper


def run(args: argparse.Namespace) -> int:
    """The ``control`` subcommand (see :data:`DESCRIPTION`)."""
    from mbfg import control
    from mbfg.graphs.control import RecedingHorizon
    from mbfg.graphs.control_linearized import LinearizedHorizon
    from mbfg.limits import MAX_HORIZON, check_count, steps_of
    from mbfg.logs import write_log

    start_clock(args)
    check_output(args.out, inputs=[model_input(args.model), ("--params", args.params)])
    model = model_with_params(args.model, args.params)
    control.check_controllable(model)
    h = args.dt or (calibration_settings(args.params).get("h") if args.params else None) or 1e-3
    n_steps = int(round(steps_of(args.duration, h, "--duration", "--dt")))
    check_count("--horizon", args.horizon, MAX_HORIZON, "each solve is a least squares over every step of it")
    if n_steps < 1:
        raise ModelError(f"--duration {args.duration:g} s is shorter than one time step {h:g} s")
    rates: dict[str, float] = {}
    forces: dict[str, float] = {}
    reaction_names = set(control.force_names(model))
    for name, value in args.target:
        where = forces if name in reaction_names else rates
        if name in rates or name in forces:
            raise ModelError(f"--target: {name!r} is given twice")
        if where is rates:
            try:
                control.resolve_rate_name(model, name)
            except ModelError:
                raise ModelError(
                    f"--target {name}={value:g}: {model.name} has no rate or reaction {name!r}; rates: "
                    f"{', '.join(control.rate_names(model))}; reactions: {', '.join(sorted(reaction_names))}"
                ) from None
        where[name] = value
    if args.limit is not None and args.bounds is not None:
        raise ModelError("--limit and --bounds both bound the controls; give one of them")
    lower, upper = _bounds(model, args.bounds if args.limit is None else f"{-args.limit}:{args.limit}")
    hinge_names = [j.name for j in model.hinges]
    init = {}
    for name, angle in args.init:
        if name not in hinge_names:
            raise ModelError(f"--init {name}={angle:g}: {model.name} has no hinge {name!r}; hinges: "
                             f"{', '.join(hinge_names)}")
        init[name] = angle
    values = model.parameters
    x0 = model.initial_state(coordinates=init, parameters=values.numpy_values())
    controller = (LinearizedHorizon if args.linearized else RecedingHorizon)(
        model, h, args.horizon, rates=rates, forces=forces, lower=lower, upper=upper, rate_sigma=args.rate_sigma,
        effort_sigma=args.effort_sigma, velocity_sigma=args.velocity_sigma, force_sigma=args.force_sigma,
        lm=LMConfig(max_iterations=args.max_iterations), quiet=args.quiet,
    )
    if not args.quiet:
        targets = ", ".join(f"{k} = {v:g}" for k, v in {**rates, **forces}.items())
        scheme = "linearized" if args.linearized else "LM"
        eprint(f"mbfg control: {model.name}, {n_steps} steps of {h:g} s, horizon {args.horizon} ({scheme}); "
                f"targets {targets}")
    loop = controller.run(x0, n_steps)
    held = np.vstack([loop.controls, loop.controls[-1:]])
    write_log(sys.stdout if args.out == "-" else args.out, loop.t, {},
              {name: held[:, i] for i, name in enumerate(model.controls)})
    parts = []
    for names, err, unit in ((loop.rate_names, loop.rate_error(), ""), (loop.force_names, loop.force_error(), " N")):
        for i, name in enumerate(names):
            e = np.abs(err[:, i])
            parts.append(f"{name}: |error| after the last step {e[-1]:.3g}{unit}, median {np.median(e):.3g}{unit}")
    solve_ms = 1e3 * loop.solve_s
    eprint(f"mbfg control: {n_steps} steps; " + "; ".join(parts)
            + f"; solve {np.median(solve_ms):.3g} ms median (first {solve_ms[0]:.3g} ms, with compilation), "
            f"{np.mean(loop.iterations):.3g} iterations mean, {np.sum(loop.solve_s):.3g} s solving; "
            f"{wall_seconds(args):.1f} s wall in all" + ("" if args.out == "-" else f"; wrote {args.out}"))
    return 0
