"""The worst bad inputs (issue 20): commands, files and Python API calls that a user gets wrong.

Each must fail with exit status 2 (command line, an ``mbfg: error:`` line) or the project's exception
(:class:`mbfg.errors.MbfgError`, API), with a message naming the option, file, line or argument at fault: never
a traceback from deep inside, a quiet success with a frozen or silently altered result, or an empty output
file left behind.

Kept quick: every command runs in this process (``mbfg.cli.main``) with tiny durations, and the checks run
before the stepper compiles, except the noise overflow and the partial parameter dict (one pendulum scan of
10 steps) and the ``smooth`` inputs that reach the stream (one stream compile, shared through the process).

The second half is issue 53's battery (a hostile tester's): outputs that are inputs, sizes beyond memory and
time, numbers out of range in every kind of file, logs of another model, messages in the command line's words;
each list there is one category.
"""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import numpy as np
import pytest

from mbfg import furuta, pendulum
from mbfg.calibration import calibrate
from mbfg.cli import main, rigid_model
from mbfg.errors import DataError, LimitError, MbfgError, ModelError
from mbfg.logs import Log, write_log
from mbfg.models import load_model
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
    return rigid_model("pendulum")  # the object the commands above simulate: its stepper is compiled once


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
    # The LM's and the workflow's fields are checked where their objects are made (tests/test_lm_config.py).
    pytest.param({"lm": {"max_iterations": 5}}, ModelError, ["lm:", "LMConfig", "dict"], id="lm-a-dict"),
    pytest.param({"options": {"bias": True}}, ModelError, ["options:", "CalibrationOptions", "dict"],
                 id="options-a-dict"),
]


@pytest.mark.parametrize(("change", "error", "needles"), CALIBRATE_CASES)
def test_bad_calibrate_argument_is_named(furuta_model, change: dict, error: type[MbfgError],
                                         needles: list[str]) -> None:
    args = {"log": _log(furuta_model)} | change
    with pytest.raises(error) as info:
        calibrate(furuta_model, **args)
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


# --------------------------------------------------------------------------------------------------------------
# Issue 53: a hostile tester's battery. Every case is refused before a program is compiled (the checks run where
# the input enters), so the whole battery takes seconds. The categories (each list below is one):
#   CLOBBER   an output that is one of the command's inputs, or another of its outputs
#   LIMITS    durations, windows, counts and horizons beyond what memory and time allow
#   NUMBERS   numeric inputs not finite or out of range: options, parameter files, calibration JSON, URDF,
#             trajectory rows, log times
#   COLUMNS   a log with columns the model does not have (issue 52 item 6), --columns that do not fit
#   NAMES     refusals that must name the command line's options (not the Python arguments) or the right thing
# and API_CASES for the Python API (the exception type and the words of its message).
# --------------------------------------------------------------------------------------------------------------

PENDULUM_LOG = "t,theta\n" + "".join(f"{k / 1000!r},{0.1 * k / 1000!r}\n" for k in range(20))
FURUTA_LOG = "t,theta,alpha,u\n" + "".join(f"{k / 1000!r},0.0,0.0,0.0\n" for k in range(20))
CHAIN_URDF = """<?xml version="1.0"?>
<robot name="two">
  <link name="base"/>
  <link name="l1"><inertial><origin xyz="0 0 -0.05"/><mass value="1"/>
    <inertia ixx="0.001" ixy="0" ixz="0" iyy="0.001" iyz="0" izz="0.0005"/></inertial></link>
  <link name="l2"><inertial><origin xyz="0 0 -0.05"/><mass value="1"/>
    <inertia ixx="0.001" ixy="0" ixz="0" iyy="0.001" iyz="0" izz="0.0005"/></inertial></link>
  <joint name="j1" type="revolute"><parent link="base"/><child link="l1"/><origin xyz="0 0 0"/>
    <axis xyz="0 1 0"/><limit lower="-3" upper="3" effort="10" velocity="10"/></joint>
  <joint name="j2" type="revolute"><parent link="l1"/><child link="l2"/><origin xyz="0 0 -0.1"/>
    <axis xyz="1 0 0"/><limit lower="-3" upper="3" effort="10" velocity="10"/></joint>
</robot>
"""
CALIBRATE = ("calibrate", "pendulum", "{d}/log.csv", "--free", "J,b", "--quiet")
LOG_FILES = {"log.csv": PENDULUM_LOG}
SMOOTH_FILES = {"calib.json": GOOD_CALIBRATION, "log.csv": PENDULUM_LOG}
SMOOTH_IN = (*SMOOTH, "--input", "{d}/log.csv")
TRAJECTORY = "% t theta1\n0 0\n0.005 0.001\n0.01 0.002\n"


def _calibration_with(**fields: object) -> str:
    doc = json.loads(GOOD_CALIBRATION)
    doc.update(fields)
    return json.dumps(doc)


def _fourbar(old: str, new: str) -> str:
    from mbfg.datasets import mechanism_path

    text = mechanism_path("fourbar").read_text()
    assert old in text
    return text.replace(old, new, 1)


def _urdf(old: str, new: str) -> dict[str, str]:
    assert old in CHAIN_URDF
    return {"r.urdf": CHAIN_URDF.replace(old, new, 1)}


CLOBBER = [
    pytest.param([*SMOOTH, "--input", "{d}/log.csv", "--output", "{d}/log.csv"], SMOOTH_FILES,
                 ["--output {d}/log.csv", "same file as --input"], id="smooth-output-is-its-input"),
    pytest.param([*SMOOTH, "--input", "{d}/log.csv", "--output", "{d}/calib.json"], SMOOTH_FILES,
                 ["--output {d}/calib.json", "same file as --params"], id="smooth-output-is-its-calibration"),
    pytest.param([*CALIBRATE, "--out", "{d}/log.csv"], LOG_FILES, ["--out {d}/log.csv", "same file as LOG"],
                 id="calibrate-out-is-its-log"),
    pytest.param([*CALIBRATE, "--out", "{d}/r.json", "--plot", "{d}/r.json"], LOG_FILES,
                 ["--plot {d}/r.json", "same file as --out"], id="calibrate-plot-is-its-out"),
    pytest.param([*CALIBRATE, "--out", "{d}/./sub/../log.csv"], {**LOG_FILES, "sub/.keep": ""},
                 ["same file as LOG"], id="calibrate-out-is-its-log-by-another-path"),
    pytest.param([*SIM, "--params", "{d}/p.yaml", "--out", "{d}/p.yaml"], {"p.yaml": "J: 0.002\n"},
                 ["--out {d}/p.yaml", "same file as --params"], id="simulate-out-is-its-params"),
    pytest.param(["sweep", "pendulum", "{d}/log.csv", "--free", "J", "--out", "{d}/log.csv"], LOG_FILES,
                 ["--out {d}/log.csv", "same file as LOG"], id="sweep-out-is-a-recording"),
    pytest.param(["inverse", "fourbar-crank", "{d}/traj.txt", "--coordinate", "theta1", "--out", "{d}/traj.txt"],
                 {"traj.txt": TRAJECTORY}, ["--out {d}/traj.txt", "same file as TRAJECTORY"],
                 id="inverse-out-is-its-trajectory"),
    pytest.param(["forward", "{d}/m.yaml", "--duration", "0.01", "--out", "{d}/m.yaml"], {"m.yaml": "x: 1\n"},
                 ["--out {d}/m.yaml", "same file as MECHANISM"], id="forward-out-is-its-mechanism"),
    pytest.param(["control", "furuta-viscous", "--params", "{d}/p.yaml", "--target", "theta=1", "--out",
                  "{d}/p.yaml"], {"p.yaml": "K: 0.04\n"}, ["--out {d}/p.yaml", "same file as --params"],
                 id="control-out-is-its-params"),
    pytest.param(["simulate", "{d}/r.urdf", "--duration", "0.01", "--dt", "0.001", "--out", "{d}/r.urdf"],
                 {"r.urdf": CHAIN_URDF}, ["--out {d}/r.urdf", "same file as MODEL"], id="simulate-out-is-its-model"),
]

LIMITS = [
    pytest.param(["simulate", "pendulum", "--duration", "1e9", "--dt", "0.001", "--out", "{d}/x.csv"], {},
                 ["--duration 1e+09", "--dt 0.001", "1e+12 steps", "at most"], id="simulate-duration-1e9-7TiB"),
    pytest.param(["simulate", "pendulum", "--duration", "1e308", "--dt", "0.1", "--out", "{d}/x.csv"], {},
                 ["--duration 1e+308", "inf steps"], id="simulate-duration-1e308-overflow"),
    pytest.param(["forward", "fourbar", "--duration", "1e12", "--out", "{d}/x.csv"], {},
                 ["--duration 1e+12", "1e+15 steps"], id="forward-duration-1e12"),
    pytest.param(["control", "furuta-viscous", "--target", "theta=1", "--duration", "1e12", "--out", "{d}/x.csv"],
                 {}, ["--duration 1e+12", "1e+15 steps"], id="control-duration-1e12"),
    pytest.param(["control", "furuta-viscous", "--target", "theta=1", "--horizon", "1000000", "--out", "{d}/x.csv"],
                 {}, ["--horizon 1e+06", "at most"], id="control-horizon-1e6"),
    pytest.param([*SMOOTH_IN, "--update-every", "1000000"], SMOOTH_FILES, ["--update-every 1e+06", "at most"],
                 id="smooth-update-every-1e6-15GB"),
    pytest.param([*SMOOTH_IN, "--lag", "1e5"], SMOOTH_FILES, ["--lag 100000", "1e+08 states", "at most"],
                 id="smooth-lag-1e5-s"),
    pytest.param([*SMOOTH_IN, "--max-gap", "1e308"], SMOOTH_FILES, ["--max-gap 1e+308", "at most"],
                 id="smooth-max-gap-1e308-overflow"),
    pytest.param([*CALIBRATE, "--resample", "1e-300"], LOG_FILES,
                 ["{d}/log.csv: a recording of 0.019 s", "--resample 1e-300", "at most"], id="calibrate-resample-1e-300"),
]

NUMBERS = [
    pytest.param(["forward", "fourbar", "--gravity", "1e300", "--duration", "0.01", "--out", "{d}/x.csv"], {},
                 ["--gravity", "1e300", "at most"], id="forward-gravity-1e300"),
    pytest.param(["inverse", "fourbar-crank", "{d}/traj.txt", "--coordinate", "theta1", "--out", "{d}/x.csv"],
                 {"traj.txt": "% t theta1\n0 0\n0.005 1e308\n0.01 0.002\n"}, ["{d}/traj.txt: line 3", "1e+308"],
                 id="inverse-trajectory-row-1e308"),
    pytest.param([*CALIBRATE, "--params", "{d}/p.yaml"], {**LOG_FILES, "p.yaml": "J: 1e308\n"},
                 ["--params {d}/p.yaml", "'J'", "1e+308"], id="calibrate-params-J-1e308"),
    pytest.param([*SIM, "--params", "{d}/p.json", "--out", "{d}/x.csv"], {"p.json": '{"J": 0.002, "J": 0.003}'},
                 ["{d}/p.json", "'J'", "twice"], id="simulate-json-params-duplicate-key"),
    pytest.param(["crossval", "pendulum", "{d}/log.csv", "--params", "{d}/c.json", "--quiet"],
                 {**LOG_FILES, "c.json": _calibration_with(h=-0.001)}, ["{d}/c.json", "'h'", "-0.001"],
                 id="crossval-calibration-h-negative"),
    pytest.param(["crossval", "pendulum", "{d}/log.csv", "--params", "{d}/c.json", "--quiet"],
                 {**LOG_FILES, "c.json": _calibration_with(h="fast")}, ["{d}/c.json", "'h'", "'fast'"],
                 id="crossval-calibration-h-a-word"),
    pytest.param(["crossval", "pendulum", "{d}/log.csv", "--params", "{d}/c.json", "--quiet"],
                 {**LOG_FILES, "c.json": _calibration_with(weight=0)}, ["{d}/c.json", "'weight'", "got 0"],
                 id="crossval-calibration-weight-zero"),
    pytest.param([*CALIBRATE], {"log.csv": "t,theta\n0,0\n0.001,0\n1e308,0\n"},
                 ["{d}/log.csv, row 3 (line 4)", "1e308", "beyond"], id="calibrate-log-time-1e308"),
    pytest.param(["models", "{d}/r.urdf"], _urdf('<axis xyz="0 1 0"/>', '<axis xyz="0 1"/>'),
                 ["{d}/r.urdf", "'j1'", "<axis xyz> has 2 numbers"], id="urdf-axis-two-numbers"),
    pytest.param(["models", "{d}/r.urdf"], _urdf('<axis xyz="0 1 0"/>', '<axis xyz="nan 1 0"/>'),
                 ["{d}/r.urdf", "'j1'", "not finite"], id="urdf-axis-nan"),
    pytest.param(["models", "{d}/r.urdf"], _urdf('<origin xyz="0 0 -0.1"/>', '<origin xyz="0 0 1e309"/>'),
                 ["{d}/r.urdf", "joint 'j2' <origin>", "not finite"], id="urdf-origin-1e309"),
    pytest.param(["models", "{d}/r.urdf"], _urdf('lower="-3" upper="3"', 'lower="2" upper="-2"'),
                 ["{d}/r.urdf", "'j1'", "<limit lower> 2 is above <limit upper> -2"], id="urdf-limit-crossed"),
    pytest.param(["models", "{d}/r.urdf"], _urdf('<robot name="two">', '<robot name="two" xmlns:xacro='
                                                 '"http://www.ros.org/wiki/xacro"><xacro:include filename="a.xacro"/>'),
                 ["{d}/r.urdf", "<xacro:include>", "xacro"], id="urdf-xacro-include"),
    pytest.param(["models", "{d}/r.urdf"], _urdf('<robot name="two">', '<robot name="two" xmlns:xi='
                                                 '"http://www.w3.org/2001/XInclude"><xi:include href="a.urdf"/>'),
                 ["{d}/r.urdf", "<xi:include>"], id="urdf-xinclude"),
    pytest.param(["models", "{d}/r.urdf"], _urdf('<mass value="1"/>', '<mass value="1e300"/>'),
                 ["{d}/r.urdf", "'m_l1'", "1e+300"], id="urdf-mass-1e300"),
    pytest.param(["mechanisms", "{d}/m.yaml"], {"m.yaml": _fourbar("{x: L1, y: 0}", "{x: 1e300, y: 0}")},
                 ["{d}/m.yaml", "points[1].x", "1e+300 m is beyond"], id="mbse-yaml-point-1e300"),
    pytest.param(["mechanisms", "{d}/m.yaml"], {"m.yaml": _fourbar("mass: 2.0", "mass: 1e300")},
                 ["{d}/m.yaml", "planar_bodies[1].mass", "1e+300"], id="mbse-yaml-mass-1e300"),
]

COLUMNS = [
    pytest.param(["calibrate", "pendulum", "{d}/f.csv", "--free", "J", "--quiet"], {"f.csv": FURUTA_LOG},
                 ["{d}/f.csv", "alpha, u", "'pendulum'", "--columns"], id="calibrate-log-of-another-model"),
    pytest.param(["crossval", "pendulum", "{d}/f.csv", "--params", "{d}/calib.json", "--quiet"],
                 {"f.csv": FURUTA_LOG, "calib.json": GOOD_CALIBRATION}, ["{d}/f.csv", "alpha, u", "--columns"],
                 id="crossval-log-of-another-model"),
    pytest.param(["sweep", "pendulum", "{d}/f.csv", "--free", "J", "--out", "{d}/s.csv"], {"f.csv": FURUTA_LOG},
                 ["{d}/f.csv", "alpha, u", "--columns"], id="sweep-log-of-another-model"),
    pytest.param([*SMOOTH, "--input", "{d}/f.csv"], {"f.csv": FURUTA_LOG, "calib.json": GOOD_CALIBRATION},
                 ["{d}/f.csv, line 1", "alpha, u", "--columns"], id="smooth-log-of-another-model"),
    pytest.param([*CALIBRATE, "--columns", "t,theta,alpha"], LOG_FILES,
                 ["--columns t,theta,alpha", "3 names", "needs 2"], id="calibrate-columns-too-many"),
    pytest.param(["calibrate", "pendulum", "{d}/f.csv", "--free", "J", "--columns", "t,phi", "--quiet"],
                 {"f.csv": FURUTA_LOG}, ["{d}/f.csv", "'phi'"], id="calibrate-columns-names-a-missing-column"),
    pytest.param(["calibrate", "furuta", "{d}/log.csv", "--free", "K", "--quiet"], LOG_FILES,
                 ["{d}/log.csv", "'alpha'"], id="calibrate-log-missing-a-column"),
]

NAMES = [
    pytest.param([*CALIBRATE, "--restart-search", "4"], LOG_FILES, ["--restart-search 4", "--restart-weight"],
                 id="calibrate-restart-search-alone"),
    pytest.param([*CALIBRATE, "--soft-start", "100", "--restart-weight", "1e6"], LOG_FILES,
                 ["--soft-start", "--restart-weight", "one of them"], id="calibrate-soft-start-and-restart"),
    pytest.param(["sweep", "pendulum", "{d}/one.csv", "--free", "J", "--out", "{d}/s.csv"],
                 {"one.csv": "t,theta\n0,0\n"}, ["{d}/one.csv", "at least 3 rows"], id="sweep-one-row-log"),
    pytest.param(["sweep", "pendulum", "{d}/log.csv", "--free", "J", "--scheduler", "not an address", "--out",
                  "{d}/s.csv"], LOG_FILES, ["--scheduler", "Dask scheduler address"], id="sweep-scheduler-not-an-address"),
]


@pytest.mark.parametrize(("argv", "files", "needles"), [*CLOBBER, *LIMITS, *NUMBERS, *COLUMNS, *NAMES])
def test_hostile_command_exits_2_naming_the_culprit(capsys, tmp_path: Path, argv: list[str], files: dict[str, str],
                                                   needles: list[str]) -> None:
    """Exit status 2, one 'mbfg: error:' (or argparse) line with the words, no traceback, every input file as it
    was and no output file of the command left behind."""
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    code = main([a.format(d=tmp_path) for a in argv])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "error: " in err and "Traceback" not in err, err
    for needle in needles:
        assert needle.format(d=tmp_path) in err, (needle, err)
    after = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    assert after == before, "an input was changed or an output was written"


def test_an_output_that_is_a_hard_link_to_the_input_is_refused(capsys, tmp_path: Path) -> None:
    """The same inode under another name (a hard link) is the same file: refused as the path itself is."""
    (tmp_path / "log.csv").write_text(PENDULUM_LOG)
    os.link(tmp_path / "log.csv", tmp_path / "alias.csv")
    (tmp_path / "sym.csv").symlink_to(tmp_path / "log.csv")
    for out in ("alias.csv", "sym.csv"):
        code = main([a.format(d=tmp_path) for a in (*CALIBRATE, "--out", f"{{d}}/{out}")])
        err = capsys.readouterr().err
        assert code == 2 and f"--out {tmp_path}/{out}: is the same file as LOG" in err, err
    assert (tmp_path / "log.csv").read_text() == PENDULUM_LOG


def test_sweep_with_a_failed_cell_exits_1_unless_failures_are_allowed(capsys, monkeypatch, tmp_path: Path) -> None:
    """'1 failed' with exit status 0 looked like success to a script; the sweep itself is replaced by its result
    (one ok row, one failed), so this checks the command's exit logic, not Dask."""
    import pandas as pd

    from mbfg import sweep as sweep_module

    frame = pd.DataFrame({"status": ["ok", "failed"], "error": ["", "h: no"]})
    monkeypatch.setattr(sweep_module, "sweep", lambda *a, **k: sweep_module.SweepResult(frame, 2, 0.1))
    (tmp_path / "log.csv").write_text(PENDULUM_LOG)
    argv = ["sweep", "pendulum", f"{tmp_path}/log.csv", "--free", "J", "--no-crossval", "--out", f"{tmp_path}/s.csv"]
    assert main(argv) == 1
    assert "1 of 2 rows failed" in capsys.readouterr().err
    assert main([*argv, "--allow-failures"]) == 0


# -- Python API ------------------------------------------------------------------------------------------------


def _stream(model, **settings):
    from mbfg.graphs.stream import StreamEstimator

    return StreamEstimator(model, h=1e-3, **settings)


def _from_calibration(model, calibration):
    from mbfg.graphs.stream import StreamEstimator

    return StreamEstimator.from_calibration(model, calibration)


def _horizon(horizon):
    from mbfg.graphs.control import RecedingHorizon

    return RecedingHorizon(rigid_model("furuta-viscous"), 1e-3, horizon, rates={"theta": 1.0})


def _forward(duration):
    from mbfg.datasets import load_mechanism
    from mbfg.graphs import simulate_forward

    return simulate_forward(load_mechanism("fourbar"), 1e-3, duration)


API_CASES = [
    pytest.param(lambda m: Log(np.array([0, np.nan, 2e-3]), np.zeros((3, 1)), np.zeros((3, 0)), ("theta",), ()),
                 DataError, ["t[1] = nan", "not a finite time"], id="log-t-nan"),
    pytest.param(lambda m: Log(np.arange(3) * 1e-3, np.zeros((2, 1)), np.zeros((3, 0)), ("theta",), ()),
                 DataError, ["y:", "(3, 1)", "(2, 1)"], id="log-y-shorter-than-t"),
    pytest.param(lambda m: Log(np.arange(3) * 1e-3, np.array([[0], [np.inf], [0]]), np.zeros((3, 0)), ("theta",),
                               ()), DataError, ["y[1, 0]", "'theta'", "inf"], id="log-reading-inf"),
    pytest.param(lambda m: Log(np.arange(3) * 1e-3, np.zeros((3, 2)), np.zeros((3, 0)), ("theta",), ()),
                 DataError, ["y:", "(3, 1)", "(3, 2)", "['theta']"], id="log-two-columns-one-name"),
    pytest.param(lambda m: Log(np.array([0, 2e-3, 1e-3]), np.zeros((3, 1)), np.zeros((3, 0)), ("theta",), ()),
                 DataError, ["t[2] = 0.001 s is not after t[1] = 0.002 s"], id="log-times-descending"),
    pytest.param(lambda m: calibrate(m, Log(np.arange(5) * 1e-3, np.zeros((5, 2)), np.zeros((5, 0)),
                                            ("theta", "alpha"), ())),
                 DataError, ["observation columns", "do not match"], id="calibrate-log-of-another-model"),
    pytest.param(lambda m: m.initial_state({"theta": "x"}), ModelError, ["coordinates['theta']", "'x'"],
                 id="initial-state-a-string"),
    pytest.param(lambda m: m.initial_state({"theta": float("nan")}), ModelError, ["coordinates['theta']", "nan"],
                 id="initial-state-nan"),
    pytest.param(lambda m: simulate(m, 1e12, 1e-3), LimitError, ["duration 1e+12", "h 0.001", "1e+15 steps"],
                 id="simulate-1e12-s"),
    pytest.param(lambda m: simulate(m, 1e308, 0.1), LimitError, ["duration 1e+308", "inf steps"],
                 id="simulate-1e308-s"),
    pytest.param(lambda m: _stream(m, sigma_observation=[1e-3, 1e-3, 1e-3]), ModelError,
                 ["sigma_observation", "one per observation (1: theta)"], id="stream-sigma-three-values"),
    pytest.param(lambda m: _stream(m, update_every=10**6), LimitError, ["update_every 1e+06", "at most"],
                 id="stream-update-every-1e6"),
    pytest.param(lambda m: _stream(m, lag=1e5), LimitError, ["lag 100000", "window", "at most"],
                 id="stream-lag-1e5-s"),
    pytest.param(lambda m: _stream(m, max_gap=1e308), LimitError, ["max_gap 1e+308"], id="stream-max-gap-1e308"),
    pytest.param(lambda m: _stream(None), ModelError, ["model: expected a RigidModel", "NoneType"],
                 id="stream-model-none"),
    pytest.param(lambda m: _from_calibration(None, json.loads(GOOD_CALIBRATION)), ModelError,
                 ["model: expected a RigidModel"], id="from-calibration-model-none"),
    pytest.param(lambda m: _from_calibration(m, None), ModelError, ["calibration: expected"],
                 id="from-calibration-none"),
    pytest.param(lambda m: _from_calibration(m, {"parameters": {}}), ModelError, ["no 'model' field"],
                 id="from-calibration-without-model"),
    pytest.param(lambda m: _from_calibration(m, json.loads(_calibration_with(weight=0))), ModelError,
                 ["'weight'", "got 0"], id="from-calibration-weight-zero"),
    pytest.param(lambda m: _horizon(10**6), LimitError, ["horizon 1e+06", "at most"], id="control-horizon-1e6"),
    pytest.param(lambda m: _horizon(1).run(rigid_model("furuta-viscous").initial_state(), 10**12), LimitError,
                 ["steps 1e+12", "at most"], id="control-run-1e12-steps"),
    pytest.param(lambda m: _forward(1e12), LimitError, ["duration 1e+12", "dt 0.001", "1e+15 steps"],
                 id="forward-dynamics-1e12-s"),
    pytest.param(lambda m: load_model(3), ModelError, ["name:", "int"], id="load-model-an-int"),
    pytest.param(lambda m: m.with_parameters({"J": 1e308}), ModelError, ["'J'", "1e+308"], id="parameter-1e308"),
]


@pytest.mark.parametrize(("call", "error", "needles"), API_CASES)
def test_hostile_api_call_raises_our_error_naming_the_argument(model, call, error: type[MbfgError],
                                                               needles: list[str]) -> None:
    with pytest.raises(error) as info:
        call(model)
    for needle in needles:
        assert needle in str(info.value), (needle, str(info.value))


def test_api_boundary_numbers_outside_the_command_line(tmp_path: Path) -> None:
    """The same checks where the API reads files: a URDF (by path and as text), a trajectory, planar gravity."""
    from mbfg.graphs import load_mbse_trajectory
    from mbfg.urdf import urdf_from_string

    with pytest.raises(ModelError, match=r"^r\.urdf: joint 'j1': <axis xyz> has 2 numbers"):
        urdf_from_string(CHAIN_URDF.replace('<axis xyz="0 1 0"/>', '<axis xyz="0 1"/>'), source="r.urdf")
    (tmp_path / "r.urdf").write_text(CHAIN_URDF)
    assert load_model(tmp_path / "r.urdf").observations == ("j1", "j2")  # a Path, not only a str
    (tmp_path / "bom.txt").write_bytes(b"\xef\xbb\xbf" + TRAJECTORY.encode())
    t, values = load_mbse_trajectory(tmp_path / "bom.txt")  # a byte-order mark is accepted, as logs accept one
    np.testing.assert_array_equal(t, [0.0, 0.005, 0.01])
    from mbfg.datasets import load_mechanism

    with pytest.raises(ModelError, match=r"^g: expected a gravity .* at most 10000"):
        load_mechanism("fourbar").gravity_forces(1e300)


def test_write_log_to_a_full_device_is_our_error() -> None:
    """/dev/full: the write fails (no space); one DataError naming the file, not chained OSErrors."""
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full on this system")
    with pytest.raises(DataError, match=r"^/dev/full: cannot write the log \(No space left on device\)"):
        write_log("/dev/full", [0.0, 1.0], {"theta": [0.0, 0.1]})


def test_smooth_to_a_full_device_is_one_error_naming_the_option(capsys, tmp_path: Path) -> None:
    """``smooth --output /dev/full`` raised three chained OSErrors; now one line naming --output (after the
    stream's compile: a special file is written in place, and only the write can tell it is full)."""
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full on this system")
    (tmp_path / "calib.json").write_text(GOOD_CALIBRATION)
    (tmp_path / "log.csv").write_text(PENDULUM_LOG)
    argv = ["smooth", "pendulum", "--params", f"{tmp_path}/calib.json", "--input", f"{tmp_path}/log.csv", "--output",
            "/dev/full", "--quiet"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "mbfg: error: --output /dev/full: cannot write (No space left on device)" in err and "Traceback" not in err


def test_warm_up_after_the_first_sample_is_refused_not_a_silent_reset(model) -> None:
    """warm_up() mid-stream reset the window without a word; it compiles on synthetic samples, so it belongs
    before the first push."""
    from mbfg.graphs.stream import StreamEstimator

    est = StreamEstimator(model, h=1e-3, lag=0.005)
    for k in range(3):
        est.push(k * 1e-3, [0.0])
    with pytest.raises(ModelError, match=r"^warm_up: the stream has had 3 samples; .* before the first push"):
        est.warm_up()
    assert est.status.samples == 3  # nothing was reset


def test_smooth_output_that_is_the_file_on_standard_input_is_refused(tmp_path: Path) -> None:
    """``mbfg smooth ... --output in.csv < in.csv``: the input comes by standard input, not --input, and is still
    the output file (the same inode): refused before anything is written (a process of its own, so that its
    standard input is the file)."""
    import subprocess
    import sys

    (tmp_path / "calib.json").write_text(GOOD_CALIBRATION)
    (tmp_path / "in.csv").write_text(PENDULUM_LOG)
    with open(tmp_path / "in.csv", "rb") as stdin:
        run = subprocess.run([sys.executable, "-m", "mbfg", "smooth", "pendulum", "--params",
                              str(tmp_path / "calib.json"), "--output", str(tmp_path / "in.csv"), "--quiet"],
                             stdin=stdin, capture_output=True, text=True, timeout=300)
    assert run.returncode == 2, run.stderr
    assert f"--output {tmp_path}/in.csv: is the file on standard input (--input -)" in run.stderr
    assert (tmp_path / "in.csv").read_text() == PENDULUM_LOG
