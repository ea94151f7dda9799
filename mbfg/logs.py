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
"""

from __future__ import annotations

import csv
import io
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

import numpy as np

from mbfg.errors import DataError
from mbfg.limits import MAX_TIME

__all__ = ["Log", "add_noise", "quantize", "quantize_linear", "read_log", "round_time", "sample_period", "write_log"]


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


# --------------------------------------------------------------------------------------
# Writing
# --------------------------------------------------------------------------------------


def _format(value: float) -> str:
    return repr(float(value))


def write_log(
    path_or_buffer: str | os.PathLike[str] | TextIO,
    t: Sequence[float] | np.ndarray,
    observations: Mapping[str, Any],
    controls: Mapping[str, Any] | None = None,
) -> None:
    """Write a log: columns ``t``, the observations, the controls (in the mappings' order).

    Args:
        path_or_buffer: file path, or an open text stream (e.g. ``sys.stdout``).
        t: (n,) times [s], finite and strictly increasing.
        observations: column name -> (n,) values; NaN is written as an empty cell (a missing reading).
        controls: column name -> (n,) values, all finite.

    Raises:
        DataError: a column of the wrong length, a duplicate name, non-finite t or
            controls, infinite observations, non-increasing t, or an unwritable file.
    """
    controls = dict(controls or {})
    t = np.asarray(t, dtype=float).reshape(-1)
    n = len(t)
    names = ["t", *observations, *controls]
    seen: set[str] = set()
    for name in names:
        if not isinstance(name, str) or not name or name != name.strip() or any(c in name for c in ',"\n\r'):
            raise DataError(
                f"log column name {name!r}: expected a non-empty name without commas, quotes or spaces around it"
            )
        if name in seen:
            raise DataError(f"log column {name!r} is given twice")
        seen.add(name)
    columns: list[np.ndarray] = [t]
    for kind, mapping in (("observation", observations), ("control", controls)):
        for name, values in mapping.items():
            arr = np.asarray(values, dtype=float).reshape(-1)
            if arr.shape != (n,):
                raise DataError(f"log {kind} column {name!r} has {arr.size} values; expected {n} (one per time)")
            bad = np.isinf(arr) if kind == "observation" else ~np.isfinite(arr)
            if bad.any():
                row = int(np.argmax(bad))
                raise DataError(f"log {kind} column {name!r}, row {row + 1}: value {arr[row]} is not finite")
            columns.append(arr)
    if not np.all(np.isfinite(t)):
        row = int(np.argmax(~np.isfinite(t)))
        raise DataError(f"log column 't', row {row + 1}: time {t[row]} is not finite")
    if n > 1 and not np.all(np.diff(t) > 0):
        row = int(np.argmax(~(np.diff(t) > 0))) + 1
        raise DataError(
            f"log column 't', row {row + 1}: time {t[row]!r} s is not after the previous row's {t[row - 1]!r} s"
        )

    lines = [",".join(names)]
    table = np.column_stack(columns) if columns else np.zeros((n, 0))
    for cells in table:
        lines.append(",".join("" if math.isnan(v) else _format(v) for v in cells))
    text = "\n".join(lines) + "\n"
    if isinstance(path_or_buffer, (str, os.PathLike)):
        from mbfg.atomic import replacing

        try:
            with replacing(path_or_buffer) as fh:  # whole or not at all: a killed run leaves the old file
                fh.write(text)
        except OSError as exc:
            raise DataError(f"{os.fspath(path_or_buffer)}: cannot write the log ({exc.strerror or exc})") from None
    else:
        path_or_buffer.write(text)
        flush = getattr(path_or_buffer, "flush", None)
        if flush is not None:
            flush()


# --------------------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------------------


def _cell_number(text: str) -> float:
    """A finite float from a cell, or raise ValueError('empty' / 'nonfinite' / 'bad')."""
    if not text:
        raise ValueError("empty")
    if "_" in text:  # float() accepts 1_000; a log should not
        raise ValueError("bad")
    try:
        value = float(text)
    except ValueError:
        raise ValueError("bad") from None
    if not math.isfinite(value):
        raise ValueError("nonfinite")
    return value


def _read_table(
    source: str,
    text: str,
    time: str,
    observations: Sequence[str],
    controls: Sequence[str],
    what: str = "log",
    *,
    foreign: bool = False,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Parse the CSV ``text`` of ``source``, keeping the columns ``time``, ``observations``, ``controls``.

    The reader of :func:`read_log` and of the rig loaders (``mbfg.datasets.rigs``).
    ``what`` names the file in messages ("log", "QUBE-Servo CSV"). ``foreign``: a
    file in another lab's layout rather than this package's log format: header
    columns without a name are allowed (and ignored), and the messages for an
    empty file, a missing column and an empty time cell are worded for such a file.

    Returns:
        t (n,), y (n, n_obs) with NaN for empty observation cells, u (n, n_u), and
        the 1-based line number of each data row (n,).

    Raises:
        DataError: as listed in :func:`read_log` (file, row, line and column named).
    """
    wanted = [(time, "time")] + [(n, "observation") for n in observations] + [(n, "control") for n in controls]
    seen_wanted: dict[str, str] = {}
    for name, kind in wanted:
        if name in seen_wanted:
            raise DataError(f"{source}: column {name!r} is asked for twice (as {seen_wanted[name]} and as {kind})")
        seen_wanted[name] = kind

    reader = csv.reader(io.StringIO(text, newline=""))
    header: list[str] | None = None
    try:
        for cells in reader:
            if any(c.strip() for c in cells):
                header = [c.strip() for c in cells]
                header_line = reader.line_num
                break
    except csv.Error as exc:
        raise DataError(f"{source}, line {reader.line_num}: not valid CSV ({exc})") from None
    if header is None:
        raise DataError(
            f"{source}: the file is empty; expected a {what} with a header line" if foreign
            else f"{source}: the {what} is empty; expected a header line '{time},<observations...>,<controls...>'"
        )
    index: dict[str, int] = {}
    for i, name in enumerate(header):
        if not name:
            if foreign:
                continue
            raise DataError(f"{source}, line {header_line}: header column {i + 1} has no name")
        if name in index:
            raise DataError(
                f"{source}, line {header_line}: column {name!r} appears twice in the header "
                f"(columns {index[name] + 1} and {i + 1})"
            )
        index[name] = i
    for name, kind in wanted:
        if name not in index:
            raise DataError(
                f"{source}: no {kind} column {name!r}"
                + (f" (a {what} needs it); the file has columns " if foreign else f"; the {what} has columns ")
                + (", ".join(h for h in header if h) or "(none)")
            )
    picks = [index[name] for name, _ in wanted]
    rows: list[list[float]] = []
    lines: list[int] = []
    try:
        for cells in reader:
            if not any(c.strip() for c in cells):
                continue  # a blank line carries no data
            line = reader.line_num
            where = f"{source}, row {len(rows) + 1} (line {line})"
            if len(cells) != len(header):
                raise DataError(f"{where}: {len(cells)} cells; the header has {len(header)} columns")
            values: list[float] = []
            for col, (name, kind) in zip(picks, wanted):
                cell = cells[col].strip()
                try:
                    values.append(_cell_number(cell))
                except ValueError as exc:
                    reason = str(exc)
                    if reason == "empty" and kind == "observation":
                        values.append(math.nan)  # a missing reading, kept as such
                        continue
                    if reason == "empty":
                        raise DataError(
                            f"{where}, column {name!r}: empty cell; every row needs a {kind} value"
                            + (" (only observation cells may be empty)" if kind == "control" or foreign else "")
                        ) from None
                    if reason == "nonfinite":
                        raise DataError(
                            f"{where}, column {name!r}: {cell!r} is not a finite number; "
                            + ("leave the cell empty for a missing reading" if kind == "observation"
                               else f"a {kind} value must be finite")
                        ) from None
                    raise DataError(f"{where}, column {name!r}: expected a number, got {cell!r}") from None
            if not abs(values[0]) <= MAX_TIME:
                raise DataError(f"{where}, column {time!r}: time {cells[picks[0]].strip()} s is beyond +-{MAX_TIME:g} s "
                                f"(31,700 years); expected the sample's time in seconds")
            if rows and not values[0] > rows[-1][0]:
                raise DataError(
                    f"{where}, column {time!r}: time {cells[picks[0]].strip()} s is not after the previous row's "
                    f"{_format(rows[-1][0])} s; times must be strictly increasing"
                )
            rows.append(values)
            lines.append(line)
    except csv.Error as exc:
        raise DataError(f"{source}, line {reader.line_num}: not valid CSV ({exc})") from None
    if not rows:
        raise DataError(f"{source}: the {what} has a header but no data rows")
    table = np.array(rows, dtype=float)
    n_obs = len(observations)
    return table[:, 0].copy(), table[:, 1 : 1 + n_obs].copy(), table[:, 1 + n_obs :].copy(), np.array(lines, dtype=int)


def read_log(
    path: str | os.PathLike[str] | TextIO,
    observations: Sequence[str],
    controls: Sequence[str] = (),
    *,
    time: str = "t",
) -> Log:
    """Read a log, keeping the columns ``t``, ``observations`` and ``controls`` (others are ignored).

    Args:
        path: CSV file path (or an open text stream).
        observations: the observation columns to read, in the order wanted in ``y``.
        controls: the control columns to read, in the order wanted in ``u``.
        time: the time column's name [s] (``t`` in the standard format).

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

    t, y, u, _ = _read_table(source, text, time, observations, controls)
    return Log(t=t, y=y, u=u, observations=observations, controls=controls, source=source)


# --------------------------------------------------------------------------------------
# Times
# --------------------------------------------------------------------------------------


def _decimals(x: float, tol: float) -> int:
    """The fewest decimals (at most 12) that write ``x`` to within ``tol``."""
    for d in range(13):
        if abs(round(x, d) - x) <= tol:
            return d
    return 12


def sample_period(t: Sequence[float] | np.ndarray) -> float:
    """The median spacing of the times ``t`` [s], rounded to the decimals it is written with: 0.001 for a
    log at 1 kHz, not the 0.0010000000000000009 that ``0.002 - 0.001`` gives in floating point. NaN for
    fewer than two times.

    The spacing is rounded where rounding moves it by no more than the floating-point error of a
    difference of times that large (so a log whose clock starts at 1e4 s still gives 0.001), and by no
    more than 1e-12 of the spacing itself, so a real, jittered period (0.0010000004) is kept as it is.
    """
    t = np.asarray(t, dtype=float)
    if len(t) < 2:
        return math.nan
    period = float(np.median(np.diff(t)))
    noise = 8 * np.finfo(float).eps * float(np.max(np.abs(t)))
    return round(period, _decimals(period, max(noise, 1e-12 * abs(period))))


def round_time(k: float, period: float) -> float:
    """``k`` periods [s] (a step index times the sample period, or a stride of samples) rounded to the
    period's decimals: 3 x 0.1 gives 0.3, not 0.30000000000000004, so that times written from step
    indices match the times of the log they came from."""
    return round(k * period, _decimals(period, 1e-12 * abs(period)))


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
