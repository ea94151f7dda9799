"""Programs keyed by the model's structure: a second free set, a second weight, new parameter values or another
model instance of the same structure run the programs the first calibration compiled (:mod:`mbfg.selected`).

Counted with JAX's own compile events (``jax.monitoring``): a jit's cache miss traces a Python function to a
jaxpr (``/jax/core/compile/jaxpr_trace_duration``), and a program not found in the persistent compilation cache
is compiled by XLA (``/jax/core/compile/backend_compile_duration``). Once the first calibration has run, a
calibration that differs from it in data only (the free set, the weight, the parameter values) must do neither.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import jax
import numpy as np
import pytest

from mbfg import pendulum, simulate
from mbfg.calibration import calibrate
from mbfg.calibration_options import CalibrationOptions
from mbfg.graphs.joint import cross_validation
from mbfg.logs import Log

#: JAX's events for a trace (a jit cache miss) and an XLA compile (a persistent cache miss).
EVENTS = ("/jax/core/compile/jaxpr_trace_duration", "/jax/core/compile/backend_compile_duration")
_counting: list[list[str]] = []


def _listener(event: str, duration: float, **_: Any) -> None:
    if event in EVENTS:
        for record in _counting:
            record.append(event)


jax.monitoring.register_event_duration_secs_listener(_listener)


@contextmanager
def compiles() -> Iterator[list[str]]:
    """The trace and compile events while the block runs."""
    record: list[str] = []
    _counting.append(record)
    try:
        yield record
    finally:
        _counting.remove(record)


def _log(model: Any, theta0: float, seed: int) -> Log:
    """0.3 s of the pendulum from theta0 at 1 ms, encoder noise 1e-3 rad."""
    trajectory = simulate(model, 0.3, 1e-3, initial=model.initial_state({"theta": theta0}))
    return trajectory.to_log(noise=1e-3, seed=seed)


@pytest.fixture(scope="module")
def warm() -> tuple[Any, Log, Log]:
    """The built-in pendulum, a log of a rig with other J and b and a second log, after one calibration of J
    and b and one cross-validation: every program the calibrations below need has been compiled once."""
    model = pendulum()
    rig = model.with_parameters({"J": 0.002, "b": 0.004})
    log, other = _log(rig, 2.5, 1), _log(rig, 1.0, 2)
    result = calibrate(model, log, free=["J", "b"], options=CalibrationOptions(covariance=False, bias=False))
    cross_validation(model, other, result.values, free=["J", "b"])
    return model, log, other


def _no_compiles(run: Callable[[], Any]) -> Any:
    with compiles() as events:
        out = run()
    traced, compiled = events.count(EVENTS[0]), events.count(EVENTS[1])
    assert (traced, compiled) == (0, 0), f"{traced} traces and {compiled} XLA compiles, expected none"
    return out


def test_second_free_set_compiles_nothing(warm: tuple[Any, Log, Log]) -> None:
    """b alone, from a model whose J is the rig's: the free set and the values differ from the first calibration's."""
    model, log, _ = warm
    start = model.with_parameters({"J": 0.002})
    result = _no_compiles(lambda: calibrate(start, log, free=["b"],
                                            options=CalibrationOptions(covariance=False, bias=False)))
    assert result.converged and np.isclose(result.values["b"], 0.004, rtol=0.1)


def test_second_weight_compiles_nothing(warm: tuple[Any, Log, Log]) -> None:
    model, log, _ = warm
    result = _no_compiles(lambda: calibrate(model, log, free=["J", "b"], weight=1e4,
                                            options=CalibrationOptions(covariance=False, bias=False)))
    assert result.converged


def test_new_parameter_values_compile_nothing(warm: tuple[Any, Log, Log]) -> None:
    """Another model instance with other values (a new start) calibrates and cross-validates on the programs."""
    model, log, other = warm
    start = model.with_parameters({"J": 0.0025, "b": 0.001})
    result = _no_compiles(lambda: calibrate(start, log, free=["J", "b"],
                                            options=CalibrationOptions(covariance=False, bias=False)))
    assert result.converged and np.isclose(result.values["J"], 0.002, rtol=0.05)
    score, state_estimation = _no_compiles(lambda: cross_validation(start, other, result.values, free=["J"]))
    assert state_estimation.converged and np.isfinite(score)


def test_same_structure_shares_programs_other_structure_does_not(warm: tuple[Any, Log, Log]) -> None:
    """The key is the structure: the same joints with other values share the impulse program type, a model with
    another observation layout gets its own."""
    from mbfg.factors._rigid import variables_for
    from mbfg.factors.impulse import impulse_type

    model, _, _ = warm
    copy = model.with_parameters({"m": 0.3})
    assert impulse_type(variables_for(model, ["J"])).program is impulse_type(variables_for(copy, ["b", "J"])).program
    from mbfg.models import furuta

    assert impulse_type(variables_for(furuta(), ["K"])).program is not impulse_type(variables_for(model, ["J"])).program


def test_simulating_another_instance_of_the_same_structure_compiles_nothing() -> None:
    """simulate's chunk program takes the parameters as an argument: a model with other values (with_parameters)
    and another duration run the program the first simulation compiled, and give that model's motion."""
    model = pendulum()
    first = simulate(model, 0.05, 1e-3, initial=model.initial_state({"theta": 1.0}))
    other = model.with_parameters({"J": 2.0 * float(model.parameters.numpy_values()["J"])})
    second = _no_compiles(lambda: simulate(other, 0.08, 1e-3, initial=other.initial_state({"theta": 1.0})))
    # A doubled inertia swings more slowly: the programs ran with the new value, not the first model's.
    assert abs(second.observations[49, 0] - 1.0) < abs(first.observations[49, 0] - 1.0)
