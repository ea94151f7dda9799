"""Spook inverse-dynamics impulse factor (Marklund et al. (2025) eqs. 3.6-3.7, multipliers from 2.30-2.31).

Variables: x_k, x_{k+1} (nb Pose3 + a velocity Vector each, see :mod:`._rigid`)
and the free parameters; constants: the fixed parameters, the control u_k and
the time-step h. Residual (12 nb,): [Delta p_u; Delta p_q] [N s, N m s], see
:func:`mbfg.residuals.impulse`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gtsam
import numpy as np

from mbfg import residuals
from mbfg.adapter import FactorType

from ._rigid import Structure, Variables, fixed_values, selected_type


def impulse_type(variables: Variables) -> FactorType:
    """The impulse FactorType of a model and free-parameter set. Its compiled programs are its model
    structure's (:func:`impulse_program_type`), shared by every free set and parameter value."""
    return selected_type("spook_impulse", variables, 2, _impulse, impulse_program_type)


def _impulse(model: Any, states: list, p: dict[str, Any], constants: tuple) -> Any:
    """The impulse residual from the states x_k, x_{k+1}, every parameter's value and (u_k, h)."""
    (x0, x1), (u, h) = states, constants
    return residuals.impulse(model, x0, x1, u, p, h)


def impulse_program_type(structure: Structure, residual: Any) -> FactorType:
    """The impulse factor type of a model structure with every parameter a variable (:class:`._rigid.Structure`):
    variables x_k, x_{k+1}, theta (n_s,)[, R_tilt]; constants the parameter values, u_k and h."""
    model = structure.model
    kinds = structure.state_kinds * 2 + structure.parameter_kinds
    # Differentiated in five passes (the poses of x_k, v_k, the poses of x_{k+1}, v_{k+1}, the
    # parameters): x_{k+1} enters only through q_{k+1} boxminus q_k and v_{k+1} only through the
    # multipliers, so their passes are cheap. About 3x less work than one joint pass, for about the
    # same compile time (``python benchmarks/impulse_cost.py``).
    nb = model.nb
    n_p = len(structure.parameter_kinds)
    groups: tuple[tuple[int, ...], ...] = (tuple(range(nb)), (nb,), tuple(range(nb + 1, 2 * nb + 1)), (2 * nb + 1,))
    groups += (tuple(range(2 * nb + 2, 2 * nb + 2 + n_p)),)
    return FactorType(f"spook_impulse[{model.name}; every parameter]", residual, kinds,
                      piecewise=model.layout.n_B > 0, jacobian_groups=groups)


def impulse_keys(variables: Variables, k: int) -> list[int]:
    """Keys of the impulse factor between steps k and k+1."""
    from mbfg import keys

    nb = variables.model.nb
    state = lambda j: [keys.X(j, i) for i in range(nb)] + [keys.V(j)]  # noqa: E731
    return state(k) + state(k + 1) + keys.parameter_keys(variables)


def impulse_factor(
    variables: Variables, k: int, u: Sequence[float] | np.ndarray, h: float, noise: gtsam.noiseModel.Base,
    fixed: dict[str, Any] | None = None,
) -> gtsam.CustomFactor:
    """The impulse factor between steps k and k+1 with control u_k [model units] and time-step h [s]."""
    fixed = fixed_values(variables.model) if fixed is None else fixed
    return impulse_type(variables).make(impulse_keys(variables, k), noise, fixed, np.asarray(u, float), float(h))
