"""One class per joint type: its rows, coordinate and compliances, registered once (:data:`JOINT_TYPES`).

A joint type says, for every joint of its kind at once (arrays with a leading joint axis n):

- ``rows`` (``n_rows`` of them): its holonomic constraint rows g, translational rows first (``n_lin`` of them): these are
  the rows of the Spook system (Marklund, Servin, Larson 2025, eqs. 2.8-2.11) and, with dry friction,
  the normal rows of its friction group (F.4);
- ``axial``: whether it has one coordinate (an angle [rad] or a displacement [m]) that friction, a motor
  and an observation act on; the coordinate follows the rows among the position functions;
- :meth:`JointType.positions`: the rows g and the coordinate from the attachment frames' poses,
  ``(n, n_rows + axial)``, one vectorized expression for all joints of the type;
- :meth:`JointType.compliance`: each row's compliance as a parameter expression of the joint (the
  damping ``tau`` is one per joint).

The model's layout, position functions and rows look a joint's type up here (:func:`joint_type`) instead
of asking ``isinstance``: a new joint type is one class below and its entry in :data:`JOINT_TYPES`.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from mbfg._jax import jnp
from mbfg.errors import ModelError
from mbfg.parts import Ball, Hinge, Joint, Lock, ParamLike, Prismatic


def _relative(R_a: jnp.ndarray, R_b: jnp.ndarray) -> jnp.ndarray:
    """R_a^T R_b of stacked rotations (n, 3, 3)."""
    return jnp.einsum("nki,nkj->nij", R_a, R_b)


def hinge_angles(R_a: jnp.ndarray, R_b: jnp.ndarray) -> jnp.ndarray:
    """(n,) rotation angles of frames b about frames a's z axes, in (-pi, pi] [rad]; R_a, R_b (n, 3, 3)."""
    R_ab = _relative(R_a, R_b)
    return jnp.arctan2(R_ab[:, 1, 0] - R_ab[:, 0, 1], R_ab[:, 0, 0] + R_ab[:, 1, 1])


# The features every joint's position functions are linear combinations of (with constant coefficients),
# so that a joint type is one product with a constant matrix: columns D (3) the origins' difference
# o_b - o_a in the world, DA (3) the same in frame a, RAB (9) R_a^T R_b row-major (entry (i, j) at RAB + 3 i + j).
D, DA, RAB = 0, 3, 6
N_FEATURES = 15


def _rab(i: int, j: int) -> int:
    return RAB + 3 * i + j


def features(o_a: jnp.ndarray, R_a: jnp.ndarray, o_b: jnp.ndarray, R_b: jnp.ndarray) -> jnp.ndarray:
    """(n, 15): [o_b - o_a, R_a^T (o_b - o_a), R_a^T R_b (row-major)] of n joints."""
    d = o_b - o_a
    d_a = jnp.einsum("nki,nk->ni", R_a, d)
    return jnp.concatenate([d, d_a, _relative(R_a, R_b).reshape(-1, 9)], axis=1)


def _matrix(columns: list[dict[int, float]]) -> np.ndarray:
    S = np.zeros((N_FEATURES, len(columns)))
    for c, terms in enumerate(columns):
        for f, coefficient in terms.items():
            S[f, c] = coefficient
    return S


#: The alignment rows that lock b's orientation to a's: the skew part of R_a^T R_b, sin(angle) * axis, zero
#: at alignment and smooth there.
ALIGNMENT = [{_rab(2, 1): 0.5, _rab(1, 2): -0.5}, {_rab(0, 2): 0.5, _rab(2, 0): -0.5},
             {_rab(1, 0): 0.5, _rab(0, 1): -0.5}]
COINCIDENT = [{D + k: 1.0} for k in range(3)]


class JointType:
    """The interface every joint type implements (see the module docstring).

    A type lists its rows (and a coordinate) as linear combinations of :func:`features` (``rows``,
    ``coordinate``), or, for a hinge's angle, the two arguments of an arctangent (``angle``);
    :meth:`positions` evaluates them for all joints of the type in one product.
    """

    part: ClassVar[type]
    n_lin: ClassVar[int]
    rows: ClassVar[list[dict[int, float]]]
    coordinate: ClassVar[dict[int, float] | None] = None
    angle: ClassVar[tuple[dict[int, float], dict[int, float]] | None] = None

    @property
    def n_rows(self) -> int:
        return len(self.rows)

    @property
    def axial(self) -> bool:
        """Whether the joint has one coordinate (an angle [rad] or a displacement [m])."""
        return self.coordinate is not None or self.angle is not None

    def __init__(self) -> None:
        # Built at registration, not on first use: a model's pickled bytes (the fingerprint of its programs on
        # disk) must not depend on whether a position was evaluated before.
        extra = [self.coordinate] if self.coordinate is not None else list(self.angle or ())
        self._selection = _matrix(self.rows + extra)

    def positions(self, o_a: jnp.ndarray, R_a: jnp.ndarray, o_b: jnp.ndarray, R_b: jnp.ndarray) -> jnp.ndarray:
        """(n, n_rows + axial): the rows g, then the coordinate, of n joints from their frames' origins
        o (n, 3) [m] and orientations R_world_frame (n, 3, 3)."""
        values = features(o_a, R_a, o_b, R_b) @ self._selection
        if self.angle is None:
            return values
        n = self.n_rows
        return jnp.concatenate([values[:, :n], jnp.arctan2(values[:, n], values[:, n + 1])[:, None]], axis=1)

    def compliance(self, j: Any) -> tuple[ParamLike, ...]:
        """The compliance of each of the joint's rows (n_rows,): translational [m/N], rotational [rad/(N m)]."""
        return (j.eps_lin,) * self.n_lin + (j.eps_rot,) * (self.n_rows - self.n_lin)


class HingeType(JointType):
    """:class:`~mbfg.parts.Hinge` (F.1): the origins coincide (3 rows) and a's z stays orthogonal to b's x and y
    (2 rows: (R_a^T R_b)_{2,0} and _{2,1}); the coordinate is b's angle about a's z."""

    part = Hinge
    n_lin = 3
    rows = COINCIDENT + [{_rab(2, 0): 1.0}, {_rab(2, 1): 1.0}]
    angle = ({_rab(1, 0): 1.0, _rab(0, 1): -1.0}, {_rab(0, 0): 1.0, _rab(1, 1): 1.0})


class PrismaticType(JointType):
    """:class:`~mbfg.parts.Prismatic`: b's origin on a's z axis (2 rows: its x and y in frame a), b's orientation
    a's (3 rows); the coordinate is the displacement along a's z."""

    part = Prismatic
    n_lin = 2
    rows = [{DA: 1.0}, {DA + 1: 1.0}] + ALIGNMENT
    coordinate = {DA + 2: 1.0}


class BallType(JointType):
    """:class:`~mbfg.parts.Ball`: the origins coincide (3 rows)."""

    part = Ball
    n_lin = 3
    rows = COINCIDENT

    def compliance(self, j: Any) -> tuple[ParamLike, ...]:
        return (j.eps,) * 3


class LockType(JointType):
    """:class:`~mbfg.parts.Lock`: the origins (3 rows) and orientations (3 rows) coincide."""

    part = Lock
    n_lin = 3
    rows = COINCIDENT + ALIGNMENT


#: Every joint type, by the part class it models; the order is that of the joints' slots in the arrays.
JOINT_TYPES: dict[type, JointType] = {t.part: t() for t in (HingeType, PrismaticType, BallType, LockType)}


def joint_type(j: Joint) -> JointType:
    """The registered type of joint ``j``; ModelError for a part no type models."""
    for cls in type(j).__mro__:  # a subclass of a part is that part's type
        if cls in JOINT_TYPES:
            return JOINT_TYPES[cls]
    raise ModelError(f"joint {getattr(j, 'name', j)!r}: {type(j).__name__} is not a joint type; expected one of "
                     f"{', '.join(t.__name__ for t in JOINT_TYPES)}")
