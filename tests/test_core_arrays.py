"""The rigid-body core as arrays: programs that do not grow with the joints, and one compile per model.

- The traced program of the impulse residual (Marklund, Servin, Larson 2025, eqs. 3.6-3.7) with its forward
  Jacobian has (nearly) the same number of equations for a chain of 12 motorized hinges as for one: the
  joints of a type are evaluated in one vectorized expression, never in a Python loop (a structural check on
  the jaxpr, not a timing).
- The vectorized position functions of a model that mixes every joint type in no particular order (and
  frames placed by parameter expressions) equal the joints' equations written out one joint at a time in
  NumPy (F.1 for the hinge; the slider, ball and lock of section 2), row by row in the layout's order;
  the equality rows' regularization (2.9-2.11, F.2, F.3) likewise.
- ``simulate`` of a second and a third duration compiles and traces nothing (one padded chunk), and the
  padding leaves the steps it keeps unchanged.
"""

from __future__ import annotations

import numpy as np
import pytest

from mbfg import residuals, spook
from mbfg._jax import jax, jnp
from mbfg._programs import jaxpr_equation_count
from mbfg.models import pendulum
from mbfg.parameters import Parameter, ParameterSet
from mbfg.rigid import WORLD, Ball, Body, Frame, Hinge, Lock, Motor, Prismatic, RigidModel
from mbfg.spook import simulate
from mbfg.testing import chain_urdf
from mbfg.urdf import urdf_from_string


def _impulse_jacobian_equations(n: int) -> int:
    model = urdf_from_string(chain_urdf(n), motors=[f"j{i}" for i in range(n)])
    x0 = model.initial_state({f"j{i}": 0.1 * (i + 1) for i in range(n)})
    u = jnp.full(n, 0.2)

    def residual(a, b, p):
        return residuals.impulse(model, a, b, u, p, 1e-3)

    jacobian = jax.jacfwd(residual, argnums=(0, 1))
    return jaxpr_equation_count(jax.make_jaxpr(jacobian)(x0, x0, model.parameters.arrays()).jaxpr)


def test_impulse_jacobian_traced_size_of_12_links_within_1_5x_of_1_link() -> None:
    one, twelve = _impulse_jacobian_equations(1), _impulse_jacobian_equations(12)
    print(f"impulse + jacfwd: {one} equations for 1 link, {twelve} for 12 ({twelve / one:.2f}x)")
    assert twelve <= 1.5 * one, (one, twelve)


# --------------------------------------------------------------------------- mixed joint types

def _mixed_model() -> RigidModel:
    """Every joint type, interleaved (slider, hinge, ball, hinge, lock), frames placed by parameter sums."""
    names = ["L", "r", "eps_lin", "eps_rot", "tau", "g", "c1", "c2", "K", "Js"]
    values = [0.4, 0.1, 1e-8, 2e-8, 2e-3, 9.81, 0.03, 0.05, 1.5, 2e-5]
    params = ParameterSet(Parameter(n, v, "", 0.0) for n, v in zip(names, values))
    bodies = [Body(f"b{i}", 1.0 + 0.1 * i, (0.01, 0.02, 0.03)) for i in range(5)]
    R = np.array([[0.0, 0.0, 1.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])  # a constant frame rotation
    joints = [
        Prismatic("s", Frame(WORLD, (0.0, 0.1, 0.0), R), Frame("b0", ("r", 0.0, 0.0)), viscous="c1",
                  motor=Motor("u_s", "K", "Js"), eps_lin="eps_lin", eps_rot="eps_rot", tau="tau"),
        Hinge("h1", Frame("b0", (0.0, 0.0, "L - r")), Frame("b1", (0.0, 0.0, "r")), viscous="c2",
              eps_lin="eps_lin", eps_rot="eps_rot", tau="tau"),
        Ball("ball", Frame("b1", (0.0, "-r", 0.0)), Frame("b2", ("L", 0.0, 0.0)), eps="eps_lin", tau="tau"),
        Hinge("h2", Frame("b2", (0.1, 0.0, 0.0), R.T), Frame("b3", (0.0, "L + r", 0.0)),
              motor=Motor("u_h", "K", "Js"), eps_lin="eps_lin", eps_rot="eps_rot", tau="tau"),
        Lock("lock", Frame("b3", (0.0, 0.0, 0.2)), Frame("b4", (0.0, 0.0, "-r")), eps_lin="eps_lin",
             eps_rot="eps_rot", tau="tau"),
    ]
    return RigidModel("mixed", bodies, joints, parameters=params)


def _numpy_positions(model: RigidModel, r: np.ndarray, R: np.ndarray, p: dict) -> np.ndarray:
    """The position functions one joint at a time, in NumPy, from the parts' definitions."""
    def value(x):
        if isinstance(x, str):  # "a - b" or "a + b" or "-a" or "a"
            tokens = x.replace("-", " - ").replace("+", " + ").split()
            total, sign = 0.0, 1.0
            for t in tokens:
                if t in "+-":
                    sign = -1.0 if t == "-" else 1.0
                else:
                    total += sign * p[t]
            return total
        return float(x)

    def pose(f: Frame):
        s = np.array([value(x) for x in f.position])
        if f.body == WORLD:
            return s, f.R()
        i = model.body_index[f.body]
        return r[i] + R[i] @ s, R[i] @ f.R()

    out = []
    for j in model.joints:
        o_a, R_a = pose(j.a)
        o_b, R_b = pose(j.b)
        R_ab = R_a.T @ R_b
        skew = 0.5 * np.array([R_ab[2, 1] - R_ab[1, 2], R_ab[0, 2] - R_ab[2, 0], R_ab[1, 0] - R_ab[0, 1]])
        if isinstance(j, Hinge):  # F.1: coincident origins, a's z orthogonal to b's x and y; then the angle
            angle = np.arctan2(R_ab[1, 0] - R_ab[0, 1], R_ab[0, 0] + R_ab[1, 1])
            out += [*(o_b - o_a), R_a[:, 2] @ R_b[:, 0], R_a[:, 2] @ R_b[:, 1], angle]
        elif isinstance(j, Prismatic):  # b's origin on a's z axis, orientation locked; then the displacement
            d = R_a.T @ (o_b - o_a)
            out += [d[0], d[1], *skew, d[2]]
        elif isinstance(j, Ball):
            out += list(o_b - o_a)
        else:
            out += [*(o_b - o_a), *skew]
    return np.array(out)


@pytest.fixture(scope="module")
def mixed():
    model = _mixed_model()
    rng = np.random.default_rng(3)
    e = rng.normal(size=(model.nb, 4))
    e /= np.linalg.norm(e, axis=1, keepdims=True)
    x = model.initial_state()._replace(r=jnp.asarray(rng.normal(size=(model.nb, 3))), e=jnp.asarray(e),
                                       v=jnp.asarray(rng.normal(size=(model.nb, 3))),
                                       w=jnp.asarray(rng.normal(size=(model.nb, 3))))
    return model, x


def test_position_functions_of_interleaved_joint_types_equal_each_joints_equations(mixed) -> None:
    model, x = mixed
    p = model.parameters.numpy_values()
    R = np.asarray(model.rotations(x))
    expected = _numpy_positions(model, np.asarray(x.r), R, p)
    got = np.asarray(model.position_functions(x.r, jnp.asarray(R), model.parameters.arrays()))
    assert got.shape == expected.shape == (model.layout.n_pos,)
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-14)


def test_equality_rows_regularization_eqs_2_9_to_2_11_f2_f3_in_layout_order(mixed) -> None:
    model, x = mixed
    p = model.parameters.numpy_values()
    h = 1e-3
    u = np.array([0.7, -0.4])  # u_s, u_h in model.controls order
    assert model.controls == ("u_s", "u_h")
    rows = model.rows(x, jnp.asarray(u), model.parameters.arrays(), h)
    f_pos, J_pos = (np.asarray(a) for a in model.position_jacobian(x, model.parameters.arrays()))
    Jv = J_pos @ np.asarray(x.velocity())
    sigma, a, A = np.zeros(model.layout.n_A), np.zeros(model.layout.n_A), np.zeros((model.layout.n_A, J_pos.shape[1]))
    gamma = 1.0 / (1.0 + 4.0 * p["tau"] / h)
    n_rows = {Hinge: 5, Prismatic: 5, Ball: 3, Lock: 6}
    n_lin = {Hinge: 3, Prismatic: 2, Ball: 3, Lock: 3}
    i, k = 0, 0  # next equality row, next position function (joints in model order, no dry friction here)
    for j in model.joints:
        n = n_rows[type(j)]
        eps = np.full(n, p["eps_lin"])
        eps[n_lin[type(j)]:] = p["eps_rot"]
        sigma[i:i + n] = 4.0 / h**2 * eps * gamma
        a[i:i + n] = 4.0 / h * gamma * f_pos[k:k + n] - gamma * Jv[k:k + n]
        A[i:i + n] = J_pos[k:k + n]
        i, k = i + n, k + n
        if isinstance(j, (Hinge, Prismatic)):
            coordinate = k
            k += 1
            if j.viscous is not None:  # F.2
                sigma[i], a[i], A[i] = 1.0 / (h * p[j.viscous]), 0.0, J_pos[coordinate]
                i += 1
            if j.motor is not None:  # F.3
                Js = p[j.motor.shaft_inertia]
                sigma[i] = 1.0 / Js
                a[i] = -(Jv[coordinate] + h * p[j.motor.gain] * u[model.controls.index(j.motor.control)] / Js)
                A[i] = J_pos[coordinate]
                i += 1
    assert i == model.layout.n_A
    np.testing.assert_allclose(np.asarray(rows.Sigma_A), sigma, rtol=1e-14)
    np.testing.assert_allclose(np.asarray(rows.a), a, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(np.asarray(rows.A), A)


def test_observations_of_interleaved_joint_types_are_their_coordinates(mixed) -> None:
    model, x = mixed
    p = model.parameters.numpy_values()
    f = _numpy_positions(model, np.asarray(x.r), np.asarray(model.rotations(x)), p)
    # the slider's displacement is position function 5, the first hinge's angle 11, the second's 20
    assert model.observations == ("s", "h1", "h2")
    np.testing.assert_allclose(np.asarray(model.observe(x, model.parameters.arrays())), f[[5, 11, 20]],
                               rtol=0, atol=1e-14)


# --------------------------------------------------------------------------- one compile per model

def test_simulate_of_a_second_and_third_duration_compiles_nothing() -> None:
    model = pendulum()
    h = 1e-3
    initial = model.initial_state({"theta": 1.0})
    first = simulate(model, 0.05, h, initial=initial, chunk=64)  # compiles the 64-step chunk (or loads it)
    events: list[str] = []

    def listen(event: str, duration: float, **kwargs) -> None:
        if event in ("/jax/core/compile/backend_compile_duration", "/jax/core/compile/jaxpr_trace_duration"):
            events.append(event)

    programs = len(spook._COMPILED)  # the stepper's compiled chunks, by model and shape
    jax.monitoring.register_event_duration_secs_listener(listen)
    try:
        second = simulate(model, 0.2, h, initial=initial, chunk=64)  # 200 steps: 4 chunks, the last padded
        third = simulate(model, 0.13, h, initial=initial, chunk=64)
    finally:
        jax.monitoring.unregister_event_duration_listener(listen)
    assert events == [], f"a new duration traced or compiled {len(events)} programs: {events[:4]}"
    # A program loaded from a persistent cache emits no compile event: the stepper's own count tells that too.
    assert len(spook._COMPILED) == programs and second.compile_s == 0.0 and third.compile_s == 0.0
    assert len(first.t) == 51 and len(second.t) == 201 and len(third.t) == 131
    # the padded steps are dropped: the shorter runs are the start of the longer one, step for step
    np.testing.assert_array_equal(first.observations, second.observations[:51])
    np.testing.assert_array_equal(third.observations, second.observations[:131])
