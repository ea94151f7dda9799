"""Shared paths and fixtures."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

# One JAX compilation cache for the whole test session (and the notebooks and command lines it starts):
# many tests build the same models, and a program compiled once is loaded by every other process.
# Only programs that took over 1 s to compile (JAX's default) are written: on jaxlib 0.10.2 a worker
# aborted inside JAX's cache write (compilation_cache.put_executable_and_time, serializing an executable)
# with XLA's YNN fusion off, cause not found; the small programs, most of the writes, are compiled again
# instead. A crash still fails the run and names its test (--max-worker-restart=0 in pyproject).
os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", tempfile.mkdtemp(prefix="mbfg-jax-cache-"))
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "1")
# mbfg computes in float64 and turns JAX's x64 on at import; the suite chooses it before JAX is imported.
os.environ.setdefault("JAX_ENABLE_X64", "1")

from compile_time import CompileTimes  # noqa: E402

from mbfg._jax import jax  # noqa: E402  (mbfg first: it sets XLA's flags before JAX starts its backend)

jax.config.update("jax_compilation_cache_dir", os.environ["JAX_COMPILATION_CACHE_DIR"])
jax.config.update("jax_persistent_cache_min_compile_time_secs",
                  float(os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"]))

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
