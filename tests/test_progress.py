"""Progress as a library reports it (logging) and as the command line prints it (mbfg.progress)."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import pytest

from mbfg.progress import Progress, log_to_stderr

REPO = Path(__file__).resolve().parents[1]


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def test_progress_is_an_info_record_of_the_mbfg_progress_logger() -> None:
    # A handler of the test's own on the logger itself: what other tests left on the "mbfg" and root loggers
    # (a command line's stderr handler, pytest's capture handlers) cannot add or hide a record.
    logger = logging.getLogger("mbfg.progress")
    collect, saved = _Collect(), logger.level
    logger.addHandler(collect)
    logger.setLevel(logging.INFO)
    try:
        progress = Progress("job", 3, interval_s=0.0)
        progress.update(1, cost=2.5)
        progress.say("stage done")
        Progress("silent", 3, quiet=True).update(3, cost=1.0)
    finally:
        logger.removeHandler(collect)
        logger.setLevel(saved)
    lines = [(r.name, r.levelno, r.getMessage().split("  t=")[0]) for r in collect.records]
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
