"""Marginal covariances of a few variables (the parameters) of a whitened linear system (Marklund et al. (2025) section 3.7).

The other variables (the states) are eliminated by GTSAM's QR, leaving the marginal Bayes net on the
variables asked for, ``R x = d``; their information is ``R^T R`` and their covariance ``(R^T R)^-1``.

Gauge damping. GTSAM's QR does not pivot columns. Where the eliminated variables have a direction no factor
determines, a gauge freedom of the model (Berard and Trinkle's (2008) particle moves in x-z and is observed in x and z: its
y translation and its rotation are free), a frontal block is rank-deficient, and the QR keeps in its
conditional rows that belong to the marginal: information on the parameters is lost, at random and up to
orders of magnitude (the particle's mu, before this damping: a standard deviation of 10 in one noise draw
where the exact projection, and the spread of the estimate over 50 draws, give 3e-5). So every eliminated
variable gets a damping row, :data:`GAUGE_DAMPING` times its diagonal of J^T J (Marquardt's scaling, so it is
relative to each column); every block is then regular, and the marginal is the exact one to round-off
(``tests/test_calibration.py`` checks the particle's against a dense projection, ``tests/test_covariance.py``
a two-row system the undamped QR gets wrong; ad hoc, the particle's std did not move beyond 1e-10 relative
for dampings from 1e-32 to 1e-20). A parameter direction the data do not determine stays undetermined, its
variance infinite or huge.
"""

from __future__ import annotations

from collections.abc import Mapping

import gtsam
import numpy as np

from mbfg.lm_systems import hessian_diagonal

#: The damping of the eliminated variables, relative to their diagonal of J^T J (module docstring).
GAUGE_DAMPING = 1e-24


def parameter_covariance(graph: gtsam.NonlinearFactorGraph, values: gtsam.Values, key_list: list[int]) -> np.ndarray:
    """Marginal covariance of the variables ``key_list`` (tangent coordinates) at ``values``.

    The states are eliminated by sparse QR (the impulse chain is too stiff for a
    Cholesky factorization), leaving the marginal Bayes net on the parameters
    ``R x = d``; the covariance is (R^T R)^-1. Directions the data leave
    undetermined (singular values of R below round-off) get infinite variance:
    the parameters they involve have an infinite standard deviation (not
    excited) and NaN covariances with the others.
    """
    return marginal_covariance(graph.linearize(values), key_list)


def marginal_covariance(linear: gtsam.GaussianFactorGraph, key_list: list[int]) -> np.ndarray:
    """:func:`parameter_covariance` of a linearized graph (whitened): covariance of ``key_list``'s columns."""
    return covariance_of_r(marginal_r(linear, key_list))


def marginal_r(linear: gtsam.GaussianFactorGraph, key_list: list[int],
               diag: Mapping[int, np.ndarray] | None = None) -> np.ndarray:
    """R of the marginal Bayes net on ``key_list`` (the information is R^T R), columns in that order.

    Args:
        linear: the whitened linear system.
        key_list: the variables kept (the parameters); every other one is eliminated, with the gauge damping of
            the module docstring.
        diag: diag(J^T J) per key of ``linear`` when the caller has it (default: :func:`hessian_diagonal`).
    """
    diag = hessian_diagonal(linear) if diag is None else diag
    kept = set(key_list)
    damped = gtsam.GaussianFactorGraph()
    damped.push_back(linear)
    for key, d in diag.items():
        if key in kept:
            continue
        # The floor keeps a column no factor touches regular too.
        scale = np.sqrt(GAUGE_DAMPING * np.maximum(d, 1e-12 * max(float(d.max()), 1e-300) + 1e-30))
        damped.push_back(gtsam.JacobianFactor(key, np.diag(scale), np.zeros(d.shape[0]),
                                              gtsam.noiseModel.Unit.Create(d.shape[0])))
    bayes_net = damped.marginalMultifrontalBayesNet(gtsam.Ordering(key_list), gtsam.EliminateQR)
    R, _ = bayes_net.matrix()
    return R  # bayes_net orders its columns as key_list (the ordering we passed)


def covariance_of_r(R: np.ndarray) -> np.ndarray:
    """(R^T R)^-1, infinite along the directions R leaves undetermined (see :func:`parameter_covariance`)."""
    _, s, Vt = np.linalg.svd(R)
    determined = s > s.max(initial=0.0) * max(R.shape) * np.finfo(float).eps
    V_scaled = Vt[determined].T / s[determined]
    cov = V_scaled @ V_scaled.T
    free = np.abs(Vt[~determined]).max(axis=0, initial=0.0) > 1e-8
    if free.any():
        cov[free, :] = np.nan
        cov[:, free] = np.nan
        cov[free, free] = np.inf
    return cov
