"""What a stream returns: fault counts, estimates, per-sample steps, replays (dataclasses).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING

import numpy as np

from mbfg import quaternion as quat
from mbfg.rigid import State

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from mbfg.logs import Log

#: Observation noise [rad or m] when neither a counts-per-revolution nor a calibration gives one.
DEFAULT_SIGMA = 1e-3
#: Standard deviation of the first state's velocity prior [m/s, rad/s]: weak, it only makes x_0 determined.
VELOCITY_PRIOR_SIGMA = 100.0


class StreamWarning(UserWarning):
    """A bad sample in a stream (issued once per kind of fault; :class:`StreamStatus` counts them all)."""


@dataclass
class StreamStatus:
    """What happened to the samples of a stream so far (counts).

    samples: pushed; states: time-steps in the graph (bridged ones included);
    updates: smoother updates; between: samples between state times (h a
    multiple of the period; not used, not a fault); waiting: samples before the
    first complete one. Faults: gaps (events) and missing_samples (samples
    they skipped), nonfinite (samples with a non-finite reading, control or
    time), duplicates, out_of_order, off_grid (more than a quarter period off
    the sample grid; placed on the nearest slot), jumps (readings left out),
    resyncs (channels believed again after ``resync`` jumps), malformed (wrong
    number of values), solver_failures (restarts), missing (samples with a
    reading not delivered: None, an empty cell), leaps (samples dropped for a
    time more than ``max_gap`` from the last one) and restarts (windows
    restarted on a new clock after ``resync`` such samples in a row).
    """

    samples: int = 0
    states: int = 0
    updates: int = 0
    between: int = 0
    waiting: int = 0
    gaps: int = 0
    missing_samples: int = 0
    nonfinite: int = 0
    duplicates: int = 0
    out_of_order: int = 0
    off_grid: int = 0
    jumps: int = 0
    resyncs: int = 0
    malformed: int = 0
    solver_failures: int = 0
    missing: int = 0
    leaps: int = 0
    restarts: int = 0

    FAULTS = ("gaps", "nonfinite", "duplicates", "out_of_order", "off_grid", "jumps", "malformed",
              "solver_failures", "missing", "leaps")

    #: The faults whose rate says that the estimate has left the readings (the model or its parameters do not
    #: fit them, e.g. a calibration that freed what its log did not determine): readings left out as jumps,
    #: and failed solves that restarted the smoother.
    RATED = ("solver_failures", "jumps")

    def rates(self) -> dict[str, float]:
        """Each of :attr:`RATED` per sample pushed (0 before any): e.g. ``{"solver_failures": 0.02,
        "jumps": 0.21}`` (a jump is one reading left out, so with several channels the rate can pass 1)."""
        return {name: getattr(self, name) / self.samples if self.samples else 0.0 for name in self.RATED}

    def over_rate(self, limit: float) -> dict[str, float]:
        """The rates of :meth:`rates` above ``limit`` (a fraction of the samples, e.g. 0.01)."""
        return {name: rate for name, rate in self.rates().items() if rate > limit}

    def rate_summary(self, limit: float) -> str:
        """The rated faults as percentages of the samples against ``limit`` (a fraction), e.g.
        ``solver restarts 2.05 %, jumps 21.3 % of the samples (more than 1 %: the estimates left the
        readings)``."""
        words = {"solver_failures": "solver restarts", "jumps": "jumps"}
        over = self.over_rate(limit)
        parts = ", ".join(f"{words[n]} {100 * r:.3g} %" for n, r in self.rates().items())
        if over:
            return f"{parts} of the samples (more than {100 * limit:g} %: the estimates left the readings)"
        return f"{parts} of the samples (at most {100 * limit:g} %)"

    @property
    def faults(self) -> int:
        """Number of fault events (a gap counts once however many samples it skips)."""
        return sum(getattr(self, name) for name in self.FAULTS)

    def as_dict(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def summary(self) -> str:
        """One readable line, e.g. ``1000 samples, 998 states; faults: 1 gap (2 missing samples), ...``."""
        parts = [
            f"{self.gaps} gap{'s' * (self.gaps != 1)} ({self.missing_samples} missing samples)",
            f"{self.nonfinite} non-finite", f"{self.duplicates} duplicate", f"{self.out_of_order} out-of-order",
            f"{self.off_grid} off-grid", f"{self.jumps} jump{'s' * (self.jumps != 1)} ({self.resyncs} resyncs)",
            f"{self.malformed} malformed", f"{self.solver_failures} solver restarts",
            f"{self.missing} with a missing reading",
            f"{self.leaps} time leap{'s' * (self.leaps != 1)} ({self.restarts} window restarts)",
        ]
        head = f"{self.samples} samples, {self.states} states, {self.updates} updates"
        if self.waiting:
            head += f", {self.waiting} before the first complete sample"
        if self.between:
            head += f", {self.between} between state times"
        return f"{head}; faults: " + ", ".join(parts)


@dataclass(frozen=True)
class Estimate:
    """The estimate of one state.

    t: state time [s] (the stream's time axis); k: state index; coordinates
    (n_obs,): the model's observations at the estimate (hinge angles unwrapped
    next to the encoder's readings [rad], CoM coordinates [m]); rates (n_obs,):
    their time derivatives [rad/s, m/s]; coordinate_std, rate_std (n_obs,):
    marginal standard deviations (None unless asked for); rotations (nb, 3, 3),
    positions (nb, 3) and velocity (6 nb,): the state's GTSAM values, also as
    :attr:`state`.
    """

    t: float
    k: int
    coordinates: np.ndarray
    rates: np.ndarray
    coordinate_std: np.ndarray | None
    rate_std: np.ndarray | None
    rotations: np.ndarray = field(repr=False)
    positions: np.ndarray = field(repr=False)
    velocity: np.ndarray = field(repr=False)

    @property
    def state(self) -> State:
        """The full :class:`State` (built on request: quaternions cost more than the rest of a read-out)."""
        e = np.stack([quat.from_matrix(R) for R in self.rotations])
        vel = self.velocity.reshape(-1, 6)
        return State(self.positions, e, vel[:, :3].copy(), vel[:, 3:].copy())


@dataclass(frozen=True)
class StreamStep:
    """What :meth:`StreamEstimator.push` returns for one sample.

    t: the sample's time [s]; flags: faults and notes of this sample
    (``"gap"``, ``"nonfinite"``, ``"duplicate"``, ``"out_of_order"``,
    ``"off_grid"``, ``"jump"``, ``"resync"``, ``"malformed"``,
    ``"solver_failure"``, ``"missing"``, ``"leap"``, ``"restart"``, ``"waiting"``,
    ``"between"``, ``"pending"``); filtered: the newest
    state's estimate; smoothed: the state one lag back (None until the window
    is full); parameters: the refined parameters (online refinement only).
    A dropped sample returns the latest estimates again, as does a sample
    that waits for the next update (``update_every`` > 1; flag ``"pending"``).
    updated: this sample updated the smoother; added: then the filtered
    estimates of the states of every sample it took in, oldest first (one, or
    the ``update_every`` waiting ones), and smoothed_added: the smoothed
    estimates of the states one lag before those (as far as the window reaches).
    """

    t: float
    flags: tuple[str, ...]
    filtered: Estimate | None
    smoothed: Estimate | None
    parameters: dict[str, float] | None = None
    updated: bool = False
    added: tuple[Estimate, ...] = ()
    smoothed_added: tuple[Estimate, ...] = ()


@dataclass
class StreamReplay:
    """A log replayed through :meth:`StreamEstimator.replay`, one row per state.

    t (n,): state times [s]; filtered_q, filtered_qdot, smoothed_q,
    smoothed_qdot (n, n_obs): coordinates [rad, m] and rates [rad/s, m/s] as
    estimated when the state was the newest (filtered) and one lag later
    (smoothed; the last ``m`` states from the window at the end of the stream);
    filtered_states, smoothed_states: :class:`State` with a leading axis n;
    step_s (samples,): wall time of each push [s]; status: the fault counts.
    """

    t: np.ndarray
    filtered_q: np.ndarray
    filtered_qdot: np.ndarray
    smoothed_q: np.ndarray
    smoothed_qdot: np.ndarray
    filtered_states: State
    smoothed_states: State
    step_s: np.ndarray
    status: StreamStatus
    parameters: dict[str, float] | None = None

    def plot(self, log: Log | None = None, path: str | os.PathLike[str] | None = None) -> Figure:
        """A figure of the replay (:func:`mbfg.plots.stream_figure`): per observation the log's readings (when
        ``log``, the replayed :class:`~mbfg.logs.Log`, is given) with the filtered and smoothed coordinate
        (n,) against t [s] [rad, m], and the filtered and smoothed rate [rad/s, m/s]; missing readings and
        gaps between states marked.

        Returns the matplotlib Figure; also written to ``path`` if given (format from the extension).
        Needs matplotlib (``pip install 'mbfg[plot]'``; else :class:`~mbfg.errors.MbfgError`).
        """
        from mbfg.plots import stream_figure

        return stream_figure(self, log, path)
