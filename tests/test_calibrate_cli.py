"""``mbfg calibrate`` and ``mbfg crossval``.

The estimation factors compile once per model object, free-parameter set and
log length (tens of seconds on a small machine), so every test here reuses the
same two logs (the pendulum for 1 s at 1 ms, 1001 rows) and the same start
file: the CLI keeps the built-in model with a given parameter file per process
(``mbfg.cli.model_with_params``), so the second calibration from ``start.yaml``
skips the compilation. The error cases fail before any compilation.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import sys
from pathlib import Path

import pytest

from mbfg.cli import build_parser, main
from mbfg.graphs.joint import STATE_ESTIMATION_ITERATIONS
from mbfg.models import pendulum

SIGMA = 0.001  # noise of the simulated readings [rad]
TRUTH = {name: pendulum().parameters[name].default for name in ("J", "b")}


def _run(capsys, *argv: object) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def _fails(capsys, *argv: object) -> str:
    code, out, err = _run(capsys, *argv)
    assert code == 2, (code, out, err)
    assert "error: " in err, err
    return err


D_RIG = 0.15  # [m] the rig's pivot-to-CoM distance, not the built-in 0.12: held fixed, given by file


def _simulate(path: Path, theta: float, seed: int, rig: Path) -> None:
    code = main(["simulate", "pendulum", "--duration", "1", "--dt", "0.001", "--init", f"theta={theta}",
                 "--noise", str(SIGMA), "--seed", str(seed), "--params", str(rig), "--out", str(path), "--quiet"])
    assert code == 0


@pytest.fixture(scope="module")
def calibration(tmp_path_factory) -> dict:
    """Two simulated logs of a rig with d = D_RIG, a start file with that d (fixed), J +25 % and
    b -50 %, and one calibration from it."""
    folder = tmp_path_factory.mktemp("calibrate")
    log, other, rig = folder / "log.csv", folder / "other.csv", folder / "rig.yaml"
    rig.write_text(f"d: {D_RIG!r}\n")
    _simulate(log, 2.5, 0, rig)
    _simulate(other, 2.0, 1, rig)
    start = folder / "start.yaml"
    start.write_text(f"d: {D_RIG!r}\nJ: {TRUTH['J'] * 1.25!r}\nb: {TRUTH['b'] * 0.5!r}\n")
    out = folder / "out.json"
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        code = main(["calibrate", "pendulum", str(log), "--params", str(start), "--free", "J,b", "--json",
                     "--out", str(out)])
    return dict(folder=folder, log=log, other=other, start=start, out=out, code=code,
                stdout=stdout.getvalue(), stderr=stderr.getvalue())


def test_calibrate_json_recovers_the_parameters(calibration):
    assert calibration["code"] == 0, calibration["stderr"]
    doc = json.loads(calibration["stdout"])  # exactly one JSON object, nothing else on stdout
    for key in ("parameters", "cost", "iterations", "converged", "wall_s", "model", "h", "weight"):
        assert key in doc, key
    assert doc["model"] == "pendulum"
    assert set(doc["parameters"]) == {"J", "b"}
    assert doc["converged"] is True
    assert 1 <= doc["iterations"] <= 20
    assert doc["h"] == pytest.approx(0.001)
    assert doc["weight"] == 1e6
    for name, truth in TRUTH.items():
        entry = doc["parameters"][name]
        assert entry["std"] > 0
        assert abs(entry["value"] - truth) <= 3 * entry["std"], (name, entry, truth)
    assert 0 < doc["cost"] < 3 * SIGMA**2  # the noise variance, per time-step
    # the same object went to --out
    assert json.loads(calibration["out"].read_text()) == doc


def test_calibrate_progress_on_stderr(calibration):
    err = calibration["stderr"]
    assert "mbfg calibrate: pendulum, free J, b" in err
    assert "[calibrate pendulum] 1/20" in err and "cost=" in err and "lam=" in err
    summary = err.strip().splitlines()[-1]
    assert summary.startswith("mbfg calibrate: ") and "converged" in summary
    assert f"wrote {calibration['out']}" in summary
    assert " s wall in all (calibration " in summary  # the whole command's time, then the calibration's


def test_calibrate_json_h_is_exact_to_the_logs_decimals(calibration):
    """Issue 21: h is the stride times the sample period rounded to its decimals (0.001 at 1 kHz), not the median
    difference of the log's times 0.0010000000000000009, on stdout and in the --out file."""
    assert calibration["code"] == 0, calibration["stderr"]
    assert json.loads(calibration["stdout"])["h"] == 0.001
    assert '"h": 0.001,' in calibration["out"].read_text()


def test_calibrate_says_compiling_before_the_first_iteration(calibration):
    """Issue 21: the JAX compile (seconds on a first run) is announced on stderr before it starts and timed after
    it, in the words of 'mbfg smooth', before the LM's first progress line."""
    err = calibration["stderr"]
    compiling = err.find("mbfg calibrate: compiling [calibrate pendulum] (JAX) ...\n")
    compiled = err.find("mbfg calibrate: compiled in ")
    first = err.find("[calibrate pendulum] 1/20")
    assert 0 < compiling < compiled < first, err
    assert err[compiled:].split("\n")[0].endswith(" s"), err


def test_crossval_says_compiling_unless_quiet(capsys, calibration):
    code, out, err = _run(capsys, "crossval", "pendulum", calibration["other"], "--params", calibration["out"])
    assert code == 0, err
    compiling = err.find("mbfg crossval: compiling [states pendulum] (JAX) ...\n")
    assert 0 < compiling < err.find("mbfg crossval: compiled in ") < err.find("mbfg crossval: score "), err
    code, out, err = _run(capsys, "crossval", "pendulum", calibration["other"], "--params", calibration["out"],
                          "--quiet")
    assert code == 0, err
    assert "compil" not in err.replace("compiling included", "")  # only the summary line, which says so


def test_crossval_on_another_log(capsys, calibration):
    code, out, err = _run(capsys, "crossval", "pendulum", calibration["other"], "--params", calibration["out"],
                          "--json", "--quiet")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["log"] == str(calibration["other"])
    assert doc["model"] == "pendulum"
    assert doc["h"] == 0.001 and doc["weight"] == 1e6  # recorded in the calibration, exact
    assert doc["n"] == 1001
    score = doc["score"]
    assert math.isfinite(score)
    assert SIGMA**2 / 3 < score < 3 * SIGMA**2, score
    assert err.strip().splitlines()[-1].startswith("mbfg crossval: score ")


def test_crossval_says_when_its_state_estimation_did_not_converge(capsys, calibration):
    """A state estimation stopped at --max-iterations leaves a score above the minimum's: the score is still
    printed, with a warning on stderr, "converged": false in the JSON and exit status 1; at the default limit
    (estimate_states's) the same log converges, with exit status 0."""
    assert build_parser().parse_args(["crossval", "m", "l.csv", "--params", "p"]).max_iterations == \
        STATE_ESTIMATION_ITERATIONS
    code, out, err = _run(capsys, "crossval", "pendulum", calibration["other"], "--params", calibration["start"],
                          "--max-iterations", "1", "--json")
    assert code == 1, err
    doc = json.loads(out)
    assert doc["converged"] is False and doc["iterations"] == 1, doc
    assert "warning: cross-validation on " in err and "did not converge in 1 iterations" in err, err
    assert "raise --max-iterations" in err, err
    assert "NOT converged" in err.strip().splitlines()[-1], err
    code, out, err = _run(capsys, "crossval", "pendulum", calibration["other"], "--params", calibration["start"],
                          "--json", "--quiet")
    assert code == 0, err
    converged = json.loads(out)
    assert converged["converged"] is True and 1 < converged["iterations"] <= STATE_ESTIMATION_ITERATIONS, converged
    assert converged["score"] < doc["score"], (converged["score"], doc["score"])
    assert "warning" not in err, err
    assert "argument --max-iterations: expected at least 1 iteration, got 0" in _fails(
        capsys, "crossval", "pendulum", calibration["other"], "--params", calibration["out"], "--max-iterations", "0")


def test_crossval_simulate_reports_the_free_simulation_error_of_the_calibrated_and_the_start_model(
        capsys, calibration):
    """--simulate: the calibrated model, run free from the other log's first sample for 0.9 s, stays within
    0.1 rad (its error, a few hundredths of a radian, comes from the initial rate fitted to five readings
    with 1 mrad noise); the start model (J +25 %, b -50 %) drifts beyond 0.1 rad within the span and its
    RMS is several times larger. The text output says the same."""
    sims = {}
    for name in ("out", "start"):
        code, out, err = _run(capsys, "crossval", "pendulum", calibration["other"], "--params", calibration[name],
                              "--simulate", "0.9", "--drift-threshold", "0.1", "--json", "--quiet")
        assert code == 0, err
        sims[name] = json.loads(out)["simulation"]
        assert sims[name]["seconds"] == pytest.approx(0.9) and sims[name]["threshold"] == {"theta": 0.1}
    assert sims["out"]["drift_time"]["theta"] is None  # never beyond 0.1 rad
    assert 0 < sims["start"]["drift_time"]["theta"] < 0.9
    assert sims["out"]["rms"]["theta"] < 0.05 and sims["start"]["rms"]["theta"] > 3 * sims["out"]["rms"]["theta"]
    code, out, err = _run(capsys, "crossval", "pendulum", calibration["other"], "--params", calibration["out"],
                          "--simulate", "0.9", "--drift-threshold", "theta=0.1", "--quiet")
    assert code == 0, err
    line = out.strip().splitlines()[1].split()
    assert line[:3] == ["simulate", "theta", "rms"]
    assert float(line[3]) == pytest.approx(sims["out"]["rms"]["theta"], rel=1e-5)
    assert line[4:] == ["drift_time", "inf", "threshold", "0.1"]
    err = _fails(capsys, "crossval", "pendulum", calibration["other"], "--params", calibration["out"], "--simulate", "5")
    assert "--simulate 5" in err and "spans only 1 s" in err


def _score(capsys, calibration: dict, params: Path) -> float:
    """crossval of the pendulum on the other log with the parameter file ``params``."""
    code, out, err = _run(capsys, "crossval", "pendulum", calibration["other"], "--params", params, "--json",
                          "--quiet")
    assert code == 0, err
    return json.loads(out)["score"]


def test_issue_27_the_result_file_is_the_whole_model_for_crossval_and_smooth(capsys, calibration, tmp_path):
    """Round trip: a calibration with a fixed parameter from a file (d) writes every parameter; crossval
    and the stream from that file alone use the same model as the merged parameters; without d the
    built-in default would have been scored (the silent wrong answer); another model's result, or
    one lacking a parameter, is refused by name."""
    from mbfg.graphs.stream import StreamEstimator

    doc = json.loads(calibration["out"].read_text())
    model = pendulum()
    assert set(doc["fixed"]) | set(doc["parameters"]) == set(model.parameters)
    assert not set(doc["fixed"]) & set(doc["parameters"])
    assert doc["fixed"]["d"] == {"value": D_RIG, "unit": "m", "lower": 0.0, "upper": None}
    merged = {name: entry["value"] for part in ("fixed", "parameters") for name, entry in doc[part].items()}
    merged_file = tmp_path / "merged.yaml"
    merged_file.write_text("".join(f"{name}: {value!r}\n" for name, value in merged.items()))
    alone = _score(capsys, calibration, calibration["out"])
    assert alone == pytest.approx(_score(capsys, calibration, merged_file), rel=1e-9)
    estimated_only = tmp_path / "estimated.yaml"  # what the file used to carry: d falls back to 0.12
    estimated_only.write_text("".join(f"{n}: {doc['parameters'][n]['value']!r}\n" for n in ("J", "b")))
    assert alone < 3 * SIGMA**2 < _score(capsys, calibration, estimated_only)
    smoother = StreamEstimator.from_calibration(model, calibration["out"], lag=0.01)
    assert {n: float(v) for n, v in smoother.model.parameters.numpy_values().items()} == merged

    other_model = tmp_path / "other_model.json"
    other_model.write_text(json.dumps(doc | {"model": "furuta"}))
    err = _fails(capsys, "crossval", "pendulum", calibration["other"], "--params", other_model)
    assert "a calibration of model 'furuta', not of 'pendulum'" in err and "other_model.json" in err
    lacking = tmp_path / "lacking.json"
    lacking.write_text(json.dumps(doc | {"fixed": {n: e for n, e in doc["fixed"].items() if n != "d"}}))
    assert "lacks parameter(s) d of 'pendulum'" in _fails(capsys, "crossval", "pendulum", calibration["other"],
                                                          "--params", lacking)
    older = tmp_path / "older.json"
    older.write_text(json.dumps({k: v for k, v in doc.items() if k != "fixed"}))
    assert "no 'fixed' object" in _fails(capsys, "smooth", "pendulum", "--params", older)


def test_calibrate_table_output(capsys, calibration):
    code, out, err = _run(capsys, "calibrate", "pendulum", calibration["log"], "--params", calibration["start"],
                          "--free", "J,b", "--max-iterations", "3", "--quiet")
    assert code == 1, err  # the table is written; the exit status says the solve stopped at its limit
    lines = out.strip().splitlines()
    header = lines[0].split()
    assert header[:3] == ["parameter", "value", "std"] and "bounds" in header
    assert [line.split()[0] for line in lines[1:3]] == ["J", "b"]
    assert lines[-1].startswith("cost ") and "3 LM iterations, NOT converged" in lines[-1]
    assert "reading noise sigma_y " in lines[-1]
    assert "NOT converged (iteration limit 3; its last iteration still lowered the cost by" in err
    assert "raise --max-iterations" in err
    assert "[calibrate" not in err  # --quiet: only the summary line
    assert len(err.strip().splitlines()) == 1
    assert "mbfg calibrate: compiling" not in err and "compiled in" not in err


def test_calibrate_restart_weight_solves_again_at_that_weight_from_a_free_simulation(capsys, calibration):
    """--restart-weight W2 reaches calibrate(restart_weight=W2): the result is the restarted solve's, at w = W2,
    and the table says how many of the iterations came before the restart. What the restart is for (contacts,
    where it finds the minimum a solve from the readings misses) is checked by the Berard and Trinkle (2008) test in
    test_calibration.py; on this smooth log it only has to stay near the truth (its LM stops on the relative
    tolerance, a few std from the truth)."""
    code, out, err = _run(capsys, "calibrate", "pendulum", calibration["log"], "--params", calibration["start"],
                          "--free", "J,b", "--weight", "1e4", "--restart-weight", "1e6", "--json", "--quiet")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["weight"] == 1e6 and doc["converged"] is True
    for name, truth in TRUTH.items():
        assert abs(doc["parameters"][name]["value"] / truth - 1) < 0.01, (name, doc["parameters"][name], truth)
    code, out, err = _run(capsys, "calibrate", "pendulum", calibration["log"], "--params", calibration["start"],
                          "--free", "J,b", "--weight", "1e4", "--restart-weight", "1e6", "--quiet")
    assert code == 0, err
    assert "of them before the restart from a free simulation" in out.strip().splitlines()[-1]


def test_calibrate_plot_writes_the_figure(capsys, calibration, tmp_path):
    """--plot FIG.png: the fit figure is written (a PNG file), and the summary says so."""
    pytest.importorskip("matplotlib")
    figure = tmp_path / "fit.png"
    code, out, err = _run(capsys, "calibrate", "pendulum", calibration["log"], "--params", calibration["start"],
                          "--free", "J,b", "--max-iterations", "3", "--quiet", "--out", tmp_path / "fit.json",
                          "--plot", figure)
    assert code == 1, err  # 3 iterations: not converged, the figure written all the same
    assert out.startswith("parameter ")  # the table still goes to stdout
    data = figure.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 10_000
    summary = err.strip().splitlines()[-1]
    assert summary.endswith(f"wrote {tmp_path / 'fit.json'} and {figure}"), summary


def test_calibrate_plot_is_checked_before_the_calibration(capsys, calibration, tmp_path, monkeypatch):
    """A figure that cannot be written, or a missing matplotlib, is said at once (exit 2), not after the fit."""
    missing = tmp_path / "nosuch" / "fit.png"
    err = _fails(capsys, "calibrate", "pendulum", calibration["log"], "--plot", missing)
    assert err.startswith(f"mbfg: error: --plot {missing}: folder ") and "does not exist" in err
    assert "[calibrate" not in err
    if _importable("matplotlib"):
        err = _fails(capsys, "calibrate", "pendulum", calibration["log"], "--plot", tmp_path / "fit.xyz")
        assert err.startswith(f"mbfg: error: --plot {tmp_path / 'fit.xyz'}: expected a file name ending in a "
                              "figure format, e.g. .png, .pdf or .svg")
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")] or ["matplotlib"]:
        monkeypatch.setitem(sys.modules, name, None)  # as if not installed
    err = _fails(capsys, "calibrate", "pendulum", calibration["log"], "--quiet", "--plot", tmp_path / "fit.png")
    assert err == (f"mbfg: error: --plot {tmp_path / 'fit.png'}: plotting a calibration needs matplotlib: "
                   "pip install 'mbfg[plot]' (or pip install matplotlib)\n")
    assert not (tmp_path / "fit.png").exists()


def _importable(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(name) is not None


def test_calibrate_prior_holds_a_parameter_at_its_start(capsys, calibration):
    """--prior J=SIGMA with SIGMA far below what the log tells: J stays at the start (+25 %), b is still fitted."""
    start_J = TRUTH["J"] * 1.25
    code, out, err = _run(capsys, "calibrate", "pendulum", calibration["log"], "--params", calibration["start"],
                          "--free", "J,b", "--prior", f"J={start_J * 1e-6!r}", "--json", "--quiet")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["priors"] == {"J": pytest.approx(start_J * 1e-6)}
    assert doc["parameters"]["J"]["value"] == pytest.approx(start_J, rel=1e-5)
    # The std is the data's (priors are not in the covariance): far above the prior's sigma.
    assert doc["parameters"]["J"]["std"] > 100 * start_J * 1e-6
    free_fit = json.loads(calibration["stdout"])["parameters"]["J"]["value"]
    assert abs(free_fit - start_J) > 0.1 * TRUTH["J"]  # without the prior J moves well away from the start
    assert doc["parameters"]["b"]["value"] != pytest.approx(TRUTH["b"] * 0.5, rel=1e-3)


# --------------------------------------------------------------------------------------
# errors (all before any compilation)
# --------------------------------------------------------------------------------------


def test_error_unknown_free_parameter(capsys, calibration):
    err = _fails(capsys, "calibrate", "pendulum", calibration["log"], "--free", "J,nosuch")
    assert err.startswith("mbfg: error: --free J,nosuch: pendulum has no parameter 'nosuch'")


def test_error_log_without_theta(capsys, tmp_path):
    log = tmp_path / "bad.csv"
    log.write_text("t,phi\n" + "".join(f"{k * 0.001!r},0.0\n" for k in range(10)))
    err = _fails(capsys, "calibrate", "pendulum", log, "--quiet")
    assert err.startswith("mbfg: error: ") and "'theta'" in err and str(log) in err


def test_error_dt_not_a_multiple_of_the_period(capsys, calibration):
    err = _fails(capsys, "calibrate", "pendulum", calibration["log"], "--dt", "0.0015", "--quiet")
    assert err.startswith("mbfg: error: --dt 0.0015:") and "multiple" in err and "0.001" in err
    err = _fails(capsys, "crossval", "pendulum", calibration["other"], "--params", calibration["start"],
                 "--dt", "0.0025")
    assert err.startswith("mbfg: error: --dt 0.0025:")


def test_error_negative_weight(capsys, calibration):
    err = _fails(capsys, "calibrate", "pendulum", calibration["log"], "--weight", "-1")
    assert "--weight" in err and "-1" in err


@pytest.mark.parametrize("prior, expected", [
    ("J", "expected NAME=SIGMA items separated by commas, e.g. J=1e-4, got 'J'"),
    ("d=1e-3", "'d' is not a parameter being estimated (J, b)"),
    ("J=1e-4,J=2e-4", "parameter 'J' is given twice"),
    ("J=0", "the sigma of 'J' must be a positive number, got '0'"),
    ("J=abc", "the sigma of 'J' must be a positive number, got 'abc'"),
])
def test_error_bad_prior(capsys, calibration, prior, expected):
    err = _fails(capsys, "calibrate", "pendulum", calibration["log"], "--free", "J,b", "--prior", prior)
    assert err.startswith(f"mbfg: error: --prior {prior}: {expected}"), err


def test_error_prior_on_the_tilt_rotation(capsys, calibration):
    err = _fails(capsys, "calibrate", "furuta", calibration["log"], "--free", "K,tilt", "--prior", "tilt=0.01")
    assert err.startswith("mbfg: error: --prior tilt=0.01: 'tilt' is a rotation; priors are for scalar parameters")


def test_error_bad_params_and_out(capsys, calibration, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("J: -1.0\n")
    err = _fails(capsys, "calibrate", "pendulum", calibration["log"], "--params", bad)
    assert err.startswith(f"mbfg: error: --params {bad}: ") and "'J'" in err
    err = _fails(capsys, "calibrate", "pendulum", calibration["log"], "--out", tmp_path / "nosuch" / "x.json")
    assert err.startswith("mbfg: error: --out ")
    err = _fails(capsys, "crossval", "pendulum", calibration["other"], "--params", tmp_path / "missing.json")
    assert "missing.json" in err
    _fails(capsys, "crossval", "pendulum", calibration["other"])  # --params is required


def test_help_has_examples(capsys):
    code, out, _ = _run(capsys, "calibrate", "--help")
    assert code == 0
    assert "mbfg calibrate pendulum log.csv --free J,b --json" in out
    assert "mbfg simulate pendulum --duration 2 --dt 0.001 --init theta=2.5 --noise 0.001 --out log.csv" in out
    code, out, _ = _run(capsys, "crossval", "--help")
    assert code == 0 and "mbfg crossval pendulum other.csv --params calib.json" in out
    code, out, _ = _run(capsys, "--help")
    assert code == 0 and "calibrate" in out and "crossval" in out
    code, out, _ = _run(capsys, "calibrate", "--help")
    assert "--plot FIG.png" in out and "pip install 'mbfg[plot]'" in out


def test_an_unconverged_calibration_says_why_from_its_last_gain_ratios():
    """At the iteration limit the summary tells kink-limited steps (gain ratio near 1: more iterations; named as
    dry friction's kinks only for a model with complementarity rows) from a poor linearization (gain ratio well
    below 1: a large-residual problem; a lower weight, with what it costs)."""
    from mbfg.cli.calibrate import why_not_converged

    def history(rhos):
        return [dict(cost=1.0, rho=float("nan"))] + [dict(cost=0.9 - 0.01 * i, rho=r) for i, r in enumerate(rhos)]

    # The ratios of the two real rigs' iterations at the limit of 20, as benchmarks/real_rigs.py prints them (the
    # commands in why_not_converged's docstring; QUBE-Servo at its weight, DFKI double pendulum at 1e6), the
    # first ones left out: only the last eight count.
    qube = history([0.3, 0.3, 0.994, 0.994, 0.994, 0.994, 0.598, 0.915, 0.667, 0.387])
    said = why_not_converged(qube, piecewise=True)
    assert "gain ratio 0.95" in said and "sticking and sliding" in said and "raise --max-iterations" in said
    assert "--weight" not in said
    assert "sticking" not in why_not_converged(qube, piecewise=False)
    dfki = history([1.0, 1.0, 0.462, 0.384, 0.354, 0.353, 0.317, 0.0747, 0.0269, 0.0642])
    poor = why_not_converged(dfki, piecewise=True)
    assert "won 0.33 of the decrease" in poor and "large-residual" in poor
    assert "lower --weight converges sooner, but keep the table's sigma_y at or above the sensor's noise" in poor
    assert "lowered the cost by 1.2 %" in poor
