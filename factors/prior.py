"""Prior factor f_prior (seed 003 eq. 21): e(x) = x - x0."""

from __future__ import annotations

import gtsam
import numpy as np

from mbfg._jax import jnp
from mbfg.adapter import VECTOR, FactorType, noise_model

from ._examples import vectors


def prior_residual(x: jnp.ndarray, x0: jnp.ndarray) -> jnp.ndarray:
    """x (d,) minus its prior value x0 (d,)."""
    return x - x0


PRIOR = FactorType(
    "prior",
    prior_residual,
    (VECTOR,),
    example=lambda rng: (vectors(rng, 1), vectors(rng, 1)),
)


def prior_factor(key: int, x0: np.ndarray, sigma: float | np.ndarray | gtsam.noiseModel.Base) -> gtsam.CustomFactor:
    """Prior x ~ x0 on the Vector variable ``key``; ``sigma`` in the units of x."""
    x0 = np.asarray(x0, dtype=float)
    return PRIOR.make([key], noise_model(sigma, x0.shape[0]), x0)
