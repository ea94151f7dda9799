"""Free-simulation validation of an identified model against a held-out recording.

The model is simulated (Spook, :func:`mbfg.spook.simulate`) from the recording's
first coordinates and rates with the recorded controls (zero-order hold), without
any correction from the measurements, and its joint coordinates (hinge angles [rad],
slider displacements [m]) are compared with the recorded ones: the RMS error over the
first ``seconds`` and the time until the error first exceeds each coordinate's
threshold. The threshold is a coordinate's own: by default :data:`DRIFT_FRACTION` of
the range the recording spans in it (a stage of 0.25 m stroke drifts by 2.5 cm, a
pendulum swinging over 3 rad by 0.3 rad), or given per coordinate. This is the check a
lab trusts: the cross-validation score (:func:`mbfg.graphs.joint.cross_validation_score`)
re-estimates the states and so never lets an error accumulate.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from mbfg.errors import DataError
from mbfg.logs import Log

if TYPE_CHECKING:
    from mbfg.rigid import RigidModel

#: The default drift threshold of a coordinate, as a fraction of the range (max - min) the recording spans in it.
DRIFT_FRACTION = 0.1


@dataclass(frozen=True)
class FreeSimulation:
    """rms: observation -> RMS error over the first ``seconds`` [rad for a hinge angle, m for a slider
    displacement]; drift_time: observation -> first time the |error| exceeds its threshold [s] (inf: never within
    the simulated span); threshold: observation -> the threshold [rad or m]; threshold_source: how the thresholds
    were set ("given", or "0.1 of the recording's range"); t: (n + 1,) times from the first sample
    [s]; simulated, recorded: (n + 1, n_obs) coordinates [rad or m]."""

    rms: dict[str, float]
    drift_time: dict[str, float]
    seconds: float
    threshold: dict[str, float]
    t: np.ndarray
    simulated: np.ndarray
    recorded: np.ndarray
    threshold_source: str = "given"
    #: (n_obs,) which observations are hinge angles (their error wrapped to (-pi, pi]); None: none
    wrapped: np.ndarray | None = None

    @property
    def error(self) -> np.ndarray:
        """(n + 1, n_obs) simulated minus recorded [rad or m], hinge angles wrapped to (-pi, pi]."""
        return self.simulated - self.recorded if self.wrapped is None else _difference(self.simulated,
                                                                                      self.recorded, self.wrapped)

    def columns(self) -> dict[str, np.ndarray]:
        """Per observation NAME (the log's order): NAME (recorded), NAME_simulated, NAME_error, each (n + 1,)
        [rad or m], for a CSV beside the time column ``t``."""
        err = self.error
        out: dict[str, np.ndarray] = {}
        for i, name in enumerate(self.rms):
            out[name] = self.recorded[:, i]
            out[f"{name}_simulated"] = self.simulated[:, i]
            out[f"{name}_error"] = err[:, i]
        return out

    def to_dict(self) -> dict[str, Any]:
        """JSON form: seconds, threshold {NAME: value}, threshold_source, rms {NAME: value}, drift_time {NAME:
        seconds, inf for never}."""
        return {"seconds": self.seconds, "threshold": dict(self.threshold), "threshold_source": self.threshold_source,
                "rms": dict(self.rms), "drift_time": dict(self.drift_time)}


def _difference(a: np.ndarray, b: np.ndarray, wrapped: np.ndarray) -> np.ndarray:
    """a - b (n, n_obs), wrapped to (-pi, pi] in the columns ``wrapped`` (n_obs,) marks (hinge angles)."""
    d = a - b
    return np.where(wrapped[None, :], np.angle(np.exp(1j * d)), d)


def drift_thresholds(log: Log, threshold: float | Mapping[str, float] | None = None,
                     fraction: float = DRIFT_FRACTION) -> tuple[dict[str, float], str]:
    """Each observation's drift threshold [its unit] and a phrase saying where they come from.

    ``threshold``: None, ``fraction`` of the range (max - min of its readings) the log spans in each; a number,
    the same for every observation; a mapping, one per observation (every one named, nothing else).

    Raises:
        DataError: a threshold that is not a finite number > 0 (naming the observation), a name that is not an
            observation, an observation without one, or (by default) an observation whose readings span no range
            (a coordinate that did not move: give its threshold).
    """
    names = tuple(log.observations)
    if threshold is None:
        if not (isinstance(fraction, (int, float)) and math.isfinite(fraction) and fraction > 0):
            raise DataError(f"drift threshold fraction: expected a number > 0, got {fraction!r}")
        out = {}
        for i, name in enumerate(names):
            col = log.y[:, i][np.isfinite(log.y[:, i])]
            span = float(col.max() - col.min()) if col.size else 0.0
            if not span > 0:
                raise DataError(f"{log.source}: observation {name!r} spans no range (its readings do not change); "
                                f"a drift threshold of {fraction:g} of its range would be 0: give its threshold")
            out[name] = fraction * span
        return out, f"{fraction:g} of the recording's range"
    if isinstance(threshold, Mapping):
        unknown = [k for k in threshold if k not in names]
        if unknown:
            raise DataError(f"drift threshold: {unknown[0]!r} is not an observation of the log ({', '.join(names)})")
        missing = [n for n in names if n not in threshold]
        if missing:
            raise DataError(f"drift threshold: no threshold for observation {missing[0]!r}; give one for each of "
                            f"{', '.join(names)}")
        given = {n: threshold[n] for n in names}
    else:
        given = {n: threshold for n in names}
    for name, value in given.items():
        if isinstance(value, bool) or not (isinstance(value, (int, float, np.floating)) and math.isfinite(value)
                                           and value > 0):
            raise DataError(f"drift threshold of {name!r}: expected a number > 0 [rad or m], got {value!r}")
    return {n: float(v) for n, v in given.items()}, "given"


def log_at_step(log: Log, h: float | None) -> Log:
    """``log`` as an estimation at step ``h`` [s] sees it: every stride-th sample, ``h`` a whole multiple
    stride of the period (:func:`mbfg.graphs.joint.time_step`, which raises the named error otherwise)."""
    from dataclasses import replace

    from mbfg.graphs.joint import time_step

    _, stride = time_step(log, h)
    return replace(log, t=log.t[::stride], y=log.y[::stride], u=log.u[::stride])


def _rates(log: Log, i: int, k: int) -> float:
    """Slope of a least-squares line through the first k samples of observation i [unit/s]."""
    t, y = log.t[:k], log.y[:k, i]
    ok = np.isfinite(y)
    if ok.sum() < 2:
        raise DataError(f"{log.source}: observation {log.observations[i]!r} has fewer than 2 readings in its "
                        f"first {k} samples; cannot estimate its initial rate")
    return float(np.polyfit(t[ok], y[ok], 1)[0])


def free_simulation(model: RigidModel, log: Log, *, seconds: float = 2.0,
                    threshold: float | Mapping[str, float] | None = None, rate_samples: int = 5,
                    rates: Mapping[str, float] | None = None, fraction: float = DRIFT_FRACTION) -> FreeSimulation:
    """Simulate ``model`` from ``log``'s first sample with its controls and compare the joint coordinates.

    Args:
        model: the (identified) model; its observations must be hinge angles or slider displacements.
        log: a uniformly sampled recording; its step is the simulation step h [s].
        seconds: span of the simulation and of the RMS [s] (at most the log's length).
        threshold: drift threshold on |simulated - recorded| [rad or m]: None, ``fraction`` of the range the
            log spans in each coordinate; a number for all; or one per observation (:func:`drift_thresholds`).
        rate_samples: samples for the initial-rate line fit (noise on rates grows as 1/k^1.5).
        rates: initial rates [rad/s or m/s] by observation, instead of the fit.
        fraction: the default threshold's fraction of the range (:data:`DRIFT_FRACTION`).

    Raises:
        DataError: a non-uniform or too short log, a non-positive span or threshold,
            observations that are not the model's joint coordinates, missing first readings.
    """
    if not (math.isfinite(seconds) and seconds > 0):
        raise DataError(f"free_simulation: seconds must be > 0, got {seconds!r}")
    thresholds, source = drift_thresholds(log, threshold, fraction)
    if list(log.observations) != list(model.observations):
        raise DataError(f"{log.source}: observations {list(log.observations)} are not the model's "
                        f"{list(model.observations)}")
    coordinates = {j.name for j in model.axial}
    if any(o not in coordinates for o in log.observations):
        raise DataError(f"free_simulation: every observation must be a hinge angle or slider displacement "
                        f"of {model.name!r}")
    dt = np.diff(log.t)
    if dt.size < 2 or np.abs(dt - dt[0]).max() > 1e-6 * dt[0]:
        raise DataError(f"{log.source}: free_simulation needs a uniformly sampled log (resample it first)")
    h = float(dt[0])
    n = int(round(seconds / h))
    if n < 1 or n >= len(log.t):
        raise DataError(f"{log.source}: {seconds} s is not within the log's {log.t[-1] - log.t[0]:.3g} s")
    if not np.all(np.isfinite(log.y[0])):
        raise DataError(f"{log.source}: the first sample has a missing angle; cannot start the simulation")
    from mbfg.spook import simulate, unwrap_angles

    coords = {o: float(log.y[0, i]) for i, o in enumerate(log.observations)}
    w = dict(rates) if rates is not None else {o: _rates(log, i, rate_samples) for i, o in enumerate(log.observations)}
    controls = np.asarray(log.u[:n], dtype=float) if len(model.controls) else None
    traj = simulate(model, n * h, h, initial=model.initial_state(coords, w), controls=controls)
    sim = unwrap_angles(model, traj.observations)
    rec = np.asarray(log.y[: n + 1], dtype=float)
    hinge = np.asarray(model.angle_observation_mask(), dtype=bool)
    for col in np.flatnonzero(hinge):  # the unwrapped angle on the recording's turn, as an encoder reads it
        sim[:, col] += 2.0 * math.pi * round((rec[0, col] - sim[0, col]) / (2.0 * math.pi))
    # Angles compared modulo 2 pi (a wrapped reading is the same angle); displacements [m] as they are.
    err = _difference(sim, rec, hinge)
    t = np.asarray(log.t[: n + 1]) - log.t[0]
    rms, drift = {}, {}
    for i, o in enumerate(log.observations):
        ok = np.isfinite(err[:, i])
        rms[o] = float(np.sqrt(np.mean(err[ok, i] ** 2)))
        beyond = np.nonzero(ok & (np.abs(np.nan_to_num(err[:, i])) > thresholds[o]))[0]
        drift[o] = float(t[beyond[0]]) if beyond.size else math.inf
    return FreeSimulation(rms, drift, float(n * h), thresholds, t, sim, rec, source, hinge)
