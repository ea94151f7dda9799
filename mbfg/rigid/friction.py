"""Friction and contact rows of the Spook system (Marklund et al. (2025) eqs. 2.21, 2.24; Marklund et al. (2025) eq. 4.1).

The friction groups' blocks of B and Sigma_B, the Stribeck and load-independent Coulomb bounds of a
joint, and the constant b of a contact's normal row.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mbfg import complementarity
from mbfg._jax import jnp
from mbfg.parts import SIGMA_REGULARIZATION, Axial, resolve


def _stribeck(j: Axial, rate: jnp.ndarray, p: Mapping[str, Any]) -> jnp.ndarray | float:
    """Stribeck's term ``delta exp(-(rate_k / rate_s)^2)`` (Marklund et al. (2025) eq. 4.1) of a joint, 0 without one."""
    if j.stribeck is None:
        return 0.0
    delta, rate_s = (jnp.asarray(resolve(x, p), dtype=float) for x in j.stribeck)
    return delta * jnp.exp(-((rate / rate_s) ** 2))


def _coulomb(j: Axial, rate: jnp.ndarray | None, p: Mapping[str, Any]) -> jnp.ndarray | float:
    """The load-independent friction bound [N or N m]: ``coulomb``, plus Stribeck's term when the joint has no
    ``dry`` coefficient for it (``rate`` is the joint's rate at step k; None when ``dry`` takes it)."""
    if j.coulomb is None:
        return 0.0
    F_c = jnp.asarray(resolve(j.coulomb, p), dtype=float)
    return F_c if rate is None else F_c + _stribeck(j, rate, p)


def contact_normal_b(gap: jnp.ndarray, Cv: jnp.ndarray, gamma: jnp.ndarray, h: Any) -> jnp.ndarray:
    """The constant b of a contact's normal row ``C v_{k+1} + Sigma lam + b = w >= 0`` (scalars; b [m/s]).

    ``b = max(gap / h, min(spook, 0))`` with Spook's stabilization ``spook = 4/h gamma gap - gamma C v_k``
    (2.21), gap [m] and C v_k [m/s]:

    - open gap (``gap > 0``): ``b = gap / h``, Berard and Trinkle's (2008) discrete rule
      ``0 <= h lam_n  perp  psi_n(q_{k+1}) >= 0`` linearized, ``gap + h C v_{k+1} >= 0``: no
      impulse while the step ends with the gap still open, whatever tau and h. Spook's value
      would limit the approach speed to about gap / tau there, pushing at a distance.
    - penetration (``gap <= 0``): Spook's stabilization, which relaxes the overlap in about tau,
      clipped to ``[gap / h, 0]``: never above 0, so that an approach cannot go on (after the
      step that closes a gap the body still moves at the closing speed, and Spook's
      -gamma C v_k would let a fraction gamma of it through: the impact that Spook leaves to
      a separate impulse step, Marklund et al. (2025) after 2.21), and never below Berard and Trinkle's (2008) one-step removal
      ``gap / h``. For a resting contact (C v_k = 0, tau >= 0.75 h) neither clip is active.

    b is continuous in (gap, C v_k) (both sides are 0 at gap = 0) and piecewise linear; ``maximum``
    and ``minimum``, no Python branch, so it vmaps and differentiates on every piece.
    """
    spook = 4.0 / h * gamma * gap - gamma * Cv  # (2.21)
    return jnp.maximum(gap / h, jnp.minimum(spook, 0.0))


def _friction_data(sigma_N: jnp.ndarray, U: jnp.ndarray, m: int, eps_t: Any) -> complementarity.GroupData:
    """A friction group's entries of Sigma_B: normals' diagonal, U, m tangent compliances, Delta (eq. 2.24)."""
    return complementarity.GroupData(sigma_N, U, jnp.full(m, jnp.asarray(eps_t, dtype=float)),
                                     jnp.asarray(SIGMA_REGULARIZATION))


def _friction_rows(
    B: jnp.ndarray, Sigma_B: jnp.ndarray | None, i0: int, D: jnp.ndarray, normals: slice,
    data: complementarity.GroupData,
) -> tuple[jnp.ndarray, jnp.ndarray | None]:
    """Tangential rows D (n_t, 6nb) at i0, their friction bound (sigma) row right after them, and
    the group's block of Sigma_B (eq. 2.24) when Sigma_B is built (not None):

    ``D v + Sigma_t lam_t + E sigma = w_t``, ``U lam_n - E^T lam_t + Delta sigma = w_sigma``.
    """
    n_t = D.shape[0]
    tangents = jnp.arange(i0, i0 + n_t)
    s = i0 + n_t
    B = B.at[tangents].set(D)
    if Sigma_B is None:
        return B, None
    idx = jnp.arange(normals.start, normals.stop)
    Sigma_B = Sigma_B.at[idx, idx].set(data.sigma_N)
    Sigma_B = Sigma_B.at[tangents, tangents].set(jnp.tile(data.eps_t, 2))
    Sigma_B = Sigma_B.at[tangents, s].set(1.0)  # E
    Sigma_B = Sigma_B.at[s, tangents].set(-1.0)  # -E^T
    Sigma_B = Sigma_B.at[s, normals].set(data.U)  # U
    Sigma_B = Sigma_B.at[s, s].set(data.delta)  # Delta
    return B, Sigma_B
