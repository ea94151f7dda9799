"""Initial-state projection factor (Marklund et al. (2025) eqs. 3.14-3.15, scaled by the projected mass matrix 3.12-3.13).

Variables: x_0 (nb Pose3 + velocity Vector) and the free parameters;
constants: the fixed parameters and the time-step h. Residual (12 nb,)
[N s, N m s]: see :func:`mbfg.residuals.initial_state`.
"""

from __future__ import annotations

from typing import Any

import gtsam

from mbfg import keys, residuals
from mbfg.adapter import FactorType

from ._rigid import Structure, Variables, fixed_values, selected_type


def initial_state_type(variables: Variables) -> FactorType:
    """The initial-state FactorType of a model and free-parameter set (its programs are its structure's)."""
    return selected_type("initial_state", variables, 1, _initial_state, initial_state_program_type)


def _initial_state(model: Any, states: list, p: dict[str, Any], constants: tuple) -> Any:
    """The initial-state residual from the state x_0, every parameter's value and (h,)."""
    (x,), (h,) = states, constants
    return residuals.initial_state(model, x, p, h)


def initial_state_program_type(structure: Structure, residual: Any) -> FactorType:
    """The initial-state factor type of a model structure with every parameter a variable: variables x_0, theta
    (n_s,)[, R_tilt]; constants the parameter values and h."""
    return FactorType(f"initial_state[{structure.model.name}; every parameter]", residual,
                      structure.state_kinds + structure.parameter_kinds)


def initial_state_factor(
    variables: Variables, h: float, noise: gtsam.noiseModel.Base, fixed: dict[str, Any] | None = None
) -> gtsam.CustomFactor:
    """The initial-state factor on x_0 for time-step h [s]."""
    nb = variables.model.nb
    key_list = [keys.X(0, i) for i in range(nb)] + [keys.V(0)] + keys.parameter_keys(variables)
    fixed = fixed_values(variables.model) if fixed is None else fixed
    return initial_state_type(variables).make(key_list, noise, fixed, float(h))
