"""Coordinates and rates of states read out in NumPy (no JAX call per sample): hinge angles, slider
displacements, CoM coordinates.
"""

from __future__ import annotations

import numpy as np

from mbfg import quaternion as quat
from mbfg._jax import jax
from mbfg.rigid import WORLD, Hinge, Prismatic, RigidModel, State, resolve


def wrap_angles(x: np.ndarray | float) -> np.ndarray:
    return np.arctan2(np.sin(x), np.cos(x))


def hinge_angles(R_a: np.ndarray, R_b: np.ndarray) -> np.ndarray:
    """NumPy twin of :func:`mbfg.rigid.hinge_angle` over a leading axis: rotations (n, 3, 3) of frames a
    and b; the rotation of b about a's z axis (n,) [rad]."""
    R_ab = np.einsum("nji,njk->nik", R_a, R_b)
    return np.arctan2(R_ab[:, 1, 0] - R_ab[:, 0, 1], R_ab[:, 0, 0] + R_ab[:, 1, 1])


class Readout:
    """Coordinates, rates and their Jacobians from states, in NumPy (no JAX call per sample).

    For each observation: a hinge angle (from the bodies' rotations, as
    :meth:`RigidModel.observe`) and its rate ``n . (omega_b - omega_a)``
    (world angular velocities, n the hinge axis), or a CoM coordinate and its
    velocity. The Jacobians are with respect to the GTSAM tangent of the
    state's variables [pose_0 (omega, v), ..., pose_{nb-1}, V (6 nb)], for the
    marginal standard deviations. Vectorized over states: one read-out per
    smoother update, whatever the number of states it adds.
    """

    def __init__(self, model: RigidModel) -> None:
        self.model, self.nb = model, model.nb
        joints = {j.name: j for j in model.joints}
        self.channels: list[tuple] = []
        for name in model.observations:
            j = joints.get(name)
            if isinstance(j, Hinge):
                ia = None if j.a.body == WORLD else model.body_index[j.a.body]
                ib = model.body_index[j.b.body]
                self.channels.append(("hinge", ia, j.a.R(), ib, j.b.R()))
            elif isinstance(j, Prismatic):
                p = model.parameters.numpy_values()
                ia = None if j.a.body == WORLD else model.body_index[j.a.body]
                s_a, s_b = (np.array([float(resolve(x, p)) for x in f.position]) for f in (j.a, j.b))
                self.channels.append(("slider", ia, s_a, j.a.R()[:, 2], model.body_index[j.b.body], s_b))
            else:
                body, _, axis = name.rpartition(".")
                self.channels.append(("com", model.body_index[body], "xyz".index(axis)))

    def __call__(self, R_world_body: np.ndarray, r_world_body: np.ndarray, vel: np.ndarray,
                 jacobians: bool = False):
        """From R_world_body (n, nb, 3, 3), r_world_body (n, nb, 3) [m] and V (n, 6 nb) [m/s, rad/s]:
        coordinates (n, n_obs), rates (n, n_obs) [and J_q, J_v (n, n_obs, 12 nb)]."""
        n, nb, n_obs = len(R_world_body), self.nb, len(self.channels)
        vel = vel.reshape(n, nb, 6)
        w_world = np.einsum("nbij,nbj->nbi", R_world_body, vel[:, :, 3:])
        q, qd = np.zeros((n, n_obs)), np.zeros((n, n_obs))
        if jacobians:
            Jq, Jv = np.zeros((n, n_obs, 12 * nb)), np.zeros((n, n_obs, 12 * nb))
        for c, ch in enumerate(self.channels):
            if ch[0] == "hinge":
                _, ia, R_a_frame, ib, R_b_frame = ch
                R_world_a = np.broadcast_to(np.eye(3), (n, 3, 3)) if ia is None else R_world_body[:, ia]
                R_world_fa = R_world_a @ R_a_frame
                axis = R_world_fa[:, :, 2]  # the hinge axis in the world
                q[:, c] = hinge_angles(R_world_fa, R_world_body[:, ib] @ R_b_frame)
                w_rel = w_world[:, ib] - (0.0 if ia is None else w_world[:, ia])
                qd[:, c] = np.einsum("ni,ni->n", axis, w_rel)
                if jacobians:
                    # R_i Exp(delta) turns body i by R_i delta (world): the angle by n . R_i delta.
                    for i, sign in ((ib, 1.0), (ia, -1.0)):
                        if i is None:
                            continue
                        dq_domega = sign * np.einsum("ni,nij->nj", axis, R_world_body[:, i])
                        Jq[:, c, 6 * i : 6 * i + 3] += dq_domega
                        Jv[:, c, 6 * nb + 6 * i + 3 : 6 * nb + 6 * i + 6] += dq_domega
            elif ch[0] == "slider":
                self._slider(c, ch, R_world_body, r_world_body, vel, w_world, q, qd,
                             (Jq, Jv) if jacobians else None)
            else:
                _, i, axis = ch
                q[:, c], qd[:, c] = r_world_body[:, i, axis], vel[:, i, axis]
                if jacobians:
                    Jq[:, c, 6 * i + 3 : 6 * i + 6] = R_world_body[:, i, axis]  # Pose3 retract moves t by R dv
                    Jv[:, c, 6 * nb + 6 * i + axis] = 1.0
        if jacobians:
            return q, qd, Jq, Jv
        return q, qd

    def _slider(self, c: int, ch: tuple, R_world_body: np.ndarray, r_world_body: np.ndarray, vel: np.ndarray,
                w_world: np.ndarray, q: np.ndarray, qd: np.ndarray, J: tuple | None) -> None:
        """Column c: a slider's displacement ``d = z . (o_b - o_a)`` [m] (z_a, o_a, o_b its axis and frame
        origins in the world, as :meth:`RigidModel.observe`) and its rate ``z' . (o_b - o_a) + z . (o_b' - o_a')``."""
        _, ia, s_a, z_local, ib, s_b = ch
        n, nb = len(R_world_body), self.nb
        R_b = R_world_body[:, ib]
        o_b = r_world_body[:, ib] + R_b @ s_b
        do_b = vel[:, ib, :3] + np.cross(w_world[:, ib], R_b @ s_b)
        if ia is None:
            R_a = np.broadcast_to(np.eye(3), (n, 3, 3))
            o_a, do_a, w_a = np.broadcast_to(s_a, (n, 3)), np.zeros((n, 3)), np.zeros((n, 3))
        else:
            R_a = R_world_body[:, ia]
            o_a = r_world_body[:, ia] + R_a @ s_a
            w_a = w_world[:, ia]
            do_a = vel[:, ia, :3] + np.cross(w_a, R_a @ s_a)
        z = R_a @ z_local
        gap = o_b - o_a
        q[:, c] = np.einsum("ni,ni->n", z, gap)
        qd[:, c] = np.einsum("ni,ni->n", np.cross(w_a, z), gap) + np.einsum("ni,ni->n", z, do_b - do_a)
        if J is None:
            return
        Jq, Jv = J
        # R_b Exp(dw) moves o_b by R_b (dw x s_b); Pose3 retract moves r_b by R_b dt.
        z_b = np.einsum("nji,nj->ni", R_b, z)  # z in body b's axes
        dd_dw_b = np.cross(s_b, z_b)
        Jq[:, c, 6 * ib : 6 * ib + 3] += dd_dw_b
        Jq[:, c, 6 * ib + 3 : 6 * ib + 6] += z_b
        Jv[:, c, 6 * nb + 6 * ib : 6 * nb + 6 * ib + 3] += z
        Jv[:, c, 6 * nb + 6 * ib + 3 : 6 * nb + 6 * ib + 6] += dd_dw_b
        if ia is not None:
            # R_a Exp(dw) turns the axis by R_a (dw x z_local) and moves o_a by R_a (dw x s_a).
            gap_a = np.einsum("nji,nj->ni", R_a, gap)
            dd_dw_a = np.cross(z_local, gap_a) - np.cross(s_a, z_local)
            Jq[:, c, 6 * ia : 6 * ia + 3] += dd_dw_a
            Jq[:, c, 6 * ia + 3 : 6 * ia + 6] -= z_local
            Jv[:, c, 6 * nb + 6 * ia : 6 * nb + 6 * ia + 3] -= z
            Jv[:, c, 6 * nb + 6 * ia + 3 : 6 * nb + 6 * ia + 6] += dd_dw_a


def joint_coordinates(model: RigidModel, states: State) -> tuple[np.ndarray, np.ndarray]:
    """Observed coordinates and their rates (n, n_obs) [rad, m; rad/s, m/s] of states with a leading axis n.

    The estimator's own read-out (hinge angles wrapped to (-pi, pi]), for
    comparing a batch solution or a simulation with the stream's estimates.
    """
    n = len(states.r)
    # One vmapped call: a JAX call per state and body costs more than the read-out itself.
    R_world_body = np.asarray(jax.vmap(quat.to_matrix)(np.asarray(states.e).reshape(-1, 4))).reshape(n, -1, 3, 3)
    vel = np.concatenate([np.asarray(states.v), np.asarray(states.w)], axis=2).reshape(n, -1)
    return Readout(model)(R_world_body, np.asarray(states.r), vel)
