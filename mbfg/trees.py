"""The pieces every model builder shares: hinge axis frames, the default joint compliance
parameters, and :func:`hinged_tree`, the builder of chains and trees of hinged links.

The built-in models (:mod:`mbfg.models`), model files (:mod:`mbfg.model_file`), URDF import
(:mod:`mbfg.urdf`) and the DFKI model (:mod:`mbfg.dfki`) build on it; it imports none of them, so
:mod:`mbfg.models` can import the file loaders at the top (no import circle).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from mbfg.errors import ModelError
from mbfg.parameters import Parameter, ParameterSet
from mbfg.rigid import WORLD, Body, Frame, Hinge, Motor, ParamLike, RigidModel
from mbfg.rigid.model import DEFAULT_WEIGHT

# R_body_frame that turns a frame's z axis onto the body's x, y or z axis.
AXIS_FRAMES: dict[str, np.ndarray] = {
    "x": np.array([[0.0, 0.0, 1.0], [0.0, 1.0, 0.0], [-1.0, 0.0, 0.0]]),  # Ry(+90 deg)
    "y": np.array([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0], [0.0, -1.0, 0.0]]),  # Rx(-90 deg)
    "z": np.eye(3),
}

INF = np.inf

#: Default hinge compliance (eps_lin [m/N], eps_rot [rad/(N m)]) and damping tau [s]. Soft on
#: purpose: estimation breaks down for stiff constraints (Marklund et al. (2025) sections 4.9, 5); pass
#: STIFF values with ``model.with_parameters`` for simulations that should approach rigid joints.
SOFT = (1e-5, 1e-3, 2e-3)
#: Joint compliance rigid at the time-step's scale (eps_lin [m/N], eps_rot [rad/(N m)], tau [s]): a joint row is a
#: spring of period 2 pi sqrt(eps m), under 1 ms for a 10 kg link or a 1 kg m^2 one, so a simulation converges at
#: first order in h to the rigid-body motion (``tests/test_rigid_compliance.py``); at :data:`SOFT` the joints'
#: give leaves a plateau (0.01 rad on a 3-link arm over 1 s). Not yet the default: the stream's chain smoother
#: loses its accuracy at it (the readings' rows 1e10 lighter than the joints'), and calibration needs a ladder of
#: softer solves to reach it.
RIGID = (1e-10, 1e-8, 2e-3)
#: Stiff hinge compliance for rigid-like simulation: ``model.with_parameters(STIFF)``.
STIFF = {"eps_lin": 1e-8, "eps_rot": 1e-6}


def make_parameter(name: str, value: float, unit: str, lower: float = -INF, upper: float = INF,
                   description: str = "", free: bool = False) -> Parameter:
    return Parameter(name, value, unit, lower, upper, free, description=description)


def compliance_parameters(eps_lin: float, eps_rot: float, tau: float) -> list[Parameter]:
    return [
        make_parameter("eps_lin", eps_lin, "m/N", 1e-14, INF, "compliance of the joints' translational rows"),
        make_parameter("eps_rot", eps_rot, "rad/(N m)", 1e-14, INF, "compliance of the joints' rotational rows"),
        make_parameter("tau", tau, "s", 0.0, INF, "constraint damping (relaxation time)"),
        make_parameter("g", 9.81, "m/s^2", 0.0, INF, "gravitational acceleration"),
    ]


@dataclass(frozen=True)
class Link:
    """One link of a hinged chain or tree (see :func:`hinged_tree`).

    Args:
        name: body name.
        joint: name of the hinge that attaches it to its parent (its angle is an observation).
        parent: parent link name, or None for the world.
        mass: [kg]; inertia: principal (Jx, Jy, Jz) about the CoM [kg m^2].
        offset: the joint's position relative to the parent's joint (or the world
            origin) at zero angles, world axes [m].
        com: distance from the joint down to the CoM at zero angles [m].
        axis: hinge axis at zero angles, ``"x"``, ``"y"`` or ``"z"``.
        viscous: drag [N m s/rad], or None.
        motor: control name for a joint motor, or None (gain ``K_<joint>``, shaft inertia ``J_s_<joint>``).
    """

    name: str
    joint: str
    parent: str | None
    mass: ParamLike
    inertia: tuple[ParamLike, ParamLike, ParamLike]
    offset: tuple[ParamLike, ParamLike, ParamLike]
    com: ParamLike
    axis: str = "y"
    viscous: ParamLike | None = None
    motor: str | None = None


def param_sum(a: ParamLike, b: ParamLike) -> ParamLike:
    """``a + b`` as a number when both are numbers, else as an expression."""
    if isinstance(a, str) or isinstance(b, str):
        return f"{a} + {b}"
    return float(a) + float(b)


def hinged_tree(name: str, links: Sequence[Link], parameters: Sequence[Parameter], *,
                eps_lin: ParamLike = "eps_lin", eps_rot: ParamLike = "eps_rot", tau: ParamLike = "tau",
                description: str = "", weight: float = DEFAULT_WEIGHT) -> RigidModel:
    """A chain or tree of bodies connected by hinges, hanging along -z at zero angles.

    Each link's body frame sits at its CoM, ``com`` below its joint, axes
    parallel to the world's at zero angles. ``parameters`` must define every
    name the links use, plus ``g`` and the compliance names. ``weight``: the model's state error
    weight w (:class:`~mbfg.rigid.RigidModel`).
    """
    by_name = {link.name: link for link in links}
    joints = []
    for link in links:
        if link.axis not in AXIS_FRAMES:
            raise ModelError(f"{name}: link {link.name!r} axis must be 'x', 'y' or 'z', got {link.axis!r}")
        R = AXIS_FRAMES[link.axis]
        if link.parent is None:
            a = Frame(WORLD, link.offset, R)
        elif link.parent in by_name:
            # The joint relative to the parent's CoM, which is com_parent below the parent's joint.
            ox, oy, oz = link.offset
            a = Frame(link.parent, (ox, oy, param_sum(oz, by_name[link.parent].com)), R)
        else:
            raise ModelError(f"{name}: link {link.name!r} names unknown parent {link.parent!r}")
        motor = Motor(link.motor, f"K_{link.joint}", f"J_s_{link.joint}") if link.motor else None
        joints.append(Hinge(link.joint, a, Frame(link.name, (0.0, 0.0, link.com), R), eps_lin=eps_lin,
                            eps_rot=eps_rot, tau=tau, viscous=link.viscous, motor=motor))
    bodies = [Body(link.name, link.mass, link.inertia) for link in links]
    return RigidModel(name, bodies, joints, parameters=ParameterSet(parameters), description=description,
                      weight=weight)
