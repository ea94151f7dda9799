"""Position-level kinematics of a rigid model: attachment frames, the joints' and contacts' position
functions (whose Jacobians are the constraint rows), joint angles and the observation functions."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from mbfg._jax import Array, jnp
from mbfg.errors import ModelError
from mbfg.parts import WORLD, Frame, Hinge, Prismatic, resolve3
from mbfg.rigid.arrays import take

if TYPE_CHECKING:  # annotations only: the model imports this module
    from mbfg.rigid.arrays import ModelArrays
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

    All joints of a type are evaluated at once from the model's index arrays (:mod:`mbfg.rigid.arrays`),
    the contacts likewise, and one gather puts the values in layout order: the traced program does not
    grow with the number of joints.
    """
    X = model.arrays
    return positions_from_geometry(X, r, R, X.geometry(X.parameter_vector(p)))


def positions_from_geometry(X: ModelArrays, r: Array, R: Array, geometry: Mapping[str, jnp.ndarray]) -> jnp.ndarray:
    """:func:`position_functions` given the model's arrays and their geometry (``X.geometry`` of the parameter
    vector, :mod:`mbfg.rigid.arrays`)."""
    values = joint_positions(X, r, R, geometry)
    if len(X.contact_body):
        i = X.contact_body
        s = geometry["contact_point"].reshape(-1, 3)
        point = take(r, i) + jnp.einsum("nij,nj->ni", take(R, i), s)
        gap = jnp.einsum("ni,ni->n", X.contact_basis[:, 0], point - X.contact_origin) - geometry["contact_radius"]
        # the tangents' components of the point itself (not of point - origin), as the rows have them
        tangential = jnp.einsum("nki,ni->nk", X.contact_basis[:, 1:], point)
        values.append(jnp.concatenate([gap[:, None], tangential], axis=1).reshape(-1))
    if not values:
        return jnp.zeros(0)
    stacked = jnp.concatenate(values) if len(values) > 1 else values[0]
    # one joint type and no contacts (a chain of hinges): the values are in layout order already
    return stacked if X.positions_in_order else take(stacked, X.position_order)


def frame_poses(X: ModelArrays, r: Array, R: Array, geometry: Mapping[str, jnp.ndarray]) -> tuple[jnp.ndarray, ...]:
    """(o_a, R_a, o_b, R_b) of every joint's frames, stacked by joint type (:mod:`mbfg.rigid.arrays`): origins
    (nj, 3) [m], orientations R_world_frame (nj, 3, 3). The world is body nb (origin, identity)."""
    r_ext = jnp.concatenate([r, np.zeros((1, 3))])
    R_ext = jnp.concatenate([R, np.eye(3)[None]])

    def pose(bodies: np.ndarray, position: jnp.ndarray, rot: np.ndarray) -> tuple[jnp.ndarray, jnp.ndarray]:
        s = position.reshape(-1, 3)
        R_body = take(R_ext, bodies)
        return take(r_ext, bodies) + jnp.einsum("nij,nj->ni", R_body, s), jnp.einsum("nij,njk->nik", R_body, rot)

    return (*pose(X.body_a, geometry["pos_a"], X.rot_a), *pose(X.body_b, geometry["pos_b"], X.rot_b))


def joint_positions(X: ModelArrays, r: Array, R: Array, geometry: Mapping[str, jnp.ndarray]) -> list[jnp.ndarray]:
    """Each joint type's position functions (rows, then coordinate), flattened per type: a list of arrays."""
    if not len(X.body_a):
        return []
    o_a, R_a, o_b, R_b = frame_poses(X, r, R, geometry)
    out = []
    for group in X.groups:  # one expression per joint type (a fixed, small number), never per joint
        k = group.slot
        if k.stop > k.start:
            out.append(group.kind.positions(o_a[k], R_a[k], o_b[k], R_b[k]).reshape(-1))
    return out


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
