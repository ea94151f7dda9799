"""JAX set-up shared by every module: float64 everywhere."""

from __future__ import annotations

import jax

# Residuals of stiff constraints are compared at the 1e-10 level: float32 is useless.
jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402

__all__ = ["jax", "jnp"]
