"""The one JAX-to-GTSAM adapter.

A factor type is a pure residual ``residual(*variables, *constants) -> (m,)`` in
jax.numpy plus the kinds of its variables. :class:`FactorType` jit-compiles the
residual and its Jacobian once per factor type (JAX caches per argument shape),
and :meth:`FactorType.make` wraps it into a ``gtsam.CustomFactor``. Nothing else
in mbfg touches GTSAM's callback signature. :func:`mbfg.factor_type.factor_type` declares
one from an annotated residual; :func:`mbfg.registry.register` puts it through the
Jacobian battery.

Keys: a :class:`Key` is a GTSAM key (an ``int``) that knows its variable's kind
(:mod:`mbfg.keys` makes them); :meth:`FactorType.make` refuses one of the wrong kind.
Plain ints are taken as they are (GTSAM's own keys, arithmetic keys).

Jacobians follow GTSAM's tangent convention: the block of variable i is
``d r(retract(x_i, xi)) / d xi`` at ``xi = 0``; for ``Rot3`` that is the right
perturbation ``R * Exp(xi)``, for ``Pose3`` the tangent is ``[omega, v]``, for ``Pose2``
``[v_x, v_y, omega]`` (``P * Exp(xi)``), for ``Rot2`` the angle, for points and vectors ``x + xi``. JAX
differentiates along :meth:`VarKind.tangent_line`, a curve with the retraction's
velocity at ``xi = 0`` (hence the same Jacobian) that avoids Rodrigues' formula.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import hashlib
import inspect
import itertools
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import gtsam
import numpy as np

from mbfg import lie
from mbfg._jax import jax, jnp
from mbfg._programs import PersistentJit, closure_fingerprint, jaxpr_fingerprint
from mbfg.errors import DeclarationError, MbfgError
from mbfg.noise import noise_model
from mbfg.registry import REGISTRY
from mbfg.values_snapshot import ValuesSnapshot

__all__ = ["POINT2", "POINT3", "POSE2", "POSE3", "REGISTRY", "ROT2", "ROT3", "VECTOR", "FactorGroup", "FactorType",
           "Key", "PerFactor", "Point2Key", "Point3Key", "Pose2Key", "Pose3Key", "Rot2Key", "Rot3Key", "VarKind",
           "VectorKey", "noise_model"]


class VarKind(enum.Enum):
    """Kinds of GTSAM variable a residual may take, with what the residual receives:

    ==========  ==========================  ====================================================
    kind        the residual's array        tangent (GTSAM's ``retract``)
    ==========  ==========================  ====================================================
    ``Vector``  (n,)                        ``x + xi``
    ``Point2``  (2,) [m]                    ``x + xi``
    ``Point3``  (3,) [m]                    ``x + xi``
    ``Rot2``    rotation matrix (2, 2)      ``R * Exp(theta)``, xi = [theta]
    ``Pose2``   homogeneous (3, 3)          ``P * Exp(xi)``, xi = [v_x, v_y, omega]
    ``Rot3``    rotation matrix (3, 3)      ``R * Exp(xi)``, xi = omega (3,)
    ``Pose3``   homogeneous (4, 4)          ``T * Exp(xi)``, xi = [omega, v] (6,)
    ==========  ==========================  ====================================================
    """

    VECTOR = "Vector"
    ROT3 = "Rot3"
    POSE3 = "Pose3"
    POINT2 = "Point2"
    POINT3 = "Point3"
    ROT2 = "Rot2"
    POSE2 = "Pose2"

    def read(self, values: gtsam.Values, key: int) -> np.ndarray:
        """The variable as the array the residual sees (table in the class docstring)."""
        return _READ[self](values, key)

    def tangent_dim(self, x: Any) -> int:
        if self is VarKind.VECTOR:
            return int(np.shape(x)[0])
        return _TANGENT_DIM[self]

    def tangent_line(self, x: jnp.ndarray, xi: jnp.ndarray) -> jnp.ndarray:
        """A curve through x with the velocity of GTSAM's retraction at ``xi = 0`` (``lie.rot3_retract``,
        ``lie.pose3_retract``, ...): the same Jacobian, fewer operations."""
        if self in (VarKind.VECTOR, VarKind.POINT2, VarKind.POINT3):
            return x + xi
        if self is VarKind.ROT3:
            return lie.rot3_tangent_line(x, xi)
        if self is VarKind.POSE3:
            return lie.pose3_tangent_line(x, xi)
        if self is VarKind.ROT2:
            return lie.rot2_tangent_line(x, xi)
        return lie.pose2_tangent_line(x, xi)


_READ: dict[VarKind, Callable[[gtsam.Values, int], np.ndarray]] = {
    VarKind.VECTOR: lambda values, key: values.atVector(key),
    VarKind.POINT2: lambda values, key: np.asarray(values.atPoint2(key), dtype=float),
    VarKind.POINT3: lambda values, key: np.asarray(values.atPoint3(key), dtype=float),
    VarKind.ROT2: lambda values, key: values.atRot2(key).matrix(),
    VarKind.POSE2: lambda values, key: values.atPose2(key).matrix(),
    VarKind.ROT3: lambda values, key: values.atRot3(key).matrix(),
    VarKind.POSE3: lambda values, key: values.atPose3(key).matrix(),
}
_TANGENT_DIM = {VarKind.POINT2: 2, VarKind.POINT3: 3, VarKind.ROT2: 1, VarKind.POSE2: 3, VarKind.ROT3: 3,
                VarKind.POSE3: 6}

VECTOR, ROT3, POSE3 = VarKind.VECTOR, VarKind.ROT3, VarKind.POSE3
POINT2, POINT3, ROT2, POSE2 = VarKind.POINT2, VarKind.POINT3, VarKind.ROT2, VarKind.POSE2


class Key(int):
    """A GTSAM key that knows the :class:`VarKind` of its variable (``kind``, a class attribute).

    Still an ``int`` (GTSAM, ``gtsam.Values``, dicts and key arithmetic take it as one; arithmetic gives
    plain ints); no instance dictionary, so it costs what an int costs. Printed as the integer it is.
    """

    __slots__ = ()
    kind: ClassVar[VarKind]


class VectorKey(Key):
    """Key of a Vector variable."""

    __slots__ = ()
    kind = VECTOR


class Rot3Key(Key):
    """Key of a Rot3 variable."""

    __slots__ = ()
    kind = ROT3


class Pose3Key(Key):
    """Key of a Pose3 variable."""

    __slots__ = ()
    kind = POSE3


class Point2Key(Key):
    """Key of a Point2 variable."""

    __slots__ = ()
    kind = POINT2


class Point3Key(Key):
    """Key of a Point3 variable."""

    __slots__ = ()
    kind = POINT3


class Rot2Key(Key):
    """Key of a Rot2 variable."""

    __slots__ = ()
    kind = ROT2


class Pose2Key(Key):
    """Key of a Pose2 variable."""

    __slots__ = ()
    kind = POSE2


#: The kind of each key class, looked up by ``type(key)`` (a dict lookup in C, where isinstance would be a
#: Python-level call per key); a plain int has none. Any other type (a NumPy integer) gets the truthy
#: ``_OTHER``, for which :meth:`FactorType._plain_rows` looks closer.
_OTHER = object()
_OTHER_TYPES = itertools.repeat(_OTHER)
_KIND_OF_KEY_TYPE: dict[type, VarKind | None] = {int: None, VectorKey: VECTOR, Rot3Key: ROT3, Pose3Key: POSE3,
                                                  Point2Key: POINT2, Point3Key: POINT3, Rot2Key: ROT2,
                                                  Pose2Key: POSE2}


def _as_constant(value: Any) -> Any:
    """A constant ready for the jitted residual: JAX arrays are kept as they are (a
    mechanism's arrays are shared by every factor), anything else becomes a NumPy
    array. Creating a JAX array from a Python float costs ~0.2 ms, more than a call.
    """
    return value if isinstance(value, jax.Array) else np.asarray(value)

Example = Callable[[np.random.Generator], tuple[tuple[Any, ...], tuple[Any, ...]]]


@dataclass(frozen=True)
class PerFactor:
    """A constant of :meth:`FactorType.make_many` with one value per factor (leading axis N)."""

    values: Any


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
        cs = tuple(jax.tree_util.tree_map(_as_constant, c) for c in constants)
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

        readers = tuple(zip([_READ[kind] for kind in kinds], keys))  # no enum hashing per call

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
        with these factors without callbacks, and :func:`mbfg.solvers.bounded_levenberg_marquardt` solves it
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

    def group(
        self, keys: Sequence[Sequence[int]], noise: gtsam.noiseModel.Base, *constants: Any,
        regroup: bool = True,
        per_variable: bool = False,
    ) -> FactorGroup:
        """The :class:`FactorGroup` of :meth:`make_many` (same arguments): its ``factors`` for a GTSAM
        graph, and its vectorized evaluation for the batch solvers (:mod:`mbfg.vectorized`)."""
        return FactorGroup(self, self._plain_rows(keys, 0), noise, constants, regroup, per_variable)

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
        once, in C (``map`` over a dict's ``get``): rows of plain ints, and rows of typed keys of the right
        kinds, are copied as they are (typed keys stay typed: GTSAM takes them as ints), cheaper than the
        ``int()`` per key this replaced; only other rows (a key of another kind, NumPy integers) are looked
        at key by key, and converted. ``python tests/test_factor_declaration.py`` times it against that
        ``int()`` per key."""
        given = list(map(_KIND_OF_KEY_TYPE.get, map(type, itertools.chain.from_iterable(rows)), _OTHER_TYPES))
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


#: Factors per vmapped call: longer groups are evaluated in chunks of this many. A vmapped
#: call over thousands of factors is slower per factor than a few calls over fewer.
CHUNK = 2048
#: Groups of up to this many factors are evaluated at their own size (a stream's few new
#: factors); longer ones are padded to the next power of two (at most CHUNK), so that logs of
#: different lengths share compiled shapes (and JAX's persistent compilation cache).
EXACT_UP_TO = 64


def _call_size(n: int) -> int:
    """The batch size of the vmapped calls for a group of n factors."""
    return n if n <= EXACT_UP_TO else min(CHUNK, 1 << (n - 1).bit_length())


#: The groups whose ``gtsam.CustomFactor`` s exist (:meth:`FactorGroup.factors`), for
#: :func:`FactorGroup.find`: GTSAM keeps a factor's Python object, not what made it.
_MADE_GROUPS: weakref.WeakSet[FactorGroup] = weakref.WeakSet()


class FactorGroup:
    """N factors of one :class:`FactorType` evaluated together (:meth:`FactorType.make_many`).

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
                value = jax.tree_util.tree_map(np.asarray, c.values)  # NumPy: see _as_constant
                lengths = {leaf.shape[0] for leaf in jax.tree_util.tree_leaves(value)}
                if lengths != {n}:
                    raise MbfgError(f"{ft.name}: PerFactor constant has leading sizes {lengths}, expected {n}")
                axes.append(0)
                cs.append(value)
            else:
                axes.append(None)
                cs.append(jax.tree_util.tree_map(_as_constant, c))
        self.constants = tuple(cs)
        self._error_fn, self._linearize_fn = ft._vmapped(tuple(axes), per_variable)
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
        """(start, stop, constants of the chunk) per vmapped call of :func:`_call_size` factors; the last
        call is padded with copies of the last factor."""
        size = _call_size(n)
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
        unwhitened, at the stacked variables ``xs`` (:meth:`read`), in calls of :func:`_call_size` factors."""
        n = len(self.keys)
        if n == 1:  # one factor: the type's single program (one joint pass: fewer kernels, it is launch-bound)
            cs = tuple(jax.tree_util.tree_map(lambda a: a[0], c) if per else c
                       for c, per in zip(self.constants, self._per_factor))
            single = self.ft._linearize_fn if linearize else self.ft._error_fn
            return np.asarray(single(tuple(x[0] for x in xs), cs))[None]
        fn = self._linearize_fn if linearize else self._error_fn
        size = _call_size(n)
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
            self._columns = self.ft._columns(tuple(x[0] for x in xs))

    def _linearized(self) -> None:
        """Evaluate the group's residuals and Jacobians at the refreshed values, split per factor and
        variable into contiguous arrays: (N, m) and, per variable, (N, m, dim)."""
        assert self._xs is not None and self._columns is not None  # set by _refresh
        out = self.evaluate(self._xs, linearize=True)
        self._blocks = [np.ascontiguousarray(out[:, :, columns]) for columns in self._columns]
        self._residuals = self._errors = np.ascontiguousarray(out[:, :, 0])

    def callback(self, i: int) -> Callable[..., np.ndarray]:
        readers = tuple(zip([_READ[kind] for kind in self.ft.kinds], self.keys[i]))

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
        if H is None:
            return np.asarray(self.ft._error_fn(xs, cs))
        out = np.asarray(self.ft._linearize_fn(xs, cs))
        assert self._columns is not None  # set by _refresh: this factor was evaluated with the others before
        for j, columns in enumerate(self._columns):
            H[j] = np.ascontiguousarray(out[:, columns])
        return out[:, 0]
