"""Where each part's rows sit in a rigid model's Spook system: the row types and their static bookkeeping.

:func:`make_layout` assigns every joint and contact its position functions and its rows of A
(equality) or B (complementarity) once per model, as Python ints; :class:`Rows` holds one step's rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, cast

from mbfg import complementarity
from mbfg._jax import jnp
from mbfg.parts import Axial, Contact, Joint
from mbfg.rigid.joint_types import joint_type


class Rows(NamedTuple):
    """The constraint rows of one Spook step, in the notation of eqs. 2.19 and 2.25.

    A: (nA, 6nb) equality rows (holonomic and nonholonomic), Sigma_A: (nA,)
    their diagonal regularization and Sigma_A_inv its exact inverse (finite where
    Sigma_A is not: a zero viscous drag has Sigma_A_inv = 0), a: (nA,). B: (nB, 6nb) complementarity rows
    (normals, tangents, friction bounds), Sigma_B: (nB, nB), b: (nB,); friction: the entries of
    Sigma_B per batch of friction groups (``model.arrays.complementarity.batches``; each field with a leading
    axis, one entry per group of the batch), all that the closed-form multipliers of
    inverse dynamics need (:meth:`RigidModel.position_rows` leaves Sigma_B None).
    """

    A: jnp.ndarray
    Sigma_A: jnp.ndarray
    Sigma_A_inv: jnp.ndarray
    a: jnp.ndarray
    B: jnp.ndarray
    Sigma_B: jnp.ndarray | None
    b: jnp.ndarray
    friction: tuple[complementarity.GroupData, ...] = ()


@dataclass(frozen=True)
class Layout:
    """Static row bookkeeping (Python ints), built once per model."""

    n_pos: int  # position-level functions whose Jacobians the rows use
    n_A: int
    n_B: int
    blocks: tuple[Any, ...]
    #: The complementarity rows as independent friction groups (:mod:`mbfg.complementarity`).
    groups: tuple[complementarity.Group, ...] = ()


def make_layout(joints: Sequence[Joint], contacts: Sequence[Contact]) -> Layout:
    """Static bookkeeping: which position function and which rows each part owns."""
    blocks: list[tuple[Any, ...]] = []
    groups: list[complementarity.Group] = []
    n_pos = n_A = n_B = 0
    for j in joints:
        kind = joint_type(j)
        n_g = kind.n_rows
        pos = slice(n_pos, n_pos + n_g)
        n_pos += n_g
        if not kind.axial:
            blocks.append(("holonomic", j, pos, n_A))
            n_A += n_g
            continue
        j = cast(Axial, j)  # an axial joint type: a hinge or a slider
        coordinate = n_pos  # the angle or displacement follows the joint's rows
        n_pos += 1
        if j.dry is not None:
            # Dry friction (F.4): the 5 rows become 10 one-sided contact rows (+g >= 0,
            # -g >= 0), then 2 tangential rows (+/- the joint's rate) and one bound.
            blocks.append(("dry_joint", j, pos, coordinate, n_B))
            groups.append(complementarity.group(slice(n_B, n_B + 2 * n_g), n_B + 2 * n_g, 1))
            n_B += 2 * n_g + 3
        else:
            blocks.append(("holonomic", j, pos, n_A))
            n_A += n_g
            if j.coulomb is not None:
                # A load-independent bound: no normal rows, 2 tangential rows and the bound.
                blocks.append(("coulomb", j, coordinate, n_B))
                groups.append(complementarity.group(slice(n_B, n_B), n_B, 1))
                n_B += 3
        if j.viscous is not None:
            blocks.append(("viscous", j, coordinate, n_A))
            n_A += 1
        if j.motor is not None:
            blocks.append(("motor", j, coordinate, n_A))
            n_A += 1
    for c in contacts:
        blocks.append(("contact", c, slice(n_pos, n_pos + 3), n_B))
        groups.append(complementarity.group(slice(n_B, n_B + 1), n_B + 1, 2))
        n_pos += 3  # gap, then the position along the two tangents
        n_B += 1 + 4 + 1
    return Layout(n_pos, n_A, n_B, tuple(blocks), tuple(groups))
