"""The ``mbfg`` command line: simulated logs of 3D rigid-body models and their
calibration from logs; forward and inverse dynamics of planar mechanisms.

::

    mbfg simulate MODEL --duration T --dt H [--params FILE] [--controls CSV]
                  [--init JOINT=ANGLE ...] [--noise SIGMA] [--ppr N] [--seed S] --out log.csv
    mbfg calibrate MODEL LOG.csv [--params FILE] [--free NAME,...] [--prior NAME=SIGMA,...] [--dt H] [--weight W]
                   [--max-iterations N] [--json] [--out RESULT.json] [--quiet]
    mbfg crossval MODEL LOG.csv --params CALIB.json [--dt H] [--weight W] [--json] [--quiet]
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
import json
import math
import os
import sys
import time
from collections.abc import Callable, Sequence
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
  mbfg calibrate pendulum pendulum.csv --free J,b --out calib.json
  mbfg crossval pendulum other.csv --params calib.json
  mbfg mechanisms
  mbfg forward fourbar --duration 5 --out fourbar.csv
  mbfg forward my_linkage.yaml --dt 0.002 --duration 2 --batch --out q.csv
  mbfg inverse fourbar-crank builtin:fourbar-crank --coordinate theta1 --out torque.csv

Units are SI throughout: m, kg, s, rad, N, N m. Gravity acts along -y for the
planar mechanisms (forward, inverse) and along -z for the 3D models (simulate,
calibrate, crossval).
Run 'mbfg COMMAND --help' for the options of each command.
"""

_FORWARD_DESCRIPTION = """\
Simulate a mechanism released from rest in its initial configuration (the
positions written in its YAML file), under gravity along -y, with a
forward-dynamics factor graph. By default the problem is solved online with a
fixed-lag smoother over a window of --lag steps; --batch solves the whole
horizon at once (Levenberg-Marquardt started from the fixed-lag trajectory;
memory grows with the number of steps). A batch solve that does not reach a
minimum within its iterations (long horizons: the whole-horizon problem is
poorly conditioned) is reported on stderr, its result still written, and the
exit status is 1.

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
  mbfg forward fourbar --duration 0.2 --batch --out fourbar-batch.csv
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

_CALIBRATE_DESCRIPTION = """\
Calibrate a 3D rigid-body model from a log: estimate its free parameters and
its state trajectory jointly (seed 001), by box-constrained Levenberg-Marquardt
on the objective  sum_k |Delta y_k|^2 + w sum_k |Delta p_k|^2  (observation
errors [rad or m] and impulse errors of the Spook steps [N s, N m s]).

LOG is a log in the standard format (what 'mbfg simulate' writes): columns t
[s], the model's observations, its controls; uniformly sampled, empty cells are
missing readings. The model's parameter values (or those of --params) are the
initial guess and its bounds the box the estimates stay in.

--free names the parameters to estimate, comma-separated (default: those the
model marks free, see 'mbfg models MODEL'); the gravity tilt rotation may be
named too (e.g. tilt), it is then estimated as a rotation. --dt is the
estimation time-step h [s], a whole multiple of the log's sample period
(default: the period); a larger h is faster but its Spook steps are coarser.
--weight is the state error weight w (default 1e6): larger trusts the model's
dynamics more than the readings. --prior NAME=SIGMA,... adds prior knowledge: a
Gaussian prior on each named free parameter at its initial value, standard
deviation SIGMA in the parameter's unit (e.g. rough CAD values of inertias the
log does not excite, which otherwise fall to their bound and slow the fit down).
The printed std stays the data's: a parameter only its prior holds is still
flagged as not excited.

Output on stdout: a table of the estimates (value, linearized standard
deviation, unit, bounds; 'not excited' where std > |value|, the data cannot
tell the value from zero; 'at its bound' where the value ended on a bound,
where the linearized std means nothing) and the cost per time-step; with --json
instead one JSON object: {"model", "parameters": {NAME: {"value", "std", "unit",
"lower", "upper", "excited", "at_bound"}}, "fixed": {NAME: {"value", "unit",
"lower", "upper"}} (every other parameter of the model, at the value it was
held at: the file is the whole model), "cost", "cost_observation",
"cost_impulse", "iterations", "start_iterations", "converged", "wall_s", "h",
"weight", "sigma_observation", "sigma_impulse", "singular_values",
"not_excited", "at_bound", "log", "params", "priors"} (a free
tilt is one entry whose value and std are rotation vectors [rad]; a std that
cannot be computed is null). --out FILE also writes that JSON object to FILE: feed it
back with --params FILE, or to 'mbfg crossval'.

The std says what the noise allows; the discrete model adds a bias no data removes
(Spook is first order in h, and the joints are compliant). --bias estimates it by
calibrating twice more from the result, at 2h and with the joint compliances
divided by 10 (bias = first-order extrapolation to h -> 0 and rigid joints;
value - bias is the extrapolated estimate): a 'bias' column, flagged 'biased'
where |bias| > std, and in the JSON "bias"/"biased" per parameter, plus
"biased", "bias_parts" {"h", "compliance"} and "bias_method".

Progress lines (LM iteration, cost, lambda, elapsed time) go to stderr unless
--quiet, and so does a one-line summary.
"""

_CALIBRATE_EPILOG = """\
examples:
  mbfg simulate pendulum --duration 2 --dt 0.001 --init theta=2.5 --noise 0.001 --out log.csv
  mbfg calibrate pendulum log.csv --free J,b --json
  mbfg calibrate pendulum log.csv --free J,b --bias
  mbfg calibrate pendulum log.csv --params start.yaml --free J,b,d --out calib.json
  mbfg calibrate furuta furuta.csv --dt 0.002 --weight 1e5 --max-iterations 50 --quiet
  mbfg calibrate furuta furuta.csv --free K,b_1,b_2,tilt --params calib.json
  mbfg calibrate furuta furuta.csv --prior J_Ax=1.2e-6,J_Ay=7.2e-5

A start file (--params; YAML or JSON, name: value or name: {value, lower, upper, free}):
  J: 2.0e-3
  b: {value: 1.0e-3, lower: 0, upper: 0.1}
"""

_CROSSVAL_DESCRIPTION = """\
Cross-validation score of calibrated parameters on another log (seed 001
section 4.5): state estimation on LOG with every parameter fixed at the values
of --params, and the resulting cost per time-step
  (sum_k |Delta y_k|^2 + w sum_k |Delta p_k|^2) / n,
the same objective as 'mbfg calibrate'. A log the parameters explain well
scores about the variance of the observation noise [rad^2 or m^2]; compare
scores computed with the same --dt and --weight.

--params is usually the JSON of 'mbfg calibrate --out' (any parameter file is
accepted); a calibration result gives the whole model, estimated and fixed
parameters, and one made for another model is refused. --dt and --weight default to the h and w of that calibration when
the file records them, else to the log's sample period and 1e6.

Output on stdout: 'score VALUE'; with --json one JSON object {"score", "log",
"model", "params", "h", "weight", "n"} (n: the number of time-steps). Progress
lines go to stderr unless --quiet, and so does a one-line summary.
"""

_CROSSVAL_EPILOG = """\
examples:
  mbfg simulate pendulum --duration 2 --dt 0.001 --init theta=2.5 --noise 0.001 --seed 1 --out log.csv
  mbfg simulate pendulum --duration 2 --dt 0.001 --init theta=1.5 --noise 0.001 --seed 2 --out other.csv
  mbfg calibrate pendulum log.csv --free J,b --out calib.json
  mbfg crossval pendulum other.csv --params calib.json
  mbfg crossval pendulum other.csv --params calib.json --dt 0.002 --json
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


def _whole_number(minimum: int, what: str, too_small: str) -> Callable[[str], int]:
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


_counts = _whole_number(1, "a whole number of counts per revolution", "at least 1 count per revolution")
_seed = _whole_number(0, "a whole number >= 0", "a whole number >= 0")
_positive_int = _whole_number(1, "a whole number of steps", "at least 1 step")
_iterations = _whole_number(1, "a whole number of iterations", "at least 1 iteration")


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


def build_parser() -> argparse.ArgumentParser:
    """The ``mbfg`` argument parser (subcommands simulate, calibrate, crossval, models, forward, inverse,
    mechanisms)."""
    from mbfg import __version__

    parser = argparse.ArgumentParser(
        prog="mbfg",
        description=(
            "Multibody dynamics and estimation as GTSAM factor graphs with JAX residuals:\n"
            "simulated logs of 3D rigid-body models and their calibration (simulate,\n"
            "calibrate, crossval, models), forward dynamics of\n"
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

    log_help = "log in the standard format (CSV: t, the model's observations, its controls)"
    weight_help = "state error weight w [rad^2/(N s)^2] (default: 1e6)"

    cal = sub.add_parser(
        "calibrate",
        help="estimate a 3D rigid-body model's parameters (with standard deviations) from a log",
        description=_CALIBRATE_DESCRIPTION,
        epilog=_CALIBRATE_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    cal.add_argument("model", metavar="MODEL", help=model_help)
    cal.add_argument("log", metavar="LOG.csv", help=log_help)
    cal.add_argument(
        "--params", metavar="FILE",
        help="parameter file (YAML or JSON, or the JSON of a calibration): initial values, bounds, free flags",
    )
    cal.add_argument(
        "--free", metavar="NAME,...",
        help="comma-separated parameters to estimate (default: the model's free parameters)",
    )
    cal.add_argument(
        "--prior", metavar="NAME=SIGMA,...",
        help="Gaussian priors on free parameters at their initial values, standard deviation SIGMA [their unit]",
    )
    cal.add_argument(
        "--dt", type=_positive_float, default=None, metavar="H",
        help="estimation time-step [s], a whole multiple of the log's sample period (default: the period)",
    )
    cal.add_argument("--weight", type=_positive_float, default=1e6, metavar="W", help=weight_help)
    cal.add_argument(
        "--max-iterations", type=_iterations, default=20, metavar="N",
        help="Levenberg-Marquardt iterations at most (default: %(default)s)",
    )
    cal.add_argument(
        "--bias", action="store_true",
        help="also estimate each parameter's bias from the discrete model (calibrates again at 2h and with "
             "the joint compliances / 10; flagged where it exceeds the std)",
    )
    cal.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    cal.add_argument("--out", metavar="RESULT.json", help="also write the JSON result to this file")
    cal.add_argument("--quiet", action="store_true", help="no progress lines (the summary line is still printed)")
    cal.set_defaults(handler=_cmd_calibrate)

    cv = sub.add_parser(
        "crossval",
        help="cross-validation score of calibrated parameters on another log",
        description=_CROSSVAL_DESCRIPTION,
        epilog=_CROSSVAL_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    cv.add_argument("model", metavar="MODEL", help=model_help)
    cv.add_argument("log", metavar="LOG.csv", help=log_help)
    cv.add_argument(
        "--params", required=True, metavar="CALIB.json",
        help="the parameters to score: the JSON of 'mbfg calibrate --out', or any parameter file",
    )
    cv.add_argument(
        "--dt", type=_positive_float, default=None, metavar="H",
        help="estimation time-step [s] (default: the calibration's h, else the log's sample period)",
    )
    cv.add_argument(
        "--weight", type=_positive_float, default=None, metavar="W",
        help="state error weight w [rad^2/(N s)^2] (default: the calibration's w, else 1e6)",
    )
    cv.add_argument("--json", action="store_true", help="print one JSON object instead of 'score VALUE'")
    cv.add_argument("--quiet", action="store_true", help="no progress lines (the summary line is still printed)")
    cv.set_defaults(handler=_cmd_crossval)

    from mbfg.cli_smooth import add_parser as add_smooth_parser  # mbfg smooth lives in its own module

    add_smooth_parser(sub)
    from mbfg.cli_sweep import add_parser as add_sweep_parser  # mbfg sweep too
    add_sweep_parser(sub)

    from mbfg.cli_control import add_parser as add_control_parser  # mbfg control lives in its own module
    add_control_parser(sub)
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


def _check_output(out: str, kind: str = "CSV") -> None:
    """Fail before the (possibly long) solve if the output file cannot be written."""
    if out == "-":
        return
    path = Path(out)
    if path.is_dir():
        raise DataError(f"--out {out}: is a folder; expected a {kind} file name")
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
    if result.converged is False:
        _eprint(
            f"mbfg forward: warning: the batch solve did not converge in {result.iterations[0]} LM iterations "
            f"(its Gauss-Newton model still predicts a decrease); the trajectory written is not a solution. "
            f"Use the fixed-lag smoother (drop --batch) or a shorter --duration"
        )
        return 1
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
        changes = load_parameter_file(args.params, model)
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
# Calibration: calibrate, crossval
# --------------------------------------------------------------------------------------

#: Built-in models with a parameter file applied, by (name, the file's changes). The
#: estimation factors compile once per model object (and log length), so calibrating
#: again from the same start in one process (a notebook, the tests) skips the compilation.
_PARAMETRIZED_CACHE: dict[tuple[str, str], object] = {}


def _model_with_params(name: str, params: str | None):
    """The model ``name`` with the values, bounds and free flags of the parameter file ``params``."""
    from mbfg.models import BUILTIN
    from mbfg.parameters import load_parameter_file

    model = _rigid_model(name)
    if not params:
        return model
    changes = load_parameter_file(params, model)
    if name == "dfki-double-pendulum":
        from mbfg.dfki import is_lab_file, lab_to_parameters

        if is_lab_file(changes):  # the lab's own model_parameters.yml
            changes = lab_to_parameters(changes)
    key = None
    if name in BUILTIN:
        try:
            key = (name, json.dumps(changes, sort_keys=True))
        except (TypeError, ValueError):
            key = None
    if key is not None and key in _PARAMETRIZED_CACHE:
        return _PARAMETRIZED_CACHE[key]
    try:
        model = model.with_parameters(changes)  # checks names, bounds, positivity
    except ModelError as exc:
        raise ModelError(f"--params {params}: {exc}") from None
    if key is not None:
        _PARAMETRIZED_CACHE[key] = model
    return model


def _parse_free(model, text: str) -> list[str]:
    """The parameter names of ``--free NAME,...``, each checked against the model."""
    items = [item.strip() for item in text.split(",")]
    known = ", ".join(model.parameters)
    if not text.strip() or any(not item for item in items):
        raise ModelError(
            f"--free {text!r}: expected comma-separated parameter names, e.g. J,b; {model.name} has {known}"
        )
    seen: set[str] = set()
    for item in items:
        if item not in model.parameters:
            raise ModelError(f"--free {text}: {model.name} has no parameter {item!r}; its parameters: {known}")
        if item in seen:
            raise ModelError(f"--free {text}: parameter {item!r} is given twice")
        seen.add(item)
    return items


def _parse_priors(model, names: list[str], text: str) -> dict[str, float]:
    """``--prior NAME=SIGMA,...`` as {name: sigma}, each name a scalar parameter being estimated, each sigma > 0."""
    priors: dict[str, float] = {}
    for item in text.split(","):
        name, sep, value = (part.strip() for part in item.partition("="))
        if not sep or not name:
            raise ModelError(
                f"--prior {text}: expected NAME=SIGMA items separated by commas, e.g. J=1e-4, got {item!r}"
            )
        if name not in names:
            raise ModelError(f"--prior {text}: {name!r} is not a parameter being estimated ({', '.join(names)})")
        if name == model.tilt:
            raise ModelError(f"--prior {text}: {name!r} is a rotation; priors are for scalar parameters")
        if name in priors:
            raise ModelError(f"--prior {text}: parameter {name!r} is given twice")
        try:
            priors[name] = _positive_float(value)
        except argparse.ArgumentTypeError:
            message = f"--prior {text}: the sigma of {name!r} must be a positive number, got {value!r}"
            raise ModelError(message) from None
    return priors


def _sample_period(log) -> float:
    return float(np.median(np.diff(log.t))) if len(log.t) > 1 else float("nan")


def _check_time_step(log, h: float | None, what: str) -> None:
    """``h`` (from option ``what``) is a whole multiple of the log's sample period (the library's rule)."""
    if h is None or len(log.t) < 3:
        return  # the library reports short logs
    period = _sample_period(log)
    stride = int(round(h / period))
    if stride < 1 or abs(stride * period - h) > 1e-6 * h:
        raise DataError(
            f"{what}: the estimation time-step must be a whole multiple of the sample period "
            f"{period:.6g} s of {log.source} (e.g. {period:.6g} or {2 * period:.6g})"
        )


def _json_safe(value):
    """``value`` with NumPy scalars as Python numbers and NaN/inf as None (strict JSON)."""
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(value) if math.isfinite(float(value)) else None
    return value


def _calibration_settings(path: str) -> dict:
    """h, weight, model and the estimated parameters' names (``free``) recorded in a calibration JSON
    (``mbfg calibrate --out``); {} for other files."""
    if not path.endswith(".json"):
        return {}
    try:
        with open(path, encoding="utf-8") as fh:
            doc = json.load(fh)
    except (OSError, ValueError):
        return {}  # load_parameter_file reports unreadable files
    if not isinstance(doc, dict) or not isinstance(doc.get("parameters"), dict):
        return {}
    out = {}
    for key in ("h", "weight"):
        value = doc.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0:
            out[key] = float(value)
    if isinstance(doc.get("model"), str):
        out["model"] = doc["model"]
    out["free"] = [str(name) for name in doc["parameters"]]
    return out


def _cmd_calibrate(args: argparse.Namespace) -> int:
    from mbfg.calibration import calibrate
    from mbfg.logs import read_log

    if args.out == "-":
        raise DataError("--out -: use --json to print the result on standard output")
    if args.out:
        _check_output(args.out, "JSON")
    model = _model_with_params(args.model, args.params)
    free = _parse_free(model, args.free) if args.free is not None else None
    names = free if free is not None else list(model.parameters.free)
    if not names:
        raise ModelError(
            f"{model.name} marks no parameter free; name those to estimate with --free "
            f"(its parameters: {', '.join(model.parameters)})"
        )
    priors = _parse_priors(model, names, args.prior) if args.prior is not None else None
    log = read_log(args.log, model.observations, model.controls)
    _check_time_step(log, args.dt, f"--dt {args.dt:g}" if args.dt is not None else "")
    if not args.quiet:
        period = _sample_period(log)
        h = args.dt if args.dt is not None else period
        _eprint(
            f"mbfg calibrate: {model.name}, free {', '.join(names)}; {len(log.t)} rows of {args.log} "
            f"(sample period {period:.6g} s), h = {h:.6g} s, weight {args.weight:g}"
            + (f"; start from {args.params}" if args.params else "; start from the model's values")
        )
    result = calibrate(
        model, log, free=free, h=args.dt, weight=args.weight, max_iterations=args.max_iterations, priors=priors,
        quiet=args.quiet, bias=args.bias,
    )
    doc = _json_safe({**result.to_dict(), "log": args.log, "params": args.params, "priors": priors or {}})
    if args.out:
        try:
            with open(args.out, "w", encoding="utf-8") as fh:
                json.dump(doc, fh, indent=2)
                fh.write("\n")
        except OSError as exc:
            raise DataError(f"--out {args.out}: cannot write the JSON file ({exc.strerror or exc})") from None
    if args.json:
        print(json.dumps(doc))
    else:
        print(result.table())
    sys.stdout.flush()
    _eprint(
        f"mbfg calibrate: {result.iterations} LM iterations, "
        + ("converged" if result.converged else "NOT converged (raise --max-iterations?)")
        + f", cost {result.cost:.4g} per step, {result.wall_s:.1f} s wall"
        + (f"; wrote {args.out}" if args.out else "")
    )
    return 0


def _cmd_crossval(args: argparse.Namespace) -> int:
    from mbfg.graphs.joint import cross_validation_score
    from mbfg.logs import read_log

    model = _rigid_model(args.model)
    fitted = _model_with_params(args.model, args.params)
    recorded = _calibration_settings(args.params)
    if recorded.get("model") not in (None, model.name):
        _eprint(
            f"mbfg crossval: note: {args.params} is a calibration of model {recorded['model']!r}, "
            f"scored here with {model.name!r}"
        )
    log = read_log(args.log, model.observations, model.controls)
    if args.dt is not None:
        h, what = args.dt, f"--dt {args.dt:g}"
    else:
        h = recorded.get("h")
        what = f"h = {h:g} s, the time-step recorded in {args.params} (choose another with --dt)" if h else ""
    weight = args.weight if args.weight is not None else recorded.get("weight", 1e6)
    _check_time_step(log, h, what)
    period = _sample_period(log)
    step = h if h is not None else period
    n = len(range(0, len(log.t), max(int(round(step / period)), 1))) if math.isfinite(period) else len(log.t)
    if not args.quiet:
        _eprint(
            f"mbfg crossval: {model.name} with the parameters of {args.params}; state estimation over "
            f"{len(log.t)} rows of {args.log}, h = {step:.6g} s, weight {weight:g}"
        )
    start = time.perf_counter()
    # The calibration's free parameters held at their values: its factor types, so its compiled programs.
    free = [name for name in recorded.get("free", []) if name in model.parameters]
    score = cross_validation_score(
        model, log, fitted.parameters.numpy_values(), h=h, weight=weight, quiet=args.quiet, free=free
    )
    wall = time.perf_counter() - start
    if args.json:
        doc = {"score": score, "log": args.log, "model": model.name, "params": args.params, "h": step,
               "weight": weight, "n": n}
        print(json.dumps(_json_safe(doc)))
    else:
        print(f"score {score:.6g}")
    sys.stdout.flush()
    _eprint(
        f"mbfg crossval: score {score:.4g} per time-step over {n} time-steps of {step:.6g} s "
        f"(weight {weight:g}), {wall:.1f} s wall"
    )
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
    # Run as a program (argv from sys.argv), the command owns its process: 'mbfg smooth' may then tune
    # the process's garbage collector, which it must not do when called from a user's Python.
    args.own_process = argv is None
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
