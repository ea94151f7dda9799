"""``mbfg simulate``: simulate a 3D rigid-body model with the Spook stepper and write a log.

::

    mbfg simulate MODEL --duration T --dt H [--params FILE] [--controls CSV]
                  [--init JOINT=VALUE[:RATE] ...] [--noise SIGMA] [--ppr N] [--resolution M] [--seed S]
                  --out log.csv
"""

from __future__ import annotations

import argparse
import math
import sys
from typing import TYPE_CHECKING

import numpy as np

from mbfg.cli.args import (
    MAX_COORDINATE,
    MODEL_HELP,
    Subparsers,
    assignment,
    counts_per_revolution,
    nonnegative_float,
    positive_float,
    seed_value,
)
from mbfg.cli.common import check_output, eprint, model_input, rigid_model, start_clock, wall_seconds
from mbfg.errors import DataError, ModelError

if TYPE_CHECKING:
    from mbfg.rigid import RigidModel

DESCRIPTION = """\
Simulate a 3D rigid-body model with the Spook stepper and write a log in the
standard format, the kind of log the estimators read: a CSV file with a header,
columns t [s], then one column per observation of the model (hinge angles
[rad], named after their joints; or CoM coordinates BODY.x/y/z [m]), then one
column per control of the model (e.g. the Furuta motor voltage u [V]). One row
per time step, t = 0, dt, ..., duration; the control on row k is the one held
over [t_k, t_k+1) (the last row repeats it). Hinge angles are unwrapped over
time, as a multi-turn encoder reads them, and start at the --init value.

The model starts with the joint coordinates given by --init (0, hanging
straight down, for joints not named), at rest unless a rate follows the value:
--init theta=2.5:-1.0 starts the hinge theta at 2.5 rad turning at -1 rad/s,
--init x=0.1:0.05 the slider x at 0.1 m moving at 0.05 m/s. Only hinges and
sliders can be set; bodies no joint places (the particle) keep their built-in
pose, at rest.

--controls CSV reads a log-format file with a t column and one column per
control of the model (other columns are ignored, so a log written by this
command can be replayed). A URDF robot has no motors of its own: its controls
file names the joints it drives, in columns u_<joint> holding the joint torques
[N m] or forces [N], as 'mbfg excite --out-controls' writes them, and each of
those joints gets a motor of gain 1. The control for the step starting at t_k is the
value on the last row with t <= t_k (zero-order hold); the file must cover
[0, duration). Without --controls every control is zero.

--noise adds Gaussian noise of standard deviation SIGMA [rad for angles, m for
positions] to every observation column; --ppr then quantizes the hinge-angle
columns to an encoder of N counts per revolution: reading = round(angle /
step) * step, step = 2 pi / N; --resolution quantizes the slider columns
(prismatic joints) the same way to a linear encoder of M metres per count.
Controls are written as applied, without noise.

A one-line summary (steps, the command's whole wall time: reading, building the
model, compiling, stepping and writing; the stepping's part of it with its
compile time, and simulated seconds per wall second after compiling) goes to
stderr; progress lines too unless --quiet.
"""

EPILOG = """\
examples:
  mbfg simulate pendulum --duration 2 --dt 0.001 --init theta=1.0 --out pendulum.csv
  mbfg simulate pendulum --duration 2 --dt 0.001 --params my_pendulum.yaml --out pendulum.csv
  mbfg simulate double-pendulum --duration 3 --dt 0.001 --init q1=1.5 q2=-0.5 --out dp.csv
  mbfg simulate linear-stage --duration 1 --dt 0.001 --init x=0.1:0.05 --out stage.csv
  mbfg simulate furuta --duration 5 --dt 0.001 --controls voltage.csv --noise 1e-3 --ppr 2048 --seed 1 \\
      --out furuta.csv
  mbfg simulate path/to/chain.yaml --duration 1 --dt 0.0005 --out - > chain.csv

A controls file for the Furuta pendulum (control u [V]; 0.5 V for 1 s, then 0):
  t,u
  0,0.5
  1.0,0
  5.0,0

A parameter file (--params; YAML or JSON, name: value or name: {value: ...}):
  K: 0.045
  b_1: 4e-4
"""

#: Longest --dt [s]. Spook is stable at any step, so a step of seconds "works" and returns a log that says
#: nothing about the mechanism: the built-in models swing, slide and spin on time scales of 0.1-1 s and the rigs
#: log at 100 Hz-1 kHz. A step above this is refused, not run.
MAX_DT = 0.1
#: Largest initial rate --init takes [rad/s or m/s]: 1e4 rad/s is 95,000 rpm, beyond any rig's joint; a rate far
#: beyond it moves a joint by more than MAX_COORDINATE within a second.
MAX_RATE = 1e4


def add_parser(sub: Subparsers) -> None:
    """Register ``simulate`` on the ``mbfg`` subcommand parsers ``sub``."""
    sim = sub.add_parser(
        "simulate",
        help="simulate a 3D rigid-body model and write a log (t, observations, controls) to CSV",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sim.add_argument("model", metavar="MODEL", help=MODEL_HELP)
    sim.add_argument("--duration", type=positive_float, required=True, metavar="T", help="simulated time [s]")
    sim.add_argument("--dt", type=positive_float, required=True, metavar="H",
                     help=f"time step [s], smaller than T and at most {MAX_DT:g} s; T must be a whole number of steps")
    sim.add_argument(
        "--params", metavar="FILE", help="parameter file (YAML or JSON) overriding the model's parameter values"
    )
    sim.add_argument(
        "--controls", metavar="CSV", help="controls log: t and one column per control, held between rows "
        "(default: all controls zero)"
    )
    sim.add_argument(
        "--init",
        type=_initial,
        nargs="+",
        action="extend",
        default=[],
        metavar="JOINT=VALUE[:RATE]",
        help="initial hinge angle [rad] or slider displacement [m] by joint name, and optionally its rate [rad/s "
        "or m/s] after a colon, e.g. --init q1=1.0 q2=-0.3:2.0 (default: 0 for every joint, at rest)",
    )
    sim.add_argument(
        "--noise", type=nonnegative_float, default=0.0, metavar="SIGMA",
        help="standard deviation of Gaussian noise on the observations [rad or m] (default: none)",
    )
    sim.add_argument(
        "--ppr", type=counts_per_revolution, default=None, metavar="N",
        help="quantize the hinge angles to an encoder of N counts per revolution (after the noise)",
    )
    sim.add_argument(
        "--resolution", type=positive_float, default=None, metavar="M",
        help="quantize the slider displacements to a linear encoder of M metres per count (after the noise)",
    )
    sim.add_argument("--seed", type=seed_value, default=None, metavar="S", help="seed of the noise (default: random)")
    sim.add_argument("--out", required=True, metavar="LOG.csv", help="output log ('-' for standard output)")
    sim.add_argument("--quiet", action="store_true", help="no progress lines (the summary line is still printed)")
    sim.set_defaults(handler=run)


def _initial(text: str) -> tuple[str, float, float | None]:
    """``--init JOINT=VALUE[:RATE]``: (joint, coordinate [rad or m], rate [rad/s or m/s] or None for at rest)."""
    head, colon, rate_text = text.partition(":")
    name, value = assignment(head)
    if not colon:
        return name, value, None
    try:
        rate = float(rate_text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a rate [rad/s or m/s] after ':', got {rate_text!r}") \
            from None
    if not (math.isfinite(rate) and abs(rate) <= MAX_RATE):
        raise argparse.ArgumentTypeError(f"{text!r}: expected a finite rate [rad/s or m/s] of magnitude at most "
                                         f"{MAX_RATE:g}, got {rate_text!r}")
    return name, value, rate


def _held_controls(model: RigidModel, source: str, t_steps: np.ndarray, duration: float, h: float) -> np.ndarray:
    """The controls log ``source`` sampled with a zero-order hold at the step start times (n, n_controls)."""
    from mbfg.logs import read_log

    if not model.controls:
        raise DataError(f"--controls {source}: model {model.name} has no controls (nothing for the file to drive)")
    log = read_log(source, observations=(), controls=model.controls)
    tol = 1e-6 * h
    if log.t[0] > tol:
        raise DataError(
            f"--controls {source}: the first row is at t = {log.t[0]:g} s; the file must cover [0, {duration:g}) s, "
            "so it needs a row at t <= 0"
        )
    if log.t[-1] < t_steps[-1] - tol:
        raise DataError(
            f"--controls {source}: the last row is at t = {log.t[-1]:g} s, before the last step at "
            f"t = {t_steps[-1]:g} s; the file must cover [0, {duration:g}) s"
        )
    rows = np.searchsorted(log.t, t_steps + tol, side="right") - 1
    return log.u[rows]


def _step_count(duration: float, dt: float) -> int:
    """The number of steps of --duration at --dt; ModelError naming the options when that is not a whole number
    of at least 2 steps of at most :data:`MAX_DT`."""
    if dt > MAX_DT:
        raise ModelError(f"--dt {dt:g} s: a time step over {MAX_DT:g} s cannot resolve the motion of a mechanism "
                         f"(the models' time scales are 0.1-1 s, rigs log at 100 Hz-1 kHz); use e.g. --dt 0.001")
    from mbfg.limits import steps_of

    if dt >= duration:
        raise ModelError(f"--dt {dt:g} s is not smaller than --duration {duration:g} s: the log would have at most "
                         f"one step; give a longer --duration or a smaller --dt")
    n_steps = int(round(steps_of(duration, dt, "--duration", "--dt")))  # no int() of 1e308 / 0.1 (inf)
    # The log ends at duration, not at the nearest multiple of dt past or before it (silently shortened or
    # lengthened); 1e-6 of a step absorbs the rounding of decimal inputs such as 0.3 / 0.001.
    if abs(n_steps * dt - duration) > 1e-6 * dt:
        raise ModelError(f"--duration {duration:g} s is not a whole number of --dt {dt:g} s steps "
                         f"({duration / dt:.6g}); use e.g. --duration {n_steps * dt:g}")
    return n_steps


def _check_log_values(obs: np.ndarray, names: tuple[str, ...], t: np.ndarray, notes: list[str]) -> None:
    """ModelError naming the first cell of the log about to be written that is not finite or beyond
    :data:`MAX_COORDINATE` in magnitude (noise of --noise 1e308, a body flung away): the stepper's own divergence
    check sees only non-finite states, and such a log would be read as data."""
    bad = np.argwhere(~(np.abs(obs) <= MAX_COORDINATE))
    if bad.size:
        row, col = (int(i) for i in bad[0])
        raise ModelError(f"the log would hold {names[col]} = {obs[row, col]:g} at t = {t[row]:g} s (line {row + 2}), "
                         f"beyond +-{MAX_COORDINATE:g} [rad or m] or not finite"
                         f"{' (' + '; '.join(notes) + ')' if notes else ''}; nothing written")


def _urdf_with_motors(path: str, controls: str, robot: RigidModel) -> RigidModel:
    """The URDF robot ``path`` with a motor on each joint whose control column ``u_<joint>`` the controls file
    holds (gain 1 N m or N per unit: the file's values are the joint torques and forces, as ``mbfg excite``
    writes them; shaft inertia 1e-6, :func:`mbfg.urdf.load_urdf`). A URDF has no motors of its own; the file's
    columns say which joints it drives. ``robot``: the same URDF loaded without motors."""
    import csv

    from mbfg.urdf import identifier, load_urdf

    try:
        with open(controls, newline="", encoding="utf-8") as f:
            header = next(csv.reader(f), [])
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(f"--controls {controls}: cannot read it ({exc})") from None
    by_control = {f"u_{identifier(j.name)}": j.name for j in robot.axial}
    columns = [c.strip() for c in header if c.strip().startswith("u_")]
    unknown = [c for c in columns if c not in by_control]
    if unknown or not columns:
        raise DataError(
            f"--controls {controls}: {robot.name} is a URDF, whose motors are the joints its controls file names "
            f"in columns u_<joint> (as mbfg excite writes them); "
            + (f"{', '.join(unknown)} names no moving joint" if unknown else f"found no u_ column in {header}")
            + f"; expected some of {', '.join(by_control)}")
    return load_urdf(path, motors=[by_control[c] for c in columns])


def run(args: argparse.Namespace) -> int:
    """The ``simulate`` subcommand (see :data:`DESCRIPTION`)."""
    from mbfg.limits import check_steps, simulation_bytes
    from mbfg.logs import add_noise, quantize, quantize_linear, write_log
    from mbfg.parameters import load_parameter_file
    from mbfg.spook import simulate, unwrap_angles

    start_clock(args)
    check_output(args.out, inputs=[model_input(args.model), ("--params", args.params),
                                    ("--controls", args.controls)])
    model = rigid_model(args.model)
    if args.controls and args.model.lower().endswith(".urdf") and not model.controls:
        model = _urdf_with_motors(args.model, args.controls, model)
    values = model.parameters
    if args.params:
        changes = load_parameter_file(args.params, model)
        try:
            values = model.with_parameters(changes).parameters  # checks names, bounds, positivity
        except ModelError as exc:
            raise ModelError(f"--params {args.params}: {exc}") from None
    n_steps = _step_count(args.duration, args.dt)
    check_steps(n_steps, simulation_bytes(len(model.bodies), len(model.observations), len(model.controls)),
                "the simulation", "--duration, --dt")
    hinge_names = [j.name for j in model.hinges]
    joint_names = [j.name for j in model.axial]
    init: dict[str, float] = {}
    rates: dict[str, float] = {}
    for name, angle, rate in args.init:
        if name not in joint_names:
            raise ModelError(
                f"--init {name}={angle:g}: {model.name} has no hinge or slider {name!r}; "
                + (f"joints: {', '.join(joint_names)}" if joint_names
                   else "it has no hinges or sliders (bodies keep their built-in pose)")
            )
        if name in init:
            raise ModelError(f"--init: joint {name!r} is given twice ({init[name]:g} and {angle:g})")
        init[name] = angle
        if rate is not None:
            rates[name] = rate
    observed_angles = [i for i, name in enumerate(model.observations) if name in hinge_names]
    slider_names = {j.name for j in model.axial} - set(hinge_names)
    observed_sliders = [i for i, name in enumerate(model.observations) if name in slider_names]
    if args.resolution is not None and not observed_sliders:
        raise ModelError(f"--resolution {args.resolution:g}: {model.name} observes no slider displacements to "
                         f"quantize (observations: {', '.join(model.observations)})")
    if args.ppr is not None and not observed_angles:
        raise ModelError(f"--ppr {args.ppr}: {model.name} observes no hinge angles to quantize "
                         f"(observations: {', '.join(model.observations)})")
    t_steps = np.arange(n_steps) * args.dt
    if args.controls:
        controls = _held_controls(model, args.controls, t_steps, args.duration, args.dt)
        controls_note = f"controls {', '.join(model.controls)} from {args.controls} (zero-order hold)"
    else:
        controls = np.zeros((n_steps, len(model.controls)))
        controls_note = (
            f"controls {', '.join(model.controls)} zero (no --controls)" if model.controls else "no controls"
        )
    x0 = model.initial_state(coordinates=init, rates=rates, parameters=values.numpy_values())
    if not args.quiet:
        def unit(k: str) -> str:
            return "rad" if k in hinge_names else "m"

        start_note = ", ".join(f"{k} = {v:g} {unit(k)}" + (f" at {rates[k]:g} {unit(k)}/s" if k in rates else "")
                               for k, v in init.items()) or ("all joint coordinates 0" if joint_names
                                                             else "its built-in pose")
        eprint(
            f"mbfg simulate: {model.name}, {n_steps} steps of {args.dt:g} s, from "
            f"{'' if rates else 'rest with ' if init or joint_names else 'rest in '}{start_note}; "
            f"{controls_note}" + (f"; parameters from {args.params}" if args.params else "")
        )
    trajectory = simulate(
        model, n_steps * args.dt, args.dt, initial=x0, controls=controls, parameters=values.arrays(),
        quiet=args.quiet,
    )
    obs = unwrap_angles(model, trajectory.observations)
    for i in observed_angles:  # a multi-turn encoder reads the --init angle at t = 0, not its wrapped value
        name = model.observations[i]
        if name in init:
            obs[:, i] += 2.0 * math.pi * round((init[name] - obs[0, i]) / (2.0 * math.pi))
    notes = [f"parameters from {args.params}"] if args.params else []
    if args.noise > 0:
        obs = add_noise(obs, args.noise, np.random.default_rng(args.seed))
        seed = f"seed {args.seed}" if args.seed is not None else "random seed"
        notes.append(f"noise sigma {args.noise:g} ({seed})")
    if args.ppr is not None:
        obs[:, observed_angles] = quantize(obs[:, observed_angles], args.ppr)
        notes.append(f"angles quantized to {args.ppr} counts per revolution")
    if args.resolution is not None:
        obs[:, observed_sliders] = quantize_linear(obs[:, observed_sliders], args.resolution)
        notes.append(f"displacements quantized to {args.resolution:g} m per count")
    _check_log_values(obs, model.observations, trajectory.t, notes)
    held = np.vstack([trajectory.controls, trajectory.controls[-1:]]) if len(model.controls) else controls
    write_log(
        sys.stdout if args.out == "-" else args.out,
        trajectory.t,
        {name: obs[:, i] for i, name in enumerate(model.observations)},
        {name: held[:, i] for i, name in enumerate(model.controls)},
    )
    simulated = float(trajectory.t[-1])
    stepping = trajectory.wall_s - trajectory.compile_s
    rate = simulated / stepping if stepping > 0 else float("inf")
    eprint(
        f"mbfg simulate: {n_steps} steps, {simulated:g} s simulated in {wall_seconds(args):.2f} s wall in all "
        f"(stepping {trajectory.wall_s:.2f} s, of which compile {trajectory.compile_s:.2f} s; "
        f"{rate:.3g} simulated s per wall s after compile); "
        + "; ".join([controls_note, *notes])
        + ("" if args.out == "-" else f"; wrote {args.out}")
    )
    return 0
