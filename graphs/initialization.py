"""The initial states of the joint estimation (:mod:`mbfg.graphs.joint`) from a log's readings.

Initialization (Marklund et al. (2025) section 4.4): each observed channel is low-pass
filtered by a second-order Butterworth filter run forward and backward
(missing readings are interpolated for the filter only), then sampled at the
state times; configurations are placed through the joints at the filtered
angles (zero constraint violation); velocities are finite differences (4.3),
``v_k = (q_k boxminus q_{k-1}) / h``, which is the Spook update (2.16) read backwards.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from mbfg import quaternion as quat
from mbfg.rigid import RigidModel, State, poses_from_coordinates

__all__ = ["butterworth2", "filtered_observations", "filtfilt", "initial_states"]


def filtered_observations(t: np.ndarray, y: np.ndarray, cutoff_hz: float) -> np.ndarray:
    """Second-order Butterworth low-pass, forward and backward (Marklund et al. (2025) section 4.4), per column.

    Missing readings (NaN) are linearly interpolated for the filter only. A
    cut-off at or above the Nyquist frequency leaves the signal as it is.
    """
    y = np.array(y, dtype=float, copy=True)
    for j in range(y.shape[1]):
        missing = np.isnan(y[:, j])
        if missing.any():
            y[missing, j] = np.interp(t[missing], t[~missing], y[~missing, j])
    fs = 1.0 / float(np.median(np.diff(t)))
    if cutoff_hz >= 0.5 * fs or len(t) < 16:
        return y
    b, a = butterworth2(cutoff_hz / (0.5 * fs))
    # filtfilt's default odd extension (6 samples) is far shorter than the filter's transient,
    # which left the first and last states off by up to tens of mrad on a swinging pendulum and
    # the LM then spent its iterations bending the ends of the trajectory (a strongly nonlinear
    # correction). Three cut-off periods of extension let the transient die out before the data.
    padlen = min(len(t) - 1, int(np.ceil(3.0 * fs / cutoff_hz)))
    return filtfilt(b, a, y, padlen)


# The second-order Butterworth filter in closed form rather than from scipy.signal: importing
# scipy.signal takes over a second (``python -X importtime -c "import scipy.signal"``; it builds the
# docstrings of its array-API wrappers), a large part of a second run's start-up of ``mbfg calibrate``
# (``python benchmarks/startup.py``). tests/test_calibration.py checks both
# functions against scipy.signal's butter and filtfilt.

def butterworth2(wn: float) -> tuple[np.ndarray, np.ndarray]:
    """``scipy.signal.butter(2, wn)``: (b (3,), a (3,)) of the digital second-order Butterworth low-pass
    with the cut-off at ``wn`` times the Nyquist frequency (0 < wn < 1), by the bilinear transform."""
    k = np.tan(0.5 * np.pi * wn)  # the prewarped analog cut-off
    norm = 1.0 / (1.0 + np.sqrt(2.0) * k + k * k)
    b0 = k * k * norm
    return (np.array([b0, 2.0 * b0, b0]),
            np.array([1.0, 2.0 * (k * k - 1.0) * norm, (1.0 - np.sqrt(2.0) * k + k * k) * norm]))


def _lfilter2(b: np.ndarray, a: np.ndarray, x: np.ndarray, z: np.ndarray) -> np.ndarray:
    """``scipy.signal.lfilter(b, a, x, axis=0, zi=z)[0]`` for a second-order section (a[0] = 1), x (n, m),
    z (2, m): direct form II transposed, per column on Python floats (faster than NumPy per sample)."""
    b0, b1, b2 = (float(v) for v in b)
    a1, a2 = float(a[1]), float(a[2])
    out = np.empty_like(x)
    for j in range(x.shape[1]):
        z0, z1 = float(z[0, j]), float(z[1, j])
        column = []
        for xi in x[:, j].tolist():
            yi = b0 * xi + z0
            z0 = b1 * xi - a1 * yi + z1
            z1 = b2 * xi - a2 * yi
            column.append(yi)
        out[:, j] = column
    return out


def filtfilt(b: np.ndarray, a: np.ndarray, x: np.ndarray, padlen: int) -> np.ndarray:
    """``scipy.signal.filtfilt(b, a, x, axis=0, padlen=padlen)`` for a second-order section: zero phase,
    odd extension of ``padlen`` samples at both ends, each pass started in the steady state of its
    first sample (``lfilter_zi``). x: (n, m) with n > padlen."""
    ext = np.concatenate([2.0 * x[:1] - x[padlen:0:-1], x, 2.0 * x[-1:] - x[-2 : -padlen - 2 : -1]])
    # lfilter_zi: the state of a unit step's steady response, (I - A^T) zi = b[1:] - a[1:] b[0].
    companion = np.array([[-a[1], 1.0], [-a[2], 0.0]])
    zi = np.linalg.solve(np.eye(2) - companion, b[1:] - a[1:] * b[0])
    forward = _lfilter2(b, a, ext, zi[:, None] * ext[0])
    backward = _lfilter2(b, a, forward[::-1], zi[:, None] * forward[-1])[::-1]
    return backward[padlen : len(backward) - padlen]


def initial_states(model: RigidModel, y: np.ndarray, h: float, parameters: Mapping[str, Any]) -> list[State]:
    """States at zero constraint violation matching readings y (n, n_obs), velocities by eq. 4.3
    (NumPy arrays)."""
    hinges = {j.name for j in model.axial}  # hinge angles and slider displacements
    y = np.asarray(y, dtype=float)
    n = len(y)
    r, e = poses_from_coordinates(model, {name: y[:, i] for i, name in enumerate(model.observations)
                                          if name in hinges}, parameters, n=n)
    for i, name in enumerate(model.observations):
        if name not in hinges:  # a CoM coordinate "body.x"
            body, _, axis = name.rpartition(".")
            r[:, model.body_index[body], "xyz".index(axis)] = y[:, i]
    if n < 2:
        return [State(r[k], e[k], np.zeros((model.nb, 3)), np.zeros((model.nb, 3))) for k in range(n)]
    # Backward differences, the first state's forward: state k's velocity takes it from k-1 to k.
    prev = np.concatenate([[0], np.arange(n - 1)])
    nxt = np.concatenate([[1], np.arange(1, n)])
    v = (r[nxt] - r[prev]) / h
    w = quat.boxminus_np(e[nxt], e[prev]) / h
    return [State(r[k], e[k], v[k], w[k]) for k in range(n)]
