"""mbfg.graphs: builders of forward- and inverse-dynamics factor graphs (seed 003), fixed-lag smoothing of streams."""

from .forward import ForwardNoise, ForwardResult, simulate_forward
from .inverse import InverseNoise, InverseResult, load_mbse_trajectory, solve_inverse_dynamics
from .stream import StreamEstimator, StreamStatus

__all__ = [
    "ForwardNoise",
    "ForwardResult",
    "InverseNoise",
    "InverseResult",
    "load_mbse_trajectory",
    "simulate_forward",
    "solve_inverse_dynamics",
    "StreamEstimator",
    "StreamStatus",
]
