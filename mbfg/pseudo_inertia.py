"""Physically consistent inertial parameters: the 4x4 pseudo-inertia of a rigid body and its log-Cholesky
parametrization (Rucker and Wensing 2022, "Smooth parameterization of rigid-body inertia", IEEE Robotics and
Automation Letters 7(2)).

A link's ten standard parameters (:mod:`mbfg.kinematic_tree`: mass m [kg], first moment h = m c [kg m],
inertia I about the link frame's origin in link axes [kg m^2]) are the pseudo-inertia (Wensing, Kim and
Slotine 2017)::

    J = [[Sigma, h], [h^T, m]]          Sigma = 0.5 tr(I) 1 - I   (the second moment of the mass, int r r^T dm)

and they are those of some mass distribution (physically consistent: m > 0, the principal moments about the
centre of mass positive and satisfying the triangle inequalities) exactly when J is positive definite. The
log-Cholesky parametrization writes J = U U^T with U upper triangular of positive diagonal::

    U = e^alpha [[e^d1, s12, s13, t1],
                 [0,    e^d2, s23, t2],
                 [0,    0,    e^d3, t3],
                 [0,    0,    0,    1 ]]

    theta = (alpha, d1, d2, d3, s12, s23, s13, t1, t2, t3)        (10,), every value in R^10

so that every theta gives a positive-definite J (a consistent body) and every consistent body has exactly one
theta (the Cholesky factor of the reversed matrix). The map theta -> pi is smooth (polynomial in e^alpha,
e^d, s, t), so a Levenberg-Marquardt on theta keeps every iterate consistent with no bounds. The mass is
e^(2 alpha).

Arrays carry the links on their leading axis: theta and pi (n, 10), J (n, 4, 4); :func:`standard_from_log_cholesky`
is JAX (traced, differentiable), the inverse :func:`log_cholesky_from_standard` is NumPy.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import mbfg._jax  # noqa: F401  (float64)
from mbfg.errors import MbfgError

#: Names of the ten log-Cholesky coordinates of a link, in the order of ``theta``.
LOG_CHOLESKY_NAMES = ("alpha", "d1", "d2", "d3", "s12", "s23", "s13", "t1", "t2", "t3")

# Index pairs of the symmetric 3x3 inertia in the standard order (Ixx, Ixy, Iyy, Ixz, Iyz, Izz).
_INERTIA_ROWS = np.array([0, 0, 1, 0, 1, 2])
_INERTIA_COLS = np.array([0, 1, 1, 2, 2, 2])


def _inertia(pi: Any, xp: Any) -> Any:
    """(n, 3, 3) inertia tensors of standard parameters (n, 10)."""
    xx, xy, yy, xz, yz, zz = (pi[:, 4 + k] for k in range(6))
    return xp.stack([xp.stack([xx, xy, xz], -1), xp.stack([xy, yy, yz], -1), xp.stack([xz, yz, zz], -1)], -2)


def pseudo_inertia(pi: Any) -> Any:
    """The pseudo-inertias J (n, 4, 4) [kg, kg m, kg m^2] of standard parameters ``pi`` (n, 10) (module
    docstring); JAX (traced, differentiable)."""
    pi = jnp.asarray(pi)
    I = _inertia(pi, jnp)
    sigma = 0.5 * jnp.trace(I, axis1=-2, axis2=-1)[:, None, None] * jnp.eye(3) - I
    h = pi[:, 1:4]
    top = jnp.concatenate([sigma, h[:, :, None]], axis=2)
    bottom = jnp.concatenate([h, pi[:, :1]], axis=1)[:, None, :]
    return jnp.concatenate([top, bottom], axis=1)


def standard_from_pseudo_inertia(J: Any) -> Any:
    """The standard parameters (n, 10) of pseudo-inertias ``J`` (n, 4, 4): I = tr(Sigma) 1 - Sigma; JAX."""
    sigma = J[:, :3, :3]
    I = jnp.trace(sigma, axis1=-2, axis2=-1)[:, None, None] * jnp.eye(3) - sigma
    return jnp.concatenate([J[:, 3, 3:4], J[:, :3, 3], I[:, _INERTIA_ROWS, _INERTIA_COLS]], axis=1)


def log_cholesky_factor(theta: Any) -> Any:
    """U (n, 4, 4), upper triangular with positive diagonal, of log-Cholesky coordinates ``theta`` (n, 10); JAX."""
    theta = jnp.asarray(theta)
    alpha, d1, d2, d3, s12, s23, s13, t1, t2, t3 = (theta[:, k] for k in range(10))
    zero, one = jnp.zeros_like(alpha), jnp.ones_like(alpha)
    U = jnp.stack([
        jnp.stack([jnp.exp(d1), s12, s13, t1], -1),
        jnp.stack([zero, jnp.exp(d2), s23, t2], -1),
        jnp.stack([zero, zero, jnp.exp(d3), t3], -1),
        jnp.stack([zero, zero, zero, one], -1),
    ], -2)
    return jnp.exp(alpha)[:, None, None] * U


def standard_from_log_cholesky(theta: Any) -> jax.Array:
    """The standard parameters pi (n, 10) of log-Cholesky coordinates ``theta`` (n, 10): J = U U^T, then
    :func:`standard_from_pseudo_inertia`. Physically consistent for every finite theta; JAX (traced,
    differentiable: the map is smooth)."""
    U = log_cholesky_factor(theta)
    return standard_from_pseudo_inertia(U @ jnp.swapaxes(U, -1, -2))


def log_cholesky_from_standard(pi: Any, names: tuple[str, ...] | None = None) -> np.ndarray:
    """The log-Cholesky coordinates theta (n, 10) of standard parameters ``pi`` (n, 10) or (10 n,).

    U is the upper-triangular factor of J = U U^T: with P the reversal of the four rows, P J P = L L^T
    (the ordinary Cholesky factor L) and U = P L P. Raises MbfgError naming the link (``names[k]``, or its
    index) whose pseudo-inertia is not positive definite: no theta reaches a body that is not consistent.
    """
    arr = np.asarray(pi, dtype=float)
    if arr.ndim == 1 and arr.size % 10 == 0:
        arr = arr.reshape(-1, 10)
    if arr.ndim != 2 or arr.shape[1] != 10 or not np.all(np.isfinite(arr)):
        raise MbfgError(f"pi: expected finite standard parameters of shape (n, 10) or (10 n,), got shape "
                        f"{np.shape(pi)}")
    J = np.asarray(pseudo_inertia(arr))
    eig = np.linalg.eigvalsh(J).min(axis=1)
    for k in np.flatnonzero(~(eig > 0.0)):
        link = names[k] if names is not None else f"link {k}"
        raise MbfgError(f"{link}: its pseudo-inertia is not positive definite (smallest eigenvalue {eig[k]:.3g}); "
                        f"expected a physically consistent body: mass > 0, principal moments about the centre of "
                        f"mass > 0 and satisfying the triangle inequalities")
    L = np.linalg.cholesky(J[:, ::-1, ::-1])
    U = L[:, ::-1, ::-1]
    e_alpha = U[:, 3, 3]
    V = U / e_alpha[:, None, None]
    return np.stack([np.log(e_alpha), np.log(V[:, 0, 0]), np.log(V[:, 1, 1]), np.log(V[:, 2, 2]),
                     V[:, 0, 1], V[:, 1, 2], V[:, 0, 2], V[:, 0, 3], V[:, 1, 3], V[:, 2, 3]], axis=1)


def is_physically_consistent(pi: Any, tolerance: float = 0.0) -> np.ndarray:
    """(n,) bool: whether each link's pseudo-inertia is positive definite (smallest eigenvalue above
    ``tolerance`` times its largest) for standard parameters ``pi`` (n, 10)."""
    J = np.asarray(pseudo_inertia(np.asarray(pi, dtype=float).reshape(-1, 10)))
    eig = np.linalg.eigvalsh(J)
    return eig[:, 0] > tolerance * np.abs(eig[:, -1])


__all__ = ["LOG_CHOLESKY_NAMES", "is_physically_consistent", "log_cholesky_factor", "log_cholesky_from_standard",
           "pseudo_inertia", "standard_from_log_cholesky", "standard_from_pseudo_inertia"]
