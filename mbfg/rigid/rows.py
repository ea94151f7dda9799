"""The rows of a rigid model's Spook system at one step (Marklund et al. (2025) eqs. 2.8-2.11, 2.17-2.19, 2.24-2.25).

:func:`assemble_rows` turns the position functions, their Jacobian and J v_k into A, Sigma_A, a
(joints' holonomic rows, viscous drag F.2, motors F.3) and B, Sigma_B, b (dry joints F.4, Coulomb
bounds, contacts: :func:`mbfg.rigid.friction.complementarity_rows`), each kind of row one vectorized expression.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from mbfg._jax import jnp
from mbfg.parts import Joint, resolve
from mbfg.rigid.arrays import take
from mbfg.rigid.friction import complementarity_rows
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
    X = model.arrays
    vector = X.parameter_vector(p) if vector is None else vector
    A, Sigma_A, Sigma_A_inv, a = equality_rows(X, f_pos, J_pos, Jv, u, vector, h)
    B, Sigma_B, b, friction = complementarity_rows(X.complementarity, f_pos, J_pos, Jv, vector, h, dense)
    return Rows(A, Sigma_A, Sigma_A_inv, a, B, Sigma_B, b, friction)


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
