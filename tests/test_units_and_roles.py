"""Units and meanings a user can read (issue 55 item 3): w's unit per model from its readings and impulses, each
parameter's role in its equation (``mbfg models``), and the identifiability report naming every combination the
data leave free, the linear stage's M - J_r (M and J_r enter its motion only as M + J_r) included.

The stage's printed equation is checked against the stepper (one compile); the rest runs without JAX.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from mbfg.cli import main
from mbfg.identifiability import Combination, base_combinations, base_parameters, combinations_table
from mbfg.models import linear_stage, load_model
from mbfg.roles import noise_units, structural_sums, weight_unit


@pytest.mark.parametrize(("name", "unit", "noise"), [
    ("linear-stage", "m^2/(N s)^2", ("m", "N s")),
    ("pendulum", "rad^2/(N m s)^2", ("rad", "N m s")),
    ("furuta", "rad^2/(N m s)^2", ("rad", "N m s")),
    ("particle", "m^2/(N s)^2", ("m", "N s")),
])
def test_weight_unit_is_the_readings_over_the_impulses_squared(name: str, unit: str, noise: tuple[str, str]) -> None:
    model = load_model(name)
    assert weight_unit(model) == unit
    assert noise_units(model) == noise


def test_models_prints_the_stage_equation_and_roles(capsys) -> None:
    assert main(["models", "linear-stage"]) == 0
    out = capsys.readouterr().out
    assert "state error weight w: 1e+06 m^2/(N s)^2" in out
    assert "(M + J_r) x'' = K_F current - F_v x' - F_c sign(x') + F_0" in out
    roles = {line.split()[0]: line for line in out.split("roles of the parameters:")[1].splitlines() if line.strip()}
    assert "M + J_r" in roles["M"] and "M + J_r" in roles["J_r"]
    assert "a positive value pushes x up" in roles["F_0"]


def test_the_stage_equation_as_printed_is_the_steppers() -> None:
    """One Spook step from rest of (M + J_r) x'' = K_F current - F_v x' - F_c sign(x') + F_0, the viscous force
    at the new velocity: v_1 = h (K_F current + F_0 -/+ F_c) / (M + J_r + h F_v), for F_0 of either sign."""
    from mbfg.spook import simulate

    model = linear_stage()
    h = 1e-3
    for f0, current in ((3.0, 0.1), (-30.0, 0.0)):
        p = {"M": 4.0, "J_r": 2.0, "F_v": 50.0, "F_c": 1.0, "F_0": f0, "K_F": 100.0}
        traj = simulate(model, 2 * h, h, controls=np.full((2, 1), current), parameters=p)
        drive = 100.0 * current + f0
        v1 = h * (drive - np.sign(drive) * 1.0) / (4.0 + 2.0 + h * 50.0)
        assert (traj.observations[1, 0] - traj.observations[0, 0]) / h == pytest.approx(v1, rel=1e-6)


def test_structural_sums_of_the_stage() -> None:
    assert [(a, b) for a, b, _ in structural_sums(linear_stage())] == [("M", "J_r")]
    assert structural_sums(load_model("pendulum")) == []


def _stage_information(eps: float) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Information of (M, F_v, J_r) from a regression on (M + J_r) a and F_v v (a null direction M - J_r), plus an
    artefact eps g g^T that reads M alone (the carriage's weight on its compliant rails)."""
    rng = np.random.default_rng(3)
    a, v = rng.normal(size=200), rng.normal(size=200)
    X = np.column_stack([a, v, a])  # d r / d (M, F_v, J_r)
    g = np.array([1.0, 0.0, 0.0])
    return ["M", "F_v", "J_r"], X.T @ X + eps * np.outer(g, g), X


def test_a_structural_sum_is_reported_undetermined_with_its_reason_and_the_sum_determined() -> None:
    names, info, X = _stage_information(eps=50.0)
    values = np.array([4e-4, 20.0, 90.7])  # the trial's split: M near zero, J_r carrying the sum
    why = "M and J_r enter the motion along x only as M + J_r"
    combos = base_combinations(names, values, information=info, structural=[("M", "J_r", why)])
    free = [c for c in combos if not c.determined]
    assert len(free) == 1 and free[0].label == "M - J_r" and free[0].reason == why
    base = base_parameters(combos)
    sums = [c for c in base.base if "M" in c.label and "J_r" in c.label]
    assert len(sums) == 1 and sums[0].label in ("M + J_r", "J_r + M")
    assert sums[0].value == pytest.approx(values[0] + values[2], rel=1e-12)
    # Independently: in the parameters (S = M + J_r, F_v, D = M - J_r), D marginalized out of the information.
    T = np.array([[0.5, 0, 0.5], [0, 1, 0], [0.5, 0, -0.5]])  # theta = T phi, phi = (S, F_v, D)
    info_phi = T.T @ info @ T
    schur = info_phi[:2, :2] - np.outer(info_phi[:2, 2], info_phi[2, :2]) / info_phi[2, 2]
    assert sums[0].std == pytest.approx(np.sqrt(np.linalg.inv(schur)[0, 0]), rel=1e-9)
    lines = combinations_table(combos)
    assert f"not determined by the data: M - J_r  ({why}: moving along it fits as well)" in lines
    # The reason travels through the result's JSON and back.
    back = Combination.from_dict(names, json.loads(json.dumps(free[0].to_dict())))
    assert back.reason == why and back.label == "M - J_r"
    # Without the model's structure nothing says why.
    assert all(c.reason is None for c in base_combinations(names, values, information=info))


def test_a_free_direction_names_a_parameter_far_larger_than_its_move() -> None:
    """The exact null direction M - J_r at M = 4e-4 kg, J_r = 90.7 kg: relative to its size J_r barely moves,
    and it is still named."""
    names, info, _ = _stage_information(eps=0.0)
    combos = base_combinations(names, [4e-4, 20.0, 90.7], information=info)
    free = [c for c in combos if not c.determined]
    assert [c.label for c in free] == ["M - J_r"]


def test_calibrate_weight_estimate_reports_w_and_the_noise_it_implies_in_their_units(tmp_path, capsys) -> None:
    """--weight estimate on 1 s of a stage whose readings carry 1e-5 m of noise: the calibration runs at the
    estimated w, which the JSON records beside the reading and impulse noise it implies (sigma_p = sigma_y /
    sqrt(w), each in its unit), and the reading noise is the log's to within 30 %."""
    from mbfg.spook import simulate

    model = linear_stage()
    t = np.arange(1000) * 1e-3
    current = 0.4 * np.sin(2 * np.pi * 1.3 * t)
    traj = simulate(model, 1.0, 1e-3, controls=current[:, None])
    y = traj.observations + 1e-5 * np.random.default_rng(5).standard_normal(traj.observations.shape)
    from mbfg.logs import write_log

    path = tmp_path / "stage.csv"
    write_log(path, traj.t, {"x": y[:, 0]}, {"current": np.append(current, current[-1])})
    code = main(["calibrate", "linear-stage", str(path), "--free", "M,F_v,F_c", "--weight", "estimate", "--json",
                 "--quiet"])
    captured = capsys.readouterr()
    doc = json.loads(captured.out)
    est = doc["weight_estimate"]
    assert code == (0 if doc["converged"] else 1), captured.err
    assert doc["weight"] == est["weight"] and doc["weight_unit"] == "m^2/(N s)^2"
    assert (doc["sigma_observation_unit"], doc["sigma_impulse_unit"]) == ("m", "N s")
    assert est["sigma_impulse"] == pytest.approx(est["sigma_observation"] / np.sqrt(est["weight"]), rel=1e-12)
    assert est["sigma_observation"] == pytest.approx(1e-5, rel=0.3)
    assert "--weight estimate: w = " in captured.err and "m^2/(N s)^2" in captured.err
