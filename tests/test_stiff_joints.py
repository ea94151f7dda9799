"""Stiff joints (Marklund et al. (2025), abstract: "very stiff constraints may cause difficulties"): calibration at a hinge
compliance of 1e-8 m/N started from a solve with joints 100 times softer (``CalibrationOptions(soft_start=...)``,
:func:`mbfg.graphs.restarts.stiffen`), against the double pendulum of a minimal-coordinate ODE (rigid hinges,
DOP853 at rtol 1e-12: ``tests/rigid_references.py``)."""

from __future__ import annotations

import numpy as np
import pytest

from mbfg.calibration import calibrate
from mbfg.calibration_options import CalibrationOptions, calibration_lm
from mbfg.errors import ModelError
from mbfg.graphs.restarts import softened
from mbfg.logs import Log
from mbfg.models import double_pendulum, particle, pendulum
from mbfg.spook import simulate

try:
    import rigid_references as R
except ImportError:
    from tests import rigid_references as R

FREE = ["J1", "J2", "b1", "b2"]


@pytest.mark.slow
def test_double_pendulum_at_eps_lin_1e_8_converges_from_a_softer_solve_with_both_inertias_within_1_percent():
    """2 s at 1 kHz (half the benchmark's log), 1e-3 rad of noise, J1, J2, b1, b2 started 20 % high. At eps_lin
    1e-8 m/N a solve from the readings stops far off (on the benchmark's 4 s, J1 -53 % after 20 iterations,
    ``python benchmarks/stiff_joints.py --eps 1e-8``); from the solution with joints 100 times softer the stiff
    solve converges within 20 iterations (12 here), and the rigid hinges' inertias come out within 1 % (on the
    benchmark's 4 s at the default 1e-5 m/N, J1 is 8.6 % low)."""
    model = double_pendulum()
    truth = model.parameters.numpy_values()
    t = np.arange(0.0, 2.0 + 1e-9, 1e-3)
    q = R.simulate_reference(R.double_pendulum_ode, [1.0, -0.5, 0.0, 0.0], t, truth)[:, :2]
    noise = 1e-3 * np.random.default_rng(0).standard_normal(q.shape)
    log = Log(t, q + noise, np.zeros((len(t), 0)), model.observations, model.controls, "minimal-coordinate ODE")
    stiff = model.with_parameters({name: 1.2 * truth[name] for name in FREE} | {"eps_lin": 1e-8, "eps_rot": 1e-6})
    result = calibrate(stiff, log, free=FREE, options=CalibrationOptions(soft_start=100.0, covariance=False))
    soft = result.problem.softened_from
    print("\n" + result.table())
    assert soft is not None and soft.converged
    assert result.converged and result.iterations - soft.iterations <= 20, (result.iterations, soft.iterations)
    assert result.problem.model.parameters.numpy_values()["eps_lin"] == 1e-8  # the stiff model's own joints
    for name in ("J1", "J2"):
        assert abs(result.values[name] / truth[name] - 1) < 0.01, (name, result.values[name], truth[name])
    assert f"{soft.iterations} of them with softer joints" in result.table()


def test_soft_start_softens_every_joint_compliance_and_refuses_a_bad_factor_by_name():
    model = pendulum()
    values = model.parameters.numpy_values()
    soft = softened(model, 100.0).parameters.numpy_values()
    assert soft["eps_lin"] == 100 * values["eps_lin"] and soft["eps_rot"] == 100 * values["eps_rot"]
    assert {k: v for k, v in soft.items() if not k.startswith("eps")} == \
        {k: v for k, v in values.items() if not k.startswith("eps")}
    log = Log(np.arange(3) * 1e-3, np.zeros((3, 1)), np.zeros((3, 0)), model.observations, model.controls, "log")
    for bad in (1.0, 0.5, -3.0, float("nan")):
        with pytest.raises(ModelError, match="soft_start: expected a"):
            calibrate(model, log, options=CalibrationOptions(soft_start=bad))
    with pytest.raises(ModelError, match="soft_start and restart_weight"):
        calibrate(model, log, options=CalibrationOptions(soft_start=100.0, restart_weight=1e6))
    with pytest.raises(ModelError, match="soft_start: particle has no joint compliance"):
        softened(particle(), 100.0)


def test_calibrate_command_passes_soft_start_and_its_check_names_the_option(tmp_path, capsys):
    from mbfg.cli import main

    log = tmp_path / "log.csv"
    log.write_text("t,theta\n0,0.1\n0.001,0.1\n0.002,0.1\n", encoding="utf-8")
    assert main(["calibrate", "pendulum", str(log), "--soft-start", "0.5", "--quiet"]) == 2
    assert "mbfg: error: --soft-start 0.5: expected a factor > 1" in capsys.readouterr().err


@pytest.mark.slow
def test_the_bias_calibrations_start_from_softer_joints_too(monkeypatch):
    """CalibrationOptions(bias=True, soft_start=F): the bias estimate's calibrations (one of them at a tenth of the joint
    compliances, stiffer still) get the soft start, as they get the calibration's other arguments."""
    import mbfg.calibration as calibration

    seen = {}

    def record(identified, log, values, h, **kwargs):
        seen.update(kwargs)
        return {"h": dict.fromkeys(values, 0.0), "compliance": dict.fromkeys(values, 0.0)}

    monkeypatch.setattr(calibration, "discretization_bias", record)
    model = pendulum()
    log = simulate(model, 0.3, 1e-3, initial=model.initial_state({"theta": 1.0})).to_log(noise=1e-4, seed=0)
    calibrate(model, log, free=["J"], lm=calibration_lm(model, max_iterations=2),
              options=CalibrationOptions(soft_start=10.0, bias=True, covariance=False))
    assert seen["options"].soft_start == 10.0
