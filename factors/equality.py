"""Soft equality f_eq between consecutive states (seed 003 section 5.2): e = x_{t+1} - x_t.

Its weight is small next to every other factor: it only keeps the solver on
the mechanism's branch and gives it a starting point.
"""

from __future__ import annotations

import gtsam

from mbfg._jax import jnp
from mbfg.adapter import VECTOR, FactorType, noise_model

from ._examples import vectors


def soft_equality_residual(x_t: jnp.ndarray, x_next: jnp.ndarray) -> jnp.ndarray:
    """x_{t+1} - x_t, shape (d,)."""
    return x_next - x_t


SOFT_EQUALITY = FactorType(
    "soft_equality",
    soft_equality_residual,
    (VECTOR, VECTOR),
    example=lambda rng: (vectors(rng, 2), ()),
)


def soft_equality_factor(
    key_t: int, key_next: int, dim: int, sigma: float | gtsam.noiseModel.Base
) -> gtsam.CustomFactor:
    """Soft equality between Vector variables ``key_t`` and ``key_next`` of dimension ``dim``."""
    return SOFT_EQUALITY.make([key_t, key_next], noise_model(sigma, dim))
