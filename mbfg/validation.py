"""Free-simulation validation of an identified model against a held-out recording.

The model is simulated (Spook, :func:`mbfg.spook.simulate`) from the recording's
first angles and rates with the recorded controls (zero-order hold), without
any correction from the measurements, and its hinge angles are compared with
the recorded ones: the RMS error over the first ``seconds`` and the time until
the error first exceeds ``threshold`` (0.1 rad by default). This is the check a
lab trusts: the cross-validation score (:func:`mbfg.graphs.joint.cross_validation_score`)
re-estimates the states and so never lets an error accumulate.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from mbfg.errors import DataError
from mbfg.logs import Log
from mbfg.rigid import RigidModel


@dataclass(frozen=True)
class FreeSimulation:
    """rms: observation -> RMS angle error over the first ``seconds`` [rad]; drift_time:
    observation -> first time the |error| exceeds the threshold [s] (inf: never within the
    simulated span); t: (n + 1,) times [s]; simulated, recorded: (n + 1, n_obs) angles [rad]."""

    rms: dict[str, float]
    drift_time: dict[str, float]
    seconds: float
    threshold: float
    t: np.ndarray
    simulated: np.ndarray
    recorded: np.ndarray


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


def free_simulation(model: RigidModel, log: Log, *, seconds: float = 2.0, threshold: float = 0.1,
                    rate_samples: int = 5, rates: Mapping[str, float] | None = None) -> FreeSimulation:
    """Simulate ``model`` from ``log``'s first sample with its controls and compare the hinge angles.

    Args:
        model: the (identified) model; its observations must be hinge angles.
        log: a uniformly sampled recording; its step is the simulation step h [s].
        seconds: span of the simulation and of the RMS [s] (at most the log's length).
        threshold: drift threshold on |simulated - recorded| [rad].
        rate_samples: samples for the initial-rate line fit (noise on rates grows as 1/k^1.5).
        rates: initial rates [rad/s] by observation, instead of the fit.

    Raises:
        DataError: a non-uniform or too short log, a non-positive span or threshold,
            observations that are not the model's hinges, missing first angles.
    """
    if not (math.isfinite(seconds) and seconds > 0 and math.isfinite(threshold) and threshold > 0):
        raise DataError(f"free_simulation: seconds and threshold must be > 0, got {seconds!r}, {threshold!r}")
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
    err = np.angle(np.exp(1j * (sim - rec)))
    t = np.asarray(log.t[: n + 1]) - log.t[0]
    rms, drift = {}, {}
    for i, o in enumerate(log.observations):
        ok = np.isfinite(err[:, i])
        rms[o] = float(np.sqrt(np.mean(err[ok, i] ** 2)))
        beyond = np.nonzero(ok & (np.abs(np.nan_to_num(err[:, i])) > threshold))[0]
        drift[o] = float(t[beyond[0]]) if beyond.size else math.inf
    return FreeSimulation(rms, drift, float(n * h), float(threshold), t, sim, rec)
