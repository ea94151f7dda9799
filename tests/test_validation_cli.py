"""Validation a lab trusts (issue 55 item 5): ``crossval --simulate`` drift thresholds per coordinate (0.1 of the
recording's range by default, or given), ``simulate --init`` with initial rates, and the cross-validation and the
free simulation written as files (--out, --simulation-out), whole or not at all, never over an input.

One test compiles (a linear-stage simulation, its state estimation and the stepper); the bad inputs stop before.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from mbfg.cli import main
from mbfg.errors import DataError
from mbfg.logs import Log, read_log
from mbfg.validation import DRIFT_FRACTION, drift_thresholds


def _controls(path: Path) -> None:
    """A 2 Hz current of 0.5 A (75 N at the stage's K_F = 150 N/A) over 0.5 s, held between rows 10 ms apart."""
    t = np.round(np.arange(51) * 0.01, 2)
    path.write_text("t,current\n" + "".join(f"{float(a)!r},{float(0.5 * np.sin(2 * np.pi * 2 * a))!r}\n" for a in t))


def test_stage_free_simulation_thresholds_and_files(tmp_path: Path, capsys) -> None:
    controls, log_path = tmp_path / "current.csv", tmp_path / "stage.csv"
    _controls(controls)
    # Moving at 0.1 m/s at t = 0: the rate --init gives is the slope of the first steps.
    assert main(["simulate", "linear-stage", "--duration", "0.4", "--dt", "0.001", "--controls", str(controls),
                 "--init", "x=0.02:0.1", "--out", str(log_path), "--quiet"]) == 0
    capsys.readouterr()
    log = read_log(log_path, ["x"], ["current"])
    assert log.y[0, 0] == 0.02
    # Spook's first position step is h v_1, with the viscous force taken at v_1 (implicit, as the joint's friction
    # rows are solved with the new velocity) and the current 0 at t = 0: (M + J_r) (v_1 - v_0) = -h (F_v v_1 + F_c),
    # the stage's built-in values M + J_r = 5 + 1.18 kg, F_v = 20 N s/m, F_c = 8 N.
    v1 = (6.18 * 0.1 - 0.001 * 8.0) / (6.18 + 0.001 * 20.0)
    assert (log.y[1, 0] - log.y[0, 0]) / 0.001 == pytest.approx(v1, rel=1e-6)

    params, out, sim = tmp_path / "p.yaml", tmp_path / "cv.json", tmp_path / "sim.csv"
    params.write_text("M: 5.0\n")
    code = main(["crossval", "linear-stage", str(log_path), "--params", str(params), "--simulate", "0.3",
                 "--out", str(out), "--simulation-out", str(sim), "--json", "--quiet", "--max-iterations", "3"])
    captured = capsys.readouterr()
    printed = json.loads(captured.out)
    doc = json.loads(out.read_text())
    assert doc == printed
    # The score's state estimation is cut short (what is checked here is the simulation and the files); the
    # exit status says so, and the files are written all the same.
    assert (code, doc["status"], doc["iterations"]) == (1, "not_converged", 3), captured.err
    x = log.y[:, 0]
    threshold = DRIFT_FRACTION * (x.max() - x.min())  # the whole recording's range
    assert doc["simulation"]["threshold"] == {"x": pytest.approx(threshold, rel=1e-12)}
    assert doc["simulation"]["threshold_source"] == "0.1 of the recording's range"
    with sim.open() as fh:
        rows = list(csv.reader(fh))
    assert rows[0] == ["t", "x", "x_simulated", "x_error"]
    table = np.array(rows[1:], dtype=float)
    assert len(table) == 301 and table[0, 0] == 0.0 and table[-1, 0] == pytest.approx(0.3)
    np.testing.assert_array_equal(table[:, 1], x[:301])  # the recording as read
    np.testing.assert_allclose(table[:, 3], table[:, 2] - table[:, 1], rtol=0, atol=1e-15)
    rms = float(np.sqrt(np.mean(table[:, 3] ** 2)))
    assert doc["simulation"]["rms"]["x"] == pytest.approx(rms, rel=1e-9)
    # The same model from the log's first reading and its fitted rate follows the log it made: within 1 % of
    # the stroke over 0.3 s (the rate fitted to the first 5 samples is off by the deceleration over them).
    assert rms < 0.01 * (x.max() - x.min())
    beyond = np.flatnonzero(np.abs(table[:, 3]) > threshold)
    assert doc["simulation"]["drift_time"]["x"] == (table[beyond[0], 0] if beyond.size else None)


def test_drift_thresholds_given_per_coordinate_or_refused_by_name() -> None:
    log = Log(np.arange(4) * 0.1, np.array([[0.0, 1.0], [0.5, 1.0], [1.0, 1.0], [0.2, 1.0]]), np.zeros((4, 0)),
              ("a", "b"), (), "two.csv")
    assert drift_thresholds(log, {"a": 0.1, "b": 0.2}) == ({"a": 0.1, "b": 0.2}, "given")
    assert drift_thresholds(log, 0.3)[0] == {"a": 0.3, "b": 0.3}
    with pytest.raises(DataError, match=r"two.csv: observation 'b' spans no range"):
        drift_thresholds(log)
    with pytest.raises(DataError, match=r"'c' is not an observation of the log \(a, b\)"):
        drift_thresholds(log, {"a": 0.1, "b": 0.1, "c": 1.0})
    with pytest.raises(DataError, match=r"no threshold for observation 'b'"):
        drift_thresholds(log, {"a": 0.1})
    with pytest.raises(DataError, match=r"drift threshold of 'a': expected a number > 0"):
        drift_thresholds(log, {"a": -1.0, "b": 0.1})


def _stage_log(path: Path) -> None:
    t = np.arange(200) * 0.001
    path.write_text("t,x,current\n" + "".join(f"{float(a)!r},{float(0.01 * np.sin(5 * a))!r},0.0\n" for a in t))


CROSSVAL = ("crossval", "linear-stage", "{d}/stage.csv", "--params", "{d}/p.yaml", "--quiet")

BAD = [
    pytest.param([*CROSSVAL, "--drift-threshold", "x=0.01"], ["--drift-threshold", "--simulate"], [],
                 id="drift-threshold-without-simulate"),
    pytest.param([*CROSSVAL, "--simulate", "0.1", "--drift-threshold", "y=0.01"], ["--drift-threshold", "'y'", "x"],
                 [], id="drift-threshold-of-no-coordinate"),
    pytest.param([*CROSSVAL, "--simulate", "0.1", "--drift-threshold", "x=-1"], ["--drift-threshold", "'x'"], [],
                 id="drift-threshold-negative"),
    pytest.param([*CROSSVAL, "--simulation-out", "{d}/sim.csv"], ["--simulation-out", "--simulate"], ["sim.csv"],
                 id="simulation-out-without-simulate"),
    pytest.param([*CROSSVAL, "--out", "{d}/stage.csv"], ["--out", "{d}/stage.csv", "LOG"], [],
                 id="out-over-the-log"),
    pytest.param([*CROSSVAL, "--out", "{d}/p.yaml"], ["--out", "--params"], [], id="out-over-the-params"),
    pytest.param([*CROSSVAL, "--simulate", "0.1", "--out", "{d}/a.json", "--simulation-out", "{d}/a.json"],
                 ["--simulation-out", "--out"], ["a.json"], id="two-outputs-one-file"),
    pytest.param(["simulate", "linear-stage", "--duration", "0.01", "--dt", "0.001", "--init", "x=0.1:fast",
                  "--out", "{d}/s.csv"], ["--init", "x=0.1:fast", "rate"], ["s.csv"], id="simulate-init-rate-text"),
    pytest.param(["simulate", "linear-stage", "--duration", "0.01", "--dt", "0.001", "--init", "x=0.1:1e9",
                  "--out", "{d}/s.csv"], ["--init", "x=0.1:1e9"], ["s.csv"], id="simulate-init-rate-1e9"),
]


@pytest.mark.parametrize(("argv", "needles", "absent"), BAD)
def test_bad_validation_option_exits_2_naming_it(capsys, tmp_path: Path, argv: list[str], needles: list[str],
                                                 absent: list[str]) -> None:
    _stage_log(tmp_path / "stage.csv")
    (tmp_path / "p.yaml").write_text("M: 5.0\n")
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    code = main([a.format(d=tmp_path) for a in argv])
    err = capsys.readouterr().err
    assert code == 2, err
    for needle in needles:
        assert needle.format(d=tmp_path) in err, (needle, err)
    for name in absent:
        assert not (tmp_path / name).exists(), f"{name} was left behind"
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.name in before} == before  # inputs untouched
