"""Writing a log in the standard format (:mod:`mbfg.logs`): columns ``t``, the observations, the controls;
numbers with full precision (the shortest round-trip repr, :func:`~mbfg.log_table.format_number`), an empty cell
for a missing reading, the file replaced whole or not at all.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from typing import Any, TextIO

import numpy as np

from mbfg.errors import DataError
from mbfg.log_table import format_number

__all__ = ["write_log"]


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
        lines.append(",".join("" if math.isnan(v) else format_number(v) for v in cells))
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
