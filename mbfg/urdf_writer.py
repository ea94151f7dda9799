"""A calibrated arm written back out as URDF: the identified standard parameters of each moving link as its
``<inertial>`` (mass, centre of mass, full inertia tensor about the centre of mass in the link's axes), and
optionally the viscous and Coulomb friction as the joints' ``<dynamics damping friction>``.

The URDF's text is kept (kinematics, limits, visuals, comments); only ``<inertial>`` and ``<dynamics>`` are
replaced. A moving link of :class:`~mbfg.kinematic_tree.KinematicTree` carries the links fixed to it (their
parameters added in its frame), so the whole carried body is written on the moving link and the inertials of
the links fixed to it are removed: :func:`mbfg.kinematic_tree.tree_from_string` of the result reads the same
parameters back. From standard parameters pi = [m, h, I about the link origin] (:mod:`mbfg.kinematic_tree`)::

    c = h / m        I_c = I - m (|c|^2 1 - c c^T)        (Steiner's theorem)

URDF has no field for a joint's friction offset or its rotor inertia; they are not written.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any

import numpy as np

from mbfg.errors import MbfgError
from mbfg.kinematic_tree import KinematicTree, inertia_matrix
from mbfg.pseudo_inertia import is_physically_consistent


def _number(x: float) -> str:
    return repr(float(x))  # shortest text that reads back as the same double


def _head_links(root: ET.Element, tree: KinematicTree) -> dict[str, str]:
    """link name -> the moving link that carries it (itself, or the moving link it is fixed to)."""
    fixed_parent = {j.find("child").get("link"): j.find("parent").get("link")  # type: ignore[union-attr]
                    for j in root.findall("joint") if j.get("type") == "fixed"}
    moving = set(tree.links)
    heads = {}
    for link in root.findall("link"):
        name, seen = link.get("name", ""), set()
        current: str | None = name
        while current is not None and current not in moving and current not in seen:
            seen.add(current)
            current = fixed_parent.get(current)
        if current in moving:
            heads[name] = current
    return heads


def calibrated_urdf(text: str, tree: KinematicTree, pi: Any, friction: Any = None) -> str:
    """The URDF ``text`` of ``tree`` with the standard parameters ``pi`` (n, 10) or (10 n,) written as the moving
    links' inertials (module docstring), and, when given, ``friction`` (n, 2) [F_v, F_c] per joint as
    ``<dynamics damping="F_v" friction="F_c"/>``.

    Raises MbfgError naming the link whose parameters are not physically consistent (no ``<inertial>`` can
    hold them), or for a shape that does not match the tree.
    """
    pi = np.asarray(pi, dtype=float)
    if pi.size != 10 * tree.n or not np.all(np.isfinite(pi)):
        raise MbfgError(f"pi: expected {10 * tree.n} finite standard parameters (10 per link of {tree.name}), got "
                        f"shape {pi.shape}")
    pi = pi.reshape(tree.n, 10)
    for k in np.flatnonzero(~is_physically_consistent(pi)):
        raise MbfgError(f"pi: link {tree.links[k]}: not physically consistent (its pseudo-inertia is not positive "
                        f"definite); a URDF <inertial> cannot hold it")
    if friction is not None:
        friction = np.asarray(friction, dtype=float)
        if friction.shape != (tree.n, 2) or not np.all(np.isfinite(friction)) or np.any(friction < 0.0):
            raise MbfgError(f"friction: expected (n, 2) = ({tree.n}, 2) numbers >= 0 [F_v, F_c] per joint, got "
                            f"{np.shape(friction)}")
    root = ET.fromstring(text, parser=ET.XMLParser(target=ET.TreeBuilder(insert_comments=True)))
    heads = _head_links(root, tree)
    index = {link: k for k, link in enumerate(tree.links)}
    for link in root.findall("link"):
        name = link.get("name", "")
        if name not in heads:
            continue  # a base link: its inertia never moves
        for old in link.findall("inertial"):
            link.remove(old)
        if heads[name] != name:
            continue  # fixed to a moving link: its mass is in the moving link's inertial
        p = pi[index[name]]
        m = p[0]
        c = p[1:4] / m
        Ic = inertia_matrix(p) - m * (c @ c * np.eye(3) - np.outer(c, c))
        inertial = ET.Element("inertial")
        inertial.text, inertial.tail = "\n      ", "\n  "
        ET.SubElement(inertial, "origin", xyz=" ".join(map(_number, c)), rpy="0 0 0").tail = "\n      "
        ET.SubElement(inertial, "mass", value=_number(m)).tail = "\n      "
        ET.SubElement(inertial, "inertia", ixx=_number(Ic[0, 0]), ixy=_number(Ic[0, 1]), ixz=_number(Ic[0, 2]),
                      iyy=_number(Ic[1, 1]), iyz=_number(Ic[1, 2]), izz=_number(Ic[2, 2])).tail = "\n    "
        link.insert(0, inertial)
        if link.text is None or not link.text.strip():
            link.text = "\n    "
    if friction is not None:
        by_name = {j.get("name"): j for j in root.findall("joint")}
        for joint_name, (damping, coulomb) in zip(tree.joints, friction, strict=True):
            joint = by_name[joint_name]
            for old in joint.findall("dynamics"):
                joint.remove(old)
            ET.SubElement(joint, "dynamics", damping=_number(damping), friction=_number(coulomb))
    return '<?xml version="1.0"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


__all__ = ["calibrated_urdf"]
