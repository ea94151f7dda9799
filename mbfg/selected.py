"""A factor type over a selection of another type's variables, running that type's compiled programs.

A rigid-body residual's compiled program should not depend on which parameters a problem frees: the
free set, the parameter values and the weight are data, the model's structure is the program. The
*program type* (a :class:`~mbfg.adapter.FactorType` built once per structure) takes every parameter as a
variable: all scalars as one Vector (n_s,) and the tilt as a Rot3. A :class:`SelectedType` is what a
factor graph sees for one free set: its own variables (the states, the free scalars (n_free,), the tilt
if it is free) and its own residual, but no programs of its own. Before each call it *expands* its
variables into the program type's (the free scalars written into the full vector at their indices, the
other entries and a held tilt taken from the constants), and after it keeps the Jacobian columns of its
own variables. So a second free set, new parameter values or a new weight run the programs the first
compiled (``tests/test_no_recompile.py`` counts the compiles).

The price is the Jacobian of every scalar parameter, computed and dropped for the held ones (a forward
pass of n_s directions instead of n_free; the selection's columns are gathered inside the program, so the
dropping costs no pass in NumPy); ``python benchmarks/furuta_calibration_peer.py`` measures the
calibration with it beside the version that compiled per free set.
"""

from __future__ import annotations

import dataclasses
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

import numpy as np

from mbfg._jax import jax, jnp
from mbfg._programs import PersistentJit
from mbfg.adapter import FactorType, VarKind
from mbfg.errors import MbfgError

__all__ = ["SelectedType", "Selection"]


class Selection(Protocol):
    """How a :class:`SelectedType`'s variables map onto its program type's."""

    def expand(self, xs: tuple, cs: tuple, xp: Any) -> tuple:
        """The program type's variables from this type's variables ``xs`` and constants ``cs`` (NumPy arrays,
        or with ``xp`` = ``jax.numpy`` traced ones), each with the leading axes its inputs have (one factor,
        or N stacked)."""
        ...

    def columns(self, program_xs: tuple) -> np.ndarray:
        """The columns of the program's ``[r | H_1 | H_2 | ...]`` that form this type's, in order (0: r)."""
        ...

    def describe(self) -> str:
        """Names the selection (part of a fingerprint: the same string, the same expansion and columns)."""
        ...


def _tracing(tree: Any) -> bool:
    return any(isinstance(a, jax.core.Tracer) for a in jax.tree_util.tree_leaves(tree))


#: The gathering linearizations of each program type, by (vmapped constant axes or None, per variable): shared by
#: every selection over the type (a program type lives as long as its structure's entry in the caller's cache).
_GATHERED: weakref.WeakKeyDictionary[FactorType, dict[tuple, PersistentJit]] = weakref.WeakKeyDictionary()


def _gathering(program: FactorType, constant_axes: tuple[int | None, ...] | None, per_variable: bool
               ) -> PersistentJit:
    """``f(xs, cs, columns)``: ``program``'s linearization ``[r | H_1 | ...]`` (vmapped over ``constant_axes``, or
    a single factor's where None) with its columns in the order of the index array ``columns`` (every column
    once). A selection puts its own columns first and reads them as a prefix, a view: the gather runs inside
    the compiled program, where it is a copy XLA fuses with the one that assembles the blocks, not a second
    pass over the (N, m, columns) array in NumPy. ``columns`` is an argument: one program for every selection."""
    table = _GATHERED.setdefault(program, {})
    key = (constant_axes, per_variable)
    if key not in table:
        inner = cast(PersistentJit, program._linearize_fn if constant_axes is None else
                     program._vmapped(constant_axes, per_variable)[1]).jitted
        describe = program._describe("linearize, gathered" + (", per variable" if per_variable else ""),
                                     constant_axes)

        def gathered(xs: tuple, cs: tuple, columns: jnp.ndarray) -> jnp.ndarray:
            return jnp.take(inner(xs, cs), columns, axis=-1)

        table[key] = PersistentJit(gathered, lambda xs, cs, columns: describe(xs, cs))
    return table[key]


class _Expanded:
    """One of the program type's programs called with a :class:`SelectedType`'s arguments: the variables
    expanded before; for a linearization, the Jacobian's columns of this type's variables gathered first in
    the program (:func:`_gathering`) and read as a prefix. Quacks like the
    :class:`~mbfg._programs.PersistentJit` it stands for where :class:`~mbfg.adapter.FactorType` and
    :class:`~mbfg.adapter.FactorGroup` call it: ``fn(xs, cs)`` and ``fn.flat_program(xs, cs)``."""

    def __init__(self, program: Callable[..., Any], selection: Selection, linearize: bool, batched: bool) -> None:
        self.program, self.selection, self.linearize, self.batched = program, selection, linearize, batched
        self._columns: dict[tuple, tuple[np.ndarray, int]] = {}

    def _order(self, program_xs: tuple) -> tuple[np.ndarray, int]:
        """(every column of the program's output, this type's first; how many are this type's)."""
        shapes = tuple(np.shape(x) for x in program_xs)
        found = self._columns.get(shapes)
        if found is None:
            single = tuple(x[0] for x in program_xs) if self.batched else program_xs
            mine = np.asarray(self.selection.columns(single), dtype=np.int32)
            total = 1 + sum(int(np.shape(x)[-1]) if np.ndim(x) == 1 else (6 if np.shape(x) == (4, 4) else 3)
                            for x in single)
            rest = np.setdiff1d(np.arange(total, dtype=np.int32), mine)
            found = self._columns[shapes] = (np.concatenate([mine, rest]), len(mine))
        return found

    def __call__(self, xs: tuple, cs: tuple) -> Any:
        tracing = _tracing((xs, cs))
        program_xs = self.selection.expand(tuple(xs), tuple(cs), jnp if tracing else np)
        if not self.linearize:
            return self.program(program_xs, cs)
        order, n = self._order(program_xs)
        out = self.program(program_xs, cs, order)
        return (out if tracing else np.asarray(out))[..., :n]

    def flat_program(self, xs: tuple, cs: tuple) -> Callable[..., Any]:
        """``f(*xs, *leaves of cs)``, as :meth:`mbfg._programs.PersistentJit.flat_program` gives."""
        n = len(xs)
        treedef = jax.tree_util.tree_structure(tuple(cs))

        def flat(*args: Any) -> Any:
            return self(args[:n], jax.tree_util.tree_unflatten(treedef, args[n:]))

        return flat


@dataclass(eq=False)
class SelectedType(FactorType):
    """A factor type whose variables are a selection of ``program``'s (module docstring).

    Args (beyond :class:`~mbfg.adapter.FactorType`'s name, residual, kinds, example, piecewise):
        program: the program type, whose compiled programs this type calls.
        selection: how this type's variables expand into the program type's (:class:`Selection`).

    ``residual`` is this type's own (the program type's residual at the expanded variables), for the
    Jacobian battery and for anyone who calls it; the compiled programs are ``program``'s.
    """

    program: FactorType | None = field(default=None, repr=False)
    selection: Selection | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.program is None or self.selection is None:
            raise MbfgError(f"{self.name}: a SelectedType needs its program type and its selection")
        program, selection = self.program, self.selection
        self._kind_list: list[VarKind | None] = list(self.kinds)
        self._fingerprints: dict[str, str | None] = {}
        self._error_fn = _Expanded(program._error_fn, selection, linearize=False, batched=False)  # type: ignore[assignment]
        self._linearize_fn = _Expanded(_gathering(program, None, False), selection, linearize=True,  # type: ignore[assignment]
                                       batched=False)

    def with_example(self, example: Any) -> FactorType:
        return dataclasses.replace(self, example=example)

    def _vmapped(self, constant_axes: tuple[int | None, ...], per_variable: bool = False
                 ) -> tuple[Callable[..., Any], Callable[..., Any]]:
        key = (constant_axes, per_variable)
        if key not in self._vmapped_fns:
            program = self.program
            assert program is not None  # checked in __post_init__
            error = program._vmapped(constant_axes, per_variable)[0]
            self._vmapped_fns[key] = (
                _Expanded(error, self.selection, linearize=False, batched=True),  # type: ignore[arg-type]
                _Expanded(_gathering(program, constant_axes, per_variable), self.selection,  # type: ignore[arg-type]
                          linearize=True, batched=True),
            )
        return self._vmapped_fns[key]

    def _describe(self, what: str, constant_axes: tuple[int | None, ...] | None) -> Callable[..., str | None]:
        """The program type's fingerprint of ``what`` at the expanded arguments, and the selection's name."""
        inner = self.program._describe(what, constant_axes)  # type: ignore[union-attr]
        selection = self.selection
        assert selection is not None  # checked in __post_init__

        def describe(xs: tuple, cs: tuple) -> str | None:
            xp = jnp if _tracing((xs, cs)) else np
            found = inner(selection.expand(tuple(xs), tuple(cs), xp), cs)
            return None if found is None else f"{found}; selected {selection.describe()}"

        return describe


def select(name: str, program: FactorType, selection: Selection, kinds: Sequence[VarKind],
           residual: Callable[..., jnp.ndarray]) -> SelectedType:
    """The :class:`SelectedType` ``name`` over ``program`` with ``selection`` and variables of ``kinds``;
    ``residual(*variables, *constants)`` is ``program``'s residual at the expanded variables (traceable)."""
    return SelectedType(name, residual, tuple(kinds), piecewise=program.piecewise, program=program,
                        selection=selection)
