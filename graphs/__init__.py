"""mbfg.graphs: builders of forward- and inverse-dynamics factor graphs (Blanco-Claraco et al. 2021), joint
state-parameter estimation, fixed-lag smoothing of streams, receding-horizon control.

The names below load their module on first use (PEP 562): ``import mbfg.graphs.joint`` for a calibration
then does not import the planar builders, SciPy and pandas with them (half a second of every command's
start-up).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the names __getattr__ loads, for type checkers (F401: __all__ is built from _HOMES)
    from .forward import ForwardNoise, ForwardResult, simulate_forward  # noqa: F401
    from .inverse import InverseNoise, InverseResult, load_mbse_trajectory, solve_inverse_dynamics  # noqa: F401
    from .stream import StreamEstimator, StreamStatus  # noqa: F401

#: public name -> the submodule that defines it
_HOMES = {
    "ForwardNoise": "forward",
    "ForwardResult": "forward",
    "simulate_forward": "forward",
    "InverseNoise": "inverse",
    "InverseResult": "inverse",
    "load_mbse_trajectory": "inverse",
    "solve_inverse_dynamics": "inverse",
    "StreamEstimator": "stream",
    "StreamStatus": "stream",
}

__all__ = list(_HOMES)


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_HOMES[name]}", __name__), name)
    globals()[name] = value  # found directly from now on
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
