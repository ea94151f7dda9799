"""Unit quaternions for body orientations (Marklund et al. (2025), section 2.3; Marklund et al. (2025), section 3.5).

A quaternion ``e = (w, x, y, z)`` (scalar first, shape (4,)) rotates body-frame
vectors into the world frame: ``R_world_body = to_matrix(e)``.

The rotation update of Spook, eq. (2.13), multiplies on the right,
``e' = e * [cos(|psi|/2), psi/|psi| sin(|psi|/2)]``, so the rotation vector psi
is expressed in the *body* frame. That is GTSAM's convention too
(``Rot3.retract(xi) = R * Exp(xi)``), which is why mbfg keeps the angular
velocity of a body in its own frame: ``e_{k+1} = e_k boxplus h*omega_body``
(eq. 2.16) is then exactly GTSAM's retraction of the rotation by ``h*omega``.

Functions here are pure jax.numpy, work on single quaternions, and are
vmappable. None of them branches on values. The ``*_np`` helpers at the end are
NumPy twins over leading axes for set-up code.
"""

from __future__ import annotations

import numpy as np

from mbfg._jax import Array, jnp

# Below this squared angle a Taylor series replaces sin(x)/x: exact to float64
# and, unlike the closed form, with finite derivatives at zero.
_SMALL_SQ = 1e-10


def multiply(a: Array, b: Array) -> jnp.ndarray:
    """Hamilton product ``a * b`` of two quaternions (4,), scalar first."""
    aw, av = a[0], a[1:]
    bw, bv = b[0], b[1:]
    return jnp.concatenate([jnp.array([aw * bw - jnp.dot(av, bv)]), aw * bv + bw * av + jnp.cross(av, bv)])


def conjugate(e: Array) -> Array:
    """Conjugate (the inverse of a unit quaternion), shape (4,)."""
    return e * jnp.array([1.0, -1.0, -1.0, -1.0])


def exp(psi: Array) -> jnp.ndarray:
    """Unit quaternion of the rotation vector psi (3,) [rad], eq. (2.13)."""
    angle_sq = jnp.dot(psi, psi)
    small = angle_sq < _SMALL_SQ
    safe_sq = jnp.where(small, 1.0, angle_sq)
    angle = jnp.sqrt(safe_sq)
    # sin(angle/2)/angle and cos(angle/2), with their series near zero.
    s = jnp.where(small, 0.5 - angle_sq / 48.0, jnp.sin(0.5 * angle) / angle)
    c = jnp.where(small, 1.0 - angle_sq / 8.0, jnp.cos(0.5 * angle))
    return jnp.concatenate([jnp.array([c]), s * psi])


def log(e: Array) -> jnp.ndarray:
    """Rotation vector (3,) [rad] of a unit quaternion, the exact inverse of :func:`exp`.

    Takes the shorter of the two rotations that ``e`` and ``-e`` represent
    (angle in [0, pi]); this is eq. (3.19), used outside residuals.
    """
    e = jnp.where(e[0] < 0.0, -e, e)
    w, v = e[0], e[1:]
    v_sq = jnp.dot(v, v)
    small = v_sq < _SMALL_SQ
    v_norm = jnp.sqrt(jnp.where(small, 1.0, v_sq))
    # 2 atan2(|v|, w) / |v|; near zero 2/w (1 - |v|^2 / (3 w^2)).
    scale = jnp.where(small, 2.0 / w * (1.0 - v_sq / (3.0 * w * w)), 2.0 * jnp.arctan2(v_norm, w) / v_norm)
    return scale * v


def boxplus(e: Array, psi: Array) -> jnp.ndarray:
    """``e boxplus psi = e * exp(psi)``, eq. (2.14), renormalized against round-off."""
    out = multiply(e, exp(psi))
    return out / jnp.linalg.norm(out)


def boxminus(e1: Array, e0: Array) -> jnp.ndarray:
    """``e1 boxminus e0 = log(conj(e0) * e1)`` (3,), eq. (2.15): ``e0 boxplus psi == e1``."""
    return log(multiply(conjugate(e0), e1))


def boxminus_small(e1: Array, e0: Array) -> jnp.ndarray:
    """Small-angle rotation residual, Marklund et al. (2025) eq. (3.20), for residuals only.

    The exact difference (3.19) has derivatives that blow up as the angle
    approaches pi; residuals use a smooth approximation instead. The equation's
    text is stripped in our copy of the paper, so this is our choice of the family it
    describes: with ``d = conj(e0) * e1 = (w, v)``, ``psi ~= 2 w v``, which is
    ``sin(angle) * axis``: correct to first order (and third: error
    O(angle^3)), smooth everywhere, and the same for ``d`` and ``-d``.
    """
    d = multiply(conjugate(e0), e1)
    return 2.0 * d[0] * d[1:]


def to_matrix(e: Array) -> jnp.ndarray:
    """Rotation matrix R_world_body (3, 3) of a unit quaternion (4,)."""
    w, x, y, z = e[0], e[1], e[2], e[3]
    return jnp.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
            [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
            [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
        ]
    )


def from_matrix_jax(R: Array) -> jnp.ndarray:
    """Unit quaternion (4,) of a rotation matrix (3, 3), in JAX (differentiable, vmappable).

    Shepperd's method without branching: all four candidate formulas are
    evaluated with safe denominators and the best conditioned one is selected.
    The sign is arbitrary (e and -e are the same rotation).
    """
    trace = R[0, 0] + R[1, 1] + R[2, 2]
    diag = jnp.stack([trace, R[0, 0], R[1, 1], R[2, 2]])
    s = 0.5 * jnp.sqrt(jnp.maximum(1.0 + 2.0 * diag - trace, 1e-30))  # |w|, |x|, |y|, |z| candidates
    d = 4.0 * s
    cand = jnp.stack([
        jnp.stack([s[0], (R[2, 1] - R[1, 2]) / d[0], (R[0, 2] - R[2, 0]) / d[0], (R[1, 0] - R[0, 1]) / d[0]]),
        jnp.stack([(R[2, 1] - R[1, 2]) / d[1], s[1], (R[0, 1] + R[1, 0]) / d[1], (R[0, 2] + R[2, 0]) / d[1]]),
        jnp.stack([(R[0, 2] - R[2, 0]) / d[2], (R[0, 1] + R[1, 0]) / d[2], s[2], (R[1, 2] + R[2, 1]) / d[2]]),
        jnp.stack([(R[1, 0] - R[0, 1]) / d[3], (R[0, 2] + R[2, 0]) / d[3], (R[1, 2] + R[2, 1]) / d[3], s[3]]),
    ])
    return cand[jnp.argmax(diag)]


def from_matrix(R: Array) -> jnp.ndarray:
    """Unit quaternion (4,), w >= 0, of a rotation matrix (3, 3) (NumPy-side helper).

    Shepperd's method: picks the largest of w, x, y, z to divide by, so it is
    accurate for every rotation. Used to set up states, not inside residuals.
    """
    import numpy as np

    R = np.asarray(R, dtype=float)
    trace = np.trace(R)
    candidates = np.array([trace, R[0, 0], R[1, 1], R[2, 2]])
    i = int(np.argmax(candidates))
    if i == 0:
        w = 0.5 * np.sqrt(1.0 + trace)
        e = np.array([w, (R[2, 1] - R[1, 2]) / (4 * w), (R[0, 2] - R[2, 0]) / (4 * w), (R[1, 0] - R[0, 1]) / (4 * w)])
    elif i == 1:
        x = 0.5 * np.sqrt(1.0 + 2 * R[0, 0] - trace)
        e = np.array([(R[2, 1] - R[1, 2]) / (4 * x), x, (R[0, 1] + R[1, 0]) / (4 * x), (R[0, 2] + R[2, 0]) / (4 * x)])
    elif i == 2:
        y = 0.5 * np.sqrt(1.0 + 2 * R[1, 1] - trace)
        e = np.array([(R[0, 2] - R[2, 0]) / (4 * y), (R[0, 1] + R[1, 0]) / (4 * y), y, (R[1, 2] + R[2, 1]) / (4 * y)])
    else:
        z = 0.5 * np.sqrt(1.0 + 2 * R[2, 2] - trace)
        e = np.array([(R[1, 0] - R[0, 1]) / (4 * z), (R[0, 2] + R[2, 0]) / (4 * z), (R[1, 2] + R[2, 1]) / (4 * z), z])
    e = e if e[0] >= 0 else -e
    return e / np.linalg.norm(e)


# -- NumPy batch helpers -------------------------------------------------------------
# Setting up thousands of states (a log's initial trajectory, GTSAM values) op by op in
# eager JAX cost milliseconds per state; these are the same formulas in NumPy over
# leading axes, for set-up code only (tests check them against the JAX functions).


def to_matrix_np(e: np.ndarray) -> np.ndarray:
    """Rotation matrices R_world_body (..., 3, 3) of unit quaternions e (..., 4), as :func:`to_matrix`."""
    e = np.asarray(e, dtype=float)
    w, x, y, z = e[..., 0], e[..., 1], e[..., 2], e[..., 3]
    rows = [
        [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
        [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
        [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
    ]
    return np.stack([np.stack(r, axis=-1) for r in rows], axis=-2)


def boxminus_np(e1: np.ndarray, e0: np.ndarray) -> np.ndarray:
    """``e1 boxminus e0`` (..., 3) [rad] of unit quaternions (..., 4), as :func:`boxminus` (eq. 2.15)."""
    e0, e1 = np.asarray(e0, dtype=float), np.asarray(e1, dtype=float)
    # d = conj(e0) * e1 (Hamilton product), then log(d) with the shorter rotation.
    a_w, a_v = e0[..., :1], -e0[..., 1:]
    b_w, b_v = e1[..., :1], e1[..., 1:]
    d_w = a_w * b_w - np.sum(a_v * b_v, axis=-1, keepdims=True)
    d_v = a_w * b_v + b_w * a_v + np.cross(a_v, b_v)
    sign = np.where(d_w < 0.0, -1.0, 1.0)
    d_w, d_v = sign * d_w, sign * d_v
    v_sq = np.sum(d_v * d_v, axis=-1, keepdims=True)
    small = v_sq < _SMALL_SQ
    v_norm = np.sqrt(np.where(small, 1.0, v_sq))
    with np.errstate(divide="ignore", invalid="ignore"):
        scale = np.where(small, 2.0 / d_w * (1.0 - v_sq / (3.0 * d_w * d_w)), 2.0 * np.arctan2(v_norm, d_w) / v_norm)
    return scale * d_v


def from_matrix_np(R: np.ndarray) -> np.ndarray:
    """Unit quaternions (..., 4), w >= 0, of rotation matrices R (..., 3, 3), as :func:`from_matrix`
    (Shepperd's method, the same branch per matrix)."""
    R = np.asarray(R, dtype=float)
    trace = np.trace(R, axis1=-2, axis2=-1)
    d0, d1, d2 = R[..., 0, 0], R[..., 1, 1], R[..., 2, 2]
    largest = np.argmax(np.stack([trace, d0, d1, d2], axis=-1), axis=-1)
    s21, s12, s02, s20, s10, s01 = R[..., 2, 1], R[..., 1, 2], R[..., 0, 2], R[..., 2, 0], R[..., 1, 0], R[..., 0, 1]
    with np.errstate(divide="ignore", invalid="ignore"):  # the branches not taken divide by ~0: discarded
        w = 0.5 * np.sqrt(np.maximum(1.0 + trace, 0.0))
        x = 0.5 * np.sqrt(np.maximum(1.0 + 2 * d0 - trace, 0.0))
        y = 0.5 * np.sqrt(np.maximum(1.0 + 2 * d1 - trace, 0.0))
        z = 0.5 * np.sqrt(np.maximum(1.0 + 2 * d2 - trace, 0.0))
        branches = np.stack([
            np.stack([w, (s21 - s12) / (4 * w), (s02 - s20) / (4 * w), (s10 - s01) / (4 * w)], axis=-1),
            np.stack([(s21 - s12) / (4 * x), x, (s01 + s10) / (4 * x), (s02 + s20) / (4 * x)], axis=-1),
            np.stack([(s02 - s20) / (4 * y), (s01 + s10) / (4 * y), y, (s12 + s21) / (4 * y)], axis=-1),
            np.stack([(s10 - s01) / (4 * z), (s02 + s20) / (4 * z), (s12 + s21) / (4 * z), z], axis=-1),
        ], axis=-2)
    e = np.take_along_axis(branches, largest[..., None, None], axis=-2)[..., 0, :]
    e = np.where(e[..., :1] >= 0, e, -e)
    return e / np.linalg.norm(e, axis=-1, keepdims=True)
