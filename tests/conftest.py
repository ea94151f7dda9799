"""Shared paths and fixtures."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# No persistent compilation cache in the test session: on jaxlib 0.10.2 a worker aborted inside JAX's
# cache write (compilation_cache.put_executable_and_time, serializing an executable) even with XLA's YNN
# fusion off, in a different test each time; the cause is not found. Without the cache nothing is
# serialized: every process compiles its own programs (within a process the programs are keyed by the
# model's structure and reused). The tests of the cache itself (test_compile_cache.py, the sweep's) set
# their own folders. MBFG_CACHE_DIR=off also keeps the command lines the tests run (in process and as
# subprocesses, notebooks included) off the user's cache folder.
os.environ.setdefault("MBFG_CACHE_DIR", "off")
os.environ.pop("JAX_COMPILATION_CACHE_DIR", None)
# mbfg computes in float64 and turns JAX's x64 on at import; the suite chooses it before JAX is imported.
os.environ.setdefault("JAX_ENABLE_X64", "1")

from compile_time import CompileTimes  # noqa: E402

import mbfg  # noqa: E402, F401  (before JAX starts its backend: mbfg._jax sets XLA's flags)

REPO = Path(__file__).resolve().parents[1]


def pytest_configure(config: pytest.Config) -> None:
    # The suite's JAX compile time in the summary (tests/compile_time.py).
    config.pluginmanager.register(CompileTimes(), "mbfg-compile-times")
MBSE = REPO / ".." / "shared" / "data" / "mbse"


@pytest.fixture(scope="session")
def mbse_dir() -> Path:
    """../shared/data/mbse, the MBSE reference mechanisms and results."""
    if not MBSE.is_dir():
        pytest.fail(f"shared data missing: expected {MBSE} beside the repository")
    return MBSE


#: Test files that take the longest, longest first (seconds of one run of the whole suite on 2 cores, fresh
#: caches: `pytest --durations=0`, summed per file). With one file per xdist worker (--dist loadfile in
#: pyproject, and --no-loadscope-reorder, without which xdist orders files by their number of tests
#: instead), a long file started last keeps one worker busy while the other idles; longest first, each
#: file to the worker that is free, ends both workers within a few seconds of each other.
_LONGEST_FIRST = (
    "test_notebooks.py",  # 344 s
    "test_forward_dynamics.py",  # 117 s
    "test_calibration.py",  # 104 s
    "test_jacobian_battery.py",  # 101 s
    "test_readme.py",  # 88 s
    "test_rig_models.py",  # 75 s
    "test_redundant_constraints.py",  # 73 s
    "test_sweep.py",  # 68 s
    "test_control.py",  # 63 s
    "test_stiff_joints.py",  # 55 s
    "test_stream.py",  # 45 s
    "test_spook.py",  # 44 s
    "test_vectorized.py",  # 39 s
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {name: i for i, name in enumerate(_LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(_LONGEST_FIRST)))  # stable for the rest
