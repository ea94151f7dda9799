"""A factor graph linearized one factor type at a time: the batch solvers' performance path.

A :class:`VectorizedGraph` holds :class:`~mbfg.adapter.FactorGroup` s (many factors of one
type, e.g. every impulse factor of a log) and a ``gtsam.NonlinearFactorGraph`` of the rest
(any GTSAM factor, ours or foreign). :meth:`VectorizedGraph.linearize` evaluates each group
in one vectorized JAX call (chunked) and builds GTSAM ``JacobianFactor`` s from the NumPy
blocks; the rest is linearized the ordinary way. No per-factor Python callback runs.

Blocks. The linear system's variables are *blocks*: several GTSAM variables stacked, e.g.
one rigid-body state (its nb poses and its velocity, 12 nb tangent dimensions) or all the
parameters (the free scalars and the tilt). GTSAM's Python ``JacobianFactor`` takes at most
three keys, and an impulse factor touches two states and the parameters: three blocks. A
variable that no block names is a block of its own. The block keys live in the linear
system only; :meth:`Blocks.split` maps a solution back to the GTSAM variables.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import gtsam
import numpy as np

from mbfg.adapter import FactorGroup
from mbfg.errors import MbfgError
from mbfg.keys import name as key_name
from mbfg.values_snapshot import ValuesSnapshot


class Blocks:
    """Which GTSAM variables form which block of the linear system.

    Args:
        members: per block, its block key (any key not used by a variable) and the
            variables' keys it stacks, in tangent order: ``[(block_key, [key, ...]), ...]``.
        dims: tangent dimension of every variable (``values.zeroVectors()`` gives them).
    """

    def __init__(self, members: Sequence[tuple[int, Sequence[int]]], dims: Mapping[int, int]) -> None:
        self.dims = dict(dims)
        self.of: dict[int, tuple[int, int]] = {}  # variable key -> (block key, column offset)
        self.size: dict[int, int] = {}
        self.members: dict[int, list[int]] = {}
        for block, keys in members:
            if block in self.dims or block in self.size:
                raise MbfgError(f"block key {key_name(block)} is used twice or is a variable's key")
            offset = 0
            for key in keys:
                if key in self.of:
                    raise MbfgError(f"variable {key_name(key)} is in two blocks")
                self.of[key] = (block, offset)
                offset += self.dims[key]
            self.size[block] = offset
            self.members[block] = list(keys)
        for key, dim in self.dims.items():
            if key not in self.of:  # a variable of its own
                self.of[key] = (key, 0)
                self.size[key] = dim
                self.members[key] = [key]
        # All block columns laid end to end: diag(J^T J) and the damping are flat arrays over them.
        self.start: dict[int, int] = {}
        segments, total = [], 0
        for block, size in self.size.items():
            self.start[block] = total
            segments += [total + self.of[key][1] for key in self.members[block]]
            total += size
        self.total = total
        #: first flat column of every variable (its segment), in flat order
        self.segments = np.asarray(segments)
        self._slices: list[tuple[int, int, int]] | None = None

    def columns(self, block_keys: np.ndarray) -> np.ndarray:
        """(N, size) flat column indices of N blocks of the same size."""
        size = self.size[int(block_keys[0])]
        return np.asarray([self.start[int(b)] for b in block_keys])[:, None] + np.arange(size)

    def variables(self, flat: np.ndarray) -> gtsam.VectorValues:
        """A solution over the flat block columns (total,) as a solution over the GTSAM variables."""
        if self._slices is None:  # (key, first, stop) per variable, made once: this runs per LM step
            self._slices = [(key, self.start[block] + offset, self.start[block] + offset + self.dims[key])
                            for key, (block, offset) in self.of.items()]
        out = gtsam.VectorValues()
        insert = out.insert
        for key, first, stop in self._slices:
            insert(key, flat[first:stop])
        return out

    def flat(self, delta: gtsam.VectorValues) -> np.ndarray:
        """A solution over blocks as one array over the flat block columns (total,); absent blocks 0."""
        out = np.zeros(self.total)
        for block, size in self.size.items():
            if delta.exists(block):
                out[self.start[block] : self.start[block] + size] = delta.at(block)
        return out

    def split(self, delta: gtsam.VectorValues) -> gtsam.VectorValues:
        """A solution over blocks as a solution over the GTSAM variables (for ``Values.retract``)."""
        out = gtsam.VectorValues()
        for block, keys in self.members.items():
            if not delta.exists(block):
                continue
            x = delta.at(block)
            offset = 0
            for key in keys:
                out.insert(key, x[offset : offset + self.dims[key]])
                offset += self.dims[key]
        return out


def _sigmas(noise: gtsam.noiseModel.Base, name: str) -> np.ndarray:
    """Per-row sigmas of a Gaussian (unit, isotropic or diagonal) noise model, for whitening in NumPy."""
    if not isinstance(noise, gtsam.noiseModel.Diagonal) or isinstance(noise, gtsam.noiseModel.Constrained):
        raise MbfgError(f"{name}: the vectorized path whitens diagonal Gaussian noise models only, got "
                        f"{type(noise).__name__}; put such factors in the graph's ordinary part")
    return np.asarray(noise.sigmas(), dtype=float)


def _jacobian_factor(blocks: Sequence[tuple[int, np.ndarray]], b: np.ndarray, unit: gtsam.noiseModel.Diagonal,
                     name: str) -> gtsam.JacobianFactor:
    if len(blocks) == 1:
        return gtsam.JacobianFactor(blocks[0][0], blocks[0][1], b, unit)
    if len(blocks) == 2:
        return gtsam.JacobianFactor(blocks[0][0], blocks[0][1], blocks[1][0], blocks[1][1], b, unit)
    if len(blocks) == 3:
        return gtsam.JacobianFactor(blocks[0][0], blocks[0][1], blocks[1][0], blocks[1][1],
                                    blocks[2][0], blocks[2][1], b, unit)
    raise MbfgError(f"{name}: a factor touches {len(blocks)} blocks of the linear system; GTSAM's Python "
                    f"JacobianFactor takes at most 3 (stack its variables into fewer blocks)")


class _GroupLayout:
    """Where a group's Jacobian columns go: per factor the same blocks at the same offsets."""

    def __init__(self, group: FactorGroup, blocks: Blocks) -> None:
        name = group.ft.name
        keys = np.asarray(group.keys, dtype=np.int64)
        first = keys[0]
        block_of = [blocks.of[int(k)] for k in first]
        dims = [blocks.dims[int(k)] for k in first]
        slots: list[int] = []  # distinct blocks of one factor, by first variable
        self.slot_of: list[int] = []
        for j, (block, _) in enumerate(block_of):
            match = [s for s in slots if block_of[s][0] == block]
            if match:
                self.slot_of.append(slots.index(match[0]))
            else:
                self.slot_of.append(len(slots))
                slots.append(j)
        self.offsets = [offset for _, offset in block_of]
        self.dims = dims
        self.slot_sizes = [blocks.size[block_of[j][0]] for j in slots]
        # The block keys of every factor, and a check that all factors share the first one's pattern.
        block_keys = np.empty_like(keys)
        for j in range(keys.shape[1]):
            pairs = [blocks.of[int(k)] for k in keys[:, j]]
            block_keys[:, j] = [b for b, _ in pairs]
            if any(offset != self.offsets[j] for _, offset in pairs):
                raise MbfgError(f"{name}: variable {j} sits at different offsets of its block across the group")
        for j, s in enumerate(self.slot_of):
            if not np.array_equal(block_keys[:, j], block_keys[:, slots[s]]):
                raise MbfgError(f"{name}: variables {slots[s]} and {j} share a block in the first factor only")
        self.slot_keys = block_keys[:, slots]  # (N, number of slots)
        if len(slots) > 3:
            raise MbfgError(f"{name}: a factor touches {len(slots)} blocks of the linear system; GTSAM's Python "
                            f"JacobianFactor takes at most 3 (stack its variables into fewer blocks)")
        # Where each variable's columns start in [r | H_1 | ...], and per slot its variables and
        # whether its block is a plain column range there (:meth:`scatter`).
        self._starts = np.cumsum([1, *dims])
        self._slot_members = [[j for j, slot in enumerate(self.slot_of) if slot == s] for s in range(len(slots))]
        self._slot_views = [self._view_columns(mine) for mine in self._slot_members]

    def _view_columns(self, mine: list[int]) -> tuple[int, int] | None:
        """The columns of ``[r | H_1 | ...]`` that are a slot's whole block as they stand, if its
        variables (indices ``mine``) come one after another in block order and fill it."""
        offset = 0
        for a, j in enumerate(mine):
            if j != mine[0] + a or self.offsets[j] != offset:
                return None
            offset += self.dims[j]
        if offset != self.slot_sizes[self.slot_of[mine[0]]]:
            return None
        return int(self._starts[mine[0]]), int(self._starts[mine[0]]) + offset

    def scatter(self, out: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
        """(r (N, m), per slot (N, m, block size)) from a group's [r | H_1 | ...] (N, m, 1 + sum dims).

        A slot whose variables come one after another in block order and fill the block (an impulse
        factor's state blocks) is a view of ``out``; the others are assembled."""
        n, m = out.shape[:2]
        A = []
        for size, mine, view in zip(self.slot_sizes, self._slot_members, self._slot_views):
            if view is not None:
                A.append(out[:, :, view[0] : view[1]])
                continue
            block = np.zeros((n, m, size))
            for j in mine:
                block[:, :, self.offsets[j] : self.offsets[j] + self.dims[j]] += \
                    out[:, :, self._starts[j] : self._starts[j + 1]]
            A.append(block)
        return out[:, :, 0], A


class VectorizedGraph:
    """Factor groups plus ordinary GTSAM factors, linearized over blocks (module docstring).

    Args:
        groups: the factor groups (each evaluated in one vectorized call).
        others: every other factor of the problem (linearized by GTSAM).
        blocks: the block layout of the linear system.
        order: block keys in elimination order (e.g. states in time order, then parameters).
    """

    def __init__(self, groups: Sequence[FactorGroup], others: gtsam.NonlinearFactorGraph, blocks: Blocks,
                 order: Sequence[int]) -> None:
        self.groups, self.others, self.blocks = list(groups), others, blocks
        self.order = [int(k) for k in order]
        missing = set(blocks.size) - set(self.order)
        if missing or len(self.order) != len(set(self.order)):
            raise MbfgError(f"the elimination order must name every block once; missing "
                            f"{[key_name(k) for k in sorted(missing)][:5]}")
        self._layouts = [_GroupLayout(g, blocks) for g in self.groups]
        self._whiten = [1.0 / _sigmas(g.noise, g.ft.name) for g in self.groups]
        self._columns = [[blocks.columns(layout.slot_keys[:, s]) for s in range(layout.slot_keys.shape[1])]
                         for layout in self._layouts]
        self._unit: dict[int, gtsam.noiseModel.Diagonal] = {}
        self._keys = [np.asarray(g.keys, dtype=np.uint64) for g in self.groups]

    @property
    def columns(self) -> list[list[np.ndarray]]:
        """Per group, per slot (block) of its factors, the flat block columns (N, block size) they touch."""
        return self._columns

    @classmethod
    def from_graph(cls, graph: gtsam.NonlinearFactorGraph, values: gtsam.Values) -> VectorizedGraph:
        """A user's graph as a vectorized one: the factors of :meth:`FactorType.make_many` in it are
        evaluated one call per group, every other factor (GTSAM's own, :meth:`FactorType.make`'s, a group's
        under a noise model that is not diagonal Gaussian) by GTSAM. Each variable of ``values`` is a block
        of its own, so the linear system is over the graph's own keys; elimination in COLAMD order.

        The groups' factors are found by identity in ``graph`` (:meth:`FactorGroup.find`); a group only
        some of whose factors are in the graph becomes a group of those."""
        factors = [graph.at(i) for i in range(graph.size())]
        found = FactorGroup.find(factors)
        rows: dict[int, tuple[FactorGroup, list[int]]] = {}
        others = gtsam.NonlinearFactorGraph()
        for n, factor in enumerate(factors):
            hit = found.get(n)
            if hit is not None and isinstance(hit[0].noise, gtsam.noiseModel.Diagonal) \
                    and not isinstance(hit[0].noise, gtsam.noiseModel.Constrained):
                rows.setdefault(id(hit[0]), (hit[0], []))[1].append(hit[1])
            elif factor is not None:
                others.push_back(factor)
        groups = [group if row == list(range(len(group))) else group.subset(row) for group, row in rows.values()]
        zeros = values.zeroVectors()
        blocks = Blocks([], {key: zeros.at(key).shape[0] for key in values.keys()})
        ordering = graph.orderingCOLAMD()
        order = [ordering.at(i) for i in range(ordering.size())]
        # A variable no factor touches: last, where it does not disturb the ordering.
        order += sorted(set(blocks.size) - set(order))
        return cls(groups, others, blocks, order)

    @staticmethod
    def _read(group: FactorGroup, keys: np.ndarray, snapshot: ValuesSnapshot) -> tuple[np.ndarray, ...]:
        """A group's inputs, as ``FactorGroup.read``, from a bulk snapshot of the values."""
        return tuple(snapshot.column(kind, keys[:, j]) for j, kind in enumerate(group.ft.kinds))

    def nonlinear_graph(self) -> gtsam.NonlinearFactorGraph:
        """The same problem as one ordinary GTSAM graph (CustomFactors and the others)."""
        graph = gtsam.NonlinearFactorGraph()
        for group in self.groups:
            for f in group.factors:
                graph.push_back(f)
        graph.push_back(self.others)
        return graph

    def error(self, values: gtsam.Values) -> float:
        """0.5 * the sum of squared whitened residuals, as ``NonlinearFactorGraph.error``."""
        snapshot = ValuesSnapshot(values)
        total = self.others.error(values)
        for group, w, keys in zip(self.groups, self._whiten, self._keys):
            r = group.evaluate(self._read(group, keys, snapshot), linearize=False) * w
            total += 0.5 * float(np.sum(r * r))
        return total

    def _unit_noise(self, m: int) -> gtsam.noiseModel.Diagonal:
        if m not in self._unit:
            self._unit[m] = gtsam.noiseModel.Unit.Create(m)
        return self._unit[m]

    def linearize(self, values: gtsam.Values) -> tuple[gtsam.GaussianFactorGraph, np.ndarray]:
        """The whitened linear system over blocks at ``values`` and diag(J^T J) over all block
        columns laid end to end (``blocks.start``)."""
        arrays = self.linearize_arrays(values)
        return self.gaussian(arrays), arrays.diag

    def linearize_arrays(self, values: gtsam.Values) -> LinearArrays:
        """The whitened linear system at ``values`` as arrays (:class:`LinearArrays`), each factor type's in one
        call; :meth:`gaussian` makes the GTSAM graph of it."""
        diag = np.zeros(self.blocks.total)
        snapshot = ValuesSnapshot(values)
        groups = []
        for group, layout, w, columns, group_keys in zip(self.groups, self._layouts, self._whiten, self._columns,
                                                         self._keys):
            out = group.evaluate(self._read(group, group_keys, snapshot), linearize=True) * w[None, :, None]
            r, A = layout.scatter(out)
            for a, cols in zip(A, columns):
                diag += np.bincount(cols.ravel(), weights=np.einsum("nij,nij->nj", a, a).ravel(),
                                    minlength=diag.size)
            groups.append((r, A, columns, layout.slot_keys))
        others = []
        for factor in _remapped(self.others.linearize(values), self.blocks, self._unit_noise):
            A_f, b_f = factor.jacobian()
            cols = np.concatenate([self.blocks.start[key] + np.arange(self.blocks.size[key])
                                   for key in factor.keys()])
            diag += np.bincount(cols, weights=np.einsum("ij,ij->j", A_f, A_f), minlength=diag.size)
            others.append((factor, A_f, -b_f, cols))
        return LinearArrays(groups, others, diag)

    def gaussian(self, arrays: LinearArrays) -> gtsam.GaussianFactorGraph:
        """The GTSAM linear graph over blocks of :meth:`linearize_arrays`' system: each group's factors in turn,
        then the others (one ``JacobianFactor`` per factor)."""
        linear = gtsam.GaussianFactorGraph()
        for r, A, _, slot_keys in arrays.groups:
            b = -r
            unit = self._unit_noise(r.shape[1])
            # GTSAM's Python JacobianFactor costs microseconds per factor whatever is done around it: the
            # loop's own work is kept to iterating the arrays (one slot count per group, checked by the layout).
            push, make = linear.push_back, gtsam.JacobianFactor
            keys = slot_keys.T.tolist()
            if len(A) == 1:
                for k1, A1, b1 in zip(keys[0], A[0], b):
                    push(make(k1, A1, b1, unit))
            elif len(A) == 2:
                for k1, A1, k2, A2, b1 in zip(keys[0], A[0], keys[1], A[1], b):
                    push(make(k1, A1, k2, A2, b1, unit))
            else:
                for k1, A1, k2, A2, k3, A3, b1 in zip(keys[0], A[0], keys[1], A[1], keys[2], A[2], b):
                    push(make(k1, A1, k2, A2, k3, A3, b1, unit))
        for factor, *_ in arrays.others:
            linear.push_back(factor)
        return linear


@dataclass
class LinearArrays:
    """A :class:`VectorizedGraph`'s whitened linear system ``J delta + r`` at one point, as arrays over the flat
    block columns (``Blocks.start``).

    groups: per factor group (r (N, m), per slot A (N, m, block size), per slot the flat columns (N, block size),
    the slots' block keys (N, slots)); others: per ordinary factor (its ``JacobianFactor`` over blocks, A (m, c),
    r (m,), the flat columns (c,)); diag: diag(J^T J) (total,)."""

    groups: list[tuple[np.ndarray, list[np.ndarray], list[np.ndarray], np.ndarray]]
    others: list[tuple[gtsam.JacobianFactor, np.ndarray, np.ndarray, np.ndarray]]
    diag: np.ndarray


def _remapped(linear: gtsam.GaussianFactorGraph, blocks: Blocks, unit_noise) -> list[gtsam.JacobianFactor]:
    """The factors of an ordinary linearization re-expressed over blocks (zero columns where a block
    member is not a variable of the factor)."""
    out = []
    for i in range(linear.size()):
        factor = linear.at(i)
        if factor is None:
            continue
        A, b = factor.jacobian()
        per_block: dict[int, np.ndarray] = {}
        col = 0
        for key in factor.keys():
            block, offset = blocks.of[key]
            dim = blocks.dims[key]
            if block not in per_block:
                per_block[block] = np.zeros((A.shape[0], blocks.size[block]))
            per_block[block][:, offset : offset + dim] = A[:, col : col + dim]
            col += dim
        out.append(_jacobian_factor(list(per_block.items()), b, unit_noise(A.shape[0]),
                                    f"factor {i} of the graph's ordinary part"))
    return out


__all__ = ["Blocks", "LinearArrays", "VectorizedGraph"]
