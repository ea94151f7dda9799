"""The smoother behind a stream's window and when it relinearizes (:class:`~mbfg.graphs.stream.StreamEstimator`'s
``smoother``, ``relinearize_threshold``, ``relinearize_skip``, ``wildfire_threshold``, ``max_iterations``).

:func:`relinearize_thresholds` gives the thresholds per kind of variable, divided for joints stiffer than
:data:`mbfg.trees.SOFT`; :func:`smoother_factory` makes the window's smoother of each kind from them: our chain
smoother (:mod:`mbfg.graphs.stream.chain`), our window over GTSAM's ``ISAM2`` (:mod:`mbfg.graphs.stream.window`),
or GTSAM's ``IncrementalFixedLagSmoother`` or ``BatchFixedLagSmoother``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import gtsam
import numpy as np

from mbfg import keys
from mbfg.graphs.restarts import soft_start_factors
from mbfg.graphs.stream.chain import ChainWindow
from mbfg.graphs.stream.config import StreamConfig
from mbfg.graphs.stream.window import ISAM2Window
from mbfg.rigid import RigidModel

__all__ = ["relinearize_thresholds", "smoother_factory", "threshold_map"]


def relinearize_thresholds(model: RigidModel, config: StreamConfig) -> dict[str, float]:
    """The relinearization threshold per kind of variable (``"pose"`` [rad, m], ``"velocity"`` [rad/s, m/s],
    ``"parameters"``) of ``config``; where the thresholds are the defaults (no ``relinearize_threshold`` given),
    the pose and velocity ones are divided by the stiffness of the model's joints relative to
    :data:`mbfg.trees.SOFT` (:func:`mbfg.graphs.restarts.soft_start_factors`): the joints' rows weigh 1/eps, and
    their linearization error over an update with them (the ``relinearize_threshold`` setting of
    :class:`~mbfg.graphs.stream.StreamEstimator` says what that buys)."""
    thresholds = dict(config.thresholds)
    stiffness = soft_start_factors(model, "auto")  # [compliance of SOFT / the model's, ...] or []
    if stiffness and config.relinearize_threshold is None:
        thresholds.update({kind: thresholds[kind] / stiffness[0] for kind in ("pose", "velocity")})
    return thresholds


def threshold_map(per_kind: Mapping[str, float], nb: int, n_refined: int) -> gtsam.ISAM2ThresholdMap:
    """iSAM2's per-symbol relinearization thresholds (one entry per key letter the window uses: poses, the
    velocity Vector of ``nb`` bodies, the ``n_refined`` refined parameters) from the thresholds per kind of
    variable."""
    dims = {"x": ("pose", 6), "v": ("velocity", 6 * nb), "p": ("parameters", max(n_refined, 1))}
    out = gtsam.ISAM2ThresholdMap()
    for letter, (kind, dim) in dims.items():
        out.insert((letter, np.full(dim, float(per_kind[kind]))))
    return out


def smoother_factory(config: StreamConfig, thresholds: Mapping[str, float], window_lag: Callable[[], float],
                     nb: int, n_refined: int) -> Callable[[], Any]:
    """A function that makes a fresh smoother of ``config.smoother_kind`` (at the stream's start and at every
    restart) whose window is ``window_lag()`` seconds long, relinearizing at ``thresholds``
    (:func:`relinearize_thresholds`); ``nb`` bodies, ``n_refined`` refined parameters (kept in the window)."""
    kind = config.smoother_kind
    if kind == "chain":
        return lambda: ChainWindow(window_lag(), thresholds["pose"], thresholds["velocity"])
    if kind in ("incremental", "gtsam-incremental"):
        params = gtsam.ISAM2Params()
        params.setRelinearizeThreshold(threshold_map(thresholds, nb, n_refined))
        params.relinearizeSkip = int(config.relinearize_skip)
        # QR: the impulse rows (sigma_p ~ 1e-3 sigma_y) make the normal equations too stiff for Cholesky.
        params.setFactorization("QR")
        # Back-substitute the whole window on every update: with iSAM2's default "wildfire" threshold
        # (1e-3) changes below it stop propagating, and the oldest (smoothed) state lags the solution.
        params.setOptimizationParams(gtsam.ISAM2GaussNewtonParams(float(config.wildfire_threshold)))
        # Reuse the slots of marginalized factors, or the factor arrays grow with the stream.
        params.findUnusedFactorSlots = True
        if kind == "incremental":
            return lambda: ISAM2Window(window_lag(), params, [keys.P()])
        return lambda: gtsam.IncrementalFixedLagSmoother(window_lag(), params)
    lm = gtsam.LevenbergMarquardtParams()
    lm.setMaxIterations(int(config.max_iterations))
    return lambda: gtsam.BatchFixedLagSmoother(window_lag(), lm)
