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
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

import numpy as np

from mbfg.errors import DataError
from mbfg.limits import MAX_TIME

__all__ = [
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

    t, y, u, _ = _read_table(source, text, time, observations, controls)
    log = Log(t=t, y=y, u=u, observations=observations, controls=controls, source=source)
    if snap:
        log, note = snap_to_grid(log)
        if note is not None:
            warnings.warn(f"{source}: {note}", UserWarning, stacklevel=2)
    return log


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


#: Jitter of a time column below this fraction of the sample period is taken for the way the rig wrote its
#: clock (decimal or float32 rounding, a timer's resolution) and snapped onto the uniform grid; a row further off
#: is refused (:func:`check_on_grid`), or resampled on request. At 1 kHz that is 1 ns: moving a reading by it
#: changes it by v * 1 ns, below any encoder's resolution at a lab rig's speeds.
SNAP_TOLERANCE = 1e-6
#: An interval more than this fraction off the median period is irregular (a gap, a doubled sample): no grid
#: is fitted through such a log (the estimation's rule, :func:`mbfg.graphs.joint.time_step`).
REGULAR_RTOL = 0.01


@dataclass(frozen=True)
class TimeGrid:
    """The uniform grid ``t_k = start + k * period`` (k = 0 .. n-1) nearest a log's n times.

    times: (n,) the grid [s], written with the fewest decimals that keep it within half the tolerance of the
    least-squares line through the times (0.001, not 0.0009999999999; a clock's real period such as
    0.0010000004 is kept); deviation: (n,) recorded minus grid times [s]; tolerance: [s] the larger of
    :data:`SNAP_TOLERANCE` of the period and the float64 resolution of the times; exact: every time is on the
    least-squares line to that resolution (nothing to snap); regular: every interval is within
    :data:`REGULAR_RTOL` of the median one (otherwise the grid means nothing: a log with gaps).
    """

    start: float
    period: float
    times: np.ndarray
    deviation: np.ndarray
    tolerance: float
    exact: bool
    regular: bool

    @property
    def off_grid(self) -> np.ndarray:
        """Indices (0-based) of the rows further than ``tolerance`` from the grid."""
        return np.flatnonzero(~(np.abs(self.deviation) <= self.tolerance))

    @property
    def max_deviation(self) -> float:
        """The largest |recorded - grid| time [s]."""
        return float(np.max(np.abs(self.deviation))) if self.deviation.size else 0.0


def time_grid(t: Sequence[float] | np.ndarray) -> TimeGrid:
    """The uniform grid nearest the times ``t`` (n,) [s], n >= 2 (:class:`TimeGrid`).

    The line through (k, t_k) by least squares gives the start and the period; both are then rounded to the
    fewest decimals that keep every grid time within half the tolerance of that line (or within five standard
    errors of the line, for times further off), so that a snapped log's period is the one the rig was set to. A
    grid that the rounding would take further off is the line itself.

    Raises:
        DataError: fewer than two times.
    """
    t = np.asarray(t, dtype=float)
    n = len(t)
    if n < 2:
        raise DataError(f"time_grid: a grid needs at least 2 times, got {n}")
    k = np.arange(n, dtype=float)
    kc = k - k.mean()
    period = float(kc @ (t - t.mean()) / (kc @ kc))
    start = float(t.mean() - period * k.mean())
    # The resolution of a difference of two float64 times that large (the clock of a long run starts at 1e4 s).
    noise = 8.0 * np.finfo(float).eps * float(np.max(np.abs(t)))
    line = start + period * k
    exact = bool(np.max(np.abs(t - line)) <= noise)
    tolerance = max(SNAP_TOLERANCE * abs(period), noise)
    # How far the rounding may move the start and the period: within a quarter of the tolerance over the log,
    # or, for times scattered further, within five standard errors of the fit (the start's 2 sigma / sqrt(n),
    # the period's sigma sqrt(12 / n^3); a rig's set period is rarely further), so that the grid named beside a
    # jittered log is the rig's 0 + k * 0.001 rather than the fit's noise.
    sigma = float(np.sqrt(np.mean((t - line) ** 2)))
    dp = _decimals(period, max(0.25 * tolerance / max(n - 1, 1), 5.0 * sigma * math.sqrt(12.0 / n**3)))
    d0 = _decimals(start, max(0.25 * tolerance, 10.0 * sigma / math.sqrt(n)))
    times = np.round(round(start, d0) + round(period, dp) * k, max(dp, d0))
    if np.max(np.abs(times - line)) > max(0.5 * tolerance, 5.0 * sigma * (2.0 + math.sqrt(12.0)) / math.sqrt(n)):
        times, dp = line, 12
    dt = np.diff(t)
    median = float(np.median(dt))
    regular = bool(np.all(np.abs(dt - median) <= REGULAR_RTOL * median))
    return TimeGrid(float(times[0]), round(period, dp), times, t - times, tolerance, exact, regular)


def _seconds(x: float) -> str:
    return f"{x:.3g} s"


def snap_to_grid(log: Log) -> tuple[Log, str | None]:
    """``log`` with its times on their uniform grid (:func:`time_grid`) where every one lies within the grid's
    tolerance (:data:`SNAP_TOLERANCE` of the period) of it, and a one-line note that says so: how many rows moved,
    by how much at most, and the period.

    Unchanged, with no note: a log of fewer than 3 rows, one whose times are on their grid to float64
    resolution, one that is not regular (gaps: the estimation refuses it, :func:`mbfg.graphs.joint.time_step`),
    and one with rows off the grid beyond the tolerance (:func:`check_on_grid` says which).
    """
    if len(log.t) < 3:
        return log, None
    grid = time_grid(log.t)
    if grid.exact or not grid.regular or grid.off_grid.size:
        return log, None
    moved = int(np.count_nonzero(log.t != grid.times))
    if not moved:
        return log, None
    from dataclasses import replace

    note = (f"time column snapped onto the uniform grid t = {grid.start:.12g} + k * {grid.period:.12g} s: {moved} "
            f"of {len(log.t)} rows moved, by {_seconds(grid.max_deviation)} at most ({grid.max_deviation / grid.period:.2g} "
            f"of the period; jitter below {SNAP_TOLERANCE:g} of it is snapped)")
    return replace(log, t=grid.times.copy()), note


def check_on_grid(log: Log, remedy: str = "resample it onto a uniform grid first "
                  "(mbfg.datasets.rigs.resample_uniform, or mbfg.logs.onto_grid for its own grid)",
                  grid: TimeGrid | None = None) -> TimeGrid:
    """The grid of a regular log whose every time is on it within the tolerance (:func:`time_grid`; ``grid``:
    that grid where the caller has it).

    Raises:
        DataError: naming the log, the number of rows off the grid by more than :data:`SNAP_TOLERANCE` of the
            period, the first of them (0-based, as NumPy indexes it) and the largest deviation, and ``remedy``.
    """
    grid = time_grid(log.t) if grid is None else grid
    off = grid.off_grid
    if off.size:
        i = int(off[0])
        raise DataError(
            f"{log.source}: {off.size} of its {len(log.t)} rows are off the uniform grid t = {grid.start:.12g} + k * "
            f"{grid.period:.12g} s by more than {SNAP_TOLERANCE:g} of the period ({_seconds(grid.tolerance)}; the "
            f"first is t[{i}] = {float(log.t[i])!r} s, {_seconds(float(grid.deviation[i]))} off; the largest "
            f"{_seconds(grid.max_deviation)}): jitter that large is not snapped; {remedy}"
        )
    return grid


def grid_period(log: Log) -> float:
    """The sample period [s] of a regular log (every interval within :data:`REGULAR_RTOL` of the median; the
    caller checks that): :func:`sample_period` where its times are on their grid to float64 resolution, the
    grid's period where they are within its tolerance (:func:`time_grid`).

    Raises:
        DataError: rows off the grid beyond the tolerance (:func:`check_on_grid`).
    """
    grid = check_on_grid(log)
    return sample_period(log.t) if grid.exact else grid.period


def onto_grid(log: Log, grid: TimeGrid | None = None) -> Log:
    """A regular log on its own uniform grid (:func:`time_grid`), its rows kept: each observation interpolated
    linearly at its grid time from the two recorded samples around it (a missing reading stays missing beside it,
    never filled in from farther samples), each control the one recorded on its row (the rig applied row k's
    control from its sample time, which the grid time stands for).

    This is the resampling of a log whose clock jitters beyond :data:`SNAP_TOLERANCE`: a grid of another step
    (:func:`mbfg.datasets.rigs.resample_uniform`) holds the control of the last sample at or before each grid
    time, which on a jittered clock is the previous row's for every sample recorded after its grid time.

    Raises:
        DataError: a log that is not regular, or of fewer than 2 rows.
    """
    grid = time_grid(log.t) if grid is None else grid
    if not grid.regular:
        raise DataError(f"{log.source}: onto_grid needs a regular log (every interval within {100 * REGULAR_RTOL:g} % "
                        "of the median); one with gaps needs mbfg.datasets.rigs.resample_uniform")
    t, g = log.t, grid.times
    i = np.clip(np.searchsorted(t, g, side="right") - 1, 0, len(t) - 2)
    # Within a hundredth of a period of its own sample, a grid time lies between two samples but for the first
    # and last rows, where a time outside the samples is taken from the end sample (no extrapolation).
    w = np.clip((g - t[i]) / (t[i + 1] - t[i]), 0.0, 1.0)[:, None]
    y0, y1 = log.y[i], log.y[i + 1]
    y = np.where(w == 0.0, y0, np.where(w == 1.0, y1, (1.0 - w) * y0 + w * y1))
    from dataclasses import replace

    return replace(log, t=g.copy(), y=y)


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
