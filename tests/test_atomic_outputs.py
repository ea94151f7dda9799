"""Outputs are written whole or not at all (mbfg.atomic): a run killed mid-write (SIGKILL, which no handler can
catch) or failing mid-write leaves the previous output as it was.

The first test kills a live ``mbfg smooth`` that has written estimates into its output for a while (its JAX
compile takes tens of seconds); the others kill or fail the writer that every command uses, in a few seconds.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mbfg.atomic import replacing, same_file
from mbfg.logs import write_log

OLD = "t,theta\n0.0,0.5\n"  # yesterday's output, which must survive


def _wait_for(predicate, timeout: float, proc: subprocess.Popen) -> None:
    end = time.monotonic() + timeout
    while not predicate():
        if proc.poll() is not None:
            raise AssertionError(f"the writer ended early ({proc.returncode}): {proc.stderr.read() if proc.stderr else ''}")
        if time.monotonic() > end:
            proc.kill()
            raise AssertionError("the writer did not start writing in time")
        time.sleep(0.05)


def _partial_files(folder: Path, name: str) -> list[Path]:
    return sorted(folder.glob(f".{name}.*.part"))


def test_smooth_killed_mid_stream_leaves_the_previous_output_intact(tmp_path: Path) -> None:
    """A live ``mbfg smooth --output out.csv`` on a pipe: once estimates are being written (into the temporary
    file beside out.csv, which grows line by line), SIGKILL. out.csv is still yesterday's, byte for byte."""
    from test_bad_inputs import GOOD_CALIBRATION  # the pendulum calibration of the bad-input battery

    (tmp_path / "calib.json").write_text(GOOD_CALIBRATION)
    out = tmp_path / "out.csv"
    out.write_text(OLD)
    proc = subprocess.Popen(
        [sys.executable, "-m", "mbfg", "smooth", "pendulum", "--params", str(tmp_path / "calib.json"), "--output",
         str(out), "--quiet"],
        stdin=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    assert proc.stdin is not None
    try:
        proc.stdin.write("t,theta\n")
        for k in range(50):
            proc.stdin.write(f"{k / 1000!r},{0.001 * k!r}\n")
        proc.stdin.flush()

        def mid_write() -> bool:
            parts = _partial_files(tmp_path, "out.csv")
            return bool(parts) and parts[0].read_text().count("\n") >= 10

        _wait_for(mid_write, 600.0, proc)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGKILL
    assert out.read_text() == OLD


_SLOW_WRITER = """
import sys, time
from mbfg.atomic import replacing
with replacing(sys.argv[1]) as fh:
    fh.write("t,theta\\n0.0,")  # half a row
    fh.flush()
    print("writing", flush=True)
    time.sleep(120)
    fh.write("0.1\\n")
"""


def test_a_writer_killed_mid_write_leaves_the_previous_file(tmp_path: Path) -> None:
    out = tmp_path / "log.csv"
    out.write_text(OLD)
    proc = subprocess.Popen([sys.executable, "-c", _SLOW_WRITER, str(out)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "writing"
        assert _partial_files(tmp_path, "log.csv")[0].read_text() == "t,theta\n0.0,"  # mid-write indeed
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert out.read_text() == OLD


def test_a_writer_that_fails_mid_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path: Path) -> None:
    out = tmp_path / "log.csv"
    out.write_text(OLD)
    with pytest.raises(RuntimeError, match="disk on fire"):
        with replacing(out) as fh:
            fh.write("t,theta\n")
            raise RuntimeError("disk on fire")
    assert out.read_text() == OLD
    assert _partial_files(tmp_path, "log.csv") == []


def test_a_finished_write_replaces_the_file_and_keeps_its_permissions(tmp_path: Path) -> None:
    out = tmp_path / "log.csv"
    out.write_text(OLD)
    os.chmod(out, 0o640)
    write_log(out, [0.0, 0.001], {"theta": [0.0, 0.25]})
    assert out.read_text() == "t,theta\n0.0,0.0\n0.001,0.25\n"
    assert oct(os.stat(out).st_mode & 0o777) == oct(0o640)
    assert _partial_files(tmp_path, "log.csv") == []


def test_same_file_by_path_symlink_and_hard_link(tmp_path: Path) -> None:
    a = tmp_path / "a.csv"
    a.write_text(OLD)
    os.link(a, tmp_path / "hard.csv")
    (tmp_path / "soft.csv").symlink_to(a)
    (tmp_path / "b.csv").write_text(OLD)
    assert same_file(a, tmp_path / "sub" / ".." / "a.csv")
    assert same_file(a, tmp_path / "hard.csv") and same_file(a, tmp_path / "soft.csv")
    assert not same_file(a, tmp_path / "b.csv")  # the same bytes, another file
    assert not same_file(a, tmp_path / "missing.csv")


def test_an_output_given_by_a_symbolic_link_replaces_the_file_it_points_to(tmp_path: Path) -> None:
    real = tmp_path / "real.csv"
    real.write_text(OLD)
    (tmp_path / "link.csv").symlink_to(real)
    write_log(tmp_path / "link.csv", [0.0], {"theta": [0.25]})
    assert (tmp_path / "link.csv").is_symlink() and real.read_text() == "t,theta\n0.0,0.25\n"
