"""Progress lines for long work: step, LM iterations, cost, elapsed time, through :mod:`logging`.

A library logs, the command line prints: each line is an INFO record of the ``mbfg.progress`` logger (the sweep's
of ``mbfg.sweep``), at most one per ``interval_s``. A program or notebook sees them once it configures logging
(``logging.basicConfig(level=logging.INFO)``) or calls :func:`log_to_stderr`, as the ``mbfg`` command does;
``quiet=True`` makes no record at all, and neither does a reporter made inside :func:`silenced`.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TextIO

_LOG = logging.getLogger("mbfg.progress")

#: Set inside :func:`silenced`: every :class:`Progress` made there is quiet.
_SILENCED: ContextVar[bool] = ContextVar("mbfg_progress_silenced", default=False)


@contextmanager
def silenced() -> Iterator[None]:
    """No progress records from the reporters made inside (in this thread or task only), whatever ``quiet`` they
    were given: a command's ``--quiet`` around a library call, such as :func:`mbfg.calibration.calibrate`, whose
    solves report."""
    token = _SILENCED.set(True)
    try:
        yield
    finally:
        _SILENCED.reset(token)


class _CurrentStderr(logging.Handler):
    """Each record's message on the ``sys.stderr`` of the moment it is emitted (captured output and a redirected
    stderr included), as ``print(..., file=sys.stderr)`` would."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            print(self.format(record), file=sys.stderr, flush=True)
        except Exception:  # noqa: BLE001 (logging's rule: a failed emit is reported, never raised)
            self.handleError(record)


def log_to_stderr(level: int = logging.INFO) -> None:
    """Print mbfg's log records (progress lines, warnings) on stderr as plain lines, from ``level`` up.

    Installs one handler on the ``mbfg`` logger (calling it again only changes the level) and stops the records
    from reaching the root logger's handlers too, so that no line is printed twice.
    """
    logger = logging.getLogger("mbfg")
    if not any(isinstance(h, _CurrentStderr) for h in logger.handlers):
        handler = _CurrentStderr()
        handler.setFormatter(logging.Formatter("%(message)s"))
        logger.addHandler(handler)
    logger.setLevel(level)
    logger.propagate = False


class Progress:
    """Rate-limited progress reporter.

    Args:
        label: what is running, e.g. ``"forward dynamics"``.
        total: number of steps, for the ``k/total`` display.
        quiet: report nothing (so too inside :func:`silenced`).
        interval_s: minimum wall time between two lines [s].
        stream: write the lines there instead of logging them.
    """

    def __init__(
        self, label: str, total: int, quiet: bool = False, interval_s: float = 2.0, stream: TextIO | None = None
    ) -> None:
        self.label, self.total, self.quiet, self.interval_s = label, total, quiet or _SILENCED.get(), interval_s
        self.stream = stream
        self.start = time.perf_counter()
        self._last = self.start

    @property
    def elapsed(self) -> float:
        """Wall time since creation [s]."""
        return time.perf_counter() - self.start

    def say(self, text: str) -> None:
        """Report ``text`` now, whatever the rate limit (a stage's start or end, which a rate-limited line could
        skip)."""
        if not self.quiet:
            self._emit(f"[{self.label}] {text}  t={self.elapsed:.1f}s")

    def update(self, step: int, **fields: float) -> None:
        """Report step ``step`` (1-based) with named figures, if enough time has passed."""
        now = time.perf_counter()
        if self.quiet or (now - self._last < self.interval_s and step != self.total):
            return
        self._last = now
        extra = "  ".join(f"{k}={v:.4g}" for k, v in fields.items())
        self._emit(f"[{self.label}] {step}/{self.total}  {extra}  t={self.elapsed:.1f}s")

    def _emit(self, line: str) -> None:
        if self.stream is not None:
            print(line, file=self.stream, flush=True)
        else:
            _LOG.info(line)
