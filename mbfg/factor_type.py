"""Declare a factor type in one place: an annotated pure residual and a decorator.

::

    from mbfg.factor_type import Pose3Var, VectorVar, factor_type

    @factor_type(name="wheel_contact", example=lambda rng: (...))
    def wheel_contact(pose: Pose3Var, p: VectorVar, radius: jax.Array) -> jax.Array:
        ...

The parameters annotated with a variable type (:data:`VectorVar`, :data:`Rot3Var`,
:data:`Pose3Var`, :data:`Point2Var`, :data:`Point3Var`, :data:`Rot2Var`, :data:`Pose2Var`) are the factor's variables, in order; the parameters after them are
its constants (measurements, fixed parameters). The result is a
:class:`mbfg.adapter.FactorType`: ``wheel_contact.make([keys.X(k, 0), keys.P()], noise,
radius)`` builds the GTSAM factor and checks the kinds of typed keys;
``wheel_contact.residual`` is the function as written. Registration for the Jacobian
battery stays a separate, explicit call (:func:`mbfg.registry.register`).

As in symforce, the annotations say what the residual receives: a Vector variable is
an array (n,), a Rot3 a rotation matrix (3, 3), a Pose3 a homogeneous matrix (4, 4), a Pose2
(3, 3), a Rot2 (2, 2), a Point2 or Point3 an array (2,) or (3,).
Where annotations cannot be read (a residual taking ``*args``, or annotations naming
something the function's module cannot resolve), pass ``kinds=`` instead.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable, Sequence
from typing import Annotated, Any, overload

from mbfg._jax import jax, jnp
from mbfg.adapter import Example, FactorType, VarKind
from mbfg.errors import DeclarationError

__all__ = ["Point2Var", "Point3Var", "Pose2Var", "Pose3Var", "Rot2Var", "Rot3Var", "VectorVar", "factor_type",
           "kinds_from_annotations"]

#: A Vector variable of a residual: an array (n,).
VectorVar = Annotated[jax.Array, VarKind.VECTOR]
#: A Rot3 variable of a residual: a rotation matrix (3, 3).
Rot3Var = Annotated[jax.Array, VarKind.ROT3]
#: A Pose3 variable of a residual: a homogeneous transform (4, 4); its tangent is [omega, v].
Pose3Var = Annotated[jax.Array, VarKind.POSE3]
#: A Point2 variable of a residual: (2,) [m].
Point2Var = Annotated[jax.Array, VarKind.POINT2]
#: A Point3 variable of a residual: (3,) [m].
Point3Var = Annotated[jax.Array, VarKind.POINT3]
#: A Rot2 variable of a residual: a rotation matrix (2, 2); its tangent is the angle [rad].
Rot2Var = Annotated[jax.Array, VarKind.ROT2]
#: A Pose2 variable of a residual: a homogeneous transform (3, 3); its tangent is [v_x, v_y, omega].
Pose2Var = Annotated[jax.Array, VarKind.POSE2]

Residual = Callable[..., jnp.ndarray]


def _kind_of(hint: Any) -> VarKind | None:
    """The VarKind an annotation carries (``Annotated[..., VarKind.X]``), or None."""
    if typing.get_origin(hint) is Annotated:
        kinds = [m for m in hint.__metadata__ if isinstance(m, VarKind)]
        return kinds[0] if kinds else None
    return None


def kinds_from_annotations(residual: Residual) -> tuple[VarKind, ...]:
    """The variable kinds of ``residual``: its leading positional parameters annotated with a variable type.

    Raises:
        DeclarationError (a TypeError): the annotations cannot be evaluated, no parameter is a variable, or a variable
            follows a constant.
    """
    name = getattr(residual, "__qualname__", repr(residual))
    try:
        hints = typing.get_type_hints(residual, include_extras=True)
    except Exception as exc:  # NameError and friends: a forward reference the module cannot resolve
        raise DeclarationError(f"{name}: cannot read its annotations ({exc}); pass kinds= to factor_type") from exc
    params = [p for p in inspect.signature(residual).parameters.values()
              if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    kinds = [_kind_of(hints.get(p.name)) for p in params]
    n = next((i for i, kind in enumerate(kinds) if kind is None), len(kinds))
    late = [p.name for p, kind in zip(params[n:], kinds[n:]) if kind is not None]
    if late:
        raise DeclarationError(f"{name}: variables come before constants, but {late} follow the constant "
                        f"{params[n].name!r}")
    if n == 0:
        raise DeclarationError(f"{name}: no parameter is annotated as a variable (VectorVar, Rot3Var, Pose3Var); "
                        "annotate the variables, first in order, or pass kinds= to factor_type")
    return tuple(k for k in kinds[:n] if k is not None)


@overload
def factor_type(
    residual: Residual, /, *, name: str, example: Example | None = ..., kinds: Sequence[VarKind] | None = ...,
    piecewise: bool = ..., jacobian_groups: tuple[tuple[int, ...], ...] | None = ...,
) -> FactorType: ...


@overload
def factor_type(
    residual: None = ..., /, *, name: str, example: Example | None = ..., kinds: Sequence[VarKind] | None = ...,
    piecewise: bool = ..., jacobian_groups: tuple[tuple[int, ...], ...] | None = ...,
) -> Callable[[Residual], FactorType]: ...


def factor_type(
    residual: Residual | None = None, /, *, name: str, example: Example | None = None,
    kinds: Sequence[VarKind] | None = None, piecewise: bool = False,
    jacobian_groups: tuple[tuple[int, ...], ...] | None = None,
) -> FactorType | Callable[[Residual], FactorType]:
    """A :class:`mbfg.adapter.FactorType` from a pure residual: ``@factor_type(name=...)`` above it, or
    ``factor_type(residual, name=...)`` where the function itself must stay a plain function.

    Args:
        residual: ``residual(*variables, *constants) -> (m,)`` in jax.numpy, its variables annotated
            with :data:`VectorVar`, :data:`Rot3Var` or :data:`Pose3Var` (first, in order).
        name: unique name of the type, e.g. ``"wheel_contact"`` (the battery's and the messages' name).
        example: ``example(rng) -> (variables, constants)``, a random valid instance: what
            :func:`mbfg.registry.register` needs to put the type through the Jacobian battery.
        kinds: the variable kinds, instead of reading them from the annotations; where both are
            given they must agree.
        piecewise, jacobian_groups: as in :class:`mbfg.adapter.FactorType`.
    """

    def declare(fn: Residual) -> FactorType:
        if kinds is None:
            declared = kinds_from_annotations(fn)
        else:
            declared = tuple(kinds)
            try:
                annotated: tuple[VarKind, ...] | None = kinds_from_annotations(fn)
            except TypeError:
                annotated = None  # nothing (readable) annotated: kinds= says it all
            if annotated is not None and annotated != declared:
                raise DeclarationError(f"factor type {name!r}: kinds={[k.value for k in declared]} but the annotations "
                                f"say {[k.value for k in annotated]}")
        return FactorType(name, fn, declared, example=example, piecewise=piecewise, jacobian_groups=jacobian_groups)

    return declare if residual is None else declare(residual)
