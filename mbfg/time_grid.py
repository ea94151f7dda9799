"""The times of a log: its sample period written as the rig set it (:func:`sample_period`,
:func:`round_time`), the uniform grid nearest its times (:func:`time_grid`), and a rig's clock jitter snapped
onto that grid (:func:`snap_to_grid`), refused beyond :data:`SNAP_TOLERANCE` (:func:`check_on_grid`), or
resampled onto it on request (:func:`onto_grid`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from mbfg.errors import DataError

if TYPE_CHECKING:
    from mbfg.logs import Log

__all__ = ["REGULAR_RTOL", "SNAP_TOLERANCE", "TimeGrid", "check_on_grid", "grid_period", "onto_grid", "round_time",
           "sample_period", "snap_to_grid", "time_grid"]


def _decimals(x: float, tol: float) -> int:
    """The fewest decimals (at most 12) that write ``x`` to within ``tol``."""
    for d in range(13):
        if abs(round(x, d) - x) <= tol:
            return d
    return 12


def sample_period(t: Sequence[float] | np.ndarray) -> float:
    """The median spacing of the times ``t`` [s], rounded to the decimals it is written with: 0.001 for a
    log at 1 kHz, not the 0.0010000000000000009 that ``0.002 - 0.001`` gives in floating point. NaN for
    fewer than two times.

    The spacing is rounded where rounding moves it by no more than the floating-point error of a
    difference of times that large (so a log whose clock starts at 1e4 s still gives 0.001), and by no
    more than 1e-12 of the spacing itself, so a real, jittered period (0.0010000004) is kept as it is.
    """
    t = np.asarray(t, dtype=float)
    if len(t) < 2:
        return math.nan
    period = float(np.median(np.diff(t)))
    noise = 8 * np.finfo(float).eps * float(np.max(np.abs(t)))
    return round(period, _decimals(period, max(noise, 1e-12 * abs(period))))


def round_time(k: float, period: float) -> float:
    """``k`` periods [s] (a step index times the sample period, or a stride of samples) rounded to the
    period's decimals: 3 x 0.1 gives 0.3, not 0.30000000000000004, so that times written from step
    indices match the times of the log they came from."""
    return round(k * period, _decimals(period, 1e-12 * abs(period)))


#: Jitter of a time column below this fraction of the sample period is taken for the way the rig wrote its
#: clock (decimal or float32 rounding, a timer's resolution) and snapped onto the uniform grid; a row further off
#: is refused (:func:`check_on_grid`), or resampled on request. At 1 kHz that is 1 ns: moving a reading by it
#: changes it by v * 1 ns, below any encoder's resolution at a lab rig's speeds.
SNAP_TOLERANCE = 1e-6
#: An interval more than this fraction off the median period is irregular (a gap, a doubled sample): no grid
#: is fitted through such a log (the estimation's rule, :func:`mbfg.graphs.joint.time_step`).
REGULAR_RTOL = 0.01


@dataclass(frozen=True)
class TimeGrid:
    """The uniform grid ``t_k = start + k * period`` (k = 0 .. n-1) nearest a log's n times.

    times: (n,) the grid [s], written with the fewest decimals that keep it within half the tolerance of the
    least-squares line through the times (0.001, not 0.0009999999999; a clock's real period such as
    0.0010000004 is kept); deviation: (n,) recorded minus grid times [s]; tolerance: [s] the larger of
    :data:`SNAP_TOLERANCE` of the period and the float64 resolution of the times; exact: every time is on the
    least-squares line to that resolution (nothing to snap); regular: every interval is within
    :data:`REGULAR_RTOL` of the median one (otherwise the grid means nothing: a log with gaps).
    """

    start: float
    period: float
    times: np.ndarray
    deviation: np.ndarray
    tolerance: float
    exact: bool
    regular: bool

    @property
    def off_grid(self) -> np.ndarray:
        """Indices (0-based) of the rows further than ``tolerance`` from the grid."""
        return np.flatnonzero(~(np.abs(self.deviation) <= self.tolerance))

    @property
    def max_deviation(self) -> float:
        """The largest |recorded - grid| time [s]."""
        return float(np.max(np.abs(self.deviation))) if self.deviation.size else 0.0


def time_grid(t: Sequence[float] | np.ndarray) -> TimeGrid:
    """The uniform grid nearest the times ``t`` (n,) [s], n >= 2 (:class:`TimeGrid`).

    The line through (k, t_k) by least squares gives the start and the period; both are then rounded to the
    fewest decimals that keep every grid time within half the tolerance of that line (or within five standard
    errors of the line, for times further off), so that a snapped log's period is the one the rig was set to. A
    grid that the rounding would take further off is the line itself.

    Raises:
        DataError: fewer than two times.
    """
    t = np.asarray(t, dtype=float)
    n = len(t)
    if n < 2:
        raise DataError(f"time_grid: a grid needs at least 2 times, got {n}")
    k = np.arange(n, dtype=float)
    kc = k - k.mean()
    period = float(kc @ (t - t.mean()) / (kc @ kc))
    start = float(t.mean() - period * k.mean())
    # The resolution of a difference of two float64 times that large (the clock of a long run starts at 1e4 s).
    noise = 8.0 * np.finfo(float).eps * float(np.max(np.abs(t)))
    line = start + period * k
    exact = bool(np.max(np.abs(t - line)) <= noise)
    tolerance = max(SNAP_TOLERANCE * abs(period), noise)
    # How far the rounding may move the start and the period: within a quarter of the tolerance over the log,
    # or, for times scattered further, within five standard errors of the fit (the start's 2 sigma / sqrt(n),
    # the period's sigma sqrt(12 / n^3); a rig's set period is rarely further), so that the grid named beside a
    # jittered log is the rig's 0 + k * 0.001 rather than the fit's noise.
    sigma = float(np.sqrt(np.mean((t - line) ** 2)))
    dp = _decimals(period, max(0.25 * tolerance / max(n - 1, 1), 5.0 * sigma * math.sqrt(12.0 / n**3)))
    d0 = _decimals(start, max(0.25 * tolerance, 10.0 * sigma / math.sqrt(n)))
    times = np.round(round(start, d0) + round(period, dp) * k, max(dp, d0))
    if np.max(np.abs(times - line)) > max(0.5 * tolerance, 5.0 * sigma * (2.0 + math.sqrt(12.0)) / math.sqrt(n)):
        times, dp = line, 12
    dt = np.diff(t)
    median = float(np.median(dt))
    regular = bool(np.all(np.abs(dt - median) <= REGULAR_RTOL * median))
    return TimeGrid(float(times[0]), round(period, dp), times, t - times, tolerance, exact, regular)


def _seconds(x: float) -> str:
    return f"{x:.3g} s"


def snap_to_grid(log: Log) -> tuple[Log, str | None]:
    """``log`` with its times on their uniform grid (:func:`time_grid`) where every one lies within the grid's
    tolerance (:data:`SNAP_TOLERANCE` of the period) of it, and a one-line note that says so: how many rows moved,
    by how much at most, and the period.

    Unchanged, with no note: a log of fewer than 3 rows, one whose times are on their grid to float64
    resolution, one that is not regular (gaps: the estimation refuses it, :func:`mbfg.graphs.joint.time_step`),
    and one with rows off the grid beyond the tolerance (:func:`check_on_grid` says which).
    """
    if len(log.t) < 3:
        return log, None
    grid = time_grid(log.t)
    if grid.exact or not grid.regular or grid.off_grid.size:
        return log, None
    moved = int(np.count_nonzero(log.t != grid.times))
    if not moved:
        return log, None
    from dataclasses import replace

    note = (f"time column snapped onto the uniform grid t = {grid.start:.12g} + k * {grid.period:.12g} s: {moved} "
            f"of {len(log.t)} rows moved, by {_seconds(grid.max_deviation)} at most ({grid.max_deviation / grid.period:.2g} "
            f"of the period; jitter below {SNAP_TOLERANCE:g} of it is snapped)")
    return replace(log, t=grid.times.copy()), note


def check_on_grid(log: Log, remedy: str = "resample it onto a uniform grid first "
                  "(mbfg.datasets.rigs.resample_uniform, or mbfg.logs.onto_grid for its own grid)",
                  grid: TimeGrid | None = None) -> TimeGrid:
    """The grid of a regular log whose every time is on it within the tolerance (:func:`time_grid`; ``grid``:
    that grid where the caller has it).

    Raises:
        DataError: naming the log, the number of rows off the grid by more than :data:`SNAP_TOLERANCE` of the
            period, the first of them (0-based, as NumPy indexes it) and the largest deviation, and ``remedy``.
    """
    grid = time_grid(log.t) if grid is None else grid
    off = grid.off_grid
    if off.size:
        i = int(off[0])
        raise DataError(
            f"{log.source}: {off.size} of its {len(log.t)} rows are off the uniform grid t = {grid.start:.12g} + k * "
            f"{grid.period:.12g} s by more than {SNAP_TOLERANCE:g} of the period ({_seconds(grid.tolerance)}; the "
            f"first is t[{i}] = {float(log.t[i])!r} s, {_seconds(float(grid.deviation[i]))} off; the largest "
            f"{_seconds(grid.max_deviation)}): jitter that large is not snapped; {remedy}"
        )
    return grid


def grid_period(log: Log) -> float:
    """The sample period [s] of a regular log (every interval within :data:`REGULAR_RTOL` of the median; the
    caller checks that): :func:`sample_period` where its times are on their grid to float64 resolution, the
    grid's period where they are within its tolerance (:func:`time_grid`).

    Raises:
        DataError: rows off the grid beyond the tolerance (:func:`check_on_grid`).
    """
    grid = check_on_grid(log)
    return sample_period(log.t) if grid.exact else grid.period


def onto_grid(log: Log, grid: TimeGrid | None = None) -> Log:
    """A regular log on its own uniform grid (:func:`time_grid`), its rows kept: each observation interpolated
    linearly at its grid time from the two recorded samples around it (a missing reading stays missing beside it,
    never filled in from farther samples), each control the one recorded on its row (the rig applied row k's
    control from its sample time, which the grid time stands for).

    This is the resampling of a log whose clock jitters beyond :data:`SNAP_TOLERANCE`: a grid of another step
    (:func:`mbfg.datasets.rigs.resample_uniform`) holds the control of the last sample at or before each grid
    time, which on a jittered clock is the previous row's for every sample recorded after its grid time.

    Raises:
        DataError: a log that is not regular, or of fewer than 2 rows.
    """
    grid = time_grid(log.t) if grid is None else grid
    if not grid.regular:
        raise DataError(f"{log.source}: onto_grid needs a regular log (every interval within {100 * REGULAR_RTOL:g} % "
                        "of the median); one with gaps needs mbfg.datasets.rigs.resample_uniform")
    t, g = log.t, grid.times
    i = np.clip(np.searchsorted(t, g, side="right") - 1, 0, len(t) - 2)
    # Within a hundredth of a period of its own sample, a grid time lies between two samples but for the first
    # and last rows, where a time outside the samples is taken from the end sample (no extrapolation).
    w = np.clip((g - t[i]) / (t[i + 1] - t[i]), 0.0, 1.0)[:, None]
    y0, y1 = log.y[i], log.y[i + 1]
    y = np.where(w == 0.0, y0, np.where(w == 1.0, y1, (1.0 - w) * y0 + w * y1))
    from dataclasses import replace

    return replace(log, t=g.copy(), y=y)
