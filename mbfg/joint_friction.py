"""Joint friction and reflected rotor inertia as robot identification writes them: per joint i, linear in its
parameters, columns appended to the inverse-dynamics regressor (:func:`mbfg.inverse_dynamics.regressor`)::

    tau_i = Y_i(q, qd, qdd) pi + F_v,i qd_i + F_c,i s(qd_i) + F_o,i + I_a,i qdd_i

- viscous F_v [N m s/rad], Coulomb F_c [N m] and an offset F_o [N m] (Swevers et al. 1997; Gautier 1990; the
  offset takes up the motor's current offset and an asymmetry of the Coulomb friction);
- s(qd) = sign(qd) (``coulomb_width`` 0), or the smooth tanh(qd / w) of width w [rad/s] (``coulomb_width`` w):
  it differs from the sign by more than 1 % only where |qd| < 2.65 w;
- the rotor inertia reflected through the gear: I_a = k_r^2 I_m [kg m^2] of a motor of rotor inertia I_m
  behind a gear of ratio k_r (:func:`reflected_rotor_inertia`); the gyroscopic coupling of the rotors is left out,
  as most identification papers leave it out.

A model may leave terms out (:attr:`FrictionModel.terms`: a joint without an offset, a drive without Coulomb
friction): those are zero. Parameters per joint in the order ``phi = [F_v, F_c, F_o, I_a]`` of the terms kept,
``phi`` (n, k) with k = 0 .. 4, columns ``friction_regressor`` (T, n, k n) in the order of ``phi.ravel()``
(joint-major). Units for a prismatic joint:
N, m/s and kg in place of N m, rad/s and kg m^2.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import jax.numpy as jnp
import numpy as np

import mbfg._jax  # noqa: F401  (float64)
from mbfg.errors import MbfgError

#: The friction terms a model may keep, in the order of ``phi``'s row, and each one's parameter name.
TERMS = {"viscous": "Fv", "coulomb": "Fc", "offset": "Fo"}


@dataclass(frozen=True)
class FrictionModel:
    """coulomb_width: w [rad/s] of tanh(qd / w), 0: sign(qd); rotor: whether each joint carries a reflected
    rotor inertia I_a (a last parameter per joint); terms: the friction terms kept, a subset of :data:`TERMS`
    (``viscous``, ``coulomb``, ``offset``; the others are zero), stored in that order whatever order they are
    given in, since it is the order of ``phi``'s row."""

    coulomb_width: float = 0.0
    rotor: bool = True
    terms: tuple[str, ...] = tuple(TERMS)

    def __post_init__(self) -> None:
        if not (np.isfinite(self.coulomb_width) and self.coulomb_width >= 0.0):
            raise MbfgError(f"coulomb_width: expected a finite number >= 0 [rad/s] (0: sign), got {self.coulomb_width!r}")
        terms = (self.terms,) if isinstance(self.terms, str) else tuple(self.terms)
        for term in terms:
            if term not in TERMS:
                raise MbfgError(f"terms: {term!r} is not a friction term; expected some of {', '.join(TERMS)}")
        if len(set(terms)) != len(terms):
            raise MbfgError(f"terms: a term is given twice in {list(terms)}")
        object.__setattr__(self, "terms", tuple(t for t in TERMS if t in terms))

    @property
    def names(self) -> tuple[str, ...]:
        """The parameter names of one joint, in the order of ``phi``'s row."""
        return tuple(TERMS[t] for t in self.terms) + (("Ia",) if self.rotor else ())

    @property
    def size(self) -> int:
        """k: parameters per joint."""
        return len(self.names)

    def parameter_names(self, joints: tuple[str, ...]) -> tuple[str, ...]:
        """The (k n,) names of ``phi.ravel()``: ``Fv_<joint>``, ``Fc_<joint>`` ..."""
        return tuple(f"{p}_{j}" for j in joints for p in self.names)


#: The model of a joint without options: sign(qd) Coulomb friction and a rotor inertia.
DEFAULT_MODEL = FrictionModel()


def coulomb_shape(qd: Any, width: float) -> Any:
    """s(qd): sign(qd) for width 0, tanh(qd / width) otherwise (module docstring); JAX or NumPy arrays."""
    xp = jnp if isinstance(qd, jnp.ndarray) else np
    return xp.sign(qd) if width == 0.0 else xp.tanh(qd / width)


def friction_regressor(qd: Any, qdd: Any, model: FrictionModel = DEFAULT_MODEL) -> Any:
    """The friction columns (T, n, k n) of rates and accelerations (T, n): row i of sample t holds joint i's
    [qd_i, s(qd_i), 1, (qdd_i)] at its own k columns, zeros elsewhere (block diagonal)."""
    xp = jnp if isinstance(qd, jnp.ndarray) else np
    qd, qdd = xp.asarray(qd), xp.asarray(qdd)
    if qd.ndim != 2 or qd.shape != qdd.shape:
        raise MbfgError(f"qd, qdd: expected one shape (T, n), got {np.shape(qd)} and {np.shape(qdd)}")
    T, n = qd.shape
    columns = {"Fv": qd, "Fc": coulomb_shape(qd, model.coulomb_width), "Fo": xp.ones_like(qd), "Ia": qdd}
    if not model.names:
        return xp.zeros((T, n, 0))
    block = xp.stack([columns[name] for name in model.names], axis=-1)  # (T, n, k)
    eye = xp.eye(n)
    return (eye[None, :, :, None] * block[:, :, None, :]).reshape(T, n, n * model.size)


def friction_torques(phi: Any, qd: Any, qdd: Any, model: FrictionModel = DEFAULT_MODEL) -> np.ndarray:
    """tau_f (T, n) [N m] of the law in the module docstring, joint by joint, for parameters ``phi`` (n, k)."""
    qd, qdd = np.asarray(qd, dtype=float), np.asarray(qdd, dtype=float)
    phi = np.asarray(phi, dtype=float).reshape(qd.shape[-1], model.size)
    columns = {"Fv": qd, "Fc": coulomb_shape(qd, model.coulomb_width), "Fo": np.ones_like(qd), "Ia": qdd}
    tau = np.zeros_like(qd)
    for k, name in enumerate(model.names):  # over the (at most four) terms, not the joints
        tau = tau + phi[:, k] * columns[name]
    return tau


def reflected_rotor_inertia(rotor_inertia: Any, gear_ratio: Any) -> np.ndarray:
    """I_a = k_r^2 I_m (n,) [kg m^2] of rotor inertias I_m (n,) [kg m^2] behind gear ratios k_r (n,) (motor turns
    per joint turn)."""
    Im, kr = np.asarray(rotor_inertia, dtype=float), np.asarray(gear_ratio, dtype=float)
    if not (np.all(np.isfinite(Im)) and np.all(Im >= 0.0)):
        raise MbfgError(f"rotor_inertia: expected finite numbers >= 0 [kg m^2], got {Im.tolist()}")
    if not (np.all(np.isfinite(kr)) and np.all(kr != 0.0)):
        raise MbfgError(f"gear_ratio: expected finite nonzero ratios, got {kr.tolist()}")
    return kr**2 * Im


__all__ = ["DEFAULT_MODEL", "TERMS", "FrictionModel", "coulomb_shape", "friction_regressor", "friction_torques", "reflected_rotor_inertia"]
