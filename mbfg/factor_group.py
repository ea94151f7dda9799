"""Many factors of one :class:`~mbfg.adapter.FactorType` evaluated together (:class:`FactorGroup`, made by
:meth:`mbfg.adapter.FactorType.make_many` and :meth:`~mbfg.adapter.FactorType.group`).

A group evaluates its N factors in vmapped JAX calls of at most :data:`CHUNK` factors, padded to shared sizes
(:func:`call_size`), for three callers: GTSAM, through one ``gtsam.CustomFactor`` per factor whose callbacks
share the group's evaluation at the values GTSAM passes (:meth:`FactorGroup.callback`); GTSAM through
bundles, one ``gtsam.CustomFactor`` for the rows that share a variable (:meth:`FactorGroup.bundles`: fewer
callbacks, which GTSAM's own optimizers make expensive); and the vectorized batch solvers
(:mod:`mbfg.vectorized`), which read and evaluate the group without callbacks (:meth:`FactorGroup.read`,
:meth:`FactorGroup.evaluate`). Constants are broadcast to every factor, or given per factor (:class:`PerFactor`).

Every callback checks that the group's last evaluation is for its values: it reads its own variables and
compares their bytes with those the evaluation read (GTSAM's optimizers pass a different ``Values`` to a
trial step's error and to the linearization, and a user may change a ``Values`` in place), so a result is
never taken at other values than it was computed at.
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

__all__ = ["CHUNK", "EXACT_UP_TO", "FactorGroup", "PerFactor", "as_constant", "call_size", "stacked_noise"]


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
        self._per_row = False  # callback() was asked for: _refresh computes the rows' signatures
        self._bundles: list[_Bundle] = []  # made by bundles(); _refresh computes their signatures
        self._bundle_layout: _BundleLayout | None = None
        self._bundle_jacobians: list[np.ndarray] | None = None
        self._bundle_signatures: list[bytes] | None = None

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
        self._xs = xs
        self._signatures = None
        if self._per_row:
            # One byte string per factor, as a callback's own read gives it (C order, float64): its cache
            # check is then a single comparison.
            flat = np.concatenate([np.asarray(x, dtype=float).reshape(n, -1) for x in xs], axis=1)
            buf, width = flat.tobytes(), flat.shape[1] * flat.itemsize
            self._signatures = [buf[i * width : (i + 1) * width] for i in range(n)]
        self._errors = self._residuals = self._blocks = None
        if self._columns is None:
            self._columns = self.ft.jacobian_columns(tuple(x[0] for x in xs))
        self._bundle_signatures = self._bundle_layout.signatures(xs) if self._bundle_layout else None
        self._bundle_jacobians = None

    def _linearized(self) -> None:
        """Evaluate the group's residuals and Jacobians at the refreshed values, split per factor and
        variable into contiguous arrays: (N, m) and, per variable, (N, m, dim)."""
        assert self._xs is not None and self._columns is not None  # set by _refresh
        out = self.evaluate(self._xs, linearize=True)
        self._blocks = [np.ascontiguousarray(out[:, :, columns]) for columns in self._columns]
        self._residuals = self._errors = np.ascontiguousarray(out[:, :, 0])

    def callback(self, i: int) -> Callable[..., np.ndarray]:
        """GTSAM's callback for factor ``i`` of the group (``gtsam.CustomFactor``'s signature)."""
        self._per_row = True
        self._signatures = None  # computed at the next evaluation
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

    # -- bundles: fewer GTSAM factors ----------------------------------------------------
    # Under GTSAM's own optimizers a callback costs tens of microseconds however little it does: pybind copies
    # the optimizer's whole Values for each one (``python benchmarks/adapter_overhead.py`` measures it with a
    # no-op CustomFactor). A bundle is one CustomFactor for many rows, so one callback per bundle.

    def bundles(self, by: int = 0, size: int | None = None) -> list[gtsam.CustomFactor]:
        """The group as one ``gtsam.CustomFactor`` per distinct key of variable ``by``: each stands for the
        rows that share that key (e.g. every range measured from one pose), its residual the rows' residuals
        stacked ((B m,), rows in the group's order), its keys those of its rows (variable 0's, then variable
        1's ..., each once, in row order), under the noise model stacked block-diagonally
        (:func:`stacked_noise`). The sum of squared whitened residuals is the rows' sum, and the linear system
        the rows' stacked, so a GTSAM optimizer takes the same steps as on :attr:`factors`, up to rounding
        and its fill-reducing ordering, which sees each bundle's keys as one clique (as eliminating the shared
        variable makes them).

        The group is evaluated as for :attr:`factors` (once per values GTSAM passes, all rows in one
        vectorized call); each bundle checks its own variables against those the evaluation read (bytes)
        before taking its rows of the result.

        Raises:
            MbfgError: ``by`` is not a variable of the factor type, or the noise model cannot be stacked.
        """
        n_vars = len(self.ft.kinds)
        if not 0 <= by < n_vars:
            raise MbfgError(f"{self.ft.name}: bundles(by={by}): by must be a variable index 0..{n_vars - 1}")
        if size is not None and size < 1:
            raise MbfgError(f"{self.ft.name}: bundles(size={size}): size must be a positive number of rows or None")
        hubs: dict[int, list[int]] = {}
        for i, row in enumerate(self.keys):
            hubs.setdefault(int(row[by]), []).append(i)
        if not self.keys:
            return []
        step = size or len(self.keys)
        made = [_Bundle(self.keys, rows[start : start + step], self.ft.kinds)
                for rows in hubs.values() for start in range(0, len(rows), step)]
        factors = []
        for b, bundle in enumerate(made, start=len(self._bundles)):
            factors.append(gtsam.CustomFactor(stacked_noise(self.noise, len(bundle.rows), self.ft.name),
                                              bundle.keys, self._bundle_callback(b, bundle)))
        self._bundles += made
        self._bundle_layout = _BundleLayout(self._bundles, n_vars)
        self._bundle_signatures = self._bundle_jacobians = None  # the new bundles': at the next evaluation
        return factors

    def _bundle_callback(self, b: int, bundle: _Bundle) -> Callable[..., np.ndarray]:
        # The bundle's variables are read as READERS read them, a run of keys of one kind at a time through
        # one bound method (a bundle reads tens of variables per callback; the bytes are READERS' arrays').
        runs: list[tuple[Callable[[gtsam.Values, Sequence[int]], list[bytes]], list[int]]] = []
        for key, kind in zip(bundle.keys, bundle.kinds):
            if not runs or runs[-1][0] is not _BYTE_READERS[kind]:
                runs.append((_BYTE_READERS[kind], []))
            runs[-1][1].append(key)
        rows = bundle.rows

        def evaluate(_: gtsam.CustomFactor, values: gtsam.Values, H: Any) -> np.ndarray:
            mine = b"".join([part for read, keys in runs for part in read(values, keys)])
            signatures = self._bundle_signatures
            if signatures is None or mine != signatures[b]:
                self._refresh(values)
            if H is None:
                if self._errors is None:
                    assert self._xs is not None  # set by _refresh
                    self._errors = np.ascontiguousarray(self.evaluate(self._xs, linearize=False))
                return self._errors[rows].reshape(-1)
            if self._blocks is None:
                self._linearized()
            assert self._blocks is not None and self._residuals is not None and self._columns is not None
            assert self._bundle_layout is not None  # made with this bundle
            if self._bundle_jacobians is None:
                self._bundle_jacobians = self._bundle_layout.jacobians(
                    self._blocks, [c.stop - c.start for c in self._columns])
            A = self._bundle_jacobians[b]
            for k, columns in enumerate(self._bundle_layout.columns[b]):
                H[k] = A[:, columns]
            return self._residuals[rows].reshape(-1)

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


def _matrix_bytes(method: str) -> Callable[[gtsam.Values, Sequence[int]], list[bytes]]:
    def read(values: gtsam.Values, keys: Sequence[int]) -> list[bytes]:
        at = getattr(values, method)
        return [at(key).matrix().tobytes() for key in keys]
    return read


def _array_bytes(method: str) -> Callable[[gtsam.Values, Sequence[int]], list[bytes]]:
    def read(values: gtsam.Values, keys: Sequence[int]) -> list[bytes]:
        at = getattr(values, method)
        # GTSAM hands vectors and points over as float64 arrays: READERS' np.asarray(..., dtype=float) is a
        # no-op on them (were it not, a bundle's check would fail and re-evaluate: slower, never stale).
        return [at(key).tobytes() for key in keys]
    return read


#: Per variable kind, ``read(values, keys)``: the bytes (C order, float64) of the arrays ``READERS`` gives for the
#: keys (which must be of the kind: they are bundle keys, in the order of the bundle's kinds).
_BYTE_READERS: dict[Any, Callable[[gtsam.Values, Sequence[int]], list[bytes]]] = {
    kind: (_matrix_bytes(f"at{kind.value}") if kind.value in ("Rot2", "Pose2", "Rot3", "Pose3") else
           _array_bytes(f"at{kind.value}"))
    for kind in READERS}


class _Bundle:
    """Rows of a :class:`FactorGroup` that one ``gtsam.CustomFactor`` stands for (:meth:`FactorGroup.bundles`).

    Attributes:
        rows: (B,) the group's rows, in order; keys: the factor's keys (variable 0's of the rows, then
            variable 1's ..., each key once, in row order); kinds: each key's variable kind;
        first: per key, (variable, row) of its first occurrence, in key order (the variables are non-decreasing);
        where: per variable j, (B,) the position in ``keys`` of each row's key j.
    """

    def __init__(self, keys: Sequence[Sequence[int]], rows: Sequence[int], kinds: Sequence[Any]) -> None:
        self.rows = np.asarray(rows, dtype=np.int64)
        self.keys: list[int] = []
        self.kinds: list[Any] = []
        self.first: list[tuple[int, int]] = []
        position: dict[int, int] = {}
        self.where = []
        for j, kind in enumerate(kinds):
            at = []
            for i in rows:
                key = int(keys[i][j])
                if key not in position:
                    position[key] = len(self.keys)
                    self.keys.append(key)
                    self.kinds.append(kind)
                    self.first.append((j, int(i)))
                at.append(position[key])
            self.where.append(np.asarray(at, dtype=np.int64))


class _BundleLayout:
    """Where a group's bundles find their variables (signatures) and put their Jacobians, all bundles at once.

    Signatures: per variable v, the rows whose variable v the bundles read (``rows[v]``, bundle after bundle)
    and each bundle's run of them. Jacobians (made at the first linearization, when the tangent dims are known):
    every bundle's (B m, W) Jacobian is a view of one flat array, filled by one scatter per variable."""

    def __init__(self, bundles: Sequence[_Bundle], variables: int) -> None:
        self.bundles = list(bundles)
        self.rows: list[np.ndarray] = []
        self.runs: list[list[tuple[int, int]]] = [[] for _ in bundles]
        for v in range(variables):
            picked: list[int] = []
            for b, bundle in enumerate(bundles):
                first = len(picked)
                picked += [i for j, i in bundle.first if j == v]
                self.runs[b].append((first, len(picked)))
            self.rows.append(np.asarray(picked, dtype=np.int64))
        self.columns: list[list[slice]] = []  # per bundle, each key's columns of its Jacobian
        self._scatter: list[np.ndarray] = []  # per variable, (sum B, m, dim) flat indices of the blocks
        self._size = 0
        self._all_rows = np.concatenate([bundle.rows for bundle in bundles])
        self._views: list[tuple[int, int, int]] = []  # per bundle (offset, B m, W)

    def signatures(self, xs: Sequence[np.ndarray]) -> list[bytes]:
        """Per bundle, the bytes of its keys' variables in key order, as its callback reads them (C order,
        float64), from the group's stacked inputs ``xs`` ((N, ...) per variable): one run of bytes per
        variable, as a bundle's keys are variable 0's, then variable 1's ..."""
        buffers, widths = [], []
        for x, rows in zip(xs, self.rows):
            flat = np.ascontiguousarray(np.asarray(x, dtype=float)[rows].reshape(len(rows), -1))
            buffers.append(flat.tobytes())
            widths.append(flat.shape[1] * flat.itemsize)
        return [b"".join([buf[first * w : stop * w] for buf, w, (first, stop) in zip(buffers, widths, runs)])
                for runs in self.runs]

    def _plan(self, dims: Sequence[int], m: int) -> None:
        """The Jacobians' layout for variables of tangent dims ``dims`` and residuals of size m: bundle b's
        (B, m, W) block at its offset of the flat array, each row's variable v at its key's columns."""
        per_variable: list[list[np.ndarray]] = [[] for _ in dims]
        offset = 0
        for bundle in self.bundles:
            starts, columns, width = [], [], 0
            for j, _ in bundle.first:
                starts.append(width)
                columns.append(slice(width, width + dims[j]))
                width += dims[j]
            self.columns.append(columns)
            B = len(bundle.rows)
            base = offset + (np.arange(B) * m * width)[:, None, None] + (np.arange(m) * width)[None, :, None]
            for v, (where, dim) in enumerate(zip(bundle.where, dims)):
                per_variable[v].append(base + (np.asarray(starts)[where][:, None, None] + np.arange(dim)))
            self._views.append((offset, B * m, width))
            offset += B * m * width
        self._scatter = [np.concatenate(parts) for parts in per_variable]
        self._size = offset

    def jacobians(self, blocks: Sequence[np.ndarray], dims: Sequence[int]) -> list[np.ndarray]:
        """Every bundle's Jacobian (B m, sum of its keys' tangent dims) from the group's blocks, per variable
        (N, m, dim_v). A key that is two variables of one row gets the sum of their blocks."""
        if not self._views:
            self._plan(dims, blocks[0].shape[1])
        flat = np.zeros(self._size)
        for block, scatter in zip(blocks, self._scatter):
            flat[scatter] += block[self._all_rows]  # within one variable, each index once
        return [flat[offset : offset + rows * width].reshape(rows, width) for offset, rows, width in self._views]


def stacked_noise(noise: gtsam.noiseModel.Base, count: int, name: str) -> gtsam.noiseModel.Base:
    """``count`` independent copies of a Gaussian noise model of dimension m as one of dimension ``count * m``:
    the block-diagonal model, of the same kind (unit, isotropic, diagonal, or full Gaussian).

    Raises:
        MbfgError: a robust or constrained model: a robust loss of the stacked residual is not the sum of the
            rows' losses, and a constrained model is not whitened as a Gaussian.
    """
    noise_model = gtsam.noiseModel
    if isinstance(noise, noise_model.Robust) or isinstance(noise, noise_model.Constrained) \
            or not isinstance(noise, noise_model.Gaussian):
        raise MbfgError(f"{name}: bundles take a Gaussian noise model (unit, isotropic, diagonal or full), got "
                        f"{type(noise).__name__}; make such factors with make_many, one per row")
    m = noise.dim()
    if isinstance(noise, noise_model.Unit):
        return noise_model.Unit.Create(count * m)
    if isinstance(noise, noise_model.Isotropic):
        return noise_model.Isotropic.Sigma(count * m, float(noise.sigma()))
    if isinstance(noise, noise_model.Diagonal):
        return noise_model.Diagonal.Sigmas(np.tile(np.asarray(noise.sigmas(), dtype=float), count))
    return noise_model.Gaussian.SqrtInformation(np.kron(np.eye(count), noise.R()))
