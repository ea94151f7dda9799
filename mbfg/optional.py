"""The optional dependencies (pyproject's extras), loaded when a feature needs them.

``pip install mbfg`` installs what simulation, calibration and smoothing need. The rest comes with an extra:

- ``sweep``: Dask (``dask[distributed]``) for :func:`mbfg.sweep.sweep` and ``mbfg sweep``;
- ``urdf``: yourdfpy (with lxml and trimesh) for :func:`mbfg.urdf.load_urdf` and ``.urdf`` model files;
- ``plot``: matplotlib for the figures (:mod:`mbfg.plots`, ``--plot``).

``import mbfg`` imports none of them; :func:`require` loads one where a feature starts, so that a missing one
is said before any work, by an :class:`~mbfg.errors.MbfgError` naming the extra to install.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType

from mbfg.errors import MbfgError


@dataclass(frozen=True)
class Extra:
    """One optional dependency: ``name`` is the pyproject extra, ``package`` what a user reads it as, ``pip`` the
    distributions it installs (for a plain ``pip install``)."""

    name: str
    package: str
    pip: str


#: The extras, by the top-level module each feature imports.
EXTRAS: dict[str, Extra] = {
    "distributed": Extra("sweep", "Dask", "'dask[distributed]'"),
    "dask": Extra("sweep", "Dask", "'dask[distributed]'"),
    "yourdfpy": Extra("urdf", "yourdfpy", "yourdfpy"),
    "lxml": Extra("urdf", "yourdfpy", "yourdfpy"),
    "matplotlib": Extra("plot", "matplotlib", "matplotlib"),
}


def require(module: str, feature: str) -> ModuleType:
    """Import ``module`` (a key of :data:`EXTRAS`, or a submodule of one) for ``feature``.

    Args:
        module: the dotted module name, e.g. ``"distributed"`` or ``"matplotlib.pyplot"``.
        feature: what needs it, as the message says it, e.g. ``"mbfg sweep"`` or ``"plotting a calibration"``.

    Returns:
        The imported module.

    Raises:
        MbfgError: it is not installed (or one of its own dependencies is not): the message names the extra,
            e.g. ``mbfg sweep needs Dask: pip install 'mbfg[sweep]' (or pip install 'dask[distributed]')``.
    """
    extra = EXTRAS[module.partition(".")[0]]
    try:
        return importlib.import_module(module)
    except ImportError:
        raise MbfgError(f"{feature} needs {extra.package}: pip install 'mbfg[{extra.name}]' "
                        f"(or pip install {extra.pip})") from None
