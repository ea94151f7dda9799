"""The suite's JAX compile time, summed over its worker processes and printed at the end of the run.

Each process adds up JAX's own compile events (``jax.monitoring``: tracing to a jaxpr, lowering to MLIR, XLA's
backend compile) and writes its sums when its session ends; the process that prints the summary adds them up.
Compiles in the subprocesses the tests start (command lines, notebooks) are not counted.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import jax

#: JAX's compile events: (event name, the summary's word for it).
EVENTS = (
    ("/jax/core/compile/jaxpr_trace_duration", "tracing"),
    ("/jax/core/compile/jaxpr_to_mlir_module_duration", "lowering"),
    ("/jax/core/compile/backend_compile_duration", "XLA compiling"),
)

# The folder is made by the first process (the one that starts the workers, which inherit the variable).
_FOLDER = Path(os.environ.setdefault("MBFG_TEST_COMPILE_TIMES", tempfile.mkdtemp(prefix="mbfg-compile-times-")))
_seconds = {name: 0.0 for name, _ in EVENTS}
_counts = {name: 0 for name, _ in EVENTS}


def _listener(event: str, duration: float, **_: Any) -> None:
    if event in _seconds:
        _seconds[event] += duration
        _counts[event] += 1


jax.monitoring.register_event_duration_secs_listener(_listener)


class CompileTimes:
    """The pytest plugin: each process writes its sums; the summary adds them up."""

    def pytest_sessionfinish(self) -> None:
        (_FOLDER / f"{os.getpid()}.json").write_text(json.dumps({"seconds": _seconds, "counts": _counts}))

    def pytest_terminal_summary(self, terminalreporter: Any, config: Any) -> None:
        if hasattr(config, "workerinput"):  # a worker: the controller prints
            return
        seconds = {name: 0.0 for name, _ in EVENTS}
        counts = {name: 0 for name, _ in EVENTS}
        for path in _FOLDER.glob("*.json"):
            record = json.loads(path.read_text())
            for name, _ in EVENTS:
                seconds[name] += record["seconds"].get(name, 0.0)
                counts[name] += record["counts"].get(name, 0)
        terminalreporter.section("JAX compile time, summed over the test processes")
        for name, word in EVENTS:
            terminalreporter.write_line(f"{word:<14} {seconds[name]:8.1f} s in {counts[name]} programs")
        terminalreporter.write_line(f"{'in all':<14} {sum(seconds.values()):8.1f} s")
