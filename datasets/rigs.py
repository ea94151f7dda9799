"""Loaders for the real rig recordings in ``shared/data`` (DFKI double pendulum, Quanser QUBE-Servo).

Each loader reads the lab's own CSV as published and returns a :class:`mbfg.logs.Log`
in this package's conventions (``t`` from 0 [s], hinge angles [rad] named as the
built-in models' observations, controls named as the models' controls)::

    from mbfg.datasets.rigs import load_dfki_double_pendulum, load_qube, resample_uniform
    log = load_dfki_double_pendulum("shared/data/dfki_double_pendulum/trajectory_00.csv")
    log.observations, log.controls          # ('q1', 'q2'), ('tau1', 'tau2')
    uniform = resample_uniform(log, 0.002)  # explicit: loaders never resample

Rules shared by the loaders (the same as :func:`mbfg.logs.read_log`'s):

- A needed column that is absent raises :class:`~mbfg.errors.DataError` naming the
  file and the column and listing the columns the file has. Other columns are ignored.
- An empty cell in an observation column is a missing reading and becomes NaN
  (never filled in). An empty cell in the time or a control column, ``nan``/``inf``
  written as text in any needed column, or a non-numeric cell raises
  :class:`DataError` naming the file, the row (1-based data row and line number)
  and the column. Times must be strictly increasing.
- **Loaders never resample.** The returned times are the file's own, shifted to
  start at 0. The DFKI files are *not* uniformly sampled (see
  :func:`load_dfki_double_pendulum`); :func:`find_gaps` lists their long intervals
  and :func:`resample_uniform` puts a log on a uniform grid when a caller asks.

What the data show (checked on the two published files of each rig):

- DFKI: 500 Hz nominal, but the period is 2.0001 ms (the timestamps are float32-like),
  the first 5 intervals are 3.1-3.6 ms (start-up) and later intervals of 2.5-8.4 ms
  (a sample or more missing) occur: 10 intervals longer than 2.02 ms in
  trajectory_00 (15 ms lost in all), 20 in trajectory_01 (51 ms). No interval is
  shorter than 2 ms. Durations are 9.9998 s (4993 rows) and 9.9983 s (4974 rows).
- QUBE: exactly uniform, t = 0, 0.002, ..., 19.998 s (10000 rows, period within
  1e-12 s of 2 ms). The file's alpha = 0 is the *upright* (balanced) position, and
  its direction is opposite to the ``furuta`` model's: see :func:`load_qube`.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from mbfg.errors import DataError
from mbfg.log_table import read_table
from mbfg.logs import Log

__all__ = [
    "DFKI_PERIOD",
    "QUBE_PERIOD",
    "dfki_reference_parameters",
    "dfki_to_mbfg_parameters",
    "find_gaps",
    "load_dfki_double_pendulum",
    "load_qube",
    "resample_uniform",
]

#: Nominal sample period of the DFKI double pendulum recordings [s] (500 Hz).
DFKI_PERIOD = 0.002
#: Sample period of the QUBE-Servo recordings [s] (500 Hz).
QUBE_PERIOD = 0.002

_DFKI_PARAMETERS = ("m1", "m2", "l1", "r1", "r2", "I1", "I2", "Ir", "gr", "b1", "b2", "cf1", "cf2", "g")


# --------------------------------------------------------------------------------------
# A CSV reader with named time / observation / control columns
# --------------------------------------------------------------------------------------


def _read_text(path: str | os.PathLike[str], what: str) -> tuple[str, str]:
    source = os.fspath(path)
    try:
        with open(source, encoding="utf-8-sig", newline="") as fh:
            return source, fh.read()
    except FileNotFoundError:
        raise DataError(f"{source}: {what} not found") from None
    except IsADirectoryError:
        raise DataError(f"{source}: is a folder; expected a {what}") from None
    except UnicodeDecodeError as exc:
        raise DataError(f"{source}: not a text (UTF-8) file ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise DataError(f"{source}: cannot read the {what} ({exc.strerror or exc})") from None


def _read_columns(
    path: str | os.PathLike[str],
    what: str,
    time: str,
    observations: Sequence[str],
    controls: Sequence[str],
) -> tuple[str, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Read the named columns of a CSV file (:func:`mbfg.log_table.read_table`, for a lab's own layout).

    Returns:
        source, t (n,), y (n, n_obs) with NaN for empty observation cells,
        u (n, n_u), and the 1-based line number of each data row (n,).
    """
    source, text = _read_text(path, what)
    return (source, *read_table(source, text, time, observations, controls, what, foreign=True))


# --------------------------------------------------------------------------------------
# Sampling
# --------------------------------------------------------------------------------------


def find_gaps(log_or_t: Log | Sequence[float] | np.ndarray, period: float, rtol: float = 0.01) -> np.ndarray:
    """Indices ``i`` (0-based) of the sample intervals ``t[i] -> t[i+1]`` longer than ``period * (1 + rtol)``.

    Args:
        log_or_t: a :class:`Log` or its (n,) times [s].
        period: the nominal sample period [s] (e.g. :data:`DFKI_PERIOD`).
        rtol: relative tolerance (default 1 %).

    Returns:
        (n_gaps,) int array; ``t[i + 1] - t[i]`` is the length of gap ``i``.
    """
    t = np.asarray(log_or_t.t if isinstance(log_or_t, Log) else log_or_t, dtype=float).reshape(-1)
    if not (np.isfinite(period) and period > 0 and np.isfinite(rtol) and rtol >= 0):
        raise DataError(f"find_gaps: period must be > 0 s and rtol >= 0, got period={period}, rtol={rtol}")
    return np.nonzero(np.diff(t) > period * (1.0 + rtol))[0]


def resample_uniform(log: Log, dt: float) -> Log:
    """``log`` on the uniform grid ``t[0], t[0] + dt, ...`` up to its last time [s].

    Observations are interpolated linearly between the two samples around each
    grid time; a grid time that coincides with a sample (within 1e-9 dt) takes
    that sample's value exactly. A missing reading (NaN) stays missing: a grid
    time interpolated from a NaN sample is NaN, never filled in from farther
    samples. Controls are held (zero-order hold, the log format's meaning of a
    control): a grid time takes the control of the last sample at or before it.

    Across a gap in the samples the interpolated observations are a straight
    line and the held control is the one logged before the gap; neither is
    measured data. Use :func:`find_gaps` to see where that happens.

    Args:
        log: a log with strictly increasing times.
        dt: the grid step [s], > 0.

    Returns:
        A new :class:`Log` with the same names and source.

    Raises:
        DataError: ``dt`` not a positive finite number, or an empty log.
    """
    is_number = isinstance(dt, (int, float, np.floating, np.integer)) and not isinstance(dt, bool)
    if not (is_number and np.isfinite(dt) and dt > 0):
        raise DataError(f"resample_uniform: dt must be a positive number of seconds, got {dt!r}")
    t = np.asarray(log.t, dtype=float)
    if t.size == 0:
        raise DataError(f"{log.source}: cannot resample an empty log")
    dt = float(dt)
    tol = 1e-9 * dt
    n = int(math.floor((t[-1] - t[0]) / dt + 1e-9)) + 1
    grid = t[0] + dt * np.arange(n)
    # Last sample at or before each grid time (a sample within tol after it counts as "at").
    i = np.clip(np.searchsorted(t, grid + tol, side="right") - 1, 0, len(t) - 1)
    y = np.asarray(log.y, dtype=float)
    on_sample = np.abs(grid - t[i]) <= tol
    j = np.minimum(i + 1, len(t) - 1)
    span = np.where(j > i, t[j] - t[i], 1.0)
    w = np.where(on_sample | (j == i), 0.0, (grid - t[i]) / span)[:, None]
    y_new = y[i].copy()
    between = ~(on_sample | (j == i))
    if np.any(between):
        y_new[between] = (1.0 - w[between]) * y[i[between]] + w[between] * y[j[between]]
    u_new = np.asarray(log.u, dtype=float)[i].copy()
    return Log(t=grid, y=y_new, u=u_new, observations=log.observations, controls=log.controls, source=log.source)


# --------------------------------------------------------------------------------------
# DFKI double pendulum
# --------------------------------------------------------------------------------------


def load_dfki_double_pendulum(path: str | os.PathLike[str]) -> Log:
    """A DFKI underactuated-lab double pendulum record (``trajectory_NN.csv``) as a log.

    Observations ``q1 = pos_meas1``, ``q2 = pos_meas2`` [rad] (0 hanging straight
    down, q2 relative to link 1: the conventions of the ``double-pendulum-torque``
    model); controls ``tau1 = tau_meas1``, ``tau2 = tau_meas2`` [N m] (the measured
    motor torques, the model's torques through its gains ``K_q1 = K_q2 = 1``);
    ``t = time - time[0]`` [s]. The lab's other columns (velocities, filtered
    signals, commanded and friction-compensation torques) are not read.

    The samples are **not uniformly spaced** and are returned as recorded: the
    nominal period is 2 ms (:data:`DFKI_PERIOD`; 2.0001 ms in the files), the
    first few intervals after the start are 3-3.6 ms, and occasional later
    intervals are 2.5-8.4 ms (samples missing). This loader never resamples;
    :func:`find_gaps` lists the long intervals and :func:`resample_uniform`
    resamples on request.

    Raises:
        DataError: a missing column (the message lists the columns present), an
            empty time or torque cell, NaN/inf text or a non-number in a needed
            column, or a time not after the previous row's (file, row, column named).
    """
    source, t, y, u, _ = _read_columns(
        path, "DFKI double pendulum CSV", "time", ("pos_meas1", "pos_meas2"), ("tau_meas1", "tau_meas2")
    )
    return Log(t=t - t[0], y=y, u=u, observations=("q1", "q2"), controls=("tau1", "tau2"), source=source)


def dfki_reference_parameters(path: str | os.PathLike[str]) -> dict[str, float]:
    """The DFKI lab's identified model (``model_parameters.yml``) as a dict of floats.

    Keys: ``m1, m2`` [kg], ``l1`` [m], ``r1, r2`` (joint to CoM) [m], ``I1, I2``
    (link inertias about their *joint axes*) [kg m^2], ``Ir`` (motor rotor
    inertia) [kg m^2], ``gr`` (gear ratio), ``b1, b2`` (viscous) [N m s],
    ``cf1, cf2`` (Coulomb, applied by their plant as ``cf * atan(100 qdot)``)
    [N m], ``g`` [m/s^2]. Other keys of the file (``l2``, torque limits) are not
    returned. These values were identified by the lab with its own method; they
    are a reference, not ground truth. Map them with :func:`dfki_to_mbfg_parameters`.

    Raises:
        DataError: an unreadable file, not a YAML mapping, or a missing or
            non-numeric/non-finite key (the file and key are named).
    """
    import yaml

    source, text = _read_text(path, "DFKI model_parameters.yml file")
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise DataError(f"{source}: not valid YAML ({exc})") from None
    if not isinstance(data, Mapping):
        raise DataError(f"{source}: expected a mapping 'name: value', got {type(data).__name__}")
    out: dict[str, float] = {}
    for key in _DFKI_PARAMETERS:
        if key not in data:
            raise DataError(f"{source}: no parameter {key!r}; the file has {', '.join(map(str, data)) or '(none)'}")
        value = data[key]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise DataError(f"{source}: parameter {key!r} must be a finite number, got {value!r}")
        out[key] = float(value)
    return out


def dfki_to_mbfg_parameters(ref: Mapping[str, Any], *, shaft_inertias: bool = False) -> dict[str, float]:
    """Map the DFKI reference parameters onto the ``double-pendulum(-torque)`` model's names.

    ``m1, m2, l1, r1, r2, b1, b2`` carry over; ``J1 = I1 - m1 r1^2`` and
    ``J2 = I2 - m2 r2^2``, because the lab's ``I`` are about the joint axes and
    ours about the centres of mass (parallel-axis theorem).

    What does not carry over:

    - The rotor terms of their mass matrix (``gr^2 Ir + Ir`` in M00, ``-gr Ir`` in
      M01, ``gr^2 Ir`` in M11: motor 1's rotor, and motor 2's rotor carried by
      link 1 and turning at ``qdot1 - gr qdot2``) have no counterpart in our
      model except the motor shaft inertias ``J_s_q1``, ``J_s_q2``, which add to
      the diagonal only. With ``shaft_inertias=True`` they are returned as
      ``J_s_q1 = (gr^2 + 1) Ir`` and ``J_s_q2 = gr^2 Ir`` (exact for M00 and M11);
      the off-diagonal ``-gr Ir`` (about 0.7 % of M01 here) is dropped.
    - Their Coulomb friction ``cf1, cf2`` has no counterpart in our viscous-only
      double pendulum and is dropped (``b1, b2`` are only the viscous part).

    Caution: the lab's identified set need not be physically consistent. In the
    published ``model_parameters.yml`` ``I2 < m2 r2^2``, so ``J2`` comes out
    *negative* (about -4.3e-3 kg m^2), below the model's lower bound; planar
    motion only determines ``I2``, ``m2 r2``, ``I1 + m2 l1^2`` and
    ``m1 r1 + m2 l1``, not ``m2`` and ``r2`` separately. The values are returned
    as computed; giving a negative ``J2`` to the model raises its bounds error.

    Args:
        ref: the dict of :func:`dfki_reference_parameters`.
        shaft_inertias: also return ``J_s_q1``, ``J_s_q2`` (for ``double-pendulum-torque``).

    Returns:
        ``{m1, m2, l1, r1, r2, J1, J2, b1, b2}`` [SI], plus ``J_s_q1, J_s_q2`` if asked.

    Raises:
        DataError: a needed key missing from ``ref``.
    """
    needed = ["m1", "m2", "l1", "r1", "r2", "I1", "I2", "b1", "b2"] + (["Ir", "gr"] if shaft_inertias else [])
    missing = [k for k in needed if k not in ref]
    if missing:
        raise DataError(f"dfki_to_mbfg_parameters: reference parameters lack {', '.join(missing)}")
    p = {k: float(ref[k]) for k in needed}
    out = {k: p[k] for k in ("m1", "m2", "l1", "r1", "r2")}
    out["J1"] = p["I1"] - p["m1"] * p["r1"] ** 2
    out["J2"] = p["I2"] - p["m2"] * p["r2"] ** 2
    out["b1"], out["b2"] = p["b1"], p["b2"]
    if shaft_inertias:
        out["J_s_q1"] = (p["gr"] ** 2 + 1.0) * p["Ir"]
        out["J_s_q2"] = p["gr"] ** 2 * p["Ir"]
    return out


# --------------------------------------------------------------------------------------
# Quanser QUBE-Servo (Furuta pendulum)
# --------------------------------------------------------------------------------------


def load_qube(
    path: str | os.PathLike[str],
    *,
    alpha_sign: int = -1,
    alpha_offset: float = math.pi,
    period: float = QUBE_PERIOD,
    rtol: float = 0.01,
) -> Log:
    """A QUBE-Servo episode (decargroup/closed_loop_koopman CSV) as a log for the ``furuta`` model.

    Observations ``theta`` = the file's ``theta`` [rad] (arm; direction kept) and
    ``alpha = alpha_offset + alpha_sign * alpha_file`` [rad], the ``furuta``
    model's pendulum angle (0 hanging down, right-handed about the arm's outward
    axis); control ``u = plant_input`` [V] (the voltage applied after
    saturation); ``t = t - t[0]`` [s]. An empty alpha cell stays NaN.

    Convention, as found in the published episodes (not in the vendor's files):

    - The file's ``alpha = 0`` is **upright**: during balancing alpha stays within
      +-0.22 rad (median 0), and alpha'' ~= +130 s^-2 alpha + ...: the equilibrium
      at 0 is unstable, as the upright one is (hanging down it would be about
      -130 s^-2). Hence ``alpha_offset = pi``.
    - The file's alpha turns the **opposite way** to the model's, for the file's
      theta and voltage: positive ``plant_input`` accelerates theta positively
      (theta'' ~= +25 V^-1 s^-2 u, consistent with the model's gain K >= 0), and
      the arm's acceleration couples into the file's alpha as
      alpha'' ~= 130 alpha - 1.06 theta''; in the model, near upright, the
      deviation beta = alpha - pi obeys beta'' ~= omega^2 beta + k theta'' with
      k > 0 (the pendulum lags behind the accelerating arm tip), so beta = -alpha_file.
      The balancing controller agrees: it pushes the arm towards the side the
      pendulum falls to (u rises with the file's alpha). Hence ``alpha_sign = -1``.
      The two signs together are all the model can tell apart: flipping theta,
      alpha and u together gives the mirror-image rig, which fits equally well.

    Both are keyword arguments so a user can choose otherwise
    (``alpha_sign=+1`` keeps the file's direction).

    Sampling is checked, not repaired: every interval must be ``period`` within
    ``rtol`` (500 Hz within 1 %; the published episodes are uniform to 1e-12 s).

    Raises:
        DataError: a missing column (the message lists the columns present),
            an empty time or plant_input cell, NaN/inf text or a non-number in a
            needed column, a time not after the previous row's, or the first row
            whose interval deviates from ``period`` by more than ``rtol`` (file,
            row and times named); ``alpha_sign`` not +1/-1 or a non-finite offset.
    """
    if isinstance(alpha_sign, bool) or not isinstance(alpha_sign, (int, np.integer)) or alpha_sign not in (1, -1):
        raise DataError(f"load_qube: alpha_sign must be +1 or -1, got {alpha_sign!r}")
    if not (isinstance(alpha_offset, (int, float, np.floating, np.integer)) and math.isfinite(alpha_offset)):
        raise DataError(f"load_qube: alpha_offset must be a finite angle [rad], got {alpha_offset!r}")
    if not (np.isfinite(period) and period > 0 and np.isfinite(rtol) and rtol >= 0):
        raise DataError(f"load_qube: period must be > 0 s and rtol >= 0, got period={period}, rtol={rtol}")
    source, t, y, u, lines = _read_columns(path, "QUBE-Servo CSV", "t", ("theta", "alpha"), ("plant_input",))
    if len(t) > 1:
        off = np.abs(np.diff(t) - period) > rtol * period
        if off.any():
            k = int(np.argmax(off)) + 1  # 0-based index of the later sample
            raise DataError(
                f"{source}, row {k + 1} (line {lines[k]}), column 't': the interval from the previous row "
                f"({t[k - 1]!r} s -> {t[k]!r} s) is {t[k] - t[k - 1]:.6g} s; expected {period} s within "
                f"{100 * rtol:g} % (uniform {1 / period:g} Hz sampling). The loader does not resample; "
                "pass period= / rtol= to accept other sampling"
            )
    y = y.copy()
    y[:, 1] = float(alpha_offset) + int(alpha_sign) * y[:, 1]
    return Log(t=t - t[0], y=y, u=u, observations=("theta", "alpha"), controls=("u",), source=source)
