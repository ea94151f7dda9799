"""A rigid model compiled into index arrays, so that its traced programs do not grow with its joints.

Built once per model (:func:`compile_arrays`, NumPy, no JAX): every joint's parent and child body, its
frames, the parameter expressions of its compliances, drag and motor, and where its rows go. The traced
functions (:mod:`~mbfg.rigid.kinematics`, :mod:`~mbfg.rigid.rows`, the model's mass) evaluate all joints
of a type in one vectorized expression over these arrays and put the results in place with one gather:
the equation count of a residual is the same for 1 and for 100 joints of a type.

Parameters: every numeric field of a part is a :data:`~mbfg.parts.ParamLike` (a number, or parameter
names and numbers joined by + and -). :class:`ParamTable` turns a list of them into a gather from the
model's parameter vector (:meth:`ModelArrays.parameter_vector`: the parameters the parts name, stacked
once per call): ``value = const + sum_t sign[:, t] * vector[index[:, t]]``, with unused slots pointing at a
zero appended to the vector.

The world is a body of its own in the arrays: index ``nb``, at the origin with the identity orientation.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from mbfg._jax import Array, jax, jnp
from mbfg.parts import WORLD, Frame, ParamLike, sum_terms
from mbfg.rigid.joint_types import JOINT_TYPES, JointType, joint_type

if TYPE_CHECKING:  # annotations only: the model imports this module, and friction imports this one
    from mbfg.rigid.friction import ComplementarityArrays
    from mbfg.rigid.model import RigidModel


def take(x: Array, index: np.ndarray) -> jnp.ndarray:
    """``x[index]`` along the first axis for a constant index array (NumPy ints, in bounds): one gather, without
    the normalization of negative indices that ``x[index]`` traces (five equations per use)."""
    x = jnp.asarray(x)
    index = np.asarray(index, dtype=np.int64).reshape(-1)
    if len(index) and np.array_equal(index, np.arange(index[0], index[0] + len(index))):
        return x[int(index[0]) : int(index[0]) + len(index)]  # a run of rows: a slice, which XLA fuses
    dims = jax.lax.GatherDimensionNumbers(offset_dims=tuple(range(1, x.ndim)), collapsed_slice_dims=(0,),
                                      start_index_map=(0,))
    return jax.lax.gather(x, np.asarray(index, dtype=np.int32).reshape(-1, 1), dims, (1, *x.shape[1:]),
                      mode=jax.lax.GatherScatterMode.PROMISE_IN_BOUNDS)


@dataclass(frozen=True)
class ParamTable:
    """n parameter expressions as a gather: index (n, T) into the parameter vector (its last entry a zero),
    sign (n, T) and const (n,)."""

    index: np.ndarray
    sign: np.ndarray
    const: np.ndarray

    def __call__(self, vector: jnp.ndarray) -> jnp.ndarray:
        """(n,) values, given the parameter vector (with its trailing zero)."""
        value = jnp.asarray(self.const)
        for t in range(self.index.shape[1]):  # the most terms of one expression: a small constant, never n
            value = value + self.sign[:, t] * take(vector, self.index[:, t])
        return value


@dataclass(frozen=True)
class ParamBundle:
    """Several :class:`ParamTable` as one (one gather for them all), cut into named parts by static slices."""

    table: ParamTable
    parts: dict[str, slice]

    def __call__(self, vector: jnp.ndarray) -> dict[str, jnp.ndarray]:
        values = self.table(vector)
        return {name: values[part] for name, part in self.parts.items()}


def _bundle(tables: dict[str, ParamTable]) -> ParamBundle:
    if not tables:
        return ParamBundle(ParamTable(np.zeros((0, 1), dtype=np.int64), np.zeros((0, 1)), np.zeros(0)), {})
    width = max([t.index.shape[1] for t in tables.values()] + [1])
    index, sign, const, parts, start = [], [], [], {}, 0
    for name, t in tables.items():
        pad = width - t.index.shape[1]
        index.append(np.pad(t.index, ((0, 0), (0, pad)), constant_values=-1))
        sign.append(np.pad(t.sign, ((0, 0), (0, pad))))
        const.append(t.const)
        parts[name] = slice(start, start + len(t.const))
        start += len(t.const)
    return ParamBundle(ParamTable(np.concatenate(index), np.concatenate(sign), np.concatenate(const)), parts)


class _Names:
    """The parameters the parts name, in order of first use: the entries of the parameter vector."""

    def __init__(self) -> None:
        self.index: dict[str, int] = {}

    def table(self, values: Sequence[ParamLike]) -> ParamTable:
        """The :class:`ParamTable` of ``values``; the zero slot's index is fixed later (:meth:`finish`)."""
        parsed = []
        for v in values:
            if isinstance(v, str):
                terms = sum_terms(v)
                const = sum(s * t for s, t in terms if not isinstance(t, str))
                names = [(s, self.index.setdefault(t, len(self.index))) for s, t in terms if isinstance(t, str)]
            else:
                const, names = float(v), []
            parsed.append((float(const), names))
        width = max([len(names) for _, names in parsed] + [1])
        index = np.full((len(values), width), -1, dtype=np.int64)
        sign = np.zeros((len(values), width))
        for k, (_, names) in enumerate(parsed):
            for t, (s, i) in enumerate(names):
                index[k, t], sign[k, t] = i, s
        return ParamTable(index, sign, np.array([c for c, _ in parsed], dtype=float))


def _finish(table: ParamTable, zero: int) -> ParamTable:
    return ParamTable(np.where(table.index < 0, zero, table.index), table.sign, table.const)


@dataclass(frozen=True)
class JointGroup:
    """The joints of one type, in model order: parent (``a``) and child (``b``) frames as body indices (world
    nb), the frames' positions (ParamTable of 3n entries, row-major (n, 3)) and constant orientations."""

    kind: JointType
    slot: slice  # their rows in the stacked frames of every joint
    out: slice  # their position functions in the concatenation of every group's, (n * (n_rows + axial),)


@dataclass(frozen=True)
class RowKind:
    """The equality rows of one kind (holonomic, viscous drag, motor): for each row, the position function
    whose Jacobian row it copies (``source``), and its parameters."""

    source: np.ndarray
    control: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))  # motor rows: their control in u


@dataclass(frozen=True)
class ModelArrays:
    """A :class:`~mbfg.rigid.RigidModel` as index arrays (see the module docstring)."""

    names: tuple[str, ...]  # the parameter vector's entries (then a zero)
    # frames of every joint, grouped by type: (nj,) body indices, (nj, 3, 3) constant rotations
    body_a: np.ndarray
    body_b: np.ndarray
    #: "pos_a", "pos_b" (3 nj each, row-major (nj, 3)) [m]: the frames' origins in their bodies;
    #: "contact_point" (3 nc) [m], "contact_radius" (nc,) [m]
    geometry: ParamBundle
    rot_a: np.ndarray
    rot_b: np.ndarray
    groups: tuple[JointGroup, ...]
    # contacts: body, point (ParamTable 3nc), radius, plane normal/tangents (nc, 3), origin (nc, 3)
    contact_body: np.ndarray
    contact_basis: np.ndarray  # (nc, 3, 3): rows n, t1, t2
    contact_origin: np.ndarray
    #: position functions in layout order: index into the concatenation [joint groups..., contacts]
    position_order: np.ndarray
    #: whether position_order is the identity (the concatenation is in layout order already)
    positions_in_order: bool
    mass: ParamTable  # (6 nb,): the diagonal of M, per body [m, m, m, Jx, Jy, Jz]
    #: the equality rows' parameters: "eps", "tau" (holonomic rows), "c" (viscous rows), "J", "K" (motor rows)
    row_parameters: ParamBundle
    holonomic: RowKind
    viscous: RowKind
    motor: RowKind
    #: Equality rows in layout order: index into the concatenation [holonomic, viscous, motor]
    row_order: np.ndarray
    #: The complementarity rows (dry joints, Coulomb bounds, contacts) as batches of friction groups
    complementarity: ComplementarityArrays
    #: The applied forces: their bodies (na,) and forces (ParamTable of 3 na, row-major (na, 3)) [N], world frame
    applied_body: np.ndarray
    applied_force: ParamTable
    #: The observations: index into the concatenation [position functions (n_pos,), r.reshape(-1) (3 nb,)]
    observation_index: np.ndarray
    #: (rows, cols), each (n_pos * 12,): where the derivative of position function o (in the concatenation
    #: [joint groups..., contacts]) along its part's local direction l (0-5: body a's (delta r, psi), 6-11: body b's;
    #: a contact's body is its a) goes in the Jacobian (n_pos, 6 nb + 6); columns from 6 nb on are the world's
    local_jacobian_index: tuple[np.ndarray, np.ndarray] = (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))

    def parameter_vector(self, p: Mapping[str, Any]) -> jnp.ndarray:
        """The parameters the parts name, from the values ``p``, then a zero: (len(names) + 1,)."""
        # One stack, converted once: a conversion per entry would add an equation per parameter.
        vector = jnp.stack([p[n] for n in self.names] + [0.0])
        return vector if vector.dtype == np.float64 else vector.astype(float)


def compile_arrays(model: RigidModel) -> ModelArrays:
    """The index arrays of ``model`` (its layout made already)."""
    names = _Names()
    nb = model.nb
    L = model.layout

    def body(frame_body: str) -> int:
        return nb if frame_body == WORLD else model.body_index[frame_body]

    # Joints grouped by type, in registry order; within a type, model order.
    by_type = [[j for j in model.joints if joint_type(j) is kind] for kind in JOINT_TYPES.values()]
    ordered = [j for js in by_type for j in js]
    frames_a: list[Frame] = [j.a for j in ordered]
    frames_b: list[Frame] = [j.b for j in ordered]
    groups = []
    slot = out = 0
    position_source: dict[int, int] = {}  # a joint's first position function in the layout -> its offset in out
    layout_start = {}
    n_pos = 0
    for j in model.joints:  # the layout's order: each joint's rows, then its coordinate
        layout_start[j.name] = n_pos
        n_pos += joint_type(j).n_rows + joint_type(j).axial
    for kind, js in zip(JOINT_TYPES.values(), by_type):
        width = kind.n_rows + kind.axial
        groups.append(JointGroup(kind, slice(slot, slot + len(js)), slice(out, out + width * len(js))))
        for k, j in enumerate(js):
            for c in range(width):
                position_source[layout_start[j.name] + c] = out + k * width + c
        slot += len(js)
        out += width * len(js)
    for k, _ in enumerate(model.contacts):
        for c in range(3):
            position_source[n_pos + 3 * k + c] = out + 3 * k + c
    coordinate = {j.name: layout_start[j.name] + joint_type(j).n_rows for j in model.joints if joint_type(j).axial}
    observation_index = []
    for name in model.observations:  # a joint's coordinate, or BODY.x/y/z (checked by the model already)
        if name in coordinate:
            observation_index.append(coordinate[name])
        else:
            body_name, _, axis = name.rpartition(".")
            observation_index.append(L.n_pos + 3 * model.body_index[body_name] + "xyz".index(axis))
    position_order = np.array([position_source[i] for i in range(L.n_pos)], dtype=np.int64)

    pos_a = names.table([x for f in frames_a for x in f.position])
    pos_b = names.table([x for f in frames_b for x in f.position])
    contact_point = names.table([x for c in model.contacts for x in c.point])
    contact_radius = names.table([c.radius for c in model.contacts])
    mass = names.table([x for b in model.bodies for x in (b.mass, b.mass, b.mass, *b.inertia)])

    # Equality rows by kind, from the layout's blocks (which assign the rows).
    hol_src, hol_dst, hol_eps, hol_tau = [], [], [], []
    vis_src, vis_dst, vis_c = [], [], []
    mot_src, mot_dst, mot_J, mot_K, mot_u = [], [], [], [], []
    for block in L.blocks:
        if block[0] == "holonomic":
            _, j, pos, i0 = block
            eps = joint_type(j).compliance(j)
            for k in range(pos.stop - pos.start):
                hol_src.append(pos.start + k)
                hol_dst.append(i0 + k)
                hol_eps.append(eps[k])
                hol_tau.append(j.tau)
        elif block[0] == "viscous":
            _, j, coordinate, i = block
            vis_src.append(coordinate)
            vis_dst.append(i)
            vis_c.append(j.viscous)
        elif block[0] == "motor":
            _, j, coordinate, i = block
            mot_src.append(coordinate)
            mot_dst.append(i)
            mot_J.append(j.motor.shaft_inertia)
            mot_K.append(j.motor.gain)
            mot_u.append(model.controls.index(j.motor.control))
    destination = hol_dst + vis_dst + mot_dst
    row_order = np.zeros(L.n_A, dtype=np.int64)
    row_order[np.array(destination, dtype=np.int64)] = np.arange(len(destination))
    assert sorted(destination) == list(range(L.n_A)), "every equality row is holonomic, viscous or a motor"
    tables = {
        "hol_eps": names.table(hol_eps), "hol_tau": names.table(hol_tau), "vis_c": names.table(vis_c),
        "mot_J": names.table(mot_J), "mot_K": names.table(mot_K),
    }

    from mbfg.rigid.friction import ComplementarityArrays, compile_complementarity  # it imports this module

    batches, b_order, b_source, b_sign, friction_tables = compile_complementarity(L.blocks, L.n_B, names.table)
    applied_force = names.table([x for f in model.applied for x in f.force])
    zero = len(names.index)

    def done(t: ParamTable) -> ParamTable:
        return _finish(t, zero)

    def index(values: list[int]) -> np.ndarray:
        return np.array(values, dtype=np.int64)

    from mbfg.rigid.kinematics import plane_basis  # kinematics imports take() from here

    # Each position function's part and its bodies, in the concatenation's order (a contact's second body: world).
    part_bodies = []
    for group in groups:
        width = group.kind.n_rows + group.kind.axial
        for k in range(group.slot.start, group.slot.stop):
            part_bodies += [(body(frames_a[k].body), body(frames_b[k].body))] * width
    part_bodies += [(model.body_index[c.body], nb) for c in model.contacts for _ in range(3)]
    local = np.arange(12)
    jac_cols = np.array([6 * np.where(local < 6, a, b) + local % 6 for a, b in part_bodies], dtype=np.int64)
    jac_rows = np.repeat(np.arange(len(part_bodies), dtype=np.int64), 12)

    bases = [np.stack(plane_basis(c.normal)) for c in model.contacts]
    return ModelArrays(
        names=tuple(names.index),
        body_a=index([body(f.body) for f in frames_a]),
        body_b=index([body(f.body) for f in frames_b]),
        geometry=_bundle({"pos_a": done(pos_a), "pos_b": done(pos_b), "contact_point": done(contact_point),
                          "contact_radius": done(contact_radius)}),
        rot_a=np.array([f.R() for f in frames_a]).reshape(-1, 3, 3),
        rot_b=np.array([f.R() for f in frames_b]).reshape(-1, 3, 3),
        groups=tuple(groups),
        contact_body=index([model.body_index[c.body] for c in model.contacts]),
        contact_basis=np.array(bases).reshape(-1, 3, 3),
        contact_origin=np.array([c.origin for c in model.contacts], dtype=float).reshape(-1, 3),
        position_order=position_order,
        positions_in_order=bool(np.array_equal(position_order, np.arange(L.n_pos))),
        mass=done(mass),
        row_parameters=_bundle({"eps": done(tables["hol_eps"]), "tau": done(tables["hol_tau"]),
                                "c": done(tables["vis_c"]), "J": done(tables["mot_J"]), "K": done(tables["mot_K"])}),
        holonomic=RowKind(index(hol_src)),
        viscous=RowKind(index(vis_src)),
        motor=RowKind(index(mot_src), index(mot_u)),
        row_order=row_order,
        applied_body=index([model.body_index[f.body] for f in model.applied]),
        applied_force=done(applied_force),
        complementarity=ComplementarityArrays(batches, b_order, b_source, b_sign,
                                              _bundle({k: done(t) for k, t in friction_tables.items()})),
        observation_index=index(observation_index),
        local_jacobian_index=(jac_rows, jac_cols.reshape(-1)),
    )
