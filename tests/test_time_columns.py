"""Time columns as rigs write them (issue 55 item 4): a clock's jitter below mbfg.logs.SNAP_TOLERANCE of the
period is snapped onto the uniform grid with one line (a warning from the library, a stderr line from the
command line); beyond it the log is refused with the number of rows off the grid, or put on its own grid with
--resample; --dt multiples of the period work on a snapped log.

The logs are synthetic: a 1 kHz linear stage log whose times carry uniform jitter of +-3e-8 s (3e-5 of the
period, beyond the tolerance) or +-3e-10 s (3e-7 of it, within). Nothing here compiles an estimation: the
command-line cases stop at the reading or at the time-step check right after it.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

from mbfg.cli import main
from mbfg.cli.common import check_time_step, rigid_model
from mbfg.cli.recordings import read_recording
from mbfg.errors import DataError
from mbfg.graphs.joint import time_step
from mbfg.logs import SNAP_TOLERANCE, Log, onto_grid, read_log, snap_to_grid, time_grid, write_log

PERIOD = 1e-3
N = 2000


def _stage_log(path: Path, jitter: float, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A 1 kHz linear-stage log (x [m], current [A]) with times t_k = k * 1 ms + uniform(-jitter, jitter),
    x a smooth motion sampled at the jittered times, the current different on every row; returns (t, x, current)."""
    rng = np.random.default_rng(seed)
    k = np.arange(N)
    t = k * PERIOD + rng.uniform(-jitter, jitter, N)
    x = 0.05 * np.sin(2 * np.pi * 1.5 * t)
    current = np.round(rng.normal(0.0, 1.0, N), 6)
    write_log(path, t, {"x": x}, {"current": current})
    return t, x, current


def test_jitter_below_the_tolerance_is_snapped_onto_the_grid_with_one_warning(tmp_path: Path) -> None:
    path = tmp_path / "fine.csv"
    t, x, _ = _stage_log(path, 3e-10)
    assert 0 < np.max(np.abs(t - PERIOD * np.arange(N))) < SNAP_TOLERANCE * PERIOD  # the case this is about
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        log = read_log(path, ["x"], ["current"])
    notes = [str(w.message) for w in caught]
    assert len(notes) == 1 and "snapped onto the uniform grid" in notes[0] and "0.001 s" in notes[0], notes
    # On the grid exactly as a log written at 1 kHz reads back: k * 0.001 to the last decimal.
    assert log.t.tolist() == [round(k * PERIOD, 3) for k in range(N)]
    np.testing.assert_array_equal(log.y[:, 0], x)  # readings as recorded
    assert time_step(log, None) == (0.001, 1)
    assert time_step(log, 0.002) == (0.002, 2)
    # The same file read as written: within the tolerance, the estimation's period is still the grid's.
    raw = read_log(path, ["x"], ["current"], snap=False)
    assert raw.t.tolist() == t.tolist()
    assert time_step(raw, 0.002) == (0.002, 2)


def test_a_log_on_its_grid_is_read_unchanged_and_without_a_note(tmp_path: Path) -> None:
    path = tmp_path / "exact.csv"
    _stage_log(path, 0.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # any note would fail here
        log = read_log(path, ["x"], ["current"])
    assert snap_to_grid(log)[1] is None
    # A clock's real, non-decimal period (1/3 s) and a late start (1e4 s) are grids too.
    for times in (np.arange(300) / 3.0, 1e4 + np.arange(300) * 1e-3):
        assert time_grid(times).exact


def test_jitter_beyond_the_tolerance_is_refused_with_the_count_of_off_grid_rows(tmp_path: Path) -> None:
    path = tmp_path / "rig.csv"
    t, _, _ = _stage_log(path, 3e-8)
    off = int(np.sum(np.abs(t - PERIOD * np.arange(N)) > SNAP_TOLERANCE * PERIOD))  # counted independently
    assert off > N // 2
    log = read_log(path, ["x"], ["current"])  # read as written: the library does not snap it
    assert log.t.tolist() == t.tolist()
    with pytest.raises(DataError, match=rf"rig.csv: {off} of its {N} rows are off the uniform grid .* 0.001 s"):
        time_step(log, None)
    model = rigid_model("linear-stage")
    with pytest.raises(DataError, match=rf"{off} of its {N} rows are off the uniform grid.*--resample 0.001"):
        read_recording(str(path), model)


def test_the_command_line_refuses_a_jittered_log_naming_the_count_and_resample(tmp_path: Path, capsys) -> None:
    path = tmp_path / "rig.csv"
    t, _, _ = _stage_log(path, 3e-8)
    off = int(np.sum(np.abs(t - PERIOD * np.arange(N)) > SNAP_TOLERANCE * PERIOD))
    code = main(["calibrate", "linear-stage", str(path), "--dt", "0.002", "--quiet"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert f"{off} of its {N} rows are off the uniform grid" in err and "--resample 0.001" in err, err


def test_resample_at_its_own_period_interpolates_readings_and_keeps_each_rows_control(tmp_path: Path,
                                                                                        capsys) -> None:
    path = tmp_path / "rig.csv"
    t, x, current = _stage_log(path, 3e-8)
    model = rigid_model("linear-stage")
    log = read_recording(str(path), model, resample=0.001, command="mbfg calibrate")
    assert "put on its own uniform grid" in capsys.readouterr().err
    grid = PERIOD * np.arange(N)
    np.testing.assert_allclose(log.t, grid, rtol=0, atol=1e-15)
    # numpy's own interpolation at the grid times as the reference (an end time outside the samples: the end one)
    np.testing.assert_allclose(log.y[:, 0], np.interp(grid, t, x), rtol=0, atol=1e-15)
    np.testing.assert_array_equal(log.u[:, 0], current)  # each row's control, none shifted to its neighbour
    check_time_step(log, 0.002, "--dt 0.002")
    assert time_step(log, 0.002) == (0.002, 2)


def test_snapped_log_takes_dt_multiples_on_the_command_line(tmp_path: Path, capsys) -> None:
    path = tmp_path / "fine.csv"
    _stage_log(path, 3e-10)
    log = read_recording(str(path), rigid_model("linear-stage"), command="mbfg calibrate")
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "mbfg calibrate: " in err and "snapped onto the uniform grid" in err, err
    check_time_step(log, 0.002, "--dt 0.002")  # refused before the snapping: 0.000999984 s was the period
    assert time_step(log, 0.002) == (0.002, 2)


def test_onto_grid_keeps_a_missing_reading_missing_beside_it() -> None:
    t = np.arange(6) * 0.1 + np.array([0, 2e-5, -2e-5, 1e-5, 0, 0])
    y = np.array([[0.0], [1.0], [np.nan], [3.0], [4.0], [5.0]])
    log = Log(t, y, np.arange(6.0)[:, None], ("a",), ("c",), "gap.csv")
    out = onto_grid(log)
    # Grid time 1 lies before its sample (between rows 0 and 1), 3 after its sample (between 2 and 3): only the
    # grid times beside the missing row 2 that are interpolated from it are missing.
    assert np.all(np.abs(out.t - 0.1 * np.arange(6)) < 1e-5)
    assert np.isnan(out.y[:, 0]).tolist() == [False, False, True, True, False, False]
    np.testing.assert_array_equal(out.u, log.u)
    with pytest.raises(DataError, match="onto_grid needs a regular log"):
        onto_grid(Log(np.array([0.0, 0.1, 0.5]), np.zeros((3, 1)), np.zeros((3, 0)), ("a",), ()))
