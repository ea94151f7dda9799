"""The standard log format: CSV with a header ``t`` [s], one column per observed
coordinate, then optional control columns.

::

    t,theta,alpha,u
    0,0,0,0.5
    0.001,1.2e-06,,0.5       <- an empty cell: alpha was not read at this step

Rules (DESIGN.md, conventions):

- ``t`` is in seconds and strictly increasing; observation columns carry hinge
  angles [rad] (multi-turn: unwrapped) or CoM coordinates [m]; control columns
  carry the model's controls (e.g. a motor voltage [V]), the value on row k held
  over [t_k, t_{k+1}).
- An empty cell in an observation column is a missing reading: :func:`read_log`
  returns NaN there and never fills it in. An empty cell in ``t`` or in a control
  column is an error, and so is ``nan``/``inf`` written as text in any cell.
- Numbers are written with full precision (shortest round-trip repr), so reading
  a written log gives back the same floats.

:func:`add_noise` and :func:`quantize` turn simulated observations into
sensor-like readings (Gaussian noise; encoder counts).

The columns are parsed by :mod:`mbfg.log_table` and written by :mod:`mbfg.log_writer`; the times are checked
against their uniform grid by :mod:`mbfg.time_grid`. Their public functions are importable from here.
"""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TextIO

import numpy as np

from mbfg.errors import DataError
from mbfg.limits import MAX_TIME
from mbfg.log_table import read_table
from mbfg.log_writer import write_log
from mbfg.time_grid import (
    REGULAR_RTOL,
    SNAP_TOLERANCE,
    TimeGrid,
    check_on_grid,
    grid_period,
    onto_grid,
    round_time,
    sample_period,
    snap_to_grid,
    time_grid,
)

__all__ = [
    "REGULAR_RTOL",
    "SNAP_TOLERANCE",
    "Log",
    "TimeGrid",
    "add_noise",
    "check_on_grid",
    "grid_period",
    "onto_grid",
    "quantize",
    "quantize_linear",
    "read_log",
    "round_time",
    "sample_period",
    "snap_to_grid",
    "time_grid",
    "write_log",
]


@dataclass(frozen=True)
class Log:
    """A log read by :func:`read_log`.

    t: (n,) times [s], strictly increasing; y: (n, n_obs) observations in the
    order of ``observations``, NaN where the cell was empty (a missing reading);
    u: (n, n_u) controls in the order of ``controls``; source: the file it came from.
    """

    t: np.ndarray
    y: np.ndarray
    u: np.ndarray
    observations: tuple[str, ...]
    controls: tuple[str, ...]
    source: str = "<log>"

    def __post_init__(self) -> None:
        """Check what a log built in Python holds, as :func:`read_log` checks a file: ``t`` (n,) finite and
        strictly increasing, ``y`` (n, len(observations)) of numbers or NaN (a missing reading), ``u``
        (n, len(controls)) finite; DataError naming the field and the row (0-based, as NumPy indexes it)."""
        where = f"Log({self.source})"
        for field, names in (("observations", self.observations), ("controls", self.controls)):
            if isinstance(names, str) or not all(isinstance(n, str) for n in names):
                raise DataError(f"{where}: {field}: expected a tuple of column names, got {names!r}")
            object.__setattr__(self, field, tuple(names))
        arrays = {}
        for field in ("t", "y", "u"):
            try:
                arrays[field] = np.asarray(getattr(self, field), dtype=float)
            except (TypeError, ValueError):
                raise DataError(f"{where}: {field}: expected an array of numbers, got "
                                f"{type(getattr(self, field)).__name__}") from None
        t, y, u = arrays["t"], arrays["y"], arrays["u"]
        if t.ndim != 1:
            raise DataError(f"{where}: t: expected shape (n,), got {t.shape}")
        n = len(t)
        for field, arr, names in (("y", y, self.observations), ("u", u, self.controls)):
            if arr.shape != (n, len(names)):
                raise DataError(f"{where}: {field}: expected shape ({n}, {len(names)}) (one row per time, one column "
                                f"per name in {list(names)}), got {arr.shape}")
        bad = np.flatnonzero(~(np.abs(t) <= MAX_TIME))
        if bad.size:
            raise DataError(f"{where}: t[{bad[0]}] = {t[bad[0]]} is not a finite time [s] within +-{MAX_TIME:g} s")
        back = np.flatnonzero(~(np.diff(t) > 0))
        if back.size:
            i = int(back[0]) + 1
            raise DataError(f"{where}: t[{i}] = {float(t[i])!r} s is not after t[{i - 1}] = {float(t[i - 1])!r} s; times must be "
                            f"strictly increasing")
        for field, arr, names, allowed in (("y", y, self.observations, "NaN for a missing reading"),
                                           ("u", u, self.controls, "every control must be finite")):
            bad_cells = np.argwhere(np.isinf(arr) if field == "y" else ~np.isfinite(arr))
            if bad_cells.size:
                row, col = (int(k) for k in bad_cells[0])
                raise DataError(f"{where}: {field}[{row}, {col}] ({names[col]!r} at t = {float(t[row])!r} s) = "
                                f"{arr[row, col]}: not finite ({allowed})")
        for field, arr in arrays.items():
            object.__setattr__(self, field, arr)

    @property
    def names(self) -> tuple[str, ...]:
        """Every column read, in order: ``t``, the observations, the controls."""
        return ("t", *self.observations, *self.controls)

    def __len__(self) -> int:
        return len(self.t)


def read_log(
    path: str | os.PathLike[str] | TextIO,
    observations: Sequence[str],
    controls: Sequence[str] = (),
    *,
    time: str = "t",
    snap: bool = True,
) -> Log:
    """Read a log, keeping the columns ``t``, ``observations`` and ``controls`` (others are ignored).

    Args:
        path: CSV file path (or an open text stream).
        observations: the observation columns to read, in the order wanted in ``y``.
        controls: the control columns to read, in the order wanted in ``u``.
        time: the time column's name [s] (``t`` in the standard format).
        snap: times within :data:`SNAP_TOLERANCE` of the period of a uniform grid (a rig's clock written with
            jitter) are moved onto it, with a :class:`UserWarning` that says how far (:func:`snap_to_grid`);
            False reads them as written.

    Returns:
        A :class:`Log`; empty observation cells are NaN (missing readings, kept as such).

    Raises:
        DataError: naming the file and the row (1-based data row and line number)
            or column: an empty file, a duplicate or missing column, a row with the
            wrong number of cells, a non-numeric cell, NaN/inf written as text, an
            empty ``t`` or control cell, a time not after the previous row's.
    """
    observations, controls = tuple(observations), tuple(controls)
    if isinstance(path, (str, os.PathLike)):
        source = os.fspath(path)
        try:
            with open(source, encoding="utf-8-sig", newline="") as fh:
                text = fh.read()
        except FileNotFoundError:
            raise DataError(f"{source}: log file not found") from None
        except IsADirectoryError:
            raise DataError(f"{source}: is a folder; expected a CSV log file") from None
        except UnicodeDecodeError as exc:
            raise DataError(f"{source}: not a text (UTF-8) CSV file ({exc.reason} at byte {exc.start})") from None
        except OSError as exc:
            raise DataError(f"{source}: cannot read the log ({exc.strerror or exc})") from None
    else:
        source = str(getattr(path, "name", "<log>"))
        text = path.read()
        if text.startswith("\ufeff"):
            text = text[1:]

    t, y, u, _ = read_table(source, text, time, observations, controls)
    log = Log(t=t, y=y, u=u, observations=observations, controls=controls, source=source)
    if snap:
        log, note = snap_to_grid(log)
        if note is not None:
            warnings.warn(f"{source}: {note}", UserWarning, stacklevel=2)
    return log


# --------------------------------------------------------------------------------------
# Sensor models
# --------------------------------------------------------------------------------------


def add_noise(y: np.ndarray, sigma: float | Sequence[float] | np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """``y`` plus independent Gaussian noise of standard deviation ``sigma`` [unit of y].

    ``sigma`` is a scalar or one value per column; NaN (missing) readings stay NaN.

    Raises:
        DataError: a negative or non-finite sigma.
    """
    y = np.asarray(y, dtype=float)
    sigma_arr = np.asarray(sigma, dtype=float)
    if not np.all(np.isfinite(sigma_arr)) or np.any(sigma_arr < 0):
        raise DataError(f"noise standard deviation must be finite and >= 0, got {sigma!r}")
    return y + sigma_arr * rng.standard_normal(y.shape)


def quantize_linear(positions: np.ndarray, resolution: float) -> np.ndarray:
    """Linear-encoder readings of ``positions`` [m] with ``resolution`` metres per count:
    ``round(x / resolution) * resolution``. NaN (missing) readings stay NaN.

    Raises:
        DataError: a resolution that is not a finite number > 0.
    """
    if not (isinstance(resolution, (int, float, np.floating)) and math.isfinite(resolution) and resolution > 0):
        raise DataError(f"encoder resolution must be a finite number of metres > 0, got {resolution!r}")
    return np.round(np.asarray(positions, dtype=float) / resolution) * resolution


def quantize(angles: np.ndarray, ppr: int) -> np.ndarray:
    """Encoder readings of ``angles`` [rad] with ``ppr`` counts per revolution.

    reading = round(angle / step) * step with step = 2 pi / ppr (a multi-turn
    encoder: no wrapping). NaN (missing) readings stay NaN.

    Raises:
        DataError: ``ppr`` not a whole number >= 1.
    """
    if isinstance(ppr, bool) or not isinstance(ppr, (int, np.integer)) or ppr < 1:
        raise DataError(f"encoder counts per revolution must be a whole number >= 1, got {ppr!r}")
    step = 2.0 * math.pi / int(ppr)
    return np.round(np.asarray(angles, dtype=float) / step) * step
