"""Position-level kinematics of a rigid model: attachment frames, the joints' and contacts' position
functions (whose Jacobians are the constraint rows), joint angles and the observation functions."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from mbfg._jax import Array, jnp
from mbfg.errors import ModelError
from mbfg.parts import WORLD, Ball, Frame, Hinge, Prismatic, resolve, resolve3

if TYPE_CHECKING:  # annotations only: the model imports this module
    from mbfg.rigid.model import RigidModel


def frame_pose(body_index: Mapping[str, int], frame: Frame, r: Array, R: Array, p: Mapping[str, Any]) -> tuple:
    """(origin [m], R_world_frame) of an attachment frame."""
    s = resolve3(frame.position, p)
    if frame.body == WORLD:
        return s, jnp.asarray(frame.R())
    i = body_index[frame.body]
    return r[i] + R[i] @ s, R[i] @ jnp.asarray(frame.R())


def position_functions(model: RigidModel, r: Array, R: Array, p: Mapping[str, Any]) -> jnp.ndarray:
    """Every position-level function the rows need (n_pos,), in layout order.

    Per joint its constraint rows g (F.1 for a hinge), then a hinge's angle or a slider's displacement;
    per contact the gap and the contact point's position along two tangents.
    The rows' Jacobians are the derivatives of these along ``q boxplus delta``.
    """
    out = []
    for j in model.joints:
        o_a, R_a = frame_pose(model.body_index, j.a, r, R, p)
        o_b, R_b = frame_pose(model.body_index, j.b, r, R, p)
        if isinstance(j, Hinge):
            z_a = R_a[:, 2]
            out += [o_b - o_a, jnp.stack([z_a @ R_b[:, 0], z_a @ R_b[:, 1]]), hinge_angle(R_a, R_b)[None]]
        elif isinstance(j, Ball):
            out.append(o_b - o_a)
        elif isinstance(j, Prismatic):
            d_a = R_a.T @ (o_b - o_a)  # b's origin in frame a: on a's z axis when (x, y) = 0
            out += [d_a[:2], _alignment_rows(R_a, R_b), d_a[2:]]
        else:
            out += [o_b - o_a, _alignment_rows(R_a, R_b)]
    for c in model.contacts:
        i = model.body_index[c.body]
        point = r[i] + R[i] @ resolve3(c.point, p)
        n, t1, t2 = _plane_basis(c.normal)
        gap = n @ (point - jnp.asarray(c.origin)) - resolve(c.radius, p)
        out.append(jnp.stack([gap, t1 @ point, t2 @ point]))
    return jnp.concatenate(out) if out else jnp.zeros(0)


def _joints_by_name(model: RigidModel) -> dict[str, Any]:
    """The model's joints by name, built once per joints tuple: a dict per observation made building a model
    quadratic in its number of joints (a 10,000-link URDF chain)."""
    cached = model.__dict__.get("_joints_by_name")
    if cached is None or cached[0] is not model.joints:
        cached = (model.joints, {j.name: j for j in model.joints})
        model.__dict__["_joints_by_name"] = cached
    return cached[1]


def observation_fn(model: RigidModel, name: str):
    """(r, R, p) -> the observation ``name`` of ``model``; ModelError on an unknown name."""
    joints = _joints_by_name(model)
    if name in joints and isinstance(joints[name], Hinge):
        j = joints[name]

        def angle(r: jnp.ndarray, R: jnp.ndarray, p: Mapping[str, Any]) -> jnp.ndarray:
            R_a, R_b = frame_pose(model.body_index, j.a, r, R, p)[1], frame_pose(model.body_index, j.b, r, R, p)[1]
            return hinge_angle(R_a, R_b)

        return angle
    if name in joints and isinstance(joints[name], Prismatic):
        s = joints[name]

        def displacement(r: jnp.ndarray, R: jnp.ndarray, p: Mapping[str, Any]) -> jnp.ndarray:
            o_a, R_a = frame_pose(model.body_index, s.a, r, R, p)
            return R_a[:, 2] @ (frame_pose(model.body_index, s.b, r, R, p)[0] - o_a)

        return displacement
    body, _, axis = name.rpartition(".")
    if body in model.body_index and axis in ("x", "y", "z"):
        i, k = model.body_index[body], "xyz".index(axis)
        return lambda r, R, p: r[i, k]
    raise ModelError(
        f"{model.name}: unknown observation {name!r}; expected a hinge or slider name "
        f"({', '.join(h.name for h in model.axial) or 'none'}) or BODY.x/y/z"
    )


def hinge_angle(R_a: jnp.ndarray, R_b: jnp.ndarray) -> jnp.ndarray:
    """Rotation angle of frame b about frame a's z axis, in (-pi, pi] [rad]."""
    R_ab = R_a.T @ R_b
    return jnp.arctan2(R_ab[1, 0] - R_ab[0, 1], R_ab[0, 0] + R_ab[1, 1])


def _alignment_rows(R_a: jnp.ndarray, R_b: jnp.ndarray) -> jnp.ndarray:
    """(3,) rows that lock frame b's orientation to frame a's: the skew part of R_a^T R_b,
    sin(angle) * axis, zero at alignment and smooth there."""
    R_ab = R_a.T @ R_b
    return 0.5 * jnp.stack([R_ab[2, 1] - R_ab[1, 2], R_ab[0, 2] - R_ab[2, 0], R_ab[1, 0] - R_ab[0, 1]])


def _plane_basis(normal: Sequence[float]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Unit normal and two unit tangents of a plane (NumPy constants)."""
    n = np.asarray(normal, dtype=float)
    n = n / np.linalg.norm(n)
    helper = np.array([1.0, 0.0, 0.0]) if abs(n[0]) < 0.9 else np.array([0.0, 1.0, 0.0])
    t1 = np.cross(n, helper)
    t1 /= np.linalg.norm(t1)
    return n, t1, np.cross(n, t1)
