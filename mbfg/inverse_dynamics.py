"""Inverse dynamics of a fixed-base kinematic tree: joint torques from angles, rates and accelerations, and
their regressor, linear in the ten standard inertial parameters of every link (:mod:`mbfg.kinematic_tree`)::

    tau(q, qd, qdd) = Y(q, qd, qdd) @ pi        tau: (n,) [N m or N], pi: (10 n,), Y: (n, 10 n)

This is the recursive Newton-Euler algorithm (RNEA; Featherstone 2008, "Rigid Body Dynamics Algorithms",
ch. 5) with spatial vectors (angular first) in world coordinates about the world origin. In those
coordinates the joint subspaces S_i of all joints are in one frame, and RNEA's recursions unroll into sums
over the tree's ancestor matrix A (A[i, j]: joint i moves link j)::

    v_j = sum_i A[i, j] S_i qd_i                                    (forward pass, velocities)
    a_j = a_0 + sum_i A[i, j] (S_i qdd_i + v_i x S_i qd_i)          (forward pass, accelerations; a_0 = -g)
    f_j = I_j a_j + v_j x* I_j v_j                                  (Newton-Euler of link j)
    tau_i = S_i . sum_j A[i, j] f_j                                 (backward pass)

so they are masked matrix products, vectorized over the links, with no loop over joints in the traced
program. Only the link poses are a recursion (each link's pose is its parent's times its joint's): a
``jax.lax.scan`` over the joints in tree order (parents first). Each f_j is computed in link j's frame,
where it is linear in link j's standard parameters, and moved to world coordinates; the regressor Y is the
Jacobian of that same function with respect to pi (exact: tau is linear in pi), so Y @ pi and tau are one
computation. Everything is vectorized over time samples with ``jax.vmap``; the tree's arrays are
arguments, so one compiled program serves every tree of the same number of joints.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import mbfg._jax  # noqa: F401  (float64)
from mbfg.errors import MbfgError
from mbfg.kinematic_tree import KinematicTree

#: Standard gravity along -z of the base frame [m/s^2].
GRAVITY = (0.0, 0.0, -9.81)


def _rotation(axis: jax.Array, angle: jax.Array) -> jax.Array:
    """Rodrigues: the rotation by ``angle`` [rad] about the unit ``axis`` (3,)."""
    K = _skew(axis)
    return jnp.eye(3) + jnp.sin(angle) * K + (1.0 - jnp.cos(angle)) * (K @ K)


def _skew(v: jax.Array) -> jax.Array:
    return jnp.array([[0.0, -v[2], v[1]], [v[2], 0.0, -v[0]], [-v[1], v[0], 0.0]])


def _poses(arrays: dict[str, jax.Array], q: jax.Array) -> tuple[jax.Array, jax.Array]:
    """World rotations (n, 3, 3) and origins (n, 3) of the moving links at the coordinates ``q`` (n,)."""
    n = q.shape[0]

    def step(carry: tuple[jax.Array, jax.Array], k: jax.Array) -> tuple[tuple[jax.Array, jax.Array], None]:
        Rs, ps = carry  # row 0: the base; row k + 1: joint k's link
        origin, axis, prismatic = arrays["origin"][k], arrays["axis"][k], arrays["prismatic"][k]
        Rp, pp = Rs[arrays["parent"][k] + 1], ps[arrays["parent"][k] + 1]
        R_joint = Rp @ origin[:3, :3]
        p_joint = pp + Rp @ origin[:3, 3]
        R = R_joint @ _rotation(axis, jnp.where(prismatic, 0.0, q[k]))
        p = p_joint + R_joint @ axis * jnp.where(prismatic, q[k], 0.0)
        return (Rs.at[k + 1].set(R), ps.at[k + 1].set(p)), None

    start = (jnp.zeros((n + 1, 3, 3)).at[0].set(jnp.eye(3)), jnp.zeros((n + 1, 3)))
    (Rs, ps), _ = jax.lax.scan(step, start, jnp.arange(n))
    return Rs[1:], ps[1:]


def _cross_motion(v: jax.Array, m: jax.Array) -> jax.Array:
    """v x m of spatial motion vectors (6,) (angular first)."""
    return jnp.concatenate([jnp.cross(v[:3], m[:3]), jnp.cross(v[:3], m[3:]) + jnp.cross(v[3:], m[:3])])


def _cross_force(v: jax.Array, f: jax.Array) -> jax.Array:
    """v x* f of a spatial motion vector and a spatial force (6,) (moment first)."""
    return jnp.concatenate([jnp.cross(v[:3], f[:3]) + jnp.cross(v[3:], f[3:]), jnp.cross(v[:3], f[3:])])


def _link_wrench(pi: jax.Array, v: jax.Array, a: jax.Array) -> jax.Array:
    """I a + v x* I v in the link frame: the spatial force (6,) that gives a link of standard parameters pi (10,)
    the spatial acceleration a at velocity v (6,), all about the link frame's origin; linear in pi."""
    m, h = pi[0], pi[1:4]
    I = jnp.array([[pi[4], pi[5], pi[7]], [pi[5], pi[6], pi[8]], [pi[7], pi[8], pi[9]]])

    def momentum(x: jax.Array) -> jax.Array:  # the spatial inertia about the origin, applied to x
        return jnp.concatenate([I @ x[:3] + jnp.cross(h, x[3:]), m * x[3:] - jnp.cross(h, x[:3])])

    return momentum(a) + _cross_force(v, momentum(v))


def sample_torques(pi: jax.Array, q: jax.Array, qd: jax.Array, qdd: jax.Array, arrays: dict[str, jax.Array]) -> jax.Array:
    """tau (n,) of one sample: RNEA as in the module docstring; pi (n, 10), q, qd, qdd (n,)."""
    R, p = _poses(arrays, q)
    prismatic = arrays["prismatic"][:, None]
    axis = jnp.einsum("nij,nj->ni", R, arrays["axis"])
    S = jnp.where(prismatic, jnp.concatenate([jnp.zeros_like(axis), axis], 1),
                  jnp.concatenate([axis, jnp.cross(p, axis)], 1))  # (n, 6) in world coordinates
    A = arrays["ancestors"]  # (n, n) of 0.0 / 1.0
    v = A.T @ (S * qd[:, None])
    cS = jax.vmap(_cross_motion)(v, S)
    a = arrays["a0"][None, :] + A.T @ (S * qdd[:, None] + cS * qd[:, None])

    # To link coordinates (omega_L = R^T omega, v_L = R^T (v - p x omega)), the wrench there, and back.
    def to_link(x: jax.Array, Rk: jax.Array, pk: jax.Array) -> jax.Array:
        return jnp.concatenate([Rk.T @ x[:3], Rk.T @ (x[3:] - jnp.cross(pk, x[:3]))])

    def to_world(f: jax.Array, Rk: jax.Array, pk: jax.Array) -> jax.Array:
        force = Rk @ f[3:]
        return jnp.concatenate([Rk @ f[:3] + jnp.cross(pk, force), force])

    vL = jax.vmap(to_link)(v, R, p)
    aL = jax.vmap(to_link)(a, R, p)
    f = jax.vmap(to_world)(jax.vmap(_link_wrench)(pi, vL, aL), R, p)  # (n, 6)
    return jnp.einsum("ik,ij,jk->i", S, A, f)


def sample_regressor(pi: jax.Array, q: jax.Array, qd: jax.Array, qdd: jax.Array, arrays: dict[str, jax.Array]) -> jax.Array:
    n = q.shape[0]
    return jax.jacfwd(sample_torques)(pi, q, qd, qdd, arrays).reshape(n, 10 * n)


_torques_batch = jax.jit(jax.vmap(sample_torques, in_axes=(None, 0, 0, 0, None)))
_regressor_batch = jax.jit(jax.vmap(sample_regressor, in_axes=(None, 0, 0, 0, None)))


def tree_arrays(tree: KinematicTree, gravity: Sequence[float] = GRAVITY) -> dict[str, Any]:
    """The tree's arrays as the compiled programs take them; ``gravity`` (3,) in the base frame [m/s^2]."""
    g = np.asarray(gravity, dtype=float)
    if g.shape != (3,) or not np.all(np.isfinite(g)):
        raise MbfgError(f"gravity: expected 3 finite numbers [m/s^2] in the base frame, got {np.asarray(gravity)!r}")
    return {
        "parent": jnp.asarray(tree.parent, dtype=jnp.int32), "origin": jnp.asarray(tree.origin),
        "axis": jnp.asarray(tree.axis), "prismatic": jnp.asarray(tree.prismatic),
        "ancestors": jnp.asarray(tree.ancestors(), dtype=float),
        "a0": jnp.concatenate([jnp.zeros(3), -jnp.asarray(g)]),  # the base accelerates up: gravity as inertia
    }


def _states(tree: KinematicTree, q: Any, qd: Any, qdd: Any) -> tuple[jax.Array, ...]:
    out = []
    for name, x in (("q", q), ("qd", qd), ("qdd", qdd)):
        arr = np.asarray(x, dtype=float)
        if arr.ndim == 1:
            arr = arr[None, :]
        if arr.ndim != 2 or arr.shape[1] != tree.n:
            raise MbfgError(f"{name}: expected shape (T, {tree.n}) (one column per joint of {tree.name}: "
                            f"{', '.join(tree.joints)}), got {np.shape(x)}")
        if not np.all(np.isfinite(arr)):
            row = int(np.argwhere(~np.isfinite(arr))[0, 0])
            raise MbfgError(f"{name}: row {row} is not finite; expected finite numbers")
        out.append(arr)
    if not out[0].shape == out[1].shape == out[2].shape:
        raise MbfgError(f"q, qd, qdd: expected one shape, got {out[0].shape}, {out[1].shape}, {out[2].shape}")
    return tuple(jnp.asarray(a) for a in out)


def _pi(tree: KinematicTree, pi: Any) -> jax.Array:
    arr = np.asarray(tree.pi if pi is None else pi, dtype=float)
    if arr.size != 10 * tree.n or not np.all(np.isfinite(arr)):
        raise MbfgError(f"pi: expected {10 * tree.n} finite standard parameters (10 per link, order of "
                        f"mbfg.kinematic_tree.PARAMETER_NAMES), got shape {arr.shape}")
    return jnp.asarray(arr.reshape(tree.n, 10))


def inverse_dynamics(tree: KinematicTree, q: Any, qd: Any, qdd: Any, pi: Any = None,
                     gravity: Sequence[float] = GRAVITY) -> np.ndarray:
    """Joint torques (T, n) [N m or N] of the samples q, qd, qdd (T, n) [rad, rad/s, rad/s^2 or m ...].

    ``pi``: (n, 10) or (10 n,) standard parameters (default the tree's, from the URDF). Raises MbfgError
    naming the argument for a wrong shape or a value that is not finite.
    """
    qs = _states(tree, q, qd, qdd)
    return np.asarray(_torques_batch(_pi(tree, pi), *qs, tree_arrays(tree, gravity)))


def regressor(tree: KinematicTree, q: Any, qd: Any, qdd: Any, gravity: Sequence[float] = GRAVITY) -> np.ndarray:
    """The regressor Y (T, n, 10 n) of the samples (T, n): ``inverse_dynamics(...)[k] == Y[k] @ pi.ravel()``;
    columns in the order of :attr:`KinematicTree.parameter_names`."""
    qs = _states(tree, q, qd, qdd)
    return np.asarray(_regressor_batch(jnp.zeros((tree.n, 10)), *qs, tree_arrays(tree, gravity)))


__all__ = ["GRAVITY", "inverse_dynamics", "regressor", "tree_arrays"]
