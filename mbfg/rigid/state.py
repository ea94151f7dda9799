"""The state x = (q, v) of a rigid model's bodies, and placing them from joint coordinates.

:class:`State` is what every stepper, residual and estimator carries; :func:`state_from_coordinates` is
the body of :meth:`mbfg.rigid.RigidModel.initial_state` (a state at zero constraint violation).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from mbfg import quaternion as quat
from mbfg._jax import Array, jnp
from mbfg.errors import ModelError
from mbfg.parts import WORLD, Frame, Hinge, Prismatic, resolve

if TYPE_CHECKING:  # annotations only: the model imports this module
    from mbfg.rigid.model import RigidModel


class State(NamedTuple):
    """State x = (q, v) of nb bodies (Marklund et al. (2025) eq. 2.1-2.2).

    r: (nb, 3) CoM positions [m]; e: (nb, 4) unit quaternions body->world;
    v: (nb, 3) CoM velocities in the world [m/s]; w: (nb, 3) angular velocities
    in the body frames [rad/s].
    """

    r: Array
    e: Array
    v: Array
    w: Array

    def velocity(self) -> jnp.ndarray:
        """Generalized velocity, (6 nb,): per body [v (3), omega (3)]."""
        return jnp.concatenate([self.v, self.w], axis=1).reshape(-1)

    def with_velocity(self, vel: jnp.ndarray) -> State:
        vel = vel.reshape(-1, 6)
        return self._replace(v=vel[:, :3], w=vel[:, 3:])


def state_from_coordinates(
    model: RigidModel,
    coordinates: Mapping[str, float] | None = None,
    rates: Mapping[str, float] | None = None,
    parameters: Mapping[str, Any] | None = None,
    numpy: bool = False,
) -> State:
    """:meth:`RigidModel.initial_state <mbfg.rigid.RigidModel.initial_state>` of ``model`` (see there)."""
    coordinates, rates = dict(coordinates or {}), dict(rates or {})
    known = {j.name for j in model.axial} | {f"{b.name}.{ax}" for b in model.bodies for ax in "xyz"}
    from mbfg.limits import MAX_COORDINATE

    for argument, values in (("coordinates", coordinates), ("rates", rates)):
        for name, value in values.items():
            try:
                number = float(value) if np.ndim(value) == 0 and not isinstance(value, (bool, str)) else math.nan
            except (TypeError, ValueError):
                number = math.nan
            if not abs(number) <= MAX_COORDINATE:  # NaN, inf, a string, an array
                raise ModelError(f"{argument}[{name!r}]: expected a finite number of magnitude at most "
                                 f"{MAX_COORDINATE:g} [rad or m; per s for rates], got {value!r}")
    for name in [*coordinates, *rates]:
        if name not in known:
            raise ModelError(f"{model.name}: unknown coordinate {name!r}; expected one of {sorted(known)}")
    p = {k: np.asarray(v) for k, v in (parameters or model.parameters.numpy_values()).items()}
    nb = model.nb
    r, R = np.zeros((nb, 3)), np.tile(np.eye(3), (nb, 1, 1))
    v_lin, w_world = np.zeros((nb, 3)), np.zeros((nb, 3))
    placed = [False] * nb
    for i, body in enumerate(model.bodies):
        r[i] = np.asarray(body.position, dtype=float)
        R[i] = np.eye(3) if body.rotation is None else np.asarray(body.rotation, dtype=float)
        v_lin[i] = [rates.get(f"{body.name}.{ax}", 0.0) for ax in "xyz"]

    def pose(frame: Frame) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        s = np.array([float(resolve(x, p)) for x in frame.position])
        if frame.body == WORLD:
            return s, frame.R(), np.zeros(3), np.zeros(3)
        i = model.body_index[frame.body]
        return r[i] + R[i] @ s, R[i] @ frame.R(), v_lin[i] + np.cross(w_world[i], R[i] @ s), w_world[i]

    for j in model.joints:
        if j.b.body == WORLD:
            continue
        ib = model.body_index[j.b.body]
        if placed[ib]:
            continue  # a loop closure: the body is placed already
        o_a, R_a, v_a, w_a = pose(j.a)
        coordinate, rate = coordinates.get(j.name, 0.0), rates.get(j.name, 0.0)
        z_a = R_a[:, 2]
        if isinstance(j, Hinge):
            R_b, o_b, w_world[ib], v_ob = R_a @ _rot_z(coordinate), o_a, w_a + rate * z_a, v_a
        elif isinstance(j, Prismatic):
            o_b = o_a + coordinate * z_a
            # b's origin moves with the point of a under it, plus the slide.
            R_b, w_world[ib], v_ob = R_a, w_a, v_a + np.cross(w_a, o_b - o_a) + rate * z_a
        else:
            R_b, o_b, w_world[ib], v_ob = R_a, o_a, w_a, v_a
        R[ib] = R_b @ j.b.R().T
        s_b = np.array([float(resolve(x, p)) for x in j.b.position])
        r[ib] = o_b - R[ib] @ s_b
        v_lin[ib] = v_ob + np.cross(w_world[ib], r[ib] - o_b)
        placed[ib] = True
    e = np.stack([quat.from_matrix(Ri) for Ri in R])
    w_body = np.einsum("bji,bj->bi", R, w_world)
    if numpy:
        return State(r, e, v_lin, w_body)
    return State(jnp.asarray(r), jnp.asarray(e), jnp.asarray(v_lin), jnp.asarray(w_body))


def _rot_z(angle: float) -> np.ndarray:
    c, s = np.cos(angle), np.sin(angle)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def poses_from_coordinates(model: RigidModel, coordinates: Mapping[str, np.ndarray],
                           parameters: Mapping[str, Any] | None = None, *, n: int | None = None
                           ) -> tuple[np.ndarray, np.ndarray]:
    """The body poses of :func:`state_from_coordinates` (zero rates) at n joint configurations at once.

    Args:
        coordinates: joint name -> (n,) hinge angles [rad] or slider displacements [m]; a joint not
            named stays at 0.
        parameters: values to resolve the frames' positions (default the model's).
        n: the number of configurations (default: the length of the coordinates; needed without any).

    Returns:
        r (n, nb, 3) CoM positions [m], e (n, nb, 4) unit quaternions body->world: for every k the
        ``r`` and ``e`` of ``state_from_coordinates(model, {name: c[k]})`` (a test checks it), without
        its Python work per configuration (a log's initial states: thousands of them).
    """
    known = {j.name for j in model.axial}
    unknown = [name for name in coordinates if name not in known]
    if unknown:
        raise ModelError(f"{model.name}: unknown coordinate {unknown[0]!r}; expected one of {sorted(known)}")
    values = {name: np.asarray(c, dtype=float).reshape(-1) for name, c in coordinates.items()}
    lengths = {len(c) for c in values.values()} | ({n} if n is not None else set())
    if len(lengths) != 1:
        raise ModelError(f"{model.name}: coordinates of lengths {sorted(lengths)} (n {n}); expected every "
                         "coordinate of one length n, or n alone without coordinates")
    n = lengths.pop()
    p = {k: np.asarray(v) for k, v in (parameters or model.parameters.numpy_values()).items()}
    nb = model.nb
    r = np.zeros((n, nb, 3))
    R = np.tile(np.eye(3), (n, nb, 1, 1))
    for i, body in enumerate(model.bodies):
        r[:, i] = np.asarray(body.position, dtype=float)
        if body.rotation is not None:
            R[:, i] = np.asarray(body.rotation, dtype=float)
    placed = [False] * nb

    def pose(frame: Frame) -> tuple[np.ndarray, np.ndarray]:  # origin (n, 3), R_world_frame (n, 3, 3)
        s = np.array([float(resolve(x, p)) for x in frame.position])
        if frame.body == WORLD:
            return np.broadcast_to(s, (n, 3)), np.broadcast_to(frame.R(), (n, 3, 3))
        i = model.body_index[frame.body]
        return r[:, i] + R[:, i] @ s, R[:, i] @ frame.R()

    for j in model.joints:
        if j.b.body == WORLD:
            continue
        ib = model.body_index[j.b.body]
        if placed[ib]:
            continue  # a loop closure: the body is placed already
        o_b, R_b = pose(j.a)
        coordinate = values.get(j.name, np.zeros(n))
        if isinstance(j, Hinge):
            c, s = np.cos(coordinate), np.sin(coordinate)
            rot_z = np.zeros((n, 3, 3))
            rot_z[:, 0, 0], rot_z[:, 0, 1], rot_z[:, 1, 0], rot_z[:, 1, 1], rot_z[:, 2, 2] = c, -s, s, c, 1.0
            R_b = R_b @ rot_z
        elif isinstance(j, Prismatic):
            o_b = o_b + coordinate[:, None] * R_b[:, :, 2]
        R[:, ib] = R_b @ j.b.R().T
        s_b = np.array([float(resolve(x, p)) for x in j.b.position])
        r[:, ib] = o_b - R[:, ib] @ s_b
        placed[ib] = True
    return r, quat.from_matrix_np(R)
