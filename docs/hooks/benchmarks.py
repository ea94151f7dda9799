"""mkdocs hook: the benchmarks page, generated at build time from ``benchmarks/*.py`` and ``benchmarks/results/*.json``.

A page that holds the line ``<!-- mbfg-benchmarks -->`` gets, in its place, one section per benchmark script:
the first paragraph of its docstring, the command that runs it, and one table per results record of it
(``benchmarks/_record.py`` writes them and checks their shape); a script with no record yet says so. Records
are data, so the page cannot drift from what the scripts measured.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import math
from pathlib import Path
from typing import Any

MARKER = "<!-- mbfg-benchmarks -->"
ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = ROOT / "benchmarks"


def _record_module() -> Any:
    """benchmarks/_record.py (not a package: loaded by path), the one definition of a record's shape."""
    spec = importlib.util.spec_from_file_location("_mbfg_benchmark_record", BENCHMARKS / "_record.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _summary(script: Path) -> str:
    """The first paragraph of the script's docstring, on one line."""
    doc = ast.get_docstring(ast.parse(script.read_text(encoding="utf-8"))) or ""
    return " ".join(doc.split("\n\n")[0].split())


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return "" if not math.isfinite(value) else f"{value:.4g}"
    if isinstance(value, list):
        return ", ".join(_cell(v) for v in value)
    return str(value).replace("|", "\\|").replace("\n", " ")


def _table(rows: list[dict[str, Any]]) -> list[str]:
    columns: list[str] = []
    for row in rows:
        columns += [c for c in row if c not in columns]
    lines = ["| " + " | ".join(_cell(c) for c in columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(_cell(row.get(c)) for c in columns) + " |" for row in rows]
    return lines


def _machine(machine: dict[str, Any]) -> str:
    if not machine:
        return "machine not recorded"
    parts = [str(machine[k]) for k in ("cpu", "system") if k in machine]
    if "cores" in machine:
        parts.append(f"{machine['cores']} cores")
    load = machine.get("load_average")
    if isinstance(load, dict) and "start" in load and "end" in load:
        parts.append(f"load average {load['start'][0]:g} at the start, {load['end'][0]:g} at the end")
    return ", ".join(parts)


def render_record(record: dict[str, Any], rows: Any) -> list[str]:
    """One record: what ran where, then its table (ours and the peer's rows, ``run`` naming whose)."""
    versions = ", ".join(f"{k} {v}" for k, v in record["versions"].items()) or "versions not recorded"
    lines = [f"`{record['command']}`: commit {record['commit']}, {record['date']}; {_machine(record['machine'])}; "
             f"{versions}.", ""]
    table = rows(record["figures"])
    if "peer" in record:
        table = [{"run": "mbfg", **row} for row in table]
        table += [{"run": record["peer"]["name"], **row} for row in rows(record["peer"]["figures"])]
    return lines + _table(table) + [""]


def benchmarks_page() -> str:
    """The generated Markdown (module docstring)."""
    record_module = _record_module()
    records: dict[str, list[tuple[Path, dict[str, Any]]]] = {}
    for path in sorted((BENCHMARKS / "results").glob("*.json")):
        where = str(path.relative_to(ROOT))
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
            record_module.check(record, where)
        except ValueError as exc:  # json.JSONDecodeError is a ValueError
            from mkdocs.exceptions import PluginError  # here: the page's Markdown is made without mkdocs in tests

            raise PluginError(f"benchmarks page: {exc}") from None
        records.setdefault(record["benchmark"], []).append((path, record))
    scripts = {p.stem: p for p in sorted(BENCHMARKS.glob("*.py")) if not p.name.startswith("_")}
    parts = ["| benchmark | records |", "|---|---|"]
    parts += [f"| [`{name}`](#{name}) | {len(records.get(name, []))} |" for name in sorted({*scripts, *records})]
    parts.append("")
    for name in sorted({*scripts, *records}):
        parts += [f"## `{name}` {{#{name}}}", ""]
        if name in scripts:
            parts += [_summary(scripts[name]), "", "```text", f"python benchmarks/{name}.py", "```", ""]
        if name not in records:
            parts += [f"Not yet recorded: run `python benchmarks/{name}.py`.", ""]
        for path, record in records.get(name, []):
            parts += [f"### {path.name}", ""] + render_record(record, record_module.rows)
    return "\n".join(parts)


def on_page_markdown(markdown: str, page: Any, **kwargs: Any) -> str:
    if MARKER not in markdown:
        return markdown
    return markdown.replace(MARKER, benchmarks_page())
