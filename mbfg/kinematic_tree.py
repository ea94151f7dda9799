"""A URDF robot as a kinematic tree of arrays: the input of inverse dynamics (:mod:`mbfg.inverse_dynamics`)
and of base-parameter analysis (:mod:`mbfg.base_parameters`).

The same reading of the file as :func:`mbfg.urdf.load_urdf` (one parser, one tree order: parents first),
but kept in the link frames of the URDF rather than at principal axes, so that each moving link carries its
ten standard inertial parameters, the form in which robot identification writes them (Pinocchio's order)::

    pi = [m, m c_x, m c_y, m c_z, I_xx, I_xy, I_yy, I_xz, I_yz, I_zz]

with ``c`` the centre of mass in the link frame [m] and ``I`` the inertia tensor about the link frame's
origin, in link axes [kg m^2] (not about the centre of mass: about the origin the dynamics is linear in pi).

- the root link is the fixed base; links welded to it by ``fixed`` joints are base too (their inertia does
  not move and is dropped); ``floating`` and ``planar`` joints are refused (as :mod:`mbfg.urdf` does).
- a link fixed to a moving link is merged into it: its parameters, moved into the moving link's frame, are
  added (standard parameters about one frame add).
- ``revolute`` and ``continuous`` joints turn about, ``prismatic`` ones slide along, the unit ``<axis>`` of
  the joint frame; at zero coordinate the child link frame is the joint frame.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from mbfg.errors import ModelError

#: Names of the ten standard parameters of a link, in the order of ``pi`` (``{link}`` is the link name).
PARAMETER_NAMES = ("m", "mx", "my", "mz", "Ixx", "Ixy", "Iyy", "Ixz", "Iyz", "Izz")
_MOVING = ("revolute", "continuous", "prismatic")


@dataclass(frozen=True)
class KinematicTree:
    """A fixed-base tree of n moving joints, parents first.

    joints: (n,) joint names; links: (n,) the child link of each joint (a moving link);
    parent: (n,) index of the joint that moves each joint's parent link, -1 for the base;
    origin: (n, 4, 4) the joint frame in the parent link's frame (fixed links between composed in) [m];
    axis: (n, 3) unit axis in the joint frame; prismatic: (n,) bool;
    pi: (n, 10) standard inertial parameters of each moving link (module docstring) [kg, kg m, kg m^2];
    limits: joint name -> its given ``<limit>`` values (``lower``, ``upper``, ``velocity``, ``effort``).
    """

    name: str
    joints: tuple[str, ...]
    links: tuple[str, ...]
    parent: np.ndarray
    origin: np.ndarray
    axis: np.ndarray
    prismatic: np.ndarray
    pi: np.ndarray
    limits: dict[str, dict[str, float]]

    @property
    def n(self) -> int:
        """The number of moving joints (degrees of freedom)."""
        return len(self.joints)

    @property
    def parameter_names(self) -> tuple[str, ...]:
        """The (10 n,) names of ``pi.ravel()``: ``m_<link>``, ``mx_<link>`` ... ``Izz_<link>``."""
        return tuple(f"{p}_{link}" for link in self.links for p in PARAMETER_NAMES)

    def ancestors(self) -> np.ndarray:
        """(n, n) bool: ``[i, j]`` when joint i is joint j or on its path to the base (i moves link j)."""
        A = np.eye(self.n, dtype=bool)
        for j in range(self.n):  # parents first: a parent's row is complete before its children read it
            p = int(self.parent[j])
            if p >= 0:
                A[:, j] |= A[:, p]
        return A


def standard_parameters(mass: float, com: np.ndarray, inertia_com: np.ndarray) -> np.ndarray:
    """(10,) standard parameters of a body of ``mass`` [kg], centre of mass ``com`` (3,) [m] and inertia
    ``inertia_com`` (3, 3) about the centre of mass [kg m^2], all in one frame (Steiner's theorem)."""
    c = np.asarray(com, dtype=float)
    I = np.asarray(inertia_com, dtype=float) + mass * (c @ c * np.eye(3) - np.outer(c, c))
    return np.array([mass, *(mass * c), I[0, 0], I[0, 1], I[1, 1], I[0, 2], I[1, 2], I[2, 2]])


def inertia_matrix(pi: np.ndarray) -> np.ndarray:
    """The (3, 3) inertia tensor about the frame origin of the standard parameters ``pi`` (10,)."""
    _, _, _, _, xx, xy, yy, xz, yz, zz = np.asarray(pi, dtype=float)
    return np.array([[xx, xy, xz], [xy, yy, yz], [xz, yz, zz]])


def moved_parameters(pi: np.ndarray, T: np.ndarray) -> np.ndarray:
    """Standard parameters ``pi`` (10,) given in a frame B, expressed in frame A, where ``T`` (4, 4) is B in A.

    Linear in pi (massless links too): with h = m c the first moment, h_A = R h + m p and
    I_A = R I_B R^T - m [p]^2 - [p][R h] - [R h][p], [.] the cross-product matrix.
    """
    R, p = T[:3, :3], T[:3, 3]
    m, h = float(pi[0]), R @ np.asarray(pi[1:4], dtype=float)
    P, H = _skew(p), _skew(h)
    I = R @ inertia_matrix(pi) @ R.T - m * P @ P - P @ H - H @ P
    return np.array([m, *(h + m * p), I[0, 0], I[0, 1], I[1, 1], I[0, 2], I[1, 2], I[2, 2]])


def _skew(v: np.ndarray) -> np.ndarray:
    return np.array([[0.0, -v[2], v[1]], [v[2], 0.0, -v[0]], [-v[1], v[0], 0.0]])


def load_tree(path: str | os.PathLike[str]) -> KinematicTree:
    """The kinematic tree of a URDF file (module docstring); ModelError naming the link or joint."""
    from mbfg.urdf import parse_urdf, read_urdf_bytes

    where = os.fspath(path)
    return _build(parse_urdf(read_urdf_bytes(where), where).robot, where)


def tree_from_string(text: str, source: str = "<string>") -> KinematicTree:
    """:func:`load_tree` of URDF text; ``source`` stands for the path in messages."""
    from mbfg.urdf import parse_urdf

    return _build(parse_urdf(text.encode("utf-8"), source).robot, source)


def _build(robot: Any, where: str) -> KinematicTree:
    from mbfg.urdf import joint_tree, link_groups, origin_transform, urdf_limits

    root, order = joint_tree(robot, where)
    # head: the moving link (or None: the base) that carries each link; T: the link's frame in its head's.
    head, T, moving = link_groups(root, order, None, where)
    index = {j.child: k for k, j in enumerate(moving)}
    by_name = {link.name: link for link in robot.links}
    pi = np.zeros((len(moving), 10))
    for link_name, h in head.items():
        if h is None:
            continue
        pi[index[h]] += moved_parameters(_link_parameters(by_name[link_name], where), T[link_name])
    parent, origins, axes = [], [], []
    for j in moving:
        h = head[j.parent]
        parent.append(-1 if h is None else index[h])
        origins.append(T[j.parent] @ origin_transform(j.origin, f"joint {j.name!r}", where))
        axis = np.asarray(j.axis if j.axis is not None else (1.0, 0.0, 0.0), dtype=float).reshape(-1)
        if axis.shape != (3,) or not np.all(np.isfinite(axis)) or not np.linalg.norm(axis) > 1e-12:
            raise ModelError(f"{where}: joint {j.name!r}: <axis xyz> is {axis.tolist()}; expected a finite, nonzero "
                             f"direction x y z")
        axes.append(axis / np.linalg.norm(axis))
    return KinematicTree(
        name=str(robot.name), joints=tuple(j.name for j in moving), links=tuple(j.child for j in moving),
        parent=np.array(parent, dtype=int), origin=np.array(origins), axis=np.array(axes),
        prismatic=np.array([j.type == "prismatic" for j in moving]), pi=pi,
        limits={j.name: urdf_limits(j) for j in moving},
    )


def _link_parameters(link: Any, where: str) -> np.ndarray:
    """(10,) standard parameters of one URDF link about its own frame (zeros without ``<inertial>``)."""
    from mbfg.urdf import origin_transform

    inertial = link.inertial
    if inertial is None:
        return np.zeros(10)
    if inertial.mass is None or inertial.inertia is None:
        raise ModelError(f"{where}: link {link.name!r}: <inertial> lacks <{'mass' if inertial.mass is None else 'inertia'}>")
    m = float(inertial.mass)
    inertia = np.asarray(inertial.inertia, dtype=float)
    if not (np.isfinite(m) and m >= 0.0) or not np.all(np.isfinite(inertia)):
        raise ModelError(f"{where}: link {link.name!r}: <inertial> mass {m:g} kg or its <inertia> is not a finite, "
                         f"nonnegative number")
    T = origin_transform(inertial.origin, f"link {link.name!r} <inertial>", where)
    return standard_parameters(m, T[:3, 3], T[:3, :3] @ inertia @ T[:3, :3].T)


__all__ = ["PARAMETER_NAMES", "KinematicTree", "inertia_matrix", "load_tree", "moved_parameters",
           "standard_parameters", "tree_from_string"]
