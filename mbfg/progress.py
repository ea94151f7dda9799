"""Progress lines for long work: step, LM iterations, cost, elapsed time.

Written to stderr at most once per ``interval_s`` so that piping the output of
the command line stays clean; ``quiet=True`` silences it.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    """Rate-limited progress reporter.

    Args:
        label: what is running, e.g. ``"forward dynamics"``.
        total: number of steps, for the ``k/total`` display.
        quiet: print nothing.
        interval_s: minimum wall time between two lines [s].
    """

    def __init__(
        self, label: str, total: int, quiet: bool = False, interval_s: float = 2.0, stream: TextIO | None = None
    ) -> None:
        self.label, self.total, self.quiet, self.interval_s = label, total, quiet, interval_s
        self.stream = stream if stream is not None else sys.stderr
        self.start = time.perf_counter()
        self._last = self.start

    @property
    def elapsed(self) -> float:
        """Wall time since creation [s]."""
        return time.perf_counter() - self.start

    def update(self, step: int, **fields: float) -> None:
        """Report step ``step`` (1-based) with named figures, if enough time has passed."""
        now = time.perf_counter()
        if self.quiet or (now - self._last < self.interval_s and step != self.total):
            return
        self._last = now
        extra = "  ".join(f"{k}={v:.4g}" for k, v in fields.items())
        print(f"[{self.label}] {step}/{self.total}  {extra}  t={self.elapsed:.1f}s", file=self.stream, flush=True)
