"""Soft equality f_eq between consecutive states (Blanco-Claraco et al. (2021) section 5.2): e = x_{t+1} - x_t.

Its weight is small next to every other factor: it only keeps the solver on
the mechanism's branch and gives it a starting point.
"""

from __future__ import annotations

import gtsam

from mbfg._jax import jnp
from mbfg.adapter import noise_model
from mbfg.factor_type import VectorVar, factor_type
from mbfg.registry import register


def soft_equality_residual(x_t: VectorVar, x_next: VectorVar) -> jnp.ndarray:
    """x_{t+1} - x_t, shape (d,)."""
    return x_next - x_t


SOFT_EQUALITY = register(factor_type(
    soft_equality_residual,
    name="soft_equality",
    example=lambda rng: ((rng.standard_normal(4), rng.standard_normal(4)), ()),
))


def soft_equality_factor(
    key_t: int, key_next: int, dim: int, sigma: float | gtsam.noiseModel.Base
) -> gtsam.CustomFactor:
    """Soft equality between Vector variables ``key_t`` and ``key_next`` of dimension ``dim``."""
    return SOFT_EQUALITY.make([key_t, key_next], noise_model(sigma, dim))
