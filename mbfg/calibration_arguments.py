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


def check_calibrate_arguments(model: Any, log: Any, free: Any, h: Any, weight: Any, priors: Any, cutoff_hz: Any,
                              lm: Any, options: Any) -> list[str] | None:
    """:func:`~mbfg.calibration.calibrate`'s arguments checked; the free parameter names as a list. The fields of
    ``lm`` and ``options`` were checked when they were made; here their types, and a restart search's bounds."""
    from mbfg.calibration_options import CalibrationOptions
    from mbfg.lm_config import LMConfig

    if not isinstance(model, RigidModel):
        raise ModelError(f"model: expected a RigidModel (e.g. mbfg.pendulum() or mbfg.load_model('pendulum')), "
                         f"got {type(model).__name__}")
    if not isinstance(log, Log):
        raise DataError(f"log: expected an mbfg.logs.Log (mbfg.logs.read_log(path, observations={model.observations}"
                        f", controls={model.controls}) or Trajectory.to_log()), got {type(log).__name__}")
    if lm is not None and not isinstance(lm, LMConfig):
        raise ModelError(f"lm: expected an mbfg.LMConfig (e.g. LMConfig(max_iterations=50)) or None (the model's "
                         f"default, calibration_lm(model)), got {type(lm).__name__}")
    if not isinstance(options, CalibrationOptions):
        raise ModelError(f"options: expected an mbfg.CalibrationOptions (e.g. CalibrationOptions(bias=True)), "
                         f"got {type(options).__name__}")
    names = None if free is None else free_names(model.parameters, free, "free")
    if h is not None:
        positive("h", h, "a positive time-step in seconds (or None: the log's sample period)")
    if weight is not None:
        positive("weight", weight, "a positive state error weight (or None: the model's, model.weight)")
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
    if options.restart_search:
        unbounded = model.parameters.unbounded(model.parameters.free if names is None else names)
        if unbounded:
            name, par = unbounded[0], model.parameters[unbounded[0]]
            raise ModelError(f"CalibrationOptions.restart_search: free parameter {name!r} has the bounds "
                             f"[{par.lower}, {par.upper}]; a search samples the free parameters' bounds, so each needs finite ones "
                             f"(set them in a parameter file, or search without it)")
    return names
