"""The Jacobian battery and its examples: for mbfg's own tests and for users testing their own factor types.

Every factor type goes through one battery (:func:`check_factor_type`): at random instances from its
``example(rng)`` and, for ``Rot2``/``Pose2``/``Rot3``/``Pose3`` variables, at and near the identity, it
checks that

* the Jacobian blocks GTSAM gets from the real ``gtsam.CustomFactor`` (``ft.make``, then
  ``factor.linearize(values)``) equal central differences of ``factor.unwhitenedError`` taken through
  GTSAM's own ``Values.retract`` on one variable and one tangent direction at a time, and
* the error-only path (``unwhitenedError``), the full path (the residual inside the linearization,
  ``b = -error`` for a unit noise model) and the pure ``ft.error`` give the same residual.

A user checks a type of their own in their test suite::

    import numpy as np
    from mbfg import Pose3Var, factor_type
    from mbfg.testing import check_factor_type

    range_3d = factor_type(my_range_residual, name="my_range", example=my_example)
    check_factor_type(range_3d, np.random.default_rng(0))   # AssertionError naming the worst entry

Importing this module also registers (:mod:`mbfg.registry`) the factor types that mbfg builds per model
(the impulse, observation and initial-state factors, the control factors), each on example models built
here; the production modules build no model at import. Their example builders are here too
(:func:`example_model`, :func:`example_step`, :func:`motor_link` ...). :data:`EXAMPLE_BUILDERS` names the
per-model builders that have a registered example (``tests/test_jacobian_battery.py`` fails for one
without).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from typing import Any, cast

import gtsam
import numpy as np

from mbfg import control
from mbfg import quaternion as quat
from mbfg._jax import jax, jnp
from mbfg.adapter import FactorType, VarKind
from mbfg.factors._rigid import fixed_values, state_values, variables_for
from mbfg.factors.control import force_target_type, horizon_type, step_type, velocity_target_type
from mbfg.factors.impulse import impulse_type
from mbfg.factors.initial_state import initial_state_type
from mbfg.factors.observation import observation_type
from mbfg.parameters import ParameterSet
from mbfg.planar import Body, PlanarMechanism, Point, RelativeAngle
from mbfg.registry import register
from mbfg.rigid import Body as Body3D
from mbfg.rigid import Contact, RigidModel, State, parameter

__all__ = [
    "EXAMPLE_BUILDERS",
    "FD_STEP",
    "JAC_RTOL",
    "RESIDUAL_RTOL",
    "chain_urdf",
    "check_factor_type",
    "example_model",
    "example_step",
    "fourbar_with_crank_angle",
    "mechanism_state",
    "motor_link",
    "perturbed",
    "sphere_on_incline",
    "vectors",
]

# Central-difference step in tangent coordinates and the tolerance relative to the Jacobian's scale. With a
# 1e-6 step, the truncation error is O(1e-12 f''') and the round-off O(1e-16 |r| / 1e-6) = O(1e-10 |r|):
# 1e-6 leaves a wide margin for honest Jacobians and catches any wrong term.
FD_STEP = 1e-6
JAC_RTOL = 1e-6
#: The three residual paths run different compiled programs; they agree to round-off.
RESIDUAL_RTOL = 1e-12


# ---------------------------------------------------------------------------------
# The battery
# ---------------------------------------------------------------------------------


def _to_gtsam(kind: VarKind, x: np.ndarray) -> Any:
    x = np.asarray(x, dtype=float)
    if kind is VarKind.VECTOR:
        return np.ascontiguousarray(x)
    if kind is VarKind.POINT2:
        return gtsam.Point2(*x)
    if kind is VarKind.POINT3:
        return gtsam.Point3(*x)
    if kind is VarKind.ROT2:
        return gtsam.Rot2.fromCosSin(x[0, 0], x[1, 0])
    if kind is VarKind.POSE2:
        return gtsam.Pose2(x[0, 2], x[1, 2], np.arctan2(x[1, 0], x[0, 0]))
    if kind is VarKind.ROT3:
        return gtsam.Rot3(x)
    return gtsam.Pose3(x)


#: Kinds whose tangent is ``x + xi``: no exponential map, no branch near the identity to check.
_FLAT = (VarKind.VECTOR, VarKind.POINT2, VarKind.POINT3)


def _values(kinds: tuple[VarKind, ...], keys: list[int], variables: tuple) -> gtsam.Values:
    values = gtsam.Values()
    for kind, key, x in zip(kinds, keys, variables):
        values.insert(key, _to_gtsam(kind, x))
    return values


def _retract_one(values: gtsam.Values, keys: list[int], dims: list[int], key: int, delta: np.ndarray) -> gtsam.Values:
    """``values`` with only variable ``key`` moved by ``delta``, through GTSAM's ``Values.retract``."""
    tangent = gtsam.VectorValues()
    for k, d in zip(keys, dims):
        tangent.insert(k, delta if k == key else np.zeros(d))
    return values.retract(tangent)


def _near_identity_points(kind: VarKind, rng: np.random.Generator) -> list[tuple[str, np.ndarray]]:
    """Identity, a rotation inside the small-angle branch of so3_exp, and a small one outside it."""
    points = []
    for label, scale in (("identity", 0.0), ("1e-9 from identity", 1e-9), ("1e-3 from identity", 1e-3)):
        omega = scale * rng.standard_normal(3)
        if kind is VarKind.ROT2:
            points.append((label, gtsam.Rot2(omega[0]).matrix()))
        elif kind is VarKind.POSE2:
            points.append((label, gtsam.Pose2.Expmap(omega).matrix()))
        elif kind is VarKind.ROT3:
            points.append((label, gtsam.Rot3.Expmap(omega).matrix()))
        else:
            xi = np.concatenate([omega, scale * rng.standard_normal(3)])
            points.append((label, gtsam.Pose3.Expmap(xi).matrix()))
    return points


def _points(ft: FactorType, rng: np.random.Generator, n_examples: int) -> Iterator[tuple[str, tuple, tuple]]:
    """(label, variables, constants) triples: random examples, and the first one's near-identity variants
    (what they check is the branch of the rotation's exponential near zero, the same at every example)."""
    example = cast(Callable[[np.random.Generator], tuple], ft.example)
    for i in range(n_examples):
        variables, constants = example(rng)
        yield f"example {i}", tuple(variables), tuple(constants)
        for pos, kind in enumerate(ft.kinds):
            if kind in _FLAT or i > 0:
                continue
            for label, x in _near_identity_points(kind, rng):
                if ft.piecewise and label != "1e-3 from identity":
                    continue  # exactly symmetric: on a kink of the complementarity
                moved = list(variables)
                moved[pos] = x
                yield f"example {i}, variable {pos} ({kind.value}) at {label}", tuple(moved), tuple(constants)


def check_factor_type(
    ft: FactorType,
    rng: np.random.Generator,
    n_examples: int = 4,
    step: float = FD_STEP,
    rtol: float = JAC_RTOL,
) -> None:
    """Run the battery (module docstring) on ``ft``'s GTSAM factor at ``n_examples`` instances of
    ``ft.example(rng)`` (and the first one's near-identity variants).

    Args:
        ft: the factor type; it must carry ``example(rng) -> (variables, constants)``.
        rng: the random generator the examples draw from.
        n_examples: random instances.
        step: the central differences' step in tangent coordinates.
        rtol: the Jacobians' tolerance relative to their largest entry (plus the differences' round-off).

    Raises:
        AssertionError: naming the instance, the variable and the worst entry (or the residual path) that
            differs; ``ft`` has no example.
    """
    assert ft.example is not None, f"factor type {ft.name!r} has no example(rng)"
    keys = [gtsam.symbol("x", i) for i in range(len(ft.kinds))]

    for label, variables, constants in _points(ft, rng, n_examples):
        where = f"{ft.name}, {label}"
        r_pure = np.asarray(ft.error(*variables, *constants))
        assert r_pure.ndim == 1, f"{where}: residual has shape {r_pure.shape}, expected (m,)"
        m = r_pure.shape[0]
        factor = ft.make(keys, gtsam.noiseModel.Unit.Create(m), *constants)
        values = _values(ft.kinds, keys, variables)
        dims = [kind.tangent_dim(x) for kind, x in zip(ft.kinds, variables)]

        # Residual: error-only path == full path == pure JAX.
        r_error_only = factor.unwhitenedError(values)
        linear = factor.linearize(values)
        assert list(linear.keys()) == keys, f"{where}: linearized keys {list(linear.keys())} != {keys}"
        A, b = linear.jacobian()  # unit noise: A = H, b = -error
        assert A.shape == (m, sum(dims)), f"{where}: Jacobian shape {A.shape}, expected {(m, sum(dims))}"
        r_full = -b
        scale_r = max(1.0, float(np.max(np.abs(r_pure), initial=0.0)))
        for name, r in (("error-only path", r_error_only), ("linearization", r_full)):
            np.testing.assert_allclose(
                r, r_pure, rtol=RESIDUAL_RTOL, atol=RESIDUAL_RTOL * scale_r,
                err_msg=f"{where}: residual from the {name} != ft.error",
            )
        assert np.all(np.isfinite(A)), f"{where}: non-finite Jacobian entries\n{A}"

        # Jacobian blocks vs central differences through GTSAM's retract.
        numeric = np.zeros_like(A)
        col = 0
        for key, dim in zip(keys, dims):
            for j in range(dim):
                e = np.zeros(dim)
                e[j] = step
                r_plus = factor.unwhitenedError(_retract_one(values, keys, dims, key, e))
                r_minus = factor.unwhitenedError(_retract_one(values, keys, dims, key, -e))
                numeric[:, col] = (r_plus - r_minus) / (2.0 * step)
                col += 1

        # Relative to the Jacobian's scale, plus the round-off floor of the differences
        # themselves (100 ulp of the residual divided by the step, ~2e-8 |r|).
        scale_J = max(float(np.max(np.abs(numeric))), float(np.max(np.abs(A))))
        tol = rtol * scale_J + 100 * np.finfo(float).eps * scale_r / step
        err = np.abs(A - numeric)
        if err.max() > tol:
            row, c = np.unravel_index(np.argmax(err), err.shape)
            var = int(np.searchsorted(np.cumsum(dims), c, side="right"))
            raise AssertionError(
                f"{where}: Jacobian block of variable {var} ({ft.kinds[var].value}) differs from "
                f"central differences by {err.max():.3e} > {tol:.1e} (Jacobian scale {scale_J:.3e}) at "
                f"row {row}, tangent column {c - sum(dims[:var])}: JAX {A[row, c]:.12g}, "
                f"numeric {numeric[row, c]:.12g}"
            )


# ---------------------------------------------------------------------------------
# Example builders: vectors, the four-bar, rigid-body models and states
# ---------------------------------------------------------------------------------


def vectors(rng: np.random.Generator, count: int, dim: int = 4) -> tuple[np.ndarray, ...]:
    """``count`` standard normal vectors (dim,)."""
    return tuple(rng.standard_normal(dim) for _ in range(count))


@functools.cache
def fourbar_with_crank_angle() -> PlanarMechanism:
    """The four-bar of Blanco-Claraco, Leanza, Reina (2021) (L = 1, 2, sqrt(13) m; m = 1, 2, 4 kg) plus its
    crank angle."""
    points = [Point(0, 0, fixed=True), Point(1, 0), Point(1, 2), Point(4, 0, fixed=True)]
    bodies = [
        Body((0, 1), mass=1.0, I0=1.0 / 3.0, cog=(0.5, 0.0)),
        Body((1, 2), mass=2.0, I0=2.0 * 4.0 / 3.0, cog=(1.0, 0.0)),
        Body((2, 3), mass=4.0, I0=4.0 * 13.0 / 3.0, cog=(np.sqrt(13) / 2, 0.0)),
    ]
    return PlanarMechanism(points, bodies, [RelativeAngle(0, 1)], name="fourbar-with-crank-angle")


def mechanism_state(rng: np.random.Generator) -> tuple[PlanarMechanism, np.ndarray, np.ndarray, np.ndarray]:
    """The four-bar and random (q, qdot, qddot) (n,) near its assembly (not on the manifold)."""
    mech = fourbar_with_crank_angle()
    q = mech.q0 + 0.1 * rng.standard_normal(mech.n)
    return mech, q, rng.standard_normal(mech.n), rng.standard_normal(mech.n)


@functools.cache
def sphere_on_incline() -> RigidModel:
    """A solid sphere (2 kg, radius R = 0.1 m) touching a plane through the origin tilted 0.5 rad about y,
    with Coulomb friction mu = 0.3 < tan(0.5), so it slides: a contact that is not a point on the ground,
    with its radius a parameter."""
    n = (np.sin(0.5), 0.0, np.cos(0.5))
    params = ParameterSet([parameter("R", 0.1, "m", 0.0), parameter("mu", 0.3, "", 0.0, 1.0),
                           parameter("g", 9.81, "m/s^2", 0.0)])
    J = 0.4 * 2.0 * 0.1**2
    return RigidModel("sphere-incline", [Body3D("ball", 2.0, (J, J, J), position=tuple(0.1 * np.asarray(n)))],
                      contacts=[Contact("plane", "ball", normal=n, mu="mu", radius="R", eps=1e-8, tau=0.01)],
                      parameters=params)


@functools.cache
def motor_link() -> RigidModel:
    """The smallest model with an activation: one link (0.5 kg, CoM 0.2 m below) on a motorized hinge
    ``q`` about the world y axis, control ``tau`` [N m]; the control factors' example (their residuals' code
    does not depend on the model, and the Furuta's two bodies would double the battery's compile time)."""
    from mbfg.models import Link, hinged_tree
    from mbfg.parameters import Parameter

    def par(name: str, value: float, unit: str) -> Parameter:
        return Parameter(name, value, unit, 0.0, np.inf, False, description=name)

    params = [par("m", 0.5, "kg"), par("J", 2e-3, "kg m^2"), par("r", 0.2, "m"), par("b", 1e-3, "N m s/rad"),
              par("K_q", 1.0, "N m"), par("J_s_q", 1e-6, "kg m^2"), par("eps_lin", 1e-5, "m/N"),
              par("eps_rot", 1e-3, "rad/(N m)"), par("tau", 2e-3, "s"), par("g", 9.81, "m/s^2")]
    link = Link("link", "q", None, "m", ("J", "J", "J"), (0.0, 0.0, 0.0), "r", "y", "b", "tau")
    return hinged_tree("motor-link", [link], params, description="one motorized link (control battery example)")


@functools.cache
def chain_urdf(n: int) -> str:
    """A URDF of n links hanging from a fixed base (revolute joints ``j0`` ... about y, 0.3 m apart; 1 kg links,
    CoM 0.15 m along each, viscous damping 0.05 N m s/rad): a robot whose size is a parameter."""
    links, joints = ['<link name="base"/>'], []
    for i in range(n):
        links.append(f'<link name="l{i}"><inertial><origin xyz="0 0 0.15"/><mass value="1.0"/>'
                     '<inertia ixx="0.01" ixy="0" ixz="0" iyy="0.011" iyz="0" izz="0.002"/></inertial></link>')
        parent, z = ("base", 0.0) if i == 0 else (f"l{i - 1}", 0.3)
        joints.append(f'<joint name="j{i}" type="revolute"><parent link="{parent}"/><child link="l{i}"/>'
                      f'<origin xyz="0 0 {z}"/><axis xyz="0 1 0"/><dynamics damping="0.05"/></joint>')
    return f'<robot name="chain{n}">' + "".join(links) + "".join(joints) + "</robot>"


@functools.cache
def example_model(name: str) -> RigidModel:
    """A built-in model (:data:`mbfg.models.BUILTIN`), or ``"motor-link"`` (:func:`motor_link`) or
    ``"sphere-incline"`` (:func:`sphere_on_incline`): one instance per name and process."""
    if name == "motor-link":
        return motor_link()
    if name == "sphere-incline":
        return sphere_on_incline()
    from mbfg.models import BUILTIN

    return BUILTIN[name]()


def perturbed(rng: np.random.Generator, x: State, scale: float) -> State:
    """``x`` moved off by Gaussian noise of ``scale`` in every coordinate (rotations by boxplus)."""
    e = jax.vmap(quat.boxplus)(x.e, jnp.asarray(scale * rng.standard_normal(x.w.shape)))
    return State(x.r + scale * rng.standard_normal(x.r.shape), e,
                 x.v + scale * rng.standard_normal(x.v.shape), x.w + scale * rng.standard_normal(x.w.shape))


#: Compiled Spook steps by (the model's structure, h): see :func:`_jitted_spook_step`.
_SPOOK_STEPS: dict[tuple[str, float], Callable[..., Any]] = {}


def _jitted_spook_step(model: RigidModel, h: float) -> Callable[..., Any]:
    """:func:`mbfg.spook.step` of ``model`` at ``h`` [s] as one compiled program, shared by the models of one
    structure (the parameters' values are its argument): run eagerly, a step with a complementarity solve is
    hundreds of small dispatches, its loops traced and compiled again at every call."""
    from mbfg._programs import structure_fingerprint
    from mbfg.spook import step

    key = (structure_fingerprint(model), h)
    if key not in _SPOOK_STEPS:
        _SPOOK_STEPS[key] = jax.jit(functools.partial(step, model, h=h))
    return _SPOOK_STEPS[key]


def example_step(rng: np.random.Generator, model: RigidModel, h: float = 1e-3) -> tuple[State, State, np.ndarray]:
    """A random state x_k, a perturbed Spook step x_{k+1} [h s] from it, and the control u_k.

    Moving (so dry friction slides) and off the Spook solution by a little, as during an optimization.
    """
    coords = {j.name: rng.uniform(-1.0, 1.0) for j in model.axial}
    rates = {j.name: rng.uniform(1.0, 3.0) * rng.choice([-1.0, 1.0]) for j in model.axial}
    for b in model.bodies:
        if not any(j.b.body == b.name for j in model.joints):  # a free body, e.g. the particle
            rates.update({f"{b.name}.x": rng.uniform(0.5, 1.0)})
    x0 = model.initial_state(coords, rates)
    if not model.axial:  # touch the ground: the contact and its friction are active
        x0 = x0._replace(r=cast(jax.Array, x0.r).at[:, 2].set(-1e-4))  # initial_state's are JAX arrays
    u = rng.uniform(-1.0, 1.0, size=len(model.controls))
    x1, _ = _jitted_spook_step(model, float(h))(x0, jnp.asarray(u), model.parameters.arrays())

    # 1e-3 off: far enough from the kinks of the complementarity for central differences.
    return perturbed(rng, x0, 1e-3), perturbed(rng, x1, 1e-3), u


# ---------------------------------------------------------------------------------
# Examples of the factor types built per model
# ---------------------------------------------------------------------------------


def _parameter_values(model: RigidModel, free: tuple[str, ...], tilt_free: bool,
                      rng: np.random.Generator) -> list[np.ndarray]:
    """The free parameters' variable values: the scalars at their defaults, a tilt a random small rotation."""
    params = [np.array([model.parameters[n].default for n in free])] if free else []
    if tilt_free:
        from scipy.spatial.transform import Rotation

        params.append(Rotation.from_rotvec(0.05 * rng.standard_normal(3)).as_matrix())
    return params


def _impulse_example(name: str, free: tuple[str, ...]) -> Callable[[np.random.Generator], tuple]:
    def example(rng: np.random.Generator) -> tuple:
        model = example_model(name)
        variables = variables_for(model, free)
        x0, x1, u = example_step(rng, model)
        params = _parameter_values(model, variables.free, variables.tilt_free, rng)
        return (*state_values(model, x0), *state_values(model, x1), *params), (fixed_values(model), u, 1e-3)

    return example


def _sphere_example(rng: np.random.Generator) -> tuple:
    """The sliding sphere of :func:`sphere_on_incline` 1e-4 m into its plane, moving downhill, and a perturbed
    Spook step from there; R and mu free."""
    model = sphere_on_incline()
    n = np.array([np.sin(0.5), 0.0, np.cos(0.5)])
    downhill = np.array([np.cos(0.5), 0.0, -np.sin(0.5)])
    x0 = model.initial_state()
    x0 = x0._replace(r=jnp.asarray((0.1 - 1e-4) * n)[None, :],
                     v=jnp.asarray(rng.uniform(0.5, 1.0) * downhill)[None, :])
    x1, _ = _jitted_spook_step(model, 1e-3)(x0, jnp.zeros(0), model.parameters.arrays())
    params = (np.array([model.parameters["R"].default, model.parameters["mu"].default]),)
    x0, x1 = perturbed(rng, x0, 1e-3), perturbed(rng, x1, 1e-3)
    return (*state_values(model, x0), *state_values(model, x1), *params), (fixed_values(model), np.zeros(0), 1e-3)


def _observation_example(name: str, free: tuple[str, ...]) -> Callable[[np.random.Generator], tuple]:
    def example(rng: np.random.Generator) -> tuple:
        model = example_model(name)
        variables = variables_for(model, free)
        x0, _, _ = example_step(rng, model)
        params = _parameter_values(model, variables.free, variables.tilt_free, rng)
        y = rng.standard_normal(len(model.observations))
        mask = (rng.uniform(size=y.shape) > 0.3).astype(float)
        return (*state_values(model, x0), *params), (fixed_values(model), y, mask)

    return example


def _initial_state_example(name: str, free: tuple[str, ...]) -> Callable[[np.random.Generator], tuple]:
    def example(rng: np.random.Generator) -> tuple:
        model = example_model(name)
        variables = variables_for(model, free)
        x0, _, _ = example_step(rng, model)
        params = _parameter_values(model, variables.free, variables.tilt_free, rng)
        return (*state_values(model, x0), *params), (fixed_values(model), 1e-3)

    return example


@functools.cache
def _jitted_control_step(name: str) -> Callable[..., Any]:
    return jax.jit(functools.partial(control.step, example_model(name)))


def _control_states(rng: np.random.Generator, model: RigidModel) -> tuple[State, np.ndarray, State]:
    """A moving state, random activations, and the controlled step from it, perturbed by 1e-3 (as during a solve)."""
    coords = {j.name: rng.uniform(-1.0, 1.0) for j in model.hinges}
    rates = {j.name: rng.uniform(-3.0, 3.0) for j in model.hinges}
    x0 = model.initial_state(coords, rates)
    a = rng.uniform(-1.0, 1.0, size=len(model.controls))
    x1, _ = _jitted_control_step(model.name)(x0, jnp.asarray(a), model.parameters.arrays(), 1e-3)
    x1 = State(*(np.asarray(c) + 1e-3 * rng.standard_normal(np.shape(c)) for c in x1))
    x1 = x1._replace(e=x1.e / np.linalg.norm(x1.e, axis=1, keepdims=True))
    return x0, a, x1


def _step_example(name: str, start: bool) -> Callable[[np.random.Generator], tuple]:
    def example(rng: np.random.Generator) -> tuple:
        model = example_model(name)
        x0, a, x1 = _control_states(rng, model)
        p = fixed_values(model)
        if start:
            return (a, *state_values(model, x1)), (*state_values(model, x0), p, np.asarray(1e-3))
        return (*state_values(model, x0), a, *state_values(model, x1)), (p, np.asarray(1e-3))

    return example


def _velocity_example(name: str) -> Callable[[np.random.Generator], tuple]:
    def example(rng: np.random.Generator) -> tuple:
        model = example_model(name)
        x0, _, _ = _control_states(rng, model)
        return tuple(state_values(model, x0)), (fixed_values(model), rng.standard_normal(2))

    return example


def _force_example(name: str, start: bool) -> Callable[[np.random.Generator], tuple]:
    def example(rng: np.random.Generator) -> tuple:
        model = example_model(name)
        x0, _, x1 = _control_states(rng, model)
        P = control.force_projection(model, [f"{model.joints[0].name}.fz", f"{model.joints[-1].name}.fx"])
        consts = (fixed_values(model), np.asarray(1e-3), P, rng.standard_normal(2))
        if start:
            return tuple(state_values(model, x1)), (*state_values(model, x0), *consts)
        return (*state_values(model, x0), *state_values(model, x1)), consts

    return example


def _horizon_example(rng: np.random.Generator) -> tuple:
    model = motor_link()
    x0, _, _ = _control_states(rng, model)
    P = control.force_projection(model, ["q.fx", "q.fz"])
    consts = (*state_values(model, x0), fixed_values(model), np.asarray(1e-3), rng.standard_normal((3, 2)), P,
              rng.standard_normal((3, 2)))
    return (rng.uniform(-1.0, 1.0, size=3),), consts


#: The builders of per-model factor types (``impulse_type`` ...) that have a registered example here.
EXAMPLE_BUILDERS: set[Callable[..., FactorType]] = set()


def _register(builder: Callable[..., FactorType], example: Callable[[np.random.Generator], tuple],
              *args: Any) -> FactorType:
    """Register ``builder(*args)`` for the battery with ``example`` (a copy carries it: the type that user
    code gets from the builder stays as built), and note the builder in :data:`EXAMPLE_BUILDERS`."""
    EXAMPLE_BUILDERS.add(builder)
    return register(builder(*args).with_example(example))


# The impulse factor on a frictional Furuta pendulum with all 13 parameters free, the Stribeck pendulum, the
# particle on the ground, the linear stage (a slider with a motor, viscous and load-independent Coulomb
# friction, an applied offset), the DFKI double pendulum (two hinges with load-independent Coulomb torques,
# geared rotors) and a sphere sliding down an incline (a contact whose radius is a parameter).
for _name, _free in (
    ("furuta-viscous", ("K", "J_Az", "J_Bx", "b_1", "b_2", "tilt")),
    ("furuta", ("K", "J_Ax", "J_Ay", "J_Az", "J_Bx", "J_By", "b_1", "b_2", "mu_r1", "mu_r2", "tilt")),
    ("pendulum-stribeck", ("J", "b", "mu_r", "dmu_r", "omega_s")),
    ("particle", ("mu",)),
    ("linear-stage", ("M", "F_v", "F_c", "F_0")),
    ("dfki-double-pendulum", ("J1", "J2", "b1", "b2", "tau_c1", "tau_c2")),
):
    _register(impulse_type, _impulse_example(_name, _free), variables_for(example_model(_name), _free))
_register(impulse_type, _sphere_example, variables_for(sphere_on_incline(), ("R", "mu")))
for _model_name, _names in (("furuta", ("J_Az", "K")), ("particle", ("mu",))):
    _register(observation_type, _observation_example(_model_name, _names),
              variables_for(example_model(_model_name), _names))
_register(initial_state_type, _initial_state_example("furuta", ("J_Az", "b_1")),
          variables_for(example_model("furuta"), ("J_Az", "b_1")))
_register(step_type, _step_example("motor-link", False), motor_link())
_register(step_type, _step_example("motor-link", True), motor_link(), True)
_register(velocity_target_type, _velocity_example("motor-link"), motor_link(), ("q", "link.vz"))
_register(force_target_type, _force_example("motor-link", False), motor_link())
_register(force_target_type, _force_example("motor-link", True), motor_link(), True)
_register(horizon_type, _horizon_example, motor_link(), ("q", "link.wy"), 3)
