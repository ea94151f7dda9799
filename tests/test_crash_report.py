"""The suite's crash report (tests/crash_report.py): a worker killed by a signal has its fault dump printed at
the end of the run, naming the signal and the test's own frame."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

_CONFTEST = f"""
import sys
sys.path.insert(0, {str(HERE)!r})
from crash_report import CrashReport

def pytest_configure(config):
    config.pluginmanager.register(CrashReport(), "crash-report")
"""

_TEST = """
import ctypes

def test_that_dies_in_a_compiled_library():
    ctypes.string_at(0)  # reads address 0: a segmentation fault, as a faulty compiled library would
"""


def test_a_worker_killed_by_a_segmentation_fault_is_reported_last_with_the_test_it_was_running(tmp_path):
    (tmp_path / "conftest.py").write_text(_CONFTEST)
    (tmp_path / "test_dies.py").write_text(_TEST)
    # A fault folder of its own; no options meant for the outer run (PYTEST_ADDOPTS, e.g. --store-durations).
    env = {k: v for k, v in os.environ.items() if k not in ("MBFG_TEST_FAULTS", "PYTEST_ADDOPTS")}
    run = subprocess.run([sys.executable, "-m", "pytest", "-n", "1", "--max-worker-restart=0", "-p", "no:cacheprovider",
                          "-o", "addopts=", str(tmp_path)], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=120)
    assert run.returncode != 0, run.stdout
    tail = run.stdout[run.stdout.rindex("fault report of gw0"):]
    assert "Segmentation fault" in tail, tail
    assert "test_that_dies_in_a_compiled_library" in tail, tail
