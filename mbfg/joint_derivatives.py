"""Joint rates and accelerations from recorded joint angles: a cubic smoothing spline per joint, differentiated.

For each joint, ``scipy.interpolate.make_smoothing_spline`` fits the cubic spline f that minimizes

    sum_k (q_k - f(t_k))^2 + lam * integral f''(t)^2 dt

(Craven and Wahba 1979); lam is chosen by generalized cross-validation unless given. The angles, rates and
accelerations returned are f, f' and f'' at the samples: f'' is continuous and piecewise linear, and its error
is largest within a few samples of either end of the log, where the spline is free (natural end conditions,
f'' = 0 there). Angle noise of size sigma becomes acceleration noise of size about sigma / h^2 in plain finite
differences at period h; the smoothing trades that noise for bias, by GCV's measure of the fit.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mbfg.errors import DataError, MbfgError


@dataclass(frozen=True)
class DerivativeOptions:
    """smoothing: the spline's lam [s^3 ... in units of t^3] (None: chosen by generalized cross-validation
    per joint); 0 interpolates the angles exactly."""

    smoothing: float | None = None

    def __post_init__(self) -> None:
        if self.smoothing is not None and not (np.isfinite(self.smoothing) and self.smoothing >= 0.0):
            raise MbfgError(f"smoothing: expected a finite number >= 0 (or None for cross-validation), got "
                            f"{self.smoothing!r}")


def joint_derivatives(t: np.ndarray, q: np.ndarray, names: tuple[str, ...] | None = None,
                      options: DerivativeOptions | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Smoothed angles, rates and accelerations (T, n) of angles ``q`` (T, n) sampled at times ``t`` (T,) [s].

    ``names`` (n,) name the columns in messages. Raises DataError naming the column and row for an angle that
    is not finite (a missing reading: the spline needs every sample), or for fewer than 5 samples.
    """
    options = options or DerivativeOptions()
    t, q = np.asarray(t, dtype=float), np.asarray(q, dtype=float)
    names = names or tuple(f"column {k}" for k in range(q.shape[1]))
    if t.ndim != 1 or q.ndim != 2 or q.shape[0] != t.size or len(names) != q.shape[1]:
        raise MbfgError(f"t, q: expected shapes (T,) and (T, {len(names)}), got {t.shape} and {q.shape}")
    if t.size < 5:
        raise DataError(f"t: {t.size} samples; a smoothing spline needs at least 5")
    bad = np.argwhere(~np.isfinite(q))
    if bad.size:
        row, col = (int(k) for k in bad[0])
        raise DataError(f"{names[col]}: row {row} (t = {float(t[row])!r} s) is empty or not finite; rates and accelerations "
                        f"need every angle: fill or cut the gap first")
    from scipy.interpolate import make_smoothing_spline

    out = np.empty((3, *q.shape))
    for k in range(q.shape[1]):
        spline = make_smoothing_spline(t, q[:, k], lam=options.smoothing)
        out[0, :, k], out[1, :, k], out[2, :, k] = spline(t), spline(t, 1), spline(t, 2)
    return out[0], out[1], out[2]


__all__ = ["DerivativeOptions", "joint_derivatives"]
