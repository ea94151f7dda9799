"""A factor graph assembled by factor type, each factor labelled with what it is and the time-step it belongs to.

A graph builder in mbfg adds many factors of one type at once (``add_group``: keys (N, number of
variables), per-factor constants marked :class:`~mbfg.adapter.PerFactor`, the rest broadcast) and any
other GTSAM factor one at a time (``add``). The builder keeps

- ``graph``: every factor in the order added, for GTSAM's solvers;
- ``groups`` and ``others``: the same factors split into the groups, each linearized by one vectorized
  JAX call (:mod:`mbfg.vectorized`), and the rest, linearized the ordinary way;
- ``labels`` and ``steps``: per factor of ``graph``, a label (``"impulse"``, ``"observation"``, ...) and a
  time-step index, so that a cost can be split by kind and by step (:meth:`costs`) without lists kept by
  hand beside the graph.

A per-factor constant is marked, not recognized by its shape: a constant whose leading axis happens to
equal N (three factors and a 3-vector) would otherwise be taken per factor, silently.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import Any

import gtsam
import numpy as np

from mbfg._jax import jax
from mbfg.adapter import FactorGroup, FactorType, PerFactor
from mbfg.errors import MbfgError


class GraphBuilder:
    """Factors added by type, with a label and a time-step each (module docstring)."""

    def __init__(self) -> None:
        self.graph = gtsam.NonlinearFactorGraph()
        self.groups: list[FactorGroup] = []
        self.others = gtsam.NonlinearFactorGraph()
        #: The groups and the other factors in the order added (a smoother that evaluates groups itself).
        self.items: list[FactorGroup | gtsam.NonlinearFactor] = []
        # A task's groups die with its builder (FactorGroup.release_factors: a sweep worker's memory stays flat).
        weakref.finalize(self, _release_factors, self.groups)
        self._labels: list[str] = []
        self._steps: list[int] = []

    def add_group(self, ft: FactorType, keys: Sequence[Sequence[int]] | np.ndarray, noise: gtsam.noiseModel.Base,
                  *constants: Any, label: str, steps: Sequence[int] | np.ndarray, regroup: bool = True,
                  vectorize: bool = True) -> FactorGroup | None:
        """N factors of type ``ft`` (:meth:`FactorType.group`): ``keys`` (N, number of variables), ``constants``
        as there; ``steps`` (N,) the time-step of each factor.

        Args:
            regroup: as in :meth:`FactorType.make_many`.
            vectorize: True: one group, linearized by one vectorized call; returned. False: N single factors
                (:meth:`FactorType.make`, each with its row of the per-factor constants), linearized by GTSAM
                one by one; None is returned. For a count of factors that varies from call to call (a
                stream's gap), which would compile a vectorized program per count.

        Raises:
            ValueError: ``steps`` not of length N (and :meth:`FactorType.group`'s errors).
        """
        rows = np.asarray(keys).tolist() if isinstance(keys, np.ndarray) else list(keys)
        steps = [int(k) for k in np.asarray(steps).reshape(-1)]
        if len(steps) != len(rows):
            raise MbfgError(f"{ft.name}: {len(rows)} factors labelled {label!r} but {len(steps)} steps")
        if not vectorize:
            for i, (row, step) in enumerate(zip(rows, steps)):
                self.add(ft.make(row, noise, *_row_of(constants, i)), label=label, step=step)
            return None
        group = ft.group(rows, noise, *constants, regroup=regroup)
        for factor in group.factors:
            self.graph.push_back(factor)
        self.groups.append(group)
        self.items.append(group)
        self._labels += [label] * len(group)
        self._steps += steps
        return group

    def add(self, factor: gtsam.NonlinearFactor, *, label: str, step: int = 0) -> None:
        """One factor of any kind (GTSAM's, or one of ours made by :meth:`FactorType.make`), linearized by GTSAM."""
        self.graph.push_back(factor)
        self.others.push_back(factor)
        self.items.append(factor)
        self._labels.append(label)
        self._steps.append(int(step))

    @property
    def labels(self) -> tuple[str, ...]:
        """The label of each factor of :attr:`graph`, in its order."""
        return tuple(self._labels)

    @property
    def steps(self) -> np.ndarray:
        """(number of factors,) the time-step of each factor of :attr:`graph`."""
        return np.asarray(self._steps, dtype=int)

    def costs(self, values: gtsam.Values, n: int, labels: Sequence[str] = ()) -> dict[str, np.ndarray]:
        """Per label, the (n,) sums over the factors of each time-step of their squared whitened residuals
        ``|r|^2`` (twice GTSAM's error) at ``values``; ``labels`` adds zeros for labels without factors."""
        out = {label: np.zeros(n) for label in (*labels, *self._labels)}
        for i, (label, k) in enumerate(zip(self._labels, self._steps)):
            out[label][k] += 2.0 * self.graph.at(i).error(values)
        return out


def _release_factors(groups: list[FactorGroup]) -> None:
    for group in groups:
        group.release_factors()


def _row_of(constants: tuple[Any, ...], i: int) -> tuple[Any, ...]:
    """The constants of factor ``i`` of a group: row ``i`` of each :class:`PerFactor` one, the others as they are."""
    return tuple(jax.tree_util.tree_map(lambda a: a[i], c.values) if isinstance(c, PerFactor) else c
                 for c in constants)


__all__ = ["GraphBuilder"]
