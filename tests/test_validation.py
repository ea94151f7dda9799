"""Free-simulation validation: RMS error and drift time against closed forms of a known error signal."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mbfg.errors import DataError
from mbfg.logs import Log
from mbfg.models import STIFF, pendulum
from mbfg.spook import simulate
from mbfg.validation import free_simulation


def _own_log(model, h, seconds, ramp):
    """The model's own swing from theta = 1 at rest, plus an angle error 'ramp' (t) added to the log."""
    traj = simulate(model, seconds, h, initial=model.initial_state({"theta": 1.0}))
    t = np.arange(traj.observations.shape[0]) * h
    y = traj.observations[:, :1] + ramp(t)[:, None]
    return Log(t=t, y=y, u=np.zeros((t.size, 0)), observations=("theta",), controls=(), source="synthetic")


def test_rms_and_drift_time_of_a_linear_error_ramp():
    model = pendulum().with_parameters(STIFF)
    h, T = 2e-3, 1.0
    # error 0 until 0.2 s, then 0.25 (t - 0.2) rad: crosses 0.1 rad at t = 0.6 s
    log = _own_log(model, h, T, lambda t: 0.25 * np.maximum(t - 0.2, 0.0))
    res = free_simulation(model, log, seconds=T, rates={"theta": 0.0}, threshold=0.1)
    assert res.threshold == {"theta": 0.1} and res.threshold_source == "given"
    t = np.arange(int(round(T / h)) + 1) * h
    expected_rms = math.sqrt(np.mean((0.25 * np.maximum(t - 0.2, 0.0)) ** 2))
    np.testing.assert_allclose(res.rms["theta"], expected_rms, rtol=1e-9)
    assert abs(res.drift_time["theta"] - 0.6) <= h + 1e-12


def test_no_drift_is_infinite_and_bad_logs_raise():
    model = pendulum().with_parameters(STIFF)
    log = _own_log(model, 2e-3, 0.2, lambda t: 0.0 * t)
    res = free_simulation(model, log, seconds=0.2, rates={"theta": 0.0})
    assert res.drift_time["theta"] == math.inf and res.rms["theta"] < 1e-9
    # The default threshold: 0.1 of the range the log spans in theta.
    assert res.threshold["theta"] == pytest.approx(0.1 * np.ptp(log.y[:, 0]), rel=1e-12)
    with pytest.raises(DataError, match="within the log"):
        free_simulation(model, log, seconds=5.0)
    uneven = Log(t=log.t ** 1.1, y=log.y, u=log.u, observations=log.observations, controls=(), source="x")
    with pytest.raises(DataError, match="uniformly"):
        free_simulation(model, uneven, seconds=0.1)


def test_a_sliders_error_is_not_wrapped_like_an_angle():
    """A displacement error of 4 m (beyond pi) stays 4 m: only hinge angles are compared modulo 2 pi."""
    from mbfg.models import linear_stage

    model = linear_stage()
    traj = simulate(model, 0.1, 1e-3)
    t = np.arange(traj.observations.shape[0]) * 1e-3
    y = traj.observations[:, :1] + 4.0 * (t > 0.05)[:, None]
    log = Log(t=t, y=y, u=np.zeros((t.size, 1)), observations=("x",), controls=("current",), source="stage")
    res = free_simulation(model, log, seconds=0.1, rates={"x": 0.0}, threshold=1.0)
    assert res.drift_time["x"] == pytest.approx(t[t > 0.05][0], abs=1e-12)
    np.testing.assert_allclose(np.abs(res.error[t > 0.05, 0]), 4.0, atol=1e-9)
