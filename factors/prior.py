"""Prior factor f_prior (Blanco-Claraco et al. (2021) eq. 21): e(x) = x - x0, and its restriction to some components."""

from __future__ import annotations

from collections.abc import Sequence

import gtsam
import numpy as np

from mbfg._jax import jnp
from mbfg.adapter import noise_model
from mbfg.errors import MbfgError
from mbfg.factor_type import Rot3Var, VectorVar, factor_type
from mbfg.registry import register


def prior_residual(x: VectorVar, x0: jnp.ndarray) -> jnp.ndarray:
    """x (d,) minus its prior value x0 (d,)."""
    return x - x0


def _example_prior(rng: np.random.Generator) -> tuple[tuple, tuple]:
    return (rng.standard_normal(4),), (rng.standard_normal(4),)


PRIOR = register(factor_type(prior_residual, name="prior", example=_example_prior))


def prior_factor(key: int, x0: np.ndarray, sigma: float | np.ndarray | gtsam.noiseModel.Base) -> gtsam.CustomFactor:
    """Prior x ~ x0 on the Vector variable ``key``; ``sigma`` in the units of x."""
    x0 = np.asarray(x0, dtype=float)
    return PRIOR.make([key], noise_model(sigma, x0.shape[0]), x0)


def partial_prior_residual(x: VectorVar, x0: jnp.ndarray, idx: jnp.ndarray) -> jnp.ndarray:
    """x[idx] (d,) minus its prior value x0 (d,): a prior on some components of x."""
    return x[idx] - x0


def _example_partial_prior(rng: np.random.Generator) -> tuple[tuple, tuple]:
    x = rng.standard_normal(5)
    return (x,), (rng.standard_normal(2), np.array([4, 1]))


PARTIAL_PRIOR = register(factor_type(partial_prior_residual, name="partial_prior", example=_example_partial_prior))


def partial_prior_factor(
    key: int, idx: Sequence[int] | np.ndarray, x0: Sequence[float] | np.ndarray,
    sigma: float | np.ndarray | gtsam.noiseModel.Base,
) -> gtsam.CustomFactor:
    """Prior x[idx] ~ x0 on the Vector variable ``key`` (the other components are free)."""
    idx = np.asarray(idx, dtype=np.int32).reshape(-1)
    x0 = np.asarray(x0, dtype=float).reshape(-1)
    if idx.shape != x0.shape:
        raise MbfgError(f"partial prior: {idx.shape[0]} indices but {x0.shape[0]} prior values")
    return PARTIAL_PRIOR.make([key], noise_model(sigma, idx.shape[0]), x0, idx)


def tilt_yaw_prior_residual(R: Rot3Var, R0: jnp.ndarray) -> jnp.ndarray:
    """(1,): the rotation of R relative to R0 about R0's z axis, sin(angle) for a rotation about z [rad].

    A gravity tilt R (gravity = R (0, 0, -g)) is blind to R Rz(phi): this pins phi only.
    """
    M = R0.T @ R
    return 0.5 * jnp.stack([M[1, 0] - M[0, 1]])


def _example_yaw(rng: np.random.Generator) -> tuple[tuple, tuple]:
    from scipy.spatial.transform import Rotation

    return (Rotation.from_rotvec(rng.normal(size=3)).as_matrix(),), (Rotation.from_rotvec(rng.normal(size=3)).as_matrix(),)


TILT_YAW_PRIOR = register(factor_type(tilt_yaw_prior_residual, name="tilt_yaw_prior", example=_example_yaw))


def tilt_yaw_prior_factor(key: int, R0: np.ndarray, sigma: float) -> gtsam.CustomFactor:
    """Prior on the Rot3 ``key``'s rotation about R0's z axis (the direction gravity cannot observe)."""
    return TILT_YAW_PRIOR.make([key], noise_model(sigma, 1), np.asarray(R0, dtype=float))
