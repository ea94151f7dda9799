"""Friction and contact rows of the Spook system (Marklund et al. (2025) eqs. 2.21, 2.24; Marklund et al. (2025) eq. 4.1).

The complementarity rows B, b, Sigma_B of a step (:func:`complementarity_rows`): the friction groups of dry
joints (F.4), of load-independent Coulomb bounds and of contacts, each kind of group in one vectorized
expression over the model's stacked per-group arrays (:func:`compile_complementarity`, built once per model),
put in row order by one gather: the traced program does not grow with the number of frictional joints or
contacts. Also the Stribeck and load-independent Coulomb bounds of one joint and the constant b of a
contact's normal row.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from mbfg import complementarity
from mbfg._jax import jax, jnp
from mbfg.parts import ROTATIONAL_FRICTION_DISTANCE, SIGMA_REGULARIZATION, Axial, ParamLike, resolve
from mbfg.rigid.arrays import ParamBundle, ParamTable, take
from mbfg.rigid.joint_types import joint_type


def stribeck_term(delta: Any, rate_s: Any, rate: Any) -> Any:
    """Stribeck's term ``delta exp(-(rate / rate_s)^2)`` (Marklund et al. (2025) eq. 4.1), elementwise."""
    return delta * jnp.exp(-((rate / rate_s) ** 2))


def _stribeck(j: Axial, rate: jnp.ndarray, p: Mapping[str, Any]) -> jnp.ndarray | float:
    """Stribeck's term ``delta exp(-(rate_k / rate_s)^2)`` (Marklund et al. (2025) eq. 4.1) of a joint, 0 without one."""
    if j.stribeck is None:
        return 0.0
    delta, rate_s = (jnp.asarray(resolve(x, p), dtype=float) for x in j.stribeck)
    return stribeck_term(delta, rate_s, rate)


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


def friction_data(sigma_N: jnp.ndarray, U: jnp.ndarray, m: int, eps_t: Any) -> complementarity.GroupData:
    """A friction group's entries of Sigma_B: normals' diagonal, U, m tangent compliances, Delta (eq. 2.24)."""
    return complementarity.GroupData(sigma_N, U, jnp.full(m, jnp.asarray(eps_t, dtype=float)),
                                     jnp.asarray(SIGMA_REGULARIZATION))


def friction_rows(
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


@dataclass(frozen=True)
class FrictionBatch:
    """The friction groups of one kind and shape, as stacked static arrays (G groups).

    kind: "dry" (a joint's load-dependent dry friction, F.4: its n_g constraint rows written twice as normals),
    "coulomb" (a load-independent bound: no normals) or "contact" (gap row, two tangents);
    groups: their rows of B (:class:`~mbfg.complementarity.Batch`); pos (G, k): position functions, a dry
    joint's n_g constraint rows or a contact's (gap, tangent 1, tangent 2); coordinate (G,): a joint's
    coordinate (empty for contacts); translational (G, 2 n_g): 1 where a dry joint's normal row is
    translational (bound ``dry``), 0 where rotational (``dry / ROTATIONAL_FRICTION_DISTANCE``); key: the prefix
    of its parameters in :attr:`ComplementarityArrays.parameters`.
    """

    kind: str
    groups: complementarity.Batch
    pos: np.ndarray
    coordinate: np.ndarray
    translational: np.ndarray
    key: str

    def parameters(self, values: Mapping[str, jnp.ndarray]) -> dict[str, jnp.ndarray]:
        """This batch's parameters, by name without the key, from :attr:`ComplementarityArrays.parameters` of the
        model's parameter vector: each (G,), a dry joint's "eps" (G n_g,)."""
        return {name[len(self.key):]: v for name, v in values.items() if name.startswith(self.key)}


@dataclass(frozen=True)
class ComplementarityArrays:
    """A model's complementarity rows as index arrays: the batches, and for each row of B (n_B,) the position
    function it copies (``source``) with its sign (+1, -1, or 0 for a bound row), and ``order``: row i of B is
    entry ``order[i]`` of the batches' flattened (G, n_N + 2m + 1) blocks."""

    batches: tuple[FrictionBatch, ...]
    order: np.ndarray
    source: np.ndarray
    sign: np.ndarray
    parameters: ParamBundle


def compile_complementarity(blocks: Sequence[tuple[Any, ...]], n_B: int, table: Any
                            ) -> tuple[tuple[FrictionBatch, ...], np.ndarray, np.ndarray, np.ndarray,
                                       dict[str, ParamTable]]:
    """(batches, order, source, sign, parameter tables by name) of a model's layout: its ``blocks`` and its n_B
    complementarity rows; ``table(values)`` makes the :class:`~mbfg.rigid.arrays.ParamTable` of a list of
    parameter expressions (their zero slot set later)."""
    source, sign = np.zeros(n_B, dtype=np.int64), np.zeros(n_B)
    members: dict[tuple[str, int], list[tuple[Any, ...]]] = {}
    for block in blocks:  # static bookkeeping, once per model
        if block[0] == "dry_joint":
            _, j, pos, coordinate, i0 = block
            n_g = pos.stop - pos.start
            rows = np.arange(pos.start, pos.stop)
            source[i0 : i0 + 2 * n_g] = np.concatenate([rows, rows])
            sign[i0 : i0 + 2 * n_g] = np.repeat([1.0, -1.0], n_g)
            source[i0 + 2 * n_g : i0 + 2 * n_g + 2], sign[i0 + 2 * n_g : i0 + 2 * n_g + 2] = coordinate, (1.0, -1.0)
            members.setdefault(("dry", n_g), []).append(block)
        elif block[0] == "coulomb":
            _, j, coordinate, i0 = block
            source[i0 : i0 + 2], sign[i0 : i0 + 2] = coordinate, (1.0, -1.0)
            members.setdefault(("coulomb", 0), []).append(block)
        elif block[0] == "contact":
            _, c, pos, i0 = block
            source[i0 : i0 + 5] = [pos.start, pos.start + 1, pos.start + 2, pos.start + 1, pos.start + 2]
            sign[i0 : i0 + 5] = [1.0, 1.0, 1.0, -1.0, -1.0]
            members.setdefault(("contact", 0), []).append(block)
    batches, tables, flat = [], {}, []

    def add(key: str, name: str, values: list[ParamLike]) -> None:
        tables[key + name] = table(values)

    for b, ((kind, n_g), group_blocks) in enumerate(members.items()):
        key = f"{b}."
        parts = [blk[1] for blk in group_blocks]
        if kind == "dry":
            i0 = np.array([blk[4] for blk in group_blocks])
            n_N, m = 2 * n_g, 1
            pos = np.array([np.arange(blk[2].start, blk[2].stop) for blk in group_blocks], dtype=np.int64)
            coordinate = np.array([blk[3] for blk in group_blocks], dtype=np.int64)
            lin = np.array([np.arange(n_g) < joint_type(j).n_lin for j in parts], dtype=float)
            translational = np.concatenate([lin, lin], axis=1)
            add(key, "eps", [e for j in parts for e in joint_type(j).compliance(j)])
            add(key, "tau", [j.tau for j in parts])
            add(key, "dry", [j.dry for j in parts])
        elif kind == "coulomb":
            i0 = np.array([blk[3] for blk in group_blocks])
            n_N, m = 0, 1
            pos = np.zeros((len(group_blocks), 0), dtype=np.int64)
            coordinate = np.array([blk[2] for blk in group_blocks], dtype=np.int64)
            translational = np.zeros((len(group_blocks), 0))
        else:
            i0 = np.array([blk[3] for blk in group_blocks])
            n_N, m = 1, 2
            pos = np.array([np.arange(blk[2].start, blk[2].stop) for blk in group_blocks], dtype=np.int64)
            coordinate = np.zeros(0, dtype=np.int64)
            translational = np.zeros((len(group_blocks), 0))
            add(key, "eps", [c.eps for c in parts])
            add(key, "tau", [c.tau for c in parts])
            add(key, "mu", [c.mu for c in parts])
        if kind in ("dry", "coulomb"):
            # No Stribeck term: delta 0 (rate_s 1 keeps the exponential finite); no coulomb bound: 0.
            add(key, "coulomb", [0.0 if j.coulomb is None else j.coulomb for j in parts])
            add(key, "stribeck_delta", [0.0 if j.stribeck is None else j.stribeck[0] for j in parts])
            add(key, "stribeck_rate", [1.0 if j.stribeck is None else j.stribeck[1] for j in parts])
        add(key, "eps_t", [x.friction_compliance for x in parts])
        width = n_N + 2 * m + 1
        rows = i0[:, None] + np.arange(width)[None, :]
        batches.append(FrictionBatch(kind, complementarity.Batch(rows, n_N, m), pos, coordinate, translational, key))
        flat.append(rows.reshape(-1))
    flat_rows = np.concatenate(flat) if flat else np.zeros(0, dtype=np.int64)
    assert sorted(flat_rows.tolist()) == list(range(n_B)), "every complementarity row belongs to one friction group"
    order = np.zeros(n_B, dtype=np.int64)
    order[flat_rows] = np.arange(n_B)
    return tuple(batches), order, source, sign, tables


def complementarity_rows(
    C: ComplementarityArrays, f_pos: jnp.ndarray, J_pos: jnp.ndarray, Jv: jnp.ndarray, vector: jnp.ndarray,
    h: float | jnp.ndarray, dense: bool,
) -> tuple[jnp.ndarray, jnp.ndarray | None, jnp.ndarray, tuple[complementarity.GroupData, ...]]:
    """(B (n_B, n), Sigma_B (n_B, n_B) when ``dense`` else None, b (n_B,), each batch's
    :class:`~mbfg.complementarity.GroupData` with a leading axis G) from the position functions f_pos (n_pos,),
    their Jacobian J_pos (n_pos, n), J_pos v_k (n_pos,) and the model's parameter vector.

    Per group (eq. 2.24): normal rows (a dry joint's constraint rows +g >= 0 and -g >= 0 with compliance eps and
    Spook's b of 2.24, a contact's gap row with b from :func:`contact_normal_b`), the tangent rows +-G_bar
    (a joint's rate, a contact's two tangents) with compliance eps_t, and the bound row
    ``U lam_N - E^T lam_T + Delta sigma + b = w_sigma`` with b = h F_c (a joint's load-independent bound,
    plus Stribeck's term (4.1) when the joint has no ``dry`` coefficient for it) and U the friction
    coefficients (``dry + Stribeck`` on a dry joint's translational rows, that over
    ROTATIONAL_FRICTION_DISTANCE on its rotational ones, a contact's mu).
    """
    n_B = len(C.source)
    if not C.batches:
        return jnp.zeros((0, J_pos.shape[1])), (jnp.zeros((0, 0)) if dense else None), jnp.zeros(0), ()
    B = take(J_pos, C.source) * C.sign[:, None]  # every row of B is a signed row of J_pos (or a zero bound row)
    param = C.parameters(vector)
    b_parts, data, blocks = [], [], []
    for batch in C.batches:  # one vectorized expression per kind of group (at most a few), never per group
        P = batch.parameters(param)
        G, n_N, m = batch.groups.rows.shape[0], batch.groups.n_N, batch.groups.m
        delta = jnp.full(G, SIGMA_REGULARIZATION)
        eps_t = jnp.tile(P["eps_t"][:, None], (1, m))
        if batch.kind == "dry":
            n_g = batch.pos.shape[1]
            g = take(f_pos, batch.pos.reshape(-1)).reshape(G, n_g)
            Gv = take(Jv, batch.pos.reshape(-1)).reshape(G, n_g)
            gamma = (1.0 / (1.0 + 4.0 * P["tau"] / h))[:, None]  # (2.9)
            sigma_N = jnp.tile(4.0 / h**2 * P["eps"].reshape(G, n_g) * gamma, (1, 2))  # (2.10)
            b_g = 4.0 / h * gamma * g - gamma * Gv  # (2.24), row 2
            rate = take(Jv, batch.coordinate)
            mu_r = (P["dry"] + stribeck_term(P["stribeck_delta"], P["stribeck_rate"], rate))[:, None]
            U = batch.translational * mu_r + (1.0 - batch.translational) * (mu_r / ROTATIONAL_FRICTION_DISTANCE)
            bound = h * P["coulomb"]  # the load-independent part of the bound; Stribeck's term is in U
            b_parts.append(jnp.concatenate([b_g, -b_g, jnp.zeros((G, 2)), bound[:, None]], axis=1))
        elif batch.kind == "coulomb":
            # The bound row of (2.24) without normal rows and with b = h F_c: the step's friction impulse <= h F_c.
            rate = take(Jv, batch.coordinate)
            bound = h * (P["coulomb"] + stribeck_term(P["stribeck_delta"], P["stribeck_rate"], rate))
            sigma_N = U = jnp.zeros((G, 0))
            b_parts.append(jnp.concatenate([jnp.zeros((G, 2)), bound[:, None]], axis=1))
        else:
            gap_row = batch.pos[:, 0]
            gamma = 1.0 / (1.0 + 4.0 * P["tau"] / h)
            normal_b = contact_normal_b(take(f_pos, gap_row), take(Jv, gap_row), gamma, h)
            sigma_N = (4.0 / h**2 * P["eps"] * gamma)[:, None]
            U = P["mu"][:, None]
            b_parts.append(jnp.concatenate([normal_b[:, None], jnp.zeros((G, 5))], axis=1))
        d = complementarity.GroupData(sigma_N, U, eps_t, delta)
        data.append(d)
        if dense:
            blocks.append(_sigma_block(d, n_N, m))
    b = take(jnp.concatenate([x.reshape(-1) for x in b_parts]), C.order)
    Sigma_B = None
    if dense:
        width = [bt.groups.rows.shape[1] for bt in C.batches]
        i = np.concatenate([np.repeat(bt.groups.rows, w, axis=1).reshape(-1) for bt, w in zip(C.batches, width)])
        j = np.concatenate([np.tile(bt.groups.rows, (1, w)).reshape(-1) for bt, w in zip(C.batches, width)])
        Sigma_B = jnp.zeros((n_B, n_B)).at[i, j].set(jnp.concatenate([x.reshape(-1) for x in blocks]),
                                                       unique_indices=True)
    return B, Sigma_B, b, tuple(data)


def _sigma_block(d: complementarity.GroupData, n_N: int, m: int) -> jnp.ndarray:
    """(G, w, w) blocks of Sigma_B (eq. 2.24) of G groups, rows [normals, plus, minus, bound] (w = n_N + 2m + 1):
    the diagonal (sigma_N, eps_t twice, Delta), E (+1) in the bound's column of the tangent rows, -E^T in the
    bound's row, and U in the bound's row under the normals."""
    w = n_N + 2 * m + 1
    diagonal = jnp.concatenate([d.sigma_N, jnp.tile(d.eps_t, (1, 2)), d.delta[:, None]], axis=1)
    E = np.zeros((w, w))
    E[n_N : w - 1, w - 1] = 1.0
    E[w - 1, n_N : w - 1] = -1.0
    bound_row = np.zeros(w)
    bound_row[w - 1] = 1.0
    U = jnp.concatenate([d.U, jnp.zeros((d.U.shape[0], w - n_N))], axis=1)
    return jax.vmap(jnp.diag)(diagonal) + E + bound_row[None, :, None] * U[:, None, :]
