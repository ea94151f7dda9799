"""Loaders of the real rig recordings (mbfg.datasets.rigs): DFKI double pendulum and QUBE-Servo."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest

from mbfg.datasets.rigs import (
    DFKI_PERIOD,
    QUBE_PERIOD,
    dfki_reference_parameters,
    dfki_to_mbfg_parameters,
    find_gaps,
    load_dfki_double_pendulum,
    load_qube,
    resample_uniform,
)
from mbfg.errors import DataError
from mbfg.logs import Log

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data"
DFKI = DATA / "dfki_double_pendulum"
QUBE = DATA / "qube_servo"
DFKI_FILES = ("trajectory_00.csv", "trajectory_01.csv")
QUBE_FILES = ("qube_20230828T150615_434_696_394.csv", "qube_20230828T150709_610_277_801.csv")

DFKI_HEADER = (
    "time,pos_meas1,pos_meas2,vel_meas1,vel_meas2,pos_filt1,pos_filt2,vel_filt1,vel_filt2,"
    "tau_con1,tau_con2,tau_fric1,tau_fric2,tau_meas1,tau_meas2"
)
QUBE_HEADER = "t, target_theta, target_alpha, theta, alpha, control_output, feedforward, plant_input, saturation"


def _need(folder: Path, name: str) -> Path:
    path = folder / name
    if not path.is_file():
        pytest.fail(f"rig recording not found: {path.resolve()} (shared/data beside the repository is absent)")
    return path


@pytest.fixture(scope="module", params=DFKI_FILES)
def dfki_log(request) -> Log:
    return load_dfki_double_pendulum(_need(DFKI, request.param))


@pytest.fixture(scope="module", params=QUBE_FILES)
def qube_log(request) -> Log:
    return load_qube(_need(QUBE, request.param))


def _dfki_row(time: float, q1: str = "0.1", q2: str = "-0.2", tau1: str = "0.3", tau2: str = "-0.4") -> str:
    return f"{time},{q1},{q2},0,0,0,0,0,0,0,0,0,0,{tau1},{tau2}"


def _qube_row(time: float, theta: str = "0.01", alpha: str = "-0.02", u: str = "1.5") -> str:
    return f"{time}, 0, 0, {theta}, {alpha}, 0, 0, {u}, 0"


def _write(tmp_path: Path, name: str, lines: list[str]) -> Path:
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


# --------------------------------------------------------------------------------------- DFKI


def test_dfki_log_shapes_names_duration(dfki_log: Log):
    n = len(dfki_log)
    assert 4900 < n < 5001
    assert dfki_log.observations == ("q1", "q2") and dfki_log.controls == ("tau1", "tau2")
    assert dfki_log.y.shape == (n, 2) and dfki_log.u.shape == (n, 2)
    assert dfki_log.t[0] == 0.0 and 9.99 < dfki_log.t[-1] < 10.0
    assert np.all(np.isfinite(dfki_log.y)) and np.all(np.isfinite(dfki_log.u))
    # Starts at rest hanging down; joint angles and motor torques in a plausible range.
    assert np.all(np.abs(dfki_log.y[0]) < 1e-2)
    assert np.all(np.abs(dfki_log.y) < 2.0) and np.all(np.abs(dfki_log.u) < 2.0)


def test_dfki_values_are_the_files_columns(tmp_path: Path):
    path = _write(tmp_path, "rec.csv", [DFKI_HEADER, _dfki_row(5.0), _dfki_row(5.002, q1="0.25", tau2="0.5")])
    log = load_dfki_double_pendulum(path)
    np.testing.assert_allclose(log.t, [0.0, 0.002], atol=1e-15)
    np.testing.assert_array_equal(log.y, [[0.1, -0.2], [0.25, -0.2]])
    np.testing.assert_array_equal(log.u, [[0.3, -0.4], [0.3, 0.5]])
    assert log.source == str(path)


def test_dfki_sampling_is_500_hz_with_gaps(dfki_log: Log):
    dt = np.diff(dfki_log.t)
    assert abs(np.median(dt) - DFKI_PERIOD) < 1e-6  # 2.0001 ms in the files
    assert dt.min() > 0.99 * DFKI_PERIOD  # no short intervals, only long ones
    gaps = find_gaps(dfki_log, DFKI_PERIOD)
    assert 5 <= len(gaps) <= 40
    assert list(gaps[:4]) == [0, 1, 2, 3]  # start-up: the first intervals are 3-3.6 ms
    assert np.all(dt[gaps] > 1.01 * DFKI_PERIOD) and dt.max() < 0.01
    assert np.all(np.delete(dt, gaps) <= 1.01 * DFKI_PERIOD)


def test_resample_uniform_dfki(dfki_log: Log):
    r = resample_uniform(dfki_log, DFKI_PERIOD)
    assert r.observations == dfki_log.observations and r.controls == dfki_log.controls
    np.testing.assert_allclose(np.diff(r.t), DFKI_PERIOD, rtol=0, atol=1e-12)
    assert r.t[0] == 0.0 and dfki_log.t[-1] - DFKI_PERIOD < r.t[-1] <= dfki_log.t[-1]
    assert len(find_gaps(r, DFKI_PERIOD)) == 0
    np.testing.assert_array_equal(r.y[0], dfki_log.y[0])
    for c in range(2):  # linear interpolation of the observations (numpy's own as the reference)
        np.testing.assert_allclose(r.y[:, c], np.interp(r.t, dfki_log.t, dfki_log.y[:, c]), rtol=0, atol=1e-12)
    # Controls are held: each grid time takes the last sample at or before it.
    i = np.searchsorted(dfki_log.t, r.t, side="right") - 1
    np.testing.assert_array_equal(r.u, dfki_log.u[i])


def test_resample_uniform_dfki_on_grid_samples(dfki_log: Log):
    """The file's samples moved onto the 2 ms grid (gaps kept): resampling returns them exactly."""
    k = np.rint(dfki_log.t / DFKI_PERIOD).astype(int)
    assert np.all(np.diff(k) >= 1) and np.diff(k).max() >= 2  # still increasing, gaps kept
    snapped = Log(DFKI_PERIOD * k, dfki_log.y, dfki_log.u, dfki_log.observations, dfki_log.controls)
    r = resample_uniform(snapped, DFKI_PERIOD)
    assert len(r) == k[-1] + 1 > len(dfki_log)
    np.testing.assert_array_equal(r.y[k], dfki_log.y)
    np.testing.assert_array_equal(r.u[k], dfki_log.u)
    inside = np.setdiff1d(np.arange(len(r)), k)  # grid times inside gaps: interpolated / held
    before = np.searchsorted(k, inside) - 1
    w = ((inside - k[before]) / (k[before + 1] - k[before]))[:, None]
    np.testing.assert_allclose(r.y[inside], (1 - w) * dfki_log.y[before] + w * dfki_log.y[before + 1], atol=1e-14)
    np.testing.assert_array_equal(r.u[inside], dfki_log.u[before])


def test_resample_uniform_matches_samples_and_holds_controls():
    t = np.array([0.0, 0.1, 0.2, 0.5, 0.6, 0.7])  # a gap from 0.2 to 0.5
    y = np.column_stack([[0.0, 1.0, 2.0, 5.0, np.nan, 7.0], [10.0, 11.0, 12.0, 15.0, 16.0, 17.0]])
    u = np.array([[1.0], [2.0], [3.0], [4.0], [5.0], [6.0]])
    log = Log(t, y, u, ("a", "b"), ("c",), "synthetic")
    r = resample_uniform(log, 0.05)
    np.testing.assert_allclose(r.t, 0.05 * np.arange(15), atol=1e-15)
    assert r.source == "synthetic"
    on = [0, 2, 4, 10, 12, 14]  # grid points on samples
    np.testing.assert_array_equal(r.y[on], y)  # exactly the samples (NaN where the sample is missing)
    np.testing.assert_allclose(r.y[[1, 3, 5, 7, 9]], [[0.5, 10.5], [1.5, 11.5], [2.5, 12.5], [3.5, 13.5], [4.5, 14.5]])
    # The missing reading at 0.6 s stays missing next to it and does not spread further.
    assert np.isnan(r.y[11, 0]) and np.isnan(r.y[13, 0]) and r.y[11, 1] == pytest.approx(15.5)
    np.testing.assert_array_equal(r.u[:, 0], [1, 1, 2, 2, 3, 3, 3, 3, 3, 3, 4, 4, 5, 5, 6])  # zero-order hold
    # A step that does not divide the span stops at the last sample or before.
    assert resample_uniform(log, 0.3).t.tolist() == pytest.approx([0.0, 0.3, 0.6])


@pytest.mark.parametrize("dt", [0.0, -0.1, math.nan, math.inf, "0.1"])
def test_resample_uniform_rejects_bad_step(dt):
    log = Log(np.array([0.0, 1.0]), np.zeros((2, 1)), np.zeros((2, 0)), ("a",), ())
    with pytest.raises(DataError, match="dt must be a positive number"):
        resample_uniform(log, dt)


def test_dfki_parameters_and_mapping():
    yml = _need(DFKI, "model_parameters.yml")
    ref = dfki_reference_parameters(yml)
    assert set(ref) == {"m1", "m2", "l1", "r1", "r2", "I1", "I2", "Ir", "gr", "b1", "b2", "cf1", "cf2", "g"}
    assert ref["m1"] == 0.6416937799349799 and ref["I1"] == 0.02671076499939512 and ref["gr"] == 6.0
    p = dfki_to_mbfg_parameters(ref)
    assert set(p) == {"m1", "m2", "l1", "r1", "r2", "J1", "J2", "b1", "b2"}
    assert p["J1"] == pytest.approx(0.02671076499939512 - 0.6416937799349799 * 0.2**2, rel=1e-14)
    assert p["J1"] == pytest.approx(1.043013802e-3, rel=1e-8)
    assert p["J2"] == pytest.approx(ref["I2"] - ref["m2"] * ref["r2"] ** 2, rel=1e-14)
    assert p["J2"] < 0  # the lab's identified set has I2 < m2 r2^2 (documented in the docstring)
    assert all(p[k] == ref[k] for k in ("m1", "m2", "l1", "r1", "r2", "b1", "b2"))
    s = dfki_to_mbfg_parameters(ref, shaft_inertias=True)
    assert s["J_s_q1"] == pytest.approx(37 * ref["Ir"]) and s["J_s_q2"] == pytest.approx(36 * ref["Ir"])
    with pytest.raises(DataError, match="lack I2"):
        dfki_to_mbfg_parameters({k: v for k, v in ref.items() if k != "I2"})


def test_dfki_parameters_file_errors(tmp_path: Path):
    path = tmp_path / "model_parameters.yml"
    path.write_text("m1: 0.6\nm2: 0.5\n", encoding="utf-8")
    with pytest.raises(DataError, match=re.escape(f"{path}: no parameter 'l1'")):
        dfki_reference_parameters(path)
    path.write_text("- 1\n- 2\n", encoding="utf-8")
    with pytest.raises(DataError, match="expected a mapping"):
        dfki_reference_parameters(path)
    with pytest.raises(DataError, match="not found"):
        dfki_reference_parameters(tmp_path / "absent.yml")


# --------------------------------------------------------------------------------------- QUBE


def test_qube_log_shapes_names_duration_sampling(qube_log: Log):
    assert len(qube_log) == 10000
    assert qube_log.observations == ("theta", "alpha") and qube_log.controls == ("u",)
    assert qube_log.y.shape == (10000, 2) and qube_log.u.shape == (10000, 1)
    assert qube_log.t[0] == 0.0 and qube_log.t[-1] == pytest.approx(19.998, abs=1e-9)
    np.testing.assert_allclose(np.diff(qube_log.t), QUBE_PERIOD, rtol=0, atol=1e-9)
    assert np.all(np.isfinite(qube_log.y)) and np.all(np.abs(qube_log.u) <= 10.0)  # saturated at +-10 V


def test_qube_pendulum_is_up(qube_log: Log):
    up = qube_log.y[:, 1] - math.pi  # the file's alpha, 0 = upright, moved to our 0 = hanging down
    assert np.median(np.abs(up)) < 0.05
    assert np.max(np.abs(up)) < 0.3  # balanced all episode (ends at 45 degrees)


def _smooth(x: np.ndarray, dt: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """x, x', x'' from a cubic Savitzky-Golay fit over 31 samples (62 ms)."""
    from scipy.signal import savgol_filter

    return tuple(savgol_filter(x, 31, 3, deriv=d, delta=dt) for d in range(3))


def test_qube_alpha_convention_from_the_dynamics(qube_log: Log):
    """Upright is unstable, and the arm's acceleration drives the pendulum as in the furuta model.

    Near upright the model has beta'' = omega^2 beta + k theta'' (k > 0) for beta = alpha - pi,
    and the motor gain K >= 0 makes u > 0 accelerate theta positively.
    """
    dt = QUBE_PERIOD
    beta, _, beta_dd = _smooth(qube_log.y[:, 1] - math.pi, dt)
    _, theta_d, theta_dd = _smooth(qube_log.y[:, 0], dt)
    u = _smooth(qube_log.u[:, 0], dt)[0]
    s = slice(50, -50)
    X = np.column_stack([beta, theta_dd, np.ones_like(beta)])[s]
    (omega2, k, _), *_ = np.linalg.lstsq(X, beta_dd[s], rcond=None)
    assert 100.0 < omega2 < 160.0  # unstable equilibrium: upright (hanging down: about -130 s^-2)
    assert 0.8 < k < 1.3  # the model's coupling sign; about 1 for the vendor geometry
    X = np.column_stack([u, theta_d, np.ones_like(u)])[s]
    (gain, *_), *_ = np.linalg.lstsq(X, theta_dd[s], rcond=None)
    assert 20.0 < gain < 30.0  # positive volts turn theta positively


def test_qube_alpha_sign_and_offset_options(tmp_path: Path):
    path = _write(tmp_path, "q.csv", [QUBE_HEADER, _qube_row(1.0), _qube_row(1.002, alpha="0.1", u="-2")])
    ours = load_qube(path)
    np.testing.assert_allclose(ours.y[:, 1], [math.pi + 0.02, math.pi - 0.1])
    np.testing.assert_allclose(load_qube(path, alpha_sign=+1).y[:, 1], [math.pi - 0.02, math.pi + 0.1])
    np.testing.assert_allclose(load_qube(path, alpha_sign=+1, alpha_offset=0.0).y[:, 1], [-0.02, 0.1])
    np.testing.assert_allclose(ours.y[:, 0], [0.01, 0.01])
    np.testing.assert_allclose(ours.u[:, 0], [1.5, -2.0])
    np.testing.assert_allclose(ours.t, [0.0, 0.002], atol=1e-15)
    for bad in (0, 2, True, 1.0):
        with pytest.raises(DataError, match="alpha_sign must be"):
            load_qube(path, alpha_sign=bad)
    with pytest.raises(DataError, match="alpha_offset"):
        load_qube(path, alpha_offset=math.nan)


def test_qube_non_uniform_sampling_names_the_row(tmp_path: Path):
    times = [0.0, 0.002, 0.004, 0.0061, 0.0081]  # row 4 comes 2.1 ms after row 3: 5 % off
    path = _write(tmp_path, "q.csv", [QUBE_HEADER] + [_qube_row(t) for t in times])
    with pytest.raises(DataError, match=re.escape(f"{path}, row 4 (line 5), column 't'") + ".*expected 0.002 s"):
        load_qube(path)
    np.testing.assert_allclose(load_qube(path, rtol=0.06).t, times, atol=1e-15)  # accepted when asked


def test_qube_empty_alpha_is_a_missing_reading(tmp_path: Path):
    path = _write(tmp_path, "q.csv", [QUBE_HEADER, _qube_row(0.0), _qube_row(0.002, alpha=""), _qube_row(0.004)])
    log = load_qube(path)
    assert np.isnan(log.y[1, 1]) and np.all(np.isfinite(log.y[[0, 2]]))


# --------------------------------------------------------------------------------------- errors


@pytest.mark.parametrize("loader, header, row, missing", [
    (load_dfki_double_pendulum, DFKI_HEADER.replace("tau_meas2", "tau_x"), _dfki_row(0.0), "tau_meas2"),
    (load_dfki_double_pendulum, DFKI_HEADER.replace("time", "t"), _dfki_row(0.0), "time"),
    (load_qube, QUBE_HEADER.replace(" alpha,", " alfa,"), _qube_row(0.0), "alpha"),
    (load_qube, QUBE_HEADER.replace("plant_input", "voltage"), _qube_row(0.0), "plant_input"),
])
def test_missing_column_names_file_column_and_present_columns(tmp_path: Path, loader, header, row, missing):
    path = _write(tmp_path, "rec.csv", [header, row])
    with pytest.raises(DataError) as info:
        loader(path)
    message = str(info.value)
    assert message.startswith(f"{path}: no ") and f"column {missing!r}" in message
    assert "the file has columns " + ", ".join(c.strip() for c in header.split(",")) in message


@pytest.mark.parametrize("cells, column, reason", [
    (dict(tau1="nan"), "tau_meas1", "not a finite number"),
    (dict(tau2=""), "tau_meas2", "empty cell"),
    (dict(q1="inf"), "pos_meas1", "not a finite number; leave the cell empty"),
    (dict(q2="abc"), "pos_meas2", "expected a number"),
])
def test_dfki_bad_cell_names_the_row(tmp_path: Path, cells, column, reason):
    path = _write(tmp_path, "rec.csv", [DFKI_HEADER, _dfki_row(0.0), _dfki_row(0.002, **cells)])
    with pytest.raises(DataError, match=re.escape(f"{path}, row 2 (line 3), column {column!r}: ") + ".*" + reason):
        load_dfki_double_pendulum(path)


def test_dfki_empty_observation_is_a_missing_reading(tmp_path: Path):
    path = _write(tmp_path, "rec.csv", [DFKI_HEADER, _dfki_row(0.0), _dfki_row(0.002, q2=""), _dfki_row(0.004)])
    log = load_dfki_double_pendulum(path)
    assert np.isnan(log.y[1, 1]) and np.isfinite(log.y[1, 0]) and np.all(np.isfinite(log.u))


def test_qube_nan_control_names_the_row(tmp_path: Path):
    path = _write(tmp_path, "q.csv", [QUBE_HEADER, _qube_row(0.0), _qube_row(0.002), _qube_row(0.004, u="NaN")])
    with pytest.raises(DataError, match=re.escape(f"{path}, row 3 (line 4), column 'plant_input': 'NaN'")):
        load_qube(path)


@pytest.mark.parametrize("loader, make_row, column", [
    (load_dfki_double_pendulum, _dfki_row, "time"),
    (load_qube, _qube_row, "t"),
])
def test_non_increasing_time_names_the_row(tmp_path: Path, loader, make_row, column):
    header = DFKI_HEADER if column == "time" else QUBE_HEADER
    path = _write(tmp_path, "rec.csv", [header, make_row(0.0), make_row(0.002), make_row(0.002)])
    with pytest.raises(DataError, match=re.escape(f"{path}, row 3 (line 4), column {column!r}: time ")
                       + ".*not after the previous row"):
        loader(path)


def test_unreadable_files(tmp_path: Path):
    with pytest.raises(DataError, match="not found"):
        load_dfki_double_pendulum(tmp_path / "absent.csv")
    with pytest.raises(DataError, match="is a folder"):
        load_qube(tmp_path)
    with pytest.raises(DataError, match="empty"):
        load_qube(_write(tmp_path, "empty.csv", [""]))
    with pytest.raises(DataError, match="no data rows"):
        load_dfki_double_pendulum(_write(tmp_path, "header.csv", [DFKI_HEADER]))
