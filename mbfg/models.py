"""Ready-made rigid-body models (Marklund et al. (2025) sections 4.2-4.3, Berard and Trinkle (2008)) and a builder for hinged trees.

World frame: z up, gravity ``R_tilt (0, 0, -g)``. Angles are 0 with the
pendulums hanging straight down. The papers' numerical tables (Marklund et al. (2025)
Tables 1 and 5) are stripped from our copy of the paper, so the default values here
are ours: a small laboratory rig of the same kind (PendCon-like pendulum,
QUBE-like Furuta pendulum), each documented with its unit and bounds. The
parameter *names* follow the papers' roles:

- pendulum (4.2): ``m``, ``J`` (inertia about the hinge-parallel axis through
  the CoM), ``d`` (hinge to CoM), ``b`` (viscous), ``mu_r`` (dry friction mu
  times the internal distance r, [m]), Stribeck ``dmu_r``, ``omega_s``;
- Furuta (4.3): bodies A (arm) and B (pendulum), hinges 1 (stand-arm, motor)
  and 2 (arm-pendulum); offsets ``r_A``, ``L_A``, ``r_B``; inertias ``J_Ax``
  ... ``J_Bz``; gain ``K``, shaft inertia ``J_s``; ``b_1``, ``b_2``,
  ``mu_r1``, ``mu_r2``; the tilt rotation ``tilt``. The 13 free parameters of
  section 4.6 are K, five inertias, four frictional ones, and the 3-dof tilt; free by default are
  the 8 (6 without dry friction) that a motor-driven log determines (:func:`furuta`).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import numpy as np

from mbfg import dfki, model_file, urdf
from mbfg.errors import ModelError
from mbfg.parameters import ROTATION, Parameter, ParameterSet
from mbfg.rigid import (
    WORLD,
    AppliedForce,
    Body,
    Contact,
    Frame,
    Hinge,
    Motor,
    Prismatic,
    RigidModel,
)
from mbfg.rigid import ParamLike as ParamLike  # importable from here as before the builder moved

# The shared builder pieces live in mbfg.trees (model_file and urdf import them from there, which keeps
# this module free to import both loaders at the top); they stay importable from here.
from mbfg.trees import AXIS_FRAMES, INF, SOFT, Link, compliance_parameters, hinged_tree, make_parameter
from mbfg.trees import STIFF as STIFF
from mbfg.trees import param_sum as param_sum

# --------------------------------------------------------------------------- pendulum


def pendulum(friction: str = "viscous") -> RigidModel:
    """The pendulum of Marklund et al. (2025) section 4.2: one body on a frictional hinge offset from its CoM.

    The hinge axis is the world y axis through the origin; ``theta`` is the
    rotation about it (0 hanging down, CoM at (0, 0, -d)).

    Args:
        friction: ``"viscous"`` (b), ``"dry"`` (b and mu_r) or ``"stribeck"``
            (b, mu_r, dmu_r, omega_s; eq. 4.1).
    """
    if friction not in ("viscous", "dry", "stribeck"):
        raise ModelError(f"pendulum friction must be 'viscous', 'dry' or 'stribeck', got {friction!r}")
    params = [
        make_parameter("m", 0.2, "kg", 1e-6, INF, "mass"),
        make_parameter("J", 1.6e-3, "kg m^2", 1e-9, INF, "inertia about the hinge-parallel axis through the CoM", True),
        make_parameter("J_x", 1.6e-3, "kg m^2", 1e-9, INF, "inertia about the body x axis (not excited)"),
        make_parameter("J_z", 1e-5, "kg m^2", 1e-9, INF, "inertia about the body z axis (not excited)"),
        make_parameter("d", 0.12, "m", 0.0, INF, "hinge to CoM distance"),
        make_parameter("b", 2e-3, "N m s/rad", 0.0, INF, "viscous friction", True),
    ]
    dry = stribeck = None
    if friction in ("dry", "stribeck"):
        params.append(make_parameter("mu_r", 2e-4, "m", 0.0, INF, "dry friction mu times internal distance r", True))
        dry = "mu_r"
    if friction == "stribeck":
        params += [
            make_parameter("dmu_r", 2e-4, "m", 0.0, INF, "static minus kinetic dry friction (Stribeck)", True),
            make_parameter("omega_s", 0.5, "rad/s", 1e-6, INF, "Stribeck transition angular velocity", True),
        ]
        stribeck = ("dmu_r", "omega_s")
    params += compliance_parameters(*SOFT)
    hinge = Hinge(
        "theta",
        a=Frame(WORLD, (0.0, 0.0, 0.0), AXIS_FRAMES["y"]),
        b=Frame("pendulum", (0.0, 0.0, "d"), AXIS_FRAMES["y"]),
        eps_lin="eps_lin", eps_rot="eps_rot", tau="tau", viscous="b", dry=dry, stribeck=stribeck,
    )
    name = "pendulum" if friction == "viscous" else f"pendulum-{friction}"
    return RigidModel(
        name,
        [Body("pendulum", "m", ("J_x", "J", "J_z"))],
        [hinge],
        parameters=ParameterSet(params),
        description=f"Marklund et al. (2025) sec. 4.2 pendulum, hinge offset d from the CoM, {friction} friction",
    )


# --------------------------------------------------------------------------- Furuta


def furuta(dry: bool = True) -> RigidModel:
    """The Furuta pendulum of Marklund et al. (2025) section 4.3.

    Hinge ``theta`` (1): world origin, axis world z, motor with gain ``K`` on
    control ``u`` [V] and shaft inertia ``J_s``. Arm A: CoM at ``r_A`` along
    its x axis; hinge ``alpha`` (2) at ``L_A`` along the arm, axis = the arm's
    x axis. Pendulum B: CoM ``r_B`` below hinge 2 at alpha = 0. Principal axes
    of both bodies align with their local frames (eq. 4.2).

    Free by default: what a log of the arm driven by the motor determines, K, J_Az, J_Bx, J_By, b_1, b_2 (and
    mu_r1, mu_r2). Not the arm's J_Ax and J_Ay, which never enter the motion (the arm turns only about its own
    z axis), nor the tilt, whose rotation about the vertical never enters the gravity ``tilt @ (0, 0, -g)``, so
    that a 3-dof tilt always leaves one direction undetermined (free it by name, ``free=[..., "tilt"]``, for a
    stand that is not level: the 13 free parameters of Marklund, Servin, Larson 2025, section 4.6).

    Args:
        dry: include the hinges' dry friction ``mu_r1``, ``mu_r2`` (F.4).
    """
    params = [
        make_parameter("m_A", 0.095, "kg", 1e-6, INF, "arm mass"),
        make_parameter("m_B", 0.024, "kg", 1e-6, INF, "pendulum mass"),
        make_parameter("r_A", 0.04, "m", -INF, INF, "hinge 1 to arm CoM, along the arm"),
        make_parameter("L_A", 0.085, "m", 0.0, INF, "hinge 1 to hinge 2, along the arm"),
        make_parameter("r_B", 0.0645, "m", 0.0, INF, "hinge 2 to pendulum CoM"),
        make_parameter("J_Ax", 1e-6, "kg m^2", 1e-10, INF, "arm inertia about its long axis (does not enter the motion)"),
        make_parameter("J_Ay", 6e-5, "kg m^2", 1e-10, INF,
                       "arm inertia about its horizontal cross axis (does not enter the motion)"),
        make_parameter("J_Az", 6e-5, "kg m^2", 1e-10, INF, "arm inertia about the vertical axis", True),
        make_parameter("J_Bx", 3.3e-5, "kg m^2", 1e-10, INF, "pendulum inertia about the hinge-2 axis", True),
        make_parameter("J_By", 3.3e-5, "kg m^2", 1e-10, INF, "pendulum inertia about its cross axis", True),
        make_parameter("J_Bz", 1e-7, "kg m^2", 1e-10, INF, "pendulum inertia about its long axis"),
        make_parameter("K", 0.04, "N m/V", 0.0, INF, "motor gain: torque per volt", True),
        make_parameter("J_s", 4e-6, "kg m^2", 1e-10, INF, "motor shaft inertia"),
        make_parameter("b_1", 5e-4, "N m s/rad", 0.0, INF, "viscous friction of hinge 1", True),
        make_parameter("b_2", 1e-5, "N m s/rad", 0.0, INF, "viscous friction of hinge 2", True),
        Parameter("tilt", np.eye(3), "", kind=ROTATION,
                  description="rotation of the stand: gravity is tilt @ (0, 0, -g)"),
    ]
    if dry:
        params += [
            make_parameter("mu_r1", 1e-4, "m", 0.0, INF, "dry friction of hinge 1, mu times r", True),
            make_parameter("mu_r2", 2e-5, "m", 0.0, INF, "dry friction of hinge 2, mu times r", True),
        ]
    params += compliance_parameters(*SOFT)
    common: dict[str, Any] = dict(eps_lin="eps_lin", eps_rot="eps_rot", tau="tau")
    hinge1 = Hinge(
        "theta", a=Frame(WORLD), b=Frame("arm", ("-r_A", 0.0, 0.0)), viscous="b_1",
        dry="mu_r1" if dry else None, motor=Motor("u", "K", "J_s"), **common,
    )
    hinge2 = Hinge(
        "alpha", a=Frame("arm", ("L_A - r_A", 0.0, 0.0), AXIS_FRAMES["x"]),
        b=Frame("pendulum", (0.0, 0.0, "r_B"), AXIS_FRAMES["x"]), viscous="b_2",
        dry="mu_r2" if dry else None, **common,
    )
    return RigidModel(
        "furuta" if dry else "furuta-viscous",
        [Body("arm", "m_A", ("J_Ax", "J_Ay", "J_Az")), Body("pendulum", "m_B", ("J_Bx", "J_By", "J_Bz"))],
        [hinge1, hinge2],
        parameters=ParameterSet(params),
        tilt="tilt",
        description="Marklund et al. (2025) sec. 4.3 Furuta pendulum: motor-driven arm, free pendulum, tilt"
        + ("" if dry else ", viscous friction only"),
    )


def double_pendulum(torques: bool = False) -> RigidModel:
    """A double pendulum: two links on hinges about the world y axis (a chain of :func:`hinged_tree`).

    ``q1`` is link 1's angle, ``q2`` link 2's angle relative to link 1 (0 hanging
    down), the DFKI lab's convention (shared/data/dfki_double_pendulum).
    ``m1, m2`` [kg], ``l1`` (joint 1 to joint 2), ``r1, r2`` (joint to CoM) [m],
    ``J1, J2`` inertias about the CoMs' y axes [kg m^2], ``b1, b2`` viscous.

    Args:
        torques: joints driven by controls ``tau1``, ``tau2`` (motors of gain
            ``K_q1 = K_q2 = 1`` N m per unit and small shaft inertias ``J_s_q1``, ``J_s_q2``).
    """
    params = [
        make_parameter("m1", 0.6, "kg", 1e-6, INF, "link 1 mass"),
        make_parameter("m2", 0.6, "kg", 1e-6, INF, "link 2 mass"),
        make_parameter("l1", 0.3, "m", 0.0, INF, "joint 1 to joint 2"),
        make_parameter("r1", 0.3, "m", 0.0, INF, "joint 1 to link 1 CoM"),
        make_parameter("r2", 0.2, "m", 0.0, INF, "joint 2 to link 2 CoM"),
        make_parameter("J1", 1e-3, "kg m^2", 1e-9, INF, "link 1 inertia about its CoM, joint axis", True),
        make_parameter("J2", 1e-3, "kg m^2", 1e-9, INF, "link 2 inertia about its CoM, joint axis", True),
        make_parameter("J_perp", 1e-3, "kg m^2", 1e-9, INF, "link inertias about the other two axes (not excited)"),
        make_parameter("b1", 1e-3, "N m s/rad", 0.0, INF, "viscous friction of joint 1", True),
        make_parameter("b2", 1e-3, "N m s/rad", 0.0, INF, "viscous friction of joint 2", True),
        *compliance_parameters(*SOFT),
    ]
    if torques:
        params += [
            make_parameter("K_q1", 1.0, "N m", 0.0, INF, "torque per unit of control tau1"),
            make_parameter("K_q2", 1.0, "N m", 0.0, INF, "torque per unit of control tau2"),
            make_parameter("J_s_q1", 1e-6, "kg m^2", 1e-12, INF, "rotor inertia at joint 1"),
            make_parameter("J_s_q2", 1e-6, "kg m^2", 1e-12, INF, "rotor inertia at joint 2"),
        ]
    links = [
        Link("link1", "q1", None, "m1", ("J_perp", "J1", "J_perp"), (0.0, 0.0, 0.0), "r1", "y", "b1",
             "tau1" if torques else None),
        Link("link2", "q2", "link1", "m2", ("J_perp", "J2", "J_perp"), (0.0, 0.0, "-l1"), "r2", "y", "b2",
             "tau2" if torques else None),
    ]
    return hinged_tree("double-pendulum" + ("-torque" if torques else ""), links, params,
                       description="two links on hinges about y (chain of hinged bodies)"
                       + (", joint torques as controls" if torques else ""))


def qube_servo() -> RigidModel:
    """The Quanser QUBE-Servo rotary pendulum with the vendor's nominal values: :func:`furuta` (whose masses
    and lengths are the QUBE's: arm 0.095 kg, 0.085 m; pendulum 0.024 kg, 0.129 m), motor gain
    ``K = k_t / R_m = 0.042 / 8.4`` N m/V and back-EMF damping ``b_1 = k_t k_m / R_m`` N m s/rad on the plant
    voltage ``u`` [V]; free: K, J_Bx, b_1, b_2, mu_r1, mu_r2 (the arm's other inertias and the tilt are not
    excited by balancing).

    It calibrates at the generic w = 1e6, unlike :mod:`mbfg.dfki`'s 1e3: on its recordings
    (../shared/data/qube_servo) a smaller w converges in fewer iterations (13 at 1e3 against 29) but lets the
    states follow the readings closer than the encoder can (sigma_y 6e-5 rad against the 2048-count
    quantization's 8.9e-4), while at 1e6 the readings' estimated noise is the quantization's (7.5e-4;
    ``python benchmarks/real_rigs.py --rig qube --weights 1e3,1e6``)."""
    k_t, r_m = 0.042, 8.4
    free = ("K", "J_Bx", "b_1", "b_2", "mu_r1", "mu_r2")
    base = furuta(True)
    changes: dict[str, Any] = {name: {"free": name in free} for name in base.parameters.free}
    changes |= {"K": {"value": k_t / r_m, "free": True}, "b_1": {"value": k_t * k_t / r_m, "free": True}}
    model = base.with_parameters(changes)
    return RigidModel("qube-servo", model.bodies, model.joints, parameters=model.parameters, tilt=model.tilt,
                      description="Quanser QUBE-Servo rotary pendulum, the vendor's nominal values (furuta's "
                      "geometry, motor on the plant voltage)")


# --------------------------------------------------------------------------- particle


def particle() -> RigidModel:
    """Berard and Trinkle's (2008) "2D particle falling and sliding", in the x-z plane.

    m = 1 kg, mu = 0.2, released from rest at (x, z) = (0, 3) m under gravity
    with a constant push ``F_x`` = 5 N along x; the ground is the plane z = 0
    with Coulomb friction (contact normal row plus a four-sided friction pyramid).
    Berard and Trinkle (2008) steps it with h = 0.05 s.
    """
    params = ParameterSet([
        make_parameter("m", 1.0, "kg", 1e-6, INF, "mass"),
        make_parameter("mu", 0.2, "", 0.0, 1.0, "Coulomb friction coefficient", True),
        make_parameter("F_x", 5.0, "N", -INF, INF, "constant applied force along x"),
        make_parameter("eps", 1e-4, "m/N", 1e-14, INF, "contact compliance (soft: 1 mm under m g; estimation needs it)"),
        make_parameter("tau", 0.1, "s", 0.0, INF, "contact damping (relaxation time)"),
        make_parameter("g", 9.81, "m/s^2", 0.0, INF, "gravitational acceleration"),
    ])
    return RigidModel(
        "particle",
        [Body("particle", "m", (1e-3, 1e-3, 1e-3), position=(0.0, 0.0, 3.0))],
        contacts=[Contact("ground", "particle", mu="mu", eps="eps", tau="tau")],
        applied=[AppliedForce("particle", ("F_x", 0.0, 0.0))],
        parameters=params,
        observations=["particle.x", "particle.z"],
        description="Berard and Trinkle (2008): particle falling onto the ground and sliding with Coulomb friction",
    )


def particles(n: int, seed: int = 0) -> RigidModel:
    """Berard and Trinkle's (2008) "multiple particles": n particles (m = 1 kg, push ``F_x`` = 5 N along x), released from rest
    at random x0 in [-10, 10] m, z0 in [0, 5] m, each on the ground z = 0 with its own friction coefficient
    ``mu_i``, random in (0, 0.5] (the paper's ranges), drawn from ``numpy.random.default_rng(seed)``.
    Observations: ``p<i>.x``, ``p<i>.z`` [m] for each particle.
    """
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ModelError(f"n: expected a whole number of particles >= 1, got {n!r}")
    rng = np.random.default_rng(seed)
    params = [make_parameter("m", 1.0, "kg", 1e-6, INF, "mass of each particle"),
              make_parameter("F_x", 5.0, "N", -INF, INF, "constant applied force along x"),
              make_parameter("eps", 1e-4, "m/N", 1e-14, INF, "contact compliance"),
              make_parameter("tau", 0.1, "s", 0.0, INF, "contact damping (relaxation time)"),
              make_parameter("g", 9.81, "m/s^2", 0.0, INF, "gravitational acceleration")]
    bodies, contacts, applied = [], [], []
    for i in range(n):
        name = f"p{i}"
        params.append(make_parameter(f"mu_{i}", float(rng.uniform(1e-3, 0.5)), "", 0.0, 1.0,
                         f"Coulomb friction coefficient of particle {i}", True))
        bodies.append(Body(name, "m", (1e-3, 1e-3, 1e-3), position=(rng.uniform(-10, 10), 0.0, rng.uniform(0, 5))))
        contacts.append(Contact(f"ground{i}", name, mu=f"mu_{i}", eps="eps", tau="tau"))
        applied.append(AppliedForce(name, ("F_x", 0.0, 0.0)))
    return RigidModel(f"particles-{n}", bodies, contacts=contacts, parameters=ParameterSet(params), applied=applied,
                      observations=[f"p{i}.{ax}" for i in range(n) for ax in "xz"],
                      description="Berard and Trinkle (2008): several particles, each on the ground with its own friction coefficient")


# --------------------------------------------------------------------------- linear stage


def linear_stage() -> RigidModel:
    """A single-axis positioning stage: a carriage on a ball screw driven by a motor.

    The carriage (mass ``M``) slides along the world x axis on a :class:`~mbfg.rigid.Prismatic`
    joint ``x`` (its displacement [m] is the observation, as a linear encoder reads it). The
    motor pushes with ``K_F * current`` through the rotor and screw inertia reflected to the
    axis, ``J_r = J_rotor (2 pi / lead)^2`` [kg] (a motor of 1.2e-5 kg m^2 on a 20 mm lead: 1.18 kg).
    Friction is viscous ``F_v`` plus a load-independent Coulomb force ``F_c``, and ``F_0`` is a
    constant force offset (cable drag, a slight incline). Along the axis:

        (M + J_r) x'' = K_F current - F_v x' - F_c sign(x') + F_0,  |friction| <= F_c while stuck.

    Free by default: M, F_v, F_c, F_0. K_F and J_r are the datasheet's: with K_F free the
    motion only fixes the ratios (M, F_v, F_c, F_0) / K_F, and M and J_r only their sum.
    """
    params = ParameterSet([
        make_parameter("M", 5.0, "kg", 1e-6, INF, "carriage mass", True),
        make_parameter("F_v", 20.0, "N s/m", 0.0, INF, "viscous friction", True),
        make_parameter("F_c", 8.0, "N", 0.0, INF, "Coulomb (dry) friction force", True),
        make_parameter("F_0", 0.0, "N", -INF, INF, "constant force offset along the axis", True),
        make_parameter("K_F", 150.0, "N/A", 0.0, INF, "motor force constant (motor torque constant x 2 pi / lead)"),
        make_parameter("J_r", 1.18, "kg", 1e-9, INF, "rotor and screw inertia reflected to the axis"),
        make_parameter("J_c", 0.01, "kg m^2", 1e-9, INF, "carriage inertia about its CoM (each axis; not excited)"),
        *compliance_parameters(*SOFT),
    ])
    slide = Prismatic("x", Frame(WORLD, (0.0, 0.0, 0.0), AXIS_FRAMES["x"]), Frame("carriage", (0.0, 0.0, 0.0),
                      AXIS_FRAMES["x"]), eps_lin="eps_lin", eps_rot="eps_rot", tau="tau", viscous="F_v",
                      coulomb="F_c", motor=Motor("current", "K_F", "J_r"))
    return RigidModel(
        "linear-stage",
        [Body("carriage", "M", ("J_c", "J_c", "J_c"))],
        [slide],
        applied=[AppliedForce("carriage", ("F_0", 0.0, 0.0))],
        parameters=params,
        description="carriage on a ball screw (prismatic joint x): motor force K_F current, viscous and "
        "Coulomb friction, offset",
    )


#: Built-in models by name (``mbfg models`` lists them).
BUILTIN: dict[str, Callable[[], RigidModel]] = {
    "pendulum": lambda: pendulum("viscous"),
    "pendulum-dry": lambda: pendulum("dry"),
    "pendulum-stribeck": lambda: pendulum("stribeck"),
    "double-pendulum": lambda: double_pendulum(False),
    "double-pendulum-torque": lambda: double_pendulum(True),
    "furuta": lambda: furuta(True),
    "furuta-viscous": lambda: furuta(False),
    "qube-servo": qube_servo,
    "particle": particle,
    "linear-stage": linear_stage,
    "dfki-double-pendulum": lambda: dfki.dfki_double_pendulum(),
}


def load_model(name: str | os.PathLike[str]) -> RigidModel:
    """A built-in model by name, or a model file by path (str or :class:`pathlib.Path`): YAML (see
    :mod:`mbfg.model_file`) or URDF (``.urdf``, see :mod:`mbfg.urdf`)."""
    if isinstance(name, os.PathLike):
        name = os.fspath(name)
    if not isinstance(name, str):
        raise ModelError(f"name: expected a built-in model name or the path of a model file, got "
                         f"{type(name).__name__} {name!r:.60}")
    if name in BUILTIN:
        return BUILTIN[name]()
    if name.lower().endswith(".urdf"):
        return urdf.load_urdf(name)
    if os.path.exists(name) or name.endswith((".yaml", ".yml")):
        return model_file.load_model_file(name)
    raise ModelError(f"unknown model {name!r}; built-in models: {', '.join(BUILTIN)} (or a path to a model file)")
