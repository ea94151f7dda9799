"""Traced programs kept on disk beside JAX's compilation cache (:mod:`mbfg._jax`).

JAX's persistent compilation cache keeps the *compiled* programs, but to find one a process must
first trace and lower the Python function, which for our vmapped Jacobians costs far more than
loading the result (the 13-parameter Furuta impulse factor's five-pass Jacobian: seconds;
``python benchmarks/furuta_calibration.py`` prints the first linearization apart).
:class:`PersistentJit` keeps the traced program as well (``jax.export``, serialized), so a second
process loads it and only the compiled program's load remains.

A program is found by a fingerprint of what it computes: the jaxpr of the residual (with its
closed-over constants' values), what the caller says it builds from it (vmapped axes, Jacobian
passes), the shapes and dtypes of the arguments, and the JAX version and backend. Changed physics
changes the jaxpr, hence the fingerprint; nothing stale is ever loaded. Residuals whose jaxpr holds
what its text does not pin down (custom derivative rules, host callbacks, Python objects) are
not kept; they are traced in every process as before.

Tracing a residual only to fingerprint it still costs about a second for the Spook impulse
(``python benchmarks/startup.py``). :func:`closure_fingerprint` names the same program without
tracing where it can: the source of every mbfg module, the residual's name, and what it closes
over (a model; its parameters by declaration, their values being the residual's arguments), pickled.
It declines, and the jaxpr is traced, where the
closure reaches code outside mbfg, NumPy and JAX (a user's own function or class), whose source
the fingerprint would not cover.
"""

from __future__ import annotations

import functools
import hashlib
import io
import itertools
import os
import pickle
import sys
import tempfile
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable
from importlib.metadata import version
from typing import Any, TypeVar, cast

import numpy as np

from mbfg._jax import cache_dir, jax

#: jaxpr text that does not determine the program: custom JVP/VJP rules (their rule is a Python
#: function, printed by name or address only), host callbacks, object reprs.
_UNPINNED = ("custom_jvp", "custom_vjp", "callback", " at 0x", "<function", "<object")

#: Part of every key: the JAX release (its export format and differentiation rules) and the layout of
#: what is stored here (raise it when the stored program's calling convention changes).
_VERSION = f"jax {version('jax')}; jaxlib {version('jaxlib')}; mbfg programs v2 (flat arguments)"


def jaxpr_fingerprint(fn: Callable[..., Any], *args: Any) -> str | None:
    """SHA-256 of ``fn``'s jaxpr at ``args`` (its text and closed-over constants), or None where the
    jaxpr does not pin the program down (see the module docstring)."""
    closed = jax.make_jaxpr(fn)(*args)
    text = str(closed)
    if any(marker in text for marker in _UNPINNED):
        return None
    digest = hashlib.sha256(text.encode())
    for const in closed.consts:
        array = np.asarray(const)
        digest.update(f"{array.dtype}{array.shape}".encode())
        digest.update(array.tobytes())
    return digest.hexdigest()


def jaxpr_equation_count(jaxpr: Any) -> int:
    """Equations of a jaxpr, those of the jaxprs its equations hold (pjit, custom_jvp, scan, cond ...) included:
    the size of a traced program (``benchmarks/core_size.py``, ``tests/test_core_arrays.py``)."""
    total = 0
    for eqn in jaxpr.eqns:
        total += 1
        for value in eqn.params.values():
            for sub in value if isinstance(value, (list, tuple)) else (value,):
                inner = getattr(sub, "jaxpr", sub)  # a ClosedJaxpr holds its Jaxpr as .jaxpr
                if hasattr(inner, "eqns"):
                    total += jaxpr_equation_count(inner)
    return total


#: Top-level packages whose code a closure may reach for :func:`closure_fingerprint`: mbfg's own
#: (its source is hashed) and those whose release is part of the key.
_TRUSTED = ("mbfg", "numpy", "jax", "jaxlib", "builtins", "functools", "collections", "dataclasses", "enum",
            "typing", "math", "operator")


def source_digest(folders: list[str]) -> str:
    """SHA-256 of every ``.py`` file under ``folders`` (paths relative to their folder, and contents),
    and the NumPy release."""
    digest = hashlib.sha256(f"numpy {np.__version__}".encode())
    for folder in folders:
        for root, dirs, files in os.walk(folder):
            dirs.sort()
            for name in sorted(files):
                if name.endswith(".py"):
                    path = os.path.join(root, name)
                    digest.update(os.path.relpath(path, folder).encode())
                    with open(path, "rb") as file:
                        digest.update(file.read())
    return digest.hexdigest()


@functools.cache
def mbfg_source_digest() -> str:
    """:func:`source_digest` of mbfg: the ``mbfg`` package and the ``factors``, ``graphs`` and
    ``datasets`` folders mapped into it."""
    import importlib.util

    import mbfg

    folders = {os.path.dirname(os.path.realpath(mbfg.__file__))}
    for name in ("factors", "graphs", "datasets"):  # found without importing them
        spec = importlib.util.find_spec(f"mbfg.{name}")
        folders |= {os.path.realpath(p) for p in (spec.submodule_search_locations or [])} if spec else set()
    return source_digest(sorted(folders))


class _Untrusted(Exception):
    """The closure reaches code whose source :func:`mbfg_source_digest` does not cover."""


def _fingerprinted(*fields: Any) -> None:
    """Stands for an object with a ``__fingerprint__`` in a closure's pickle (never unpickled)."""


def _parameter_declaration(*fields: Any) -> None:
    """Stands for a :class:`mbfg.parameters.Parameter` in a closure's pickle (never unpickled)."""


class _ClosurePickler(pickle.Pickler):
    """Pickles values; functions and classes by reference, only where their code is trusted. A model's
    parameters by their declaration only (name, unit, kind, free), not their values or bounds: the
    residuals take every parameter value as an argument (the fixed ones as a constant, the free ones
    as a variable), so a model with other values computes with the same program.
    ``tests/test_compile_cache.py`` checks that the jaxpr agrees."""

    def reducer_override(self, obj: Any) -> Any:
        from mbfg.parameters import Parameter

        if isinstance(obj, Parameter):
            return _parameter_declaration, (obj.name, obj.unit, obj.kind, obj.free)
        named = getattr(type(obj), "__fingerprint__", None)
        if isinstance(named, property):  # an object that names what it stands for (a model structure)
            return _fingerprinted, (type(obj).__qualname__, obj.__fingerprint__)
        if isinstance(obj, type) or callable(obj) and hasattr(obj, "__module__"):
            module = getattr(obj, "__module__", None) or ""
            if module.partition(".")[0] not in _TRUSTED:
                raise _Untrusted(f"{obj!r} from {module!r}")
        return NotImplemented


def closure_fingerprint(fn: Callable[..., Any]) -> str | None:
    """SHA-256 naming what ``fn`` computes without tracing it: mbfg's source, ``fn``'s module and
    qualified name, and the values in its closure (pickled). None where that does not pin the
    program down: a closure that reaches other code (a user's function or class), a value that
    cannot be pickled, or an ``fn`` not defined in mbfg."""
    code = getattr(fn, "__code__", None)
    module = getattr(fn, "__module__", "") or ""
    if code is None or module.partition(".")[0] != "mbfg" or module not in sys.modules:
        return None
    cells = tuple(cell.cell_contents for cell in (fn.__closure__ or ()))
    buffer = io.BytesIO()
    try:
        pickler = _ClosurePickler(buffer, protocol=5)
        # No memo: equal values give equal bytes whether or not they are one object (a model that went
        # through pickle, e.g. to a Dask worker, holds equal strings as separate objects). A recursive
        # value then raises RecursionError, and the residual is traced instead.
        pickler.fast = True
        pickler.dump((module, fn.__qualname__, code.co_firstlineno, cells))
    except Exception:  # noqa: BLE001 (untrusted code or an unpicklable value: trace instead)
        return None
    return hashlib.sha256(mbfg_source_digest().encode() + buffer.getvalue()).hexdigest()


#: The arguments of a rigid-body model's constructor that its programs depend on.
_MODEL_FIELDS = ("name", "bodies", "joints", "contacts", "parameters", "applied", "tilt", "observations")


def _model_structure(*fields: Any) -> None:
    """Stands for a model in a structure's pickle (never unpickled)."""


class _StructurePickler(_ClosurePickler):
    """:class:`_ClosurePickler` that also leaves out what a program never reads: a parameter's free flag (the
    free set is an argument of the programs, :mod:`mbfg.selected`) and a model's state error weight and
    description."""

    def reducer_override(self, obj: Any) -> Any:
        from mbfg.parameters import Parameter
        from mbfg.rigid import RigidModel

        if isinstance(obj, Parameter):
            return _parameter_declaration, (obj.name, obj.unit, obj.kind)
        if isinstance(obj, RigidModel):
            # The constructor's arguments (RigidModel._copy's) but the weight and description: everything else
            # a model holds (its layout, its index arrays) is made from them by mbfg's code.
            fields = tuple(getattr(obj, k) for k in _MODEL_FIELDS)
            return _model_structure, (type(obj).__qualname__, fields)
        return super().reducer_override(obj)


#: Structure fingerprints by model instance (dropped with the model), and the tokens of instances whose
#: structure cannot be pickled (each its own structure, never reused).
_STRUCTURES: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()
_UNPICKLABLE = itertools.count()


def structure_fingerprint(model: Any) -> str:
    """SHA-256 of what a rigid-body model's programs compute from it: mbfg's source and the model without its
    parameters' values, bounds and free flags, its state error weight and its description (bodies, joints,
    contacts, applied forces, the parameters' names, units and kinds, the tilt's name, the observations).
    Two models with equal fingerprints run the same compiled programs (``tests/test_no_recompile.py``). A
    model that reaches code outside mbfg (a user's function) or cannot be pickled is a structure of its own
    (a fingerprint no other instance gets)."""
    found = _STRUCTURES.get(model)
    if found is None:
        buffer = io.BytesIO()
        try:
            pickler = _StructurePickler(buffer, protocol=5)
            pickler.fast = True  # no memo: equal values give equal bytes (see closure_fingerprint)
            pickler.dump(model)
            found = hashlib.sha256(mbfg_source_digest().encode() + buffer.getvalue()).hexdigest()
        except Exception:  # noqa: BLE001 (untrusted code or an unpicklable value: a structure of its own)
            found = f"instance {next(_UNPICKLABLE)}"
        _STRUCTURES[model] = found
    return found


K = TypeVar("K")
V = TypeVar("V")
F = TypeVar("F", bound=Callable[..., Any])


class BoundedCache(OrderedDict[K, V]):
    """A dict of at most ``maxsize`` entries: storing one more drops the least recently used (read or
    stored). For what a process keeps by model structure, so that a long-running worker that meets
    structure after structure keeps a bounded number of compiled programs (``tests/test_memory.py``)."""

    def __init__(self, maxsize: int) -> None:
        super().__init__()
        self.maxsize = maxsize
        self._lock = threading.RLock()  # a sweep's threads share the process's caches

    def __getitem__(self, key: K) -> V:
        with self._lock:
            value = super().__getitem__(key)
            self.move_to_end(key)
            return value

    def get(self, key: K, default: Any = None) -> Any:
        with self._lock:
            return self[key] if key in self else default

    def __setitem__(self, key: K, value: V) -> None:
        with self._lock:
            super().__setitem__(key, value)
            self.move_to_end(key)
            while len(self) > self.maxsize:
                self.popitem(last=False)


_MISSING = object()


def structure_cache(maxsize: int = 16) -> Callable[[F], F]:
    """Decorator: ``fn(model, *args)`` cached by the model's structure (:func:`structure_fingerprint`) and the
    other arguments, for ``maxsize`` keys (least recently used dropped first).

    Every model of one structure gets what the first of them built, so ``fn`` must read only its model's
    structure, never its parameter values (those are arguments of what it returns): a ``functools.cache``
    keyed by the model instance instead keeps one entry, with its compiled programs, per
    ``model.with_parameters`` copy a process ever made. The table is the wrapper's ``cache`` attribute.
    """

    def decorate(fn: F) -> F:
        table: BoundedCache[tuple, Any] = BoundedCache(maxsize)

        @functools.wraps(fn)
        def cached(model: Any, *args: Any, **kwargs: Any) -> Any:
            key = (structure_fingerprint(model), args, tuple(sorted(kwargs.items())))
            found = table.get(key, _MISSING)
            if found is _MISSING:
                found = table[key] = fn(model, *args, **kwargs)
            return found

        cast(Any, cached).cache = table
        return cast(F, cached)

    return decorate


#: Programs of this process by key: factor types built again for another model instance of the same
#: structure find theirs here, compiled, without reading the disk.
_LOADED: BoundedCache[str, Callable[..., Any]] = BoundedCache(256)


def _signature(leaves: list, treedef: Any) -> tuple:
    """What a traced program depends on: the pytree structure and each leaf's shape and dtype (a Python
    scalar by its type: JAX traces it weakly typed). Cheap: it runs on every call."""
    return treedef, tuple((a.shape, a.dtype) if hasattr(a, "dtype") else type(a) for a in leaves)


class PersistentJit:
    """``jax.jit(fn)`` whose traced program is kept on disk, found again by a fingerprint.

    Args:
        fn: the function to jit (pure, array arguments; pytrees allowed); it must return an array or a tuple
            of arrays.
        describe: ``describe(*args) -> str | None``: the fingerprint of what ``fn`` computes at
            arguments of these shapes (e.g. :func:`jaxpr_fingerprint` of the residual it
            differentiates, with the passes and axes), or None: not kept on disk. Called once per
            argument signature.
    """

    def __init__(self, fn: Callable[..., Any], describe: Callable[..., str | None]) -> None:
        self.jitted = jax.jit(fn)
        self._describe = describe
        # signature -> program on the flat argument list (None: call ``jitted`` with the pytrees)
        self._programs: dict[tuple, Callable[..., Any] | None] = {}

    def __call__(self, *args: Any) -> Any:
        leaves, treedef = jax.tree_util.tree_flatten(args)
        if any(isinstance(a, jax.core.Tracer) for a in leaves):
            return self.jitted(*args)  # inside someone else's trace: nothing to keep
        program = self._program(args, leaves, treedef)
        return self.jitted(*args) if program is None else program(*leaves)

    def flat_program(self, *args: Any) -> Callable[..., Any]:
        """``f(*leaves)``: this function at arguments of the structure, shapes and dtypes of ``args``, called
        with their flat leaves (``jax.tree_util.tree_leaves(args)``). A caller that calls at one signature many
        times (a GTSAM factor's callback) resolves the program once, and skips the flattening and the lookup
        that :meth:`__call__` does on every call."""
        leaves, treedef = jax.tree_util.tree_flatten(args)
        tracing = any(isinstance(a, jax.core.Tracer) for a in leaves)
        program = None if tracing else self._program(args, leaves, treedef)
        if program is not None:
            return program
        jitted = self.jitted
        return lambda *flat: jitted(*jax.tree_util.tree_unflatten(treedef, flat))

    def compile(self, *args: Any) -> Callable[..., Any]:
        """The program compiled ahead of time for arguments shaped as ``args``, called with pytree arguments:
        the traced program from disk where there is one, else traced here."""
        leaves, treedef = jax.tree_util.tree_flatten(args)
        program = self._program(args, leaves, treedef)
        if program is None:
            return self.jitted.lower(*args).compile()
        flat = cast(Any, program).lower(*leaves).compile()  # a jax.jit of the loaded (or stored) trace

        def compiled(*call_args: Any) -> Any:
            return flat(*jax.tree_util.tree_leaves(call_args))

        return compiled

    def _program(self, args: tuple, leaves: list, treedef: Any) -> Callable[..., Any] | None:
        """The program on flat leaves at the signature of ``args``, resolved once: loaded from disk or stored
        there, or None: call ``jitted``."""
        signature = _signature(leaves, treedef)
        if signature not in self._programs:
            self._programs[signature] = self._load(args, leaves, treedef, signature)
        return self._programs[signature]

    def _load(self, args: tuple, leaves: list, treedef: Any, signature: tuple) -> Callable[..., Any] | None:
        folder = cache_dir()
        if folder is None:
            return None
        what = self._describe(*args)
        if what is None:
            return None
        key = hashlib.sha256(f"{what}|{signature}|{_VERSION}|{jax.default_backend()}".encode()).hexdigest()
        if key in _LOADED:  # the same program for another instance (e.g. a model with other parameter values)
            return _LOADED[key]
        path = os.path.join(folder, "mbfg-programs", key[:40] + ".exported")
        from jax import export

        try:
            with open(path, "rb") as file:
                program = _LOADED[key] = jax.jit(export.deserialize(bytearray(file.read())).call)
                return program
        except Exception:  # noqa: BLE001 (absent, unreadable or from another format: export again)
            pass
        jitted = self.jitted

        def flat(*flat_leaves: Any) -> Any:  # flat arguments: custom pytree nodes need no serializer
            return jitted(*jax.tree_util.tree_unflatten(treedef, flat_leaves))

        try:
            exported = export.export(jax.jit(flat))(*leaves)
            blob = exported.serialize()
        except Exception:  # noqa: BLE001 (an output or primitive export cannot take: trace as before)
            return None
        _write_atomically(path, blob)
        program = _LOADED[key] = jax.jit(exported.call)
        return program


def _write_atomically(path: str, blob: bytes | bytearray) -> None:
    """Write ``blob`` to ``path`` so that a reader never sees half of it (concurrent test workers
    and sweep tasks share the folder); a folder that cannot be written is skipped silently."""
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        handle, tmp = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".tmp")
        with os.fdopen(handle, "wb") as file:
            file.write(blob)
        os.replace(tmp, path)
    except OSError:
        pass
