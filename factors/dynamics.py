"""Dynamics factors (Blanco-Claraco et al. (2021) eqs. 26-29).

Forward dynamics, dependent coordinates (26):   e = qddot(q, qdot) - qddot_t
Forward dynamics, independent coordinates (27): e = zddot(q, qdot) - zddot_t
Inverse dynamics, dependent coordinates (28):   e = qddot(q, qdot, Q_t) - qddot_t
Inverse dynamics, independent coordinates (29): e = zddot(q, qdot, Q_t) - zddot_t

qddot(.) is eq. (6) and zddot(.) eq. (15) (see :mod:`mbfg.planar`). The
generalized force is Q = Q_known + F: Q_known (gravity and any known load) is a
constant of the factor; in the inverse factors F is a variable. The
independent-coordinate factors take the dependent q and qdot as variables,
since eq. (15) is evaluated through them (z and zdot enter through the
independent-coordinate constraint factors).
"""

from __future__ import annotations

import gtsam
import numpy as np

from mbfg import planar
from mbfg._jax import jnp
from mbfg.adapter import noise_model
from mbfg.factor_type import VectorVar, factor_type
from mbfg.planar import MechanismArrays, PlanarMechanism
from mbfg.registry import register

_INDEP = np.array([4])


def forward_dependent_residual(
    q: VectorVar,
    qdot: VectorVar,
    qddot: VectorVar,
    mech: MechanismArrays,
    M: jnp.ndarray,
    Q_known: jnp.ndarray,
) -> jnp.ndarray:
    """Eq. (26), shape (n,) [m/s^2 or rad/s^2]."""
    return planar.qddot_dependent(mech, M, Q_known, q, qdot) - qddot


def forward_independent_residual(
    q: VectorVar,
    qdot: VectorVar,
    zddot: VectorVar,
    mech: MechanismArrays,
    M: jnp.ndarray,
    Q_known: jnp.ndarray,
    indep: jnp.ndarray,
) -> jnp.ndarray:
    """Eq. (27), shape (d,)."""
    return planar.zddot_independent(mech, M, Q_known, q, qdot, indep) - zddot


def inverse_dependent_residual(
    q: VectorVar,
    qdot: VectorVar,
    qddot: VectorVar,
    F: VectorVar,
    mech: MechanismArrays,
    M: jnp.ndarray,
    Q_known: jnp.ndarray,
) -> jnp.ndarray:
    """Eq. (28) with unknown generalized forces F (n,) [N or N m], shape (n,)."""
    return planar.qddot_dependent(mech, M, Q_known + F, q, qdot) - qddot


def inverse_independent_residual(
    q: VectorVar,
    qdot: VectorVar,
    zddot: VectorVar,
    F: VectorVar,
    mech: MechanismArrays,
    M: jnp.ndarray,
    Q_known: jnp.ndarray,
    indep: jnp.ndarray,
) -> jnp.ndarray:
    """Eq. (29) with unknown generalized forces F (n,), shape (d,)."""
    return planar.zddot_independent(mech, M, Q_known + F, q, qdot, indep) - zddot


def _constants(mech: PlanarMechanism, g: float = 9.81) -> tuple:
    return mech.arrays, mech.mass_matrix, mech.gravity_forces(g)


def _example_forward_dependent(rng: np.random.Generator) -> tuple[tuple, tuple]:
    from mbfg.testing import mechanism_state

    mech, q, qdot, qddot = mechanism_state(rng)
    return (q, qdot, qddot), _constants(mech)


def _example_forward_independent(rng: np.random.Generator) -> tuple[tuple, tuple]:
    from mbfg.testing import mechanism_state

    mech, q, qdot, qddot = mechanism_state(rng)
    return (q, qdot, qddot[_INDEP]), (*_constants(mech), _INDEP)


def _example_inverse_dependent(rng: np.random.Generator) -> tuple[tuple, tuple]:
    from mbfg.testing import mechanism_state

    mech, q, qdot, qddot = mechanism_state(rng)
    return (q, qdot, qddot, rng.standard_normal(mech.n)), _constants(mech)


def _example_inverse_independent(rng: np.random.Generator) -> tuple[tuple, tuple]:
    from mbfg.testing import mechanism_state

    mech, q, qdot, qddot = mechanism_state(rng)
    return (q, qdot, qddot[_INDEP], rng.standard_normal(mech.n)), (*_constants(mech), _INDEP)


FORWARD_DEPENDENT = register(factor_type(
    forward_dependent_residual, name="forward_dynamics_dependent", example=_example_forward_dependent
))
FORWARD_INDEPENDENT = register(factor_type(
    forward_independent_residual, name="forward_dynamics_independent", example=_example_forward_independent
))
INVERSE_DEPENDENT = register(factor_type(
    inverse_dependent_residual, name="inverse_dynamics_dependent", example=_example_inverse_dependent
))
INVERSE_INDEPENDENT = register(factor_type(
    inverse_independent_residual, name="inverse_dynamics_independent", example=_example_inverse_independent
))


def forward_dynamics_factor(
    mech: PlanarMechanism,
    key_q: int,
    key_qdot: int,
    key_qddot: int,
    Q_known: np.ndarray,
    sigma: float | gtsam.noiseModel.Base,
) -> gtsam.CustomFactor:
    """f_dyn^d on (q, qdot, qddot); Q_known (n,) [N] includes gravity."""
    return FORWARD_DEPENDENT.make(
        [key_q, key_qdot, key_qddot], noise_model(sigma, mech.n), mech.arrays, mech.mass_matrix, np.asarray(Q_known)
    )


def forward_dynamics_independent_factor(
    mech: PlanarMechanism,
    indep: np.ndarray,
    key_q: int,
    key_qdot: int,
    key_zddot: int,
    Q_known: np.ndarray,
    sigma: float | gtsam.noiseModel.Base,
) -> gtsam.CustomFactor:
    """f_dyn^i on (q, qdot, zddot); ``indep`` are the indices of z in q."""
    indep = np.asarray(indep, dtype=np.int32)
    return FORWARD_INDEPENDENT.make(
        [key_q, key_qdot, key_zddot],
        noise_model(sigma, len(indep)),
        mech.arrays,
        mech.mass_matrix,
        np.asarray(Q_known),
        indep,
    )


def inverse_dynamics_factor(
    mech: PlanarMechanism,
    key_q: int,
    key_qdot: int,
    key_qddot: int,
    key_F: int,
    Q_known: np.ndarray,
    sigma: float | gtsam.noiseModel.Base,
) -> gtsam.CustomFactor:
    """f_idyn^d on (q, qdot, qddot, F): F (n,) are the unknown generalized forces."""
    return INVERSE_DEPENDENT.make(
        [key_q, key_qdot, key_qddot, key_F],
        noise_model(sigma, mech.n),
        mech.arrays,
        mech.mass_matrix,
        np.asarray(Q_known),
    )


def inverse_dynamics_independent_factor(
    mech: PlanarMechanism,
    indep: np.ndarray,
    key_q: int,
    key_qdot: int,
    key_zddot: int,
    key_F: int,
    Q_known: np.ndarray,
    sigma: float | gtsam.noiseModel.Base,
) -> gtsam.CustomFactor:
    """f_idyn^i on (q, qdot, zddot, F)."""
    indep = np.asarray(indep, dtype=np.int32)
    return INVERSE_INDEPENDENT.make(
        [key_q, key_qdot, key_zddot, key_F],
        noise_model(sigma, len(indep)),
        mech.arrays,
        mech.mass_matrix,
        np.asarray(Q_known),
        indep,
    )
