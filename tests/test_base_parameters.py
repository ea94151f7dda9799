"""Identifiable (base) parameter combinations of a calibration, and the named parameters they imply
where the user holds the rest (issue 22 item 2).

The closed-form checks build the information matrix from known eigenvectors or from a regressor with a
known null space; the calibration check uses a pendulum whose inertia about its CoM is written as the sum
of a link's and a rotor's, ``J_link + J_rotor``: the two enter only as their sum, so the data cannot
split them, by construction, and the sum is the inertia a plain pendulum would estimate.
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from mbfg.calibration import CalibrationResult, ParameterEstimate
from mbfg.cli import main
from mbfg.cli.common import json_safe
from mbfg.errors import MbfgError
from mbfg.identifiability import Combination, base_combinations, base_parameters, combinations_json
from mbfg.models import pendulum

# ----------------------------------------------------------------- closed form: known eigenvectors


def _eigen_problem() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """theta (3,), its information (3, 3) = D^-1 V diag(mu) V^T D^-1 with D = diag(theta), and V, mu."""
    theta = np.array([2.0, 1.0, 0.5])
    V = np.array([[1.0, 1.0, 0.0], [1.0, -1.0, 0.0], [0.0, 0.0, np.sqrt(2.0)]]).T / np.sqrt(2.0)
    mu = np.array([1e6, 0.0, 4.0])  # relative stds 1e-3, none, 0.5
    Dinv = np.diag(1.0 / theta)
    return theta, Dinv @ V @ np.diag(mu) @ V.T @ Dinv, V, mu


def test_combinations_of_an_information_with_known_eigenvectors_are_its_scaled_eigenvectors() -> None:
    theta, info, V, mu = _eigen_problem()
    combos = base_combinations(["a", "b", "c"], theta, information=info)
    assert [c.determined for c in combos] == [True, True, False]
    for c, k in zip(combos[:2], (0, 2)):
        w = V[:, k] / theta  # the function estimated, in theta
        m = w[np.argmax(np.abs(w))]
        np.testing.assert_allclose(c.coefficients, w / m, atol=1e-12)
        np.testing.assert_allclose(c.relative_std, 1 / np.sqrt(mu[k]), rtol=1e-9)
        np.testing.assert_allclose(c.std, 1 / (np.sqrt(mu[k]) * abs(m)), rtol=1e-9)  # std of (V_k . x) / m
        np.testing.assert_allclose(c.value, (w / m) @ theta, rtol=1e-12)
    # a + b relative: v = (1, 1, 0)/sqrt 2, w = (1/2, 1, 0)/sqrt 2 -> (0.5, 1, 0).
    assert combos[0].label == "0.5 a + b"
    free = combos[2]
    # The free direction in theta is D v = (2, -1, 0)/sqrt 2 -> (1, -0.5, 0): a null vector of the information.
    np.testing.assert_allclose(free.coefficients, [1.0, -0.5, 0.0], atol=1e-12)
    np.testing.assert_allclose(info @ free.coefficients, 0.0, atol=1e-9 * np.abs(info).max())
    assert free.label == "a - 0.5 b" and free.std == np.inf and free.relative_std == np.inf


def test_labels_weigh_terms_in_relative_coordinates() -> None:
    """Only J1 + 0.04 m2 enters (an inertia about the joint with l1^2 = 0.04 m^2): with J1 = 5e-3 kg m^2 and
    m2 = 0.6 kg the m2 term is 5x the J1 term, and the free direction moves J1 by 8 J1 per 1.7 m2."""
    theta = np.array([5e-3, 0.6])
    w = np.array([1.0, 0.04])
    combos = base_combinations(["J1", "m2"], theta, information=1e12 * np.outer(w, w))
    assert [c.label for c in combos] == ["J1 + 0.04 m2", "0.04 J1 - m2"]
    np.testing.assert_allclose(combos[0].coefficients, w, rtol=1e-9)
    np.testing.assert_allclose(combos[0].std, 1e-6, rtol=1e-6)  # 1 / sqrt(1e12)


def test_a_base_parameter_label_shows_every_held_term_that_moves_it_by_a_tenth_of_its_std() -> None:
    """a + 0.01 b known to 1e-6, b free: the b term is 1 % of the combination (a relative cut-off would hide
    it) but 10^4 of its std; the label read back from JSON is the same."""
    theta = np.array([1.0, 1.0])
    w = np.array([1.0, 0.01])
    combos = base_combinations(["a", "b"], theta, information=1e12 * np.outer(w, w))
    base = base_parameters(combos).base
    assert [c.label for c in base] == ["a + 0.01 b"] and base_parameters(combos).fixed == {"b": pytest.approx(1.0)}
    doc = json.loads(json.dumps(combinations_json(combos)))
    assert [e["label"] for e in doc["base_parameters"]] == ["a + 0.01 b"]
    assert Combination.from_dict(["a", "b"], doc["base_parameters"][0]).label == "a + 0.01 b"


def test_information_and_covariance_give_the_same_combinations_when_all_are_determined() -> None:
    theta = np.array([2.0, 1.0, 0.5])
    rng = np.random.default_rng(3)
    X = rng.normal(size=(50, 3))
    info = X.T @ X
    from_info = base_combinations(["a", "b", "c"], theta, information=info)
    from_cov = base_combinations(["a", "b", "c"], theta, np.linalg.inv(info))
    for p, q in zip(from_info, from_cov):
        np.testing.assert_allclose(p.coefficients, q.coefficients, atol=1e-10)
        np.testing.assert_allclose([p.value, p.std, p.relative_std], [q.value, q.std, q.relative_std], rtol=1e-9)


# ----------------------------------------------------------------- closed form: a regressor's null space


def _sum_regressor() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """theta = (a, b, c) seen through y = (a + b) x1 + c x2 + noise (sigma 0.1): a and b only as their sum.
    Returns theta (the least-squares estimate on the null-space-free branch), the information X^T X / sigma^2
    and the regressor X."""
    rng = np.random.default_rng(0)
    x1, x2 = rng.normal(size=(2, 200))
    x2 += 0.5 * x1  # correlated columns: the sum's and c's estimates are correlated too
    X = np.stack([x1, x1, x2], axis=1)
    theta = np.array([1.2, 0.4, 3.0])
    return theta, X.T @ X / 0.1**2, X


def test_holding_one_of_a_sum_maps_the_sum_back_with_the_pseudo_inverse_covariance() -> None:
    theta, info, _ = _sum_regressor()
    pinv = np.linalg.pinv(info)
    out = base_parameters(base_combinations(["a", "b", "c"], theta, information=info), {"b": 0.7})
    # Closed form: a = (a + b) - 0.7, c = c; cov of (a + b, c) is the pseudo-inverse's (estimable functions).
    np.testing.assert_allclose(out.values, [theta[0] + theta[1] - 0.7, 0.7, theta[2]], rtol=1e-10)
    A = np.array([[1.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
    expected = A @ pinv @ A.T
    np.testing.assert_allclose(out.covariance[np.ix_([0, 2], [0, 2])], expected, rtol=1e-8)
    assert out.std[1] == 0 and out.fixed == {"b": 0.7}
    # A held value with its own std adds its variance to what it pins down.
    out2 = base_parameters(base_combinations(["a", "b", "c"], theta, information=info), {"b": (0.7, 0.05)})
    np.testing.assert_allclose(out2.std[0] ** 2, expected[0, 0] + 0.05**2, rtol=1e-8)
    np.testing.assert_allclose(out2.covariance[0, 1], -(0.05**2), rtol=1e-8)
    np.testing.assert_allclose(out2.std[1], 0.05)


def test_a_function_of_the_parameters_from_the_information_is_determined_only_along_the_data() -> None:
    from mbfg.identifiability import combination

    theta, info, _ = _sum_regressor()
    pinv = np.linalg.pinv(info)
    names = ["a", "b", "c"]
    value, std = combination(lambda p: p["a"] + p["b"] + 2 * p["c"], names, theta, information=info)
    w = np.array([1.0, 1.0, 2.0])
    np.testing.assert_allclose([value, std], [w @ theta, np.sqrt(w @ pinv @ w)], rtol=1e-6)
    assert combination(lambda p: p["a"], names, theta, information=info)[1] == np.inf  # a alone: not estimable


def test_holding_more_than_needed_is_the_conditional_gaussian_of_the_determined_functions() -> None:
    theta, info, _ = _sum_regressor()
    S = np.linalg.pinv(info)
    A = np.array([[1.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
    (s_ss, s_sc), (_, s_cc) = A @ S @ A.T  # cov of (a + b, c)
    c0 = theta[2] + 0.3  # held away from its estimate: the sum moves by its regression on c
    out = base_parameters(base_combinations(["a", "b", "c"], theta, information=info), {"b": 0.7, "c": c0})
    np.testing.assert_allclose(out.values[0], theta[0] + theta[1] + s_sc / s_cc * 0.3 - 0.7, rtol=1e-9)
    np.testing.assert_allclose(out.std[0] ** 2, s_ss - s_sc**2 / s_cc, rtol=1e-7)
    assert abs(s_sc / s_cc * 0.3) > 10 * out.std[0]  # the correlation matters: a test that can fail


def test_base_form_without_holding_is_the_sum_and_the_undetermined_difference() -> None:
    theta, info, _ = _sum_regressor()
    combos = base_combinations(["a", "b", "c"], theta, information=info)
    assert [c.label for c in combos if not c.determined] == ["a - b"]
    out = base_parameters(combos)
    assert out.fixed == {"b": pytest.approx(theta[1], rel=1e-12)}  # QR with pivoting keeps the larger of a, b
    assert sorted(c.label for c in out.base) == ["a + b", "c"]
    by = {c.label: c for c in out.base}
    np.testing.assert_allclose(by["a + b"].value, theta[0] + theta[1], rtol=1e-12)
    pinv = np.linalg.pinv(info)
    np.testing.assert_allclose(by["a + b"].std, np.sqrt(pinv[:2, :2].sum()), rtol=1e-8)
    np.testing.assert_allclose(by["c"].std, np.sqrt(pinv[2, 2]), rtol=1e-8)
    np.testing.assert_allclose(out.values, theta, rtol=1e-10)  # held at the estimate: the estimate back


def test_holding_a_determined_parameter_instead_of_one_of_the_sum_is_refused_naming_the_pair() -> None:
    theta, info, _ = _sum_regressor()
    combos = base_combinations(["a", "b", "c"], theta, information=info)
    with pytest.raises(MbfgError, match=r"a, b remain undetermined.*a - b"):
        base_parameters(combos, {"c": 3.0})
    with pytest.raises(MbfgError, match="'d' is not a free parameter"):
        base_parameters(combos, {"d": 1.0})


def test_combinations_survive_strict_json_and_map_back_the_same() -> None:
    theta, info, _ = _sum_regressor()
    combos = base_combinations(["a", "b", "c"], theta, information=info)
    doc = json.loads(json.dumps(json_safe({"model": "m", "parameters": {}} | combinations_json(combos))))
    assert doc["not_determined"] == ["a - b"] and doc["combinations"][-1]["std"] is None  # inf: strict JSON null
    back = base_parameters(doc, {"b": 0.7})
    direct = base_parameters(combos, {"b": 0.7})
    np.testing.assert_allclose(back.values, direct.values, rtol=1e-12)
    np.testing.assert_allclose(back.covariance, direct.covariance, rtol=1e-10)
    assert all(isinstance(c, Combination) for c in back.undetermined)


def test_a_result_file_written_before_combinations_is_named_as_such() -> None:
    old = {"model": "pendulum", "parameters": {"J": {"value": 1.6e-3, "std": 1e-6}}, "fixed": {}}
    with pytest.raises(MbfgError, match="calibrate again"):
        base_parameters(old)


# ----------------------------------------------------------------- the result object: table, JSON, DataFrame


def _result(names: list[str], theta: np.ndarray, info: np.ndarray, lower: float = 0.0,
            problem: object = None) -> CalibrationResult:
    """A CalibrationResult around a given information (no calibration run): what table/to_dict/to_dataframe
    print of it is the identifiability report alone."""
    cov = np.linalg.pinv(info)
    est = [ParameterEstimate(n, float(v), float(np.sqrt(cov[i, i])), "kg m^2", lower, np.inf)
           for i, (n, v) in enumerate(zip(names, theta))]
    return CalibrationResult(pendulum(), est, cov, np.zeros(0), 1.0, 1.0, 0.0, np.zeros(3), 0.1, 0.0, 3, "converged", 0.1,
                             1e-3, 1e6, problem=problem, information=info)


def test_result_table_json_and_dataframe_name_the_undetermined_combination() -> None:
    theta, info, _ = _sum_regressor()
    result = _result(["J", "b", "d"], theta, info)
    assert result.not_determined == ["J - b"]
    lines = result.table().splitlines()
    assert "not determined by the data: J - b  (no information)" in lines
    assert any(line.strip().startswith("J + b = ") for line in lines)
    assert lines[-1].startswith("cost ")
    doc = result.to_dict()
    assert doc["not_determined"] == ["J - b"] and doc["base_held"] == ["b"]
    assert sorted(e["label"] for e in doc["base_parameters"]) == ["J + b", "d"]
    frame = result.to_dataframe()
    assert frame.attrs["not_determined"] == ["J - b"]
    assert list(frame.attrs["combinations"]["determined"]) == [True, True, False]
    assert sorted(frame.attrs["base"].index) == ["J + b", "d"]


def test_a_result_whose_parameters_are_all_determined_prints_no_combination_lines() -> None:
    theta = np.array([1.6e-3, 2e-3])
    info = np.diag([1e14, 1e12])
    result = _result(["J", "b"], theta, info)
    lines = result.table().splitlines()
    assert len(lines) == 4 and lines[-1].startswith("cost ")  # header, J, b, cost: as before
    assert result.to_dict()["not_determined"] == []


def test_result_without_information_uses_its_covariance() -> None:
    Rm = np.array([[1.0, 1.0], [1.0, -1.0]]) / np.sqrt(2)
    C = Rm @ np.diag([1e-8, 4.0]) @ Rm.T
    est = [SimpleNamespace(name=n, value=1.0, std=float(np.sqrt(C[i, i]))) for i, n in enumerate(["J1", "J2"])]
    out = base_parameters(SimpleNamespace(parameters=est, covariance=C), {"J2": 0.5})
    np.testing.assert_allclose(out.values, [1.5, 0.5], rtol=1e-9)  # J1 + J2 = 2
    np.testing.assert_allclose(out.std[0], np.sqrt(np.ones(2) @ C @ np.ones(2)), rtol=1e-6)  # = sqrt(2e-8)


# ----------------------------------------------------------------- a calibration: link + rotor inertia

MODEL = """\
name: pendulum-rotor
description: one link on a hinge about y, its inertia about the CoM a link's plus a rotor's
parameters:
  m: {value: 0.2, unit: kg, lower: 1e-6}
  r: {value: 0.12, unit: m, lower: 0}
  J_link: {value: 1.0e-3, unit: kg m^2, lower: 1e-9, free: true}
  J_rotor: {value: 6.0e-4, unit: kg m^2, lower: 1e-9, free: true}
  J_perp: {value: 1.6e-3, unit: kg m^2, lower: 1e-9}
  b: {value: 2.0e-3, unit: N m s/rad, lower: 0, free: true}
  g: 9.81
  eps_lin: 1e-5
  eps_rot: 1e-3
  tau: 2e-3
links:
  - {name: link, joint: q, parent: null, mass: m, inertia: [J_perp, "J_link + J_rotor", J_perp],
     offset: [0, 0, 0], com: r, axis: y, viscous: b}
"""
TRUTH = {"J_link": 1.0e-3, "J_rotor": 6.0e-4, "b": 2.0e-3}


@pytest.fixture(scope="module")
def rotor(tmp_path_factory) -> dict:
    """The CLI on a 0.5 s log (1 ms, noise 1e-3 rad) of the rotor pendulum: calibrate J_link, J_rotor, b
    from J_link +30 %, J_rotor -17 %, b -25 %, holding J_rotor at its truth for the mapping back."""
    folder: Path = tmp_path_factory.mktemp("rotor")
    model, log, start, out = folder / "rotor.yaml", folder / "log.csv", folder / "start.yaml", folder / "out.json"
    model.write_text(MODEL)
    start.write_text("J_link: 1.3e-3\nJ_rotor: 5.0e-4\nb: 1.5e-3\n")
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        assert main(["simulate", str(model), "--duration", "0.5", "--dt", "0.001", "--init", "q=2.5", "--noise",
                     "0.001", "--seed", "0", "--out", str(log), "--quiet"]) == 0
        code = main(["calibrate", str(model), str(log), "--params", str(start), "--free", "J_link,J_rotor,b",
                     "--hold", f"J_rotor={TRUTH['J_rotor']}", "--out", str(out), "--quiet"])
    return dict(code=code, stdout=stdout.getvalue(), stderr=stderr.getvalue(), doc=json.loads(out.read_text()),
                out=out)


def test_calibration_names_the_rotor_and_link_split_as_not_determined(rotor) -> None:
    assert rotor["code"] == 0, rotor["stderr"]
    print(rotor["stdout"])
    doc = rotor["doc"]
    assert doc["converged"]
    assert doc["not_determined"] == ["J_link - J_rotor"]
    assert "not determined by the data: J_link - J_rotor  (no information)" in rotor["stdout"].splitlines()
    free = [c for c in doc["combinations"] if not c["determined"]][0]
    np.testing.assert_allclose([free["coefficients"][n] for n in ("J_link", "J_rotor", "b")], [1, -1, 0], atol=1e-6)


def test_calibration_estimates_the_inertia_sum_within_three_std_of_the_truth(rotor) -> None:
    by = {e["label"]: e for e in rotor["doc"]["base_parameters"]}
    assert sorted(by) == ["J_link + J_rotor", "b"]
    total = by["J_link + J_rotor"]
    assert abs(total["value"] - (TRUTH["J_link"] + TRUTH["J_rotor"])) < 3 * total["std"], total
    assert total["std"] < 3e-3 * total["value"]  # and the data do determine it
    assert abs(by["b"]["value"] - TRUTH["b"]) < 3 * by["b"]["std"], by["b"]
    line = next(x for x in rotor["stdout"].splitlines() if x.strip().startswith("J_link + J_rotor = "))
    assert f"{total['value']:.6g}" in line


def test_holding_the_rotor_at_its_truth_recovers_the_link_inertia(rotor) -> None:
    mapped = rotor["doc"]["base"]["parameters"]
    total = {e["label"]: e for e in rotor["doc"]["base_parameters"]}["J_link + J_rotor"]
    link = mapped["J_link"]
    assert mapped["J_rotor"] == {"value": TRUTH["J_rotor"], "std": 0.0, "held": True}
    assert abs(link["value"] - TRUTH["J_link"]) < 3 * link["std"], link
    np.testing.assert_allclose(link["std"], total["std"], rtol=1e-9)  # all of the sum's uncertainty
    np.testing.assert_allclose(link["value"], total["value"] - TRUTH["J_rotor"], rtol=1e-9)
    assert "J_rotor" in rotor["stdout"] and "held" in rotor["stdout"]
    # The same mapping from the written file, in Python.
    again = base_parameters(rotor["out"], {"J_rotor": TRUTH["J_rotor"]})
    np.testing.assert_allclose(again.parameters["J_link"], (link["value"], link["std"]), rtol=1e-9)


@pytest.fixture(scope="module")
def plain(rotor, tmp_path_factory) -> dict:
    """The same log calibrated with the inertia as one parameter ``J`` (the identifiable model)."""
    folder: Path = tmp_path_factory.mktemp("plain")
    model, start = folder / "plain.yaml", folder / "start.yaml"
    text = MODEL.replace('"J_link + J_rotor"', "J").replace("name: pendulum-rotor", "name: pendulum-plain")
    model.write_text(text.replace("  J_rotor: {value: 6.0e-4, unit: kg m^2, lower: 1e-9, free: true}\n", "")
                     .replace("J_link: {value: 1.0e-3", "J: {value: 1.6e-3"))
    start.write_text("J: 1.8e-3\nb: 1.5e-3\n")
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        code = main(["calibrate", str(model), str(rotor["out"].parent / "log.csv"), "--params", str(start),
                     "--free", "J,b", "--json", "--quiet"])
    assert code == 0, stderr.getvalue()
    return json.loads(stdout.getvalue())


@pytest.mark.slow
def test_the_determined_sum_is_what_the_identifiable_model_estimates(rotor, plain) -> None:
    """Independent of the truth and its noise: the base parameter J_link + J_rotor of the singular problem is
    the estimate of J in the model written with J alone, value and std."""
    by = {e["label"]: e for e in rotor["doc"]["base_parameters"]}
    assert plain["not_determined"] == []
    for label, name in (("J_link + J_rotor", "J"), ("b", "b")):
        np.testing.assert_allclose(by[label]["value"], plain["parameters"][name]["value"], rtol=1e-5)
        np.testing.assert_allclose(by[label]["std"], plain["parameters"][name]["std"], rtol=1e-2)


def test_a_parameter_on_its_bound_is_judged_against_its_start_value_not_the_bound() -> None:
    """J on its lower bound 1e-9 (the optimum outside the box) with std 1e-6: relative to the bound it looks
    undetermined, relative to where it started (the model's 1.6e-3) it is known to 0.06 %."""
    theta = np.array([1e-9, 2e-3])
    info = np.diag([1e12, 1e12])
    alone = _result(["J", "b"], theta, info, lower=1e-9)
    assert alone.not_determined == ["J"]  # no start known: the bound is the scale
    started = _result(["J", "b"], theta, info, lower=1e-9, problem=SimpleNamespace(model=pendulum()))
    assert started.not_determined == []
    np.testing.assert_allclose(started.combinations()[-1].relative_std, 1e-6 / 1.6e-3, rtol=1e-9)


@pytest.mark.parametrize("hold, expected", [
    ("d=0.1", "'d' is not a scalar parameter being estimated"),
    ("J=abc", "the value of 'J' must be a number"),
    ("J", "expected NAME=VALUE items"),
    ("J=1e-3,J=2e-3", "given twice"),
])
def test_hold_is_checked_before_the_calibration(capsys, tmp_path, hold: str, expected: str) -> None:
    log = tmp_path / "log.csv"
    log.write_text("t,theta\n0,0.1\n0.001,0.1\n0.002,0.1\n")
    code = main(["calibrate", "pendulum", str(log), "--free", "J,b", "--hold", hold, "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and expected in err, err


def _fake_calibration(monkeypatch, tmp_path) -> Path:
    """``mbfg calibrate`` with the calibration replaced by a result around the sum regressor's information
    (J and b only as J + b, d alone): the CLI's printing and --hold, without compiling anything."""
    import mbfg.calibration

    theta, info, _ = _sum_regressor()
    monkeypatch.setattr(mbfg.calibration, "calibrate", lambda *a, **k: _result(["J", "b", "d"], theta, info))
    log = tmp_path / "log.csv"
    log.write_text("t,theta\n0,0.1\n0.001,0.1\n0.002,0.1\n")
    return log


def test_cli_prints_the_undetermined_combination_and_the_mapping_with_hold(capsys, monkeypatch, tmp_path) -> None:
    log = _fake_calibration(monkeypatch, tmp_path)
    theta, info, _ = _sum_regressor()
    out_json = tmp_path / "out.json"
    code = main(["calibrate", "pendulum", str(log), "--free", "J,b,d", "--hold", "b=0.7", "--out", str(out_json),
                 "--quiet"])
    out, err = capsys.readouterr()
    assert code == 0, err
    lines = out.splitlines()
    assert "not determined by the data: J - b  (no information)" in lines
    # The mapping's table follows the calibration's: its rows are "name value std [held]".
    mapped = lines[lines.index(next(x for x in lines if x.split() == ["parameter", "value", "std"])) + 1:]
    rows = {x.split()[0]: x.split()[1:] for x in mapped}
    assert float(rows["J"][0]) == pytest.approx(theta[0] + theta[1] - 0.7, rel=1e-5)
    assert rows["b"] == ["0.7", "0", "held"]
    doc = json.loads(out_json.read_text())
    assert doc["base"]["parameters"]["b"] == {"value": 0.7, "std": 0.0, "held": True}
    assert doc["not_determined"] == ["J - b"]


def test_cli_hold_that_leaves_a_combination_free_fails_after_writing_the_result(capsys, monkeypatch,
                                                                                 tmp_path) -> None:
    log = _fake_calibration(monkeypatch, tmp_path)
    out_json = tmp_path / "out.json"
    code = main(["calibrate", "pendulum", str(log), "--free", "J,b,d", "--hold", "d=3", "--out", str(out_json),
                 "--quiet"])
    out, err = capsys.readouterr()
    assert code == 2 and "--hold d=3" in err and "J, b remain undetermined" in err and "J - b" in err, err
    assert out.splitlines()[-1].startswith("cost ") and out_json.exists()  # the calibration itself is kept
