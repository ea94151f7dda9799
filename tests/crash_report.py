"""A crashed worker's fault report, printed at the end of the run.

When a compiled library kills a worker (a segmentation fault, an abort), Python's ``faulthandler`` dumps the
stacks of its threads. pytest sends that dump to the worker's stderr, where it is interleaved with the other
worker's output and scrolls away above the summary; a CI log cut to its last lines then shows only the
name of the test, not where the process died. Here each worker writes its dump to its own file, and the
process that prints the summary prints every non-empty dump last, so the place of the crash (the signal,
the Python stack of the thread that died) is the end of the log.
"""

from __future__ import annotations

import faulthandler
import os
import tempfile
from pathlib import Path
from typing import Any

# Made by the first process (the one that starts the workers, which inherit the variable).
_FOLDER = Path(os.environ.setdefault("MBFG_TEST_FAULTS", tempfile.mkdtemp(prefix="mbfg-faults-")))
#: Lines of a dump printed: the signal and the stacks of the threads, without the frames of the test runner
#: (pytest, pluggy, xdist, execnet) and the list of extension modules, so that the dump fits in a log's tail.
_LINES = 60
_RUNNER = ("/_pytest/", "/pluggy/", "/xdist/", "/execnet/", 'File "<string>"', "Extension modules:")


class CrashReport:
    """The pytest plugin."""

    def __init__(self) -> None:
        self._file: Any = None

    def pytest_sessionstart(self, session: Any) -> None:
        # After pytest's own faulthandler plugin (pytest_configure), so this file is where the dump goes.
        worker = getattr(session.config, "workerinput", {}).get("workerid", "main")
        self._file = open(_FOLDER / f"{worker}-{os.getpid()}.txt", "w")  # noqa: SIM115 (open until exit)
        faulthandler.enable(file=self._file, all_threads=True)

    def pytest_terminal_summary(self, terminalreporter: Any, config: Any) -> None:
        if hasattr(config, "workerinput"):  # a worker: the controller prints
            return
        for path in sorted(_FOLDER.glob("*.txt")):
            text = path.read_text(errors="replace").strip()
            if not text:
                continue
            lines = [line for line in text.splitlines() if not any(part in line for part in _RUNNER)]
            terminalreporter.section(f"fault report of {path.stem} (a worker that crashed)")
            for line in lines[:_LINES]:
                terminalreporter.write_line(line)
            if len(lines) > _LINES:
                terminalreporter.write_line(f"... {len(lines) - _LINES} more lines in {path}")
