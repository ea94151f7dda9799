"""Many factors of one :class:`~mbfg.adapter.FactorType` evaluated together (:class:`FactorGroup`, made by
:meth:`mbfg.adapter.FactorType.make_many` and :meth:`~mbfg.adapter.FactorType.group`).

A group evaluates its N factors in vmapped JAX calls of at most :data:`CHUNK` factors, padded to shared sizes
(:func:`call_size`), for two callers: GTSAM, through one ``gtsam.CustomFactor`` per factor whose callbacks
share the group's evaluation at the values GTSAM passes (:meth:`FactorGroup.callback`), and the vectorized
batch solvers (:mod:`mbfg.vectorized`), which read and evaluate the group without callbacks
(:meth:`FactorGroup.read`, :meth:`FactorGroup.evaluate`). Constants are broadcast to every factor, or given
per factor (:class:`PerFactor`).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import gtsam
import numpy as np

from mbfg._jax import jax
from mbfg.errors import MbfgError
from mbfg.values_snapshot import ValuesSnapshot
from mbfg.var_kinds import READERS

if TYPE_CHECKING:
    from mbfg.adapter import FactorType

__all__ = ["CHUNK", "EXACT_UP_TO", "FactorGroup", "PerFactor", "as_constant", "call_size"]


def as_constant(value: Any) -> Any:
    """A constant ready for the jitted residual: JAX arrays are kept as they are (a
    mechanism's arrays are shared by every factor), anything else becomes a NumPy
    array. Creating a JAX array from a Python float costs ~0.2 ms, more than a call.
    """
    return value if isinstance(value, jax.Array) else np.asarray(value)


@dataclass(frozen=True)
class PerFactor:
    """A constant of :meth:`mbfg.adapter.FactorType.make_many` with one value per factor (leading axis N)."""

    values: Any


#: Factors per vmapped call: longer groups are evaluated in chunks of this many. A vmapped
#: call over thousands of factors is slower per factor than a few calls over fewer.
CHUNK = 2048
#: Groups of up to this many factors are evaluated at their own size (a stream's few new
#: factors); longer ones are padded to the next power of two (at most CHUNK), so that logs of
#: different lengths share compiled shapes (and JAX's persistent compilation cache).
EXACT_UP_TO = 64


def call_size(n: int) -> int:
    """The batch size of the vmapped calls for a group of n factors."""
    return n if n <= EXACT_UP_TO else min(CHUNK, 1 << (n - 1).bit_length())


#: The groups whose ``gtsam.CustomFactor`` s exist (:meth:`FactorGroup.factors`), for
#: :func:`FactorGroup.find`: GTSAM keeps a factor's Python object, not what made it.
_MADE_GROUPS: weakref.WeakSet[FactorGroup] = weakref.WeakSet()


class FactorGroup:
    """N factors of one :class:`FactorType` evaluated together (:meth:`mbfg.adapter.FactorType.make_many`).

    ``factors`` are the group's ``gtsam.CustomFactor`` s. The first of them that GTSAM
    evaluates at new values evaluates the whole group there (reading every factor's
    variables from the same ``gtsam.Values``); the others find their result in the group's
    cache, after checking that their own inputs are the ones the cache was computed at.
    :meth:`read` and :meth:`evaluate` are the same evaluation without GTSAM's per-factor
    callbacks, for the vectorized batch solver (:mod:`mbfg.vectorized`).

    Attributes:
        ft: the factor type; keys: (N, number of variables) keys; noise: the shared noise model.
    """

    def __init__(self, ft: FactorType, keys: list[list[int]], noise: gtsam.noiseModel.Base,
                 constants: tuple[Any, ...], regroup: bool = True, per_variable: bool = False) -> None:
        self.ft, self.keys, self.noise, self.regroup, self.per_variable = ft, keys, noise, regroup, per_variable
        n = len(keys)
        for i, row in enumerate(keys):
            if len(row) != len(ft.kinds):
                raise MbfgError(f"{ft.name}: factor {i} has {len(row)} keys, expected {len(ft.kinds)} "
                                 f"({[k.value for k in ft.kinds]})")
        axes: list[int | None] = []
        cs: list[Any] = []
        self._per_factor: list[bool] = []
        for c in constants:
            self._per_factor.append(isinstance(c, PerFactor))
            if isinstance(c, PerFactor):
                value = jax.tree_util.tree_map(np.asarray, c.values)  # NumPy: see as_constant
                lengths = {leaf.shape[0] for leaf in jax.tree_util.tree_leaves(value)}
                if lengths != {n}:
                    raise MbfgError(f"{ft.name}: PerFactor constant has leading sizes {lengths}, expected {n}")
                axes.append(0)
                cs.append(value)
            else:
                axes.append(None)
                cs.append(jax.tree_util.tree_map(as_constant, c))
        self.constants = tuple(cs)
        self._error_fn, self._linearize_fn = ft.vmapped_programs(tuple(axes), per_variable)
        self._chunks = self._chunk_plan(n)
        self._key_columns = np.asarray(keys, dtype=np.uint64).reshape(n, len(ft.kinds))
        # The values last read (stacked per variable) and what was computed there (the GTSAM callbacks).
        self._xs: tuple[np.ndarray, ...] | None = None
        self._signatures: list[bytes] | None = None
        self._columns: list[slice] | None = None
        self._errors: np.ndarray | None = None
        self._residuals: np.ndarray | None = None
        self._blocks: list[np.ndarray] | None = None
        self._factors: list[gtsam.CustomFactor] | None = None

    @property
    def factors(self) -> list[gtsam.CustomFactor]:
        """The group's ``gtsam.CustomFactor`` s (made on first use: a solver of our own that evaluates the
        group vectorized never needs them)."""
        if self._factors is None:
            self._factors = [gtsam.CustomFactor(self.noise, row, self.callback(i)) for i, row in enumerate(self.keys)]
            _MADE_GROUPS.add(self)
        return self._factors

    def release_factors(self) -> None:
        """Drop the group's own references to its :attr:`factors` (made again if asked for later).

        Each factor's callback, held by GTSAM's C++ side, refers to the group, and the group to the factors:
        a cycle through C++ that Python's garbage collector cannot see, so the group, its factors and its
        last evaluation would live as long as the process. The owner of a graph built from the group calls
        this when it is done with it (:class:`mbfg.graph_builder.GraphBuilder` does when it is dropped);
        factors still in a graph keep working, and :meth:`find` no longer finds them (they are then
        linearized by GTSAM one by one)."""
        self._factors = None

    def subset(self, rows: Sequence[int]) -> FactorGroup:
        """A group of factors ``rows`` of this one (in that order; a row may repeat), with their slices of the
        per-factor constants: the same factors, evaluated together."""
        idx = np.asarray(rows, dtype=np.int64)
        constants = tuple(PerFactor(jax.tree_util.tree_map(lambda a: a[idx], c)) if per else c  # noqa: B023
                          for c, per in zip(self.constants, self._per_factor))
        return FactorGroup(self.ft, [self.keys[i] for i in idx], self.noise, constants, self.regroup,
                           self.per_variable)

    def __len__(self) -> int:
        return len(self.keys)

    @staticmethod
    def find(factors: Sequence[Any]) -> dict[int, tuple[FactorGroup, int]]:
        """Position in ``factors`` -> (group, row) for each factor made by a live group's :attr:`factors`
        (found by identity: GTSAM hands back the Python object a factor was added as); others are absent."""
        made = {id(f): (group, i) for group in list(_MADE_GROUPS) for i, f in enumerate(group._factors or ())}
        return {n: made[id(f)] for n, f in enumerate(factors) if f is not None and id(f) in made}

    # -- vectorized evaluation -------------------------------------------------------
    def _chunk_plan(self, n: int) -> list[tuple[int, int, tuple[Any, ...]]]:
        """(start, stop, constants of the chunk) per vmapped call of :func:`call_size` factors; the last
        call is padded with copies of the last factor."""
        size = call_size(n)
        if size == n:
            return [(0, n, self.constants)]
        plan = []
        for start in range(0, n, size):
            idx = np.minimum(np.arange(start, start + size), n - 1)
            cs = tuple(jax.tree_util.tree_map(lambda a: a[idx], c) if per else c  # noqa: B023
                       for c, per in zip(self.constants, self._per_factor))
            plan.append((start, min(start + size, n), cs))
        return plan

    def read(self, values: gtsam.Values, cache: ValuesSnapshot | dict[int, np.ndarray] | None = None
             ) -> tuple[np.ndarray, ...]:
        """Every factor's variables from ``values``, stacked per argument: ((N, ...) per variable), each
        distinct variable read once (:class:`mbfg.values_snapshot.ValuesSnapshot`).

        ``cache``: shared between groups read at the same values, so that a variable is read once: a
        snapshot of ``values``, or a dict key -> array (filled here)."""
        snapshot = cache if isinstance(cache, ValuesSnapshot) else ValuesSnapshot(values, cache)
        return tuple(snapshot.column(kind, self._key_columns[:, j]) for j, kind in enumerate(self.ft.kinds))

    def evaluate(self, xs: tuple[np.ndarray, ...], linearize: bool) -> np.ndarray:
        """Residuals (N, m), or with ``linearize`` (N, m, 1 + sum of tangent dims) = [r | H_1 | H_2 | ...],
        unwhitened, at the stacked variables ``xs`` (:meth:`read`), in calls of :func:`call_size` factors."""
        n = len(self.keys)
        if n == 1:  # one factor: the type's single program (one joint pass: fewer kernels, it is launch-bound)
            cs = tuple(jax.tree_util.tree_map(lambda a: a[0], c) if per else c
                       for c, per in zip(self.constants, self._per_factor))
            error, linearized = self.ft.programs
            single = linearized if linearize else error
            return np.asarray(single(tuple(x[0] for x in xs), cs))[None]
        fn = self._linearize_fn if linearize else self._error_fn
        size = call_size(n)
        if size == n:
            return np.asarray(fn(xs, self.constants))
        parts = []
        for start, stop, cs in self._chunks:
            idx = np.minimum(np.arange(start, start + size), n - 1)
            parts.append(np.asarray(fn(tuple(x[idx] for x in xs), cs))[: stop - start])
        return np.concatenate(parts)

    # -- GTSAM callbacks -------------------------------------------------------------
    # GTSAM calls back once per factor, and a Python callback costs microseconds however little it does:
    # each one reads its own variables (to check that the group's result is for these values: the user may
    # change a Values in place), compares their bytes with the signature of its row, and hands over arrays
    # that the group's evaluation laid out per factor, contiguous, beforehand.

    def _refresh(self, values: gtsam.Values) -> None:
        """Read the group's variables at ``values`` (in bulk) and drop the results of older values."""
        xs = self.read(values)
        n = len(self.keys)
        # One byte string per factor, as a callback's own read gives it (C order, float64): its cache
        # check is then a single comparison.
        flat = np.concatenate([np.asarray(x, dtype=float).reshape(n, -1) for x in xs], axis=1)
        buf, width = flat.tobytes(), flat.shape[1] * flat.itemsize
        self._xs = xs
        self._signatures = [buf[i * width : (i + 1) * width] for i in range(n)]
        self._errors = self._residuals = self._blocks = None
        if self._columns is None:
            self._columns = self.ft.jacobian_columns(tuple(x[0] for x in xs))

    def _linearized(self) -> None:
        """Evaluate the group's residuals and Jacobians at the refreshed values, split per factor and
        variable into contiguous arrays: (N, m) and, per variable, (N, m, dim)."""
        assert self._xs is not None and self._columns is not None  # set by _refresh
        out = self.evaluate(self._xs, linearize=True)
        self._blocks = [np.ascontiguousarray(out[:, :, columns]) for columns in self._columns]
        self._residuals = self._errors = np.ascontiguousarray(out[:, :, 0])

    def callback(self, i: int) -> Callable[..., np.ndarray]:
        readers = tuple(zip([READERS[kind] for kind in self.ft.kinds], self.keys[i]))

        def evaluate(_: gtsam.CustomFactor, values: gtsam.Values, H: Any) -> np.ndarray:
            xs = [read(values, key) for read, key in readers]
            signatures = self._signatures
            if signatures is None or b"".join([x.tobytes() for x in xs]) != signatures[i]:
                if signatures is not None and not self.regroup:
                    return self._alone(i, tuple(xs), H)
                self._refresh(values)
            if H is None:
                if self._errors is None:
                    assert self._xs is not None  # set by _refresh
                    self._errors = np.ascontiguousarray(self.evaluate(self._xs, linearize=False))
                return self._errors[i]
            if self._blocks is None:
                self._linearized()
            assert self._blocks is not None and self._residuals is not None  # set by _linearized
            for j, blocks in enumerate(self._blocks):
                H[j] = blocks[i]
            return self._residuals[i]

        return evaluate

    def _alone(self, i: int, xs: tuple[np.ndarray, ...], H: Any) -> np.ndarray:
        """Factor i evaluated by itself (``regroup=False``), with its own slice of the per-factor constants."""
        cs = tuple(jax.tree_util.tree_map(lambda a: a[i], c) if per else c
                   for c, per in zip(self.constants, self._per_factor))
        error, linearize = self.ft.programs
        if H is None:
            return np.asarray(error(xs, cs))
        out = np.asarray(linearize(xs, cs))
        assert self._columns is not None  # set by _refresh: this factor was evaluated with the others before
        for j, columns in enumerate(self._columns):
            H[j] = np.ascontiguousarray(out[:, columns])
        return out[:, 0]
