"""The built-in ``dfki-double-pendulum``: the lab's identification as defaults, and its dynamics
against an independent Lagrangian ODE of the lab's equations of motion (README of the data set)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from scipy.integrate import solve_ivp

from mbfg.dfki import DFKI_LAB, lab_combinations, lab_to_parameters
from mbfg.errors import ModelError
from mbfg.models import STIFF, load_model
from mbfg.spook import simulate

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data"
LAB_FILE = DATA / "dfki_double_pendulum" / "model_parameters.yml"


def _lab_file() -> dict[str, float]:
    if not LAB_FILE.exists():
        pytest.fail(f"lab file not found: {LAB_FILE.resolve()} (shared/data beside the repository is absent)")
    import yaml

    return {k: float(v) for k, v in yaml.safe_load(LAB_FILE.read_text()).items()}


def test_defaults_reproduce_the_lab_files_planar_combinations_rotors_and_friction():
    lab = _lab_file()
    assert DFKI_LAB == lab  # the built-in defaults are the file's values
    v = load_model("dfki-double-pendulum").parameters.numpy_values()
    c = lab_combinations(v)
    Ir, gr = lab["Ir"], lab["gr"]
    # M00 at q2 = pi/2 minus the rotor diagonal gr^2 Ir: I1 + I2 + m2 l1^2 + Ir (README's mass matrix)
    np.testing.assert_allclose(c["I1 + m2 l1^2"], lab["I1"] + lab["m2"] * lab["l1"] ** 2 + Ir, rtol=1e-12)
    np.testing.assert_allclose(c["I2"], lab["I2"], rtol=1e-12)
    np.testing.assert_allclose(c["m1 r1 + m2 l1"], lab["m1"] * lab["r1"] + lab["m2"] * lab["l1"], rtol=1e-12)
    np.testing.assert_allclose(c["m2 r2"], lab["m2"] * lab["r2"], rtol=1e-12)
    assert v["J1"] > 0 and v["J2"] > 0  # a rigid body, although the lab's own I2 < m2 r2^2
    assert (v["b1"], v["b2"], v["l1"], v["g"]) == (lab["b1"], lab["b2"], lab["l1"], lab["g"])
    np.testing.assert_allclose([v["J_s_q1"], v["J_s_q2"]], [gr**2 * Ir] * 2, rtol=1e-12)
    # the Coulomb torques are the lab's sliding torques (pi/2) cf, whatever the load on the hinge
    np.testing.assert_allclose([v["tau_c1"], v["tau_c2"]], [math.pi / 2 * lab["cf1"], math.pi / 2 * lab["cf2"]],
                               rtol=1e-12)


def test_lab_parameters_missing_key_is_named():
    bad = dict(DFKI_LAB)
    del bad["cf2"]
    with pytest.raises(ModelError, match="cf2"):
        lab_to_parameters(bad)


def _lab_ode(lab, off_diagonal_rotor, friction=False):
    """The lab's M q'' + C q' = G (README), no torque; y = (q1, q2, q1', q2'). ``friction``: the lab's
    viscous and Coulomb terms ``b q' + cf atan(100 q')`` (their plant's smoothed sign)."""
    m1, m2, l1, r1, r2, I1, I2, Ir, gr, g = (lab[k] for k in ("m1", "m2", "l1", "r1", "r2", "I1", "I2", "Ir",
                                                             "gr", "g"))

    def f(t, y):
        q1, q2, w1, w2 = y
        c2, s2 = math.cos(q2), math.sin(q2)
        M = np.array([[I1 + I2 + m2 * l1**2 + 2 * m2 * l1 * r2 * c2 + gr**2 * Ir + Ir,
                       I2 + m2 * l1 * r2 * c2 - (gr * Ir if off_diagonal_rotor else 0.0)],
                      [0.0, I2 + gr**2 * Ir]])
        M[1, 0] = M[0, 1]
        h = m2 * l1 * r2 * s2  # Christoffel terms of the 2-link chain
        C = np.array([-2 * h * w1 * w2 - h * w2**2, h * w1**2])
        G = np.array([-m1 * g * r1 * math.sin(q1) - m2 * g * (l1 * math.sin(q1) + r2 * math.sin(q1 + q2)),
                      -m2 * g * r2 * math.sin(q1 + q2)])
        if friction:
            w = np.array([w1, w2])
            G = G - np.array([lab["b1"], lab["b2"]]) * w - np.array([lab["cf1"], lab["cf2"]]) * np.arctan(100 * w)
        return [w1, w2, *np.linalg.solve(M, G - C)]

    return f


def test_frictionless_swing_converges_to_the_labs_lagrangian_ode():
    model = load_model("dfki-double-pendulum").without_dry_friction().with_parameters(
        {"b1": 0.0, "b2": 0.0, **STIFF})
    y0 = [1.0, -0.5, 0.0, 0.0]
    duration = 1.5
    errors = []
    for h in (2e-3, 1e-3):
        n = int(round(duration / h))
        t = np.arange(n + 1) * h
        ref = solve_ivp(_lab_ode(DFKI_LAB, False), (0, duration), y0, t_eval=t, rtol=1e-11, atol=1e-12,
                        method="DOP853").y[:2].T
        traj = simulate(model, duration, h, initial=model.initial_state({"q1": 1.0, "q2": -0.5}))
        errors.append(np.abs(np.unwrap(traj.observations, axis=0) - ref).max())
    order = math.log2(errors[0] / errors[1])
    print(f"\nmax angle error vs lab ODE at h = 2, 1 ms: {errors[0]:.3e}, {errors[1]:.3e}; order {order:.2f}")
    assert 0.8 < order < 1.2  # Spook is first order: the error is the integrator's, not the model's
    assert errors[1] < 1e-2


def test_coulomb_and_viscous_swing_follows_the_labs_ode_with_its_friction():
    """A fast swing (no hinge reverses, so the lab's atan(100 q') is within 1.3 % of its sliding value):
    our Coulomb and viscous hinges follow the lab's ODE with friction, first order in h, much closer
    than the frictionless ODE (friction alone moves the swing by tenths of a radian in 0.2 s)."""
    model = load_model("dfki-double-pendulum").with_parameters(STIFF)
    y0 = [1.5, 1.5, 10.0, -10.0]  # rates that keep both hinges sliding one way for the whole span
    duration = 0.2
    errors, frictionless = [], 0.0
    for h in (1e-3, 5e-4):
        n = int(round(duration / h))
        t = np.arange(n + 1) * h
        sol = solve_ivp(_lab_ode(DFKI_LAB, False, friction=True), (0, duration), y0, t_eval=t, rtol=1e-11,
                        atol=1e-12, method="DOP853")
        assert np.abs(sol.y[2:]).min() > 0.5  # sliding all along: atan(100 q') >= 0.987 pi/2
        free = solve_ivp(_lab_ode(DFKI_LAB, False), (0, duration), y0, t_eval=t, rtol=1e-11, atol=1e-12,
                         method="DOP853").y[:2].T
        x0 = model.initial_state({"q1": y0[0], "q2": y0[1]}, {"q1": y0[2], "q2": y0[3]})
        traj = simulate(model, duration, h, initial=x0)
        q = np.unwrap(traj.observations, axis=0)
        errors.append(np.abs(q - sol.y[:2].T).max())
        frictionless = np.abs(q - free).max()
    order = math.log2(errors[0] / errors[1])
    print(f"\nmax angle error vs the lab's ODE with friction at h = 1, 0.5 ms: {errors[0]:.2e}, {errors[1]:.2e} "
          f"(order {order:.2f}); vs the frictionless ODE {frictionless:.2e}")
    assert frictionless > 0.01
    assert errors[1] < 0.1 * frictionless
    assert 0.7 < order < 1.3


def test_cli_params_accepts_the_labs_yaml(tmp_path):
    from mbfg.cli import model_with_params

    lab = _lab_file()
    v = model_with_params("dfki-double-pendulum", str(LAB_FILE)).parameters.numpy_values()
    assert v == load_model("dfki-double-pendulum").parameters.numpy_values()
    changed = tmp_path / "lab.yml"
    changed.write_text(LAB_FILE.read_text().replace(f"cf1: {lab['cf1']}", "cf1: 0.186"))
    w = model_with_params("dfki-double-pendulum", str(changed)).parameters.numpy_values()
    np.testing.assert_allclose(w["tau_c1"], 2 * v["tau_c1"], rtol=1e-12)

