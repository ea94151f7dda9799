"""Marginal covariances with a gauge freedom among the eliminated variables (mbfg.covariance)."""

from __future__ import annotations

import gtsam
import numpy as np
import pytest

from mbfg import covariance


def _graph_with_a_free_state_direction() -> gtsam.GaussianFactorGraph:
    """A state x (2,) and a parameter p (1,): two readings x[1] + p = 1 and x[1] - p = -1, nothing on x[0].

    x[0] is a gauge freedom (no factor sees it); x[1] and p are determined, p with information 2 (the readings'
    difference over 2 p). Keys: x = 1, p = 2."""
    unit = gtsam.noiseModel.Unit.Create(1)
    linear = gtsam.GaussianFactorGraph()
    linear.push_back(gtsam.JacobianFactor(1, np.array([[0.0, 1.0]]), 2, np.array([[1.0]]), np.array([1.0]), unit))
    linear.push_back(gtsam.JacobianFactor(1, np.array([[0.0, 1.0]]), 2, np.array([[-1.0]]), np.array([-1.0]), unit))
    return linear


def test_section_3_7_marginal_of_the_parameters_is_the_schur_complement_despite_a_free_state_direction(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The parameter's variance is 1 / 2, the inverse of its information once the states are projected out
    (dense: a^T (I - P_S) a), although x[0] is free; without the gauge damping GTSAM's QR (no column pivoting)
    keeps both rows in the conditional of x and reports p undetermined."""
    linear = _graph_with_a_free_state_direction()
    A, _ = linear.jacobian(gtsam.Ordering([1, 2]))
    S, a = A[:, :2], A[:, 2]
    U, s, _ = np.linalg.svd(S, full_matrices=False)
    U = U[:, s > 1e-12 * s.max()]
    exact_information = float(a @ a - (U.T @ a) @ (U.T @ a))
    assert exact_information == pytest.approx(2.0)
    np.testing.assert_allclose(covariance.marginal_covariance(linear, [2]), [[1 / exact_information]], rtol=1e-9)

    monkeypatch.setattr(covariance, "GAUGE_DAMPING", 0.0)
    assert np.isinf(covariance.marginal_covariance(linear, [2])[0, 0])  # the loss the damping prevents


def test_the_gauge_damping_leaves_an_undetermined_parameter_undetermined() -> None:
    """A parameter the factors see only together with a state (x[1] + p, and nothing else) has no information
    of its own: its variance stays infinite or at least 1e20 times the determined one's."""
    unit = gtsam.noiseModel.Unit.Create(1)
    linear = gtsam.GaussianFactorGraph()
    linear.push_back(gtsam.JacobianFactor(1, np.array([[1.0, 1.0]]), 2, np.array([[1.0]]), np.array([1.0]), unit))
    variance = covariance.marginal_covariance(linear, [2])[0, 0]
    assert variance > 1e20 or np.isinf(variance)
