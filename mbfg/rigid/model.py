"""The rigid-body model: :class:`RigidModel`, a system's parts and parameters with the functions of them
that the stepper, the residuals and the estimators evaluate (Marklund et al. (2025) section 2; Marklund et al. (2025) App. F).

The package docstring (:mod:`mbfg.rigid`) states the variables and the parts. This module holds the
model's structure, dynamics (mass, forces, energy), observations and read-outs; the pieces it delegates to
live beside it: checks (:mod:`~mbfg.rigid.validate`), row bookkeeping (:mod:`~mbfg.rigid.layout`),
position functions (:mod:`~mbfg.rigid.kinematics`), the Spook rows (:mod:`~mbfg.rigid.rows`) and
placing bodies from joint coordinates (:mod:`~mbfg.rigid.state`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from mbfg import lie
from mbfg import quaternion as quat
from mbfg._jax import Array, jax, jnp
from mbfg.errors import ModelError
from mbfg.parameters import Parameter, ParameterSet
from mbfg.parts import AppliedForce, Axial, Body, Contact, Frame, Hinge, Joint, Prismatic
from mbfg.rigid import kinematics
from mbfg.rigid.arrays import compile_arrays, take
from mbfg.rigid.layout import Layout, Rows, make_layout
from mbfg.rigid.rows import assemble_rows, joint_compliance
from mbfg.rigid.state import State, state_from_coordinates
from mbfg.rigid.validate import validate

#: The state error weight w of a model that names none [(reading unit)^2/(impulse unit)^2: mbfg.roles.weight_unit].
DEFAULT_WEIGHT = 1e6


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
            ``R_tilt @ (0, 0, -g)`` (Marklund et al. (2025) section 4.6). None: no tilt.
        observations: observed quantities, in log column order: a hinge name
            (its angle [rad]) or ``"body.x"``, ``"body.y"``, ``"body.z"`` (CoM position [m]).
        description: one line for ``mbfg models``.
        weight: the state error weight w [mbfg.roles.weight_unit] that calibration, cross-validation and
            sweeps use unless told otherwise (:data:`DEFAULT_WEIGHT` unless the model says).
            It says how far the rig this model describes follows its Spook steps against its
            readings: a model of a real rig with unmodelled effects calibrates best at a smaller w
            (Marklund et al. (2025) section 5: with too large a w the problem becomes infeasible).

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
        weight: float = DEFAULT_WEIGHT,
    ) -> None:
        self.name, self.description = name, description
        if not (isinstance(weight, (int, float)) and math.isfinite(weight) and weight > 0):
            raise ModelError(f"{name}: weight (the state error weight w) must be a positive finite number, "
                             f"got {weight!r}")
        self.weight = float(weight)
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
        self.arrays = compile_arrays(self)

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
                    observations=self.observations, description=self.description, weight=self.weight)
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
        validate(self)

    def _make_layout(self) -> Layout:
        """Static bookkeeping: which position function and which rows each part owns."""
        return make_layout(self.joints, self.contacts)

    # -- kinematics (pure JAX) -------------------------------------------------------
    def gravity(self, p: Mapping[str, Any]) -> jnp.ndarray:
        """Gravity acceleration in the world (3,) [m/s^2]: R_tilt (0, 0, -g)."""
        g_vec = jnp.array([0.0, 0.0, -1.0]) * p["g"]
        return p[self.tilt] @ g_vec if self.tilt else g_vec

    def mass_diagonal(self, p: Mapping[str, Any]) -> jnp.ndarray:
        """Diagonal of M (6 nb,): per body [m, m, m, Jx, Jy, Jz]."""
        return self.arrays.mass(self.arrays.parameter_vector(p))

    def forces(self, state: State, p: Mapping[str, Any], mass: jnp.ndarray | None = None) -> jnp.ndarray:
        """Applied forces f + f_g (6 nb,): gravity on each CoM [N], gyroscopic -omega x J omega [N m] (body frame).

        ``mass``: :meth:`mass_diagonal` of ``p`` when the caller has it."""
        M = (self.mass_diagonal(p) if mass is None else mass).reshape(-1, 6)
        f_lin = M[:, :3] * self.gravity(p)
        if self.applied:  # every applied force in one scatter-add
            X = self.arrays
            forces = X.applied_force(X.parameter_vector(p)).reshape(-1, 3)
            f_lin = f_lin.at[X.applied_body].add(forces)
        torque = -jnp.cross(state.w, M[:, 3:] * state.w)
        return jnp.concatenate([f_lin, torque], axis=1).reshape(-1)

    def _frame_pose(self, frame: Frame, r: Array, R: Array, p: Mapping[str, Any]) -> tuple:
        """(origin [m], R_world_frame) of an attachment frame."""
        return kinematics.frame_pose(self.body_index, frame, r, R, p)

    def position_functions(self, r: Array, R: Array, p: Mapping[str, Any]) -> jnp.ndarray:
        """Every position-level function the rows need (n_pos,), in layout order.

        Per joint its constraint rows g (F.1 for a hinge), then a hinge's angle or a slider's displacement;
        per contact the gap and the contact point's position along two tangents.
        The rows' Jacobians are the derivatives of these along ``q boxplus delta``.
        """
        return kinematics.position_functions(self, r, R, p)

    def _lifted_positions(self, state: State, p: Mapping[str, Any], vector: jnp.ndarray | None = None
                          ) -> Callable[[jnp.ndarray], jnp.ndarray]:
        """delta (6 nb,) -> the position functions along ``q boxplus delta`` (n_pos,), for derivatives at 0.

        The rotation follows the tangent line ``R (I + [psi]x)`` of ``R Exp(psi)`` (lie.rot3_tangent_line):
        the same value and first derivative at ``delta = 0``, which is all that the rows use, without
        the exponential's trigonometry and small-angle branches in every derivative pass.
        """
        R_world_body = self.rotations(state)
        vector = self.arrays.parameter_vector(p) if vector is None else vector
        geometry = self.arrays.geometry(vector)  # once, not in every derivative pass of lifted

        def lifted(delta: jnp.ndarray) -> jnp.ndarray:
            delta = delta.reshape(-1, 6)
            r = state.r + delta[:, :3]
            R = jax.vmap(lie.rot3_tangent_line)(R_world_body, delta[:, 3:])
            return kinematics.positions_from_geometry(self.arrays, r, R, geometry)

        return lifted

    def position_jacobian(self, state: State, p: Mapping[str, Any]) -> tuple[jnp.ndarray, jnp.ndarray]:
        """Position functions (n_pos,) and their Jacobian (n_pos, 6 nb): d f(q boxplus delta) / d delta."""
        X = self.arrays
        return kinematics.positions_and_jacobian(X, state.r, self.rotations(state),
                                                 X.geometry(X.parameter_vector(p)), self.nb)

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
        vector = self.arrays.parameter_vector(p)
        f_pos, J_pos = kinematics.positions_and_jacobian(self.arrays, state.r, self.rotations(state),
                                                         self.arrays.geometry(vector), self.nb)
        return assemble_rows(self, f_pos, J_pos, J_pos @ state.velocity(), u, p, h, vector=vector)

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
        vector = self.arrays.parameter_vector(p)
        lifted = self._lifted_positions(state, p, vector)
        zeros = jnp.zeros(6 * self.nb)
        f_pos, pullback = jax.vjp(lifted, zeros)

        def J(v: jnp.ndarray) -> jnp.ndarray:
            return jax.jvp(lifted, (zeros,), (v,))[1]

        rows_f = assemble_rows(self, f_pos, jnp.eye(f_pos.shape[0]), J(state.velocity()), u, p, h, dense=False,
                               vector=vector)
        return rows_f, J, lambda y: pullback(y)[0]

    def _assemble_rows(self, f_pos: jnp.ndarray, J_pos: jnp.ndarray, Jv: jnp.ndarray, u: jnp.ndarray,
                       p: Mapping[str, Any], h: float | jnp.ndarray, dense: bool = True) -> Rows:
        """The rows from the position functions f_pos (n_pos,), their Jacobian J_pos (n_pos, n) and
        J_pos v_k (n_pos,); A and B are built only by copying signed rows of J_pos. ``dense``: build
        the (nB, nB) Sigma_B too (the stepper's LCP); else only its per-group entries."""
        return assemble_rows(self, f_pos, J_pos, Jv, u, p, h, dense)

    def _compliance(self, j: Joint, p: Mapping[str, Any]) -> tuple[jnp.ndarray, jnp.ndarray]:
        """Per-row compliance eps and damping tau of a joint's holonomic rows."""
        return joint_compliance(j, p)

    # -- observations and energy (pure JAX) ------------------------------------------
    def _observation_fn(self, name: str):
        return kinematics.observation_fn(self, name)

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
        # The joints' coordinates are among the position functions (all joints at once, one gather after).
        f_pos = self.position_functions(state.r, self.rotations(state), p)
        return take(jnp.concatenate([f_pos, jnp.reshape(state.r, -1)]), self.arrays.observation_index)

    def energy(self, state: State, p: Mapping[str, Any]) -> jnp.ndarray:
        """Kinetic + gravitational + constraint (0.5 g^T eps^-1 g) + motor-shaft energy [J].

        The constraint term sums over every joint's rows (a dry joint's too) and every contact's penetration
        (``min(gap, 0)``); each kind of row one vectorized expression over the model's arrays."""
        X = self.arrays
        vector = X.parameter_vector(p)
        M = X.mass(vector)
        vel = state.velocity()
        E = 0.5 * vel @ (M * vel) - jnp.sum(M.reshape(-1, 6)[:, 0] * (state.r @ self.gravity(p)))
        f_pos, J_pos = self.position_jacobian(state, p)
        rows = X.row_parameters(vector)
        g = take(f_pos, X.holonomic.source)
        E = E + 0.5 * jnp.sum(g * g / rows["eps"]) + 0.5 * jnp.sum(rows["J"] * take(J_pos @ vel, X.motor.source) ** 2)
        C = X.complementarity
        friction = C.parameters(vector)
        for batch in C.batches:  # one per kind of friction group (a small constant), never per joint
            P = batch.parameters(friction)
            if batch.kind == "dry":
                g = take(f_pos, batch.pos.reshape(-1))
                E = E + 0.5 * jnp.sum(g * g / P["eps"])
            elif batch.kind == "contact":
                gap = jnp.minimum(take(f_pos, batch.pos[:, 0]), 0.0)
                E = E + 0.5 * jnp.sum(gap * gap / P["eps"])
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
        return state_from_coordinates(self, coordinates, rates, parameters, numpy)


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
        lines.append(f"  state error weight w: {self.weight:g} (calibration's default)")
        lines.append("  parameters:")
        for row in self.parameters.table():
            bounds = f"[{row['lower']:g}, {row['upper']:g}]" if not isinstance(row["value"], list) else ""
            value = row["value"] if isinstance(row["value"], list) else f"{row['value']:g}"
            flag = "free" if row["free"] else "fixed"
            lines.append(f"    {row['name']:<10} {value!s:<12} {row['unit']:<12} {bounds:<18} {flag:<5} {row['description']}")
        return "\n".join(lines)


def parameter(name: str, default: Any, unit: str = "", lower: float = -np.inf, upper: float = np.inf,
              free: bool = False, description: str = "", kind: str = "scalar") -> Parameter:
    """Shorthand for :class:`~mbfg.parameters.Parameter` used by the model builders."""
    return Parameter(name, default, unit, lower, upper, free, kind, description)
