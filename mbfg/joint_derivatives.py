"""Joint rates and accelerations from recorded joint angles: a cubic smoothing spline per joint, differentiated.

For each joint, ``scipy.interpolate.make_smoothing_spline`` fits the cubic spline f that minimizes

    sum_k (q_k - f(t_k))^2 + lam * integral f''(t)^2 dt

(Craven and Wahba 1979); lam is chosen by generalized cross-validation unless given. The angles, rates and
accelerations returned are f, f' and f'' at the samples: f'' is continuous and piecewise linear, and its error
is largest within a few samples of either end of the log, where the spline is free (natural end conditions,
f'' = 0 there). Angle noise of size sigma becomes acceleration noise of size about sigma / h^2 in plain finite
differences at period h; the smoothing trades that noise for bias, by GCV's measure of the fit.

GCV measures the fit of the angles, not of their second derivative: it leaves accelerations noisier than an
identification wants (noise in the regressor biases least squares: errors in variables). The method of most
identification papers is the other option (``cutoff``): a zero-phase Butterworth low-pass of order 4 (scipy's
``sosfiltfilt``, second-order sections; the log extended by odd reflection over 5 / cutoff seconds at each end)
and second-order central differences of the filtered angles (``numpy.gradient``; one-sided at the ends), on a
uniform grid. A cutoff a few times the highest frequency of the motion keeps the motion and removes most of the
noise; the filter's start-up biases the first and last 2.5 / cutoff seconds or so.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mbfg.errors import DataError, MbfgError


@dataclass(frozen=True)
class DerivativeOptions:
    """smoothing: the spline's lam [s^3 ... in units of t^3] (None: chosen by generalized cross-validation
    per joint); 0 interpolates the angles exactly. cutoff: [Hz] when given, the Butterworth low-pass and central
    differences (module docstring) instead of the spline."""

    smoothing: float | None = None
    cutoff: float | None = None

    def __post_init__(self) -> None:
        if self.smoothing is not None and not (np.isfinite(self.smoothing) and self.smoothing >= 0.0):
            raise MbfgError(f"smoothing: expected a finite number >= 0 (or None for cross-validation), got "
                            f"{self.smoothing!r}")
        if self.cutoff is not None and not (np.isfinite(self.cutoff) and self.cutoff > 0.0):
            raise MbfgError(f"cutoff: expected a finite frequency > 0 [Hz], got {self.cutoff!r}")
        if self.cutoff is not None and self.smoothing is not None:
            raise MbfgError("smoothing, cutoff: expected one of them (the spline's penalty or the low-pass filter's "
                            "cutoff), got both")


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
    if options.cutoff is not None:
        return _filtered_differences(t, q, options.cutoff)
    from scipy.interpolate import make_smoothing_spline

    out = np.empty((3, *q.shape))
    for k in range(q.shape[1]):
        spline = make_smoothing_spline(t, q[:, k], lam=options.smoothing)
        out[0, :, k], out[1, :, k], out[2, :, k] = spline(t), spline(t, 1), spline(t, 2)
    return out[0], out[1], out[2]


def _filtered_differences(t: np.ndarray, q: np.ndarray, cutoff: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The Butterworth low-pass of ``q`` (T, n) at ``cutoff`` [Hz] and its central differences (module docstring)."""
    import scipy.signal

    dt = np.diff(t)
    h = float(np.median(dt))
    uneven = np.flatnonzero(np.abs(dt - h) > 1e-6 * h)
    if uneven.size:
        i = int(uneven[0])
        raise DataError(f"t: t[{i + 1}] - t[{i}] = {dt[i]:.6g} s, the median step is {h:.6g} s; a low-pass filter "
                        f"needs a uniform grid")
    nyquist = 0.5 / h
    if cutoff >= nyquist:
        raise DataError(f"cutoff: {cutoff:g} Hz; expected a frequency below the log's Nyquist frequency {nyquist:g} Hz")
    sos = scipy.signal.butter(4, cutoff / nyquist, output="sos")
    pad = min(len(t) - 1, int(np.ceil(5.0 / (cutoff * h))))
    qf = scipy.signal.sosfiltfilt(sos, q, axis=0, padlen=pad)
    qd = np.gradient(qf, h, axis=0)
    return qf, qd, np.gradient(qd, h, axis=0)


__all__ = ["DerivativeOptions", "joint_derivatives"]
