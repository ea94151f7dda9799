"""Identifiable (base) parameter combinations of a calibration (issue 22 item 2).

Robot identification calls the combinations of parameters that the data
determine the *base* parameters (found from the regressor's QR or SVD): planar
motion, for instance, determines a link's inertia about its joint (``J1 + m1 r1^2
+ m2 l1^2``) but not how it splits into its terms, and a rotor inertia behind a
joint adds to the link's. Here the combinations come from the calibration's parameter information or, for
results without it, its covariance (:func:`result_combinations`), by the eigen-analysis in coordinates relative
to the parameters' sizes of :mod:`mbfg.combinations` (:func:`~mbfg.combinations.base_combinations`): a direction
is *determined* when its relative standard deviation is at most ``threshold`` (1 by default: the not-excited rule
of Marklund et al. (2025) section 4.6, std > value, applied to combinations). A determined direction is
reported as the function of the parameters it estimates, an undetermined one as the direction in parameter space
the data leave free (:class:`~mbfg.combinations.Combination`).

:func:`combinations_table`, :func:`combinations_json` and :func:`combinations_dataframe` report them in a
calibration's table, JSON and DataFrame.

:func:`base_parameters` writes the determined functions as base parameters, one
named parameter plus a combination of the others held (``J + J_s``), as
identification by QR with column pivoting does, and maps them back to named
parameters where a user fixes the rest. :func:`combination` estimates any
differentiable function of the free parameters with its delta-method standard
deviation.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from mbfg.combinations import Combination, base_combinations, combination
from mbfg.errors import MbfgError

if TYPE_CHECKING:
    import pandas as pd

    from mbfg.calibration import CalibrationResult

#: A fixed value given to :func:`base_parameters`: the value, or (value, standard deviation).
FixedValue = float | tuple[float, float]

__all__ = ["BaseParameters", "Combination", "FixedValue", "base_combinations", "base_parameters", "combination",
           "combinations_dataframe", "combinations_json", "combinations_table", "not_excited_combinations",
           "result_combinations"]


def result_combinations(result: CalibrationResult, *, threshold: float = 1.0) -> list[Combination]:
    """:func:`base_combinations` of a :class:`mbfg.calibration.CalibrationResult` (from its information
    matrix where it has one, else its covariance)."""
    names = [p.name for p in result.parameters]
    values = [p.value for p in result.parameters]
    scale = [_scale_of(p, _start_value(result, p.name)) for p in result.parameters]
    information = getattr(result, "information", None)
    if information is None and np.all(np.isnan(result.covariance)):
        return []  # CalibrationOptions(covariance=False): nothing is known about the directions
    if information is not None:
        model = getattr(getattr(result, "problem", None), "model", None) or getattr(result, "model", None)
        from mbfg.roles import structural_sums

        structural = structural_sums(model) if model is not None and hasattr(model, "axial") else []
        return base_combinations(names, values, information=information, scale=scale, threshold=threshold,
                                 structural=structural)
    return base_combinations(names, values, result.covariance, scale=scale, threshold=threshold)


def _start_value(result: Any, name: str) -> float:
    """The value ``name`` started the calibration from (the problem's model), NaN where unknown."""
    model = getattr(getattr(result, "problem", None), "model", None)
    if model is None or name not in model.parameters or np.ndim(model.parameters[name].default) != 0:
        return float("nan")
    return float(model.parameters[name].default)


def _scale_of(p: Any, start: float) -> float:
    """The unit a parameter's precision is judged in: its value; where that says nothing of its size (zero,
    or on a bound such as J >= 1e-9, where the optimum lies outside the box) the value it started from;
    without one, its value, or at zero (as calibration's singular values) its std, else 1."""
    if (p.value == 0 or getattr(p, "at_bound", False)) and np.isfinite(start) and start != 0:
        return abs(start)
    if p.value != 0:
        return abs(p.value)
    return p.std if np.isfinite(p.std) and p.std > 0 else 1.0


def not_excited_combinations(result: CalibrationResult, *, threshold: float = 1.0) -> list[str]:
    """Labels of the combinations the data do not determine (the not-excited flag, by combination)."""
    return [c.label for c in result_combinations(result, threshold=threshold) if not c.determined]


def combinations_table(combos: Sequence[Combination]) -> list[str]:
    """Lines for a calibration's table: nothing when the data determine every direction, else the
    undetermined combinations and the determined ones written as base parameters (:func:`base_parameters`)."""
    if all(c.determined for c in combos):
        return []
    lines = [f"not determined by the data: {c.label}" + (f"  ({c.reason}: moving along it fits as well)"
                                                          if c.reason is not None else
                                                          f"  (relative std {c.relative_std:.2g})"
                                                          if np.isfinite(c.relative_std) else "  (no information)")
             for c in combos if not c.determined]
    if any(c.determined for c in combos):
        base = base_parameters(combos)
        held = ", ".join(base.fixed)
        lines.append(f"determined by the data (base parameters; {held} held at the estimate):")
        lines += [f"  {c.label} = {c.value:.6g} +- {c.std:.3g}" for c in base.base]
    return lines


def combinations_json(combos: Sequence[Combination]) -> dict[str, Any]:
    """The JSON entries of a calibration result (``CalibrationResult.to_dict``): "combinations" (every
    direction, :meth:`Combination.to_dict`; what :func:`base_parameters` reads back), "not_determined" (their
    labels), "base_parameters" (the determined ones in base form, value and std) and "base_held" (the parameters
    the base form holds at the estimate)."""
    base = base_parameters(list(combos)) if combos else None
    return {"combinations": [c.to_dict() for c in combos],
            "not_determined": [c.label for c in combos if not c.determined],
            "base_parameters": [c.to_dict() for c in base.base] if base else [],
            "base_held": list(base.fixed) if base else []}


def combinations_dataframe(combos: Sequence[Combination]) -> pd.DataFrame:
    """pandas DataFrame indexed by combination label: value, std, relative_std, determined, and one
    coefficient column per free parameter."""
    import pandas as pd

    rows = [dict(combination=c.label, value=c.value, std=c.std, relative_std=c.relative_std,
                 determined=c.determined, **{n: float(w) for n, w in zip(c.names, c.coefficients)}) for c in combos]
    return pd.DataFrame(rows).set_index("combination")


# ----------------------------------------------------------------------------- base parameters


@dataclass(frozen=True)
class BaseParameters:
    """What :func:`base_parameters` returns.

    names: (n_p,) the free parameters; values, std: (n_p,) the named parameters implied by the determined
    combinations and the held ones (a held one: its given value and std, 0 unless given); covariance:
    (n_p, n_p) of ``values``; fixed: name -> value of the held parameters; base: the determined combinations
    as base parameters (coefficient 1 on one parameter that is not held, others only on held ones), with
    their values and stds; base_covariance: (k, k) of those; undetermined: the directions the data leave free.
    """

    names: tuple[str, ...]
    values: np.ndarray
    std: np.ndarray
    covariance: np.ndarray
    fixed: dict[str, float]
    base: list[Combination]
    base_covariance: np.ndarray
    undetermined: list[Combination] = field(default_factory=list)

    @property
    def parameters(self) -> dict[str, tuple[float, float]]:
        """name -> (value, std)."""
        return {n: (float(v), float(s)) for n, v, s in zip(self.names, self.values, self.std)}

    def table(self) -> str:
        """Printable: the base parameters, then the named parameters they imply ('held' for the fixed ones)."""
        lines = ["base parameter" + " " * 26 + f"{'value':>13} {'std':>11}"]
        lines += [f"{c.label:<40}{c.value:>13.6g} {c.std:>11.3g}" for c in self.base]
        lines.append(f"{'parameter':<40}{'value':>13} {'std':>11}")
        for n, v, s in zip(self.names, self.values, self.std):
            lines.append(f"{n:<40}{v:>13.6g} {s:>11.3g}" + ("  held" if n in self.fixed else ""))
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        """JSON form: {"base": [combination...], "parameters": {name: {"value", "std", "held"}}}."""
        return {"base": [c.to_dict() for c in self.base],
                "parameters": {n: {"value": float(v), "std": float(s), "held": n in self.fixed}
                               for n, v, s in zip(self.names, self.values, self.std)}}


def _combinations_of(source: Any, threshold: float) -> list[Combination]:
    """The combinations of a result, a list of them, a result's JSON object, or the path of its file."""
    if isinstance(source, (str, os.PathLike)):
        try:
            with open(source, encoding="utf-8") as fh:
                source = json.load(fh)
        except (OSError, ValueError) as exc:
            raise MbfgError(f"{os.fspath(source)}: cannot read a calibration result ({exc})") from None
    if isinstance(source, Mapping):
        if "combinations" not in source:
            raise MbfgError("the calibration result has no 'combinations' (written by an mbfg before they were "
                            "reported); calibrate again to get them")
        entries = source["combinations"]
        if not entries:
            return []
        names = list(entries[0].get("coefficients") or {})  # every free parameter, in order (to_dict)
        return [Combination.from_dict(names, e) for e in entries]
    if isinstance(source, Sequence) and all(isinstance(c, Combination) for c in source):
        return list(source)
    if hasattr(source, "parameters") and hasattr(source, "covariance"):
        return result_combinations(source, threshold=threshold)
    raise MbfgError(f"base_parameters: expected a CalibrationResult, its combinations, its JSON object or file, "
                    f"got {type(source).__name__}")


def _held(fix: Mapping[str, FixedValue], names: tuple[str, ...]) -> dict[str, tuple[float, float]]:
    held: dict[str, tuple[float, float]] = {}
    for name, given in fix.items():
        if name not in names:
            raise MbfgError(f"fix: {name!r} is not a free parameter of the calibration ({', '.join(names)})")
        value, std = (given if isinstance(given, tuple) else (given, 0.0))
        if not (np.isfinite(value) and np.isfinite(std) and std >= 0):
            raise MbfgError(f"fix[{name!r}]: expected a finite value or (value, std >= 0), got {given!r}")
        held[name] = (float(value), float(std))
    return held


def base_parameters(source: Any, fix: Mapping[str, FixedValue] | None = None, *,
                    threshold: float = 1.0) -> BaseParameters:
    """The determined combinations as base parameters, and the named parameters they imply with ``fix``.

    With k determined combinations ``W theta = c`` (W (k, n_p), c with their stds, uncorrelated) of
    n_p free parameters, holding n_p - k of them (``fix``) leaves ``W_R theta_R = c - W_F theta_F`` for the
    others: solved exactly when square, by generalized least squares (weights 1/std^2) when more are held
    than needed. Standard deviations are propagated to first order:
    ``cov theta_R = G (diag(std_c^2) + W_F cov_F W_F^T) G^T``, ``G`` the solve's matrix. The mapping is linear
    in the parameters about the estimate: exact where they enter the combinations linearly (an inertia and a
    rotor inertia behind the same joint, frictions); for geometry (``m2 l1^2``) it is first order, and a
    calibration with the held parameters fixed refines it.

    Args:
        source: a :class:`~mbfg.calibration.CalibrationResult`, its combinations
            (:func:`result_combinations`), its JSON object (``to_dict``, ``mbfg calibrate --out``) or that file.
        fix: free parameter -> value (or (value, std)) to hold; default: the parameters chosen by QR with
            column pivoting of the scaled combinations (the least independent ones), held at the estimate.
        threshold: largest relative std of a determined combination (:func:`base_combinations`).

    Returns:
        :class:`BaseParameters` (values, std in the parameters' units).

    Raises:
        MbfgError: a name in ``fix`` that is not a free parameter, or a ``fix`` that leaves a direction
            the data do not determine free (the message names the combination and what to hold).
    """
    import scipy.linalg

    combos = _combinations_of(source, threshold)
    if not combos:
        raise MbfgError("base_parameters: no combinations to map (a calibration without free parameters, or "
                        "one run with covariance=False)")
    names = combos[0].names
    n = len(names)
    det = [c for c in combos if c.determined]
    free_dirs = [c for c in combos if not c.determined]
    W = np.array([c.coefficients for c in det]).reshape(len(det), n)
    c = np.array([x.value for x in det])
    var_c = np.array([x.std**2 for x in det])
    theta_hat = _estimate(combos, W, c)
    if fix is None:
        # QR with column pivoting on the scaled rows picks the k most independent parameters as the base.
        s = combos[0].scale if combos[0].scale is not None else np.where(np.abs(theta_hat) > 0, np.abs(theta_hat),
                                                                          1.0)
        if det:
            _, _, piv = scipy.linalg.qr(W * s, pivoting=True)
            base_idx = sorted(piv[: len(det)])
        else:
            base_idx = []
        held = {names[i]: (float(theta_hat[i]), 0.0) for i in range(n) if i not in base_idx}
    else:
        held = _held(fix, names)
    F = [i for i in range(n) if names[i] in held]
    R = [i for i in range(n) if names[i] not in held]
    theta_F = np.array([held[names[i]][0] for i in F])
    cov_F = np.diag([held[names[i]][1] ** 2 for i in F])
    W_R, W_F = W[:, R], W[:, F]
    _check_solvable(W_R, [names[i] for i in R], names, free_dirs, len(det))
    if len(R) == len(det):
        G = np.linalg.inv(W_R) if R else np.zeros((0, 0))
    else:
        # More held than needed: GLS, G = (W_R^T S^-1 W_R)^-1 W_R^T S^-1 with S = diag(var_c) (scaled by its
        # largest entry, and a zero variance floored, so that the weights stay finite).
        top = max(float(var_c.max(initial=0.0)), np.finfo(float).tiny)
        Sinv = np.diag(top / np.maximum(var_c, top * 1e-30))
        G = np.linalg.solve(W_R.T @ Sinv @ W_R, W_R.T @ Sinv) if R else np.zeros((0, len(det)))
    theta = np.zeros(n)
    theta[F] = theta_F
    theta[R] = G @ (c - W_F @ theta_F)
    # d theta_R / d theta_F = -G W_F: the held values' uncertainty travels with them.
    T = np.zeros((n, len(det) + len(F)))
    T[R, : len(det)] = G
    T[np.ix_(R, range(len(det), len(det) + len(F)))] = -G @ W_F
    T[F, len(det):] = np.eye(len(F))
    cov_in = scipy.linalg.block_diag(np.diag(var_c), cov_F)
    cov = T @ cov_in @ T.T
    std = np.sqrt(np.clip(np.diag(cov), 0.0, None))
    # The combinations' own scale (a value on its bound is judged by its start, :func:`result_combinations`).
    size = combos[0].scale if combos[0].scale is not None else np.where(np.abs(theta) > 0, np.abs(theta), 1.0)
    base, base_cov = _base_form(W, c, var_c, R, names, size) if len(R) == len(det) else ([], np.zeros((0, 0)))
    return BaseParameters(names, theta, std, cov, {names[i]: held[names[i]][0] for i in F}, base, base_cov,
                          free_dirs)


def _estimate(combos: list[Combination], W: np.ndarray, c: np.ndarray) -> np.ndarray:
    """The estimate theta (n_p,) behind the combinations: the determined values plus the undetermined
    directions' values (W and the free directions together span R^n_p)."""
    A = np.vstack([W] + [x.coefficients[None, :] for x in combos if not x.determined])
    b = np.concatenate([c, [x.value for x in combos if not x.determined]])
    return np.linalg.lstsq(A, b, rcond=None)[0]


def _check_solvable(W_R: np.ndarray, rest: list[str], names: tuple[str, ...], free_dirs: list[Combination],
                    k: int) -> None:
    """MbfgError where the held parameters leave a combination of the others undetermined."""
    if not rest:
        return
    sv = np.linalg.svd(W_R, compute_uv=False) if k else np.zeros(0)
    rank = int(np.sum(sv > sv.max(initial=0.0) * max(W_R.shape) * 1e-10)) if sv.size else 0
    if rank == len(rest):
        return
    _, _, Vt = np.linalg.svd(W_R) if k else (None, None, np.eye(len(rest)))
    null = Vt[rank:]
    involved = [rest[j] for j in range(len(rest)) if np.abs(null[:, j]).max() > 1e-6]
    undetermined = "; ".join(x.label for x in free_dirs) or "none"
    raise MbfgError(f"base_parameters: the data determine {k} combination(s) of the {len(names)} free parameters, "
                    f"so {len(names) - k} must be held; with these held, {', '.join(involved)} remain undetermined: "
                    f"hold {len(rest) - rank} more of them (not determined by the data: {undetermined})")


def _base_form(W: np.ndarray, c: np.ndarray, var_c: np.ndarray, R: list[int], names: tuple[str, ...],
               size: np.ndarray) -> tuple[list[Combination], np.ndarray]:
    """The determined rows in base form ``theta_r + sum_f K_rf theta_f`` (k square): ``T = W_R^-1``,
    ``beta = T c``, ``cov beta = T diag(var_c) T^T``."""
    T = np.linalg.inv(W[:, R])
    B = T @ W  # identity on R, K on F
    B[:, R] = np.eye(len(R))
    beta = T @ c
    cov = T @ np.diag(var_c) @ T.T
    std = np.sqrt(np.clip(np.diag(cov), 0.0, None))
    # A base parameter's label shows its own parameter and every held one that moves its value by a tenth of
    # its std or more (a relative cut-off would hide 0.04 J1 in a combination known to 1e-4).
    # A held one that enters with the base parameter's own coefficient is shown whatever it moves: a sum.
    shown = [((np.abs(B[i]) * size >= 0.1 * std[i]) & (np.abs(B[i]) > 1e-12)) | (np.arange(len(names)) == R[i])
             | (np.abs(np.abs(B[i]) - 1.0) < 1e-6) for i in range(len(R))]
    return [Combination(names, B[i], float(beta[i]), float(std[i]), float(std[i] / abs(beta[i])) if beta[i] else
                        float("inf"), True, size, shown[i]) for i in range(len(R))], cov

