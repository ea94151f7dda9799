"""The suite's scheduler plugin (tests/xdist_crash_safe.py): a crashed worker ends the run, not hangs it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

FILE = """
import os
import time

def test_first():
    time.sleep(0.2)

def test_second():
    pass

def test_third():
    pass
"""

CRASHING = """
import os

def test_first():
    pass

def test_crash():
    os.kill(os.getpid(), 11)

def test_after_the_crash():
    pass
"""


def test_a_worker_crash_under_loadfile_is_reported_and_the_rest_runs(tmp_path: Path) -> None:
    for name in "acd":
        (tmp_path / f"test_{name}.py").write_text(FILE)
    (tmp_path / "test_b.py").write_text(CRASHING)
    (tmp_path / "test_e.py").write_text("import os\n\ndef test_crash_alone():\n    os.kill(os.getpid(), 11)\n")
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).parent))
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "2", "--dist", "loadfile", "-p",
                          "xdist_crash_safe", "-p", "no:cacheprovider", "-o", "addopts=",
                          str(tmp_path)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 1, out.stdout + out.stderr
    summary = out.stdout.strip().splitlines()[-1]
    assert summary.startswith("2 failed, 11 passed"), out.stdout
    assert "crashed while running 'test_b.py::test_crash'" in out.stdout
