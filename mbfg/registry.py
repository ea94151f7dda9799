"""The factor types the shared Jacobian battery checks, registered by explicit calls.

Building a :class:`mbfg.adapter.FactorType` registers nothing: a module that declares a
factor type and wants it checked says so, once, next to the declaration::

    register(EULER)                                     # a type with its example(rng)
    register(impulse_type(variables).with_example(ex))  # a type built per model (in mbfg.testing)

An example builds its instances when the battery calls it, never at registration: the types
built per model (on example models) are registered by :mod:`mbfg.testing`, so importing a
production module builds no model. ``tests/test_jacobian_battery.py`` runs over
:data:`REGISTRY` after importing every module of ``mbfg.factors`` and :mod:`mbfg.testing`;
a user's own type goes through the same battery with
:func:`mbfg.testing.check_factor_type` (or by registering it before the battery runs).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

from mbfg.errors import MbfgError

if TYPE_CHECKING:  # the adapter imports this module: no runtime import back
    from mbfg.adapter import FactorType


def _declaration(ft: FactorType) -> tuple[str, str]:
    """Where ``ft``'s residual is declared: (the last part of its module's name, its qualified name).

    The last part only: one module imported under two names (``mbfg.factors.prior`` and
    ``factors.prior`` in a source checkout) is one declaration."""
    residual = ft.residual
    module = str(getattr(residual, "__module__", None) or "")
    return module.rpartition(".")[2], str(getattr(residual, "__qualname__", repr(residual)))


class Registry(Mapping[str, "FactorType"]):
    """Factor types by name, for the shared Jacobian battery: a read-only mapping filled by :meth:`register`."""

    def __init__(self) -> None:
        self._types: dict[str, FactorType] = {}

    def register(self, ft: FactorType) -> FactorType:
        """Add ``ft`` (which must carry ``example(rng)``, the battery's random instances) and return it.

        Registering a name again replaces the entry when the residual is the same declaration (the
        same function of a module reloaded, imported under a second name, or a notebook cell run
        again); a different residual under a taken name is refused, naming both.

        Raises:
            MbfgError: ``ft`` has no example, or its name is taken by another declaration.
        """
        if ft.example is None:
            raise MbfgError(f"factor type {ft.name!r}: registering it for the Jacobian battery needs "
                             "example(rng) -> (variables, constants); pass example= or use ft.with_example(...)")
        existing = self._types.get(ft.name)
        if existing is not None and existing is not ft and _declaration(existing) != _declaration(ft):
            raise MbfgError(f"factor type {ft.name!r} is already registered with residual "
                             f"{'.'.join(_declaration(existing))}; got {'.'.join(_declaration(ft))}")
        self._types[ft.name] = ft
        return ft

    def __getitem__(self, name: str) -> FactorType:
        return self._types[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._types)

    def __len__(self) -> int:
        return len(self._types)

    def __repr__(self) -> str:
        return f"Registry({sorted(self._types)})"


#: The process's registry: what ``tests/test_jacobian_battery.py`` iterates over.
REGISTRY = Registry()


def register(ft: FactorType) -> FactorType:
    """``REGISTRY.register(ft)``: add a factor type (with its example) to the Jacobian battery; returns ``ft``,
    so it also reads as a decorator above :func:`mbfg.factor_type.factor_type`."""
    return REGISTRY.register(ft)
