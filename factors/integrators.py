"""Numerical integration factors (seed 003 eqs. 22-23).

Euler:        e = x_{t+1} - x_t - dt xdot_t
Trapezoidal:  e = x_{t+1} - x_t - dt/2 (xdot_t + xdot_{t+1})

Used twice per step: velocities into positions, accelerations into velocities.
"""

from __future__ import annotations

import gtsam

from mbfg._jax import jnp
from mbfg.adapter import VECTOR, FactorType, noise_model

from ._examples import vectors


def euler_residual(x_t: jnp.ndarray, x_next: jnp.ndarray, xdot_t: jnp.ndarray, dt: jnp.ndarray) -> jnp.ndarray:
    """Eq. (22); all vectors (d,), dt [s]."""
    return x_next - x_t - dt * xdot_t


def trapezoidal_residual(
    x_t: jnp.ndarray, x_next: jnp.ndarray, xdot_t: jnp.ndarray, xdot_next: jnp.ndarray, dt: jnp.ndarray
) -> jnp.ndarray:
    """Eq. (23); all vectors (d,), dt [s]."""
    return x_next - x_t - 0.5 * dt * (xdot_t + xdot_next)


EULER = FactorType(
    "euler_integrator",
    euler_residual,
    (VECTOR,) * 3,
    example=lambda rng: (vectors(rng, 3), (rng.uniform(1e-3, 1e-1),)),
)

TRAPEZOIDAL = FactorType(
    "trapezoidal_integrator",
    trapezoidal_residual,
    (VECTOR,) * 4,
    example=lambda rng: (vectors(rng, 4), (rng.uniform(1e-3, 1e-1),)),
)


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
