"""The ``mbfg`` command line: simulated logs of 3D rigid-body models; forward and
inverse dynamics of planar mechanisms.

::

    mbfg simulate MODEL --duration T --dt H [--params FILE] [--controls CSV]
                  [--init JOINT=ANGLE ...] [--noise SIGMA] [--ppr N] [--seed S] --out log.csv
    mbfg models [MODEL ...]
    mbfg forward MECHANISM [--dt 0.001] [--duration 5] [--lag N | --batch] --out q.csv
    mbfg inverse MECHANISM TRAJECTORY --coordinate I[,J,...] --out forces.csv
    mbfg mechanisms [MECHANISM ...]

MODEL is a built-in rigid-body model (``mbfg models`` lists them) or the path
of a model file (:mod:`mbfg.model_file`); MECHANISM is a built-in planar
mechanism (``mbfg mechanisms``) or the path of an MBSE YAML file. Every user
error (bad file, unknown coordinate, malformed row ...) prints
``mbfg: error: <message>`` on stderr and exits with status 2.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from mbfg.errors import DataError, MbfgError, ModelError

__all__ = ["main", "build_parser"]

BUILTIN_TRAJECTORY = "builtin:fourbar-crank"
EXIT_USER_ERROR = 2

_MAIN_EPILOG = """\
examples:
  mbfg models
  mbfg simulate pendulum --duration 2 --dt 0.001 --init theta=1.0 --out pendulum.csv
  mbfg simulate furuta --duration 5 --dt 0.001 --controls voltage.csv --noise 1e-3 --ppr 2048 --out log.csv
  mbfg mechanisms
  mbfg forward fourbar --duration 5 --out fourbar.csv
  mbfg forward my_linkage.yaml --dt 0.002 --duration 2 --batch --out q.csv
  mbfg inverse fourbar-crank builtin:fourbar-crank --coordinate theta1 --out torque.csv

Units are SI throughout: m, kg, s, rad, N, N m. Gravity acts along -y for the
planar mechanisms (forward, inverse) and along -z for the 3D models (simulate).
Run 'mbfg COMMAND --help' for the options of each command.
"""

_FORWARD_DESCRIPTION = """\
Simulate a mechanism released from rest in its initial configuration (the
positions written in its YAML file), under gravity along -y, with a
forward-dynamics factor graph. By default the problem is solved online with a
fixed-lag smoother over a window of --lag steps; --batch solves the whole
horizon at once (Levenberg-Marquardt; memory grows with the number of steps).

Output CSV columns: t [s], then every generalized coordinate of the mechanism,
named as 'mbfg mechanisms' lists them: x1,y1,x2,y2,... [m] for the free points
in the order they appear in the YAML file (fixed points are not coordinates),
then theta1,theta2,... [rad] for relative-angle coordinates. One row per time
step, t = 0, dt, ..., duration. With --velocities, the velocities follow as
dx1,dy1,... [m/s, rad/s].

Progress lines and a final one-line summary (steps, wall time, simulated
seconds per wall second, mean solver iterations, largest constraint residual
max |Phi(q)| over the output) go to stderr.
"""

_FORWARD_EPILOG = """\
examples:
  mbfg forward fourbar --duration 5 --out fourbar.csv
  mbfg forward pendulum --dt 0.002 --duration 3 --coords independent --out pendulum.csv
  mbfg forward fourbar --duration 1 --batch --out fourbar-batch.csv
  mbfg forward path/to/mechanism.yaml --duration 2 --lag 10 --smoother batch --out - > q.csv
"""

_INVERSE_DESCRIPTION = f"""\
Inverse dynamics: given the prescribed motion of some coordinates ("imposed"
coordinates, e.g. a crank angle), find the generalized force on each of them
that produces it, under gravity along -y. Impose as many coordinates as the
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
"""

_INVERSE_EPILOG = f"""\
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
"""

_SIMULATE_DESCRIPTION = """\
Simulate a 3D rigid-body model with the Spook stepper and write a log in the
standard format, the kind of log the estimators read: a CSV file with a header,
columns t [s], then one column per observation of the model (hinge angles
[rad], named after their joints; or CoM coordinates BODY.x/y/z [m]), then one
column per control of the model (e.g. the Furuta motor voltage u [V]). One row
per time step, t = 0, dt, ..., duration; the control on row k is the one held
over [t_k, t_k+1) (the last row repeats it). Hinge angles are unwrapped over
time, as a multi-turn encoder reads them, and start at the --init value.

The model starts at rest with the joint angles given by --init (0, hanging
straight down, for joints not named). Only hinge angles can be set; bodies no
hinge places (the particle) keep their built-in pose.

--controls CSV reads a log-format file with a t column and one column per
control of the model (other columns are ignored, so a log written by this
command can be replayed). The control for the step starting at t_k is the
value on the last row with t <= t_k (zero-order hold); the file must cover
[0, duration). Without --controls every control is zero.

--noise adds Gaussian noise of standard deviation SIGMA [rad for angles, m for
positions] to every observation column; --ppr then quantizes the hinge-angle
columns to an encoder of N counts per revolution: reading = round(angle /
step) * step, step = 2 pi / N. Controls are written as applied, without noise.

A one-line summary (steps, wall time, compile time, simulated seconds per wall
second) goes to stderr; progress lines too unless --quiet.
"""

_SIMULATE_EPILOG = """\
examples:
  mbfg simulate pendulum --duration 2 --dt 0.001 --init theta=1.0 --out pendulum.csv
  mbfg simulate pendulum --duration 2 --dt 0.001 --params my_pendulum.yaml --out pendulum.csv
  mbfg simulate double-pendulum --duration 3 --dt 0.001 --init q1=1.5 q2=-0.5 --out dp.csv
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

_MODELS_DESCRIPTION = """\
Without arguments: list the built-in 3D rigid-body models, one line each. With
arguments (built-in names or model-file paths): describe those models: bodies,
joints, observations (the log columns), controls, and every parameter with its
value, unit, bounds [lower, upper] and whether calibration estimates it (free)
or holds it (fixed).
"""

_MECHANISMS_DESCRIPTION = """\
Without arguments: list the built-in mechanisms with their generalized
coordinates and degrees of freedom. With arguments (built-in names or YAML
paths): describe those mechanisms.
"""


# --------------------------------------------------------------------------------------
# Argument parsing
# --------------------------------------------------------------------------------------


def _finite_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


def _positive_float(text: str) -> float:
    value = _finite_float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a finite number > 0, got {text!r}")
    return value


def _nonnegative_float(text: str) -> float:
    value = _finite_float(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a finite number >= 0, got {text!r}")
    return value


def _counts(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number of counts per revolution, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected at least 1 count per revolution, got {value}")
    return value


def _seed(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 0, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 0, got {value}")
    return value


def _assignment(text: str) -> tuple[str, float]:
    name, sep, value = text.partition("=")
    name = name.strip()
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"expected JOINT=ANGLE, e.g. theta=1.2, got {text!r}")
    try:
        number = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected an angle in radians after '=', got {value!r}") from None
    if not math.isfinite(number):
        raise argparse.ArgumentTypeError(f"{text!r}: expected a finite angle in radians")
    return name, number


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number of steps, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected at least 1 step, got {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    """The ``mbfg`` argument parser (subcommands forward, inverse, mechanisms)."""
    from mbfg import __version__

    parser = argparse.ArgumentParser(
        prog="mbfg",
        description=(
            "Multibody dynamics and estimation as GTSAM factor graphs with JAX residuals:\n"
            "simulated logs of 3D rigid-body models (simulate, models), forward dynamics of\n"
            "planar mechanisms and inverse dynamics (the forces that produce a prescribed\n"
            "motion). Models and mechanisms are YAML files or built-in names."
        ),
        epilog=_MAIN_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"mbfg {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    model_help = "built-in model name (see 'mbfg models') or path of a model file (.yaml)"

    sim = sub.add_parser(
        "simulate",
        help="simulate a 3D rigid-body model and write a log (t, observations, controls) to CSV",
        description=_SIMULATE_DESCRIPTION,
        epilog=_SIMULATE_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sim.add_argument("model", metavar="MODEL", help=model_help)
    sim.add_argument("--duration", type=_positive_float, required=True, metavar="T", help="simulated time [s]")
    sim.add_argument("--dt", type=_positive_float, required=True, metavar="H", help="time step [s]")
    sim.add_argument(
        "--params", metavar="FILE", help="parameter file (YAML or JSON) overriding the model's parameter values"
    )
    sim.add_argument(
        "--controls", metavar="CSV", help="controls log: t and one column per control, held between rows "
        "(default: all controls zero)"
    )
    sim.add_argument(
        "--init",
        type=_assignment,
        nargs="+",
        action="extend",
        default=[],
        metavar="JOINT=ANGLE",
        help="initial hinge angle [rad] by joint name, e.g. --init q1=1.0 q2=-0.3 (default: 0 for every joint)",
    )
    sim.add_argument(
        "--noise", type=_nonnegative_float, default=0.0, metavar="SIGMA",
        help="standard deviation of Gaussian noise on the observations [rad or m] (default: none)",
    )
    sim.add_argument(
        "--ppr", type=_counts, default=None, metavar="N",
        help="quantize the hinge angles to an encoder of N counts per revolution (after the noise)",
    )
    sim.add_argument("--seed", type=_seed, default=None, metavar="S", help="seed of the noise (default: random)")
    sim.add_argument("--out", required=True, metavar="LOG.csv", help="output log ('-' for standard output)")
    sim.add_argument("--quiet", action="store_true", help="no progress lines (the summary line is still printed)")
    sim.set_defaults(handler=_cmd_simulate)

    models = sub.add_parser(
        "models",
        help="list the built-in 3D rigid-body models, or describe models and their parameters",
        description=_MODELS_DESCRIPTION,
        epilog="examples:\n  mbfg models\n  mbfg models furuta\n  mbfg models pendulum path/to/chain.yaml\n",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    models.add_argument("model", nargs="*", metavar="MODEL", help=model_help)
    models.set_defaults(handler=_cmd_models)

    mechanism_help = "built-in mechanism name (see 'mbfg mechanisms') or path of an MBSE YAML file"
    gravity_help = "gravity along -y [m/s^2] (default: %(default)s)"

    fwd = sub.add_parser(
        "forward",
        help="simulate a mechanism (forward dynamics) and write its coordinates to CSV",
        description=_FORWARD_DESCRIPTION,
        epilog=_FORWARD_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    fwd.add_argument("mechanism", metavar="MECHANISM", help=mechanism_help)
    fwd.add_argument("--dt", type=_positive_float, default=0.001, help="time step [s] (default: %(default)s)")
    fwd.add_argument("--duration", type=_positive_float, default=5.0, help="simulated time [s] (default: %(default)s)")
    horizon = fwd.add_mutually_exclusive_group()
    horizon.add_argument(
        "--lag", type=_positive_int, default=2, metavar="N", help="fixed-lag smoother window, in time steps (default: %(default)s)"
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
    fwd.add_argument("--gravity", type=_finite_float, default=9.81, help=gravity_help)
    fwd.add_argument("--velocities", action="store_true", help="also write the velocities d<name>")
    fwd.add_argument("--out", required=True, metavar="FILE.csv", help="output CSV ('-' for standard output)")
    fwd.add_argument("--quiet", action="store_true", help="no progress lines (the summary line is still printed)")
    fwd.set_defaults(handler=_cmd_forward)

    inv = sub.add_parser(
        "inverse",
        help="generalized forces that produce a prescribed motion (inverse dynamics)",
        description=_INVERSE_DESCRIPTION,
        epilog=_INVERSE_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    inv.add_argument("mechanism", metavar="MECHANISM", help=mechanism_help)
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
        type=_finite_float,
        default=None,
        metavar="T",
        help="use only the trajectory rows with t <= T [s] (default: all rows)",
    )
    inv.add_argument("--gravity", type=_finite_float, default=9.81, help=gravity_help)
    inv.add_argument("--out", required=True, metavar="FILE.csv", help="output CSV ('-' for standard output)")
    inv.add_argument("--quiet", action="store_true", help="no progress lines (the summary line is still printed)")
    inv.set_defaults(handler=_cmd_inverse)

    mechs = sub.add_parser(
        "mechanisms",
        help="list the built-in mechanisms, or describe mechanism files",
        description=_MECHANISMS_DESCRIPTION,
        epilog="examples:\n  mbfg mechanisms\n  mbfg mechanisms fourbar-crank path/to/mechanism.yaml\n",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    mechs.add_argument("mechanism", nargs="*", metavar="MECHANISM", help=mechanism_help)
    mechs.set_defaults(handler=_cmd_mechanisms)
    return parser


# --------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------


def _eprint(*parts: object) -> None:
    print(*parts, file=sys.stderr, flush=True)


def _check_output(out: str) -> None:
    """Fail before the (possibly long) solve if the output file cannot be written."""
    if out == "-":
        return
    path = Path(out)
    if path.is_dir():
        raise DataError(f"--out {out}: is a folder; expected a CSV file name")
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise DataError(f"--out {out}: folder {str(parent)!r} does not exist")


def _write_csv(frame, out: str) -> None:  # frame: pandas.DataFrame
    if out == "-":
        frame.to_csv(sys.stdout, index=False)
        sys.stdout.flush()
        return
    try:
        frame.to_csv(out, index=False)
    except OSError as exc:
        raise DataError(f"--out {out}: cannot write the CSV file ({exc.strerror or exc})") from None


def _max_phi(mech, q: np.ndarray) -> float:
    """Largest constraint residual max |Phi(q)| over the rows of q (n_rows, n)."""
    if mech.m == 0 or len(q) == 0:
        return 0.0
    return float(max(np.max(np.abs(mech.phi(row))) for row in q))


def _describe(name: str, mech) -> str:
    coords = ", ".join(mech.coordinate_names)
    return f"{name}: {mech.n} coordinates [{coords}], {mech.m} constraints, {mech.dof} dof"


def _parse_coordinates(mech, text: str) -> list[int]:
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


# --------------------------------------------------------------------------------------
# Commands
# --------------------------------------------------------------------------------------


def _cmd_forward(args: argparse.Namespace) -> int:
    from mbfg.datasets import load_mechanism
    from mbfg.graphs import simulate_forward

    _check_output(args.out)
    mech = load_mechanism(args.mechanism)
    window = None if args.batch else args.lag
    n_steps = int(round(args.duration / args.dt))
    if n_steps < 1:
        raise ModelError(f"--duration {args.duration} s is shorter than one time step --dt {args.dt} s")
    if not args.quiet:
        how = "batch over the whole horizon" if window is None else f"fixed-lag window {window} steps, {args.smoother}"
        _eprint(
            f"mbfg forward: {_describe(mech.name, mech)}; {n_steps} steps of {args.dt:g} s, "
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
    _write_csv(frame, args.out)
    simulated = float(result.t[-1] - result.t[0])
    iterations = "n/a" if not result.iterations else f"{np.mean(result.iterations):.2f}"
    per = "LM iterations (batch solve)" if window is None else "mean solver iterations per step"
    _eprint(
        f"mbfg forward: {len(result.t) - 1} steps, {simulated:g} s simulated in {wall:.2f} s wall "
        f"({simulated / wall if wall > 0 else float('inf'):.3g} simulated s per wall s), "
        f"{per} {iterations}, max |Phi(q)| = {_max_phi(mech, result.q):.2e}"
        + ("" if args.out == "-" else f"; wrote {args.out}")
    )
    return 0


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


def _cmd_inverse(args: argparse.Namespace) -> int:
    from mbfg.datasets import load_mechanism
    from mbfg.graphs import solve_inverse_dynamics

    _check_output(args.out)
    mech = load_mechanism(args.mechanism)
    imposed = _parse_coordinates(mech, args.coordinate)
    names = [mech.coordinate_names[i] for i in imposed]
    if len(imposed) != mech.dof:
        raise ModelError(
            f"--coordinate {args.coordinate!r}: {mech.name} has {mech.dof} degree(s) of freedom, "
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
        _eprint(
            f"mbfg inverse: {_describe(mech.name, mech)}; {len(t)} samples from {source}, "
            f"imposed {', '.join(names)}, g = {args.gravity:g} m/s^2"
        )
    start = time.perf_counter()
    result = solve_inverse_dynamics(mech, t, values, imposed, g=args.gravity, quiet=args.quiet)
    wall = time.perf_counter() - start
    _write_csv(result.to_dataframe(), args.out)
    _eprint(
        f"mbfg inverse: {len(result.t)} samples, {float(t[-1] - t[0]):g} s in {wall:.2f} s wall, "
        f"Gauss-Newton iterations per stage {result.stage_iterations}, "
        f"max |Phi(q)| = {_max_phi(mech, result.q):.2e}"
        + ("" if args.out == "-" else f"; wrote {args.out}")
    )
    return 0


def _cmd_mechanisms(args: argparse.Namespace) -> int:
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


# --------------------------------------------------------------------------------------
# Rigid-body models: simulate, models
# --------------------------------------------------------------------------------------

#: Built-in models already built in this process. The stepper compiles once per
#: model object, so reusing the object makes a second ``main(["simulate", ...])``
#: in the same process (a notebook, the tests) skip the compilation. Parameter
#: files change values only (passed to the stepper), never the model object.
_MODEL_CACHE: dict[str, object] = {}


def _rigid_model(name: str):
    from mbfg.models import BUILTIN, load_model

    if name in BUILTIN:
        if name not in _MODEL_CACHE:
            _MODEL_CACHE[name] = load_model(name)
        return _MODEL_CACHE[name]
    return load_model(name)  # a model file, read afresh every time


def _held_controls(model, source: str, t_steps: np.ndarray, duration: float, h: float) -> np.ndarray:
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


def _cmd_simulate(args: argparse.Namespace) -> int:
    from mbfg.logs import add_noise, quantize, write_log
    from mbfg.parameters import load_parameter_file
    from mbfg.spook import simulate, unwrap_angles

    _check_output(args.out)
    model = _rigid_model(args.model)
    values = model.parameters
    if args.params:
        changes = load_parameter_file(args.params)
        try:
            values = model.with_parameters(changes).parameters  # checks names, bounds, positivity
        except ModelError as exc:
            raise ModelError(f"--params {args.params}: {exc}") from None
    n_steps = int(round(args.duration / args.dt))
    if n_steps < 1:
        raise ModelError(f"--duration {args.duration:g} s is shorter than one time step --dt {args.dt:g} s")
    hinge_names = [j.name for j in model.hinges]
    init: dict[str, float] = {}
    for name, angle in args.init:
        if name not in hinge_names:
            raise ModelError(
                f"--init {name}={angle:g}: {model.name} has no hinge {name!r}; "
                + (f"hinges: {', '.join(hinge_names)}" if hinge_names
                   else "it has no hinges (bodies keep their built-in pose)")
            )
        if name in init:
            raise ModelError(f"--init: joint {name!r} is given twice ({init[name]:g} and {angle:g})")
        init[name] = angle
    observed_angles = [i for i, name in enumerate(model.observations) if name in hinge_names]
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
    x0 = model.initial_state(coordinates=init, parameters=values.numpy_values())
    if not args.quiet:
        start_note = ", ".join(f"{k} = {v:g} rad" for k, v in init.items()) or (
            "all joint angles 0" if hinge_names else "its built-in pose"
        )
        _eprint(
            f"mbfg simulate: {model.name}, {n_steps} steps of {args.dt:g} s, at rest "
            f"{'with' if init or hinge_names else 'in'} {start_note}; "
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
    _eprint(
        f"mbfg simulate: {n_steps} steps, {simulated:g} s simulated in {trajectory.wall_s:.2f} s wall "
        f"(of which compile {trajectory.compile_s:.2f} s; {rate:.3g} simulated s per wall s after compile); "
        + "; ".join([controls_note, *notes])
        + ("" if args.out == "-" else f"; wrote {args.out}")
    )
    return 0


def _cmd_models(args: argparse.Namespace) -> int:
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


# --------------------------------------------------------------------------------------
# Entry point
# --------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``mbfg`` command line; returns the exit status (0 ok, 2 user error)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version (0) or a usage error (2)
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else EXIT_USER_ERROR)
    try:
        return int(args.handler(args))
    except MbfgError as exc:
        _eprint(f"mbfg: error: {exc}")
        return EXIT_USER_ERROR
    except FileNotFoundError as exc:
        _eprint(f"mbfg: error: {exc.filename or exc}: file not found")
        return EXIT_USER_ERROR
    except KeyboardInterrupt:
        _eprint("mbfg: interrupted")
        return 130
    except BrokenPipeError:  # '--out -' piped into e.g. head, which stopped reading
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())  # no second error when Python flushes stdout at exit
        except (OSError, ValueError):
            pass
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
