"""Observation factor of a rigid-body model (Marklund et al. (2025) eq. 3.5): h(x_k; chi) - y_k.

Variables: x_k (nb Pose3 + velocity Vector) and the free parameters;
constants: the fixed parameters, the reading y_k (n_obs,) and a mask (n_obs,)
with 0 for a missing reading (it then adds neither cost nor gradient). Hinge
angles [rad] are compared modulo 2 pi, positions [m] directly.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gtsam
import numpy as np

from mbfg import keys, residuals
from mbfg.adapter import FactorType

from ._rigid import Structure, Variables, fixed_values, selected_type


def observation_type(variables: Variables) -> FactorType:
    """The observation FactorType of a model and free-parameter set (its programs are its structure's)."""
    return selected_type("observation", variables, 1, _observation, observation_program_type)


def _observation(model: Any, states: list, p: dict[str, Any], constants: tuple) -> Any:
    """The observation residual from the state x_k, every parameter's value and (y_k, mask)."""
    (x,), (y, mask) = states, constants
    return residuals.observation(model, x, p, y, mask)


def observation_program_type(structure: Structure, residual: Any) -> FactorType:
    """The observation factor type of a model structure with every parameter a variable: variables x_k, theta
    (n_s,)[, R_tilt]; constants the parameter values, y_k and the mask."""
    return FactorType(f"observation[{structure.model.name}; every parameter]", residual,
                      structure.state_kinds + structure.parameter_kinds)


def observation_keys(variables: Variables, k: int) -> list[int]:
    """Keys of the observation factor at step k."""
    nb = variables.model.nb
    return [keys.X(k, i) for i in range(nb)] + [keys.V(k)] + keys.parameter_keys(variables)


def observation_factor(
    variables: Variables, k: int, y: Sequence[float] | np.ndarray, noise: gtsam.noiseModel.Base,
    fixed: dict[str, Any] | None = None,
) -> gtsam.CustomFactor:
    """The observation factor at step k; NaN entries of y are missing readings (masked, not filled)."""
    y = np.asarray(y, dtype=float)
    mask = np.isfinite(y).astype(float)
    fixed = fixed_values(variables.model) if fixed is None else fixed
    return observation_type(variables).make(observation_keys(variables, k), noise, fixed, np.nan_to_num(y), mask)
