"""Progress as a library reports it (logging) and as the command line prints it (mbfg.progress)."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import pytest

from mbfg.progress import Progress, log_to_stderr

REPO = Path(__file__).resolve().parents[1]


def test_progress_is_an_info_record_of_the_mbfg_progress_logger(caplog: pytest.LogCaptureFixture) -> None:
    logger = logging.getLogger("mbfg")
    saved = logger.propagate
    logger.propagate = True  # a command line run in this process may have kept its records to itself
    try:
        with caplog.at_level(logging.INFO, logger="mbfg.progress"):
            progress = Progress("job", 3, interval_s=0.0)
            progress.update(1, cost=2.5)
            progress.say("stage done")
            Progress("silent", 3, quiet=True).update(3, cost=1.0)
    finally:
        logger.propagate = saved
    lines = [(r.name, r.levelno, r.getMessage().split("  t=")[0]) for r in caplog.records]
    assert lines == [("mbfg.progress", logging.INFO, "[job] 1/3  cost=2.5"),
                     ("mbfg.progress", logging.INFO, "[job] stage done")]


def test_a_library_call_prints_nothing_until_asked_and_the_command_line_prints_its_progress() -> None:
    code = ("import sys; from mbfg.progress import Progress, log_to_stderr\n"
            "Progress('before', 1).update(1, cost=1.0)\n"
            "log_to_stderr(); log_to_stderr()\n"  # twice: still one line per record
            "Progress('after', 1).update(1, cost=2.0)\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert run.returncode == 0, run.stderr
    lines = [line.split("  t=")[0] for line in run.stderr.splitlines()]
    assert lines == ["[after] 1/1  cost=2"], run.stderr
    assert run.stdout == ""


def test_log_to_stderr_writes_to_the_current_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    log_to_stderr()
    Progress("captured", 2, interval_s=0.0).update(2, cost=0.5)
    assert "[captured] 2/2  cost=0.5" in capsys.readouterr().err
