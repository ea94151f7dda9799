"""Shared paths and fixtures."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# No persistent compilation cache in the test session. On jaxlib 0.10.2 workers died inside the cache's
# code, in a different test each time: once writing an entry (compilation_cache.put_executable_and_time,
# serializing an executable), and once in tests/test_control.py while the notebooks' kernel, in another
# process, had compiled the same programs into the shared folder; the cause is not found (serializing and
# loading those programs 200 times in one process does not crash). Without the cache nothing is serialized
# or loaded: every process compiles its own programs (within a process they are keyed by the model's
# structure and reused). The tests of the cache itself (test_compile_cache.py, the sweep's) set their own
# folders. MBFG_CACHE_DIR=off also keeps the command lines the tests run (in process and as subprocesses,
# notebooks included) off the user's cache folder. A worker that dies still fails the run and names its
# test (--max-worker-restart=0 in pyproject); tests/crash_report.py prints where it died.
os.environ.setdefault("MBFG_CACHE_DIR", "off")
os.environ.pop("JAX_COMPILATION_CACHE_DIR", None)
# mbfg computes in float64 and turns JAX's x64 on at import; the suite chooses it before JAX is imported.
os.environ.setdefault("JAX_ENABLE_X64", "1")

from compile_time import CompileTimes  # noqa: E402
from crash_report import CrashReport  # noqa: E402

import mbfg  # noqa: E402, F401  (before JAX starts its backend: mbfg._jax sets XLA's flags)

REPO = Path(__file__).resolve().parents[1]


def pytest_configure(config: pytest.Config) -> None:
    # The suite's JAX compile time in the summary (tests/compile_time.py).
    config.pluginmanager.register(CompileTimes(), "mbfg-compile-times")
    # A crashed worker's fault dump at the end of the log (tests/crash_report.py).
    config.pluginmanager.register(CrashReport(), "mbfg-crash-report")
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
