"""Argument types of the ``mbfg`` command line, shared by its subcommands.

The converters are argparse ``type=`` functions: each returns the value or raises
:class:`argparse.ArgumentTypeError`, whose message argparse prints after
``mbfg COMMAND: error: argument --OPTION:`` (exit status 2). The ``*_HELP`` strings
are the help of the positional arguments several subcommands take.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from typing import TypeAlias

from mbfg.limits import MAX_COORDINATE as _MAX_COORDINATE
from mbfg.limits import MAX_GRAVITY

#: What ``add_subparsers`` returns: each subcommand module's ``add_parser(sub)`` registers itself on it.
Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"

MODEL_HELP = "built-in model name (see 'mbfg models') or path of a model file (.yaml or .urdf)"
LOG_HELP = (
    "log in the standard format (CSV: t, the model's observations, its controls), or a lab's own recording: "
    "a DFKI double pendulum trajectory_NN.csv or a QUBE-Servo episode CSV (see --resample)"
)
#: The help of ``--resample`` (calibrate, crossval, sweep: :func:`add_resample_option`).
RESAMPLE_HELP = (
    "put the recording on a uniform grid of step H [s] before the estimation: observations interpolated "
    "linearly, controls held (one line on stderr says what was done). Needed for a lab recording that is not "
    "uniformly sampled (the DFKI double pendulum's trajectory_NN.csv: gaps; e.g. --resample 0.002), refused "
    "without it; a QUBE-Servo episode CSV is uniform already. A log whose clock jitters by more than 1e-6 of its "
    "period is refused too (with the number of rows off the grid); --resample at its own period puts it on its "
    "own grid, each row's control kept (jitter below 1e-6 of the period is snapped, with a line on stderr). "
    "Default: the recording's own times"
)
MECHANISM_HELP = "built-in mechanism name (see 'mbfg mechanisms') or path of an MBSE YAML file"
GRAVITY_HELP = "gravity along -y [m/s^2] (default: %(default)s)"

# The works the help texts cite: by a short form in the text ("Marklund et al. 2025, sec. 4.5"), in full
# in the epilogs (each a line of at most 80 characters after two spaces of indent).
MARKLUND_2025 = """\
  H. Marklund, M. Servin, M. G. Larson: Joint parameter and state estimation
  for regularized time-discrete multibody dynamics, 2025 (arXiv:2502.06599)"""
BLANCO_CLARACO_2021 = """\
  J.-L. Blanco-Claraco, A. Leanza, G. Reina: A general framework for modeling
  and dynamic simulation of multibody systems using factor graphs, Nonlinear
  Dynamics, 2021 (doi:10.1007/s11071-021-06731-6)"""
CONTROL_NOTE = """\
  Dynamical system control (a note): implicit-Euler constrained dynamics with
  activations, target-velocity and target-constraint-force costs"""


def finite_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


def positive_float(text: str) -> float:
    value = finite_float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a finite number > 0, got {text!r}")
    return value


def nonnegative_float(text: str) -> float:
    value = finite_float(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a finite number >= 0, got {text!r}")
    return value


def gravity_value(text: str) -> float:
    """Gravity [m/s^2]: a finite number of magnitude at most :data:`mbfg.limits.MAX_GRAVITY`."""
    value = finite_float(text)
    if abs(value) > MAX_GRAVITY:
        raise argparse.ArgumentTypeError(f"expected a gravity of magnitude at most {MAX_GRAVITY:g} m/s^2 (1,000 g), "
                                         f"got {text!r}")
    return value


def add_resample_option(parser: argparse.ArgumentParser) -> None:
    """``--resample H`` (:data:`RESAMPLE_HELP`) on ``parser``: ``args.resample``, None or a time-step > 0 [s];
    and ``--columns`` (:data:`COLUMNS_HELP`): ``args.columns``, None or the log's column names to read."""
    parser.add_argument("--resample", type=positive_float, default=None, metavar="H", help=RESAMPLE_HELP)
    parser.add_argument("--columns", type=_column_list, default=None, metavar="T,NAMES...", help=COLUMNS_HELP)


#: The help of ``--columns`` (calibrate, crossval, sweep).
COLUMNS_HELP = (
    "the log's columns to read, in the order of the model's t, observations and controls (e.g. --columns "
    "time,angle for the pendulum's t,theta); the others are ignored. Without it a standard log must have "
    "exactly the model's columns: one with other columns (a log of another model?) is refused"
)


def _column_list(text: str) -> list[str]:
    names = [c.strip() for c in text.split(",")]
    if not all(names):
        raise argparse.ArgumentTypeError(f"expected comma-separated column names, e.g. t,theta, got {text!r}")
    if len(set(names)) != len(names):
        raise argparse.ArgumentTypeError(f"a column is named twice in {text!r}")
    return names


def whole_number(minimum: int, what: str, too_small: str) -> Callable[[str], int]:
    """An argparse type: an int >= ``minimum``; "expected {what}, got 'x'" / "expected {too_small}, got 0"."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"expected {too_small}, got {value}")
        return value

    return parse


counts_per_revolution = whole_number(1, "a whole number of counts per revolution", "at least 1 count per revolution")
seed_value = whole_number(0, "a whole number >= 0", "a whole number >= 0")
positive_steps = whole_number(1, "a whole number of steps", "at least 1 step")
iteration_count = whole_number(1, "a whole number of iterations", "at least 1 iteration")
sample_count = whole_number(0, "a whole number of samples", "0 samples or more")
halving_count = whole_number(0, "a whole number of halvings", "0 halvings or more")


#: Largest joint coordinate ``--init`` takes [rad or m] (:data:`mbfg.limits.MAX_COORDINATE`).
MAX_COORDINATE = _MAX_COORDINATE


def assignment(text: str) -> tuple[str, float]:
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
    if abs(number) > MAX_COORDINATE:
        raise argparse.ArgumentTypeError(
            f"{text!r}: expected an angle [rad] or displacement [m] of magnitude at most {MAX_COORDINATE:g} "
            f"(beyond it a float64 cannot resolve the motion: the log would stay frozen at the start value)"
        )
    return name, number
