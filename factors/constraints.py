"""Kinematic constraint factors (Blanco-Claraco et al. (2021) eqs. 24-25 and 30-32).

Dependent coordinates:
    position   f_pc^d(q)          e = Phi(q)                                  (24)
    velocity   f_vc^d(q, qdot)    e = Phi_q(q) qdot                           (25)
Independent coordinates z = q[idxs]:
    position   f_pc^i(q, z)       e = [Phi(q); q[idxs] - z]                   (30)
    velocity   f_vc^i(q, qdot, zdot)
                                  e = [Phi_q qdot; qdot[idxs] - zdot]         (31)
    acceleration f_ac^i(q, qdot, qddot, zddot)
                                  e = [Phi_q_dot qdot + Phi_q qddot; qddot[idxs] - zddot]  (32)

All constraints are time-independent (Phi_t = 0), as in the paper's experiments.
Redundant rows (a mechanism whose Phi_q has rank below m) stay in the residuals:
they are consistent, so the least-squares solve satisfies them all, and GTSAM's
QR / Cholesky only needs the whole graph's Jacobian to have full column rank.
"""

from __future__ import annotations

import gtsam
import numpy as np

from mbfg import planar
from mbfg._jax import jax, jnp
from mbfg.adapter import noise_model
from mbfg.factor_type import VectorVar, factor_type
from mbfg.planar import MechanismArrays, PlanarMechanism
from mbfg.registry import register


def position_residual(q: VectorVar, mech: MechanismArrays) -> jnp.ndarray:
    """Eq. (24): Phi(q), shape (m,)."""
    return planar.phi(mech, q)


def velocity_residual(q: VectorVar, qdot: VectorVar, mech: MechanismArrays) -> jnp.ndarray:
    """Eq. (25): Phi_q(q) qdot, shape (m,) [per-constraint units / s]."""
    return jax.jvp(lambda s: planar.phi(mech, s), (q,), (qdot,))[1]


def independent_position_residual(
    q: VectorVar, z: VectorVar, mech: MechanismArrays, indep: jnp.ndarray
) -> jnp.ndarray:
    """Eq. (30): [Phi(q); q[indep] - z], shape (m + d,)."""
    return jnp.concatenate([planar.phi(mech, q), q[indep] - z])


def independent_velocity_residual(
    q: VectorVar, qdot: VectorVar, zdot: VectorVar, mech: MechanismArrays, indep: jnp.ndarray
) -> jnp.ndarray:
    """Eq. (31): [Phi_q qdot; qdot[indep] - zdot], shape (m + d,)."""
    return jnp.concatenate([velocity_residual(q, qdot, mech), qdot[indep] - zdot])


def independent_acceleration_residual(
    q: VectorVar,
    qdot: VectorVar,
    qddot: VectorVar,
    zddot: VectorVar,
    mech: MechanismArrays,
    indep: jnp.ndarray,
) -> jnp.ndarray:
    """Eq. (32): [Phi_q_dot qdot + Phi_q qddot; qddot[indep] - zddot], shape (m + d,)."""
    constraint_acc = planar.phi_q_dot_times_qdot(mech, q, qdot) + velocity_residual(q, qddot, mech)
    return jnp.concatenate([constraint_acc, qddot[indep] - zddot])


_INDEP = np.array([4])  # the crank angle of the example four-bar


def _example_position(rng: np.random.Generator) -> tuple[tuple, tuple]:
    from mbfg.testing import mechanism_state

    mech, q, _, _ = mechanism_state(rng)
    return (q,), (mech.arrays,)


def _example_velocity(rng: np.random.Generator) -> tuple[tuple, tuple]:
    from mbfg.testing import mechanism_state

    mech, q, qdot, _ = mechanism_state(rng)
    return (q, qdot), (mech.arrays,)


def _example_independent_position(rng: np.random.Generator) -> tuple[tuple, tuple]:
    from mbfg.testing import mechanism_state

    mech, q, _, _ = mechanism_state(rng)
    return (q, q[_INDEP] + 0.1), (mech.arrays, _INDEP)


def _example_independent_velocity(rng: np.random.Generator) -> tuple[tuple, tuple]:
    from mbfg.testing import mechanism_state

    mech, q, qdot, _ = mechanism_state(rng)
    return (q, qdot, qdot[_INDEP] - 0.2), (mech.arrays, _INDEP)


def _example_independent_acceleration(rng: np.random.Generator) -> tuple[tuple, tuple]:
    from mbfg.testing import mechanism_state

    mech, q, qdot, qddot = mechanism_state(rng)
    return (q, qdot, qddot, qddot[_INDEP] + 0.3), (mech.arrays, _INDEP)


POSITION = register(factor_type(position_residual, name="position_constraint", example=_example_position))
VELOCITY = register(factor_type(velocity_residual, name="velocity_constraint", example=_example_velocity))
INDEPENDENT_POSITION = register(factor_type(
    independent_position_residual, name="independent_position_constraint", example=_example_independent_position
))
INDEPENDENT_VELOCITY = register(factor_type(
    independent_velocity_residual, name="independent_velocity_constraint", example=_example_independent_velocity
))
INDEPENDENT_ACCELERATION = register(factor_type(
    independent_acceleration_residual,
    name="independent_acceleration_constraint",
    example=_example_independent_acceleration,
))


def _sigma(sigma: float | gtsam.noiseModel.Base, dim: int) -> gtsam.noiseModel.Base:
    return noise_model(sigma, dim)


def position_factor(mech: PlanarMechanism, key_q: int, sigma: float | gtsam.noiseModel.Base) -> gtsam.CustomFactor:
    """f_pc^d on q; sigma in the constraint's units (m^2 for distances, m for angles)."""
    return POSITION.make([key_q], _sigma(sigma, mech.m), mech.arrays)


def velocity_factor(
    mech: PlanarMechanism, key_q: int, key_qdot: int, sigma: float | gtsam.noiseModel.Base
) -> gtsam.CustomFactor:
    """f_vc^d on (q, qdot)."""
    return VELOCITY.make([key_q, key_qdot], _sigma(sigma, mech.m), mech.arrays)


def independent_position_factor(
    mech: PlanarMechanism, indep: np.ndarray, key_q: int, key_z: int, sigma: float | gtsam.noiseModel.Base
) -> gtsam.CustomFactor:
    """f_pc^i on (q, z); ``indep`` are the indices of z in q."""
    indep = np.asarray(indep, dtype=np.int32)
    return INDEPENDENT_POSITION.make([key_q, key_z], _sigma(sigma, mech.m + len(indep)), mech.arrays, indep)


def independent_velocity_factor(
    mech: PlanarMechanism,
    indep: np.ndarray,
    key_q: int,
    key_qdot: int,
    key_zdot: int,
    sigma: float | gtsam.noiseModel.Base,
) -> gtsam.CustomFactor:
    """f_vc^i on (q, qdot, zdot)."""
    indep = np.asarray(indep, dtype=np.int32)
    return INDEPENDENT_VELOCITY.make(
        [key_q, key_qdot, key_zdot], _sigma(sigma, mech.m + len(indep)), mech.arrays, indep
    )


def independent_acceleration_factor(
    mech: PlanarMechanism,
    indep: np.ndarray,
    key_q: int,
    key_qdot: int,
    key_qddot: int,
    key_zddot: int,
    sigma: float | gtsam.noiseModel.Base,
) -> gtsam.CustomFactor:
    """f_ac^i on (q, qdot, qddot, zddot)."""
    indep = np.asarray(indep, dtype=np.int32)
    return INDEPENDENT_ACCELERATION.make(
        [key_q, key_qdot, key_qddot, key_zddot], _sigma(sigma, mech.m + len(indep)), mech.arrays, indep
    )
