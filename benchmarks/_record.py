"""One JSON record per benchmark run, in ``benchmarks/results/``: the figures, the peer's figures from the same
run, the command, the commit, the machine and the date (the shape is in benchmarks/README.md).

A script ends with ``_record.write(__file__, figures, peer=...)``; the documentation's Benchmarks page
(docs/hooks/benchmarks.py) renders every record it finds there as a table, after :func:`check`.

Figures are a *table*: a list of rows, or a mapping ``case -> row`` or ``case -> list of rows`` (the case
becomes the first column). A row maps column names to numbers, strings, booleans, None (an empty cell), lists
of those, or a nested row (its columns named ``outer.inner``). Column names carry their unit (``wall_s``,
``us_per_step``). NumPy scalars and arrays are stored as plain numbers and lists.
"""

from __future__ import annotations

import datetime
import json
import math
import os
import platform
import shlex
import subprocess
import sys
from collections.abc import Mapping
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"
#: The fields of a record besides ``figures`` and ``peer``.
FIELDS = ("benchmark", "command", "commit", "date", "machine", "versions")
#: The distributions whose versions a record keeps.
VERSIONS = ("mbfg", "jax", "jaxlib", "gtsam", "numpy", "scipy")

_LOAD_AT_START = os.getloadavg()  # the script imports this module first thing: the load as it starts


def write(script: str, figures: Any, *, peer: Mapping[str, Any] | None = None, out: str | os.PathLike[str] | None = None,
          quiet: bool = False) -> Path:
    """Write the record of this run to ``out`` (default ``benchmarks/results/<script's name>.json``).

    Args:
        script: the benchmark's ``__file__`` (its name names the record).
        figures: the run's figures, a table (module docstring).
        peer: the peer's figures from the same run: ``{"name": "what it is", "figures": table}`` (another library,
            the previous version, a closed form ...), rendered beside ours.
        out: where to write (a script's ``--out``).
        quiet: do not print where it was written.

    Returns:
        The path written.
    """
    name = Path(script).stem
    record: dict[str, Any] = {
        "benchmark": name,
        "command": " ".join(["python", f"benchmarks/{name}.py", *map(shlex.quote, sys.argv[1:])]),
        "commit": _commit(),
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "machine": _machine(),
        "versions": _versions(),
        "figures": _plain(figures),
    }
    if peer is not None:
        record["peer"] = _plain(dict(peer))
    check(record)
    path = Path(out) if out is not None else RESULTS / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=1, allow_nan=False) + "\n")
    if not quiet:
        print(f"# written to {path}")
    return path


def check(record: Any, where: str = "record") -> None:
    """Raise ValueError naming the field if ``record`` is not of the shape :func:`write` writes."""
    if not isinstance(record, Mapping):
        raise ValueError(f"{where}: expected a JSON object, got {type(record).__name__}")
    missing = [f for f in (*FIELDS, "figures") if f not in record]
    if missing:
        raise ValueError(f"{where}: missing field(s) {', '.join(missing)} (benchmarks/README.md has the shape)")
    unknown = sorted(set(record) - {*FIELDS, "figures", "peer"})
    if unknown:
        raise ValueError(f"{where}: unknown field(s) {', '.join(unknown)}; figures go under 'figures'")
    for field in ("benchmark", "command", "commit", "date"):
        if not isinstance(record[field], str) or not record[field]:
            raise ValueError(f"{where}: '{field}' must be a non-empty string")
    for field in ("machine", "versions"):
        if not isinstance(record[field], Mapping):
            raise ValueError(f"{where}: '{field}' must be an object")
    rows(record["figures"], f"{where}: figures")
    if "peer" in record:
        peer = record["peer"]
        if not isinstance(peer, Mapping) or set(peer) != {"name", "figures"} or not isinstance(peer["name"], str):
            raise ValueError(f"{where}: 'peer' must be an object with 'name' (a string) and 'figures' (a table)")
        rows(peer["figures"], f"{where}: peer figures")


def rows(table: Any, where: str = "figures") -> list[dict[str, Any]]:
    """The flat rows of a table (module docstring): a mapping's keys become a first column ``case``, nested rows
    ``outer.inner`` columns. Raises ValueError naming the entry that is neither."""
    if isinstance(table, Mapping):
        if not table:
            raise ValueError(f"{where}: an empty table")
        out = []
        for case, value in table.items():
            inner = value if isinstance(value, list) else [value]
            out += [{"case": case, **row} for row in rows(inner, f"{where}[{case!r}]")]
        return out
    if not isinstance(table, list) or not table:
        raise ValueError(f"{where}: expected a non-empty list of rows or a mapping case -> row(s), "
                         f"got {type(table).__name__}")
    return [_flat(row, f"{where}[{i}]") for i, row in enumerate(table)]


def _flat(row: Any, where: str, prefix: str = "") -> dict[str, Any]:
    if not isinstance(row, Mapping):
        raise ValueError(f"{where}: a row must be an object of columns, got {type(row).__name__}")
    out: dict[str, Any] = {}
    for key, value in row.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(_flat(value, f"{where}.{key}", name + "."))
        elif value is None or isinstance(value, (str, bool, int, float)) or (
                isinstance(value, list) and all(v is None or isinstance(v, (str, bool, int, float)) for v in value)):
            out[name] = value
        else:
            raise ValueError(f"{where}.{key}: expected a number, string, boolean, null, list of those or an object, "
                             f"got {type(value).__name__}")
    return out


def _plain(value: Any) -> Any:
    """``value`` with NumPy scalars and arrays as Python numbers and lists, tuples as lists; NaN and inf as None
    (JSON has neither)."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if hasattr(value, "tolist"):  # NumPy (and JAX) scalars and arrays
        value = value.tolist()
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _commit() -> str:
    """The checkout's short commit, ``+dirty`` when tracked files differ from it; ``unknown`` outside git."""
    root = Path(__file__).resolve().parent

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], capture_output=True, text=True, cwd=root, check=True).stdout.strip()

    try:
        commit = git("rev-parse", "--short", "HEAD")
        return commit + ("+dirty" if git("status", "--porcelain", "--untracked-files=no") else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def _machine() -> dict[str, Any]:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            cpu = next((line.split(":", 1)[1].strip() for line in fh if line.startswith("model name")), cpu)
    except OSError:
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "system": f"{platform.system()} {platform.machine()}",
            "python": platform.python_version(),
            "load_average": {"start": [round(x, 2) for x in _LOAD_AT_START],
                             "end": [round(x, 2) for x in os.getloadavg()]}}


def _versions() -> dict[str, str]:
    found = {}
    for dist in VERSIONS:
        try:
            found[dist] = version(dist)
        except PackageNotFoundError:
            pass
    return found

