"""Residuals of joint state-parameter estimation for rigid-body models (Marklund et al. (2025) sections 2.6-3.3).

Pure JAX, no GTSAM: the factors in :mod:`mbfg.factors` wrap these. A state
x_k = (q_k, v_k) is a :class:`~mbfg.rigid.State`; ``p`` the parameter values.

- :func:`impulse` -- the inverse-dynamics impulse residuals Delta p_u, Delta p_q
  (3.6, 3.7): the external impulse needed to go from x_k to x_{k+1}, with the
  equality multipliers from (2.30) and the complementarity multipliers from the
  LCP of (2.31), solved exactly in closed form (:mod:`mbfg.complementarity`).
- :func:`observation` -- h(x_k; chi) - y_k (3.5), hinge angle differences wrapped
  to (-pi, pi], missing readings masked out.
- :func:`initial_state` -- the initial-state projection residuals (3.14, 3.15)
  scaled by the projected mass matrix (3.12, 3.13).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mbfg import complementarity
from mbfg import quaternion as quat
from mbfg._jax import jax, jnp
from mbfg.lcp import solve_lcp
from mbfg.rigid import RigidModel, State


def configuration_difference(x1: State, x0: State) -> jnp.ndarray:
    """``q1 boxminus q0`` (6 nb,): per body [r1 - r0 (world), small-angle rotation difference (3.20), body frame]."""
    dr = x1.r - x0.r
    dtheta = jax.vmap(quat.boxminus_small)(x1.e, x0.e)
    return jnp.concatenate([dr, dtheta], axis=1).reshape(-1)


def multipliers(model: RigidModel, x0: State, v1: jnp.ndarray, u: jnp.ndarray, p: Mapping[str, Any], h: float,
                lcp: bool = False) -> tuple[jnp.ndarray, jnp.ndarray, jnp.ndarray]:
    """Constraint impulses of the step x_k -> (., v_{k+1}) given the new velocity (inverse dynamics).

    lam_A from (2.30): ``A v_{k+1} + Sigma_A lam_A + a = 0``; lam_B from (2.31):
    ``B v_{k+1} + Sigma_B lam_B + b = w_B >= 0``, ``lam_B >= 0``, ``lam_B . w_B = 0``,
    an LCP with matrix Sigma_B solved exactly: with v_{k+1} given it splits into one
    small group per frictional hinge or contact, each solved in closed form, all groups of a shape
    in one vectorized expression (:mod:`mbfg.complementarity`; ``lcp=True`` solves the whole LCP by Lemke's method
    instead, the reference the tests compare with).

    Returns (lam_A (nA,), lam_B (nB,), the constraint impulse ``A^T lam_A + B^T lam_B``
    (6 nb,)), computed with the rows of :meth:`RigidModel.position_rows`
    (A = rows_f.A J_pos, B = rows_f.B J_pos) as ``J_pos^T (rows_f.A^T lam_A + rows_f.B^T lam_B)``.
    """
    rows_f, J, J_T = model.position_rows(x0, u, p, h)
    Jv1 = J(v1)
    lam_A = -rows_f.Sigma_A_inv * (rows_f.a + rows_f.A @ Jv1)
    lam_B = jnp.zeros(rows_f.B.shape[0])
    if rows_f.B.shape[0]:
        q_B = rows_f.b + rows_f.B @ Jv1
        if lcp:
            Sigma_B = model.rows(x0, u, p, h).Sigma_B
            assert Sigma_B is not None  # rows() fills it; only position_rows() leaves it None
            lam_B = solve_lcp(Sigma_B, q_B).z
        else:
            C = model.arrays.complementarity
            lam_B = complementarity.solve_batches(q_B, tuple(b.groups for b in C.batches), rows_f.friction, C.order)
    constraint_impulse = J_T(rows_f.A.T @ lam_A + rows_f.B.T @ lam_B)
    return lam_A, lam_B, constraint_impulse


def impulse(model: RigidModel, x0: State, x1: State, u: jnp.ndarray, p: Mapping[str, Any], h: float,
            lcp: bool = False) -> jnp.ndarray:
    """Impulse residuals [Delta p_u; Delta p_q] (12 nb,) of eqs. 3.6-3.7 [N s, N m s].

    ``Delta p_u = M (v_{k+1} - v_k) - A^T lam_A - B^T lam_B - h (f + f_g)``,
    ``Delta p_q = M ((q_{k+1} boxminus q_k)/h - v_k) - A^T lam_A - B^T lam_B - h (f + f_g)``,
    with f + f_g (gravity, gyroscopic, applied) and the rows at x_k, and the
    multipliers from v_{k+1} (:func:`multipliers`). Zero exactly when x_{k+1}
    is the Spook step from x_k (for Delta p_q: up to the small-angle rotation
    difference of 3.20). The rows enter through J_pos products only
    (:meth:`RigidModel.position_rows`), which keeps the Jacobian of this residual cheap.
    """
    M = model.mass_diagonal(p)
    v0, v1 = x0.velocity(), x1.velocity()
    _, _, constraint_impulse = multipliers(model, x0, v1, u, p, h, lcp)
    rest = constraint_impulse + h * model.forces(x0, p, M)
    dp_u = M * (v1 - v0) - rest
    dp_q = M * (configuration_difference(x1, x0) / h - v0) - rest
    return jnp.concatenate([dp_u, dp_q])


def wrap_angle(x: jnp.ndarray) -> jnp.ndarray:
    """Angle difference wrapped to (-pi, pi]."""
    return jnp.arctan2(jnp.sin(x), jnp.cos(x))


def observation(model: RigidModel, x: State, p: Mapping[str, Any], y: jnp.ndarray, mask: jnp.ndarray) -> jnp.ndarray:
    """Observation residual h(x_k; chi) - y_k (n_obs,), eq. 3.5 [rad, m].

    Hinge angles are compared modulo 2 pi (an encoder's unwrapped reading and
    the model's wrapped angle). ``mask`` (n_obs,) is 1 for a reading, 0 for a
    missing one: a missing reading contributes neither cost nor gradient (its
    ``y`` may be anything finite).
    """
    hinge = jnp.asarray(model.angle_observation_mask(), dtype=float)
    diff = model.observe(x, p) - y
    diff = hinge * wrap_angle(diff) + (1.0 - hinge) * diff
    return mask * diff


def projected_mass(model: RigidModel, x: State, p: Mapping[str, Any], h: float) -> jnp.ndarray:
    """M_Sigma = A^T Sigma_A^-1 A + M (6nb, 6nb), eq. 3.12, with the equality rows at x."""
    rows = model.rows(x, jnp.zeros(len(model.controls)), p, h)
    return rows.A.T @ (rows.Sigma_A_inv[:, None] * rows.A) + jnp.diag(model.mass_diagonal(p))


def initial_state(model: RigidModel, x: State, p: Mapping[str, Any], h: float) -> jnp.ndarray:
    """Initial-state residuals [h^-1 M_Sigma Delta q_0; M_Sigma Delta v_0] (12 nb,), eqs. 3.12-3.15.

    ``Delta q_0 = -G^+ g(q_0)`` is the smallest configuration change that
    removes the violation of the holonomic constraints g, and
    ``Delta v_0 = G^+ G v_0`` the velocity normal to the constraint surface,
    with ``G^+ = G^T (G G^T)^-1``. (The seed prints (G^T G)^-1 G^T and G^T G:
    these equal G^+ and G^+ G when the rows of G are orthonormal; the
    pseudo-inverse is what removes the violation in general.) g collects the
    rows of every joint, frictional ones included.
    """
    f_pos, J_pos = model.position_jacobian(x, p)
    idx = model.holonomic_rows()
    g, G = f_pos[idx], J_pos[idx]
    GGt = G @ G.T
    dq = -G.T @ jnp.linalg.solve(GGt, g)
    dv = G.T @ jnp.linalg.solve(GGt, G @ x.velocity())
    M_sigma = projected_mass(model, x, p, h)
    return jnp.concatenate([M_sigma @ dq / h, M_sigma @ dv])
