"""Helpers shared by the ``mbfg`` subcommands: messages, output checks, CSV writing, model
loading (with per-process caches), parameter and time-step checks, calibration files.

Only light modules are imported here (NumPy, the standard library, :mod:`mbfg.errors`); the
heavy ones (JAX models, GTSAM, pandas) are imported inside the functions that need them, so
that ``mbfg --help`` stays quick.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from mbfg._programs import BoundedCache
from mbfg.errors import DataError, MbfgError, ModelError

if TYPE_CHECKING:
    import pandas as pd

    from mbfg.logs import Log
    from mbfg.planar import PlanarMechanism
    from mbfg.rigid import RigidModel


def eprint(*parts: object) -> None:
    print(*parts, file=sys.stderr, flush=True)


def start_clock(args: argparse.Namespace) -> None:
    """Start the command's clock, unless :func:`mbfg.cli.main` started it (before it parsed the arguments)."""
    if getattr(args, "started", None) is None:
        args.started = time.perf_counter()


def wall_seconds(args: argparse.Namespace) -> float:
    """The command's wall time so far [s], from :func:`start_clock`: imports, reading, building, compiling,
    solving and writing included (what a summary line reports as "wall in all")."""
    start_clock(args)
    return time.perf_counter() - args.started


def check_output(out: str, kind: str = "CSV", option: str = "--out",
                 inputs: Sequence[tuple[str, str | None]] = ()) -> None:
    """Fail before the (possibly long) solve if the output file (of ``option``) cannot be written, or is one of
    the command's ``inputs`` ((option or argument name, path) pairs; None and '-' skipped): the same resolved
    path or the same inode, so that a run never truncates what it reads (``--output in.csv`` read its own
    output back as input and grew without end)."""
    from mbfg.atomic import is_special, same_file

    if out == "-":
        return
    path = Path(out)
    if path.is_dir():
        raise DataError(f"{option} {out}: is a folder; expected a {kind} file name")
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise DataError(f"{option} {out}: folder {str(parent)!r} does not exist")
    if not is_special(out) and not os.access(parent, os.W_OK | os.X_OK):
        # The file is written beside its final name and renamed (mbfg.atomic): the folder must take a new file.
        raise DataError(f"{option} {out}: cannot write in folder {str(parent)!r} (permission denied)")
    for name, source in inputs:
        if source == "-" and _is_standard_input(out):
            raise DataError(f"{option} {out}: is the file on standard input ({name} -), which the command reads; "
                            f"give {option} another file name (nothing was written)")
        if source and source != "-" and not is_special(source) and same_file(out, source):
            raise DataError(f"{option} {out}: is the same file as {name} {source}, which the command reads; "
                            f"give {option} another file name (nothing was written)")


def _is_standard_input(path: str) -> bool:
    """Whether standard input is the regular file ``path`` (``mbfg smooth ... --output in.csv < in.csv``)."""
    import stat

    try:
        given, target = os.fstat(sys.stdin.fileno()), os.stat(path)
    except (OSError, ValueError, AttributeError):  # no such file yet, or a stdin without a descriptor
        return False
    return stat.S_ISREG(given.st_mode) and (given.st_dev, given.st_ino) == (target.st_dev, target.st_ino)


def check_outputs(outputs: Sequence[tuple[str, str | None]]) -> None:
    """No two of a command's output files ((option, path) pairs) are one file: the second would overwrite
    the first."""
    from mbfg.atomic import same_file

    given = [(option, path) for option, path in outputs if path and path != "-"]
    for i, (option, path) in enumerate(given):
        for other, earlier in given[:i]:
            if same_file(path, earlier):
                raise DataError(f"{option} {path}: is the same file as {other} {earlier}; give each output its "
                                f"own file name")


def model_input(name: str) -> tuple[str, str | None]:
    """The ("MODEL", path) input pair of a MODEL argument, path None for a built-in model name."""
    from mbfg.models import BUILTIN

    return ("MODEL", None if name in BUILTIN else name)


def check_figure(path: str, what: str, option: str = "--plot") -> None:
    """Fail before the (possibly long) computation if the figure cannot be written: ``path`` in a folder that
    exists, named with a format matplotlib writes (.png, .pdf, .svg ...), and matplotlib installed (the
    optional extra ``mbfg[plot]``; ``what`` names the feature in the message)."""
    from mbfg.plots import pyplot

    if path == "-":
        raise DataError(f"{option} -: a figure is written to a file, e.g. {option} fit.png")
    check_output(path, "figure", option)
    try:
        pyplot(what)
    except MbfgError as exc:
        raise MbfgError(f"{option} {path}: {exc}") from None
    from matplotlib.backend_bases import FigureCanvasBase

    formats = FigureCanvasBase.get_supported_filetypes()
    if Path(path).suffix.lower().lstrip(".") not in formats:
        raise DataError(
            f"{option} {path}: expected a file name ending in a figure format, e.g. .png, .pdf or .svg "
            f"(matplotlib writes {', '.join('.' + name for name in sorted(formats))})"
        )


def save_figure(fig: Any, path: str, option: str = "--plot") -> None:
    """Write a figure drawn without a path to ``path`` and close it (a command draws one figure)."""
    from mbfg.atomic import replacing_path
    from mbfg.plots import pyplot, save

    try:
        with replacing_path(path, Path(path).suffix) as tmp:  # never a half-written figure over an old one
            save(fig, tmp)
    except OSError as exc:
        raise DataError(f"{option} {path}: cannot write the figure ({exc.strerror or exc})") from None
    finally:
        pyplot().close(fig)


def write_csv(frame: pd.DataFrame, out: str) -> None:
    """``frame`` as CSV to ``out`` ('-': standard output), written whole or not at all (:mod:`mbfg.atomic`)."""
    from mbfg.atomic import replacing

    if out == "-":
        frame.to_csv(sys.stdout, index=False)
        sys.stdout.flush()
        return
    try:
        with replacing(out) as fh:
            frame.to_csv(fh, index=False)
    except OSError as exc:
        raise DataError(f"--out {out}: cannot write the CSV file ({exc.strerror or exc})") from None


def write_json(doc: Any, out: str, option: str = "--out") -> None:
    """``doc`` as indented JSON to ``out``, written whole or not at all: a killed run leaves the old file."""
    from mbfg.atomic import replacing

    try:
        with replacing(out) as fh:
            json.dump(doc, fh, indent=2)
            fh.write("\n")
    except OSError as exc:
        raise DataError(f"{option} {out}: cannot write the JSON file ({exc.strerror or exc})") from None


# --------------------------------------------------------------------------------------
# Planar mechanisms: forward, inverse, mechanisms
# --------------------------------------------------------------------------------------


def max_phi(mech: PlanarMechanism, q: np.ndarray) -> float:
    """Largest constraint residual max |Phi(q)| over the rows of q (n_rows, n)."""
    if mech.m == 0 or len(q) == 0:
        return 0.0
    return float(max(np.max(np.abs(mech.phi(row))) for row in q))


def describe_mechanism(name: str, mech: PlanarMechanism) -> str:
    coords = ", ".join(mech.coordinate_names)
    rank = f" (rank {mech.rank})" if mech.rank < mech.m else ""
    return f"{name}: {mech.n} coordinates [{coords}], {mech.m} constraints{rank}, {mech.dof} dof"


# --------------------------------------------------------------------------------------
# Rigid-body models: simulate, models, calibrate, crossval, smooth, sweep, control
# --------------------------------------------------------------------------------------

#: Built-in models already built in this process. The stepper compiles once per
#: model object, so reusing the object makes a second ``main(["simulate", ...])``
#: in the same process (a notebook, the tests) skip the compilation. Parameter
#: files change values only (passed to the stepper), never the model object.
_MODEL_CACHE: dict[str, RigidModel] = {}


def rigid_model(name: str) -> RigidModel:
    from mbfg.models import BUILTIN, load_model

    if name in BUILTIN:
        if name not in _MODEL_CACHE:
            _MODEL_CACHE[name] = load_model(name)
        return _MODEL_CACHE[name]
    return load_model(name)  # a model file, read afresh every time


#: Built-in models with a parameter file applied, by (name, the file's changes), the 16 most recently used:
#: calibrating again from the same start in one process (a notebook, the tests) reuses the model object
#: and what it holds; a process that reads parameter file after parameter file keeps a bounded number.
_PARAMETRIZED_CACHE: BoundedCache[tuple[str, str], RigidModel] = BoundedCache(16)


def model_with_params(name: str, params: str | None) -> RigidModel:
    """The model ``name`` with the values, bounds and free flags of the parameter file ``params``."""
    from mbfg.models import BUILTIN
    from mbfg.parameters import load_parameter_file

    model = rigid_model(name)
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


def parse_free(model: RigidModel, text: str) -> list[str]:
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


def log_sample_period(log: Log) -> float:
    """The log's sample period [s], exact to the decimals of its times (:func:`mbfg.logs.sample_period`)."""
    from mbfg.logs import sample_period

    return sample_period(log.t)


def compile_notice(command: str, quiet: bool) -> contextlib.AbstractContextManager[None]:
    """Around an estimation (``mbfg calibrate``, ``mbfg crossval``): unless ``quiet``, a "compiling ..." line on
    stderr before each LM compiles its JAX programs and "compiled in S s" after, the words of ``mbfg smooth``'s
    warm-up. On a first run that is seconds to tens of seconds that would otherwise pass without a line."""
    if quiet:
        return contextlib.nullcontext()  # no compile-first evaluation either: nothing would be said
    from mbfg.graphs.joint import reporting_compiles

    def report(label: str, seconds: float | None) -> None:
        if seconds is None:
            eprint(f"mbfg {command}: compiling [{label}] (JAX) ...")
        else:
            eprint(f"mbfg {command}: compiled in {seconds:.1f} s")

    return reporting_compiles(report)


def check_time_step(log: Log, h: float | None, what: str) -> None:
    """``h`` (from option ``what``) is a whole multiple of the log's sample period (the library's rule)."""
    if h is None or len(log.t) < 3:
        return  # the library reports short logs
    period = log_sample_period(log)
    stride = int(round(h / period))
    if stride < 1 or abs(stride * period - h) > 1e-6 * h:
        raise DataError(
            f"{what}: the estimation time-step must be a whole multiple of the sample period "
            f"{period:.6g} s of {log.source} (e.g. {period:.6g} or {2 * period:.6g})"
        )


def json_safe(value: Any) -> Any:
    """``value`` with NumPy scalars as Python numbers and NaN/inf as None (strict JSON)."""
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(value) if math.isfinite(float(value)) else None
    return value


def calibration_settings(path: str) -> dict[str, Any]:
    """h, weight, model and the estimated parameters' names (``free``) recorded in a calibration JSON
    (``mbfg calibrate --out``); {} for other files."""
    from mbfg.parameters import check_calibration_settings, json_document

    if not path.endswith(".json"):
        return {}
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except (OSError, ValueError):
        return {}  # load_parameter_file reports unreadable files
    doc = json_document(text, f"--params {path}")
    if not isinstance(doc, dict) or not isinstance(doc.get("parameters"), dict):
        return {}
    check_calibration_settings(doc, f"--params {path}")  # a wrong h or weight is not replaced by a default
    out: dict[str, Any] = {key: float(doc[key]) for key in ("h", "weight") if doc.get(key) is not None}
    if isinstance(doc.get("model"), str):
        out["model"] = doc["model"]
    out["free"] = [str(name) for name in doc["parameters"]]
    return out
