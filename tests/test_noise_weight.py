"""The state error weight from the data (mbfg.noise_weight): maximum marginal likelihood over w.

The check is independent of the criterion: a simulated stage gets a hidden force disturbance (a current the log
does not record) and noisy, quantized readings, so both variance components are known; the reading and impulse
noise the estimated w implies must be those. The parameters' accuracy at the estimated w, beside hand-tuned
weights, is `python benchmarks/weight_estimation.py`'s.
"""

from __future__ import annotations

import numpy as np
import pytest

from mbfg.errors import ModelError
from mbfg.logs import Log
from mbfg.models import linear_stage, pendulum
from mbfg.noise_weight import estimate_weight
from mbfg.spook import simulate

H = 1e-3
#: The stage's hidden force disturbance: a current error [A] per time-step that the log does not record.
CURRENT_NOISE = 0.05
#: The reading noise [m] and the encoder's count [m].
READING_NOISE, COUNT = 5e-6, 1e-6
TRUTH = {"M": 5.0, "F_v": 20.0, "F_c": 8.0, "F_0": 1.5}


@pytest.fixture(scope="module")
def stage():
    """2 s of the README's stage (M = 5 kg) driven by a current the log records, plus a hidden disturbance
    of CURRENT_NOISE A per step: impulse noise h K_F CURRENT_NOISE [N s] per step, and readings with
    READING_NOISE of noise on an encoder of COUNT m; the calibration starts 20 % off."""
    model = linear_stage().with_parameters(TRUTH)
    t = np.arange(2000) * H
    current = 0.4 * np.sin(2 * np.pi * 0.7 * t) + 0.1 * np.sign(np.sin(2 * np.pi * 2.1 * t))
    disturbed = current + CURRENT_NOISE * np.random.default_rng(4).standard_normal(t.shape)
    traj = simulate(model, 2.0, H, controls=disturbed[:, None])
    rng = np.random.default_rng(3)
    y = traj.observations + READING_NOISE * rng.standard_normal(traj.observations.shape)
    y = COUNT * np.round(y / COUNT)
    u = np.append(current, current[-1])[:, None]
    log = Log(traj.t, y, u, model.observations, model.controls, "simulated stage")
    start = model.with_parameters({"M": 4.0, "F_v": 16.0, "F_c": 6.4, "F_0": 0.0})
    return estimate_weight(start, log), model


@pytest.mark.slow
def test_the_weight_of_maximum_likelihood_recovers_both_noise_levels(stage):
    """The reading noise (Gaussian and the encoder's quantization, count / sqrt(12)) and the impulse noise of
    the hidden current, h K_F sigma_i, each within 10 %: w is their variance ratio."""
    estimate, model = stage
    assert estimate.solution.converged and not estimate.at_limit and not estimate.lower_bound
    assert estimate.sigma_observation == pytest.approx(np.hypot(READING_NOISE, COUNT / np.sqrt(12)), rel=0.1)
    K_F = model.parameters.numpy_values()["K_F"]
    assert estimate.sigma_impulse == pytest.approx(H * K_F * CURRENT_NOISE, rel=0.1)


def test_the_estimated_weight_is_a_bracketed_minimum_of_the_criterion(stage):
    """No weight tried scores lower than the one chosen, and weights below and above it were tried: the minimum is
    inside the search, not at its limit; its spread is finite."""
    estimate, _ = stage
    assert min(estimate.evaluations, key=lambda e: e.criterion).weight == estimate.weight
    log_w = np.log10([e.weight for e in estimate.evaluations])
    assert log_w.min() < np.log10(estimate.weight) < log_w.max()
    assert 0 < estimate.log10_std < 0.5


def test_a_start_that_is_not_a_positive_weight_is_refused_by_name():
    model = pendulum()
    log = Log(np.arange(5) * H, np.zeros((5, 1)), np.zeros((5, 0)), model.observations, model.controls, "tiny")
    with pytest.raises(ModelError, match="start"):
        estimate_weight(model, log, start=-1.0)
