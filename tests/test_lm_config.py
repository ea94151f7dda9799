"""The solver's options as frozen objects (:class:`mbfg.LMConfig`, :class:`mbfg.CalibrationOptions`): frozen, a bad
field refused by name when the object is made, and what :func:`mbfg.calibrate` does with them on the pendulum."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from mbfg import CalibrationOptions, LMConfig, MbfgError, calibrate, calibration_lm, pendulum, simulate
from mbfg.errors import ModelError
from mbfg.graphs.joint import SMOOTH_START_ITERATIONS, build_joint_problem, solve, state_estimation_lm
from mbfg.logs import Log
from mbfg.models import particle
from mbfg.spook import unwrap_angles

FREE = ["J", "b"]


def test_lm_config_and_calibration_options_are_frozen_and_replace_changes_one_field() -> None:
    config = LMConfig()
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.max_iterations = 5  # type: ignore[misc]
    changed = dataclasses.replace(config, max_iterations=5)
    assert changed.max_iterations == 5 and config.max_iterations == 20
    assert dataclasses.replace(changed, max_iterations=20) == config  # every other field kept
    options = CalibrationOptions()
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.bias = True  # type: ignore[misc]
    assert dataclasses.replace(options, bias=True) == CalibrationOptions(bias=True)
    # One shared default instance is safe only because it cannot change: hashable, equal by value.
    assert hash(LMConfig()) == hash(config) and LMConfig() == config


@pytest.mark.parametrize(("field", "value", "needles"), [
    ("max_iterations", 0, ["LMConfig.max_iterations", "whole number >= 1", "got 0"]),
    ("max_iterations", 2.5, ["LMConfig.max_iterations", "got 2.5"]),
    ("max_iterations", True, ["LMConfig.max_iterations", "got True"]),
    ("relative_tol", -1e-3, ["LMConfig.relative_tol", ">= 0", "-0.001"]),
    ("relative_tol", float("nan"), ["LMConfig.relative_tol", "nan"]),
    ("gradient_tol", -1.0, ["LMConfig.gradient_tol", ">= 0", "-1.0"]),
    ("absolute_tol", float("inf"), ["LMConfig.absolute_tol", "inf"]),
    ("lambda_initial", 0.0, ["LMConfig.lambda_initial", "> 0", "0.0"]),
    ("lambda_max", 1e-6, ["LMConfig.lambda_max", ">= lambda_initial", "1e-06"]),
    ("damping_update", "fast", ["LMConfig.damping_update", "'tenfold' or 'nielsen'", "'fast'"]),
    ("backtracking", -1, ["LMConfig.backtracking", "whole number >= 0", "-1"]),
    ("backtracking", 0.5, ["LMConfig.backtracking", "0.5"]),
    ("time_limit_s", 0.0, ["LMConfig.time_limit_s", "seconds > 0", "0.0"]),
    ("time_limit_s", "10", ["LMConfig.time_limit_s", "'10'"]),
])
def test_a_bad_lm_config_field_is_refused_naming_it(field: str, value: object, needles: list[str]) -> None:
    with pytest.raises(MbfgError) as info:
        LMConfig(**{field: value})
    for needle in needles:
        assert needle in str(info.value), (needle, str(info.value))


@pytest.mark.parametrize(("fields", "needles"), [
    ({"smooth_start": -1}, ["CalibrationOptions.smooth_start", ">= 0", "-1"]),
    ({"soft_start": 1.0}, ["CalibrationOptions.soft_start", "factor > 1", "1.0"]),
    ({"restart_weight": 0.0}, ["CalibrationOptions.restart_weight", "positive", "0.0"]),
    ({"restart_weight": 1e3, "soft_start": 100.0}, ["soft_start and restart_weight", "one of them"]),
    ({"restart_search": 4}, ["CalibrationOptions.restart_search", "give restart_weight too"]),
    ({"bias": "yes"}, ["CalibrationOptions.bias", "True or False", "'yes'"]),
])
def test_a_bad_calibration_option_is_refused_naming_it(fields: dict, needles: list[str]) -> None:
    with pytest.raises(ModelError) as info:
        CalibrationOptions(**fields)
    for needle in needles:
        assert needle in str(info.value), (needle, str(info.value))


def test_the_model_defaults_backtrack_only_with_contacts_and_take_changes() -> None:
    assert calibration_lm(pendulum()) == LMConfig(relative_tol=1e-3)
    assert calibration_lm(particle()).backtracking == 8  # a contact: halvings across its kink
    assert calibration_lm(pendulum(), max_iterations=50) == LMConfig(max_iterations=50, relative_tol=1e-3)
    assert state_estimation_lm(pendulum()) == LMConfig(max_iterations=50)
    with pytest.raises(MbfgError, match="LMConfig.max_iterations"):
        calibration_lm(pendulum(), max_iterations=0)


@pytest.fixture(scope="module")
def short_pendulum():
    """tests/test_calibration.py's pendulum log (2 s at 1 kHz, 1e-3 rad of Gaussian noise, seed 0) and its start
    off the truth."""
    model = pendulum()
    traj = simulate(model, 2.0, 1e-3, initial=model.initial_state({"theta": 2.5}))
    y = unwrap_angles(model, traj.observations) + 1e-3 * np.random.default_rng(0).standard_normal(
        traj.observations.shape)
    log = Log(traj.t, y, np.zeros((len(traj.t), 0)), model.observations, model.controls, "synthetic")
    truth = model.parameters.numpy_values()
    start = model.with_parameters({"J": 1.25 * truth["J"], "b": 0.5 * truth["b"]})
    return model, log, start


def test_one_lm_iteration_stops_the_pendulum_calibration_not_converged(short_pendulum) -> None:
    """The LM never reports more than it proved: one linearization cannot show the point stationary."""
    _, log, start = short_pendulum
    result = calibrate(start, log, free=FREE, lm=calibration_lm(start, max_iterations=1),
                       options=CalibrationOptions(covariance=False))
    assert result.status == "not_converged" and not result.converged, result.outcome
    assert result.iterations == 1 and len(result.history) == 2  # the start and one step
    assert "iteration limit 1" in result.message


def test_calibrate_by_default_is_the_lm_of_its_former_keyword_defaults_and_finds_the_truth(short_pendulum) -> None:
    """calibrate's defaults before the options were objects: max_iterations 20, relative_tol 1e-3, the tenfold
    damping from 1e-5, no backtracking (a model without contacts), a states-only start of
    SMOOTH_START_ITERATIONS (only for dry friction), the covariance. The same solve spelled out with those values
    on the joint problem gives the same parameters, and they are the simulated truth within 2 std (as
    tests/test_calibration.py's pendulum calibration asks)."""
    model, log, start = short_pendulum
    result = calibrate(start, log, free=FREE)
    former = LMConfig(max_iterations=20, relative_tol=1e-3, damping_update="tenfold", lambda_initial=1e-5,
                      backtracking=0)
    problem = build_joint_problem(start, log, free=FREE, weight=1e6,
                                  smooth_start=LMConfig(max_iterations=SMOOTH_START_ITERATIONS))
    spelled_out = solve(problem, former)
    found = problem.parameter_values(spelled_out.values)
    assert result.status == spelled_out.status == "converged", (result.outcome, spelled_out.message)
    assert result.iterations == spelled_out.iterations
    np.testing.assert_allclose([result.values[n] for n in FREE], [float(found[n]) for n in FREE], rtol=1e-12)
    truth = model.parameters.numpy_values()
    for p in result.parameters:
        assert abs(p.value - truth[p.name]) < 2 * p.std, p
        assert p.std < 1e-2 * abs(p.value)
