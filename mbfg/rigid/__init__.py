"""3D rigid bodies in maximal coordinates and their joints (Marklund et al. (2025) section 2; Marklund et al. (2025) App. F).

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
  (F.4) with optional Stribeck curve (Marklund et al. (2025) eq. 4.1).
- :class:`Prismatic` (slider): b's origin stays on a's z axis (2 rows) and b's orientation
  stays a's (3 rows); the coordinate is the displacement along a's z. The hinge's options
  carried over to the axis: viscous drag, a motor with reflected inertia, dry friction.
- Either of them may have a load-independent Coulomb force or torque (``coulomb``): a friction
  group of (2.24) without normal rows whose bound row carries ``b = h F_c``.
- :class:`Ball` (3 rows), :class:`Lock` (6 rows).
- :class:`Contact`: a point on a body above a plane, ``c(q) >= 0`` with Coulomb
  friction (2.21, 2.24); no impulse while the gap stays open over the step (Berard and Trinkle's (2008)
  discrete contact rule, :func:`contact_normal_b`).

The parts are defined in :mod:`mbfg.parts`. Everything numeric in a model may be a number or
the name of a parameter of its :class:`~mbfg.parameters.ParameterSet` (``"-name"`` negates), so
models are differentiable in their parameters. :class:`RigidModel` evaluates the rows
of the Spook system (2.18 and 2.24) for the stepper in :mod:`mbfg.spook`.

The package keeps one concept per module: :mod:`~mbfg.rigid.model` (:class:`RigidModel`),
:mod:`~mbfg.rigid.state` (:class:`State`, placing bodies from joint coordinates),
:mod:`~mbfg.rigid.layout` (:class:`Rows` and which rows each part owns), :mod:`~mbfg.rigid.kinematics`
(position functions, :func:`hinge_angle`), :mod:`~mbfg.rigid.joint_types` (one class per joint type: its rows,
coordinate and compliances), :mod:`~mbfg.rigid.arrays` (the model compiled into index arrays, so that all
joints of a type are one vectorized expression), :mod:`~mbfg.rigid.rows` (the Spook rows of a step),
:mod:`~mbfg.rigid.friction` (friction and contact rows) and :mod:`~mbfg.rigid.validate` (the model's
checks). Every name that ``mbfg.rigid`` had as one module is importable from here.
"""

# The names below were module-level names of mbfg.rigid when it was one module (rigid.py); importers keep
# ``from mbfg.rigid import ...`` unchanged. ``X as X`` marks a re-export of a name outside __all__.
from mbfg.errors import ModelError as ModelError
from mbfg.parameters import ROTATION as ROTATION
from mbfg.parameters import Parameter as Parameter
from mbfg.parameters import ParameterSet as ParameterSet
from mbfg.parts import (
    ROTATIONAL_FRICTION_DISTANCE as ROTATIONAL_FRICTION_DISTANCE,
)
from mbfg.parts import (
    SIGMA_REGULARIZATION as SIGMA_REGULARIZATION,
)
from mbfg.parts import (
    WORLD,
    AppliedForce,
    Ball,
    Body,
    Contact,
    Frame,
    Hinge,
    Lock,
    Motor,
    Prismatic,
    resolve,
)
from mbfg.parts import Axial as Axial
from mbfg.parts import Joint as Joint
from mbfg.parts import ParamLike as ParamLike
from mbfg.parts import param_names as param_names
from mbfg.parts import resolve3 as resolve3
from mbfg.rigid.friction import contact_normal_b as contact_normal_b
from mbfg.rigid.friction import friction_data as friction_data
from mbfg.rigid.friction import friction_rows as friction_rows
from mbfg.rigid.kinematics import hinge_angle
from mbfg.rigid.layout import Rows
from mbfg.rigid.model import RigidModel, parameter
from mbfg.rigid.state import State, poses_from_coordinates

__all__ = [
    "AppliedForce", "Ball", "Body", "Contact", "Frame", "Hinge", "Lock", "Motor", "Prismatic", "RigidModel", "Rows",
    "State",
    "hinge_angle", "parameter", "poses_from_coordinates", "resolve", "WORLD",
]
