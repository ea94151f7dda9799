"""The rows of a rigid model's Spook system at one step (Marklund et al. (2025) eqs. 2.8-2.11, 2.17-2.19, 2.24-2.25).

:func:`assemble_rows` turns the position functions, their Jacobian and J v_k into A, Sigma_A, a
(joints' holonomic rows, viscous drag F.2, motors F.3) and B, Sigma_B, b (dry joints F.4, Coulomb
bounds, contacts; their friction rows from :mod:`mbfg.rigid.friction`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from mbfg import complementarity
from mbfg._jax import jnp
from mbfg.parts import ROTATIONAL_FRICTION_DISTANCE, Joint, resolve
from mbfg.rigid.arrays import take
from mbfg.rigid.friction import _coulomb, _friction_data, _friction_rows, _stribeck, contact_normal_b
from mbfg.rigid.joint_types import joint_type
from mbfg.rigid.layout import Rows

if TYPE_CHECKING:  # annotations only: the model imports this module
    from mbfg.rigid.arrays import ModelArrays
    from mbfg.rigid.model import RigidModel


def assemble_rows(model: RigidModel, f_pos: jnp.ndarray, J_pos: jnp.ndarray, Jv: jnp.ndarray, u: jnp.ndarray,
                  p: Mapping[str, Any], h: float | jnp.ndarray, dense: bool = True,
                  vector: jnp.ndarray | None = None) -> Rows:
    """The rows from the position functions f_pos (n_pos,), their Jacobian J_pos (n_pos, n) and
    J_pos v_k (n_pos,); A and B are built only by copying signed rows of J_pos. ``dense``: build
    the (nB, nB) Sigma_B too (the stepper's LCP); else only its per-group entries. ``vector``: the
    model's parameter vector of ``p`` (:meth:`ModelArrays.parameter_vector`) when the caller has it."""
    L = model.layout
    X = model.arrays
    nv = J_pos.shape[1]
    vector = X.parameter_vector(p) if vector is None else vector
    A, Sigma_A, Sigma_A_inv, a = equality_rows(X, f_pos, J_pos, Jv, u, vector, h)
    B = jnp.zeros((L.n_B, nv))
    Sigma_B, b = (jnp.zeros((L.n_B, L.n_B)) if dense else None), jnp.zeros(L.n_B)
    friction: list[complementarity.GroupData] = []

    # The complementarity rows (dry friction, Coulomb bounds, contacts) are still built part by part.
    for block in L.blocks:
        kind = block[0]
        if kind in ("holonomic", "viscous", "motor"):
            continue
        if kind == "dry_joint":
            _, j, pos, coordinate, i0 = block
            g, G = f_pos[pos], J_pos[pos]
            eps, tau = joint_compliance(j, p)
            gamma = 1.0 / (1.0 + 4.0 * tau / h)
            n_g = g.shape[0]
            normals = slice(i0, i0 + 2 * n_g)
            B = B.at[normals].set(jnp.concatenate([G, -G]))
            sigma_N = jnp.tile(4.0 / h**2 * eps * gamma, 2)
            b_g = 4.0 / h * gamma * g - gamma * Jv[pos]  # (2.24), row 2
            b = b.at[normals].set(jnp.concatenate([b_g, -b_g]))
            G_bar = J_pos[coordinate]
            mu_r = jnp.asarray(resolve(j.dry, p), dtype=float) + _stribeck(j, Jv[coordinate], p)
            # Translational rows first: 3 on a hinge, 2 on a slider; the rest are rotational.
            n_lin = joint_type(j).n_lin
            U = jnp.concatenate([jnp.full(n_lin, mu_r), jnp.full(n_g - n_lin, mu_r / ROTATIONAL_FRICTION_DISTANCE)])
            data = _friction_data(sigma_N, jnp.tile(U, 2), 1, resolve(j.friction_compliance, p))
            B, Sigma_B = _friction_rows(B, Sigma_B, i0 + 2 * n_g, jnp.stack([G_bar, -G_bar]), normals, data)
            b = b.at[i0 + 2 * n_g + 2].set(h * _coulomb(j, None, p))  # the load-independent part of the bound
            friction.append(data)
        elif kind == "coulomb":
            # The bound row ``U lam_N - E^T lam_T + Delta sigma + b = w_sigma`` of (2.24) without normal
            # rows and with b = h F_c: the friction impulse of the step is at most h F_c.
            _, j, coordinate, i0 = block
            G_bar = J_pos[coordinate]
            data = _friction_data(jnp.zeros(0), jnp.zeros(0), 1, resolve(j.friction_compliance, p))
            B, Sigma_B = _friction_rows(B, Sigma_B, i0, jnp.stack([G_bar, -G_bar]), slice(i0, i0), data)
            b = b.at[i0 + 2].set(h * _coulomb(j, Jv[coordinate], p))
            friction.append(data)
        elif kind == "contact":
            _, c, pos, i0 = block
            gap, C = f_pos[pos.start], J_pos[pos.start]
            eps = jnp.asarray(resolve(c.eps, p), dtype=float)
            tau = jnp.asarray(resolve(c.tau, p), dtype=float)
            gamma = 1.0 / (1.0 + 4.0 * tau / h)
            B = B.at[i0].set(C)
            b = b.at[i0].set(contact_normal_b(gap, Jv[pos.start], gamma, h))
            T = J_pos[pos.start + 1 : pos.stop]
            mu = jnp.asarray(resolve(c.mu, p), dtype=float)
            data = _friction_data((4.0 / h**2 * eps * gamma)[None], mu[None], 2, resolve(c.friction_compliance, p))
            B, Sigma_B = _friction_rows(B, Sigma_B, i0 + 1, jnp.concatenate([T, -T]), slice(i0, i0 + 1), data)
            friction.append(data)
    return Rows(A, Sigma_A, Sigma_A_inv, a, B, Sigma_B, b, tuple(friction))


def equality_rows(X: ModelArrays, f_pos: jnp.ndarray, J_pos: jnp.ndarray, Jv: jnp.ndarray, u: jnp.ndarray,
                  vector: jnp.ndarray, h: float | jnp.ndarray) -> tuple[jnp.ndarray, ...]:
    """(A (nA, n), Sigma_A, Sigma_A_inv, a (nA,)): the equality rows, each kind (holonomic, viscous drag, motor)
    in one vectorized expression over the model's index arrays, put in layout order by one gather.

    ``vector`` is the model's parameter vector (:meth:`ModelArrays.parameter_vector`)."""
    hol, vis, mot = X.holonomic, X.viscous, X.motor
    # Holonomic rows (2.8-2.11): the joint's g with compliance eps and damping tau.
    param = X.row_parameters(vector)
    eps, tau = param["eps"], param["tau"]
    gamma = 1.0 / (1.0 + 4.0 * tau / h)  # (2.9)
    hol_sigma = 4.0 / h**2 * eps * gamma  # (2.10)
    hol_inv = h**2 / (4.0 * eps * gamma)
    hol_a = 4.0 / h * gamma * take(f_pos, hol.source) - gamma * take(Jv, hol.source)  # (2.8), (2.11)
    # F.2: Sigma lam + G_bar v_{k+1} = 0 gives the drag impulse lam = -h c omega_{k+1}
    # when Sigma = 1/(h c); c = 0 means no drag (floored to keep Sigma finite).
    c = param["c"]
    vis_sigma, vis_inv = 1.0 / (h * jnp.maximum(c, 1e-12)), h * c
    # F.3: a shaft of inertia J_s driven by gain*u: J_s (w_{k+1} - w_k) = h gain u - lam, with
    # w = G_bar v, i.e. Sigma lam + G_bar v_{k+1} = G_bar v_k + h gain u / J_s, Sigma = 1/J_s.
    # On a slider the same with the force gain * u and the reflected inertia J_s [kg].
    Js, gain = param["J"], param["K"]
    mot_a = -(take(Jv, mot.source) + h * gain * take(u, mot.control) / Js)
    order = X.row_order
    source = np.concatenate([hol.source, vis.source, mot.source])[order]
    Sigma_A = take(jnp.concatenate([hol_sigma, vis_sigma, 1.0 / Js]), order)
    Sigma_A_inv = take(jnp.concatenate([hol_inv, vis_inv, Js]), order)
    a = take(jnp.concatenate([hol_a, jnp.zeros(len(vis.source)), mot_a]), order)
    return take(J_pos, source), Sigma_A, Sigma_A_inv, a


def joint_compliance(j: Joint, p: Mapping[str, Any]) -> tuple[jnp.ndarray, jnp.ndarray]:
    """Per-row compliance eps (n_rows,) and damping tau of a joint's holonomic rows."""
    tau = jnp.asarray(resolve(j.tau, p), dtype=float)
    eps = jnp.stack([jnp.asarray(resolve(e, p), dtype=float) for e in joint_type(j).compliance(j)])
    return eps, tau
