"""Checks of a rigid model's parts at construction: names, parameters, masses, frames (ModelError)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from mbfg.errors import ModelError
from mbfg.parameters import ROTATION
from mbfg.parts import WORLD, Frame, Hinge, ParamLike, Prismatic, param_names, resolve

if TYPE_CHECKING:  # annotations only: the model imports this module
    from mbfg.rigid.model import RigidModel


def validate(model: RigidModel) -> None:
    """Raise ModelError on what :class:`~mbfg.rigid.RigidModel` lists under Raises (its constructor calls this)."""
    names: dict[str, str] = {}
    for kind, items in (("body", model.bodies), ("joint", model.joints), ("contact", model.contacts)):
        for item in items:
            if item.name in names or item.name == WORLD:
                raise ModelError(f"{model.name}: {kind} name {item.name!r} is used twice (or is reserved)")
            names[item.name] = kind
    params = model.parameters
    for required in ["g", *([model.tilt] if model.tilt else [])]:
        if required not in params:
            raise ModelError(f"{model.name}: parameter {required!r} is missing (gravity needs it)")
    if model.tilt and params[model.tilt].kind != ROTATION:
        raise ModelError(f"{model.name}: tilt parameter {model.tilt!r} must be a rotation parameter")

    values = params.numpy_values()  # once: a dict per check made loading quadratic in the number of links

    def check_params(where: str, value: Any) -> None:
        for n in param_names(value):
            if n not in params:
                raise ModelError(f"{model.name}: {where} names unknown parameter {n!r}")

    def check_positive(where: str, value: ParamLike) -> None:
        check_params(where, value)
        v = resolve(value, values)
        if not v > 0:
            shown = f"{value} = {v:g}" if isinstance(value, str) else f"{v:g}"
            raise ModelError(f"{model.name}: {where} must be > 0, got {shown}")

    def check_frame(where: str, frame: Frame) -> None:
        if frame.body != WORLD and frame.body not in model.body_index:
            raise ModelError(
                f"{model.name}: {where} names unknown body {frame.body!r}; bodies: {', '.join(model.body_index)}"
            )
        check_params(f"{where}.position", frame.position)
        R = frame.R()
        if R.shape != (3, 3) or np.abs(R @ R.T - np.eye(3)).max() > 1e-9 or np.linalg.det(R) < 0:
            raise ModelError(f"{model.name}: {where}.rotation is not a rotation matrix")

    for b in model.bodies:
        check_positive(f"body {b.name!r} mass", b.mass)
        for axis, J in zip("xyz", b.inertia):
            check_positive(f"body {b.name!r} inertia J{axis}", J)
        if b.rotation is not None:
            check_frame(f"body {b.name!r}", Frame(WORLD, (0.0, 0.0, 0.0), b.rotation))
    for j in model.joints:
        where = f"joint {j.name!r}"
        check_frame(f"{where}.a", j.a)
        check_frame(f"{where}.b", j.b)
        if j.a.body == j.b.body:
            raise ModelError(f"{model.name}: {where} connects {j.a.body!r} to itself")
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
    for c in model.contacts:
        where = f"contact {c.name!r}"
        if c.body not in model.body_index:
            raise ModelError(f"{model.name}: {where} names unknown body {c.body!r}")
        check_positive(f"{where} eps", c.eps)
        check_params(f"{where}", (c.point, c.mu, c.tau, c.friction_compliance, c.radius))
        if np.linalg.norm(c.normal) < 1e-12:
            raise ModelError(f"{model.name}: {where} normal has zero length")
    for f in model.applied:
        if f.body not in model.body_index:
            raise ModelError(f"{model.name}: applied force names unknown body {f.body!r}")
        check_params("applied force", f.force)
