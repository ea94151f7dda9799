"""JAX Lie-group operations in GTSAM's conventions.

Rotations are 3x3 matrices ``R_world_body``; a tangent vector ``xi`` perturbs on
the right, ``R * Exp(xi)``, exactly like ``gtsam.Rot3.retract`` (GTSAM's
retraction agrees with the exponential map to first order, which is all a
Jacobian sees). A ``Pose3`` is a 4x4 homogeneous matrix ``T_world_body`` with
tangent ``[omega, v]``: ``T * Exp([omega, v])``.
"""

from __future__ import annotations

import numpy as np

from mbfg._jax import jnp

# Below this squared angle the Taylor series is exact to float64 precision and,
# unlike sin(theta)/theta, has a finite derivative at zero.
_SMALL_ANGLE_SQ = 1e-8


def hat(omega: jnp.ndarray) -> jnp.ndarray:
    """Skew matrix [omega]x, shape (3, 3), so that hat(a) @ b == cross(a, b)."""
    wx, wy, wz = omega[0], omega[1], omega[2]
    zero = jnp.zeros_like(wx)
    return jnp.array([[zero, -wz, wy], [wz, zero, -wx], [-wy, wx, zero]])


def so3_exp(omega: jnp.ndarray) -> jnp.ndarray:
    """Rodrigues' formula: rotation vector (3,) [rad] -> rotation matrix (3, 3)."""
    theta_sq = jnp.dot(omega, omega)
    small = theta_sq < _SMALL_ANGLE_SQ
    safe_theta_sq = jnp.where(small, 1.0, theta_sq)
    safe_theta = jnp.sqrt(safe_theta_sq)
    a = jnp.where(small, 1.0 - theta_sq / 6.0, jnp.sin(safe_theta) / safe_theta)
    b = jnp.where(small, 0.5 - theta_sq / 24.0, (1.0 - jnp.cos(safe_theta)) / safe_theta_sq)
    K = hat(omega)
    return jnp.eye(3) + a * K + b * (K @ K)


def so3_log(R: jnp.ndarray) -> jnp.ndarray:
    """Inverse of :func:`so3_exp` for angles below pi: (3, 3) -> (3,) [rad].

    Differentiable at the identity: the small-angle branch never evaluates
    arccos at 1, whose derivative is infinite (and would leak NaN through jnp.where).
    """
    cos_theta = (jnp.trace(R) - 1.0) / 2.0
    vee = jnp.array([R[2, 1] - R[1, 2], R[0, 2] - R[2, 0], R[1, 0] - R[0, 1]])
    small = cos_theta > 1.0 - 1e-8
    theta = jnp.arccos(jnp.where(small, 0.0, jnp.clip(cos_theta, -1.0, 1.0)))
    scale_large = theta / (2.0 * jnp.sin(theta))
    theta_sq = 2.0 * (1.0 - cos_theta)  # = theta^2 + O(theta^4)
    scale = jnp.where(small, 0.5 + theta_sq / 12.0, scale_large)
    return scale * vee


def rot3_retract(R: jnp.ndarray, xi: jnp.ndarray) -> jnp.ndarray:
    """Right perturbation ``R * Exp(xi)`` (GTSAM ``Rot3.retract``)."""
    return R @ so3_exp(xi)


def rot3_tangent_line(R: jnp.ndarray, xi: jnp.ndarray) -> jnp.ndarray:
    """``R (I + [xi]x)``: the line through R with the velocity of ``R * Exp(xi)`` at ``xi = 0``.

    Not a rotation for ``xi != 0``; only for Jacobians at ``xi = 0``, where any curve
    through R with that velocity gives the same derivative, and this one costs a
    matrix product instead of Rodrigues' formula and its small-angle branches.
    """
    return R + R @ hat(xi)


def pose3_tangent_line(T: jnp.ndarray, xi: jnp.ndarray) -> jnp.ndarray:
    """``(R (I + [omega]x), t + R v)``: the tangent line of :func:`pose3_retract` at ``xi = 0`` (Jacobians only)."""
    R = T[:3, :3]
    top = jnp.concatenate([rot3_tangent_line(R, xi[:3]), (T[:3, 3] + R @ xi[3:])[:, None]], axis=1)
    return jnp.concatenate([top, T[3:]], axis=0)


def rot2_tangent_line(R: jnp.ndarray, xi: jnp.ndarray) -> jnp.ndarray:
    """``R (I + theta [[0, -1], [1, 0]])``: the tangent line of GTSAM's ``Rot2.retract`` (``R * Exp(theta)``)
    at ``xi = [theta] = 0`` (Jacobians only). R (2, 2), xi (1,) [rad]."""
    return R + xi[0] * (R @ jnp.array([[0.0, -1.0], [1.0, 0.0]]))


def pose2_tangent_line(P: jnp.ndarray, xi: jnp.ndarray) -> jnp.ndarray:
    """``P (I + hat(xi))`` with ``hat(xi) = [[0, -omega, v_x], [omega, 0, v_y], [0, 0, 0]]``: the tangent line of
    GTSAM's ``Pose2.retract`` (``P * Exp(xi)``, xi = [v_x, v_y, omega]) at ``xi = 0`` (Jacobians only).
    P (3, 3) homogeneous."""
    hat2 = jnp.array([[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 0.0]]) * xi[2]
    hat2 = hat2.at[:2, 2].set(xi[:2])
    return P + P @ hat2


def pose3_retract(T: jnp.ndarray, xi: jnp.ndarray) -> jnp.ndarray:
    """First-order GTSAM ``Pose3.retract`` with tangent ``xi = [omega, v]``.

    ``(R, t) -> (R Exp(omega), t + R v)``; this equals ``T * Exp(xi)`` to first
    order, which is what the Jacobian at ``xi = 0`` needs.
    """
    R = T[:3, :3]
    t = T[:3, 3]
    R_new = R @ so3_exp(xi[:3])
    t_new = t + R @ xi[3:]
    top = jnp.concatenate([R_new, t_new[:, None]], axis=1)
    return jnp.concatenate([top, jnp.array([[0.0, 0.0, 0.0, 1.0]])], axis=0)


# -- NumPy batch helper ---------------------------------------------------------------
# Reading many states out of a smoother (one retraction per pose per state) in one vectorized call
# instead of one GTSAM call per pose; tests/test_stream_chain.py checks it against gtsam.Pose3.retract.


def pose3_retract_np(T: np.ndarray, xi: np.ndarray) -> np.ndarray:
    """GTSAM's ``Pose3.retract`` (the exponential map, ``T * Exp(xi)``) over a leading axis, in NumPy.

    T: (M, 4, 4) poses T_world_body [m]; xi: (M, 6) tangents [omega [rad], v [m]]. Returns (M, 4, 4).
    ``Exp([omega, v]) = (Exp(omega), J_l(omega) v)``, with the left Jacobian of SO(3)
    ``J_l = I + (1 - cos theta) / theta^2 K + (theta - sin theta) / theta^3 K^2``, K = [omega]x.
    """
    omega, v = xi[:, :3], xi[:, 3:]
    theta_sq = np.einsum("mi,mi->m", omega, omega)
    small = theta_sq < _SMALL_ANGLE_SQ
    safe_sq = np.where(small, 1.0, theta_sq)
    theta = np.sqrt(safe_sq)
    a = np.where(small, 1.0 - theta_sq / 6.0, np.sin(theta) / theta)
    b = np.where(small, 0.5 - theta_sq / 24.0, (1.0 - np.cos(theta)) / safe_sq)
    c = np.where(small, 1.0 / 6.0 - theta_sq / 120.0, (theta - np.sin(theta)) / (safe_sq * theta))
    K = np.zeros((len(xi), 3, 3))
    K[:, 0, 1], K[:, 0, 2], K[:, 1, 2] = -omega[:, 2], omega[:, 1], -omega[:, 0]
    K[:, 1, 0], K[:, 2, 0], K[:, 2, 1] = omega[:, 2], -omega[:, 1], omega[:, 0]
    KK = K @ K
    eye = np.eye(3)
    exp = np.zeros((len(xi), 4, 4))
    exp[:, :3, :3] = eye + a[:, None, None] * K + b[:, None, None] * KK
    exp[:, :3, 3] = np.einsum("mij,mj->mi", eye + b[:, None, None] * K + c[:, None, None] * KK, v)
    exp[:, 3, 3] = 1.0
    return T @ exp
