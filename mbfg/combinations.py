"""The parameter combinations the data determine and those they leave free, from a calibration's information
or covariance matrix (:func:`base_combinations`), and the delta-method standard deviation of any function of the
parameters (:func:`combination`): the numerical rank analysis behind :mod:`mbfg.identifiability`.

The combinations come from a calibration's
parameter information ``I`` (``R^T R`` of the marginal Bayes net on the parameters,
:mod:`mbfg.calibration`; finite even where a direction is exactly undetermined) or,
for results without it, its covariance ``C = I^-1``. In coordinates relative to a
scale ``s`` (``x_i = theta_i / s_i``, ``s_i = |theta_i|`` by default), ``D I D``
(``D = diag(s)``) has eigenvectors ``v_k`` and eigenvalues ``mu_k``; along ``v_k``
the relative standard deviation is ``1 / sqrt(mu_k)``. A direction is *determined*
when that is at most ``threshold`` (1 by default: the not-excited rule of Marklund et al. (2025)
section 4.6, std > value, applied to combinations).

- A determined direction is reported as the function of the parameters it
  estimates, ``c_k = w . theta`` with ``w = v_k / s`` (scaled so its largest
  magnitude is 1); these functions are uncorrelated with each other.
- An undetermined direction is reported as the direction in parameter space the
  data leave free, ``w = s * v_k``: moving the parameters along it, ``theta + t w``,
  fits as well (for an exact null space that is the regressor's null vector, whatever
  the scale, e.g. ``J - J_s`` when only ``J + J_s`` enters). It is also a function
  the data do not determine.

A parameter whose variance is infinite or NaN in a covariance without the
information (no information at all) is reported as undetermined by itself.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mbfg.errors import MbfgError

__all__ = ["Combination", "base_combinations", "combination"]


@dataclass(frozen=True)
class Combination:
    """One combination ``sum_i coefficients[i] * theta_i`` of the free parameters.

    coefficients: (n_p,) in the order of ``names`` (largest magnitude 1, the first term of the label
    positive): for a
    determined combination the function estimated, for an undetermined one the
    direction the data leave free (module docstring); value, std: the combination's
    estimate and standard deviation (units of the parameter with coefficient 1;
    inf where the data say nothing); relative_std: of the normalized direction
    (``1/sqrt(mu_k)``); determined: relative_std <= threshold.
    """

    names: tuple[str, ...]
    coefficients: np.ndarray
    value: float
    std: float
    relative_std: float
    determined: bool
    #: (n_p,) the size of each parameter (the scale s of :func:`base_combinations`), so that the label weighs
    #: terms in relative coordinates (``0.04 m2`` beside ``J1`` is not small when m2 is 0.6 kg and J1
    #: 5e-3 kg m^2); None: by coefficient
    scale: np.ndarray | None = field(default=None, repr=False, compare=False)
    #: (n_p,) which terms the label shows (None: those of at least 5 % of the largest, :func:`_term_sizes`)
    shown: np.ndarray | None = field(default=None, repr=False, compare=False)
    #: Why a direction is undetermined where the model's structure says so (:func:`mbfg.roles.structural_sums`),
    #: e.g. "M and J_r enter the motion along x only as M + J_r"; None: the data's information alone
    reason: str | None = field(default=None, compare=False)

    @property
    def label(self) -> str:
        """A readable name, e.g. ``J1 - 0.42 J2`` (terms below 5 % of the largest in relative coordinates
        are left out: :func:`_term_sizes`, unless ``shown`` says which)."""
        size = _term_sizes(self.coefficients, self.scale, self.determined)
        if self.shown is not None:
            show = np.asarray(self.shown, dtype=bool)
        elif self.determined:
            # ... and every term as weighty as the largest coefficient: a sum (M + J_r) names both of its
            # parameters, however different their sizes (M = 4e-4 kg beside J_r = 90.7 kg).
            c = np.abs(self.coefficients)
            show = (size >= 0.05 * size.max()) | (c >= (1 - 1e-6) * c.max())
        else:
            # A free direction names every parameter it moves by a share of the largest move, relative to its
            # size or in its own unit: M - J_r moves M = 4e-4 kg by far more of itself than J_r = 90.7 kg, and
            # is still a direction in both (by relative size alone the label would read 'M').
            c = np.abs(self.coefficients)
            show = (size >= 0.05 * size.max()) | (c >= 0.05 * c.max())
        parts = []
        for n, c, z in zip(self.names, self.coefficients, show):
            if not z or c == 0:
                continue
            mag = "" if abs(abs(c) - 1.0) < 5e-3 else f"{abs(c):.3g} "
            sign = "-" if c < 0 else "+"
            parts.append(f"{sign} {mag}{n}")
        text = " ".join(parts)
        return text[2:] if text.startswith("+ ") else "-" + text[2:]

    def to_dict(self) -> dict[str, Any]:
        """JSON form: label, coefficients {name: c} (every free parameter, in order), value, std, relative_std,
        determined, scale (n_p,) and shown (n_p,) where known."""
        return {"label": self.label,
                "coefficients": {n: float(c) for n, c in zip(self.names, self.coefficients)},
                "value": float(self.value), "std": float(self.std), "relative_std": float(self.relative_std),
                "determined": bool(self.determined)} | (
            {"scale": [float(x) for x in self.scale]} if self.scale is not None else {}) | (
            {"shown": [bool(x) for x in self.shown]} if self.shown is not None else {}) | (
            {"reason": self.reason} if self.reason is not None else {})

    @classmethod
    def from_dict(cls, names: Sequence[str], entry: Mapping[str, Any]) -> Combination:
        """Inverse of :meth:`to_dict` over the free parameters ``names`` (a null std is infinite, as
        strict JSON writes inf)."""
        names = tuple(names)
        coefficients = entry.get("coefficients")
        if not isinstance(coefficients, Mapping) or not set(coefficients) <= set(names):
            raise MbfgError(f"combination {entry.get('label')!r}: expected coefficients {{name: number}} over "
                            f"{', '.join(names)}, got {coefficients!r}")
        w = np.array([float(coefficients.get(n, 0.0)) for n in names])

        def number(key: str) -> float:
            v = entry.get(key)
            return float("inf") if v is None else float(v)

        scale = np.asarray(entry["scale"], dtype=float) if entry.get("scale") is not None else None
        shown = np.asarray(entry["shown"], dtype=bool) if entry.get("shown") is not None else None
        reason = entry.get("reason")
        return cls(names, w, number("value"), number("std"), number("relative_std"), bool(entry["determined"]),
                   scale, shown, str(reason) if reason is not None else None)


def _term_sizes(w: np.ndarray, scale: np.ndarray | None, determined: bool) -> np.ndarray:
    """Each term's weight in relative coordinates x = theta / s, where both are the eigenvector's |v_i|:
    of a function, what it adds (|w_i| s_i); of a free direction, the relative move (|w_i| / s_i)."""
    if scale is None:
        return np.abs(w)
    return np.abs(w) * scale if determined else np.abs(w) / scale


def _scaled_eigen(n: int, s: np.ndarray, covariance: np.ndarray | None, information: np.ndarray | None,
                  idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Eigenvectors V (m, m) of the scaled problem over the parameters ``idx`` and their information
    eigenvalues mu (m,) in the relative coordinates x = theta / s (inf: exactly known, 0: no information)."""
    D = s[idx]
    if information is not None:
        A = information[np.ix_(idx, idx)] * np.outer(D, D)
        mu, V = np.linalg.eigh(0.5 * (A + A.T))
        # Round-off of an exact null direction is ~eps of the largest eigenvalue: that is no information.
        mu = np.where(mu > mu.max(initial=0.0) * max(n, 1) * 1e3 * np.finfo(float).eps, mu, 0.0)
        return V, mu
    assert covariance is not None
    S = covariance[np.ix_(idx, idx)] / np.outer(D, D)
    lam, V = np.linalg.eigh(0.5 * (S + S.T))
    with np.errstate(divide="ignore"):
        mu = np.where(lam > 0, 1.0 / np.where(lam > 0, lam, 1.0), np.inf)
    return V, mu


def base_combinations(names: Sequence[str], values: Sequence[float], covariance: np.ndarray | None = None, *,
                      information: np.ndarray | None = None, scale: Sequence[float] | None = None,
                      threshold: float = 1.0,
                      structural: Sequence[tuple[str, str, str]] = ()) -> list[Combination]:
    """The combinations of ``names`` the data determine and those they do not, best determined first.

    Args:
        names: (n_p,) free parameter names.
        values: (n_p,) their estimates.
        covariance: (n_p, n_p) their covariance (inf/NaN variance: no information); used when
            ``information`` is not given.
        information: (n_p, n_p) their information matrix (inverse covariance, singular where a
            direction is exactly undetermined), in the parameters' inverse units squared.
        scale: (n_p,) the unit of each parameter for the normalization (default
            ``|values|``, 1 where a value is 0).
        threshold: largest relative std of a determined combination.
        structural: (a, b, why) pairs of free parameters the model's equations of motion see only as a + b
            (:func:`mbfg.roles.structural_sums`): the direction a - b is marginalized out of the information
            (what the data say of it comes from elsewhere, e.g. a body's weight on a compliant joint), so that
            a - b is reported undetermined, with ``why``, and a + b determined. Needs ``information``.

    Raises:
        MbfgError: shapes that do not match, neither matrix, or a non-positive scale.
    """
    names = tuple(names)
    theta = np.asarray(values, dtype=float)
    n = len(names)
    if covariance is None and information is None:
        raise MbfgError("base_combinations: give the covariance or the information matrix of the parameters")
    which = "information" if information is not None else "covariance"
    M = np.asarray(information if information is not None else covariance, dtype=float)
    if theta.shape != (n,) or M.shape != (n, n):
        raise MbfgError(f"base_combinations: expected values ({n},) and {which} ({n}, {n}), got "
                        f"{theta.shape} and {M.shape}")
    s = np.where(np.abs(theta) > 0, np.abs(theta), 1.0) if scale is None else np.asarray(scale, dtype=float)
    if s.shape != (n,) or not np.all(s > 0):
        raise MbfgError(f"base_combinations: scale must be ({n},) positive numbers, got {s}")
    if information is not None:
        if not np.all(np.isfinite(M)):
            raise MbfgError("base_combinations: the information matrix must be finite")
        finite = np.ones(n, dtype=bool)
    else:
        finite = np.isfinite(np.diag(M)) & np.all(np.isfinite(M), axis=1)
    out: list[Combination] = []
    idx = np.nonzero(finite)[0]
    reasons: list[tuple[np.ndarray, str]] = []  # (direction in theta, why), the structural null directions
    if structural and information is not None:
        for a, b, why in structural:
            if a in names and b in names:
                d = np.zeros(n)
                d[names.index(a)], d[names.index(b)] = 1.0, -1.0
                reasons.append((d, why))
        for d, _ in reasons:
            # What the data say along d is not trusted: t in theta + t d is marginalized as a nuisance (the Schur
            # complement I - I d d^T I / (d^T I d)), which leaves d a null vector and every function of the
            # parameters that does not move along it (a + b) with the variance it has when t is unknown.
            Id = M @ d
            dId = float(d @ Id)
            if dId > 0:
                M = M - np.outer(Id, Id) / dId
    if idx.size:
        V, mu = _scaled_eigen(n, s, None if information is not None else M, M if information is not None else None,
                              idx)
        with np.errstate(divide="ignore"):
            inv_mu = np.where(mu > 0, 1.0 / np.where(mu > 0, mu, 1.0), np.inf)
        for k in range(idx.size):
            rel = float(np.sqrt(inv_mu[k]))
            determined = rel <= threshold
            w = np.zeros(n)
            # The function it estimates (uncorrelated with the others), or the free direction in theta.
            w[idx] = V[:, k] / s[idx] if determined else V[:, k] * s[idx]
            w /= np.abs(w).max()
            # One sign whatever eigh returns: the first term of the label (>= 5 % of the largest) positive.
            size = _term_sizes(w, s, determined)
            w *= np.sign(w[np.nonzero(size >= 0.05 * size.max())[0][0]])
            # var(w . theta) = sum_j (v_j . D w)^2 / mu_j; a term with no component is 0 even where mu_j = 0.
            proj = V.T @ (s[idx] * w[idx])
            proj = np.where(np.abs(proj) > 1e-12 * np.abs(proj).max(), proj, 0.0)
            has = proj != 0
            terms = proj[has] ** 2 * inv_mu[has]
            reason: str | None = None
            if not determined:
                for d, text in reasons:  # the structural direction this free one is (up to round-off)
                    if abs(d @ w) >= (1 - 1e-6) * np.linalg.norm(d) * np.linalg.norm(w):
                        reason = text
            out.append(Combination(names, w, float(w @ theta), float(np.sqrt(terms.sum())), rel, determined, s,
                                   reason=reason))
    for i in np.nonzero(~finite)[0]:
        w = np.zeros(n)
        w[i] = 1.0
        out.append(Combination(names, w, float(theta[i]), np.inf, np.inf, False, s))
    out.sort(key=lambda c: c.relative_std)
    return out


def combination(fn: Callable[[Mapping[str, float]], float], names: Sequence[str], values: Sequence[float],
                covariance: np.ndarray | None = None, *, fixed: Mapping[str, float] | None = None,
                step: float = 1e-6, information: np.ndarray | None = None) -> tuple[float, float]:
    """``fn`` of the parameters and its standard deviation ``sqrt(g^T C g)`` (g: central differences).

    Args:
        fn: maps a name -> value dict (free ``names`` with ``values``, plus ``fixed``) to a number.
        names, values, covariance: the free parameters, as in :func:`base_combinations`.
        fixed: values of parameters ``fn`` needs that were not free.
        step: relative difference step.
        information: (n_p, n_p) instead of ``covariance`` (``CalibrationResult.information``): where the data
            leave a direction exactly free, ``fn`` is still determined if its gradient has no component along
            it, with variance ``g^T I^+ g`` (the pseudo-inverse); else its std is inf.
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
    if information is not None:
        return f(theta), _estimable_std(g, theta, np.asarray(information, dtype=float))
    if covariance is None:
        raise MbfgError("combination: give the covariance or the information matrix of the parameters")
    C = np.asarray(covariance, dtype=float)
    var = g @ C @ g
    return f(theta), float(np.sqrt(var)) if np.isfinite(var) and var >= 0 else float("inf")


def _estimable_std(g: np.ndarray, theta: np.ndarray, information: np.ndarray) -> float:
    """std of ``g . theta`` from the information: inf unless g is orthogonal to its null space (judged in
    coordinates relative to |theta|, as :func:`base_combinations`), else sqrt(g^T I^+ g)."""
    s = np.where(np.abs(theta) > 0, np.abs(theta), 1.0)
    V, mu = _scaled_eigen(theta.size, s, None, information, np.arange(theta.size))
    gx = V.T @ (g * s)  # g . theta = (s g) . x, in the eigenbasis of the scaled information
    free = mu == 0
    if np.any(np.abs(gx[free]) > 1e-9 * np.linalg.norm(gx)):
        return float("inf")
    return float(np.sqrt(np.sum(gx[~free] ** 2 / mu[~free])))
