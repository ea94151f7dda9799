"""Base (identifiable) parameter combinations against a linear regressor with a known null space:
estimable functions w^T theta are exactly those with w orthogonal to the regressor's null space,
and their variance is w^T (X^T X)^+ w (the pseudo-inverse of the exactly singular regressor)."""

from __future__ import annotations

import numpy as np
import pytest

from mbfg.errors import MbfgError
from mbfg.identifiability import base_combinations, combination


def _regressor(delta):
    rng = np.random.default_rng(0)
    x1, x2 = rng.normal(size=(2, 400))
    X_exact = np.stack([x1, x2, x1 + x2], axis=1)  # null space n = (1, 1, -1)
    X = X_exact.copy()
    X[:, 2] += delta * rng.normal(size=400)
    return X_exact, X


def test_determined_combinations_are_estimable_functions_of_the_regressor():
    X_exact, X = _regressor(1e-5)
    theta = np.array([0.5, 2.0, 3.0])
    C = np.linalg.inv(X.T @ X)  # sigma = 1
    combos = base_combinations(["a", "b", "c"], theta, C)
    determined = [c for c in combos if c.determined]
    assert len(determined) == 2 and len(combos) == 3
    n = np.array([1.0, 1.0, -1.0]) / np.sqrt(3)
    pinv = np.linalg.pinv(X_exact.T @ X_exact)
    for c in determined:
        w = c.coefficients
        assert abs(w @ n) / np.linalg.norm(w) < 1e-4  # orthogonal to the null space: estimable
        np.testing.assert_allclose(c.std, np.sqrt(w @ pinv @ w), rtol=1e-4)
        np.testing.assert_allclose(c.value, w @ theta, rtol=1e-12)
    free = [c for c in combos if not c.determined][0]
    assert abs(free.coefficients @ n) / np.linalg.norm(free.coefficients) > 0.5


def test_parameter_without_information_is_named_undetermined():
    C = np.diag([1e-4, np.inf])
    combos = base_combinations(["J1", "J2"], [1.0, 2.0], C)
    assert [c.label for c in combos if not c.determined] == ["J2"]
    assert combos[0].label == "J1" and combos[0].determined


def test_combination_std_is_the_delta_method_of_a_linear_function():
    C = np.array([[4.0, 1.0], [1.0, 9.0]])
    value, std = combination(lambda p: p["J1"] + p["m2"] * p["l1"] ** 2 + 3 * p["J2"], ["J1", "J2"], [1.0, 2.0], C,
                             fixed={"m2": 0.5, "l1": 0.2})
    np.testing.assert_allclose(value, 1.0 + 0.02 + 6.0)
    np.testing.assert_allclose(std, np.sqrt(4 + 2 * 3 + 9 * 9), rtol=1e-8)


def test_shape_mismatch_raises():
    with pytest.raises(MbfgError, match="covariance"):
        base_combinations(["a", "b"], [1.0, 2.0], np.eye(3))


def test_not_excited_flag_names_the_undetermined_combination():
    from types import SimpleNamespace

    from mbfg.identifiability import not_excited_combinations

    Rm = np.array([[1.0, 1.0], [1.0, -1.0]]) / np.sqrt(2)
    C = Rm @ np.diag([1e-8, 4.0]) @ Rm.T  # J1 + J2 known to 1e-4, J1 - J2 to 2 (values 1, 1)
    est = [SimpleNamespace(name=n, value=1.0, std=float(np.sqrt(C[i, i]))) for i, n in enumerate(["J1", "J2"])]
    result = SimpleNamespace(parameters=est, covariance=C)
    assert not_excited_combinations(result) in (["J1 - J2"], ["-J1 + J2"])
