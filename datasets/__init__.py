"""mbfg.datasets: built-in mechanisms and small generated data.

Built-in mechanisms are MBSE YAML files shipped with the package (see
:func:`builtin_mechanisms` for the list); load one by name with
:func:`load_mechanism`, which also accepts a path to any MBSE YAML file::

    from mbfg.datasets import load_mechanism
    mech = load_mechanism("fourbar")        # or load_mechanism("my/linkage.yaml")
    mech.coordinate_names                   # ('x1', 'y1', 'x2', 'y2')

Units are SI throughout (m, kg, kg m^2, rad, s).

Real rig recordings (``shared/data``) are read by :mod:`mbfg.datasets.rigs`:
:func:`load_dfki_double_pendulum`, :func:`load_qube` (logs in the built-in
models' conventions; never resampled), :func:`resample_uniform`,
:func:`find_gaps`, :func:`dfki_reference_parameters`, :func:`dfki_to_mbfg_parameters`.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from mbfg.datasets.rigs import (
    dfki_reference_parameters,
    dfki_to_mbfg_parameters,
    find_gaps,
    load_dfki_double_pendulum,
    load_qube,
    resample_uniform,
)
from mbfg.errors import ModelError
from mbfg.mbse_yaml import load_mbse_yaml
from mbfg.planar import PlanarMechanism

__all__ = [
    "builtin_mechanisms",
    "dfki_reference_parameters",
    "dfki_to_mbfg_parameters",
    "find_gaps",
    "fourbar_crank_trajectory",
    "load_dfki_double_pendulum",
    "load_mechanism",
    "load_qube",
    "mechanism_path",
    "resample_uniform",
]

_HERE = Path(__file__).resolve().parent

_MECHANISMS: dict[str, str] = {
    "fourbar": (
        "four-bar linkage (crank-rocker): links 1, 2, sqrt(13) m, masses 1, 2, 4 kg, "
        "fixed pivots (0,0) and (4,0); q = [x1 y1 x2 y2]"
    ),
    "fourbar-crank": (
        "the same four-bar plus the crank angle theta1 as a coordinate (impose it for inverse dynamics)"
    ),
    "pendulum": "simple pendulum: uniform bar 2 m, 5 kg, released at rest 45 degrees above the horizontal",
    "parallelogram": (
        "parallelogram linkage with a redundant third crank (1 dof, constraint rows of rank 6 of 7 at every pose): "
        "cranks 1 m, 1, 1.5, 0.5 kg, coupler triangle 3 kg; q = [x1 y1 x2 y2 x3 y3 theta1] (impose theta1)"
    ),
}


def builtin_mechanisms() -> dict[str, str]:
    """Names of the built-in mechanisms -> one-line descriptions."""
    return dict(_MECHANISMS)


def mechanism_path(name: str) -> Path:
    """Path of the YAML file of built-in mechanism ``name``.

    Raises:
        ModelError: ``name`` is not a built-in mechanism (the message lists them).
    """
    if name not in _MECHANISMS:
        raise ModelError(f"unknown built-in mechanism {name!r}; built-in mechanisms: {', '.join(_MECHANISMS)}")
    return _HERE / f"{name}.yaml"


def load_mechanism(name_or_path: str | os.PathLike[str]) -> PlanarMechanism:
    """A built-in mechanism by name, or any MBSE YAML file by path.

    A name of a built-in mechanism wins over a file of the same name in the
    current folder; write ``./fourbar`` to load such a file.

    Raises:
        ModelError: neither a built-in name nor an existing file (the message
            lists the built-in names), or a malformed YAML file (the message
            names the file and the entry).
    """
    text = os.fspath(name_or_path)
    if isinstance(name_or_path, str) and text in _MECHANISMS:
        return load_mbse_yaml(mechanism_path(text), name=text)
    if Path(text).is_file():
        return load_mbse_yaml(text)
    raise ModelError(
        f"{text}: mechanism file not found, and not a built-in mechanism "
        f"(built-in mechanisms: {', '.join(_MECHANISMS)})"
    )


def fourbar_crank_trajectory(duration: float = 10.0, dt: float = 0.005) -> tuple[np.ndarray, np.ndarray]:
    """Prescribed crank motion of the four-bar inverse-dynamics example.

    theta(t) = 1.2 (1 - cos 2t) [rad], sampled at t = 0, dt, ... < duration [s]
    (the defaults give 2000 samples, t = 0 .. 9.995 s). Use it with the
    ``fourbar-crank`` mechanism, imposing ``theta1``.

    Returns:
        t (N,) [s] and theta (N,) [rad].
    """
    if not (np.isfinite(dt) and dt > 0 and np.isfinite(duration) and duration > 0):
        raise ModelError(f"fourbar_crank_trajectory: dt and duration must be > 0 s, got dt={dt}, duration={duration}")
    n = int(np.floor(duration / dt + 1e-9))
    t = dt * np.arange(max(n, 1))
    return t, 1.2 * (1.0 - np.cos(2.0 * t))
