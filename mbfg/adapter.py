"""The one JAX-to-GTSAM adapter.

A factor type is a pure residual ``residual(*variables, *constants) -> (m,)`` in
jax.numpy plus the kinds of its variables (:class:`~mbfg.var_kinds.VarKind`). :class:`FactorType` jit-compiles
the residual and its Jacobian once per factor type (JAX caches per argument shape),
and :meth:`FactorType.make` wraps it into a ``gtsam.CustomFactor``. Nothing else
in mbfg touches GTSAM's callback signature. :meth:`FactorType.make_many` makes many factors of one type that
are evaluated together (:class:`~mbfg.factor_group.FactorGroup`). :func:`mbfg.factor_type.factor_type` declares
one from an annotated residual; :func:`mbfg.registry.register` puts it through the
Jacobian battery.

Keys: a :class:`~mbfg.var_kinds.Key` is a GTSAM key (an ``int``) that knows its variable's kind
(:mod:`mbfg.keys` makes them); :meth:`FactorType.make` refuses one of the wrong kind.
Plain ints are taken as they are (GTSAM's own keys, arithmetic keys).

Jacobians follow GTSAM's tangent convention (:mod:`mbfg.var_kinds`): the block of variable i is
``d r(retract(x_i, xi)) / d xi`` at ``xi = 0``, which JAX differentiates along
:meth:`~mbfg.var_kinds.VarKind.tangent_line`.

The variable kinds, the keys, :class:`~mbfg.factor_group.PerFactor` and the noise models are importable from
here too, where users import them.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import inspect
import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import gtsam
import numpy as np

from mbfg._jax import jax, jnp
from mbfg._programs import PersistentJit, closure_fingerprint, jaxpr_fingerprint
from mbfg.errors import DeclarationError, MbfgError
from mbfg.factor_group import CHUNK, EXACT_UP_TO, FactorGroup, PerFactor, as_constant
from mbfg.noise import noise_model
from mbfg.registry import REGISTRY
from mbfg.var_kinds import (
    POINT2,
    POINT3,
    POSE2,
    POSE3,
    READERS,
    ROT2,
    ROT3,
    VECTOR,
    Key,
    Point2Key,
    Point3Key,
    Pose2Key,
    Pose3Key,
    Rot2Key,
    Rot3Key,
    VarKind,
    VectorKey,
    key_kinds,
)

__all__ = ["CHUNK", "EXACT_UP_TO", "POINT2", "POINT3", "POSE2", "POSE3", "REGISTRY", "ROT2", "ROT3", "VECTOR", "FactorGroup",
           "FactorType", "Key", "PerFactor", "Point2Key", "Point3Key", "Pose2Key", "Pose3Key", "Rot2Key", "Rot3Key",
           "VarKind", "VectorKey", "noise_model"]

Example = Callable[[np.random.Generator], tuple[tuple[Any, ...], tuple[Any, ...]]]


@dataclass(eq=False)
class FactorType:
    """A residual type: pure JAX residual + variable kinds -> GTSAM factors.

    Args:
        name: unique name, e.g. ``"trapezoidal_integrator"``.
        residual: ``residual(*variables, *constants) -> (m,)`` in jax.numpy; no
            Python branching on values (it must stay vmappable).
        kinds: the :class:`VarKind` of each variable, in argument order.
        example: ``example(rng) -> (variables, constants)``, a random valid
            instance for the shared Jacobian test battery.
        piecewise: the residual is only piecewise smooth (complementarity: dry
            friction, contacts), with kinks where a multiplier changes sign, which
            symmetric points such as an identity pose hit exactly; the battery then
            checks it at its random examples and 1e-3 from the identity only.
        jacobian_groups: variables (argument indices) differentiated together in one forward
            pass of the vmapped linearization; None: one pass for all. A variable outside a
            group's pass is a symbolic zero there, so JAX skips the work that does not depend
            on the group: worth it where variables enter different parts of the residual (the
            impulse factor: ``python benchmarks/impulse_cost.py`` measures it). Every variable
            must be in exactly one group.
    """

    name: str
    residual: Callable[..., jnp.ndarray]
    kinds: tuple[VarKind, ...]
    example: Example | None = None
    piecewise: bool = False
    jacobian_groups: tuple[tuple[int, ...], ...] | None = None
    _error_fn: PersistentJit = field(init=False, repr=False)
    _linearize_fn: PersistentJit = field(init=False, repr=False)
    _linearize_per_variable: functools.partial[jnp.ndarray] = field(init=False, repr=False)
    _vmapped_fns: dict = field(init=False, repr=False, default_factory=dict)

    def __post_init__(self) -> None:
        # Registration for the Jacobian battery is explicit (mbfg.registry.register), not done here:
        # a type built again for another instance of a model is not a second declaration.
        residual, kinds = self.residual, self.kinds
        self._kind_list: list[VarKind | None] = list(kinds)  # what a row of typed keys maps to (_plain_rows)
        if self.jacobian_groups is not None:
            flat = sorted(i for g in self.jacobian_groups for i in g)
            if flat != list(range(len(kinds))):
                raise MbfgError(f"{self.name}: jacobian_groups {self.jacobian_groups} must hold every variable "
                                 f"index 0..{len(kinds) - 1} exactly once")
        groups = self.jacobian_groups

        name = self.name

        def checked(r: Any) -> jnp.ndarray:
            # Caught while tracing, once per shape: GTSAM's callback would otherwise fail inside pybind
            # ("Unable to cast Python instance ... Eigen::Matrix") without naming the factor type.
            if jnp.ndim(r) != 1:
                raise DeclarationError(f"factor type {name!r}: its residual must return a 1-D array of shape (m,), got "
                                f"shape {jnp.shape(r)}; return e.g. jnp.atleast_1d(r) for one scalar residual")
            return r

        def error(xs: tuple, cs: tuple) -> jnp.ndarray:
            return checked(residual(*xs, *cs))

        def linearize(xs: tuple, cs: tuple, passes: tuple[tuple[int, ...], ...] | None = None) -> jnp.ndarray:
            def lifted(*xis: jnp.ndarray) -> jnp.ndarray:
                return residual(*(k.tangent_line(x, xi) for k, x, xi in zip(kinds, xs, xis)), *cs)

            zeros = tuple(jnp.zeros(k.tangent_dim(x)) for k, x in zip(kinds, xs))
            r = checked(residual(*xs, *cs))
            if passes is None:
                blocks = jax.jacfwd(lifted, argnums=tuple(range(len(xs))))(*zeros)
            else:
                # One forward pass per group of variables: the other variables' tangents are then
                # symbolic zeros and JAX skips what does not depend on the group (x_{k+1}'s pose
                # enters the impulse residual only through q_{k+1} boxminus q_k). Less arithmetic,
                # more kernels and more compile time.
                by_index: dict[int, Any] = {}
                for group in passes:
                    by_index.update(zip(group, jax.jacfwd(lifted, argnums=group)(*zeros)))
                blocks = [by_index[i] for i in range(len(xs))]
            # One array [r | H_1 | H_2 | ...] means one device-to-host copy per call.
            return jnp.concatenate([r[:, None], *blocks], axis=1)

        def lifted_forward(xs: tuple, xis: tuple, cs: tuple) -> jnp.ndarray:
            return residual(*(k.tangent_line(x, xi) for k, x, xi in zip(kinds, xs, xis)), *cs)

        self._error = error
        self._lifted_forward = lifted_forward
        self._fingerprints: dict[str, str | None] = {}  # argument shapes -> jaxpr fingerprint
        self._error_fn = PersistentJit(error, self._describe("error", None))
        # Single calls take one joint pass: they are launch-bound, so fewer kernels win.
        self._linearize_fn = PersistentJit(linearize, self._describe("linearize, one pass", None))
        self._linearize_grouped = functools.partial(linearize, passes=groups)
        self._linearize_per_variable = functools.partial(
            linearize, passes=tuple((i,) for i in range(len(kinds))))

    def with_example(self, example: Example) -> FactorType:
        """A copy of this type carrying ``example`` (for :func:`mbfg.registry.register`), this one unchanged:
        a type built and cached per model gets the battery's example without being patched."""
        return dataclasses.replace(self, example=example)

    # -- pure evaluation, no GTSAM -------------------------------------------------
    def error(self, *args: Any) -> np.ndarray:
        """Residual (m,) at ``(*variables, *constants)``."""
        xs, cs = self._split(args)
        return np.asarray(self._error_fn(xs, cs))

    def linearize(self, *args: Any) -> tuple[np.ndarray, list[np.ndarray]]:
        """Residual (m,) and the Jacobian blocks (m, dim_i) in GTSAM's tangent convention."""
        xs, cs = self._split(args)
        out = np.asarray(self._linearize_fn(xs, cs))
        return out[:, 0], self._split_blocks(out, xs)

    # -- GTSAM ---------------------------------------------------------------------
    def make(
        self, keys: Sequence[int], noise: gtsam.noiseModel.Base, *constants: Any
    ) -> gtsam.CustomFactor:
        """A ``gtsam.CustomFactor`` on ``keys`` with this residual.

        Args:
            keys: one GTSAM key per variable, in the residual's argument order.
            noise: GTSAM noise model of dimension m.
            constants: measurements and fixed parameters, passed to the residual
                as array arguments after the variables (never recompiled per instance).
        """
        if len(keys) != len(self.kinds):
            raise MbfgError(
                f"{self.name}: expected {len(self.kinds)} keys ({[k.value for k in self.kinds]}), "
                f"got {len(keys)}"
            )
        keys = self._plain_rows([keys])[0]  # checks the kind of each typed key
        cs = tuple(jax.tree_util.tree_map(as_constant, c) for c in constants)
        cs_leaves = tuple(jax.tree_util.tree_leaves(cs))
        kinds = self.kinds
        # GTSAM calls back thousands of times at the same shapes (a fixed-lag smoother: every step): the
        # program on flat arguments and the Jacobian's column slices are found once per shape of the variables.
        resolved: dict[bool, tuple[tuple, Callable[..., Any], list[slice]]] = {}

        def program(linearize: bool, xs: tuple) -> tuple[Callable[..., Any], list[slice]]:
            shapes = tuple(np.shape(x) for x in xs)
            hit = resolved.get(linearize)
            if hit is None or hit[0] != shapes:
                fn = (self._linearize_fn if linearize else self._error_fn).flat_program(xs, cs)
                hit = resolved[linearize] = (shapes, fn, self._columns(xs))
            return hit[1], hit[2]

        readers = tuple(zip([READERS[kind] for kind in kinds], keys))  # no enum hashing per call

        def callback(_: gtsam.CustomFactor, values: gtsam.Values, H: Any) -> np.ndarray:
            xs = tuple([read(values, key) for read, key in readers])
            fn, columns = program(H is not None, xs)
            out = np.asarray(fn(*xs, *cs_leaves))
            if H is None:
                return out
            for i, cols in enumerate(columns):
                H[i] = np.ascontiguousarray(out[:, cols])
            return out[:, 0]

        return gtsam.CustomFactor(noise, keys, callback)

    def make_many(
        self, keys: Sequence[Sequence[int]], noise: gtsam.noiseModel.Base, *constants: Any,
        regroup: bool = True,
        per_variable: bool = False,
    ) -> list[gtsam.CustomFactor]:
        """Many factors of this type that GTSAM linearizes with ONE vmapped JAX call.

        GTSAM still calls back once per factor, a few microseconds each however little the callback does,
        and GTSAM's own optimizers (``gtsam.LevenbergMarquardtOptimizer`` ...) pass each call a copy of their
        ``Values`` (pybind copies a ``const Values&`` that Python did not create): time in proportion to the
        number of variables, per factor. :meth:`mbfg.vectorized.VectorizedGraph.from_graph` linearizes a graph
        with these factors without callbacks, and :func:`mbfg.solvers.bounded_levenberg_marquardt` solves it;
        for GTSAM's own optimizers, :meth:`make_bundles` makes fewer factors of the same rows
        (``python benchmarks/adapter_overhead.py`` times each way against GTSAM's native factors).

        The first factor of the group that GTSAM evaluates at new values
        evaluates the whole group there (reading every factor's variables from
        the same ``gtsam.Values``); the others find their result in the group's
        cache, after checking that their own inputs are the ones the cache was
        computed at.

        Args:
            keys: (N, number of variables) keys, one row per factor.
            noise: the noise model shared by all N factors.
            constants: as in :meth:`make`; wrap a constant in :class:`PerFactor`
                to give each factor its own value (leading axis N).
            regroup: a factor evaluated at values the cache was not computed at
                evaluates the whole group again (batch problems, where every
                factor is relinearized at once). False: only the group's first
                evaluation is shared, a later one evaluates that factor alone
                (fixed-lag smoothers: the new factors of an update enter together,
                a few are relinearized later, when the others' variables may
                already be marginalized).
            per_variable: differentiate one variable at a time, which skips the work that
                does not depend on it: faster to run, slower to compile (for the Furuta
                impulse factor ``python benchmarks/stream.py --only factors`` prints both).
                For long-running streams, not for a batch solve.
        """
        return self.group(keys, noise, *constants, regroup=regroup, per_variable=per_variable).factors

    def make_bundles(
        self, keys: Sequence[Sequence[int]], noise: gtsam.noiseModel.Base, *constants: Any, by: int = 0,
        size: int | None = None, per_variable: bool = False,
    ) -> list[gtsam.CustomFactor]:
        """The factors of :meth:`make_many` (same arguments) as fewer GTSAM factors, for GTSAM's own optimizers:
        one ``gtsam.CustomFactor`` per distinct key of variable ``by``, standing for the rows that share it
        (:meth:`FactorGroup.bundles`: residuals stacked, noise block-diagonal, the same steps up to rounding
        and ordering).

        GTSAM calls a Python callback once per factor per evaluation, and its optimizers pay tens of
        microseconds for each however little it does (pybind copies their whole ``Values``): bundling B rows
        divides that by B. ``python benchmarks/adapter_overhead.py`` times both against GTSAM's native
        factors. A bundle's keys become one clique for the elimination, so ``by`` should be a variable that
        its rows share anyway (a pose observing landmarks), not one that every row shares (the parameters).

        For solvers that pass every variable of the problem (GTSAM's Levenberg-Marquardt, Gauss-Newton,
        Dogleg, iSAM2): the first bundle evaluated at new values evaluates all the rows, which reads all their
        variables. A fixed-lag smoother that marginalizes variables takes ``make_many(..., regroup=False)``.
        """
        return self.group(keys, noise, *constants, per_variable=per_variable).bundles(by, size)

    def group(
        self, keys: Sequence[Sequence[int]], noise: gtsam.noiseModel.Base, *constants: Any,
        regroup: bool = True,
        per_variable: bool = False,
    ) -> FactorGroup:
        """The :class:`FactorGroup` of :meth:`make_many` (same arguments): its ``factors`` for a GTSAM
        graph, and its vectorized evaluation for the batch solvers (:mod:`mbfg.vectorized`)."""
        return FactorGroup(self, self._plain_rows(keys, 0), noise, constants, regroup, per_variable)

    # -- programs, for FactorGroup ----------------------------------------------------
    @property
    def programs(self) -> tuple[Callable[..., Any], Callable[..., Any]]:
        """The jitted (error, linearize) of one factor, each ``fn(variables, constants)`` on tuples: the
        residual (m,), and ``[r | H_1 | H_2 | ...]`` (m, 1 + sum of tangent dims) in one array."""
        return self._error_fn, self._linearize_fn

    def vmapped_programs(
        self, constant_axes: tuple[int | None, ...], per_variable: bool = False
    ) -> tuple[Callable[..., Any], Callable[..., Any]]:
        """:attr:`programs` vmapped over a leading axis of the variables and of the constants whose axis in
        ``constant_axes`` is 0 (None: shared): (N, m) and (N, m, 1 + sum of tangent dims). Compiled once per
        batching pattern, so that groups share compiles; ``per_variable``: one forward pass per variable
        (:meth:`make_many`)."""
        return self._vmapped(constant_axes, per_variable)

    def jacobian_columns(self, xs: Sequence[Any]) -> list[slice]:
        """Each variable's Jacobian block in ``[r | H_1 | H_2 | ...]`` (column 0 is the residual) at the
        variables ``xs`` (their shapes: a Vector's tangent is its length)."""
        return self._columns(xs)

    # -- helpers -------------------------------------------------------------------
    def _vmapped(
        self, constant_axes: tuple[int | None, ...], per_variable: bool = False
    ) -> tuple[Callable[..., Any], Callable[..., Any]]:
        """Jitted vmapped (error, linearize), cached per batching pattern so groups share compiles.

        The linearization takes the type's ``jacobian_groups`` passes, or one pass per variable
        with ``per_variable``."""
        if (constant_axes, per_variable) not in self._vmapped_fns:
            in_axes = (0, constant_axes)
            linearize = self._linearize_per_variable if per_variable else self._linearize_grouped
            passes = linearize.keywords["passes"]
            self._vmapped_fns[constant_axes, per_variable] = (
                PersistentJit(jax.vmap(self._error, in_axes=in_axes), self._describe("error", constant_axes)),
                PersistentJit(jax.vmap(linearize, in_axes=in_axes),
                              self._describe(f"linearize, passes {passes}", constant_axes)),
            )
        return self._vmapped_fns[constant_axes, per_variable]

    def _describe(self, what: str, constant_axes: tuple[int | None, ...] | None) -> Callable[..., str | None]:
        """The fingerprint function of :class:`mbfg._programs.PersistentJit` for one of this type's
        programs: ``what`` it computes from the residual, the axes it is vmapped over
        (``constant_axes`` None: not vmapped), and the residual: its :func:`closure_fingerprint` with the
        variable kinds and argument shapes, or else its jaxpr on the tangent lines at one factor's
        arguments (memoized per argument shapes)."""

        def describe(xs: tuple, cs: tuple) -> str | None:
            if constant_axes is not None:  # one factor's slice of the batched arguments
                xs = tuple(x[0] for x in xs)
                cs = tuple(jax.tree_util.tree_map(lambda a: a[0], c) if axis == 0 else c
                           for c, axis in zip(cs, constant_axes))
            zeros = tuple(np.zeros(k.tangent_dim(x)) for k, x in zip(self.kinds, xs))
            shapes = str(jax.tree_util.tree_map(lambda a: (np.shape(a), str(jax.dtypes.result_type(a))), (xs, cs)))
            if shapes not in self._fingerprints:
                # Named without tracing where the residual's closure allows (about a second saved
                # per Spook factor type at start-up), else by its jaxpr.
                identity = closure_fingerprint(self.residual)
                self._fingerprints[shapes] = (
                    jaxpr_fingerprint(self._lifted_forward, xs, zeros, cs) if identity is None else
                    hashlib.sha256(f"{identity}|{[k.value for k in self.kinds]}|{shapes}".encode()).hexdigest())
            fingerprint = self._fingerprints[shapes]
            return None if fingerprint is None else f"{what}; vmapped {constant_axes}; {fingerprint}"

        return describe

    def _plain_rows(self, rows: Sequence[Sequence[int]], first: int | None = None) -> list[list[int]]:
        """Rows of keys for GTSAM (lists of ints), after checking the kind of each :class:`Key` among them
        against the residual's variable at its position (plain ints carry no kind and pass). ``first``: the number of the
        first row, for the message (None: the one row of :meth:`make`). A row of the wrong length is left to
        the caller's message.

        The stream builds its factors through here every update, so the types of all keys are looked up at
        once, in C (:func:`~mbfg.var_kinds.key_kinds`): rows of plain ints, and rows of typed keys of the right
        kinds, are copied as they are (typed keys stay typed: GTSAM takes them as ints), cheaper than the
        ``int()`` per key this replaced; only other rows (a key of another kind, NumPy integers) are looked
        at key by key, and converted. ``python tests/test_factor_declaration.py`` times it against that
        ``int()`` per key."""
        given = key_kinds(itertools.chain.from_iterable(rows))
        if not any(given) or given == self._kind_list * len(rows):
            return [list(row) for row in rows]
        for n, row in enumerate(rows):
            for i, (key, kind) in enumerate(zip(row, self.kinds)):
                if isinstance(key, Key) and key.kind is not kind:
                    raise DeclarationError(self._wrong_kind(i, key, None if first is None else first + n))
        return [list(map(int, row)) for row in rows]

    def _wrong_kind(self, i: int, key: Key, factor: int | None) -> str:
        """The message for a key of the wrong kind at variable ``i``: factor type, argument, expected and given."""
        from mbfg.keys import describe  # mbfg.keys imports this module

        names = [p.name for p in inspect.signature(self.residual).parameters.values()
                 if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        argument = f"variable {i}" + (f" ({names[i]!r})" if i < len(names) else "")
        where = f"factor {factor}, " if factor is not None else ""
        return (f"factor type {self.name!r}: {where}{argument} takes a {self.kinds[i].value} key, "
                f"got {describe(key)}, a {key.kind.value} key")

    def _split(self, args: Sequence[Any]) -> tuple[tuple, tuple]:
        n = len(self.kinds)
        if len(args) < n:
            raise DeclarationError(f"{self.name}: expected {n} variables, got {len(args)} arguments")
        return tuple(args[:n]), tuple(args[n:])

    def _columns(self, xs: Sequence[Any]) -> list[slice]:
        """Each variable's Jacobian block in ``[r | H_1 | H_2 | ...]`` (column 0 is the residual)."""
        columns, start = [], 1
        for kind, x in zip(self.kinds, xs):
            columns.append(slice(start, start + kind.tangent_dim(x)))
            start = columns[-1].stop
        return columns

    def _split_blocks(self, out: np.ndarray, xs: Sequence[Any]) -> list[np.ndarray]:
        return [np.ascontiguousarray(out[:, cols]) for cols in self._columns(xs)]

