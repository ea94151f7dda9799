"""Benchmarks as data: every script writes a JSON record through ``benchmarks/_record.py``, every record in
``benchmarks/results/`` has the shape the documentation's Benchmarks page renders, and the page shows each
record's figures and names the scripts without one. Nothing here runs a benchmark."""

from __future__ import annotations

import ast
import importlib.util
import json
import math
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]
BENCHMARKS = REPO / "benchmarks"


def _load(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


record = _load(BENCHMARKS / "_record.py", "_benchmark_record")
SCRIPTS = sorted(p for p in BENCHMARKS.glob("*.py") if not p.name.startswith("_"))


def _writes_a_record(script: Path) -> bool:
    """Whether the script calls ``_record.write(__file__, ...)``."""
    for node in ast.walk(ast.parse(script.read_text(encoding="utf-8"))):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "write"
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "_record"
                and node.args and isinstance(node.args[0], ast.Name) and node.args[0].id == "__file__"):
            return True
    return False


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_every_benchmark_script_writes_its_record(script):
    assert _writes_a_record(script), f"{script.name} does not end with _record.write(__file__, figures, ...)"


@pytest.mark.parametrize("path", sorted((BENCHMARKS / "results").glob("*.json")), ids=lambda p: p.name)
def test_every_results_record_has_the_shape_the_page_renders(path):
    data = json.loads(path.read_text(encoding="utf-8"))
    record.check(data, path.name)
    assert (BENCHMARKS / f"{data['benchmark']}.py").exists(), f"{path.name}: no script {data['benchmark']}.py"


def test_write_stores_numpy_figures_as_plain_json_with_the_run_and_its_peer(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["benchmarks/demo.py", "--links", "1,2", "--note", "two words"])
    figures = {"chain": [{"links": np.int64(2), "wall_s": np.float64(0.25), "q": np.array([1.0, np.nan]),
                          "errors": {"J": np.float32(0.5), "b": -1.0}}]}
    out = record.write("/somewhere/benchmarks/demo.py", figures, out=tmp_path / "r.json", quiet=True,
                       peer={"name": "scipy", "figures": [{"wall_s": 1.5}]})
    data = json.loads(out.read_text())
    assert data["benchmark"] == "demo"
    assert data["command"] == "python benchmarks/demo.py --links 1,2 --note 'two words'"
    assert data["figures"] == {"chain": [{"links": 2, "wall_s": 0.25, "q": [1.0, None],
                                          "errors": {"J": 0.5, "b": -1.0}}]}
    assert data["peer"] == {"name": "scipy", "figures": [{"wall_s": 1.5}]}
    assert data["commit"] and data["date"].endswith("Z") and data["machine"]["cores"] >= 1
    assert len(data["machine"]["load_average"]["start"]) == 3
    assert record.rows(data["figures"]) == [{"case": "chain", "links": 2, "wall_s": 0.25, "q": [1.0, None],
                                             "errors.J": 0.5, "errors.b": -1.0}]


def _good() -> dict:
    return {"benchmark": "demo", "command": "python benchmarks/demo.py", "commit": "abc1234",
            "date": "2026-01-01T00:00:00Z", "machine": {}, "versions": {}, "figures": [{"wall_s": 1.0}]}


@pytest.mark.parametrize("change, message", [
    (lambda r: r.pop("commit"), r"missing field\(s\) commit"),
    (lambda r: r.update(wall_s=3.0), r"unknown field\(s\) wall_s; figures go under 'figures'"),
    (lambda r: r.update(figures=[1.0, 2.0]), r"figures\[0\]: a row must be an object of columns, got float"),
    (lambda r: r.update(figures=[]), r"figures: expected a non-empty list of rows"),
    (lambda r: r.update(figures={"a": [{"x": {1, 2}}]}), r"figures\['a'\]\[0\]\.x: expected a number"),
    (lambda r: r.update(peer={"figures": [{"x": 1}]}), r"'peer' must be an object with 'name'"),
    (lambda r: r.update(machine="x86_64"), r"'machine' must be an object"),
])
def test_check_names_what_is_wrong_with_a_record(change, message):
    assert record.check(_good()) is None
    bad = _good()
    change(bad)
    with pytest.raises(ValueError, match=message):
        record.check(bad, "demo.json")


def test_page_shows_each_record_as_a_table_beside_its_peer_and_the_scripts_without_one(tmp_path, monkeypatch):
    hook = _load(REPO / "docs" / "hooks" / "benchmarks.py", "_benchmarks_hook")
    (tmp_path / "results").mkdir()
    (tmp_path / "_record.py").write_text((BENCHMARKS / "_record.py").read_text())
    (tmp_path / "fast.py").write_text('"""How fast it is.\n\nMore."""\n')
    (tmp_path / "slow.py").write_text('"""How slow it is."""\n')
    run = {**_good(), "benchmark": "fast", "command": "python benchmarks/fast.py --n 3",
           "machine": {"cpu": "AMD EPYC", "cores": 2, "load_average": {"start": [1.5, 1, 1], "end": [2.25, 1, 1]}},
           "figures": [{"n": 3, "wall_s": 0.123456, "ok": True, "note": "a|b"}],
           "peer": {"name": "GTSAM built-in", "figures": [{"n": 3, "wall_s": math.pi}]}}
    (tmp_path / "results" / "fast.json").write_text(json.dumps(run))
    monkeypatch.setattr(hook, "BENCHMARKS", tmp_path)
    monkeypatch.setattr(hook, "ROOT", tmp_path)
    page = hook.on_page_markdown(f"# Benchmarks\n\n{hook.MARKER}\n", page=None)
    assert "## `fast` {#fast}\n\nHow fast it is.\n\n```text\npython benchmarks/fast.py\n```" in page
    assert ("`python benchmarks/fast.py --n 3`: commit abc1234, 2026-01-01T00:00:00Z; AMD EPYC, 2 cores, "
            "load average 1.5 at the start, 2.25 at the end; versions not recorded.") in page
    assert ("| run | n | wall_s | ok | note |\n|---|---|---|---|---|\n| mbfg | 3 | 0.1235 | yes | a\\|b |\n"
            "| GTSAM built-in | 3 | 3.142 |  |  |") in page
    assert "## `slow` {#slow}\n\nHow slow it is.\n\n```text\npython benchmarks/slow.py\n```\n\n" \
           "Not yet recorded: run `python benchmarks/slow.py`." in page
    assert "| [`fast`](#fast) | 1 |" in page and "| [`slow`](#slow) | 0 |" in page
