"""The parts of a rigid-body model: bodies, attachment frames, joints, contacts, applied forces.

Everything numeric in a part may be a number or a parameter expression (:data:`ParamLike`:
a parameter name, or names and numbers joined by + and -), resolved by :func:`resolve`
against the model's parameter values, so models are differentiable in their parameters.
The equations each joint imposes live in :mod:`mbfg.rigid`; the joints follow Marklund et al. (2025)
section 2 (hinge, ball, lock; prismatic as a package of elementary constraints) and
Marklund et al. (2025) App. F (friction, motor).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from mbfg._jax import jnp
from mbfg.errors import ModelError

#: A number, or a sum of parameter names and numbers with signs, e.g. ``"L_A - r_A"``.
ParamLike = float | str
Vec3 = tuple[ParamLike, ParamLike, ParamLike]

WORLD = "world"
_TERM = re.compile(r"\s*([+-])?\s*([A-Za-z_][A-Za-z0-9_]*|[0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*")


@functools.cache
def sum_terms(expression: str) -> tuple[tuple[float, str | float], ...]:
    """Parse ``"a - b + 0.5"`` into ((+1, "a"), (-1, "b"), (+1, 0.5)); ModelError if it is not such a sum."""
    terms: list[tuple[float, str | float]] = []
    pos = 0
    while pos < len(expression):
        m = _TERM.match(expression, pos)
        if m is None or m.end() == pos or (terms and m.group(1) is None):
            raise ModelError(f"bad parameter expression {expression!r}: expected names and numbers joined by + and -")
        sign = -1.0 if m.group(1) == "-" else 1.0
        token = m.group(2)
        terms.append((sign, token if token[0].isalpha() or token[0] == "_" else float(token)))
        pos = m.end()
    if not terms:
        raise ModelError("empty parameter expression")
    return tuple(terms)


def resolve(value: ParamLike, p: Mapping[str, Any]) -> Any:
    """The value of a :data:`ParamLike` given parameter values ``p`` (a JAX scalar or float)."""
    if isinstance(value, str):
        return sum(sign * (p[token] if isinstance(token, str) else token) for sign, token in sum_terms(value))
    return value


def resolve3(values: Sequence[ParamLike], p: Mapping[str, Any]) -> jnp.ndarray:
    return jnp.stack([jnp.asarray(resolve(v, p), dtype=float) for v in values])


def param_names(value: Any) -> list[str]:
    if isinstance(value, str):
        return [token for _, token in sum_terms(value) if isinstance(token, str)]
    if isinstance(value, (tuple, list)):
        return [n for v in value for n in param_names(v)]
    return []


# --------------------------------------------------------------------------- parts


@dataclass(frozen=True)
class Body:
    """A rigid body.

    Args:
        name: unique name.
        mass: [kg].
        inertia: principal inertias (Jx, Jy, Jz) about the CoM, body frame [kg m^2].
        position, rotation: pose used when no joint places the body (free bodies,
            e.g. a particle): CoM position [m] and R_world_body (3, 3).
    """

    name: str
    mass: ParamLike
    inertia: Vec3
    position: tuple[float, float, float] = (0.0, 0.0, 0.0)
    rotation: Any = None


@dataclass(frozen=True)
class Frame:
    """An attachment frame fixed to a body (or to the world).

    Args:
        body: body name, or ``"world"``.
        position: origin in the body frame, relative to the CoM [m] (world frame for the world).
        rotation: R_body_frame (3, 3), a constant; identity by default.
    """

    body: str = WORLD
    position: Vec3 = (0.0, 0.0, 0.0)
    rotation: Any = None

    def R(self) -> np.ndarray:
        return np.eye(3) if self.rotation is None else np.asarray(self.rotation, dtype=float)


@dataclass(frozen=True)
class Motor:
    """A motor on a hinge or slider (Marklund et al. (2025) App. F, F.3): effort ``gain * u`` through a shaft of inertia
    ``shaft_inertia``.

    Args:
        control: name of the control signal u (e.g. a voltage [V]).
        gain: torque per unit control on a hinge [N m / unit of u]; force on a slider [N / unit of u].
        shaft_inertia: rotor inertia about the hinge axis [kg m^2], > 0; on a slider the inertia of
            rotor and screw reflected to the axis, ``J_rotor (2 pi / lead)^2`` [kg], > 0.
    """

    control: str
    gain: ParamLike
    shaft_inertia: ParamLike


@dataclass(frozen=True)
class _AxialJoint:
    """The fields hinges and sliders share (a joint with one coordinate; see :class:`Hinge`, :class:`Prismatic`)."""

    name: str
    a: Frame
    b: Frame
    eps_lin: ParamLike = 1e-8
    eps_rot: ParamLike = 1e-8
    tau: ParamLike = 2e-3
    viscous: ParamLike | None = None
    dry: ParamLike | None = None
    stribeck: tuple[ParamLike, ParamLike] | None = None
    motor: Motor | None = None
    friction_compliance: ParamLike = 1e-3
    coulomb: ParamLike | None = None


@dataclass(frozen=True)
class Hinge(_AxialJoint):
    """Hinge between frames ``a`` and ``b``: rotation about a's z axis only (F.1).

    Args:
        name: unique joint name; its angle is the observation of that name.
        a, b: attachment frames; ``a`` is the parent (``b`` is placed from ``a``
            when the model sets up a state from joint angles).
        eps_lin: compliance of the 3 translational rows [m/N].
        eps_rot: compliance of the 2 rotational rows [rad/(N m)].
        tau: damping (relaxation time) of all 5 rows [s].
        viscous: drag coefficient [N m s/rad] (F.2), or None.
        dry: dry friction ``mu r`` [m] (F.4): the friction torque is bounded by
            ``dry`` times the translational and ``dry / (1 m)`` times the
            rotational constraint multipliers. None: no dry friction.
        coulomb: a load-independent dry friction torque [N m]: the friction impulse of a step is
            bounded by ``h * coulomb`` (plus the ``dry`` bound if both are given). None: none.
        stribeck: ``(delta_mu_r [m], omega_s [rad/s])``: the dry coefficient becomes
            ``dry + delta_mu_r * exp(-(omega_k / omega_s)^2)`` (Marklund et al. (2025) eq. 4.1), or None.
            Without ``dry``, ``delta`` [N m] is added to the ``coulomb`` torque instead.
        motor: a :class:`Motor`, or None.
        friction_compliance: Sigma_t of the two tangential friction rows [rad/(N m s^2)]: while
            the hinge sticks it creeps at friction_compliance times the friction impulse
            (``friction_compliance * T * h`` [rad/s] for a friction torque T).
    """


@dataclass(frozen=True)
class Prismatic(_AxialJoint):
    """Prismatic joint (slider) between frames ``a`` and ``b``: translation along a's z axis only.

    A package of elementary constraints (Marklund et al. (2025) section 2): b's origin stays on a's z axis
    (2 translational rows, ``x_a . (o_b - o_a)`` and ``y_a . (o_b - o_a)``) and b's orientation
    stays a's (3 rotational rows, as in :class:`Lock`). Its coordinate, the observation of its
    name, is the displacement ``d = z_a . (o_b - o_a)`` [m]. Friction and the motor are those
    of the frictional hinge (Marklund et al. (2025) App. F) carried over to the translational axis.

    Args:
        name: unique joint name; its displacement [m] is the observation of that name.
        a, b: attachment frames; ``a`` is the parent.
        eps_lin: compliance of the 2 translational rows [m/N].
        eps_rot: compliance of the 3 rotational rows [rad/(N m)].
        tau: damping (relaxation time) of all 5 rows [s].
        viscous: drag coefficient [N s/m] (F.2 along the axis), or None.
        coulomb: a load-independent dry friction force [N] (a drive's ``F_c``): the friction
            impulse of a step is bounded by ``h * coulomb``. None: none.
        dry: a load-dependent friction coefficient mu [-] (F.4): the friction force is bounded by
            ``dry`` times the translational and ``dry / (1 m)`` times the rotational constraint
            multipliers (added to the ``coulomb`` bound if both are given). None: none.
        stribeck: ``(delta, v_s [m/s])``: ``delta * exp(-(v_k / v_s)^2)`` is added to the ``dry``
            coefficient [-], or, without ``dry``, to the ``coulomb`` force [N] (Marklund et al. (2025) eq. 4.1).
        motor: a :class:`Motor` (force ``gain * u`` through the reflected inertia), or None.
        friction_compliance: Sigma_t of the two tangential friction rows [m/(N s^2)]: while the
            slider sticks it creeps at friction_compliance times the friction impulse
            (``friction_compliance * F * h`` [m/s] for a friction force F).
    """

    friction_compliance: ParamLike = 1e-6


@dataclass(frozen=True)
class Ball:
    """Ball joint: the origins of frames a and b coincide (3 rows)."""

    name: str
    a: Frame
    b: Frame
    eps: ParamLike = 1e-8
    tau: ParamLike = 2e-3


@dataclass(frozen=True)
class Lock:
    """Lock joint: frames a and b coincide in position and orientation (6 rows)."""

    name: str
    a: Frame
    b: Frame
    eps_lin: ParamLike = 1e-8
    eps_rot: ParamLike = 1e-8
    tau: ParamLike = 2e-3


@dataclass(frozen=True)
class Contact:
    """A point of a body above a fixed plane: gap ``c = n . (p - origin) >= 0`` (2.21) with Coulomb friction (2.24).

    Args:
        name: unique name.
        body: the body; ``point`` is the contact point in its frame, rel. to the CoM [m].
        normal: plane normal in the world (unit after normalization); ``origin`` a point of the plane [m].
        mu: friction coefficient [-]; friction acts along two world tangents, in
            both senses each (a four-sided friction pyramid).
        eps, tau: compliance [m/N] and damping [s] of the normal row.
        friction_compliance: Sigma_t of the tangential rows [m/(N s^2)] (creep while sticking: Sigma_t times
            the friction impulse [N s], in m/s).
        radius: a sphere of this radius [m] centred at ``point``: gap ``n . (p - origin) - radius``.
            Friction acts through the centre (the rows' tangents are those of ``point``), so it
            exerts no torque: the sphere slides without rolling, as a block would.
    """

    name: str
    body: str
    point: Vec3 = (0.0, 0.0, 0.0)
    normal: tuple[float, float, float] = (0.0, 0.0, 1.0)
    origin: tuple[float, float, float] = (0.0, 0.0, 0.0)
    mu: ParamLike = 0.0
    eps: ParamLike = 1e-8
    tau: ParamLike = 2e-3
    friction_compliance: ParamLike = 1e-5
    radius: ParamLike = 0.0


@dataclass(frozen=True)
class AppliedForce:
    """A constant force on a body's CoM, world frame [N] (e.g. the push on Berard and Trinkle's (2008) particle)."""

    body: str
    force: Vec3


Joint = Hinge | Prismatic | Ball | Lock
#: Joints with one coordinate (an angle [rad] or a displacement [m]): friction, motors, observations.
Axial = Hinge | Prismatic

#: Regularization of each friction-bound (sigma) row, Delta of eq. 2.24.
SIGMA_REGULARIZATION = 1e-10
#: The paper unifies friction from force and torque multipliers with an
#: arbitrary distance (Marklund et al. (2025) section 4.3); ours is 1 m.
ROTATIONAL_FRICTION_DISTANCE = 1.0
