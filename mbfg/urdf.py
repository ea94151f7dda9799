"""URDF robots as :class:`~mbfg.rigid.RigidModel`: a robot description as robotics engineers have it.

The file is parsed by ``yourdfpy`` (meshes and scene graphs are not loaded: only the kinematic tree
and the inertials matter here), the optional dependency of the ``urdf`` extra
(``pip install 'mbfg[urdf]'``). The mapping:

- the root link (no joint's child) is the world: a fixed base, z up, gravity ``(0, 0, -g)``; links
  welded to it by ``fixed`` joints are world too. ``floating`` and ``planar`` joints are refused.
- ``fixed`` joints merge the child into its parent: one body with the combined mass, CoM and
  inertia about that CoM (parallel-axis theorem, every tensor rotated into the moving link's frame).
- each moving link (with the links fixed to it) becomes one :class:`~mbfg.rigid.Body` whose frame
  is at the combined CoM along the principal axes of inertia (the link's own axes when the tensor
  is diagonal in them, so nothing is permuted).
- ``revolute`` and ``continuous`` joints become :class:`~mbfg.rigid.Hinge`, ``prismatic`` ones
  :class:`~mbfg.rigid.Prismatic`, both about (along) the joint's ``<axis>``; at zero joint
  coordinate the child link frame is the joint frame, as in URDF. ``<dynamics damping>`` is the
  viscous drag ``b_<joint>``, ``<dynamics friction>`` a load-independent dry friction ``fc_<joint>``.
  Joints, bodies and observations are in tree order, parents first (the file's order where it is one).
- ``mimic`` is not modelled: such a joint moves independently (a warning, and a note in the description).
- ``<limit>`` values are noted in the model's description and by :func:`joint_limits`, not enforced.

Parameters (all fixed; free them with ``--free`` or :meth:`ParameterSet.with_free`): per body
``m_<link>`` [kg] and the principal inertias ``J1_<link>``, ``J2_<link>``, ``J3_<link>`` [kg m^2];
per moving joint ``b_<joint>`` and, where the URDF gives friction, ``fc_<joint>``; per motor
``K_<joint>`` and ``J_s_<joint>``; and the compliance ``eps_lin``, ``eps_rot``, ``tau`` and gravity
``g`` of the built-in models (:data:`mbfg.models.SOFT`). Names outside ``[A-Za-z0-9_]`` become ``_``
in parameter names; joint and body names stay the URDF's.
"""

from __future__ import annotations

import io
import os
import re
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from mbfg.errors import ModelError
from mbfg.optional import require
from mbfg.parameters import Parameter, ParameterSet
from mbfg.rigid import WORLD, Body, Frame, Hinge, Motor, Prismatic, RigidModel
from mbfg.trees import INF, SOFT, compliance_parameters

#: URDF joint types with one coordinate, and the part each becomes.
MOVING: dict[str, type[Hinge] | type[Prismatic]] = {"revolute": Hinge, "continuous": Hinge, "prismatic": Prismatic}
_KNOWN = (*MOVING, "fixed")
#: Relative tolerance of an inertia tensor's checks (positive definite, triangle inequality): URDF
#: files print their numbers with a few digits, and an exact thin rod has J1 + J2 = J3.
_INERTIA_TOL = 1e-6
_OFF_DIAGONAL_TOL = 1e-12


def load_urdf(path: str | os.PathLike[str], *, motors: Sequence[str] = (), name: str | None = None) -> RigidModel:
    """A fixed-base robot from a URDF file (see the module docstring for the mapping).

    Args:
        path: the .urdf file.
        motors: joints that get a :class:`~mbfg.rigid.Motor` driven by the control ``u_<joint>``
            (gain ``K_<joint>`` [N m or N per unit of u], shaft inertia ``J_s_<joint>`` [kg m^2 or kg]).
        name: model name (default: the URDF robot's name).

    Raises:
        ModelError: an unreadable or malformed file, or a robot outside what the mapping covers; the
            message starts with the path and names the link or joint.
    """
    where = os.fspath(path)
    return _model(parse_urdf(read_urdf_bytes(where), where), where, motors, name)


def urdf_from_string(text: str, *, motors: Sequence[str] = (), name: str | None = None,
                     source: str = "<string>") -> RigidModel:
    """:func:`load_urdf` of URDF text; ``source`` stands for the path in messages and the description."""
    return _model(parse_urdf(text.encode("utf-8"), source), source, motors, name)


def joint_limits(path: str | os.PathLike[str]) -> dict[str, dict[str, float]]:
    """The ``<limit>`` of every moving joint that has one: joint name -> the given ones of ``effort``
    [N m or N], ``velocity`` [rad/s or m/s], ``lower``, ``upper`` [rad or m]. mbfg does not enforce them."""
    where = os.fspath(path)
    robot = parse_urdf(read_urdf_bytes(where), where).robot
    return {j.name: urdf_limits(j) for j in robot.joints if j.type in MOVING and urdf_limits(j)}


# --------------------------------------------------------------------------- reading


def read_urdf_bytes(path: str) -> bytes:
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except OSError as exc:
        raise ModelError(f"{path}: cannot read URDF file ({exc.strerror})") from None


def parse_urdf(data: bytes, where: str) -> Any:
    """The yourdfpy URDF of ``data``; ModelError for XML that is not well formed or not a URDF."""
    # lxml comes with yourdfpy (the urdf extra): both are loaded here, where a URDF is first read.
    etree = require("lxml.etree", f"{where}: reading a URDF")

    # yourdfpy recovers from broken XML (and logs it); a strict parse first reports the parser's
    # message and line instead of loading half a robot.
    try:
        root = etree.fromstring(data, etree.XMLParser(resolve_entities=False, no_network=True))
    except etree.XMLSyntaxError as exc:
        raise ModelError(f"{where}: not well-formed XML: {exc}") from None
    if root.tag != "robot":
        raise ModelError(f"{where}: expected a URDF <robot> element, got <{root.tag}> (line {root.sourceline})")
    _refuse_macros(root, where)
    # yourdfpy reads a missing ixx, iyy or izz as 1 kg m^2 and a missing product as 0.
    for link in root.findall("link"):
        inertia = link.find("inertial/inertia")
        if inertia is not None:
            missing = [k for k in ("ixx", "ixy", "ixz", "iyy", "iyz", "izz") if k not in inertia.attrib]
            if missing:
                raise ModelError(f"{where}: link {link.get('name')!r}: <inertia> lacks {', '.join(missing)} "
                                 f"(line {inertia.sourceline})")
    yourdfpy = require("yourdfpy", f"{where}: reading a URDF")
    try:
        return yourdfpy.URDF.load(io.BytesIO(data), build_scene_graph=False, load_meshes=False,
                                  build_collision_scene_graph=False, load_collision_meshes=False)
    except Exception as exc:  # yourdfpy raises KeyError, ValueError, AttributeError ... on bad attributes
        raise ModelError(f"{where}: not a valid URDF ({type(exc).__name__}: {exc})") from None


def _refuse_macros(root: Any, where: str) -> None:
    """ModelError for a file that needs a preprocessor: xacro macros, properties or includes, or XInclude.
    yourdfpy ignores them silently, and the robot read would miss whatever they add."""
    for element in root.iter():
        tag = element.tag if isinstance(element.tag, str) else ""
        namespace = tag[1:].partition("}")[0] if tag.startswith("{") else ""
        local = tag.rpartition("}")[2]
        if "xacro" in namespace or "XInclude" in namespace or local == "include":
            shown = f"{element.prefix}:{local}" if element.prefix else local
            raise ModelError(f"{where}: line {element.sourceline}: <{shown}> needs a preprocessor (xacro or XInclude); "
                             f"mbfg reads plain URDF. Expand it first, e.g. 'xacro {os.path.basename(where)} > "
                             f"robot.urdf', and give mbfg the result")


def urdf_limits(joint: Any) -> dict[str, float]:
    if joint.limit is None:
        return {}
    return {k: float(v) for k in ("effort", "velocity", "lower", "upper")
            if (v := getattr(joint.limit, k)) is not None}


# --------------------------------------------------------------------------- tree


def joint_tree(robot: Any, where: str) -> tuple[str, list[Any]]:
    """The root link and the joints parents-first (document order where the tree allows it)."""
    links = [link.name for link in robot.links]
    _unique("link", links, where)
    known = set(links)
    _unique("joint", [j.name for j in robot.joints], where)
    parent_joint: dict[str, Any] = {}
    for j in robot.joints:
        if j.type in ("floating", "planar"):
            raise ModelError(f"{where}: joint {j.name!r} is {j.type}: floating bases are not supported; fix the base "
                             f"with a fixed joint (or to the root link) and model the motion with revolute and "
                             f"prismatic joints")
        if j.type not in _KNOWN:
            raise ModelError(f"{where}: joint {j.name!r} has unknown type {j.type!r}; expected one of "
                             f"{', '.join(_KNOWN)}")
        for role, link in (("parent", j.parent), ("child", j.child)):
            if link not in known:
                raise ModelError(f"{where}: joint {j.name!r} names unknown {role} link {link!r}")
        if j.child in parent_joint:
            raise ModelError(f"{where}: link {j.child!r} is the child of joints {parent_joint[j.child].name!r} and "
                             f"{j.name!r}: a loop (closed chains are not supported; mbfg reads a tree)")
        parent_joint[j.child] = j
    roots = [link for link in links if link not in parent_joint]
    if len(roots) != 1:
        if not roots:
            raise ModelError(f"{where}: no root link (every link is some joint's child): a loop: "
                             f"{_cycle(links[0], parent_joint)}")
        raise ModelError(f"{where}: {len(roots)} root links ({', '.join(roots)}); expected one (the fixed base): "
                         f"connect the others to it with joints")
    # Parents first, by generation (the file's order within one): a breadth-first walk from the root,
    # linear in the number of joints (a pass over all pending joints per generation was quadratic in a chain).
    children: dict[str, list[int]] = {}
    for i, j in enumerate(robot.joints):
        children.setdefault(j.parent, []).append(i)
    depth: dict[int, int] = {}
    frontier, level = [roots[0]], 0
    while frontier:
        nxt = []
        for link in frontier:
            for i in children.get(link, ()):
                depth[i] = level
                nxt.append(robot.joints[i].child)
        frontier, level = nxt, level + 1
    if len(depth) < len(robot.joints):
        stray = next(j for i, j in enumerate(robot.joints) if i not in depth)
        raise ModelError(f"{where}: a loop: {_cycle(stray.child, parent_joint)} (not reachable from the "
                         f"root link {roots[0]!r})")
    order = [robot.joints[i] for i in sorted(depth, key=lambda i: (depth[i], i))]
    return roots[0], order


def _unique(kind: str, names: list[str], where: str) -> None:
    seen: set[str] = set()
    for n in names:
        if n in seen:
            raise ModelError(f"{where}: {kind} name {n!r} is used twice")
        seen.add(n)


def _cycle(link: str, parent_joint: dict[str, Any]) -> str:
    """``a -> b -> a``: the links of the cycle that the parents of ``link`` run into."""
    path = [link]
    while (nxt := parent_joint[path[-1]].parent) not in path:
        path.append(nxt)
    cycle = path[path.index(nxt):]
    return " -> ".join([*reversed(cycle), cycle[-1]])


def origin_transform(T: np.ndarray | None, what: str = "", where: str = "") -> np.ndarray:
    """The 4x4 transform of an ``<origin>`` (identity for none); ModelError ``where: what ...`` when it is not
    finite (an xyz of 1e309 is inf) or its offset is beyond :data:`mbfg.limits.MAX_COORDINATE` [m]."""
    from mbfg.limits import MAX_COORDINATE

    if T is None:
        return np.eye(4)
    M = np.asarray(T, dtype=float)
    if what and not (np.all(np.isfinite(M)) and np.all(np.abs(M[:3, 3]) <= MAX_COORDINATE)):
        raise ModelError(f"{where}: {what} <origin> is not finite or beyond +-{MAX_COORDINATE:g} m "
                         f"(xyz {' '.join(f'{v:g}' for v in M[:3, 3])}); expected finite xyz [m] and rpy [rad]")
    return M


def axis_rotation(axis: Sequence[float] | np.ndarray) -> np.ndarray:
    """R (3, 3): the smallest rotation that turns z onto the unit ``axis``; its z column is the axis.

    The world axes x, y, z give :data:`mbfg.models.AXIS_FRAMES` exactly (so a URDF model of a built-in
    model has bit-identical frames).
    """
    a = np.asarray(axis, dtype=float)
    a = a / np.linalg.norm(a)
    c = a[2]
    if c < -1.0 + 1e-12:
        return np.diag([1.0, -1.0, -1.0])
    K = np.array([[0.0, 0.0, a[0]], [0.0, 0.0, a[1]], [-a[0], -a[1], 0.0]])  # skew(z x a)
    return np.eye(3) + K + K @ K / (1.0 + c)


# --------------------------------------------------------------------------- mass properties


@dataclass(frozen=True)
class _MassProperties:
    """A body: mass [kg], CoM c (3,) in the moving link's frame [m], R_link_body (3, 3) (principal
    axes as columns), principal inertias J (3,) [kg m^2], and the names of the links merged into it."""

    mass: float
    c: np.ndarray
    R: np.ndarray
    J: np.ndarray
    links: tuple[str, ...]

    def point(self, p: np.ndarray) -> tuple[float, float, float]:
        """A point given in the moving link's frame, in the body frame (relative to the CoM)."""
        x = self.R.T @ (p - self.c)
        return (float(x[0]), float(x[1]), float(x[2]))


def _check_tensor(I: np.ndarray, where: str, strict: bool) -> np.ndarray:
    """Principal moments (ascending) of an inertia tensor; ModelError ``where ...`` when it is not positive
    definite (``strict``; else semi-definite) or violates the triangle inequality."""
    J = np.linalg.eigvalsh(I)
    scale = max(float(J[-1]), 0.0)
    if (J[0] <= 0.0 if strict else J[0] < -_INERTIA_TOL * scale):
        raise ModelError(f"{where} inertia tensor is not positive {'definite' if strict else 'semi-definite'} "
                         f"(principal moments {', '.join(f'{v:.6g}' for v in J)} kg m^2)")
    if J[0] + J[1] < J[2] - _INERTIA_TOL * scale:
        raise ModelError(f"{where} inertia violates the triangle inequality: principal moments "
                         f"{J[0]:.6g} + {J[1]:.6g} < {J[2]:.6g} kg m^2 (no rigid body has them)")
    return J


def _links_by_name(robot: Any) -> dict[str, Any]:
    """The robot's links by name, built once per robot (per body it made model loading quadratic)."""
    cached = getattr(robot, "_mbfg_links_by_name", None)
    if cached is None:
        cached = {link.name: link for link in robot.links}
        robot._mbfg_links_by_name = cached
    return cached


def _mass_properties(head: str, links: list[str], T: dict[str, np.ndarray], robot: Any,
                     where: str) -> _MassProperties:
    """Combined mass, CoM and principal inertia of ``links`` (``head`` first; ``T`` their frames in head's)."""
    by_name = _links_by_name(robot)
    parts = []  # (mass, CoM in the head frame, inertia about that CoM in head axes)
    for name in links:
        inertial = by_name[name].inertial
        if inertial is None:
            continue
        if inertial.mass is None or inertial.inertia is None:
            raise ModelError(f"{where}: link {name!r}: <inertial> lacks <{'mass' if inertial.mass is None else 'inertia'}>")
        m = float(inertial.mass)
        if not (np.isfinite(m) and m >= 0.0):
            raise ModelError(f"{where}: link {name!r}: mass must be a finite number > 0 kg, got {m:g}")
        T_hi = T[name] @ origin_transform(inertial.origin, f"link {name!r} <inertial>", where)
        inertia = np.asarray(inertial.inertia, dtype=float)
        if not np.all(np.isfinite(inertia)):
            raise ModelError(f"{where}: link {name!r}: <inertia> has a value that is not finite; expected kg m^2")
        I = T_hi[:3, :3] @ inertia @ T_hi[:3, :3].T
        _check_tensor(I, f"{where}: link {name!r}:", strict=False)
        parts.append((m, T_hi[:3, 3], I))
    merged = f" (nor do the links fixed to it: {', '.join(links[1:])})" if len(links) > 1 else ""
    if not parts:
        raise ModelError(f"{where}: link {head!r} moves but has no <inertial>{merged}; give its mass and inertia")
    mass = sum(m for m, _, _ in parts)
    if not mass > 0.0:
        with_fixed = f" (with the links fixed to it: {', '.join(links[1:])})" if merged else ""
        raise ModelError(f"{where}: link {head!r}: mass must be > 0 kg, got {mass:g}{with_fixed}")
    c = sum(m * p for m, p, _ in parts) / mass
    I = np.zeros((3, 3))
    for m, p, I_p in parts:
        d = p - c
        I += I_p + m * (d @ d * np.eye(3) - np.outer(d, d))  # parallel-axis theorem
    I = 0.5 * (I + I.T)
    _check_tensor(I, f"{where}: link {head!r}{' (with the links fixed to it)' if merged else ''}:", strict=True)
    off = np.abs(I - np.diag(np.diag(I))).max()
    if off <= _OFF_DIAGONAL_TOL * np.abs(np.diag(I)).max():
        R, J = np.eye(3), np.diag(I).copy()  # the link's own axes: nothing permuted
    else:
        J, R = np.linalg.eigh(I)
        if np.linalg.det(R) < 0:
            R[:, 2] *= -1.0
    return _MassProperties(mass, c, R, J, tuple(links))


# --------------------------------------------------------------------------- model


def identifier(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", name)


def _number(text: Any, what: str, where: str) -> float:
    try:
        value = float(text)
    except (TypeError, ValueError):
        raise ModelError(f"{where}: {what} must be a number, got {text!r}") from None
    if not (np.isfinite(value) and value >= 0.0):
        raise ModelError(f"{where}: {what} must be a finite number >= 0, got {text!r}")
    return value


def _model(urdf: Any, where: str, motors: Sequence[str], name: str | None) -> RigidModel:
    try:
        return _build(urdf.robot, where, motors, name)
    except ModelError as exc:
        # Parameter and RigidModel checks (a bound, a reserved name) do not know the file.
        message = str(exc)
        if message.startswith(f"{where}: "):
            raise
        raise ModelError(f"{where}: {message}") from None


def link_groups(root: str, order: Sequence[Any], root_head: Any, where: str
                ) -> tuple[dict[str, Any], dict[str, np.ndarray], list[Any]]:
    """The URDF's links grouped by the moving joints: links welded by fixed joints ride on one head link.

    Args:
        root, order: :func:`joint_tree`'s root link and joints in parents-first order.
        root_head: what carries the root's group (the world, or None for "the base").

    Returns:
        head: link name -> the child link of the moving joint that carries it (``root_head`` for the root's group);
        T: link name -> its frame in its head link's frame (4, 4); moving: the moving joints, parents first.
    """
    head: dict[str, Any] = {root: root_head}
    T: dict[str, np.ndarray] = {root: np.eye(4)}
    moving = []
    for j in order:
        origin = origin_transform(j.origin, f"joint {j.name!r}", where)
        if j.type == "fixed":
            head[j.child], T[j.child] = head[j.parent], T[j.parent] @ origin
        else:
            head[j.child], T[j.child] = j.child, np.eye(4)
            moving.append(j)
    if not moving:
        raise ModelError(f"{where}: no revolute, continuous or prismatic joint: nothing moves")
    return head, T, moving


def _build(robot: Any, where: str, motors: Sequence[str], name: str | None) -> RigidModel:
    root, order = joint_tree(robot, where)
    motors = list(dict.fromkeys(motors))
    by_joint = {j.name: j for j in order}
    for m in motors:
        if m not in by_joint:
            raise ModelError(f"{where}: motor joint {m!r} is not a joint of the URDF; moving joints: "
                             f"{', '.join(j.name for j in order if j.type in MOVING) or 'none'}")
        if by_joint[m].type not in MOVING:
            raise ModelError(f"{where}: motor joint {m!r} is {by_joint[m].type}: a motor needs a revolute, "
                             f"continuous or prismatic joint")

    # Each link's frame in its group's head link frame; the root's group is the world.
    head, T, moving = link_groups(root, order, WORLD, where)
    groups: dict[str, list[str]] = {}  # head link -> its links, the head first (parents-first order)
    for link_name, group_head in head.items():
        groups.setdefault(group_head, []).append(link_name)
    props = {j.child: _mass_properties(j.child, groups[j.child], T, robot, where) for j in moving}

    names: dict[str, str] = {}  # parameter name -> the URDF name it came from

    def pname(prefix: str, original: str, kind: str) -> str:
        n = f"{prefix}_{identifier(original)}"
        if n in names and names[n] != original:
            raise ModelError(f"{where}: {kind}s {names[n]!r} and {original!r} both give the parameter name {n!r}; "
                             f"rename one (parameter names keep only A-Z, a-z, 0-9 and _)")
        names[n] = original
        return n

    params: list[Parameter] = []
    bodies = []
    for j in moving:
        link, mp = j.child, props[j.child]
        merged = f" and the links fixed to it ({', '.join(mp.links[1:])})" if len(mp.links) > 1 else ""
        m = pname("m", link, "link")
        params.append(Parameter(m, mp.mass, "kg", 1e-9, INF, description=f"mass of link {link}{merged}"))
        Js = []
        for k in range(3):
            along = "xyz"[k] if np.array_equal(mp.R, np.eye(3)) else "(" + " ".join(f"{v:.4g}" for v in mp.R[:, k]) + ")"
            Jn = pname(f"J{k + 1}", link, "link")
            params.append(Parameter(Jn, float(mp.J[k]), "kg m^2", 1e-12, INF,
                                    description=f"principal inertia of link {link}{merged} about link axis {along}"))
            Js.append(Jn)
        bodies.append(Body(link, m, (Js[0], Js[1], Js[2])))

    joints: list[Hinge | Prismatic] = []
    notes: list[str] = []
    for j in moving:
        rotary = MOVING[j.type] is Hinge
        axis = np.asarray(j.axis, dtype=float).reshape(-1)
        if axis.shape != (3,):
            raise ModelError(f"{where}: joint {j.name!r}: <axis xyz> has {axis.size} numbers; expected 3, its "
                             f"direction x y z")
        if not np.all(np.isfinite(axis)):
            raise ModelError(f"{where}: joint {j.name!r}: <axis xyz> is not finite ({' '.join(f'{v:g}' for v in axis)})"
                             f"; expected its direction x y z")
        if not np.linalg.norm(axis) > 1e-12:
            raise ModelError(f"{where}: joint {j.name!r}: <axis xyz> has zero length; expected its direction")
        given = urdf_limits(j)
        for key, value in given.items():
            if not np.isfinite(value):
                raise ModelError(f"{where}: joint {j.name!r}: <limit {key}> is {value:g}; expected a finite number")
        if given.get("lower", -np.inf) > given.get("upper", np.inf):
            raise ModelError(f"{where}: joint {j.name!r}: <limit lower> {given['lower']:g} is above <limit upper> "
                             f"{given['upper']:g}")
        R_align = axis_rotation(axis)
        # Frame a: the joint frame (the URDF joint origin) in the parent's body; frame b: the child link
        # frame, which is the joint frame at zero coordinate.
        T_hj = T[j.parent] @ origin_transform(j.origin, f"joint {j.name!r}", where)
        if head[j.parent] == WORLD:
            p = T_hj[:3, 3]
            a = Frame(WORLD, (float(p[0]), float(p[1]), float(p[2])), T_hj[:3, :3] @ R_align)
        else:
            mp = props[head[j.parent]]
            a = Frame(head[j.parent], mp.point(T_hj[:3, 3]), mp.R.T @ T_hj[:3, :3] @ R_align)
        mc = props[j.child]
        b = Frame(j.child, mc.point(np.zeros(3)), mc.R.T @ R_align)
        unit = ("N m s/rad", "N m", "N m") if rotary else ("N s/m", "N", "N")
        dyn = j.dynamics
        damping = 0.0 if dyn is None or dyn.damping is None else _number(
            dyn.damping, f"joint {j.name!r} <dynamics damping>", where)
        friction = 0.0 if dyn is None or dyn.friction is None else _number(
            dyn.friction, f"joint {j.name!r} <dynamics friction>", where)
        bn = pname("b", j.name, "joint")
        params.append(Parameter(bn, damping, unit[0], 0.0, INF, description=f"viscous friction of joint {j.name}"))
        coulomb = None
        if friction > 0.0:
            coulomb = pname("fc", j.name, "joint")
            params.append(Parameter(coulomb, friction, unit[1], 0.0, INF,
                                    description=f"dry (Coulomb) friction of joint {j.name}, load-independent"))
        motor = None
        if j.name in motors:
            K, Js_ = pname("K", j.name, "joint"), pname("J_s", j.name, "joint")
            control = pname("u", j.name, "joint")
            params.append(Parameter(K, 1.0, f"{unit[2]} per unit of {control}", 0.0, INF,
                                    description=f"motor gain of joint {j.name}"))
            params.append(Parameter(Js_, 1e-6, "kg m^2" if rotary else "kg", 1e-12, INF,
                                    description=f"motor shaft inertia of joint {j.name}"
                                    + ("" if rotary else " (reflected to the axis)")))
            motor = Motor(control=control, gain=K, shaft_inertia=Js_)
        if j.mimic is not None:
            notes.append(f"joint {j.name} mimics {j.mimic.joint} in the URDF but moves independently here")
            warnings.warn(f"{where}: joint {j.name!r} mimics {j.mimic.joint!r} in the URDF; mbfg has no mimic "
                          f"constraint and lets it move independently", stacklevel=4)
        joints.append(MOVING[j.type](j.name, a, b, eps_lin="eps_lin", eps_rot="eps_rot", tau="tau", viscous=bn,
                                     coulomb=coulomb, motor=motor))
    params += compliance_parameters(*SOFT)

    merged_links = [f"{', '.join(mp.links[1:])} into {mp.links[0]}" for mp in props.values() if len(mp.links) > 1]
    welded = [k for k in head if head[k] == WORLD and k != root]
    limits = []
    for j in moving:
        effort = urdf_limits(j).get("effort")
        if effort is not None:
            limits.append(f"{j.name} {effort:g} {'N m' if MOVING[j.type] is Hinge else 'N'}")
    description = f"URDF {os.path.basename(where)}: {len(bodies)} {'body' if len(bodies) == 1 else 'bodies'}"
    if welded:
        description += f"; fixed to the base {root}: {', '.join(welded)}"
    if merged_links:
        description += f"; fixed links merged: {'; '.join(merged_links)}"
    if limits:
        description += f"; effort limits {', '.join(limits)} (noted, not enforced)"
    if notes:
        description += "; " + "; ".join(notes)
    return RigidModel(name or robot.name, bodies, joints, parameters=ParameterSet(params), description=description)


__all__ = ["MOVING", "axis_rotation", "joint_limits", "load_urdf", "urdf_from_string"]
