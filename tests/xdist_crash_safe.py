"""pytest-xdist's ``--dist loadfile`` without its hang after a worker crash (a plugin of this suite).

When a worker dies (a segmentation fault in a compiled library), pytest-xdist 3.8 puts every file that worker
was ever given back on the queue, finished ones included, and starts the test it died on again. A finished
file then reaches a worker as an empty unit, which never completes, and the run waits forever with both
workers idle (pytest-xdist issues 1323, 1327 and 1378). Here the crashed test is reported failed once (by
xdist, as always), only the rest of its file is given out again, and a worker that has taken the last unit
is told that no more will come, so it runs what it holds and stops: the run ends, with the crash in its
summary.
"""

from __future__ import annotations

from typing import Any

import pytest


def _scheduler_class() -> type:
    from xdist.scheduler import LoadFileScheduling

    class CrashSafeLoadFileScheduling(LoadFileScheduling):  # type: ignore[misc]  # untyped base
        def remove_node(self, node: Any) -> str | None:
            workload = self.assigned_work.pop(node)
            pending = {scope: unit for scope, unit in workload.items() if not all(unit.values())}
            if not pending:
                return None
            scope, unit = next(iter(pending.items()))
            crashitem = next(nodeid for nodeid, completed in unit.items() if not completed)
            unit[crashitem] = True  # reported failed by xdist: not run again
            for scope, unit in pending.items():
                if not all(unit.values()):
                    self.workqueue[scope] = unit
            for other in self.assigned_work:
                self._reschedule(other)
            return crashitem

        def _reschedule(self, node: Any) -> None:
            if node not in self.registered_collections:
                return  # a replacement still collecting (two crashed at once): scheduled when it has collected
            super()._reschedule(node)
            # A worker runs an item only once it knows the next one or that none will come.
            if not self.workqueue and not node.shutting_down and node in self.assigned_work:
                node.shutdown()

    return CrashSafeLoadFileScheduling


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    if config.getvalue("dist") != "loadfile":
        return None
    return _scheduler_class()(config, log)
