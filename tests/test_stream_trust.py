"""When a stream's estimates are not to be trusted, ``mbfg smooth`` and :class:`StreamEstimator` say so.

A calibration whose parameters its log did not fit (a value on its bound, not excited, a combination not
determined, a solve that did not converge) is named in a warning; a stream whose solver restarts or jumps
exceed ``--max-fault-rate`` of its samples says so in its summary and exits with status 1. And the
stream of a pendulum swinging through the bottom at speed with 300 ms of samples missing there (the
window restarts after them) ends on its readings' turn, not a turn off them.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from mbfg.cli import main
from mbfg.graphs.stream import StreamEstimator, StreamStatus, StreamWarning
from mbfg.graphs.stream.config import calibration_warnings
from mbfg.logs import quantize
from mbfg.models import pendulum
from mbfg.spook import simulate, unwrap_angles

PPR = 2048
H = 1e-3
COUNT = 2 * math.pi / PPR


def _entry(value: float, lower: float | None = 0.0, upper: float | None = None, std: float = 1e-6, **flags) -> dict:
    return {"value": value, "std": std, "unit": "", "lower": lower, "upper": upper, "excited": True,
            "at_bound": False} | flags


def test_calibration_warnings_name_each_parameter_its_log_did_not_fit() -> None:
    doc = {"parameters": {"J_Ax": _entry(1e-10, lower=1e-10, at_bound=True, excited=False, std=3e-4),
                          "J_Ay": _entry(0.5, upper=0.5, at_bound=True),
                          "b": _entry(2e-3, std=5e-3, excited=False),
                          "J": _entry(1.6e-3)},
           "not_excited": ["J_Ax", "b"], "at_bound": ["J_Ax", "J_Ay"], "not_determined": ["J_link - J_rotor"],
           "converged": True}
    messages = calibration_warnings(doc, "calib.json")
    assert len(messages) == 4, messages
    ax, ay, b, combo = messages
    assert ax.startswith("calib.json: parameter 'J_Ax' = 1e-10 ended on its lower bound 1e-10 and was not excited")
    assert "std 0.0003 > |value|" in ax
    assert "'J_Ay' = 0.5 ended on its upper bound 0.5" in ay and "not excited" not in ay
    assert "'b' = 0.002 was not excited" in b
    assert "did not determine J_link - J_rotor" in combo
    assert not any("'J'" in m for m in messages)


def test_calibration_warnings_read_the_top_level_lists_alone_and_skip_held_parameters() -> None:
    doc = {"parameters": {"J_Ax": {"value": 1e-10}, "J_Ay": {"value": 1e-10}}, "at_bound": ["J_Ax", "J_Ay"],
           "not_excited": ["J_Ay"], "held": ["J_Ay"]}
    (message,) = calibration_warnings(doc)
    assert "'J_Ax' = 1e-10 ended on a bound" in message


@pytest.mark.parametrize(("fields", "expected"), [
    ({"status": "failed", "reason": "non-finite cost in factor impulse"},
     "ended 'failed' (non-finite cost in factor impulse)"),
    ({"status": "not converged"}, "ended 'not converged'"),
    ({"converged": False}, "did not converge"),
])
def test_calibration_warnings_name_a_solve_that_did_not_converge(fields, expected) -> None:
    (message,) = calibration_warnings({"parameters": {"J": _entry(1.6e-3)}} | fields)
    assert expected in message


@pytest.mark.parametrize("doc", [
    {"parameters": {"J": {"value": 1.6e-3, "std": 1e-7}}},  # an older file: no flags at all
    {"parameters": {"J": _entry(1.6e-3)}, "not_excited": [], "at_bound": [], "not_determined": [],
     "converged": True, "status": "converged", "held": []},
])
def test_calibration_warnings_are_none_for_a_clean_calibration_or_one_without_the_fields(doc) -> None:
    assert calibration_warnings(doc) == []


def test_from_calibration_warns_by_name_and_keeps_the_messages() -> None:
    model = pendulum()
    p = model.parameters
    doc = {"model": "pendulum", "parameters": {"J": _entry(1e-9, lower=1e-9, at_bound=True), "b": _entry(2e-3)},
           "fixed": {n: {"value": p[n].default} for n in p if n not in ("J", "b")}, "h": H}
    with pytest.warns(StreamWarning, match="parameter 'J' = 1e-09 ended on its lower bound 1e-09"):
        est = StreamEstimator.from_calibration(model, doc, lag=0.02, ppr=PPR)
    assert len(est.calibration_warnings) == 1
    heard: list[str] = []
    StreamEstimator.from_calibration(model, doc, lag=0.02, ppr=PPR, on_warning=heard.append)
    assert heard == list(est.calibration_warnings)


def test_fault_rates_are_per_sample_and_only_those_over_the_limit_are_reported() -> None:
    st = StreamStatus(samples=400, jumps=8, solver_failures=2)
    assert st.rates() == {"solver_failures": 0.005, "jumps": 0.02}
    assert st.over_rate(0.01) == {"jumps": 0.02}
    assert "jumps 2 %" in st.rate_summary(0.01) and "more than 1 %" in st.rate_summary(0.01)
    assert st.over_rate(0.02) == {} and "at most 2 %" in st.rate_summary(0.02)
    assert StreamStatus().rates() == {"solver_failures": 0.0, "jumps": 0.0}


# ------------------------------------------------------------------ the command line
@pytest.fixture(scope="module")
def swing() -> tuple[np.ndarray, np.ndarray]:
    """1.2 s of the pendulum released at rest from 2.5 rad: times (n,) [s], quantized angles (n,) [rad]."""
    model = pendulum()
    traj = simulate(model, 1.2, H, initial=model.initial_state({"theta": 2.5}))
    return np.round(np.asarray(traj.t), 9), quantize(unwrap_angles(model, traj.observations), PPR)[:, 0]


def _calibration(path: Path, **j_entry) -> Path:
    p = pendulum().parameters
    doc = {"model": "pendulum", "h": H, "period": H, "weight": 1e6,
           "parameters": {n: {"value": p[n].default} | (j_entry if n == "J" else {}) for n in ("J", "b")},
           "fixed": {n: {"value": p[n].default} for n in p if n not in ("J", "b")}}
    path.write_text(json.dumps(doc))
    return path


def _write_log(path: Path, t: np.ndarray, y: np.ndarray) -> Path:
    path.write_text("t,theta\n" + "".join(f"{float(a)!r},{float(b)!r}\n" for a, b in zip(t, y)))
    return path


def _smooth(capsys, calib: Path, log: Path, out: Path, *extra: str) -> tuple[int, str]:
    code = main(["smooth", "pendulum", "--params", str(calib), "--lag", "0.02", "--ppr", str(PPR),
                 "--input", str(log), "--output", str(out), "--quiet", *extra])
    return code, capsys.readouterr().err


def test_smooth_warns_by_name_on_a_parameter_on_its_bound_and_a_clean_stream_exits_0(tmp_path, capsys,
                                                                                      swing) -> None:
    """J on its lower bound (which here is its true value: the stream runs clean, the warning stands)."""
    t, y = swing
    J = pendulum().parameters["J"].default
    calib = _calibration(tmp_path / "calib.json", lower=J, at_bound=True, excited=True, std=1e-7)
    code, err = _smooth(capsys, calib, _write_log(tmp_path / "log.csv", t[:300], y[:300]), tmp_path / "out.csv")
    assert code == 0, err
    assert f"mbfg smooth: warning: {calib}: parameter 'J' = {J:.6g} ended on its lower bound {J:.6g}" in err, err
    summary = err.strip().splitlines()[-1]
    assert "solver restarts 0 %, jumps 0 % of the samples (at most 1 %)" in summary, err


def test_smooth_exits_1_naming_the_rate_when_jumps_exceed_it(tmp_path, capsys, swing) -> None:
    """One reading in 50 sent 1 rad off (2 % of the samples, each a jump): status 1 and the rate named at the
    default limit of 1 %; status 0 with --max-fault-rate 5."""
    t, y = swing
    n = 500
    spiked = y[:n].copy()
    spiked[25::50] += 1.0  # 10 readings
    calib = _calibration(tmp_path / "calib.json")
    log = _write_log(tmp_path / "log.csv", t[:n], spiked)
    code, err = _smooth(capsys, calib, log, tmp_path / "out.csv")
    assert code == 1, err
    lines = err.strip().splitlines()
    assert lines[-2].startswith("mbfg smooth: error: the stream's estimates left the readings: "), err
    assert "10 jumps" in lines[-1] and "jumps 2 % of the samples (more than 1 %" in lines[-1], err
    code, err = _smooth(capsys, calib, log, tmp_path / "out2.csv", "--max-fault-rate", "5")
    assert code == 0 and "jumps 2 % of the samples (at most 5 %)" in err, err


def test_smooth_of_the_issues_swing_with_300_ms_missing_ends_on_its_readings_turn(tmp_path, capsys, swing) -> None:
    """``mbfg smooth pendulum --params calib.json --ppr 2048`` on a swing from 2.5 rad without the samples
    between t = 0.2135 and 0.5135 s (it swings through the bottom there, 3.3 rad in the gap; the window
    restarts after it): the last filtered angle within 5 counts of the last reading (it ended 2047 counts
    off, for good, when the restart took the turn nearest the reading before the gap)."""
    t, y = swing
    keep = ~((t > 0.2135) & (t < 0.5135))
    after = int(np.searchsorted(t[keep], 0.5135))  # the first sample after the gap
    moved = y[keep][after] - y[keep][after - 1]
    assert abs(moved) > math.pi  # the shortest way from the reading before the gap is a turn off
    out = tmp_path / "out.csv"
    code, err = _smooth(capsys, _calibration(tmp_path / "calib.json"), _write_log(tmp_path / "log.csv", t[keep],
                                                                                   y[keep]), out)
    assert code == 0, err
    assert "1 window restarts" in err, err
    header, *rows = [r.split(",") for r in out.read_text().strip().splitlines()]
    theta = np.array([float(r[header.index("theta")]) for r in rows[-100:]])
    assert np.max(np.abs(theta - y[keep][-100:])) / COUNT < 5.0
