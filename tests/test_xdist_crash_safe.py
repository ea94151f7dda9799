"""The suite's scheduler plugin (tests/xdist_crash_safe.py): a crashed worker neither hangs the run nor, once,
fails it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

FILE = """
import time

def test_first():
    time.sleep(0.2)

def test_second():
    pass

def test_third():
    pass
"""

CRASHES_EVERY_TIME = """
import os

def test_first():
    pass

def test_crash():
    os.kill(os.getpid(), 11)

def test_after_the_crash():
    pass
"""

CRASHES_ONCE = """
import os
from pathlib import Path

def test_crash_once():
    flag = Path(__file__).with_suffix(".crashed")
    if not flag.exists():
        flag.write_text("")
        os.kill(os.getpid(), 11)
"""


def test_a_crashed_test_is_rerun_once_on_a_fresh_worker_and_the_run_ends(tmp_path: Path) -> None:
    for name in "acd":
        (tmp_path / f"test_{name}.py").write_text(FILE)
    (tmp_path / "test_b.py").write_text(CRASHES_EVERY_TIME)
    (tmp_path / "test_e.py").write_text("import os\n\ndef test_crash_alone():\n    os.kill(os.getpid(), 11)\n")
    (tmp_path / "test_f.py").write_text(CRASHES_ONCE)
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).parent))
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "2", "--dist", "loadfile", "-p",
                          "xdist_crash_safe", "-p", "no:cacheprovider", "-o", "addopts=", str(tmp_path)],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 1, out.stdout + out.stderr
    summary = out.stdout.strip().splitlines()[-1]
    # Crashing every time: rerun once, then failed. Crashing once: rerun, then passed. Nothing else lost.
    assert re.match(r"=* ?2 failed, 12 passed, 3 rerun", summary), out.stdout
    failed = sorted(re.findall(r"^FAILED (\S+)", out.stdout, re.M))
    assert failed == ["test_b.py::test_crash", "test_e.py::test_crash_alone"], out.stdout
    reruns = sorted(re.findall(r"^RERUN (\S+):", out.stdout, re.M))
    assert reruns == ["test_b.py::test_crash", "test_e.py::test_crash_alone", "test_f.py::test_crash_once"]
