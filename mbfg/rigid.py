"""3D rigid bodies in maximal coordinates and their joints (seed 000 section 2; seed 001 App. F).

Each body has a configuration ``q = (r, e)`` (CoM position in the world [m],
unit quaternion body -> world, eq. 2.1) and a velocity ``v = (v, omega)``
(CoM velocity in the world [m/s], angular velocity in the *body* frame
[rad/s], eq. 2.2). With principal inertias ``J = diag(Jx, Jy, Jz)`` about the
CoM, Newton-Euler (2.3) in these variables has a constant diagonal mass matrix
``M = diag(m, m, m, Jx, Jy, Jz)`` and the gyroscopic force ``-omega x (J omega)``
(the paper's f_g, moved to the right-hand side of 2.5). Keeping omega in the
body frame makes the configuration update ``q boxplus h v`` (2.16) the right
perturbation of eq. 2.13, which is GTSAM's ``Rot3.retract``.

Kinematic constraints are packages of elementary constraints, each row with a
compliance ``eps`` and a damping ``tau`` (2.9-2.11):

- :class:`Hinge` (F.1): the attachment points coincide (3 rows) and the z axis of
  frame ``a`` stays orthogonal to the x and y axes of frame ``b`` (2 rows); the
  joint angle is the rotation of ``b`` about ``a``'s z. Options: viscous drag
  (F.2), a motor with shaft inertia driven by a control (F.3), and dry friction
  (F.4) with optional Stribeck curve (seed 001 eq. 4.1).
- :class:`Prismatic` (slider): b's origin stays on a's z axis (2 rows) and b's orientation
  stays a's (3 rows); the coordinate is the displacement along a's z. The hinge's options
  carried over to the axis: viscous drag, a motor with reflected inertia, dry friction.
- Either of them may have a load-independent Coulomb force or torque (``coulomb``): a friction
  group of (2.24) without normal rows whose bound row carries ``b = h F_c``.
- :class:`Ball` (3 rows), :class:`Lock` (6 rows).
- :class:`Contact`: a point on a body above a plane, ``c(q) >= 0`` with Coulomb
  friction (2.21, 2.24); no impulse while the gap stays open over the step (seed 002's
  discrete contact rule, :func:`contact_normal_b`).

The parts are defined in :mod:`mbfg.parts`. Everything numeric in a model may be a number or
the name of a parameter of its :class:`~mbfg.parameters.ParameterSet` (``"-name"`` negates), so
models are differentiable in their parameters. :class:`RigidModel` evaluates the rows
of the Spook system (2.18 and 2.24) for the stepper in :mod:`mbfg.spook`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

import numpy as np

from mbfg import complementarity, lie
from mbfg import quaternion as quat
from mbfg._jax import Array, jax, jnp
from mbfg.errors import ModelError
from mbfg.parameters import ROTATION, Parameter, ParameterSet
from mbfg.parts import (
    ROTATIONAL_FRICTION_DISTANCE,
    SIGMA_REGULARIZATION,
    WORLD,
    AppliedForce,
    Axial,
    Ball,
    Body,
    Contact,
    Frame,
    Hinge,
    Joint,
    Lock,
    Motor,
    ParamLike,
    Prismatic,
    _param_names,
    resolve,
    resolve3,
)


class State(NamedTuple):
    """State x = (q, v) of nb bodies (seed 000 eq. 2.1-2.2).

    r: (nb, 3) CoM positions [m]; e: (nb, 4) unit quaternions body->world;
    v: (nb, 3) CoM velocities in the world [m/s]; w: (nb, 3) angular velocities
    in the body frames [rad/s].
    """

    r: Array
    e: Array
    v: Array
    w: Array

    def velocity(self) -> jnp.ndarray:
        """Generalized velocity, (6 nb,): per body [v (3), omega (3)]."""
        return jnp.concatenate([self.v, self.w], axis=1).reshape(-1)

    def with_velocity(self, vel: jnp.ndarray) -> State:
        vel = vel.reshape(-1, 6)
        return self._replace(v=vel[:, :3], w=vel[:, 3:])


class Rows(NamedTuple):
    """The constraint rows of one Spook step, in the notation of eqs. 2.19 and 2.25.

    A: (nA, 6nb) equality rows (holonomic and nonholonomic), Sigma_A: (nA,)
    their diagonal regularization and Sigma_A_inv its exact inverse (finite where
    Sigma_A is not: a zero viscous drag has Sigma_A_inv = 0), a: (nA,). B: (nB, 6nb) complementarity rows
    (normals, tangents, friction bounds), Sigma_B: (nB, nB), b: (nB,); friction: the entries of
    Sigma_B per friction group (``layout.groups``), all that the closed-form multipliers of
    inverse dynamics need (:meth:`RigidModel.position_rows` leaves Sigma_B None).
    """

    A: jnp.ndarray
    Sigma_A: jnp.ndarray
    Sigma_A_inv: jnp.ndarray
    a: jnp.ndarray
    B: jnp.ndarray
    Sigma_B: jnp.ndarray | None
    b: jnp.ndarray
    friction: tuple[complementarity.GroupData, ...] = ()


@dataclass(frozen=True)
class _Layout:
    """Static row bookkeeping (Python ints), built once per model."""

    n_pos: int  # position-level functions whose Jacobians the rows use
    n_A: int
    n_B: int
    blocks: tuple[Any, ...]
    #: The complementarity rows as independent friction groups (:mod:`mbfg.complementarity`).
    groups: tuple[complementarity.Group, ...] = ()


class RigidModel:
    """A multibody system of rigid bodies, joints and contacts with named parameters.

    Args:
        name: model name.
        bodies: the bodies (order = state order).
        joints: hinges, balls, locks; each ``b`` body is placed from its ``a``
            frame when a state is built from joint angles, so list parents first.
        contacts: ground contacts.
        parameters: every parameter the parts name, plus ``g`` (gravity [m/s^2])
            and, optionally, a rotation parameter named by ``tilt``.
        tilt: name of the rotation parameter R_tilt; gravity is
            ``R_tilt @ (0, 0, -g)`` (seed 001 section 4.6). None: no tilt.
        observations: observed quantities, in log column order: a hinge name
            (its angle [rad]) or ``"body.x"``, ``"body.y"``, ``"body.z"`` (CoM position [m]).
        description: one line for ``mbfg models``.

    Raises:
        ModelError: a non-positive mass or inertia, a part naming an unknown body
            or parameter, a duplicate name, a bad frame rotation, a motor control
            that is not listed.
    """

    def __init__(
        self,
        name: str,
        bodies: Sequence[Body],
        joints: Sequence[Joint] = (),
        contacts: Sequence[Contact] = (),
        *,
        parameters: ParameterSet,
        applied: Sequence[AppliedForce] = (),
        tilt: str | None = None,
        observations: Sequence[str] | None = None,
        description: str = "",
    ) -> None:
        self.name, self.description = name, description
        self.bodies, self.joints, self.contacts = tuple(bodies), tuple(joints), tuple(contacts)
        self.parameters = parameters
        self.applied = tuple(applied)
        self.tilt = tilt
        self.body_index = {b.name: i for i, b in enumerate(self.bodies)}
        self._validate()
        self.controls = tuple(dict.fromkeys(j.motor.control for j in self.axial if j.motor is not None))
        if observations is None:
            observations = [j.name for j in self.axial] or [f"{b.name}.{ax}" for b in self.bodies for ax in "xyz"]
        self.observations = tuple(observations)
        for obs in self.observations:
            self._observation_fn(obs)  # raises ModelError on an unknown name
        self.layout = self._make_layout()

    # -- structure -------------------------------------------------------------------
    @property
    def nb(self) -> int:
        return len(self.bodies)

    @property
    def hinges(self) -> tuple[Hinge, ...]:
        return tuple(j for j in self.joints if isinstance(j, Hinge))

    @property
    def axial(self) -> tuple[Axial, ...]:
        """The joints with one coordinate: hinges (an angle [rad]) and sliders (a displacement [m])."""
        return tuple(j for j in self.joints if isinstance(j, (Hinge, Prismatic)))

    def _copy(self, **changes: Any) -> RigidModel:
        """A model like this one with some constructor arguments changed (name, joints, parameters)."""
        args: dict[str, Any] = dict(name=self.name, bodies=self.bodies, joints=self.joints, contacts=self.contacts,
                    parameters=self.parameters, applied=self.applied, tilt=self.tilt,
                    observations=self.observations, description=self.description)
        args.update(changes)
        return RigidModel(**args)

    def with_parameters(self, changes: Mapping[str, Any]) -> RigidModel:
        """A copy with some parameters changed (see :meth:`ParameterSet.updated`)."""
        return self._copy(parameters=self.parameters.updated(changes))

    @property
    def has_dry_friction(self) -> bool:
        """Some hinge or slider has dry friction (complementarity rows: the residuals are piecewise smooth)."""
        return any(j.dry is not None or j.coulomb is not None for j in self.axial)

    @property
    def has_frictional_joint_rows(self) -> bool:
        """Some joint has load-dependent dry friction (F.4): its constraint rows are complementarity rows.

        A load-independent ``coulomb`` bound leaves the constraint rows equality rows."""
        return any(j.dry is not None for j in self.axial)

    def without_dry_friction(self) -> RigidModel:
        """A copy whose hinges and sliders have no dry, Coulomb or Stribeck friction: every joint row an
        equality row.

        Same bodies, parameters and observations; named ``NAME-smooth``. Contacts are kept.
        """
        joints = [replace(j, dry=None, stribeck=None, coulomb=None) if isinstance(j, (Hinge, Prismatic)) else j
                  for j in self.joints]
        return self._copy(name=f"{self.name}-smooth", joints=joints)

    def _validate(self) -> None:
        names: dict[str, str] = {}
        for kind, items in (("body", self.bodies), ("joint", self.joints), ("contact", self.contacts)):
            for item in items:
                if item.name in names or item.name == WORLD:
                    raise ModelError(f"{self.name}: {kind} name {item.name!r} is used twice (or is reserved)")
                names[item.name] = kind
        params = self.parameters
        for required in ["g", *([self.tilt] if self.tilt else [])]:
            if required not in params:
                raise ModelError(f"{self.name}: parameter {required!r} is missing (gravity needs it)")
        if self.tilt and params[self.tilt].kind != ROTATION:
            raise ModelError(f"{self.name}: tilt parameter {self.tilt!r} must be a rotation parameter")

        def check_params(where: str, value: Any) -> None:
            for n in _param_names(value):
                if n not in params:
                    raise ModelError(f"{self.name}: {where} names unknown parameter {n!r}")

        def check_positive(where: str, value: ParamLike) -> None:
            check_params(where, value)
            v = resolve(value, params.numpy_values())
            if not v > 0:
                shown = f"{value} = {v:g}" if isinstance(value, str) else f"{v:g}"
                raise ModelError(f"{self.name}: {where} must be > 0, got {shown}")

        def check_frame(where: str, frame: Frame) -> None:
            if frame.body != WORLD and frame.body not in self.body_index:
                raise ModelError(
                    f"{self.name}: {where} names unknown body {frame.body!r}; bodies: {', '.join(self.body_index)}"
                )
            check_params(f"{where}.position", frame.position)
            R = frame.R()
            if R.shape != (3, 3) or np.abs(R @ R.T - np.eye(3)).max() > 1e-9 or np.linalg.det(R) < 0:
                raise ModelError(f"{self.name}: {where}.rotation is not a rotation matrix")

        for b in self.bodies:
            check_positive(f"body {b.name!r} mass", b.mass)
            for axis, J in zip("xyz", b.inertia):
                check_positive(f"body {b.name!r} inertia J{axis}", J)
            if b.rotation is not None:
                check_frame(f"body {b.name!r}", Frame(WORLD, (0.0, 0.0, 0.0), b.rotation))
        for j in self.joints:
            where = f"joint {j.name!r}"
            check_frame(f"{where}.a", j.a)
            check_frame(f"{where}.b", j.b)
            if j.a.body == j.b.body:
                raise ModelError(f"{self.name}: {where} connects {j.a.body!r} to itself")
            for attr in ("eps_lin", "eps_rot", "eps"):
                if hasattr(j, attr):
                    check_positive(f"{where} {attr}", getattr(j, attr))
            check_params(f"{where} tau", j.tau)
            if isinstance(j, (Hinge, Prismatic)):
                for attr in ("viscous", "dry", "coulomb", "stribeck", "friction_compliance"):
                    check_params(f"{where} {attr}", getattr(j, attr))
                if j.motor is not None:
                    check_params(f"{where} motor gain", j.motor.gain)
                    check_positive(f"{where} motor shaft_inertia", j.motor.shaft_inertia)
        for c in self.contacts:
            where = f"contact {c.name!r}"
            if c.body not in self.body_index:
                raise ModelError(f"{self.name}: {where} names unknown body {c.body!r}")
            check_positive(f"{where} eps", c.eps)
            check_params(f"{where}", (c.point, c.mu, c.tau, c.friction_compliance, c.radius))
            if np.linalg.norm(c.normal) < 1e-12:
                raise ModelError(f"{self.name}: {where} normal has zero length")
        for f in self.applied:
            if f.body not in self.body_index:
                raise ModelError(f"{self.name}: applied force names unknown body {f.body!r}")
            check_params("applied force", f.force)

    def _make_layout(self) -> _Layout:
        """Static bookkeeping: which position function and which rows each part owns."""
        blocks: list[tuple[Any, ...]] = []
        groups: list[complementarity.Group] = []
        n_pos = n_A = n_B = 0
        for j in self.joints:
            n_g = {Hinge: 5, Prismatic: 5, Ball: 3, Lock: 6}[type(j)]
            pos = slice(n_pos, n_pos + n_g)
            n_pos += n_g
            if not isinstance(j, (Hinge, Prismatic)):
                blocks.append(("holonomic", j, pos, n_A))
                n_A += n_g
                continue
            coordinate = n_pos  # the angle or displacement follows the joint's rows
            n_pos += 1
            if j.dry is not None:
                # Dry friction (F.4): the 5 rows become 10 one-sided contact rows (+g >= 0,
                # -g >= 0), then 2 tangential rows (+/- the joint's rate) and one bound.
                blocks.append(("dry_joint", j, pos, coordinate, n_B))
                groups.append(complementarity.group(slice(n_B, n_B + 2 * n_g), n_B + 2 * n_g, 1))
                n_B += 2 * n_g + 3
            else:
                blocks.append(("holonomic", j, pos, n_A))
                n_A += n_g
                if j.coulomb is not None:
                    # A load-independent bound: no normal rows, 2 tangential rows and the bound.
                    blocks.append(("coulomb", j, coordinate, n_B))
                    groups.append(complementarity.group(slice(n_B, n_B), n_B, 1))
                    n_B += 3
            if j.viscous is not None:
                blocks.append(("viscous", j, coordinate, n_A))
                n_A += 1
            if j.motor is not None:
                blocks.append(("motor", j, coordinate, n_A))
                n_A += 1
        for c in self.contacts:
            blocks.append(("contact", c, slice(n_pos, n_pos + 3), n_B))
            groups.append(complementarity.group(slice(n_B, n_B + 1), n_B + 1, 2))
            n_pos += 3  # gap, then the position along the two tangents
            n_B += 1 + 4 + 1
        return _Layout(n_pos, n_A, n_B, tuple(blocks), tuple(groups))

    # -- kinematics (pure JAX) -------------------------------------------------------
    def gravity(self, p: Mapping[str, Any]) -> jnp.ndarray:
        """Gravity acceleration in the world (3,) [m/s^2]: R_tilt (0, 0, -g)."""
        g_vec = jnp.array([0.0, 0.0, -1.0]) * p["g"]
        return p[self.tilt] @ g_vec if self.tilt else g_vec

    def mass_diagonal(self, p: Mapping[str, Any]) -> jnp.ndarray:
        """Diagonal of M (6 nb,): per body [m, m, m, Jx, Jy, Jz]."""
        rows = []
        for b in self.bodies:
            m = jnp.asarray(resolve(b.mass, p), dtype=float)
            rows.append(jnp.concatenate([jnp.stack([m, m, m]), resolve3(b.inertia, p)]))
        return jnp.concatenate(rows)

    def forces(self, state: State, p: Mapping[str, Any]) -> jnp.ndarray:
        """Applied forces f + f_g (6 nb,): gravity on each CoM [N], gyroscopic -omega x J omega [N m] (body frame)."""
        M = self.mass_diagonal(p).reshape(-1, 6)
        f_lin = M[:, :3] * self.gravity(p)
        for f in self.applied:
            f_lin = f_lin.at[self.body_index[f.body]].add(resolve3(f.force, p))
        torque = -jnp.cross(state.w, M[:, 3:] * state.w)
        return jnp.concatenate([f_lin, torque], axis=1).reshape(-1)

    def _frame_pose(self, frame: Frame, r: Array, R: Array, p: Mapping[str, Any]) -> tuple:
        """(origin [m], R_world_frame) of an attachment frame."""
        s = resolve3(frame.position, p)
        if frame.body == WORLD:
            return s, jnp.asarray(frame.R())
        i = self.body_index[frame.body]
        return r[i] + R[i] @ s, R[i] @ jnp.asarray(frame.R())

    def position_functions(self, r: Array, R: Array, p: Mapping[str, Any]) -> jnp.ndarray:
        """Every position-level function the rows need (n_pos,), in layout order.

        Per joint its constraint rows g (F.1 for a hinge), then a hinge's angle or a slider's displacement;
        per contact the gap and the contact point's position along two tangents.
        The rows' Jacobians are the derivatives of these along ``q boxplus delta``.
        """
        out = []
        for j in self.joints:
            o_a, R_a = self._frame_pose(j.a, r, R, p)
            o_b, R_b = self._frame_pose(j.b, r, R, p)
            if isinstance(j, Hinge):
                z_a = R_a[:, 2]
                out += [o_b - o_a, jnp.stack([z_a @ R_b[:, 0], z_a @ R_b[:, 1]]), hinge_angle(R_a, R_b)[None]]
            elif isinstance(j, Ball):
                out.append(o_b - o_a)
            elif isinstance(j, Prismatic):
                d_a = R_a.T @ (o_b - o_a)  # b's origin in frame a: on a's z axis when (x, y) = 0
                out += [d_a[:2], _alignment_rows(R_a, R_b), d_a[2:]]
            else:
                out += [o_b - o_a, _alignment_rows(R_a, R_b)]
        for c in self.contacts:
            i = self.body_index[c.body]
            point = r[i] + R[i] @ resolve3(c.point, p)
            n, t1, t2 = _plane_basis(c.normal)
            gap = n @ (point - jnp.asarray(c.origin)) - resolve(c.radius, p)
            out.append(jnp.stack([gap, t1 @ point, t2 @ point]))
        return jnp.concatenate(out) if out else jnp.zeros(0)

    def _lifted_positions(self, state: State, p: Mapping[str, Any]) -> Callable[[jnp.ndarray], jnp.ndarray]:
        """delta (6 nb,) -> the position functions along ``q boxplus delta`` (n_pos,), for derivatives at 0.

        The rotation follows the tangent line ``R (I + [psi]x)`` of ``R Exp(psi)`` (lie.rot3_tangent_line):
        the same value and first derivative at ``delta = 0``, which is all that the rows use, without
        the exponential's trigonometry and small-angle branches in every derivative pass.
        """
        R_world_body = self.rotations(state)

        def lifted(delta: jnp.ndarray) -> jnp.ndarray:
            delta = delta.reshape(-1, 6)
            r = state.r + delta[:, :3]
            R = jax.vmap(lie.rot3_tangent_line)(R_world_body, delta[:, 3:])
            return self.position_functions(r, R, p)

        return lifted

    def position_jacobian(self, state: State, p: Mapping[str, Any]) -> tuple[jnp.ndarray, jnp.ndarray]:
        """Position functions (n_pos,) and their Jacobian (n_pos, 6 nb): d f(q boxplus delta) / d delta."""
        lifted = self._lifted_positions(state, p)
        values = lifted(jnp.zeros(6 * self.nb))
        return values, jax.jacfwd(lifted)(jnp.zeros(6 * self.nb))

    def rotations(self, state: State) -> jnp.ndarray:
        """R_world_body of every body, (nb, 3, 3)."""
        return jax.vmap(quat.to_matrix)(state.e)

    # -- Spook rows (pure JAX) -------------------------------------------------------
    def rows(self, state: State, u: jnp.ndarray, p: Mapping[str, Any], h: float | jnp.ndarray) -> Rows:
        """The rows of the Spook system at state x_k with control u_k (eqs. 2.8-2.11, 2.17-2.19, 2.24-2.25).

        Sign convention (eq. 2.28): ``M v_{k+1} = M v_k + A^T lam_A + B^T lam_B + h (f + f_g)``;
        ``A v_{k+1} + Sigma_A lam_A + a = 0``; ``B v_{k+1} + Sigma_B lam_B + b = w_B >= 0``,
        ``lam_B >= 0``, ``lam_B . w_B = 0``. Multipliers are impulses [N s, N m s].
        """
        f_pos, J_pos = self.position_jacobian(state, p)
        return self._assemble_rows(f_pos, J_pos, J_pos @ state.velocity(), u, p, h)

    def position_rows(
        self, state: State, u: jnp.ndarray, p: Mapping[str, Any], h: float | jnp.ndarray
    ) -> tuple[Rows, Callable[[jnp.ndarray], jnp.ndarray], Callable[[jnp.ndarray], jnp.ndarray]]:
        """:meth:`rows` without the Jacobian J_pos of the position functions: (rows_f, J, J^T).

        Every row of A and B is a signed row of J_pos (n_pos, 6 nb), so ``A = rows_f.A @ J_pos``
        and ``B = rows_f.B @ J_pos`` with constant selection matrices rows_f.A (nA, n_pos) and
        rows_f.B (nB, n_pos); a, b, Sigma_A and Sigma_B are those of :meth:`rows`. ``J(v)`` is
        J_pos v (a JVP) and ``J^T(y)`` is J_pos^T y (a VJP). A residual written with these
        differentiates at the cost of first derivatives of the position functions; through
        the explicit J_pos of :meth:`rows` it needs all their second derivatives.
        """
        lifted = self._lifted_positions(state, p)
        zeros = jnp.zeros(6 * self.nb)
        f_pos, pullback = jax.vjp(lifted, zeros)

        def J(v: jnp.ndarray) -> jnp.ndarray:
            return jax.jvp(lifted, (zeros,), (v,))[1]

        rows_f = self._assemble_rows(f_pos, jnp.eye(f_pos.shape[0]), J(state.velocity()), u, p, h, dense=False)
        return rows_f, J, lambda y: pullback(y)[0]

    def _assemble_rows(self, f_pos: jnp.ndarray, J_pos: jnp.ndarray, Jv: jnp.ndarray, u: jnp.ndarray,
                       p: Mapping[str, Any], h: float | jnp.ndarray, dense: bool = True) -> Rows:
        """The rows from the position functions f_pos (n_pos,), their Jacobian J_pos (n_pos, n) and
        J_pos v_k (n_pos,); A and B are built only by copying signed rows of J_pos. ``dense``: build
        the (nB, nB) Sigma_B too (the stepper's LCP); else only its per-group entries."""
        L = self.layout
        nv = J_pos.shape[1]
        A = jnp.zeros((L.n_A, nv))
        Sigma_A, Sigma_A_inv, a = jnp.zeros(L.n_A), jnp.zeros(L.n_A), jnp.zeros(L.n_A)
        B = jnp.zeros((L.n_B, nv))
        Sigma_B, b = (jnp.zeros((L.n_B, L.n_B)) if dense else None), jnp.zeros(L.n_B)
        friction: list[complementarity.GroupData] = []
        controls = {name: u[i] for i, name in enumerate(self.controls)}

        for block in L.blocks:
            kind = block[0]
            if kind == "holonomic":
                _, j, pos, i0 = block
                g, G = f_pos[pos], J_pos[pos]
                eps, tau = self._compliance(j, p)
                gamma = 1.0 / (1.0 + 4.0 * tau / h)  # (2.9)
                rows = slice(i0, i0 + g.shape[0])
                A = A.at[rows].set(G)
                Sigma_A = Sigma_A.at[rows].set(4.0 / h**2 * eps * gamma)  # (2.10)
                Sigma_A_inv = Sigma_A_inv.at[rows].set(h**2 / (4.0 * eps * gamma))
                a = a.at[rows].set(4.0 / h * gamma * g - gamma * Jv[pos])  # (2.8), (2.11)
            elif kind == "viscous":
                # F.2: Sigma lam + G_bar v_{k+1} = 0 gives the drag impulse lam = -h c omega_{k+1}
                # when Sigma = 1/(h c); c = 0 means no drag (floored to keep Sigma finite).
                _, j, coordinate, i = block
                c = jnp.asarray(resolve(j.viscous, p), dtype=float)
                A = A.at[i].set(J_pos[coordinate])
                Sigma_A = Sigma_A.at[i].set(1.0 / (h * jnp.maximum(c, 1e-12)))
                Sigma_A_inv = Sigma_A_inv.at[i].set(h * c)
            elif kind == "motor":
                # F.3: a shaft of inertia J_s driven by gain*u: J_s (w_{k+1} - w_k) = h gain u - lam, with
                # w = G_bar v, i.e. Sigma lam + G_bar v_{k+1} = G_bar v_k + h gain u / J_s, Sigma = 1/J_s.
                # On a slider the same with the force gain * u and the reflected inertia J_s [kg].
                _, j, coordinate, i = block
                Js = jnp.asarray(resolve(j.motor.shaft_inertia, p), dtype=float)
                gain = jnp.asarray(resolve(j.motor.gain, p), dtype=float)
                G_bar = J_pos[coordinate]
                A = A.at[i].set(G_bar)
                Sigma_A = Sigma_A.at[i].set(1.0 / Js)
                Sigma_A_inv = Sigma_A_inv.at[i].set(Js)
                a = a.at[i].set(-(Jv[coordinate] + h * gain * controls[j.motor.control] / Js))
            elif kind == "dry_joint":
                _, j, pos, coordinate, i0 = block
                g, G = f_pos[pos], J_pos[pos]
                eps, tau = self._compliance(j, p)
                gamma = 1.0 / (1.0 + 4.0 * tau / h)
                n_g = g.shape[0]
                normals = slice(i0, i0 + 2 * n_g)
                B = B.at[normals].set(jnp.concatenate([G, -G]))
                sigma_N = jnp.tile(4.0 / h**2 * eps * gamma, 2)
                b_g = 4.0 / h * gamma * g - gamma * Jv[pos]  # (2.24), row 2
                b = b.at[normals].set(jnp.concatenate([b_g, -b_g]))
                G_bar = J_pos[coordinate]
                mu_r = jnp.asarray(resolve(j.dry, p), dtype=float) + _stribeck(j, Jv[coordinate], p)
                # Translational rows first: 3 on a hinge, 2 on a slider; the rest are rotational.
                n_lin = 3 if isinstance(j, Hinge) else 2
                U = jnp.concatenate([jnp.full(n_lin, mu_r), jnp.full(n_g - n_lin, mu_r / ROTATIONAL_FRICTION_DISTANCE)])
                data = _friction_data(sigma_N, jnp.tile(U, 2), 1, resolve(j.friction_compliance, p))
                B, Sigma_B = _friction_rows(B, Sigma_B, i0 + 2 * n_g, jnp.stack([G_bar, -G_bar]), normals, data)
                b = b.at[i0 + 2 * n_g + 2].set(h * _coulomb(j, None, p))  # the load-independent part of the bound
                friction.append(data)
            elif kind == "coulomb":
                # The bound row ``U lam_N - E^T lam_T + Delta sigma + b = w_sigma`` of (2.24) without normal
                # rows and with b = h F_c: the friction impulse of the step is at most h F_c.
                _, j, coordinate, i0 = block
                G_bar = J_pos[coordinate]
                data = _friction_data(jnp.zeros(0), jnp.zeros(0), 1, resolve(j.friction_compliance, p))
                B, Sigma_B = _friction_rows(B, Sigma_B, i0, jnp.stack([G_bar, -G_bar]), slice(i0, i0), data)
                b = b.at[i0 + 2].set(h * _coulomb(j, Jv[coordinate], p))
                friction.append(data)
            elif kind == "contact":
                _, c, pos, i0 = block
                gap, C = f_pos[pos.start], J_pos[pos.start]
                eps = jnp.asarray(resolve(c.eps, p), dtype=float)
                tau = jnp.asarray(resolve(c.tau, p), dtype=float)
                gamma = 1.0 / (1.0 + 4.0 * tau / h)
                B = B.at[i0].set(C)
                b = b.at[i0].set(contact_normal_b(gap, Jv[pos.start], gamma, h))
                T = J_pos[pos.start + 1 : pos.stop]
                mu = jnp.asarray(resolve(c.mu, p), dtype=float)
                data = _friction_data((4.0 / h**2 * eps * gamma)[None], mu[None], 2, resolve(c.friction_compliance, p))
                B, Sigma_B = _friction_rows(B, Sigma_B, i0 + 1, jnp.concatenate([T, -T]), slice(i0, i0 + 1), data)
                friction.append(data)
        return Rows(A, Sigma_A, Sigma_A_inv, a, B, Sigma_B, b, tuple(friction))

    def _compliance(self, j: Joint, p: Mapping[str, Any]) -> tuple[jnp.ndarray, jnp.ndarray]:
        """Per-row compliance eps and damping tau of a joint's holonomic rows."""
        tau = jnp.asarray(resolve(j.tau, p), dtype=float)
        if isinstance(j, Ball):
            eps = jnp.full(3, resolve(j.eps, p))
        else:
            lin, rot = resolve(j.eps_lin, p), resolve(j.eps_rot, p)
            n_lin = 2 if isinstance(j, Prismatic) else 3
            n_rot = 2 if isinstance(j, Hinge) else 3
            eps = jnp.concatenate([jnp.full(n_lin, lin), jnp.full(n_rot, rot)])
        return eps, tau

    # -- observations and energy (pure JAX) ------------------------------------------
    def _observation_fn(self, name: str):
        joints = {j.name: j for j in self.joints}
        if name in joints and isinstance(joints[name], Hinge):
            j = joints[name]

            def angle(r: jnp.ndarray, R: jnp.ndarray, p: Mapping[str, Any]) -> jnp.ndarray:
                return hinge_angle(self._frame_pose(j.a, r, R, p)[1], self._frame_pose(j.b, r, R, p)[1])

            return angle
        if name in joints and isinstance(joints[name], Prismatic):
            s = joints[name]

            def displacement(r: jnp.ndarray, R: jnp.ndarray, p: Mapping[str, Any]) -> jnp.ndarray:
                o_a, R_a = self._frame_pose(s.a, r, R, p)
                return R_a[:, 2] @ (self._frame_pose(s.b, r, R, p)[0] - o_a)

            return displacement
        body, _, axis = name.rpartition(".")
        if body in self.body_index and axis in ("x", "y", "z"):
            i, k = self.body_index[body], "xyz".index(axis)
            return lambda r, R, p: r[i, k]
        raise ModelError(
            f"{self.name}: unknown observation {name!r}; expected a hinge or slider name "
            f"({', '.join(h.name for h in self.axial) or 'none'}) or BODY.x/y/z"
        )

    def angle_observation_mask(self) -> np.ndarray:
        """(n_obs,) booleans: which observations are hinge angles (compared modulo 2 pi)."""
        hinges = {h.name for h in self.hinges}
        return np.array([name in hinges for name in self.observations])

    def holonomic_rows(self) -> np.ndarray:
        """Indices into :meth:`position_functions` of every joint's constraint rows g (frictional joints too)."""
        rows = [np.arange(b[2].start, b[2].stop) for b in self.layout.blocks if b[0] in ("holonomic", "dry_joint")]
        return np.concatenate(rows) if rows else np.zeros(0, dtype=int)

    def observe(self, state: State, p: Mapping[str, Any]) -> jnp.ndarray:
        """Observation function h(x; chi) (n_obs,): hinge angles in (-pi, pi] [rad], slider displacements and
        CoM coordinates [m]."""
        R = self.rotations(state)
        return jnp.stack([self._observation_fn(name)(state.r, R, p) for name in self.observations])

    def energy(self, state: State, p: Mapping[str, Any]) -> jnp.ndarray:
        """Kinetic + gravitational + constraint (0.5 g^T eps^-1 g) + motor-shaft energy [J]."""
        M = self.mass_diagonal(p)
        vel = state.velocity()
        E = 0.5 * vel @ (M * vel) - jnp.sum(M.reshape(-1, 6)[:, 0] * (state.r @ self.gravity(p)))
        f_pos, J_pos = self.position_jacobian(state, p)
        for block in self.layout.blocks:
            kind, j = block[0], block[1]
            if kind in ("holonomic", "dry_joint"):
                eps, _ = self._compliance(j, p)
                g = f_pos[block[2]]
                E = E + 0.5 * jnp.sum(g * g / eps)
            elif kind == "motor":
                E = E + 0.5 * resolve(j.motor.shaft_inertia, p) * (J_pos[block[2]] @ vel) ** 2
            elif kind == "contact":
                gap = jnp.minimum(f_pos[block[2].start], 0.0)
                E = E + 0.5 * gap * gap / resolve(j.eps, p)
        return E

    # -- states ----------------------------------------------------------------------
    def initial_state(
        self,
        coordinates: Mapping[str, float] | None = None,
        rates: Mapping[str, float] | None = None,
        parameters: Mapping[str, Any] | None = None,
        numpy: bool = False,
    ) -> State:
        """A state at zero constraint violation from joint coordinates and rates.

        Bodies are placed through the joints in order (a hinge rotates ``b`` by
        its angle about ``a``'s z axis, a slider moves it by its displacement along
        that axis; balls and locks keep the frames aligned);
        bodies no joint places keep their own pose, with their velocity from
        ``rates["body.x"]`` etc.

        Args:
            coordinates: hinge angles [rad] and slider displacements [m] by joint name (0 if absent).
            rates: their rates [rad/s, m/s] by joint name, CoM velocities [m/s] as ``"body.x"``.
            parameters: parameter values (default: the model's own).
            numpy: return NumPy arrays (set-up code building thousands of states), not JAX arrays.
        """
        coordinates, rates = dict(coordinates or {}), dict(rates or {})
        known = {j.name for j in self.axial} | {f"{b.name}.{ax}" for b in self.bodies for ax in "xyz"}
        for name in [*coordinates, *rates]:
            if name not in known:
                raise ModelError(f"{self.name}: unknown coordinate {name!r}; expected one of {sorted(known)}")
        p = {k: np.asarray(v) for k, v in (parameters or self.parameters.numpy_values()).items()}
        nb = self.nb
        r, R = np.zeros((nb, 3)), np.tile(np.eye(3), (nb, 1, 1))
        v_lin, w_world = np.zeros((nb, 3)), np.zeros((nb, 3))
        placed = [False] * nb
        for i, body in enumerate(self.bodies):
            r[i] = np.asarray(body.position, dtype=float)
            R[i] = np.eye(3) if body.rotation is None else np.asarray(body.rotation, dtype=float)
            v_lin[i] = [rates.get(f"{body.name}.{ax}", 0.0) for ax in "xyz"]

        def pose(frame: Frame) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
            s = np.array([float(resolve(x, p)) for x in frame.position])
            if frame.body == WORLD:
                return s, frame.R(), np.zeros(3), np.zeros(3)
            i = self.body_index[frame.body]
            return r[i] + R[i] @ s, R[i] @ frame.R(), v_lin[i] + np.cross(w_world[i], R[i] @ s), w_world[i]

        for j in self.joints:
            if j.b.body == WORLD:
                continue
            ib = self.body_index[j.b.body]
            if placed[ib]:
                continue  # a loop closure: the body is placed already
            o_a, R_a, v_a, w_a = pose(j.a)
            coordinate, rate = coordinates.get(j.name, 0.0), rates.get(j.name, 0.0)
            z_a = R_a[:, 2]
            if isinstance(j, Hinge):
                R_b, o_b, w_world[ib], v_ob = R_a @ _rot_z(coordinate), o_a, w_a + rate * z_a, v_a
            elif isinstance(j, Prismatic):
                o_b = o_a + coordinate * z_a
                # b's origin moves with the point of a under it, plus the slide.
                R_b, w_world[ib], v_ob = R_a, w_a, v_a + np.cross(w_a, o_b - o_a) + rate * z_a
            else:
                R_b, o_b, w_world[ib], v_ob = R_a, o_a, w_a, v_a
            R[ib] = R_b @ j.b.R().T
            s_b = np.array([float(resolve(x, p)) for x in j.b.position])
            r[ib] = o_b - R[ib] @ s_b
            v_lin[ib] = v_ob + np.cross(w_world[ib], r[ib] - o_b)
            placed[ib] = True
        e = np.stack([quat.from_matrix(Ri) for Ri in R])
        w_body = np.einsum("bji,bj->bi", R, w_world)
        if numpy:
            return State(r, e, v_lin, w_body)
        return State(jnp.asarray(r), jnp.asarray(e), jnp.asarray(v_lin), jnp.asarray(w_body))

    def check_state(self, state: State) -> None:
        """Raise ModelError naming the body whose quaternion is not unit or whose state is not finite."""
        e = np.asarray(state.e)
        for i, b in enumerate(self.bodies):
            norm = np.linalg.norm(e[i])
            if not abs(norm - 1.0) < 1e-6:
                raise ModelError(f"{self.name}: body {b.name!r} quaternion has norm {norm:.6g}, expected 1")
            for field_name in ("r", "v", "w"):
                if not np.all(np.isfinite(np.asarray(getattr(state, field_name))[i])):
                    raise ModelError(f"{self.name}: body {b.name!r} state {field_name} is not finite")

    def check_configuration(self, state: State, parameters: Mapping[str, Any] | None = None) -> None:
        """Raise ModelError naming a joint whose constraint rows are singular (rank-deficient Jacobian) at ``state``."""
        p = parameters if parameters is not None else self.parameters.arrays()
        J = np.asarray(self.position_jacobian(state, p)[1])
        for block in self.layout.blocks:
            if block[0] in ("holonomic", "dry_joint"):
                G = J[block[2]]
                s = np.linalg.svd(G, compute_uv=False)
                if s[-1] < 1e-9 * max(s[0], 1e-300):
                    raise ModelError(
                        f"{self.name}: joint {block[1].name!r} is singular at this configuration "
                        f"(its constraint Jacobian has rank {int(np.sum(s > 1e-9 * s[0]))} < {G.shape[0]})"
                    )

    def __repr__(self) -> str:
        """One line: name, bodies, joints (kind), contacts, observations, controls, parameters (free ones named);
        :meth:`summary` has every parameter's value, unit and bounds."""
        nb = len(self.bodies)
        joints = ", ".join(f"{j.name} ({type(j).__name__.lower()})" for j in self.joints)
        parts = [f"{nb} {'body' if nb == 1 else 'bodies'}", f"joints {joints}" if joints else "no joints"]
        if self.contacts:
            parts.append(f"contacts {', '.join(c.name for c in self.contacts)}")
        parts.append(f"observations {', '.join(self.observations) or 'none'}")
        parts.append(f"controls {', '.join(self.controls) or 'none'}")
        free = self.parameters.free
        parts.append(f"{len(self.parameters)} parameters ({len(free)} free" + (f": {', '.join(free)})" if free else ")"))
        return f"RigidModel({self.name!r}: {'; '.join(parts)})"

    def summary(self) -> str:
        """Several lines: bodies, joints, controls, observations, parameters with units and bounds."""
        lines = [f"{self.name}: {self.description}".rstrip(": ")]
        lines.append(f"  bodies: {', '.join(b.name for b in self.bodies)}")
        if self.joints:
            lines.append("  joints: " + ", ".join(f"{j.name} ({type(j).__name__.lower()})" for j in self.joints))
        if self.contacts:
            lines.append(f"  contacts: {', '.join(c.name for c in self.contacts)}")
        lines.append(f"  observations: {', '.join(self.observations)}")
        lines.append(f"  controls: {', '.join(self.controls) or 'none'}")
        lines.append("  parameters:")
        for row in self.parameters.table():
            bounds = f"[{row['lower']:g}, {row['upper']:g}]" if not isinstance(row["value"], list) else ""
            value = row["value"] if isinstance(row["value"], list) else f"{row['value']:g}"
            flag = "free" if row["free"] else "fixed"
            lines.append(f"    {row['name']:<10} {value!s:<12} {row['unit']:<12} {bounds:<18} {flag:<5} {row['description']}")
        return "\n".join(lines)


def hinge_angle(R_a: jnp.ndarray, R_b: jnp.ndarray) -> jnp.ndarray:
    """Rotation angle of frame b about frame a's z axis, in (-pi, pi] [rad]."""
    R_ab = R_a.T @ R_b
    return jnp.arctan2(R_ab[1, 0] - R_ab[0, 1], R_ab[0, 0] + R_ab[1, 1])


def _alignment_rows(R_a: jnp.ndarray, R_b: jnp.ndarray) -> jnp.ndarray:
    """(3,) rows that lock frame b's orientation to frame a's: the skew part of R_a^T R_b,
    sin(angle) * axis, zero at alignment and smooth there."""
    R_ab = R_a.T @ R_b
    return 0.5 * jnp.stack([R_ab[2, 1] - R_ab[1, 2], R_ab[0, 2] - R_ab[2, 0], R_ab[1, 0] - R_ab[0, 1]])


def _stribeck(j: Axial, rate: jnp.ndarray, p: Mapping[str, Any]) -> jnp.ndarray | float:
    """Stribeck's term ``delta exp(-(rate_k / rate_s)^2)`` (seed 001 eq. 4.1) of a joint, 0 without one."""
    if j.stribeck is None:
        return 0.0
    delta, rate_s = (jnp.asarray(resolve(x, p), dtype=float) for x in j.stribeck)
    return delta * jnp.exp(-((rate / rate_s) ** 2))


def _coulomb(j: Axial, rate: jnp.ndarray | None, p: Mapping[str, Any]) -> jnp.ndarray | float:
    """The load-independent friction bound [N or N m]: ``coulomb``, plus Stribeck's term when the joint has no
    ``dry`` coefficient for it (``rate`` is the joint's rate at step k; None when ``dry`` takes it)."""
    if j.coulomb is None:
        return 0.0
    F_c = jnp.asarray(resolve(j.coulomb, p), dtype=float)
    return F_c if rate is None else F_c + _stribeck(j, rate, p)


def _rot_z(angle: float) -> np.ndarray:
    c, s = np.cos(angle), np.sin(angle)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def _plane_basis(normal: Sequence[float]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Unit normal and two unit tangents of a plane (NumPy constants)."""
    n = np.asarray(normal, dtype=float)
    n = n / np.linalg.norm(n)
    helper = np.array([1.0, 0.0, 0.0]) if abs(n[0]) < 0.9 else np.array([0.0, 1.0, 0.0])
    t1 = np.cross(n, helper)
    t1 /= np.linalg.norm(t1)
    return n, t1, np.cross(n, t1)


def contact_normal_b(gap: jnp.ndarray, Cv: jnp.ndarray, gamma: jnp.ndarray, h: Any) -> jnp.ndarray:
    """The constant b of a contact's normal row ``C v_{k+1} + Sigma lam + b = w >= 0`` (scalars; b [m/s]).

    ``b = max(gap / h, min(spook, 0))`` with Spook's stabilization ``spook = 4/h gamma gap - gamma C v_k``
    (2.21), gap [m] and C v_k [m/s]:

    - open gap (``gap > 0``): ``b = gap / h``, seed 002's discrete rule
      ``0 <= h lam_n  perp  psi_n(q_{k+1}) >= 0`` linearized, ``gap + h C v_{k+1} >= 0``: no
      impulse while the step ends with the gap still open, whatever tau and h. Spook's value
      would limit the approach speed to about gap / tau there, pushing at a distance.
    - penetration (``gap <= 0``): Spook's stabilization, which relaxes the overlap in about tau,
      clipped to ``[gap / h, 0]``: never above 0, so that an approach cannot go on (after the
      step that closes a gap the body still moves at the closing speed, and Spook's
      -gamma C v_k would let a fraction gamma of it through: the impact that Spook leaves to
      a separate impulse step, seed 000 after 2.21), and never below seed 002's one-step removal
      ``gap / h``. For a resting contact (C v_k = 0, tau >= 0.75 h) neither clip is active.

    b is continuous in (gap, C v_k) (both sides are 0 at gap = 0) and piecewise linear; ``maximum``
    and ``minimum``, no Python branch, so it vmaps and differentiates on every piece.
    """
    spook = 4.0 / h * gamma * gap - gamma * Cv  # (2.21)
    return jnp.maximum(gap / h, jnp.minimum(spook, 0.0))


def _friction_data(sigma_N: jnp.ndarray, U: jnp.ndarray, m: int, eps_t: Any) -> complementarity.GroupData:
    """A friction group's entries of Sigma_B: normals' diagonal, U, m tangent compliances, Delta (eq. 2.24)."""
    return complementarity.GroupData(sigma_N, U, jnp.full(m, jnp.asarray(eps_t, dtype=float)),
                                     jnp.asarray(SIGMA_REGULARIZATION))


def _friction_rows(
    B: jnp.ndarray, Sigma_B: jnp.ndarray | None, i0: int, D: jnp.ndarray, normals: slice,
    data: complementarity.GroupData,
) -> tuple[jnp.ndarray, jnp.ndarray | None]:
    """Tangential rows D (n_t, 6nb) at i0, their friction bound (sigma) row right after them, and
    the group's block of Sigma_B (eq. 2.24) when Sigma_B is built (not None):

    ``D v + Sigma_t lam_t + E sigma = w_t``, ``U lam_n - E^T lam_t + Delta sigma = w_sigma``.
    """
    n_t = D.shape[0]
    tangents = jnp.arange(i0, i0 + n_t)
    s = i0 + n_t
    B = B.at[tangents].set(D)
    if Sigma_B is None:
        return B, None
    idx = jnp.arange(normals.start, normals.stop)
    Sigma_B = Sigma_B.at[idx, idx].set(data.sigma_N)
    Sigma_B = Sigma_B.at[tangents, tangents].set(jnp.tile(data.eps_t, 2))
    Sigma_B = Sigma_B.at[tangents, s].set(1.0)  # E
    Sigma_B = Sigma_B.at[s, tangents].set(-1.0)  # -E^T
    Sigma_B = Sigma_B.at[s, normals].set(data.U)  # U
    Sigma_B = Sigma_B.at[s, s].set(data.delta)  # Delta
    return B, Sigma_B


def parameter(name: str, default: Any, unit: str = "", lower: float = -np.inf, upper: float = np.inf,
              free: bool = False, description: str = "", kind: str = "scalar") -> Parameter:
    """Shorthand for :class:`~mbfg.parameters.Parameter` used by the model builders."""
    return Parameter(name, default, unit, lower, upper, free, kind, description)


__all__ = [
    "AppliedForce", "Ball", "Body", "Contact", "Frame", "Hinge", "Lock", "Motor", "Prismatic", "RigidModel", "Rows",
    "State",
    "hinge_angle", "parameter", "resolve", "WORLD",
]
