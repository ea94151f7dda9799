"""Hinge angles unwrapped over time, as a multi-turn encoder reads them.

The one helper that a simulated trajectory (:mod:`mbfg.spook`) and its figure (:mod:`mbfg.plots`) share;
it sits here so that each of them imports it at the top and neither imports the other for it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from mbfg.rigid import RigidModel


def unwrap_angles(model: RigidModel, observations: np.ndarray) -> np.ndarray:
    """Observations with hinge angles unwrapped over time (a multi-turn encoder's reading)."""
    obs = np.array(observations, dtype=float, copy=True)
    hinge_names = {h.name for h in model.hinges}
    for i, name in enumerate(model.observations):
        if name in hinge_names:
            obs[:, i] = np.unwrap(obs[:, i])
    return obs
