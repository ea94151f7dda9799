"""Identifiable (base) parameter combinations of a calibration (issue: real rigs).

Robot identification calls the combinations of parameters that the data
determine the *base* parameters (found from the regressor's QR or SVD). Here
they come from the calibration's parameter covariance ``C`` (the parameter block
of the inverse information matrix, :mod:`mbfg.calibration`): in coordinates
relative to a scale ``s`` (``x_i = theta_i / s_i``, ``s_i = |theta_i|`` by
default), ``S = diag(1/s) C diag(1/s)`` has eigenvectors ``v_k`` and eigenvalues
``lambda_k``; the combination ``c_k = sum_i v_ki theta_i / s_i`` has relative
standard deviation ``sqrt(lambda_k)``. A combination is *determined* when that is
at most ``threshold`` (1 by default: the not-excited rule of seed 001 section 4.6,
std > value, applied to combinations); the others span what the data leave free.
A parameter whose variance is infinite or NaN (no information at all) is
reported as undetermined by itself.

:func:`combination` estimates any differentiable function of the free
parameters (e.g. ``I1 + m2 l1^2``) with its delta-method standard deviation.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from mbfg.errors import MbfgError

if TYPE_CHECKING:
    from mbfg.calibration import CalibrationResult


@dataclass(frozen=True)
class Combination:
    """One combination ``sum_i coefficients[i] * theta_i`` of the free parameters.

    coefficients: (n_p,) in the order of ``names`` (largest magnitude 1);
    value, std: the combination's estimate and standard deviation (units of the
    parameter with coefficient 1); relative_std: std / |value| of the
    normalized direction (sqrt of the eigenvalue); determined: relative_std <= threshold.
    """

    names: tuple[str, ...]
    coefficients: np.ndarray
    value: float
    std: float
    relative_std: float
    determined: bool

    @property
    def label(self) -> str:
        """A readable name, e.g. ``J1 - 0.42 J2`` (terms below 5 % of the largest are left out)."""
        parts = []
        for n, c in zip(self.names, self.coefficients):
            if abs(c) < 0.05:
                continue
            mag = "" if abs(abs(c) - 1.0) < 5e-3 else f"{abs(c):.3g} "
            sign = "-" if c < 0 else "+"
            parts.append(f"{sign} {mag}{n}")
        text = " ".join(parts)
        return text[2:] if text.startswith("+ ") else "-" + text[2:]


def base_combinations(names: Sequence[str], values: Sequence[float], covariance: np.ndarray, *,
                      scale: Sequence[float] | None = None, threshold: float = 1.0) -> list[Combination]:
    """The combinations of ``names`` the data determine and those they do not, best determined first.

    Args:
        names: (n_p,) free parameter names.
        values: (n_p,) their estimates.
        covariance: (n_p, n_p) their covariance (inf/NaN variance: no information).
        scale: (n_p,) the unit of each parameter for the normalization (default
            ``|values|``, 1 where a value is 0).
        threshold: largest relative std of a determined combination.

    Raises:
        MbfgError: shapes that do not match, or a non-positive scale.
    """
    names = tuple(names)
    theta = np.asarray(values, dtype=float)
    C = np.asarray(covariance, dtype=float)
    n = len(names)
    if theta.shape != (n,) or C.shape != (n, n):
        raise MbfgError(f"base_combinations: expected values ({n},) and covariance ({n}, {n}), got "
                        f"{theta.shape} and {C.shape}")
    s = np.where(np.abs(theta) > 0, np.abs(theta), 1.0) if scale is None else np.asarray(scale, dtype=float)
    if s.shape != (n,) or not np.all(s > 0):
        raise MbfgError(f"base_combinations: scale must be ({n},) positive numbers, got {s}")
    finite = np.isfinite(np.diag(C)) & np.all(np.isfinite(C), axis=1)
    out: list[Combination] = []
    idx = np.nonzero(finite)[0]
    if idx.size:
        S = C[np.ix_(idx, idx)] / np.outer(s[idx], s[idx])
        lam, V = np.linalg.eigh(0.5 * (S + S.T))
        for k in range(idx.size):
            w = np.zeros(n)
            w[idx] = V[:, k] / s[idx]  # physical coefficients of theta
            w /= np.abs(w).max()
            value = float(w @ theta)
            wi, Ci = w[idx], C[np.ix_(idx, idx)]
            std = float(np.sqrt(max(wi @ Ci @ wi, 0.0)))
            rel = float(np.sqrt(max(lam[k], 0.0)))
            out.append(Combination(names, w, value, std, rel, rel <= threshold))
    for i in np.nonzero(~finite)[0]:
        w = np.zeros(n)
        w[i] = 1.0
        out.append(Combination(names, w, float(theta[i]), np.inf, np.inf, False))
    out.sort(key=lambda c: c.relative_std)
    return out


def result_combinations(result: CalibrationResult, *, threshold: float = 1.0) -> list[Combination]:
    """:func:`base_combinations` of a :class:`mbfg.calibration.CalibrationResult`."""
    names = [p.name for p in result.parameters]
    values = [p.value for p in result.parameters]
    # As calibration's singular values: a parameter at zero (e.g. on its bound) is scaled by its std.
    scale = [abs(p.value) if p.value != 0 else (p.std if np.isfinite(p.std) and p.std > 0 else 1.0)
             for p in result.parameters]
    return base_combinations(names, values, result.covariance, scale=scale, threshold=threshold)


def not_excited_combinations(result: CalibrationResult, *, threshold: float = 1.0) -> list[str]:
    """Labels of the combinations the data do not determine (the not-excited flag, by combination)."""
    return [c.label for c in result_combinations(result, threshold=threshold) if not c.determined]


def combination(fn: Callable[[Mapping[str, float]], float], names: Sequence[str], values: Sequence[float],
                covariance: np.ndarray, *, fixed: Mapping[str, float] | None = None,
                step: float = 1e-6) -> tuple[float, float]:
    """``fn`` of the parameters and its standard deviation ``sqrt(g^T C g)`` (g: central differences).

    Args:
        fn: maps a name -> value dict (free ``names`` with ``values``, plus ``fixed``) to a number.
        names, values, covariance: the free parameters, as in :func:`base_combinations`.
        fixed: values of parameters ``fn`` needs that were not free.
        step: relative difference step.
    """
    theta = np.asarray(values, dtype=float)
    base = dict(fixed or {})

    def f(x: np.ndarray) -> float:
        return float(fn({**base, **dict(zip(names, x))}))

    g = np.zeros(theta.size)
    for i in range(theta.size):
        d = step * max(abs(theta[i]), 1e-12)
        e = np.zeros(theta.size)
        e[i] = d
        g[i] = (f(theta + e) - f(theta - e)) / (2 * d)
    C = np.asarray(covariance, dtype=float)
    var = g @ C @ g
    return f(theta), float(np.sqrt(var)) if np.isfinite(var) and var >= 0 else float("inf")
