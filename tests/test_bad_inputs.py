"""The worst bad inputs (issue 20): commands, files and Python API calls that a user gets wrong.

Each must fail with exit status 2 (command line, an ``mbfg: error:`` line) or the project's exception
(:class:`mbfg.errors.MbfgError`, API), with a message naming the option, file, line or argument at fault: never
a traceback from deep inside, a quiet success with a frozen or silently altered result, or an empty output
file left behind.

Kept quick: every command runs in this process (``mbfg.cli.main``) with tiny durations, and the checks run
before the stepper compiles, except the noise overflow and the partial parameter dict (one pendulum scan of
10 steps) and the three ``smooth`` inputs (one stream compile, shared through the process).
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest

from mbfg import furuta, pendulum
from mbfg.calibration import calibrate
from mbfg.cli import _rigid_model, main
from mbfg.errors import DataError, MbfgError, ModelError
from mbfg.logs import Log
from mbfg.parameters import load_parameter_file
from mbfg.rigid import State
from mbfg.spook import simulate

SIM = ("simulate", "pendulum", "--duration", "0.01", "--dt", "0.001", "--quiet")


def _calibration(**entries: dict) -> str:
    """A pendulum calibration result (the JSON of ``mbfg calibrate --out``) with ``entries`` replacing
    parameter entries (J and b estimated, the others fixed)."""
    p = pendulum().parameters
    free = ("J", "b")
    doc = {
        "model": "pendulum",
        "parameters": {n: {"value": p[n].default, "std": 1e-6, "lower": p[n].lower, "upper": None} for n in free},
        "fixed": {n: {"value": p[n].default} for n in p if n not in free},
        "h": 0.001, "weight": 1e6, "sigma_observation": 1e-3,
    }
    for name, entry in entries.items():
        doc["parameters" if name in free else "fixed"][name] = entry
    return json.dumps(doc)


GOOD_CALIBRATION = _calibration()
CROSSED_BOUNDS = _calibration(J={"value": 0.0016, "lower": 0.01, "upper": 0.001})
SMOOTH = ("smooth", "pendulum", "--params", "{d}/calib.json", "--output", "{d}/out.csv", "--quiet")

# (argv, files to write first, substrings the error must contain, files that must not exist afterwards);
# "{d}" is the test's folder.
CLI_CASES = [
    pytest.param([*SIM, "--init", "theta=1e308", "--out", "{d}/x.csv"], {}, ["--init", "theta=1e308"], ["x.csv"],
                 id="simulate-init-1e308-would-freeze-the-log"),
    pytest.param([*SIM, "--init", "theta=nan", "--out", "{d}/x.csv"], {}, ["--init", "theta=nan"], ["x.csv"],
                 id="simulate-init-nan"),
    pytest.param([*SIM, "--init", "phi=1", "--out", "{d}/x.csv"], {}, ["--init", "phi", "theta"], ["x.csv"],
                 id="simulate-init-unknown-joint"),
    pytest.param(["simulate", "pendulum", "--duration", "20", "--dt", "10", "--out", "{d}/x.csv"], {}, ["--dt 10"],
                 ["x.csv"], id="simulate-dt-10"),
    pytest.param(["simulate", "pendulum", "--duration", "0.01", "--dt", "0.01", "--out", "{d}/x.csv"], {},
                 ["--dt 0.01", "--duration 0.01"], ["x.csv"], id="simulate-dt-not-smaller-than-duration"),
    pytest.param(["simulate", "pendulum", "--duration", "0.01", "--dt", "0.003", "--out", "{d}/x.csv"], {},
                 ["--duration 0.01", "--dt 0.003"], ["x.csv"], id="simulate-duration-not-whole-steps"),
    pytest.param([*SIM, "--params", "{d}/calib.json", "--out", "{d}/x.csv"], {"calib.json": CROSSED_BOUNDS},
                 ["{d}/calib.json", "'J'", "lower bound"], ["x.csv"], id="simulate-calibration-json-lower-above-upper"),
    pytest.param([*SIM, "--params", "{d}/p.yaml", "--out", "{d}/x.csv"], {"p.yaml": "J: {lower: 0.01, upper: 0.001}\n"},
                 ["{d}/p.yaml", "'J'", "lower bound"], ["x.csv"], id="simulate-yaml-lower-above-upper"),
    pytest.param([*SIM, "--params", "{d}/p.json", "--out", "{d}/x.csv"], {"p.json": '{"J": "abc"}'},
                 ["{d}/p.json", "'J'", "'abc'"], ["x.csv"], id="simulate-params-value-not-a-number"),
    pytest.param([*SIM, "--params", "{d}/p.json", "--out", "{d}/x.csv"], {"p.json": '{"J": -0.001}'},
                 ["{d}/p.json", "'J'", "bounds"], ["x.csv"], id="simulate-params-negative-inertia"),
    pytest.param([*SIM, "--params", "{d}/p.json", "--out", "{d}/x.csv"], {"p.json": '{"Jx": 0.001}'},
                 ["{d}/p.json", "'Jx'"], ["x.csv"], id="simulate-params-unknown-name"),
    pytest.param([*SIM, "--params", "{d}/p.json", "--out", "{d}/x.csv"], {"p.json": '{"J": 0.001,'},
                 ["{d}/p.json", "not valid JSON"], ["x.csv"], id="simulate-params-broken-json"),
    pytest.param([*SIM, "--params", "{d}/nothere.yaml", "--out", "{d}/x.csv"], {}, ["{d}/nothere.yaml"], ["x.csv"],
                 id="simulate-params-missing-file"),
    pytest.param([*SIM, "--controls", "{d}/u.csv", "--out", "{d}/x.csv"], {"u.csv": "t,u\n0,1\n1,1\n"},
                 ["--controls", "{d}/u.csv"], ["x.csv"], id="simulate-controls-for-a-model-without-controls"),
    pytest.param([*SIM, "--out", "{d}/nofolder/x.csv"], {}, ["--out", "nofolder"], [],
                 id="simulate-out-folder-missing"),
    # The simulation itself is fine; the noise would write 1e307-sized angles (or inf) as a log.
    pytest.param([*SIM, "--noise", "1e308", "--seed", "1", "--out", "{d}/x.csv"], {}, ["theta", "noise sigma 1e+308"],
                 ["x.csv"], id="simulate-noise-overflows-the-log"),
    pytest.param([*SMOOTH, "--input", "{d}/log.csv"], {"calib.json": GOOD_CALIBRATION, "log.csv": "x,y\n0,1\n"},
                 ["{d}/log.csv, line 1", "'t'"], ["out.csv"], id="smooth-wrong-header-leaves-no-output"),
    pytest.param([*SMOOTH, "--input", "{d}/log.csv"], {"calib.json": GOOD_CALIBRATION, "log.csv": ""},
                 ["{d}/log.csv", "empty"], ["out.csv"], id="smooth-empty-input-leaves-no-output"),
    pytest.param([*SMOOTH, "--columns", "t,theta", "--input", "{d}/log.csv"],
                 {"calib.json": GOOD_CALIBRATION, "log.csv": "\nt,alpha\n0,1\n"},
                 ["{d}/log.csv, line 2", "--columns"], ["out.csv"], id="smooth-header-disagrees-with-columns"),
    pytest.param([*SMOOTH, "--input", "{d}/log.csv"], {"calib.json": CROSSED_BOUNDS, "log.csv": "t,theta\n0,1\n"},
                 ["{d}/calib.json", "'J'", "lower bound"], ["out.csv"], id="smooth-calibration-lower-above-upper"),
    pytest.param([*SMOOTH, "--input", "{d}/log.csv"],
                 {"calib.json": _calibration(J={"value": 0.0016, "lower": "zero"}), "log.csv": "t,theta\n0,1\n"},
                 ["{d}/calib.json", "'J.lower'"], ["out.csv"], id="smooth-calibration-bound-not-a-number"),
    pytest.param([*SMOOTH, "--input", "{d}/nothere.csv"], {"calib.json": GOOD_CALIBRATION},
                 ["--input", "{d}/nothere.csv"], ["out.csv"], id="smooth-input-missing"),
    pytest.param([*SMOOTH, "--counts", "--input", "{d}/log.csv"], {"calib.json": GOOD_CALIBRATION},
                 ["--counts", "--ppr"], ["out.csv"], id="smooth-counts-without-ppr"),
]


@pytest.mark.parametrize(("argv", "files", "needles", "absent"), CLI_CASES)
def test_bad_command_exits_2_naming_the_culprit(capsys, tmp_path: Path, argv: list[str], files: dict[str, str],
                                                needles: list[str], absent: list[str]) -> None:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    code = main([a.format(d=tmp_path) for a in argv])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "error: " in err, err
    for needle in needles:
        assert needle.format(d=tmp_path) in err, (needle, err)
    for name in absent:
        assert not (tmp_path / name).exists(), f"{name} was left behind"


@pytest.mark.parametrize(("data", "needles"), [
    pytest.param(b"\n\ntime,angle\n0,1\n", ["standard input, line 3", "'t'"], id="wrong-header"),
    pytest.param(b"", ["standard input", "empty"], id="empty"),
])
def test_smooth_on_stdin_with_a_bad_start_leaves_no_output(capsys, monkeypatch, tmp_path: Path, data: bytes,
                                                           needles: list[str]) -> None:
    """A pipe is read after the compile (its first line may be minutes away), so its header is checked in the
    reading loop, not by the early check of a file: that path must not leave an output behind either."""
    (tmp_path / "calib.json").write_text(GOOD_CALIBRATION)
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(data)))
    assert main([a.format(d=tmp_path) for a in SMOOTH]) == 2
    err = capsys.readouterr().err
    for needle in needles:
        assert needle in err, (needle, err)
    assert not (tmp_path / "out.csv").exists()


def test_smooth_with_a_wrong_header_leaves_an_existing_output_as_it_was(capsys, tmp_path: Path) -> None:
    """Not even truncated: the output is opened only after the input's header is checked."""
    (tmp_path / "calib.json").write_text(GOOD_CALIBRATION)
    (tmp_path / "log.csv").write_text("time,angle\n0,1\n")
    (tmp_path / "out.csv").write_text("yesterday's estimates\n")
    assert main([a.format(d=tmp_path) for a in (*SMOOTH, "--input", "{d}/log.csv")]) == 2
    assert "line 1" in capsys.readouterr().err
    assert (tmp_path / "out.csv").read_text() == "yesterday's estimates\n"


# --------------------------------------------------------------------------------------------------------------
# Python API
# --------------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def model():
    return _rigid_model("pendulum")  # the object the commands above simulate: its stepper is compiled once


@pytest.fixture(scope="module")
def furuta_model():
    return furuta()


def _log(model, n: int = 5) -> Log:
    """A well-formed (still) log of ``model``, so that only the argument under test is wrong."""
    t = np.arange(n) * 1e-3
    return Log(t, np.zeros((n, len(model.observations))), np.zeros((n, len(model.controls))), model.observations,
               model.controls, "test-log")


SIMULATE_CASES = [
    pytest.param({"parameters": {"J": "abc"}}, ModelError, ["parameters", "'J'", "'abc'"], id="parameter-a-string"),
    pytest.param({"parameters": {"Jx": 0.002}}, ModelError, ["parameters", "'Jx'"], id="parameter-unknown-name"),
    pytest.param({"parameters": {"J": -0.002}}, ModelError, ["parameters", "'J'", "bounds"], id="parameter-negative"),
    pytest.param({"parameters": {"J": np.ones(3)}}, ModelError, ["parameters", "'J'"], id="parameter-an-array"),
    pytest.param({"parameters": [("J", 0.002)]}, ModelError, ["parameters", "mapping"], id="parameters-a-list"),
    pytest.param({"initial": {"theta": 1}}, ModelError, ["initial", "State", "initial_state"], id="initial-a-dict"),
    pytest.param({"initial": State(np.zeros(3), np.array([1.0, 0, 0, 0]), np.zeros(3), np.zeros(3))}, ModelError,
                 ["initial", "field r", "(1, 3)"], id="initial-unbatched-state"),
    pytest.param({"controls": np.ones((10, 1))}, ModelError, ["controls", "(10, 0)"], id="controls-for-no-controls"),
    pytest.param({"h": "0.001"}, ModelError, ["h:", "'0.001'"], id="h-a-string"),
    pytest.param({"duration": float("nan")}, ModelError, ["duration", "nan"], id="duration-nan"),
    pytest.param({"chunk": 0}, ModelError, ["chunk"], id="chunk-zero"),
]


@pytest.mark.parametrize(("change", "error", "needles"), SIMULATE_CASES)
def test_bad_simulate_argument_is_named(model, change: dict, error: type[MbfgError], needles: list[str]) -> None:
    args = {"duration": 0.01, "h": 1e-3} | change
    with pytest.raises(error) as info:
        simulate(model, args.pop("duration"), args.pop("h"), **args)
    for needle in needles:
        assert needle in str(info.value), (needle, str(info.value))


def test_simulate_model_not_a_model() -> None:
    with pytest.raises(ModelError, match=r"^model: expected a RigidModel.*got str"):
        simulate("pendulum", 0.01, 1e-3)  # type: ignore[arg-type]


@pytest.mark.parametrize(("change", "needles"), [
    pytest.param({"ppr": "2048"}, ["ppr", "'2048'"], id="ppr-a-string"),
    pytest.param({"noise": -1e-3}, ["noise", "-0.001"], id="noise-negative"),
    pytest.param({"resolution": 0.0}, ["resolution", "0.0"], id="resolution-zero"),
])
def test_bad_to_log_argument_is_named(model, change: dict, needles: list[str]) -> None:
    trajectory = simulate(model, 0.01, 1e-3)
    with pytest.raises(ModelError) as info:
        trajectory.to_log(**change)
    for needle in needles:
        assert needle in str(info.value), (needle, str(info.value))


def test_a_partial_parameter_dict_overrides_only_the_names_it_gives(model) -> None:
    """``{"J": 0.002}`` was a KeyError 'd': the dict replaced the whole parameter set."""
    x0 = model.initial_state({"theta": 1.0})
    partial = simulate(model, 0.01, 1e-3, initial=x0, parameters={"J": 0.002})
    whole = simulate(model, 0.01, 1e-3, initial=x0, parameters=model.parameters.numpy_values() | {"J": 0.002})
    default = simulate(model, 0.01, 1e-3, initial=x0)
    np.testing.assert_array_equal(partial.observations, whole.observations)
    assert not np.array_equal(partial.observations, default.observations)  # J did change


CALIBRATE_CASES = [
    pytest.param({"log": np.zeros((5, 2))}, DataError, ["log:", "Log", "ndarray"], id="log-an-array"),
    pytest.param({"free": "b_1"}, ModelError, ["free", "['b_1']", "string"], id="free-a-string"),
    pytest.param({"free": ["b_1", "K", "b_1"]}, ModelError, ["free", "'b_1'", "twice"], id="free-twice"),
    pytest.param({"free": ["b1"]}, ModelError, ["free", "'b1'", "b_1"], id="free-unknown-name"),
    pytest.param({"weight": 0}, ModelError, ["weight", "positive"], id="weight-zero"),
    pytest.param({"h": -1e-3}, ModelError, ["h:", "-0.001"], id="h-negative"),
    pytest.param({"priors": {"K": -1.0}}, ModelError, ["priors['K']", "-1.0"], id="prior-sigma-negative"),
    pytest.param({"max_iterations": 2.5}, ModelError, ["max_iterations", "2.5"], id="iterations-not-whole"),
    pytest.param({"damping_update": "fast"}, ModelError, ["damping_update", "'fast'"], id="damping-rule-unknown"),
    pytest.param({"backtracking": -1}, ModelError, ["backtracking", ">= 0", "-1"], id="backtracking-negative"),
]


@pytest.mark.parametrize(("change", "error", "needles"), CALIBRATE_CASES)
def test_bad_calibrate_argument_is_named(furuta_model, change: dict, error: type[MbfgError],
                                         needles: list[str]) -> None:
    args = {"log": _log(furuta_model)} | change
    with pytest.raises(error) as info:
        calibrate(furuta_model, **args, quiet=True)
    for needle in needles:
        assert needle in str(info.value), (needle, str(info.value))


def test_with_free_refuses_a_string(furuta_model) -> None:
    with pytest.raises(ModelError, match=r"free: expected a list of parameter names, e\.g\. \['b_1'\]"):
        furuta_model.parameters.with_free("b_1")
    assert furuta_model.parameters.with_free(["b_1"]).free == ("b_1",)


def test_unbounded_names_the_scalars_without_a_finite_box_and_leaves_out_rotations(furuta_model) -> None:
    params = furuta_model.parameters.updated({"K": {"upper": 1.0}})
    assert params.unbounded(["K", "tilt", "b_1", "J_Ax"]) == ["b_1", "J_Ax"]
    assert params.unbounded(["K", "tilt"]) == []


def test_load_parameter_file_checks_a_calibrations_bounds(tmp_path: Path, model) -> None:
    path = tmp_path / "calib.json"
    path.write_text(CROSSED_BOUNDS)
    with pytest.raises(ModelError, match=rf"^{path}: parameter 'J': lower bound 0.01 is above the upper bound 0.001"):
        load_parameter_file(path, model)
    # The bounds of a good one travel with its values: the model calibrated is the model read back.
    path.write_text(_calibration(b={"value": 0.002, "lower": 0.001, "upper": 0.01}))
    changes = load_parameter_file(path, model)
    assert changes["b"] == {"value": 0.002, "lower": 0.001, "upper": 0.01}
    assert model.with_parameters(changes).parameters["b"].upper == 0.01
