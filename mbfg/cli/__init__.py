"""The ``mbfg`` command line: simulated logs of 3D rigid-body models and their
calibration from logs; forward and inverse dynamics of planar mechanisms.

::

    mbfg simulate MODEL --duration T --dt H [--params FILE] [--controls CSV]
                  [--init JOINT=ANGLE ...] [--noise SIGMA] [--ppr N] [--seed S] --out log.csv
    mbfg calibrate MODEL LOG.csv [--params FILE] [--free NAME,...] [--prior NAME=SIGMA,...] [--dt H] [--weight W]
                   [--max-iterations N] [--json] [--out RESULT.json] [--quiet]
    mbfg crossval MODEL LOG.csv --params CALIB.json [--dt H] [--weight W] [--max-iterations N] [--json] [--quiet]
    mbfg smooth MODEL --params CALIB.json [--lag S] ... [--input FILE|-] [--output FILE|-]
    mbfg sweep MODEL LOG... [--dt H,...] [--weight W,...] [--eps E,...] ... --out SWEEP.csv
    mbfg control MODEL --target NAME=VALUE [...] [--duration T] [--dt H] ... --out CONTROLS.csv
    mbfg models [MODEL ...]
    mbfg forward MECHANISM [--dt 0.001] [--duration 5] [--lag N | --batch] --out q.csv
    mbfg inverse MECHANISM TRAJECTORY --coordinate I[,J,...] --out forces.csv
    mbfg mechanisms [MECHANISM ...]
    mbfg torques ROBOT.urdf LOG.csv [--smoothing LAM] [--out TORQUES.csv]
    mbfg excite ROBOT.urdf --duration T --harmonics N [--base-frequency F] [--out-trajectory REF.csv]
                [--out-controls TORQUES.csv] [--seed S]
    mbfg identify ROBOT.urdf LOG.csv [--torques TAU.csv] --out CALIBRATED.urdf [--json RESULT.json]
                  [--friction viscous,coulomb,offset] [--method consistent|ls]

MODEL is a built-in rigid-body model (``mbfg models`` lists them) or the path
of a model file (:mod:`mbfg.model_file`); MECHANISM is a built-in planar
mechanism (``mbfg mechanisms``) or the path of an MBSE YAML file. Every user
error (bad file, unknown coordinate, malformed row ...) prints
``mbfg: error: <message>`` on stderr and exits with status 2.

Each subcommand is a module of this package (``mbfg.cli.simulate``, ...) with its help
text, ``add_parser(subparsers)`` and ``run(args) -> int``; they share the argument types
of :mod:`mbfg.cli.args` and the helpers of :mod:`mbfg.cli.common`, and import nothing
from this module or from each other. Heavy modules (JAX, GTSAM, pandas, the estimators)
are imported inside the ``run`` functions, so that ``mbfg --help`` stays quick.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence

from mbfg._jax import enable_compilation_cache
from mbfg.cli import (
    calibrate,
    control,
    crossval,
    excite,
    forward,
    identify,
    inverse,
    mechanisms,
    models,
    simulate,
    smooth,
    sweep,
    torques,
)
from mbfg.cli.args import BLANCO_CLARACO_2021, CONTROL_NOTE, MARKLUND_2025
from mbfg.cli.common import eprint, model_with_params, rigid_model  # noqa: F401  (tests import these from here)
from mbfg.errors import MbfgError
from mbfg.progress import log_to_stderr

__all__ = ["main", "build_parser"]

EXIT_USER_ERROR = 2

#: The subcommands, in the order ``mbfg --help`` lists them.
COMMANDS = (simulate, calibrate, crossval, smooth, sweep, control, models, forward, inverse, mechanisms, torques,
            excite, identify)

_MAIN_EPILOG = f"""\
examples, one per command (each reads what the lines above it write; other.csv
is a second log, simulated as log.csv is but from another --init and --seed):
  mbfg simulate pendulum --duration 2 --dt 0.001 --init theta=2.5 --noise 0.001 --seed 1 --out log.csv
  mbfg calibrate pendulum log.csv --free J,b --out calib.json --plot fit.png
  mbfg crossval pendulum other.csv --params calib.json
  mbfg smooth pendulum --params calib.json --lag 0.05 --input log.csv --output estimates.csv
  mbfg sweep pendulum log.csv other.csv --free J,b --weight 1e4,1e6 --out sweep.csv
  mbfg control furuta-viscous --target theta=2.0 --duration 0.5 --dt 0.001 --limit 10 --out voltage.csv
  mbfg models furuta
  mbfg forward fourbar --duration 5 --out fourbar.csv
  mbfg inverse fourbar-crank builtin:fourbar-crank --coordinate theta1 --out torque.csv
  mbfg mechanisms
  mbfg torques robot.urdf robot_log.csv --out torques.csv
  mbfg excite robot.urdf --duration 10 --harmonics 5 --out-trajectory ref.csv --out-controls u.csv
  mbfg identify robot.urdf robot_log.csv --out calibrated.urdf --json identified.json

Units are SI throughout: m, kg, s, rad, N, N m. Gravity acts along -y for the
planar mechanisms (forward, inverse) and along -z for the 3D models (simulate,
calibrate, crossval, smooth, sweep, control).
Run 'mbfg COMMAND --help' for the options of each command.

references:
{MARKLUND_2025}
    (the 3D models, their calibration and cross-validation)
{BLANCO_CLARACO_2021}
    (the planar mechanisms, forward and inverse dynamics)
{CONTROL_NOTE}
    (control)
"""


def build_parser() -> argparse.ArgumentParser:
    """The ``mbfg`` argument parser: one subcommand per module of :data:`COMMANDS`."""
    from mbfg import __version__

    parser = argparse.ArgumentParser(
        prog="mbfg",
        description=(
            "Multibody dynamics and estimation as GTSAM factor graphs with JAX residuals:\n"
            "simulated logs of 3D rigid-body models, their calibration and cross-validation,\n"
            "state estimation from a live log, sweeps of the calibration's settings and\n"
            "control (simulate, calibrate, crossval, smooth, sweep, control, models);\n"
            "forward dynamics of planar mechanisms and inverse dynamics, the forces that\n"
            "produce a prescribed motion (forward, inverse, mechanisms). Models and\n"
            "mechanisms are YAML files or built-in names."
        ),
        epilog=_MAIN_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"mbfg {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for command in COMMANDS:
        command.add_parser(sub)  # each sets its run() as the parsed arguments' handler
    return parser


def _process_age() -> float | None:
    """Seconds since this process started (Linux: from /proc), None where that cannot be read or looks wrong."""
    try:
        with open("/proc/self/stat", encoding="ascii") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()  # after the command name: field 3 (state) onwards
        with open("/proc/uptime", encoding="ascii") as fh:
            uptime = float(fh.read().split()[0])
        age = uptime - int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22: start time [clock ticks after boot]
    except (OSError, ValueError, IndexError, AttributeError):
        return None
    return age if 0.0 <= age < 600.0 else None


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``mbfg`` command line; returns the exit status (0 ok, 2 user error)."""
    # The summary lines' "wall in all" counts from here; run as a program, from the start of the process
    # (Python's start-up and the imports of mbfg: seconds on a small machine).
    started = time.perf_counter() - ((_process_age() or 0.0) if argv is None else 0.0)
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version (0) or a usage error (2)
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else EXIT_USER_ERROR)
    # Run as a program (argv from sys.argv), the command owns its process: 'mbfg smooth' may then tune
    # the process's garbage collector, which it must not do when called from a user's Python.
    args.own_process = argv is None
    args.started = started
    # A command's second run loads its compiled programs from disk (the library leaves the cache to its user).
    enable_compilation_cache()
    # The library logs its progress; the command prints it.
    log_to_stderr()
    try:
        return int(args.handler(args))
    except MbfgError as exc:
        eprint(f"mbfg: error: {exc}")
        return EXIT_USER_ERROR
    except FileNotFoundError as exc:
        eprint(f"mbfg: error: {exc.filename or exc}: file not found")
        return EXIT_USER_ERROR
    except KeyboardInterrupt:
        eprint("mbfg: interrupted")
        return 130
    except BrokenPipeError:  # '--out -' piped into e.g. head, which stopped reading
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())  # no second error when Python flushes stdout at exit
        except (OSError, ValueError):
            pass
        return 1
