"""The three outcomes of a solve (converged, not converged, failed) as a calibration, the command line and a
sweep row report them."""

from __future__ import annotations

import json
import pickle

import gtsam
import numpy as np
import pytest

import mbfg.graphs.joint as joint
from mbfg import keys
from mbfg.calibration import calibrate
from mbfg.calibration_options import CalibrationOptions, calibration_lm
from mbfg.cli import main
from mbfg.logs import Log
from mbfg.models import pendulum
from mbfg.spook import simulate, unwrap_angles
from mbfg.sweep_tasks import COLUMNS, calibration_task


@pytest.fixture(scope="module")
def pendulum_log() -> tuple:
    model = pendulum()
    traj = simulate(model, 0.5, 1e-3, initial=model.initial_state({"theta": 2.5}))
    y = unwrap_angles(model, traj.observations) + 1e-3 * np.random.default_rng(0).standard_normal(
        traj.observations.shape)
    return model, Log(traj.t, y, np.zeros((len(traj.t), 0)), model.observations, model.controls, "synthetic")


def _nan_factor() -> gtsam.CustomFactor:
    """A user's factor on the parameters whose residual is NaN (a division by zero in its model, say)."""
    def error(this: gtsam.CustomFactor, values: gtsam.Values, H: list[np.ndarray] | None) -> np.ndarray:
        x = values.atVector(this.keys()[0])
        if H is not None:
            H[0] = np.eye(1, x.shape[0])
        return np.array([np.nan])

    return gtsam.CustomFactor(gtsam.noiseModel.Unit.Create(1), [keys.P()], error)


def test_a_calibration_with_a_nan_factor_fails_and_names_it(pendulum_log, monkeypatch) -> None:
    """A user's factor added to the calibration's problem returns NaN: the solve fails at once, the result says
    status "failed" (never converged) and names the factor, the table says FAILED with the reason."""
    model, log = pendulum_log
    build = joint.build_joint_problem
    built = []

    def with_nan_factor(*args, **kwargs):
        problem = build(*args, **kwargs)
        if not built:  # the calibration's problem (not the covariance's re-weighted one)
            factor = _nan_factor()
            problem.graph.add(factor)
            problem.vectorized.others.add(factor)
        built.append(problem)
        return problem

    monkeypatch.setattr(joint, "build_joint_problem", with_nan_factor)
    result = calibrate(model, log, free=["J", "b"])
    assert result.status == "failed" and not result.converged and result.iterations == 0, result.status
    assert result.message.startswith("the cost at the initial values is nan"), result.message
    assert "CustomFactor on p0" in result.message, result.message
    assert result.to_dict()["status"] == "failed" and result.to_dict()["converged"] is False
    assert f"0 LM iterations, FAILED ({result.message})" in result.table().splitlines()[-1]


def test_the_iteration_limit_is_not_converged_in_the_result_and_its_json(pendulum_log) -> None:
    model, log = pendulum_log
    truth = model.parameters.numpy_values()
    start = model.with_parameters({"J": 1.25 * truth["J"], "b": 0.5 * truth["b"]})
    result = calibrate(start, log, free=["J", "b"], lm=calibration_lm(start, max_iterations=1),
                       options=CalibrationOptions(covariance=False))
    assert result.status == "not_converged" and not result.converged, (result.status, result.message)
    assert result.message.startswith("iteration limit 1"), result.message
    assert result.to_dict()["status"] == "not_converged"


def test_calibrate_cli_exits_non_zero_naming_the_factor_type_of_a_non_finite_cost(pendulum_log, tmp_path, capsys):
    """A start with viscous damping b = 1e11 N m s/rad at the state error weight 1e300: the whitened impulse
    residuals are finite but their squares overflow, so the cost is infinite from the start. The command still writes the JSON, with status "failed"
    and the impulse factor type named, says FAILED with the reason on stderr, and exits 1."""
    model, log = pendulum_log
    path, params, out = tmp_path / "log.csv", tmp_path / "start.yaml", tmp_path / "out.json"
    with path.open("w") as fh:
        fh.write("t," + ",".join(model.observations) + "\n")
        for t, row in zip(log.t, log.y):
            fh.write(f"{float(t)!r}," + ",".join(repr(float(v)) for v in row) + "\n")
    params.write_text("b: 1.0e+11\n")
    code = main(["calibrate", "pendulum", str(path), "--free", "J", "--params", str(params), "--weight", "1e300",
                 "--json", "--quiet", "--out", str(out)])
    stdout, stderr = capsys.readouterr()
    assert code == 1, (code, stderr)
    doc = json.loads(stdout)
    assert doc["status"] == "failed" and doc["converged"] is False, doc["status"]
    assert doc["message"].startswith("the cost at the initial values is inf"), doc["message"]
    assert "factor type 'spook_impulse[pendulum" in doc["message"], doc["message"]
    assert "FAILED (the cost at the initial values is inf" in stderr.strip().splitlines()[-1], stderr
    assert json.loads(out.read_text())["status"] == "failed"


def test_a_sweep_row_carries_the_calibrations_solve_status(pendulum_log) -> None:
    """A sweep cell stopped by its iteration limit: the task is "ok" (it ran), its solve "not_converged" with
    the solver's reason."""
    model, log = pendulum_log
    shipped = ("test-status-pendulum", pickle.dumps(model))
    row = calibration_task(shipped, log, "synthetic", 1e-3, 1e6, None, ["J", "b"],
                           calibration_lm(model, max_iterations=1), CalibrationOptions(covariance=False), False)
    assert set(COLUMNS) <= set(row)
    assert row["status"] == "ok", row["error"]
    assert row["solve_status"] == "not_converged" and row["converged"] is False, row
    assert row["solve_message"].startswith("iteration limit 1"), row["solve_message"]
