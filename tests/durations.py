"""The suite's recorded test durations: the order of the test files and the contributor's quick tier.

``tests/durations.json`` holds each test's seconds (setup, call and teardown summed) from one run of the whole
suite, written by ``pytest --store-durations`` after a run of every test (failed or not) with the run's commit, date,
worker count and load. Two uses:

- **Order.** With one file per xdist worker (``--dist loadfile``), a long file started last keeps one worker
  busy while the other idles; the files run longest first (their recorded sums), each to the worker that is
  free. A file with no record runs after them.
- **The quick tier.** A test whose recorded seconds exceed :data:`QUICK_SECONDS` is marked ``slow``, as are
  the tests marked so by hand, so that ``pytest -m "not slow"`` is the loop to run while working (the whole
  suite, which CI runs, is unchanged). A test with no record (a new one) stays in the quick tier until the
  record is written again. A file's first test carries its module fixtures' cost in the record; when it is
  left out, the next test of the file pays them, so the tier's time is measured, not summed from the record
  (``docs/contributing.md`` has the figures).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

RECORD = Path(__file__).with_name("durations.json")
#: A test recorded above this many seconds is in the slow tier.
QUICK_SECONDS = 1.0


def _load() -> dict[str, float]:
    try:
        return {str(k): float(v) for k, v in json.loads(RECORD.read_text())["seconds"].items()}
    except (OSError, ValueError, KeyError, TypeError):
        return {}


class Durations:
    """The pytest plugin: orders and marks the collected tests; records the run's durations when asked."""

    def __init__(self, store: Path | None) -> None:
        self.store = store
        self.seconds: dict[str, float] = defaultdict(float)
        self.started = time.time()
        self.load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")

    @pytest.hookimpl(tryfirst=True)  # before pytest's -m deselects by marker
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        recorded = _load()
        per_file: dict[str, float] = defaultdict(float)
        for item in items:
            per_file[item.path.name] += recorded.get(item.nodeid, 0.0)
            if recorded.get(item.nodeid, 0.0) > QUICK_SECONDS and item.get_closest_marker("slow") is None:
                item.add_marker(pytest.mark.slow)
        items.sort(key=lambda item: -per_file[item.path.name])  # stable: a file's tests keep their order

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        # In the process that prints the summary: with xdist it receives every worker's reports.
        self.seconds[report.nodeid] += report.duration

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if self.store is None or hasattr(session.config, "workerinput"):
            return
        if exitstatus not in (0, 1) or not self.seconds:  # 1: some tests failed, every test ran
            print(f"\n--store-durations: not written (the run did not finish: exit status {exitstatus})")
            return
        try:
            commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                    cwd=RECORD.parent, check=False).stdout.strip() or "unknown"
        except OSError:
            commit = "unknown"
        workers: Any = getattr(session.config.option, "numprocesses", None) or 1
        load_end = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
        record = {
            "command": "pytest --store-durations",
            "commit": commit,
            "date": time.strftime("%Y-%m-%d", time.gmtime()),
            "workers": workers,
            "cpus": os.cpu_count(),
            "load_at_start": round(self.load, 2),
            "load_at_end": round(load_end, 2),
            "wall_s": round(time.time() - self.started, 1),
            "exit_status": exitstatus,
            "seconds": {k: round(v, 3) for k, v in sorted(self.seconds.items())},
        }
        self.store.write_text(json.dumps(record, indent=0) + "\n")
        print(f"\n--store-durations: wrote {len(self.seconds)} tests' durations to {self.store}")
