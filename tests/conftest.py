"""Shared paths and fixtures."""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

# No persistent compilation cache in the test session: every process compiles its own programs (within a
# process they are keyed by the model's structure and reused), and nothing is serialized or loaded. The
# workers' crashes once blamed on the cache were the limit of memory mappings per process
# (_release_compiled_programs below). The tests of the cache itself (test_compile_cache.py, the sweep's) set
# their own folders. MBFG_CACHE_DIR=off also keeps the command lines the tests run (in process and as
# subprocesses, notebooks included) off the user's cache folder. A worker that dies still fails the run and
# names its test (--max-worker-restart=0 in pyproject); tests/crash_report.py prints where it died.
os.environ.setdefault("MBFG_CACHE_DIR", "off")
os.environ.pop("JAX_COMPILATION_CACHE_DIR", None)
# mbfg computes in float64 and turns JAX's x64 on at import; the suite chooses it before JAX is imported.
os.environ.setdefault("JAX_ENABLE_X64", "1")

from compile_time import CompileTimes  # noqa: E402
from crash_report import CrashReport  # noqa: E402
from durations import RECORD, Durations  # noqa: E402

import mbfg  # noqa: E402, F401  (before JAX starts its backend: mbfg._jax sets XLA's flags)
from mbfg._jax import jax  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--store-durations", action="store_true",
                     help=f"after a run of every test, write each test's seconds to {RECORD.name} (tests/durations.py)")


def pytest_configure(config: pytest.Config) -> None:
    # The order of the test files and the quick tier, from the recorded durations (tests/durations.py).
    config.pluginmanager.register(Durations(RECORD if config.getoption("store_durations") else None),
                                  "mbfg-durations")
    # The suite's JAX compile time in the summary (tests/compile_time.py).
    config.pluginmanager.register(CompileTimes(), "mbfg-compile-times")
    # A crashed worker's fault dump at the end of the log (tests/crash_report.py).
    config.pluginmanager.register(CrashReport(), "mbfg-crash-report")
MBSE = REPO / ".." / "shared" / "data" / "mbse"


@pytest.fixture(autouse=True, scope="module")
def _release_compiled_programs() -> Iterator[None]:
    """After each test file, release the programs JAX compiled for it.

    Each program XLA:CPU compiles holds about three memory mappings (its code, read-only data and data) for as
    long as JAX's caches keep it. A worker that runs half the suite compiles tens of thousands of programs and
    reaches Linux's limit of mappings per process (vm.max_map_count, 65,530 by default); the next compile or
    serialization then dies in XLA (the workers' segmentation faults in `backend_compile_and_load` and
    `put_executable_and_time`: three files in one process reach 23,646 mappings, and with the limit lowered to
    6,000 two files abort). Clearing JAX's caches brings a worker back to about 800 mappings after each file.
    """
    yield
    jax.clear_caches()
    gc.collect()


@pytest.fixture(scope="session")
def mbse_dir() -> Path:
    """../shared/data/mbse, the MBSE reference mechanisms and results."""
    if not MBSE.is_dir():
        pytest.fail(f"shared data missing: expected {MBSE} beside the repository")
    return MBSE
