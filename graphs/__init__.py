"""mbfg.graphs: builders of forward- and inverse-dynamics factor graphs (seed 003)."""

from .forward import ForwardNoise, ForwardResult, simulate_forward
from .inverse import InverseNoise, InverseResult, load_mbse_trajectory, solve_inverse_dynamics

__all__ = [
    "ForwardNoise",
    "ForwardResult",
    "InverseNoise",
    "InverseResult",
    "load_mbse_trajectory",
    "simulate_forward",
    "solve_inverse_dynamics",
]
