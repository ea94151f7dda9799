"""Initial-state projection factor (Marklund et al. (2025) eqs. 3.14-3.15, scaled by the projected mass matrix 3.12-3.13).

Variables: x_0 (nb Pose3 + velocity Vector) and the free parameters;
constants: the fixed parameters and the time-step h. Residual (12 nb,)
[N s, N m s]: see :func:`mbfg.residuals.initial_state`.
"""

from __future__ import annotations

import functools
from typing import Any

import gtsam
import numpy as np

from mbfg import keys, residuals
from mbfg.adapter import FactorType
from mbfg.registry import register

from ._rigid import Variables, example_model, example_step, fixed_values, state_values, variables_for


@functools.cache
def initial_state_type(variables: Variables) -> FactorType:
    """The initial-state FactorType of a model and free-parameter set."""
    model = variables.model

    def residual(*args: Any):
        (x,), ps, (fixed, h) = variables.split(args, 1)
        return residuals.initial_state(model, x, variables.parameters(ps, fixed), h)

    name = f"initial_state[{model.name}; free={','.join(variables.free)}{'; tilt' if variables.tilt_free else ''}]"
    return FactorType(name, residual, variables.state_kinds + variables.parameter_kinds)


def initial_state_factor(
    variables: Variables, h: float, noise: gtsam.noiseModel.Base, fixed: dict[str, Any] | None = None
) -> gtsam.CustomFactor:
    """The initial-state factor on x_0 for time-step h [s]."""
    nb = variables.model.nb
    key_list = [keys.X(0, i) for i in range(nb)] + [keys.V(0)] + keys.parameter_keys(variables)
    fixed = fixed_values(variables.model) if fixed is None else fixed
    return initial_state_type(variables).make(key_list, noise, fixed, float(h))


def _example(name: str, free: tuple[str, ...]):
    def example(rng: np.random.Generator):
        model = example_model(name)
        variables = variables_for(model, free)
        x0, _, _ = example_step(rng, model)
        params = [np.array([model.parameters[n].default for n in variables.free])] if variables.free else []
        return (*state_values(model, x0), *params), (fixed_values(model), 1e-3)

    return example


# Registered for the shared Jacobian battery (a copy carries the example, as for the impulse factor).
register(initial_state_type(variables_for(example_model("furuta"), ("J_Az", "b_1"))).with_example(
    _example("furuta", ("J_Az", "b_1"))))
