"""ruff and mypy as CI runs them (``.ci/run``), so that the README's test command checks them too.

Both come with the test extra; without them the tests are skipped. mypy runs through ``.ci/typecheck``
(the installed package layout, see there) with its cache in build/mypy-cache: about 30 s from a cold
cache on two cores, a few seconds after.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _needs(module: str) -> None:
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} is not installed (it comes with the test extra: pip install '.[test]')")


def _run(cmd: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL)


def test_ruff_check_finds_nothing() -> None:
    _needs("ruff")
    done = _run([sys.executable, "-m", "ruff", "check", "."])
    assert done.returncode == 0, f"ruff check . found problems:\n{done.stdout[-6000:]}\n{done.stderr[-2000:]}"


def test_mypy_finds_nothing() -> None:
    _needs("mypy")
    done = _run([sys.executable, str(REPO / ".ci" / "typecheck")])
    assert done.returncode == 0, f"mypy (.ci/typecheck) found problems:\n{done.stdout[-6000:]}\n{done.stderr[-2000:]}"
