"""Numerical integration factors (Blanco-Claraco et al. (2021) eqs. 22-23).

Euler:        e = x_{t+1} - x_t - dt xdot_t
Trapezoidal:  e = x_{t+1} - x_t - dt/2 (xdot_t + xdot_{t+1})

Used twice per step: velocities into positions, accelerations into velocities.
"""

from __future__ import annotations

import gtsam

from mbfg._jax import jnp
from mbfg.adapter import noise_model
from mbfg.factor_type import VectorVar, factor_type
from mbfg.registry import register


def euler_residual(x_t: VectorVar, x_next: VectorVar, xdot_t: VectorVar, dt: jnp.ndarray) -> jnp.ndarray:
    """Eq. (22); all vectors (d,), dt [s]."""
    return x_next - x_t - dt * xdot_t


def trapezoidal_residual(
    x_t: VectorVar, x_next: VectorVar, xdot_t: VectorVar, xdot_next: VectorVar, dt: jnp.ndarray
) -> jnp.ndarray:
    """Eq. (23); all vectors (d,), dt [s]."""
    return x_next - x_t - 0.5 * dt * (xdot_t + xdot_next)


# The residuals stay plain functions (public names); their annotations give the variable kinds.
EULER = register(factor_type(
    euler_residual,
    name="euler_integrator",
    example=lambda rng: (tuple(rng.standard_normal((3, 4))), (rng.uniform(1e-3, 1e-1),)),
))

TRAPEZOIDAL = register(factor_type(
    trapezoidal_residual,
    name="trapezoidal_integrator",
    example=lambda rng: (tuple(rng.standard_normal((4, 4))), (rng.uniform(1e-3, 1e-1),)),
))


def euler_factor(
    key_x_t: int, key_x_next: int, key_xdot_t: int, dt: float, dim: int, sigma: float | gtsam.noiseModel.Base
) -> gtsam.CustomFactor:
    """Euler integrator between Vector variables of dimension ``dim``; dt [s]."""
    return EULER.make([key_x_t, key_x_next, key_xdot_t], noise_model(sigma, dim), float(dt))


def trapezoidal_factor(
    key_x_t: int,
    key_x_next: int,
    key_xdot_t: int,
    key_xdot_next: int,
    dt: float,
    dim: int,
    sigma: float | gtsam.noiseModel.Base,
) -> gtsam.CustomFactor:
    """Trapezoidal integrator between Vector variables of dimension ``dim``; dt [s]."""
    return TRAPEZOIDAL.make([key_x_t, key_x_next, key_xdot_t, key_xdot_next], noise_model(sigma, dim), float(dt))
