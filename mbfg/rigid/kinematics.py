"""Position-level kinematics of a rigid model: attachment frames, the joints' and contacts' position
functions (whose Jacobians are the constraint rows), joint angles and the observation functions."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from mbfg._jax import Array, jax, jnp
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
    return _in_layout_order(X, _part_positions(X, _part_bodies(X, r, R), geometry))


def _part_bodies(X: ModelArrays, r: Array, R: Array) -> tuple[jnp.ndarray, ...]:
    """The poses of the bodies each part attaches to: (r_a, R_a, r_b, R_b) of every joint's bodies (nj, 3),
    (nj, 3, 3), then (r_c, R_c) of every contact's body; the world is body nb (origin, identity)."""
    r_ext = jnp.concatenate([r, np.zeros((1, 3))])
    R_ext = jnp.concatenate([R, np.eye(3)[None]])
    i = X.contact_body
    return (take(r_ext, X.body_a), take(R_ext, X.body_a), take(r_ext, X.body_b), take(R_ext, X.body_b),
            take(r, i), take(R, i))


def _part_positions(X: ModelArrays, bodies: tuple[jnp.ndarray, ...], geometry: Mapping[str, jnp.ndarray]
                    ) -> jnp.ndarray:
    """Each joint type's position functions (rows, then coordinate), flattened per type, then the contacts'
    (gap and two tangential coordinates each), from the parts' body poses (:func:`_part_bodies`)."""
    r_a, R_a, r_b, R_b, r_c, R_c = bodies
    values = []
    if len(X.body_a):
        o_a, R_fa = _frame(r_a, R_a, geometry["pos_a"], X.rot_a)
        o_b, R_fb = _frame(r_b, R_b, geometry["pos_b"], X.rot_b)
        for group in X.groups:  # one expression per joint type (a fixed, small number), never per joint
            k = group.slot
            if k.stop > k.start:
                values.append(group.kind.positions(o_a[k], R_fa[k], o_b[k], R_fb[k]).reshape(-1))
    if len(X.contact_body):
        s = geometry["contact_point"].reshape(-1, 3)
        point = r_c + jnp.einsum("nij,nj->ni", R_c, s)
        gap = jnp.einsum("ni,ni->n", X.contact_basis[:, 0], point - X.contact_origin) - geometry["contact_radius"]
        # the tangents' components of the point itself (not of point - origin), as the rows have them
        tangential = jnp.einsum("nki,ni->nk", X.contact_basis[:, 1:], point)
        values.append(jnp.concatenate([gap[:, None], tangential], axis=1).reshape(-1))
    if not values:
        return jnp.zeros(0)
    return jnp.concatenate(values) if len(values) > 1 else values[0]


def _in_layout_order(X: ModelArrays, stacked: jnp.ndarray) -> jnp.ndarray:
    # one joint type and no contacts (a chain of hinges): the values are in layout order already
    return stacked if X.positions_in_order else take(stacked, X.position_order)


def _frame(r: jnp.ndarray, R: jnp.ndarray, position: jnp.ndarray, rot: np.ndarray) -> tuple[jnp.ndarray, jnp.ndarray]:
    """(origins (n, 3), R_world_frame (n, 3, 3)) of n attachment frames on bodies at (r, R)."""
    return r + jnp.einsum("nij,nj->ni", R, position.reshape(-1, 3)), jnp.einsum("nij,njk->nik", R, rot)


def frame_poses(X: ModelArrays, r: Array, R: Array, geometry: Mapping[str, jnp.ndarray]) -> tuple[jnp.ndarray, ...]:
    """(o_a, R_a, o_b, R_b) of every joint's frames, stacked by joint type (:mod:`mbfg.rigid.arrays`): origins
    (nj, 3) [m], orientations R_world_frame (nj, 3, 3). The world is body nb (origin, identity)."""
    r_a, R_a, r_b, R_b, _, _ = _part_bodies(X, r, R)
    return (*_frame(r_a, R_a, geometry["pos_a"], X.rot_a), *_frame(r_b, R_b, geometry["pos_b"], X.rot_b))


#: The most entries (n_pos * 12 * 6 nb) of the constant 0/1 array that places the local Jacobians
#: (:func:`positions_and_jacobian`); larger models (a chain of about 80 hinged bodies on) scatter instead.
DENSE_PLACEMENT_MAX = 500_000  # 4 MB of float64


def positions_and_jacobian(X: ModelArrays, r: Array, R: Array, geometry: Mapping[str, jnp.ndarray], nb: int
                           ) -> tuple[jnp.ndarray, jnp.ndarray]:
    """:func:`positions_from_geometry` (n_pos,) and its Jacobian (n_pos, 6 nb) along ``q boxplus delta``.

    Each part's position functions depend on its own bodies only (a joint's two, a contact's one), so the
    derivative is taken along 12 local directions per part, (delta r, psi) of body a then of body b, all parts
    at once: 12 forward-mode lanes, not 6 nb. The lanes' results go into the columns of the parts' bodies (the
    world's dropped) by one product with a constant 0/1 array (n_pos, 12, 6 nb): on CPU a scatter there
    stops XLA fusing it with the rows' gathers after it, and costs more than it saves; beyond
    :data:`DENSE_PLACEMENT_MAX` entries, where that array's memory would grow as the bodies squared, a
    scatter. Rotations follow the tangent line ``R (I + [psi]x)`` of ``R Exp(psi)``, as in
    :meth:`RigidModel.position_jacobian`.
    """
    bodies = _part_bodies(X, r, R)
    r_a, R_a, r_b, R_b, r_c, R_c = bodies
    nj, nc = len(X.body_a), len(X.contact_body)

    def turned(R: jnp.ndarray, psi: jnp.ndarray) -> jnp.ndarray:
        return R + jnp.einsum("nik,nkj->nij", R, _hat(psi))

    def lifted(d_j: jnp.ndarray, d_c: jnp.ndarray) -> jnp.ndarray:
        return _part_positions(X, (r_a + d_j[:, 0:3], turned(R_a, d_j[:, 3:6]), r_b + d_j[:, 6:9],
                                   turned(R_b, d_j[:, 9:12]), r_c + d_c[:, 0:3], turned(R_c, d_c[:, 3:6])), geometry)

    zeros = (jnp.zeros((nj, 12)), jnp.zeros((nc, 12)))
    lanes = np.eye(12)  # lane l moves local coordinate l of every part at once
    tangents = (np.broadcast_to(lanes[:, None, :], (12, nj, 12)), np.broadcast_to(lanes[:, None, :], (12, nc, 12)))
    values, derivatives = jax.vmap(lambda t: jax.jvp(lifted, zeros, t), out_axes=(None, 0))(tangents)
    rows, cols = X.local_jacobian_index
    if len(values) * 12 * 6 * nb <= DENSE_PLACEMENT_MAX:
        onehot = np.zeros((len(values), 12, 6 * nb + 6))
        onehot[rows, np.tile(np.arange(12), len(values)), cols] = 1.0
        J = jnp.einsum("lo,olc->oc", derivatives, onehot[:, :, : 6 * nb])
    else:  # a 0/1 array that large costs more memory than the scatter costs time
        J = jnp.zeros((len(values), 6 * nb + 6)).at[rows, cols].add(derivatives.T.reshape(-1))[:, : 6 * nb]
    return _in_layout_order(X, values), (J if X.positions_in_order else take(J, X.position_order))


def _hat(w: jnp.ndarray) -> jnp.ndarray:
    """Stacked skew matrices [w]x (n, 3, 3) of w (n, 3)."""
    z = jnp.zeros_like(w[:, 0])
    return jnp.stack([jnp.stack([z, -w[:, 2], w[:, 1]], -1), jnp.stack([w[:, 2], z, -w[:, 0]], -1),
                      jnp.stack([-w[:, 1], w[:, 0], z], -1)], axis=1)


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


def plane_basis(normal: Sequence[float]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Unit normal and two unit tangents of a plane (NumPy constants)."""
    n = np.asarray(normal, dtype=float)
    n = n / np.linalg.norm(n)
    helper = np.array([1.0, 0.0, 0.0]) if abs(n[0]) < 0.9 else np.array([0.0, 1.0, 0.0])
    t1 = np.cross(n, helper)
    t1 /= np.linalg.norm(t1)
    return n, t1, np.cross(n, t1)
