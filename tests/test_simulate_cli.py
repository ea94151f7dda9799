"""``mbfg simulate`` / ``mbfg models``, the log format (:mod:`mbfg.logs`) and model files (:mod:`mbfg.model_file`).

Every simulation here reuses a few (model, step count) pairs, because the
stepper compiles once per model object and chunk shape (1-5 s each): the
pendulum for 0.5 s at 1 ms, the Furuta pendulum for 0.2 s at 1 ms, the double
pendulum for 0.2 s at 2 ms. The CLI keeps built-in models per process
(``mbfg.cli.rigid_model``), and the direct references use those same objects.
"""

from __future__ import annotations

import io
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import mbfg.datasets
from mbfg.cli import main, rigid_model
from mbfg.errors import DataError, ModelError
from mbfg.logs import add_noise, quantize, read_log, write_log
from mbfg.model_file import load_model_file
from mbfg.models import BUILTIN, double_pendulum, load_model
from mbfg.spook import simulate

PENDULUM_ARGS = ("simulate", "pendulum", "--duration", "0.5", "--dt", "0.001", "--init", "theta=1.0", "--quiet")
FURUTA_ARGS = ("simulate", "furuta", "--duration", "0.2", "--dt", "0.001", "--quiet")
DOUBLE_PENDULUM_FILE = Path(mbfg.datasets.__file__).parent / "double_pendulum.yaml"


def _run(capsys, *argv: object) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def _fails(capsys, *argv: object) -> str:
    code, out, err = _run(capsys, *argv)
    assert code == 2, (code, err)
    assert err.startswith("mbfg: error: ") or "error: " in err, err
    return err


@pytest.fixture(scope="module")
def pendulum_reference():
    """The pendulum from theta = 1 rad for 0.5 s at 1 ms, straight from :func:`mbfg.spook.simulate`."""
    model = rigid_model("pendulum")
    return simulate(model, 0.5, 0.001, initial=model.initial_state({"theta": 1.0})).to_dataframe()


@pytest.fixture(scope="module")
def pendulum_log(tmp_path_factory, pendulum_reference) -> pd.DataFrame:
    out = tmp_path_factory.mktemp("pendulum") / "x.csv"
    assert main([*PENDULUM_ARGS, "--out", str(out)]) == 0
    return pd.read_csv(out)


# --------------------------------------------------------------------------------------
# simulate
# --------------------------------------------------------------------------------------


def test_simulate_pendulum_equals_spook_simulate(pendulum_log, pendulum_reference):
    assert list(pendulum_log.columns) == ["t", "theta"]
    assert len(pendulum_log) == 501
    np.testing.assert_array_equal(pendulum_log["t"].to_numpy(), pendulum_reference["t"].to_numpy())
    np.testing.assert_array_equal(pendulum_log["theta"].to_numpy(), pendulum_reference["theta"].to_numpy())
    assert pendulum_log["theta"].iloc[0] == pytest.approx(1.0, abs=1e-12)
    assert pendulum_log["theta"].iloc[-1] < 0.9  # it swings


def test_simulate_summary_line_on_stderr(capsys, tmp_path):
    code, out, err = _run(capsys, *PENDULUM_ARGS, "--out", tmp_path / "x.csv")
    assert code == 0, err
    assert out == ""
    summary = err.strip().splitlines()[-1]
    assert summary.startswith("mbfg simulate: 500 steps, 0.5 s simulated in ")
    assert "compile" in summary and "simulated s per wall s" in summary and "no controls" in summary
    # The whole command's wall time (model, stepping, writing the log), then the stepping's part of it.
    total = float(summary.split(" s wall in all (stepping ")[0].rsplit(" ", 1)[1])
    stepping = float(summary.split(" s wall in all (stepping ")[1].split(" s,")[0])
    assert 0 <= stepping <= total


def test_simulate_to_stdout(capsys):
    code, out, err = _run(capsys, *PENDULUM_ARGS, "--out", "-")
    assert code == 0, err
    frame = pd.read_csv(io.StringIO(out))
    assert list(frame.columns) == ["t", "theta"] and len(frame) == 501


def test_simulate_furuta_controls_zero_order_hold(capsys, tmp_path):
    model = rigid_model("furuta")
    # Row times off the 1 ms step grid: the step starting at t_k takes the last row with t <= t_k.
    t_rows = np.array([0.0, 0.0125, 0.0505, 0.1003, 0.1507, 0.25])
    u_rows = np.array([1.5, -0.5, 2.0, 0.0, -1.0, 3.0])
    controls_csv = tmp_path / "u.csv"
    controls_csv.write_text("t,u\n" + "".join(f"{t},{u}\n" for t, u in zip(t_rows.tolist(), u_rows.tolist())))
    held = np.array([u_rows[max(i for i, t in enumerate(t_rows) if t <= k * 0.001)] for k in range(200)])
    assert held[12] == 1.5 and held[13] == -0.5 and held[199] == -1.0

    code, _, err = _run(capsys, *FURUTA_ARGS, "--controls", controls_csv, "--out", tmp_path / "driven.csv")
    assert code == 0, err
    assert "controls u from" in err
    code, _, err = _run(capsys, *FURUTA_ARGS, "--out", tmp_path / "free.csv")
    assert code == 0, err
    assert "controls u zero (no --controls)" in err
    driven, free = pd.read_csv(tmp_path / "driven.csv"), pd.read_csv(tmp_path / "free.csv")
    assert list(driven.columns) == ["t", "theta", "alpha", "u"]
    np.testing.assert_array_equal(driven["u"].to_numpy(), np.append(held, held[-1]))
    np.testing.assert_array_equal(free["u"].to_numpy(), np.zeros(201))
    assert np.abs(driven["theta"] - free["theta"]).max() > 1e-3  # the motor moves the arm

    reference = simulate(model, 0.2, 0.001, controls=held[:, None]).to_dataframe()
    for column in ("t", "theta", "alpha", "u"):
        np.testing.assert_array_equal(driven[column].to_numpy(), reference[column].to_numpy())

    # A written log drives a replay (extra columns ignored): the same trajectory.
    code, _, err = _run(capsys, *FURUTA_ARGS, "--controls", tmp_path / "driven.csv", "--out", tmp_path / "replay.csv")
    assert code == 0, err
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "replay.csv"), driven)


def test_simulate_encoder_quantization(capsys, tmp_path, pendulum_log):
    code, _, err = _run(capsys, *PENDULUM_ARGS, "--ppr", "2048", "--out", tmp_path / "q.csv")
    assert code == 0, err
    theta = pd.read_csv(tmp_path / "q.csv")["theta"].to_numpy()
    step = 2 * math.pi / 2048
    counts = theta / step
    np.testing.assert_allclose(counts, np.round(counts), atol=1e-9)
    assert np.abs(theta - pendulum_log["theta"]).max() <= step / 2 + 1e-12
    assert len(np.unique(np.round(counts))) > 10


def test_simulate_linear_stage_reads_a_linear_encoder(capsys, tmp_path):
    """The stage from x = 0.1 m under a current step: the slider column equals spook.simulate's displacement,
    quantized by --resolution to whole counts of 1 micrometre."""
    controls_csv = tmp_path / "current.csv"
    controls_csv.write_text("t,current\n0,0.3\n0.1,-0.2\n0.3,0\n")
    code, _, err = _run(capsys, "simulate", "linear-stage", "--duration", "0.3", "--dt", "0.001", "--init", "x=0.1",
                        "--controls", controls_csv, "--resolution", "1e-6", "--out", tmp_path / "stage.csv")
    assert code == 0, err
    assert "x = 0.1 m" in err and "quantized to 1e-06 m per count" in err
    log = pd.read_csv(tmp_path / "stage.csv")
    assert list(log.columns) == ["t", "x", "current"]
    model = rigid_model("linear-stage")
    held = np.where(np.arange(300) * 0.001 < 0.1, 0.3, -0.2)[:, None]
    x = simulate(model, 0.3, 0.001, initial=model.initial_state({"x": 0.1}), controls=held).observations[:, 0]
    counts = log["x"].to_numpy() / 1e-6
    np.testing.assert_allclose(counts, np.round(counts), atol=1e-6)
    assert np.abs(log["x"].to_numpy() - x).max() <= 0.5e-6 + 1e-12
    assert x[0] == pytest.approx(0.1) and np.ptp(x) > 1e-3  # it starts at --init and moves


def test_error_resolution_without_sliders(capsys, tmp_path):
    err = _fails(capsys, *PENDULUM_ARGS, "--resolution", "1e-6", "--out", tmp_path / "x.csv")
    assert "--resolution" in err and "theta" in err


def test_simulate_noise_has_the_requested_std(capsys, tmp_path, pendulum_log):
    code, _, err = _run(capsys, *PENDULUM_ARGS, "--noise", "0.01", "--seed", "1", "--out", tmp_path / "n.csv")
    assert code == 0, err
    assert "noise sigma 0.01 (seed 1)" in err
    residual = pd.read_csv(tmp_path / "n.csv")["theta"].to_numpy() - pendulum_log["theta"].to_numpy()
    n = len(residual)
    assert abs(residual.std() - 0.01) < 3 * 0.01 / math.sqrt(2 * n)
    assert abs(residual.mean()) < 3 * 0.01 / math.sqrt(n)
    # The seed makes it reproducible.
    assert main([*PENDULUM_ARGS, "--noise", "0.01", "--seed", "1", "--out", str(tmp_path / "n2.csv")]) == 0
    capsys.readouterr()
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "n.csv"), pd.read_csv(tmp_path / "n2.csv"))


def test_simulate_params_file_changes_the_trajectory(capsys, tmp_path, pendulum_log):
    params = tmp_path / "p.yaml"
    params.write_text("d: 0.2\nb: {value: 1e-2}\n")  # YAML 1.2: 1e-2 is a number
    code, _, err = _run(capsys, *PENDULUM_ARGS, "--params", params, "--out", tmp_path / "p.csv")
    assert code == 0, err
    assert f"parameters from {params}" in err
    model = rigid_model("pendulum")
    changed = model.with_parameters({"d": 0.2, "b": 0.01})
    reference = simulate(model, 0.5, 0.001, initial=changed.initial_state({"theta": 1.0}),
                         parameters=changed.parameters.arrays()).to_dataframe()
    theta = pd.read_csv(tmp_path / "p.csv")["theta"].to_numpy()
    np.testing.assert_array_equal(theta, reference["theta"].to_numpy())
    assert np.abs(theta - pendulum_log["theta"]).max() > 1e-3


# --------------------------------------------------------------------------------------
# simulate: bad input exits 2 naming it
# --------------------------------------------------------------------------------------


def test_error_unknown_model(capsys, tmp_path):
    err = _fails(capsys, "simulate", "no-such-model", "--duration", "1", "--dt", "0.001", "--out", tmp_path / "x.csv")
    assert "unknown model 'no-such-model'" in err and "furuta" in err


def test_error_unknown_parameter_in_params_file(capsys, tmp_path):
    params = tmp_path / "p.yaml"
    params.write_text("b: 0.01\nmass_typo: 0.3\n")
    err = _fails(capsys, *PENDULUM_ARGS, "--params", params, "--out", tmp_path / "x.csv")
    assert str(params) in err and "'mass_typo'" in err


def test_error_controls_csv_missing_u(capsys, tmp_path):
    bad = tmp_path / "u.csv"
    bad.write_text("t,voltage\n0,1\n1,1\n")
    err = _fails(capsys, *FURUTA_ARGS, "--controls", bad, "--out", tmp_path / "x.csv")
    assert str(bad) in err and "'u'" in err and "t, voltage" in err


def test_error_controls_csv_non_increasing_time(capsys, tmp_path):
    bad = tmp_path / "u.csv"
    bad.write_text("t,u\n0,1\n0.1,1\n0.1,2\n0.3,0\n")
    err = _fails(capsys, *FURUTA_ARGS, "--controls", bad, "--out", tmp_path / "x.csv")
    assert str(bad) in err and "row 3 (line 4)" in err and "not after" in err


def test_error_controls_csv_too_short(capsys, tmp_path):
    bad = tmp_path / "u.csv"
    bad.write_text("t,u\n0,1\n0.1,1\n")
    err = _fails(capsys, *FURUTA_ARGS, "--controls", bad, "--out", tmp_path / "x.csv")
    assert "must cover [0, 0.2) s" in err


def test_error_controls_for_a_model_without_controls(capsys, tmp_path):
    controls = tmp_path / "u.csv"
    controls.write_text("t,u\n0,1\n1,1\n")
    err = _fails(capsys, *PENDULUM_ARGS, "--controls", controls, "--out", tmp_path / "x.csv")
    assert "has no controls" in err


def test_error_negative_dt(capsys, tmp_path):
    err = _fails(capsys, "simulate", "pendulum", "--duration", "1", "--dt", "-0.001", "--out", tmp_path / "x.csv")
    assert "--dt" in err and "-0.001" in err


def test_error_duration_shorter_than_dt(capsys, tmp_path):
    err = _fails(capsys, "simulate", "pendulum", "--duration", "0.0001", "--dt", "0.001", "--out", tmp_path / "x.csv")
    assert "--duration" in err


def test_error_init_unknown_joint(capsys, tmp_path):
    err = _fails(capsys, "simulate", "pendulum", "--duration", "1", "--dt", "0.001", "--init", "nosuch=1",
                 "--out", tmp_path / "x.csv")
    assert "nosuch" in err and "theta" in err


def test_error_init_malformed(capsys, tmp_path):
    err = _fails(capsys, "simulate", "pendulum", "--duration", "1", "--dt", "0.001", "--init", "theta",
                 "--out", tmp_path / "x.csv")
    assert "--init" in err and "JOINT=ANGLE" in err


def test_error_ppr_without_hinge_angles(capsys, tmp_path):
    err = _fails(capsys, "simulate", "particle", "--duration", "0.1", "--dt", "0.01", "--ppr", "1024",
                 "--out", tmp_path / "x.csv")
    assert "--ppr" in err and "particle.x" in err


# --------------------------------------------------------------------------------------
# models
# --------------------------------------------------------------------------------------


def test_models_lists_every_builtin(capsys):
    code, out, err = _run(capsys, "models")
    assert code == 0, err
    listed = [line.split()[0] for line in out.splitlines()[1:]]
    assert listed == list(BUILTIN)


def test_models_describes_furuta(capsys):
    code, out, err = _run(capsys, "models", "furuta")
    assert code == 0, err
    for word in ("J_Az", "K", "tilt", "N m/V", "free", "fixed", "controls: u", "observations: theta, alpha"):
        assert word in out
    k_line = next(line for line in out.splitlines() if line.split()[:1] == ["K"])
    assert "0.04" in k_line and "[0, inf]" in k_line


def test_models_describes_a_model_file(capsys):
    code, out, err = _run(capsys, "models", DOUBLE_PENDULUM_FILE)
    assert code == 0, err
    assert out.startswith("double-pendulum:") and "q1, q2" in out


def test_model_repr_is_one_readable_line():
    assert repr(load_model("pendulum")) == ("RigidModel('pendulum': 1 body; joints theta (hinge); observations theta; "
                                            "controls none; 10 parameters (2 free: J, b))")
    text = repr(load_model("particle"))
    assert text.startswith("RigidModel('particle': 1 body; no joints; contacts ground; ") and "\n" not in text
    assert "controls u;" in repr(load_model("furuta"))


def test_models_unknown_name(capsys):
    err = _fails(capsys, "models", "nope")
    assert "unknown model 'nope'" in err


def test_simulate_help_through_the_entry_point():
    done = subprocess.run([sys.executable, "-m", "mbfg", "simulate", "--help"], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert "--ppr" in done.stdout and "zero-order hold" in done.stdout


# --------------------------------------------------------------------------------------
# logs
# --------------------------------------------------------------------------------------


def test_write_read_log_round_trip(tmp_path):
    rng = np.random.default_rng(0)
    t = np.cumsum(rng.uniform(1e-4, 1e-3, 50))
    theta, u = rng.normal(size=50) * 3.7, rng.normal(size=50)
    theta[[3, 7]] = np.nan
    path = tmp_path / "log.csv"
    write_log(path, t, {"theta": theta}, {"u": u})
    assert path.read_text().splitlines()[0] == "t,theta,u"
    assert path.read_text().splitlines()[4].split(",")[1] == ""  # NaN -> empty cell
    log = read_log(path, ["theta"], ["u"])
    np.testing.assert_array_equal(log.t, t)  # full precision
    np.testing.assert_array_equal(log.y[:, 0], theta)  # NaN where NaN
    np.testing.assert_array_equal(log.u[:, 0], u)
    assert log.names == ("t", "theta", "u") and log.y.shape == (50, 1) and log.u.shape == (50, 1)


def test_read_log_empty_observation_cell_is_a_missing_reading(tmp_path):
    path = tmp_path / "log.csv"
    path.write_text("t,theta,alpha\n0,0.1,0.2\n0.001,,0.3\n0.002,0.3,\n")
    log = read_log(path, ["alpha", "theta"])
    np.testing.assert_array_equal(log.t, [0.0, 0.001, 0.002])
    assert log.y.shape == (3, 2)
    assert np.isnan(log.y[1, 1]) and np.isnan(log.y[2, 0])  # kept missing, not filled
    assert log.y[1, 0] == 0.3 and log.y[0, 1] == 0.1
    assert np.count_nonzero(np.isnan(log.y)) == 2


def test_read_log_nan_text_cell(tmp_path):
    path = tmp_path / "log.csv"
    path.write_text("t,theta\n0,0.1\n0.001,NaN\n")
    with pytest.raises(DataError, match=r"row 2 \(line 3\), column 'theta'.*leave the cell empty"):
        read_log(path, ["theta"])
    path.write_text("t,theta\n0,0.1\n0.001,inf\n")
    with pytest.raises(DataError, match="leave the cell empty for a missing reading"):
        read_log(path, ["theta"])


def test_read_log_missing_column(tmp_path):
    path = tmp_path / "log.csv"
    path.write_text("t,theta\n0,0.1\n")
    with pytest.raises(DataError, match=r"no observation column 'alpha'; the log has columns t, theta") as info:
        read_log(path, ["theta", "alpha"])
    assert str(path) in str(info.value)
    with pytest.raises(DataError, match="no control column 'u'"):
        read_log(path, ["theta"], ["u"])


def test_read_log_non_increasing_time(tmp_path):
    path = tmp_path / "log.csv"
    path.write_text("t,theta\n0,0.1\n0.002,0.2\n0.001,0.3\n")
    with pytest.raises(DataError, match=r"row 3 \(line 4\), column 't': time 0.001 s is not after"):
        read_log(path, ["theta"])


@pytest.mark.parametrize(
    ("text", "pattern"),
    [
        ("", "the log is empty"),
        ("t,theta\n", "header but no data rows"),
        ("t,theta,theta\n0,1,2\n", "column 'theta' appears twice"),
        ("t,theta\n0,abc\n", r"row 1 \(line 2\), column 'theta': expected a number, got 'abc'"),
        ("t,theta\n,0.1\n", r"row 1 \(line 2\), column 't': empty cell"),
        ("t,theta,u\n0,0.1,\n", r"column 'u': empty cell"),
        ("t,theta\n0,0.1,5\n", r"row 1 \(line 2\): 3 cells; the header has 2"),
    ],
)
def test_read_log_errors(tmp_path, text, pattern):
    path = tmp_path / "log.csv"
    path.write_text(text)
    with pytest.raises(DataError, match=pattern):
        read_log(path, ["theta"], ["u"] if ",u" in text else ())


def test_add_noise_and_quantize():
    rng = np.random.default_rng(3)
    y = np.zeros((20000, 2))
    noisy = add_noise(y, 0.5, rng)
    assert abs(noisy.std() - 0.5) < 0.01
    with pytest.raises(DataError):
        add_noise(y, -1.0, rng)
    angles = np.array([0.0, 0.001, -0.002, 10.0, np.nan])
    q = quantize(angles, 1000)
    step = 2 * np.pi / 1000
    np.testing.assert_allclose(q[:4], np.round(angles[:4] / step) * step)
    assert q[1] == 0.0 and np.isnan(q[4])
    with pytest.raises(DataError):
        quantize(angles, 0)


# --------------------------------------------------------------------------------------
# model files
# --------------------------------------------------------------------------------------


def test_double_pendulum_file_equals_the_builtin():
    from_file, builtin = load_model_file(DOUBLE_PENDULUM_FILE), double_pendulum()
    assert from_file.name == builtin.name and from_file.observations == ("q1", "q2")
    assert from_file.summary() == builtin.summary()
    assert load_model(str(DOUBLE_PENDULUM_FILE)).name == "double-pendulum"  # load_model dispatches paths
    init = {"q1": 1.0, "q2": -0.5}
    a = simulate(from_file, 0.2, 0.002, initial=from_file.initial_state(init))
    b = simulate(builtin, 0.2, 0.002, initial=builtin.initial_state(init))
    np.testing.assert_allclose(a.observations, b.observations, rtol=0, atol=1e-12)
    assert np.abs(a.observations[-1] - a.observations[0]).max() > 0.05


GOOD_LINK = "{name: link1, joint: q1, parent: null, mass: 1, inertia: [1e-3, 1e-3, 1e-3], com: 0.1}"
GOOD_PARAMS = "parameters: {g: 9.81, eps_lin: 1e-8, eps_rot: 1e-6, tau: 2e-3}\n"


@pytest.mark.parametrize(
    ("text", "pattern"),
    [
        (GOOD_PARAMS + "links: [" + GOOD_LINK + "]\ncolour: red\n", r"colour: unknown key; expected one of name, "),
        ("links: [" + GOOD_LINK + "]\n", r"parameters: missing required key"),
        (GOOD_PARAMS + "links: [{name: link1, joint: q1, parent: null, mas: 1, inertia: [1, 1, 1], com: 0.1}]\n",
         r"links\[0\] \(link1\)\.mas: unknown key; expected one of name, joint, parent, mass"),
        (GOOD_PARAMS + "links: [{name: link1, joint: q1, parent: null, inertia: [1, 1, 1], com: 0.1}]\n",
         r"links\[0\] \(link1\)\.mass: missing required key 'mass'"),
        (GOOD_PARAMS + "links: [" + GOOD_LINK + ", {name: link2, joint: q2, parent: link3, mass: 1, "
         "inertia: [1, 1, 1], com: 0.1}]\n", r"links\[1\] \(link2\)\.parent: unknown link 'link3'"),
        (GOOD_PARAMS + "links: [{name: link1, joint: q1, parent: null, mass: 1, inertia: 5, com: 0.1}]\n",
         r"links\[0\] \(link1\)\.inertia: expected a list of 3 entries"),
        (GOOD_PARAMS + "links: [{name: link1, joint: q1, parent: null, mass: m9, inertia: [1, 1, 1], com: 0.1}]\n",
         r"links\[0\] \(link1\)\.mass: 'm9' names unknown parameter 'm9'"),
        ("parameters: {g: 9.81, eps_lin: 1e-8, tau: 2e-3}\nlinks: [" + GOOD_LINK + "]\n",
         r"parameters\.eps_rot: missing required parameter"),
        ("parameters: {g: 9.81, eps_lin: 1e-8, eps_rot: 1e-6, tau: 2e-3, m: {value: 1, unit: kg, min: 0}}\n"
         "links: [" + GOOD_LINK + "]\n", r"parameters\.m\.min: unknown key; expected one of value, unit, lower"),
        (GOOD_PARAMS + "links: [{name: link1, joint: q1, parent: null, mass: 1, inertia: [1, 1, 1], com: 0.1, "
         "axis: w}]\n", r"links\[0\] \(link1\)\.axis: expected x, y or z"),
        (GOOD_PARAMS + "links: [{name: link1, joint: q1, parent: null, mass: -1, inertia: [1, 1, 1], com: 0.1}]\n",
         r"mass must be > 0"),
        ("links: [\n", r"not a valid YAML file"),
    ],
)
def test_model_file_errors_name_the_file_and_entry(tmp_path, text, pattern):
    path = tmp_path / "chain.yaml"
    path.write_text(text)
    with pytest.raises(ModelError, match=pattern) as info:
        load_model_file(path)
    assert str(path) in str(info.value)


def test_model_file_expressions_and_motor(tmp_path):
    path = tmp_path / "arm.yaml"
    path.write_text(
        "parameters:\n"
        "  g: 9.81\n  eps_lin: 1e-8\n  eps_rot: 1e-6\n  tau: 2e-3\n"
        "  L: {value: 0.4, unit: m, lower: 0}\n  r: 0.1\n  K_q1: 1.0\n  J_s_q1: 1e-6\n"
        "links:\n"
        "  - {name: a, joint: q1, parent: null, mass: 1, inertia: [1e-3, 1e-3, 1e-3], com: L - r, motor: tau1}\n"
        "  - {name: b, joint: q2, parent: a, mass: 1, inertia: [1e-3, 1e-3, 1e-3], offset: [0, 0, -L], com: r,"
        " axis: x}\n"
    )
    model = load_model_file(path)
    assert model.name == "arm" and model.controls == ("tau1",) and model.observations == ("q1", "q2")
    path.write_text(path.read_text().replace("  K_q1: 1.0\n", ""))
    with pytest.raises(ModelError, match=r"links\[0\] \(a\)\.motor: a motor on joint 'q1' needs the parameter 'K_q1'"):
        load_model_file(path)
