"""The arguments of :func:`mbfg.calibration.calibrate`, checked before anything is built.

A wrong type used to fail as an AttributeError deep inside, and a string ``free`` was split into
characters; each check raises :class:`~mbfg.errors.ModelError` or :class:`~mbfg.errors.DataError`
naming the argument.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from mbfg.errors import DataError, ModelError
from mbfg.logs import Log
from mbfg.parameters import free_names
from mbfg.rigid import RigidModel


def positive(name: str, value: Any, what: str = "a positive number") -> float:
    """``value`` as a float > 0 and finite; ModelError naming the argument ``name`` otherwise."""
    ok = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))
    if not (ok and np.isfinite(value) and value > 0):
        raise ModelError(f"{name}: expected {what}, got {value!r}")
    return float(value)


def whole(name: str, value: Any, minimum: int) -> int:
    """``value`` as an int >= ``minimum``; ModelError naming the argument ``name`` otherwise."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ModelError(f"{name}: expected a whole number >= {minimum}, got {value!r}")
    return int(value)


def check_calibrate_arguments(model: Any, log: Any, free: Any, h: Any, weight: Any, max_iterations: Any,
                              relative_tol: Any, damping_update: Any, priors: Any, cutoff_hz: Any, smooth_start: Any,
                              restart_weight: Any = None, soft_start: Any = None,
                              restart_search: Any = 0, backtracking: Any = None) -> list[str] | None:
    """:func:`~mbfg.calibration.calibrate`'s arguments checked; the free parameter names as a list."""
    if not isinstance(model, RigidModel):
        raise ModelError(f"model: expected a RigidModel (e.g. mbfg.pendulum() or mbfg.load_model('pendulum')), "
                         f"got {type(model).__name__}")
    if not isinstance(log, Log):
        raise DataError(f"log: expected an mbfg.logs.Log (mbfg.logs.read_log(path, observations={model.observations}"
                        f", controls={model.controls}) or Trajectory.to_log()), got {type(log).__name__}")
    names = None if free is None else free_names(model.parameters, free, "free")
    if h is not None:
        positive("h", h, "a positive time-step in seconds (or None: the log's sample period)")
    if weight is not None:
        positive("weight", weight, "a positive state error weight (or None: the model's, model.weight)")
    whole("max_iterations", max_iterations, 1)
    if backtracking is not None:
        whole("backtracking", backtracking, 0)
    positive("relative_tol", relative_tol)
    if damping_update not in ("tenfold", "nielsen"):
        raise ModelError(f"damping_update: expected 'tenfold' or 'nielsen', got {damping_update!r}")
    if priors is not None:
        if not isinstance(priors, Mapping):
            raise ModelError(f"priors: expected a mapping of parameter names to prior sigmas, e.g. {{'J': 1e-4}}, "
                             f"got {type(priors).__name__}")
        for name, sigma in priors.items():
            if name not in model.parameters:
                raise ModelError(f"priors: unknown parameter {name!r}; known parameters: "
                                 f"{', '.join(model.parameters)}")
            positive(f"priors[{name!r}]", sigma, "a positive prior sigma")
    if cutoff_hz is not None:
        positive("cutoff_hz", cutoff_hz, "a positive frequency in Hz (or None: the default)")
    if smooth_start is not None:
        whole("smooth_start", smooth_start, 0)
    if restart_weight is not None:
        positive("restart_weight", restart_weight, "a positive state error weight (or None: no restart)")
    if soft_start is not None and not positive("soft_start", soft_start, "a factor > 1 (or None: none)") > 1:
        raise ModelError(f"soft_start: expected a factor > 1 (or None: none), got {soft_start!r}")
    if soft_start is not None and restart_weight is not None:
        raise ModelError("soft_start and restart_weight: give one of them; each starts a second solve")
    if whole("restart_search", restart_search, 0):
        if restart_weight is None:
            raise ModelError("restart_search: a search picks the starts of a restart; give restart_weight too")
        unbounded = model.parameters.unbounded(model.parameters.free if names is None else names)
        if unbounded:
            name, par = unbounded[0], model.parameters[unbounded[0]]
            raise ModelError(f"restart_search: free parameter {name!r} has the bounds [{par.lower}, {par.upper}]"
                             f"; a search samples the free parameters' bounds, so each needs finite ones "
                             f"(set them in a parameter file, or search without it)")
    return names
