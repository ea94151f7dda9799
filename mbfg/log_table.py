"""The CSV reader behind :func:`mbfg.logs.read_log` and the rig loaders (:mod:`mbfg.datasets.rigs`):
named columns of a CSV text as arrays, every bad cell, row and header refused with the file, row, line and
column named (the rules of the log format, :mod:`mbfg.logs`).
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Sequence

import numpy as np

from mbfg.errors import DataError
from mbfg.limits import MAX_TIME

__all__ = ["format_number", "read_table"]


def format_number(value: float) -> str:
    """A number as a log writes it: the shortest repr that reads back as the same float."""
    return repr(float(value))


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


def read_table(
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

    The reader of :func:`mbfg.logs.read_log` and of the rig loaders (``mbfg.datasets.rigs``).
    ``what`` names the file in messages ("log", "QUBE-Servo CSV"). ``foreign``: a
    file in another lab's layout rather than this package's log format: header
    columns without a name are allowed (and ignored), and the messages for an
    empty file, a missing column and an empty time cell are worded for such a file.

    Returns:
        t (n,), y (n, n_obs) with NaN for empty observation cells, u (n, n_u), and
        the 1-based line number of each data row (n,).

    Raises:
        DataError: as listed in :func:`mbfg.logs.read_log` (file, row, line and column named).
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
                    f"{format_number(rows[-1][0])} s; times must be strictly increasing"
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
