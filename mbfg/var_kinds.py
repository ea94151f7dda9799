"""The kinds of GTSAM variable a residual takes (:class:`VarKind`), and keys that know their kind (:class:`Key`).

A :class:`VarKind` says what array the residual receives for a variable, how that variable is read from a
``gtsam.Values`` (:data:`READERS`) and its tangent. Jacobians follow GTSAM's tangent convention: the block of
variable i is ``d r(retract(x_i, xi)) / d xi`` at ``xi = 0``; for ``Rot3`` that is the right perturbation
``R * Exp(xi)``, for ``Pose3`` the tangent is ``[omega, v]``, for ``Pose2`` ``[v_x, v_y, omega]``
(``P * Exp(xi)``), for ``Rot2`` the angle, for points and vectors ``x + xi``. JAX differentiates along
:meth:`VarKind.tangent_line`, a curve with the retraction's velocity at ``xi = 0`` (hence the same Jacobian)
that avoids Rodrigues' formula.

Keys: a :class:`Key` is a GTSAM key (an ``int``) that knows its variable's kind (:mod:`mbfg.keys` makes them);
:meth:`mbfg.adapter.FactorType.make` refuses one of the wrong kind (:func:`key_kinds` looks the kinds up).
Plain ints are taken as they are (GTSAM's own keys, arithmetic keys).
"""

from __future__ import annotations

import enum
import itertools
from collections.abc import Callable, Iterable
from typing import Any, ClassVar

import gtsam
import numpy as np

from mbfg import lie
from mbfg._jax import jnp

__all__ = ["POINT2", "POINT3", "POSE2", "POSE3", "READERS", "ROT2", "ROT3", "VECTOR", "Key", "Point2Key",
           "Point3Key", "Pose2Key", "Pose3Key", "Rot2Key", "Rot3Key", "VarKind", "VectorKey", "key_kinds"]


class VarKind(enum.Enum):
    """Kinds of GTSAM variable a residual may take, with what the residual receives:

    ==========  ==========================  ====================================================
    kind        the residual's array        tangent (GTSAM's ``retract``)
    ==========  ==========================  ====================================================
    ``Vector``  (n,)                        ``x + xi``
    ``Point2``  (2,) [m]                    ``x + xi``
    ``Point3``  (3,) [m]                    ``x + xi``
    ``Rot2``    rotation matrix (2, 2)      ``R * Exp(theta)``, xi = [theta]
    ``Pose2``   homogeneous (3, 3)          ``P * Exp(xi)``, xi = [v_x, v_y, omega]
    ``Rot3``    rotation matrix (3, 3)      ``R * Exp(xi)``, xi = omega (3,)
    ``Pose3``   homogeneous (4, 4)          ``T * Exp(xi)``, xi = [omega, v] (6,)
    ==========  ==========================  ====================================================
    """

    VECTOR = "Vector"
    ROT3 = "Rot3"
    POSE3 = "Pose3"
    POINT2 = "Point2"
    POINT3 = "Point3"
    ROT2 = "Rot2"
    POSE2 = "Pose2"

    def read(self, values: gtsam.Values, key: int) -> np.ndarray:
        """The variable as the array the residual sees (table in the class docstring)."""
        return READERS[self](values, key)

    def tangent_dim(self, x: Any) -> int:
        if self is VarKind.VECTOR:
            return int(np.shape(x)[0])
        return _TANGENT_DIM[self]

    def tangent_line(self, x: jnp.ndarray, xi: jnp.ndarray) -> jnp.ndarray:
        """A curve through x with the velocity of GTSAM's retraction at ``xi = 0`` (``lie.rot3_retract``,
        ``lie.pose3_retract``, ...): the same Jacobian, fewer operations."""
        if self in (VarKind.VECTOR, VarKind.POINT2, VarKind.POINT3):
            return x + xi
        if self is VarKind.ROT3:
            return lie.rot3_tangent_line(x, xi)
        if self is VarKind.POSE3:
            return lie.pose3_tangent_line(x, xi)
        if self is VarKind.ROT2:
            return lie.rot2_tangent_line(x, xi)
        return lie.pose2_tangent_line(x, xi)


#: How each kind of variable is read from a ``gtsam.Values`` as the residual's array: ``READERS[kind](values,
#: key)``. A dict of plain functions, so that a callback that reads thousands of times per solve looks its
#: readers up once (no enum hashing per call).
READERS: dict[VarKind, Callable[[gtsam.Values, int], np.ndarray]] = {
    VarKind.VECTOR: lambda values, key: values.atVector(key),
    VarKind.POINT2: lambda values, key: np.asarray(values.atPoint2(key), dtype=float),
    VarKind.POINT3: lambda values, key: np.asarray(values.atPoint3(key), dtype=float),
    VarKind.ROT2: lambda values, key: values.atRot2(key).matrix(),
    VarKind.POSE2: lambda values, key: values.atPose2(key).matrix(),
    VarKind.ROT3: lambda values, key: values.atRot3(key).matrix(),
    VarKind.POSE3: lambda values, key: values.atPose3(key).matrix(),
}
_TANGENT_DIM = {VarKind.POINT2: 2, VarKind.POINT3: 3, VarKind.ROT2: 1, VarKind.POSE2: 3, VarKind.ROT3: 3,
                VarKind.POSE3: 6}

VECTOR, ROT3, POSE3 = VarKind.VECTOR, VarKind.ROT3, VarKind.POSE3
POINT2, POINT3, ROT2, POSE2 = VarKind.POINT2, VarKind.POINT3, VarKind.ROT2, VarKind.POSE2


class Key(int):
    """A GTSAM key that knows the :class:`VarKind` of its variable (``kind``, a class attribute).

    Still an ``int`` (GTSAM, ``gtsam.Values``, dicts and key arithmetic take it as one; arithmetic gives
    plain ints); no instance dictionary, so it costs what an int costs. Printed as the integer it is.
    """

    __slots__ = ()
    kind: ClassVar[VarKind]


class VectorKey(Key):
    """Key of a Vector variable."""

    __slots__ = ()
    kind = VECTOR


class Rot3Key(Key):
    """Key of a Rot3 variable."""

    __slots__ = ()
    kind = ROT3


class Pose3Key(Key):
    """Key of a Pose3 variable."""

    __slots__ = ()
    kind = POSE3


class Point2Key(Key):
    """Key of a Point2 variable."""

    __slots__ = ()
    kind = POINT2


class Point3Key(Key):
    """Key of a Point3 variable."""

    __slots__ = ()
    kind = POINT3


class Rot2Key(Key):
    """Key of a Rot2 variable."""

    __slots__ = ()
    kind = ROT2


class Pose2Key(Key):
    """Key of a Pose2 variable."""

    __slots__ = ()
    kind = POSE2


#: The kind of each key class, for :func:`key_kinds`; a plain int has none. Any other type (a NumPy integer)
#: gets the truthy ``_OTHER``.
_OTHER = object()
_OTHER_TYPES = itertools.repeat(_OTHER)
_KIND_OF_KEY_TYPE: dict[type, VarKind | None] = {int: None, VectorKey: VECTOR, Rot3Key: ROT3, Pose3Key: POSE3,
                                                  Point2Key: POINT2, Point3Key: POINT3, Rot2Key: ROT2,
                                                  Pose2Key: POSE2}


def key_kinds(keys: Iterable[Any]) -> list[Any]:
    """The kind of each of ``keys``: a typed :class:`Key`'s :class:`VarKind`, None for a plain ``int``, and a
    truthy marker for any other type (a NumPy integer), which the caller looks at closer.

    Looked up by ``type(key)``, all at once in C (``map`` over a dict's ``get``, where isinstance would be a
    Python-level call per key): :meth:`mbfg.adapter.FactorType.make_many` checks every row of keys of a
    stream's update through here."""
    return list(map(_KIND_OF_KEY_TYPE.get, map(type, keys), _OTHER_TYPES))
