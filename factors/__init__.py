"""mbfg.factors: one module per residual type of Blanco-Claraco et al. (2021).

Each module holds a pure JAX residual, its :class:`mbfg.adapter.FactorType`
(declared with :func:`mbfg.factor_type.factor_type` from the residual's annotated
variables, or built per model) and a function that builds the GTSAM factor. A type
that needs no model is registered for the Jacobian battery next to its declaration
(:func:`mbfg.registry.register`, with an example that builds its instances when
called); the types built per model are registered by :mod:`mbfg.testing`, on its
example models: importing these modules builds no model.
"""

from .constraints import (
    independent_acceleration_factor,
    independent_position_factor,
    independent_velocity_factor,
    position_factor,
    velocity_factor,
)
from .dynamics import (
    forward_dynamics_factor,
    forward_dynamics_independent_factor,
    inverse_dynamics_factor,
    inverse_dynamics_independent_factor,
)
from .equality import soft_equality_factor
from .integrators import euler_factor, trapezoidal_factor
from .prior import partial_prior_factor, prior_factor

__all__ = [
    "euler_factor",
    "forward_dynamics_factor",
    "forward_dynamics_independent_factor",
    "independent_acceleration_factor",
    "independent_position_factor",
    "independent_velocity_factor",
    "inverse_dynamics_factor",
    "inverse_dynamics_independent_factor",
    "partial_prior_factor",
    "position_factor",
    "prior_factor",
    "soft_equality_factor",
    "trapezoidal_factor",
    "velocity_factor",
]
