"""pytest-xdist's ``--dist loadfile`` without its hang after a worker crash, and one rerun of a crashed test
(a plugin of this suite).

When a worker dies (a segmentation fault in a compiled library), pytest-xdist 3.8 puts every file that worker
was ever given back on the queue, finished ones included, and starts the test it died on again. A finished
file then reaches a worker as an empty unit, which never completes, and the run waits forever with both
workers idle (pytest-xdist issues 1323, 1327 and 1378). Here only the unfinished rest of the crashed
worker's file is given out again, and a worker that has taken the last unit is told that no more will come,
so it runs what it holds and stops.

The test the worker died on runs once more, first in that rest, on a fresh worker: a crash that happens
again is reported failed, as pytest-xdist reports every crash; one that does not (XLA has crashed, rarely,
inside a compile or while writing a compiled program to JAX's persistent cache) is
reported as a rerun in the summary, and the run's outcome is that of the rerun. Assertion failures and
errors are never rerun.
"""

from __future__ import annotations

from typing import Any

import pytest


def _scheduler_class() -> type:
    from xdist.scheduler import LoadFileScheduling

    class CrashSafeLoadFileScheduling(LoadFileScheduling):  # type: ignore[misc]  # untyped base
        def __init__(self, config: pytest.Config, log: Any = None) -> None:
            super().__init__(config, log)
            self.crashed: set[str] = set()  # tests a worker died on, each rerun once
            self.rerunning: set[str] = set()  # of those, the ones whose crash is being reported now

        def remove_node(self, node: Any) -> str | None:
            workload = self.assigned_work.pop(node)
            pending = {scope: unit for scope, unit in workload.items() if not all(unit.values())}
            if not pending:
                return None
            unit = next(iter(pending.values()))
            crashitem = next(nodeid for nodeid, completed in unit.items() if not completed)
            if crashitem in self.crashed:
                unit[crashitem] = True  # crashed again: reported failed, not run a third time
            else:
                self.crashed.add(crashitem)
                self.rerunning.add(crashitem)
            for scope, unit in pending.items():
                if not all(unit.values()):
                    self.workqueue[scope] = unit
                    self.workqueue.move_to_end(scope, last=False)  # before the files not started yet
            for other in self.assigned_work:
                self._reschedule(other)
            return crashitem

        def _reschedule(self, node: Any) -> None:
            if node not in self.registered_collections or node not in self.assigned_work or node.shutting_down:
                return  # a replacement still collecting (two crashed at once) is scheduled when it has collected
            # A worker runs an item only once it knows the next one or that none will come (a rerun alone in
            # its unit would wait forever): more than two items pending, or no more to come.
            while self.workqueue and self._pending_of(self.assigned_work[node]) <= 2:
                self._assign_work_unit(node)
            if not self.workqueue:
                node.shutdown()

    return CrashSafeLoadFileScheduling


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    if config.getvalue("dist") != "loadfile":
        return None
    return _scheduler_class()(config, log)


@pytest.hookimpl(optionalhook=True)
def pytest_handlecrashitem(crashitem: str, report: pytest.TestReport, sched: Any) -> None:
    if crashitem in getattr(sched, "rerunning", ()):
        sched.rerunning.discard(crashitem)
        report.outcome = "rerun"  # type: ignore[assignment]  # counted apart, not as a failure


def pytest_report_teststatus(report: pytest.TestReport) -> tuple[str, str, tuple[str, dict[str, bool]]] | None:
    if report.outcome == "rerun":
        return "rerun", "R", ("RERUN", {"yellow": True})
    return None


def pytest_terminal_summary(terminalreporter: Any) -> None:
    reruns = terminalreporter.stats.get("rerun", [])
    if reruns:
        terminalreporter.section("worker crashes (each test rerun once on a fresh worker)", yellow=True)
        for report in reruns:
            terminalreporter.write_line(f"RERUN {report.nodeid}: {report.longrepr}")
