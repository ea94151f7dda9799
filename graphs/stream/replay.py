"""Whole logs through a stream estimator (:meth:`StreamEstimator.replay`) and the window at the end of a stream."""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING

import numpy as np

from mbfg.errors import DataError
from mbfg.graphs.stream.results import Estimate, StreamReplay
from mbfg.logs import Log
from mbfg.progress import Progress
from mbfg.rigid import State

if TYPE_CHECKING:  # the estimator's attributes and methods the mixin uses
    from mbfg.graphs.stream._host import StreamHost
else:
    StreamHost = object


class Replay(StreamHost):
    """Replays and the end-of-stream window of :class:`StreamEstimator` (a mixin)."""

    # ------------------------------------------------------------------ whole logs, end of stream
    def window(self, covariance: bool | None = None) -> list[Estimate]:
        """Estimates of the last m + 1 states in the window, oldest first (at the end of a stream: its final
        smoothing; samples still waiting for an update are not in it, see :meth:`flush`)."""
        if self._smoother is None:
            return []
        cov = self.covariance if covariance is None else covariance
        first = max(self._k - self.m, self._k_start)
        return list(self._estimates(range(first, self._k + 1), cov))

    def replay(self, log: Log, *, quiet: bool = True) -> StreamReplay:
        """Push every row of ``log`` (readings in rad / m; converted to counts for an estimator that reads
        raw counts), and collect the filtered and smoothed estimate of every state.

        Raises:
            DataError: the log's columns are not the model's observations and controls.
        """
        if tuple(log.observations) != tuple(self.model.observations) or tuple(log.controls) != tuple(self.model.controls):
            raise DataError(
                f"{log.source}: columns {list(log.observations) + list(log.controls)} do not match the model "
                f"{self.model.name!r} ({list(self.model.observations) + list(self.model.controls)})"
            )
        y = log.y
        if self.counts:
            y = np.where(self.hinge, y / self.step_rad, y)  # the encoder's counts
        filtered: dict[int, Estimate] = {}
        smoothed: dict[int, Estimate] = {}
        step_s = np.zeros(len(log.t))
        progress = Progress(f"stream {self.model.name}", len(log.t), quiet=quiet)
        for i in range(len(log.t)):
            start = time.perf_counter()
            row = [None if math.isnan(v) else float(v) for v in y[i]]  # an empty cell: a missing reading
            out = self.push(log.t[i], row, log.u[i] if log.u.shape[1] else None)
            step_s[i] = time.perf_counter() - start
            for est in out.added:
                filtered[est.k] = est
            for est in out.smoothed_added:
                smoothed[est.k] = est
            progress.update(i + 1, stream_s=log.t[i] - log.t[0])
        last = self.flush()
        if last is not None:
            filtered.update((est.k, est) for est in last.added)
        for est in self.window(covariance=False):
            smoothed[est.k] = est
        ks = sorted(filtered)
        if not ks:
            raise DataError(f"{log.source}: the stream estimated no state from the log's {len(log.t)} sample(s) "
                            f"({self.status.summary()}); it starts at the first sample with every reading")

        def pick(src: dict[int, Estimate], attr: str) -> np.ndarray:
            return np.stack([getattr(src[k], attr) if k in src else np.full(len(self.model.observations), np.nan)
                             for k in ks])

        def states(src: dict[int, Estimate]) -> State:
            nb = self.model.nb
            nan = State(np.full((nb, 3), np.nan), np.full((nb, 4), np.nan), np.full((nb, 3), np.nan),
                        np.full((nb, 3), np.nan))
            rows = [src[k].state if k in src else nan for k in ks]
            return State(*(np.stack([np.asarray(s[f]) for s in rows]) for f in range(4)))

        return StreamReplay(
            np.array([filtered[k].t for k in ks]),
            pick(filtered, "coordinates"), pick(filtered, "rates"), pick(smoothed, "coordinates"),
            pick(smoothed, "rates"), states(filtered), states(smoothed), step_s, self.status, self._refined,
        )
