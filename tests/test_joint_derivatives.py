"""Joint rates and accelerations from recorded angles (mbfg.joint_derivatives): the smoothing spline's and the
low-pass filter's derivatives against the closed-form derivatives of a sinusoid, with and without angle noise."""

from __future__ import annotations

import numpy as np
import pytest

from mbfg.errors import DataError, MbfgError
from mbfg.joint_derivatives import DerivativeOptions, joint_derivatives

W = 2.0  # [rad/s]
H = 1e-3  # [s]


def _sinusoid(duration: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    t = np.arange(0.0, duration, H)
    return t, np.sin(W * t)[:, None], W * np.cos(W * t)[:, None], -W**2 * np.sin(W * t)[:, None]


def test_interpolating_spline_derivatives_of_a_sinusoid_converge_inside_the_log():
    """lam = 0: the interpolating cubic spline; its rate and acceleration errors are O(h^3) and O(h^2) inside,
    away from the natural (zero-curvature) ends."""
    t, q, qd, qdd = _sinusoid(2.0)
    qs, rate, acc = joint_derivatives(t, q, ("j",), DerivativeOptions(smoothing=0.0))
    inside = slice(100, -100)
    assert np.abs(qs - q).max() <= 1e-14
    assert np.abs(rate[inside] - qd[inside]).max() <= 1e-8 * W
    assert np.abs(acc[inside] - qdd[inside]).max() <= 1e-5 * W**2
    assert np.abs(acc[0, 0]) <= 1e-12  # the natural end: f'' = 0, which is why the ends are biased


def test_cross_validated_spline_keeps_noise_out_of_the_accelerations():
    """Angle noise of 1e-4 rad at 1 kHz: central second differences err by about sigma sqrt(6) / h^2 = 245 rad/s^2;
    the cross-validated spline's accelerations stay within a quarter of the signal's amplitude W^2 inside the log
    (0.58 rad/s^2 here: smoothing trades the noise for bias)."""
    t, q, _, qdd = _sinusoid(1.0)
    noisy = q + 1e-4 * np.random.default_rng(0).normal(size=q.shape)
    central = (noisy[2:] - 2 * noisy[1:-1] + noisy[:-2]) / H**2
    assert np.abs(central - qdd[1:-1]).max() > 100.0
    _, _, acc = joint_derivatives(t, noisy, ("j",))
    inside = slice(100, -100)
    assert np.abs(acc[inside] - qdd[inside]).max() <= 0.25 * W**2


def test_a_missing_angle_is_refused_naming_the_column_and_row():
    t, q, _, _ = _sinusoid(0.1)
    q = np.hstack([q, q])
    q[17, 1] = np.nan
    with pytest.raises(DataError, match=r"^wrist: row 17 \(t = 0.017"):
        joint_derivatives(t, q, ("shoulder", "wrist"))


def test_negative_smoothing_is_refused_by_name():
    with pytest.raises(MbfgError, match="^smoothing: "):
        DerivativeOptions(smoothing=-1.0)


def test_low_pass_differences_of_a_sinusoid_far_below_the_cutoff_match_its_derivatives_inside():
    """A 0.32 Hz sinusoid through the zero-phase Butterworth at 5 Hz: gain 1 - 3e-10; central differences err by
    W^3 h^2 / 6 (1.3e-6 rad/s) and W^4 h^2 / 12 in rate and acceleration. The filter's start-up at the ends decays
    as exp(-0.38 w_c t) (its slowest pole, w_c = 2 pi 5 Hz): below 1e-3 of the acceleration's amplitude 2.5 / cutoff
    from the ends, and to the differences' own error 5 / cutoff from them."""
    t, q, qd, qdd = _sinusoid(4.0)
    _, rate, acc = joint_derivatives(t, q, ("j",), DerivativeOptions(cutoff=5.0))
    near, far = slice(500, -500), slice(1000, -1000)
    assert np.abs(acc[near] - qdd[near]).max() <= 1e-3 * W**2
    assert np.abs(rate[near] - qd[near]).max() <= 1e-4 * W
    assert np.abs(acc[far] - qdd[far]).max() <= 1e-5 * W**2
    assert np.abs(rate[far] - qd[far]).max() <= 2.0 * W**3 * H**2 / 6.0


def test_low_pass_keeps_more_angle_noise_out_of_the_accelerations_than_cross_validation():
    """Angle noise of 1e-4 rad at 1 kHz: the 5 Hz low-pass leaves acceleration noise of about
    sigma (2 pi f_c)^2 sqrt(f_c h) ~ 0.007 rad/s^2, well below what the cross-validated spline leaves."""
    t, q, _, qdd = _sinusoid(4.0)
    noisy = q + 1e-4 * np.random.default_rng(0).normal(size=q.shape)
    inside = slice(500, -500)
    _, _, filtered = joint_derivatives(t, noisy, ("j",), DerivativeOptions(cutoff=5.0))
    _, _, spline = joint_derivatives(t, noisy, ("j",))
    rms_filtered = np.sqrt(np.mean((filtered[inside] - qdd[inside]) ** 2))
    rms_spline = np.sqrt(np.mean((spline[inside] - qdd[inside]) ** 2))
    assert rms_filtered <= 0.02 and rms_filtered < 0.5 * rms_spline, (rms_filtered, rms_spline)


def test_low_pass_options_and_an_uneven_grid_are_refused_by_name():
    with pytest.raises(MbfgError, match="^cutoff: "):
        DerivativeOptions(cutoff=0.0)
    with pytest.raises(MbfgError, match="^smoothing, cutoff: expected one of them"):
        DerivativeOptions(smoothing=1e-6, cutoff=5.0)
    t, q, _, _ = _sinusoid(0.2)
    with pytest.raises(DataError, match=r"^cutoff: 600 Hz; expected a frequency below .* Nyquist frequency 500 Hz"):
        joint_derivatives(t, q, ("j",), DerivativeOptions(cutoff=600.0))
    t = t.copy()
    t[50:] += 0.5 * H
    with pytest.raises(DataError, match=r"^t: t\[50\] - t\[49\] = 0.0015 s"):
        joint_derivatives(t, q, ("j",), DerivativeOptions(cutoff=5.0))
