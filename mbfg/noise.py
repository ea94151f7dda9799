"""GTSAM noise models from the sigmas mbfg's builders take: a number, per-row numbers, or a model as is."""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import gtsam
import numpy as np

from mbfg.errors import MbfgError


@functools.lru_cache(maxsize=256)
def _isotropic(dim: int, sigma: float) -> gtsam.noiseModel.Base:
    """One shared model per (dim, sigma): GTSAM's noise models are immutable and shared by pointer."""
    return gtsam.noiseModel.Isotropic.Sigma(dim, sigma)


def noise_model(sigma: float | Sequence[float] | np.ndarray | gtsam.noiseModel.Base, dim: int) -> gtsam.noiseModel.Base:
    """A GTSAM noise model from a sigma (isotropic), per-row sigmas, or a model as is."""
    if isinstance(sigma, gtsam.noiseModel.Base):
        if sigma.dim() != dim:
            raise MbfgError(f"noise model has dimension {sigma.dim()}, the residual has {dim}")
        return sigma
    if isinstance(sigma, float) and math.isfinite(sigma) and sigma > 0:
        return _isotropic(dim, sigma)  # a fixed-lag smoother asks for the same few models every step
    sigmas = np.broadcast_to(np.asarray(sigma, dtype=float), (dim,))
    if np.any(~np.isfinite(sigmas)) or np.any(sigmas <= 0):
        raise MbfgError(f"sigmas must be finite and > 0, got {sigma}")
    if np.all(sigmas == sigmas[0]):
        return gtsam.noiseModel.Isotropic.Sigma(dim, float(sigmas[0]))
    return gtsam.noiseModel.Diagonal.Sigmas(np.ascontiguousarray(sigmas))


__all__ = ["noise_model"]
