"""What a rigid-body model's numbers mean: the unit of the state error weight w and of the noise levels it implies,
each parameter's role in the equations, and the equation of motion along a slider (``mbfg models MODEL``).

All of it is read off the model's parts (:mod:`mbfg.parts`), so a model file or a URDF is described as a built-in
model is.

**The weight's unit.** The joint problem of Marklund, Servin, Larson (2025, eq. 3.17) minimizes
``sum_k |Delta y_k|^2 + w sum_k |Delta p_k|^2``: readings against impulses, so w is in (reading unit)^2 per
(impulse unit)^2. A hinge's reading is an angle [rad] and the impulse that moves it a torque impulse [N m s]; a
slider's reading is a displacement [m] and its impulse a force impulse [N s]; a body's CoM coordinate [m] is moved
by a force impulse [N s]. A model with both kinds has one w for both, in two units.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

import numpy as np

from mbfg.parts import WORLD, Frame, Hinge, Prismatic, sum_terms

if TYPE_CHECKING:
    from mbfg.rigid import RigidModel

__all__ = ["equations", "impulse_unit", "noise_units", "parameter_roles", "reading_unit", "roles_text",
           "structural_sums", "unit_fields", "weight_unit"]


def _kind(model: RigidModel, observation: str) -> str:
    """"hinge", "slider" or "position" (a body's CoM coordinate) for an observation of ``model``."""
    joints = {j.name: j for j in model.axial}
    if observation in joints:
        return "hinge" if isinstance(joints[observation], Hinge) else "slider"
    return "position"


def reading_unit(model: RigidModel, observation: str) -> str:
    """The unit of an observation: rad for a hinge angle, m for a slider displacement or a CoM coordinate."""
    return "rad" if _kind(model, observation) == "hinge" else "m"


def impulse_unit(model: RigidModel, observation: str) -> str:
    """The unit of the impulse that moves an observation: N m s for a hinge, N s for a slider or a CoM coordinate."""
    return "N m s" if _kind(model, observation) == "hinge" else "N s"


def _distinct(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))


def weight_unit(model: RigidModel) -> str:
    """The unit of w for ``model``, e.g. ``m^2/(N s)^2`` (a linear stage), ``rad^2/(N m s)^2`` (a pendulum), or
    both with what each is for."""
    kinds = _distinct(_kind(model, o) for o in model.observations)
    units = {"hinge": "rad^2/(N m s)^2", "slider": "m^2/(N s)^2", "position": "m^2/(N s)^2"}
    names = {"hinge": "hinge angles", "slider": "slider displacements", "position": "CoM coordinates"}
    distinct = _distinct(units[k] for k in kinds)
    if len(distinct) == 1:
        return distinct[0]
    return ", ".join(f"{units[k]} ({names[k]})" for k in kinds)


def noise_units(model: RigidModel) -> tuple[str, str]:
    """(reading noise unit, impulse noise unit): ("m", "N s") for a stage, ("rad", "N m s") for a pendulum,
    ("rad or m", "N m s or N s") for a model with both."""
    readings = _distinct(reading_unit(model, o) for o in model.observations)
    impulses = _distinct(impulse_unit(model, o) for o in model.observations)
    return " or ".join(readings), " or ".join(impulses)


def unit_fields(model: RigidModel) -> dict[str, str]:
    """The units of a calibration's w and noise levels for its JSON: {"weight_unit", "sigma_observation_unit",
    "sigma_impulse_unit"}."""
    reading, impulse = noise_units(model)
    return {"weight_unit": weight_unit(model), "sigma_observation_unit": reading, "sigma_impulse_unit": impulse}


# ----------------------------------------------------------------------------------------------- roles


def _names(value: object) -> list[tuple[float, str]]:
    """(sign, parameter name) of each name in a parameter expression (nothing for a number)."""
    if isinstance(value, str):
        return [(sign, token) for sign, token in sum_terms(value) if isinstance(token, str)]
    return []


def _axis(frame: Frame) -> np.ndarray | None:
    """A world frame's z axis in the world (a joint's axis), None for a frame on a body (it moves with it)."""
    return frame.R() @ np.array([0.0, 0.0, 1.0]) if frame.body == WORLD else None


def _direction(axis: np.ndarray) -> str:
    """'world +x' for (1, 0, 0), else the vector."""
    for i, name in enumerate("xyz"):
        if np.allclose(np.abs(axis), np.eye(3)[i]):
            return f"world {'+' if axis[i] > 0 else '-'}{name}"
    return f"world ({axis[0]:.3g}, {axis[1]:.3g}, {axis[2]:.3g})"


def _add(roles: dict[str, list[str]], value: object, text: str) -> None:
    for sign, name in _names(value):
        roles.setdefault(name, []).append(("minus " if sign < 0 else "") + text)


def _sliders_of(model: RigidModel, body: str) -> list[Prismatic]:
    return [j for j in model.axial if isinstance(j, Prismatic) and j.b.body == body]


def _carries_only(model: RigidModel, joint: Prismatic) -> bool:
    """The slider's child body is moved by this joint alone (no joint hangs on it, none other places it): its
    inertia along the axis is its mass plus the motor's reflected inertia, exactly."""
    body = joint.b.body
    others = [j for j in model.joints if j is not joint and (j.a.body == body or j.b.body == body)]
    return not others and not any(c.body == body for c in model.contacts)


def parameter_roles(model: RigidModel) -> dict[str, list[str]]:
    """Each parameter's role(s) in the model's equations, read off its parts: name -> phrases."""
    roles: dict[str, list[str]] = {}
    for b in model.bodies:
        sliders = [j for j in _sliders_of(model, b.name) if j.motor is not None and _carries_only(model, j)]
        along = "".join(f"; along slider {j.name} it adds to the motor's reflected inertia: inertia "
                        f"{_expression(b.mass)} + {_expression(j.motor.shaft_inertia)} (only their sum moves it)"
                        for j in sliders if j.motor is not None)
        _add(roles, b.mass, f"mass of body {b.name} [kg]{along}")
        axes: dict[str, list[str]] = {}
        for axis, inertia in zip("xyz", b.inertia):
            if isinstance(inertia, str):
                axes.setdefault(inertia, []).append(axis)
        for expression, which in axes.items():
            _add(roles, expression, f"inertia of body {b.name} about its {', '.join(which)} "
                               f"ax{'is' if len(which) == 1 else 'es'} through the CoM [kg m^2]")
    for j in model.joints:
        for frame, end in ((j.a, "parent"), (j.b, "child")):
            for axis, value in zip("xyz", frame.position):
                _add(roles, value, f"{axis} of joint {j.name}'s frame on its {end} {frame.body} "
                                   f"({'world' if frame.body == WORLD else 'from the CoM, body frame'})")
        kind = "hinge" if isinstance(j, Hinge) else "slider" if isinstance(j, Prismatic) else type(j).__name__.lower()
        if isinstance(j, (Hinge, Prismatic)):
            effort, rate = ("torque", "rad/s") if isinstance(j, Hinge) else ("force", "m/s")
            if j.viscous is not None:
                _add(roles, j.viscous, f"viscous friction of {kind} {j.name}: {effort} -{_expression(j.viscous)} "
                                       f"* {j.name}' against the motion ({j.name}' in {rate})")
            if j.coulomb is not None:
                _add(roles, j.coulomb, f"Coulomb friction of {kind} {j.name}: a {effort} against the motion, "
                                       f"-{_expression(j.coulomb)} sign({j.name}') while it slides, of magnitude at "
                                       f"most {_expression(j.coulomb)} while it sticks (>= 0)")
            if j.dry is not None:
                _add(roles, j.dry, f"dry friction of {kind} {j.name}: its friction bounded by this times the "
                                   "joint's constraint force (load-dependent, Marklund et al. (2025) App. F.4)")
            if j.stribeck is not None:
                _add(roles, j.stribeck[0], f"Stribeck excess of {kind} {j.name}: friction bound raised by this "
                                           f"* exp(-({j.name}'/v_s)^2) at low speed")
                _add(roles, j.stribeck[1], f"Stribeck speed of {kind} {j.name}")
            if j.motor is not None:
                m = j.motor
                _add(roles, m.gain, f"motor gain of {kind} {j.name}: {effort} +{_expression(m.gain)} * {m.control} "
                                    f"along +{j.name} (a positive {m.control} drives {j.name} up)")
                inertia = ("inertia of rotor and screw reflected to the axis [kg]" if isinstance(j, Prismatic)
                           else "motor shaft inertia about the axis [kg m^2]")
                if isinstance(j, Prismatic) and _carries_only(model, j):
                    body = next(b for b in model.bodies if b.name == j.b.body)
                    adds = (f"the inertia along {j.name} is {_expression(body.mass)} + {_expression(m.shaft_inertia)} "
                            "(only the sum moves it)")
                else:
                    adds = f"adds to the inertia the motion along {j.name} moves"
                _add(roles, m.shaft_inertia, f"{inertia} of {kind} {j.name}: {adds}")
            _add(roles, j.friction_compliance, f"creep of {kind} {j.name} while it sticks (friction compliance)")
        for field, what in (("eps_lin", "translational"), ("eps_rot", "rotational"), ("eps", "")):
            if hasattr(j, field):
                _add(roles, getattr(j, field), f"compliance of joint {j.name}'s {what} constraint rows".replace(
                    "'s  ", "'s "))
        _add(roles, getattr(j, "tau", None), f"constraint damping (relaxation time) of joint {j.name}")
    for c in model.contacts:
        _add(roles, c.mu, f"Coulomb friction coefficient of contact {c.name}")
        _add(roles, c.eps, f"compliance of contact {c.name}'s normal row")
        _add(roles, c.tau, f"damping (relaxation time) of contact {c.name}")
        _add(roles, c.radius, f"radius of the sphere of contact {c.name}")
    for f in model.applied:
        for i, value in enumerate(f.force):
            axis = np.eye(3)[i]
            pushes = [f"{j.name} up" for j in _sliders_of(model, f.body)
                      if (a := _axis(j.a)) is not None and np.allclose(a, axis)]
            pushes += [f"{j.name} down" for j in _sliders_of(model, f.body)
                       if (a := _axis(j.a)) is not None and np.allclose(a, -axis)]
            toward = f"; a positive value pushes {', '.join(pushes)}" if pushes else ""
            _add(roles, value, f"constant force on {f.body}'s CoM along world +{'xyz'[i]} [N]{toward}")
    if "g" in model.parameters:
        roles.setdefault("g", []).append("gravitational acceleration: gravity is "
                                         + ("R_tilt (0, 0, -g)" if model.tilt else "(0, 0, -g) [m/s^2]"))
    if model.tilt:
        roles.setdefault(model.tilt, []).append("rotation R_tilt of the stand: gravity is R_tilt (0, 0, -g)")
    return roles


def structural_sums(model: RigidModel) -> list[tuple[str, str, str]]:
    """Pairs of parameters the motion sees only as their sum, read off the parts: (a, b, why).

    A slider on a fixed axis that alone moves its child body, driven by a motor: the body's mass and the
    motor's reflected inertia enter its motion only as ``mass + J_r`` (the linear stage's ``M + J_r``), each a
    single parameter. (The body's mass also weighs on the slider's compliant constraint rows across the axis;
    no reading sees that, so it determines nothing a lab would trust.)"""
    out = []
    for j in model.axial:
        if isinstance(j, Prismatic) and j.motor is not None and _axis(j.a) is not None and _carries_only(model, j):
            body = next(b for b in model.bodies if b.name == j.b.body)
            mass, shaft = body.mass, j.motor.shaft_inertia
            if (isinstance(mass, str) and isinstance(shaft, str) and mass in model.parameters
                    and shaft in model.parameters and mass != shaft):
                out.append((mass, shaft, f"{mass} and {shaft} enter the motion along {j.name} only as {mass} + "
                                         f"{shaft}"))
    return out


def _expression(value: object) -> str:
    return value if isinstance(value, str) else f"{value:g}" if isinstance(value, (int, float)) else str(value)


def equations(model: RigidModel) -> list[str]:
    """Each joint's equation of motion along its coordinate, where the parts give it in closed form: a slider on
    a fixed axis whose child body it alone moves (as the linear stage's carriage). Other joints get a line that
    names the inertia and the efforts acting along them without the coupling terms (a hinged chain's inertia
    about a joint depends on the configuration)."""
    lines = []
    for j in model.axial:
        coordinate, effort = j.name, ("torques" if isinstance(j, Hinge) else "forces")
        forces = []
        if j.motor is not None:
            forces.append(f"+ {_expression(j.motor.gain)} {j.motor.control}")
        if j.viscous is not None:
            forces.append(f"- {_expression(j.viscous)} {coordinate}'")
        if j.coulomb is not None:
            forces.append(f"- {_expression(j.coulomb)} sign({coordinate}')")
        if j.dry is not None:
            forces.append(f"- (friction bounded by {_expression(j.dry)} x the constraint force) sign({coordinate}')")
        axis = _axis(j.a)
        if isinstance(j, Prismatic) and axis is not None and _carries_only(model, j):
            body = next(b for b in model.bodies if b.name == j.b.body)
            inertia = _expression(body.mass) + (f" + {_expression(j.motor.shaft_inertia)}" if j.motor else "")
            for f in model.applied:
                if f.body != body.name:
                    continue
                for i, value in enumerate(f.force):
                    c = float(axis[i])
                    if abs(c) > 1e-12 and value != 0:
                        forces.append(f"{'+' if c > 0 else '-'} {_expression(value)}" if abs(abs(c) - 1) < 1e-12
                                      else f"{c:+.3g} {_expression(value)}")
            if abs(axis[2]) > 1e-12:
                forces.append(f"{'-' if axis[2] > 0 else '+'} {_expression(body.mass)} g"
                              + ("" if abs(abs(axis[2]) - 1) < 1e-12 else f" * {abs(axis[2]):.3g}")
                              + (" (tilted by R_tilt)" if model.tilt else ""))
            stick = (f",  |friction| <= {_expression(j.coulomb)} while it sticks" if j.coulomb is not None else "")
            rhs = " ".join(forces).lstrip("+ ") or "0"
            lines.append(f"{coordinate} (slider along {_direction(axis)}, [m]):  ({inertia}) {coordinate}'' = "
                         f"{rhs}{stick}")
        else:
            kind = "hinge" if isinstance(j, Hinge) else "slider"
            shaft = f" + {_expression(j.motor.shaft_inertia)}" if j.motor is not None else ""
            rhs = " ".join(forces).lstrip("+ ")
            lines.append(f"{coordinate} ({kind}{', axis ' + _direction(axis) if axis is not None else ''}): "
                         f"(inertia the motion moves{shaft}) {coordinate}'' = {rhs + ' ' if rhs else ''}"
                         f"+ gravity and the other joints' coupling {effort}")
    return lines


def roles_text(model: RigidModel) -> str:
    """Lines for ``mbfg models MODEL``: the weight's unit, the equations of motion, each parameter's role."""
    reading, impulse = noise_units(model)
    lines = [f"  state error weight w in {weight_unit(model)}: readings [{reading}] against impulses [{impulse}]"]
    eqs = equations(model)
    if eqs:
        lines.append("  equations of motion (' is d/dt):")
        lines += [f"    {e}" for e in eqs]
    roles = parameter_roles(model)
    lines.append("  roles of the parameters:")
    width = max((len(n) for n in model.parameters), default=0)
    for name in model.parameters:
        text = "; ".join(_distinct(roles.get(name, []))) or "(not used by the model's parts)"
        lines.append(f"    {name:<{width}}  {text}")
    return "\n".join(lines)
