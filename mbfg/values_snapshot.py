"""A ``gtsam.Values`` read in bulk for the vectorized evaluation of factor groups.

Reading a variable from Python costs a few pybind calls (``values.atPose3(key).matrix()``); a
group of thousands of factors over a few hundred variables would read each variable once per
factor. A :class:`ValuesSnapshot` reads each needed variable once: every Pose3 in one call
(``gtsam.utilities.extractPose3``), every Vector under one symbol letter in one
(``gtsam.utilities.extractVectors``), any other variable once per distinct key; a group's inputs
are then rows picked by index. The arrays are bit-for-bit those of a per-key read (the
adapter's per-factor cache check compares bytes).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import gtsam
import numpy as np

if TYPE_CHECKING:  # the adapter imports this module
    from mbfg.adapter import VarKind

__all__ = ["ValuesSnapshot"]

#: Columns of at most this many keys are read key by key: a table of every Pose3 (or of every vector
#: under a letter) of a large ``Values`` costs more than a few reads (a stream's few new factors).
BULK_FROM = 9


class ValuesSnapshot:
    """Bulk reads of one ``gtsam.Values`` (module docstring); the tables are built on first use.

    Args:
        values: the values to read; not copied, so the snapshot is valid while they are unchanged.
        cache: key -> array of the variables read one by one, kept across snapshots of the same values (None:
            this snapshot's own).
    """

    def __init__(self, values: gtsam.Values, cache: dict[int, np.ndarray] | None = None) -> None:
        self.values = values
        self._read: dict[int, np.ndarray] = {} if cache is None else cache
        self._poses: tuple[np.ndarray, np.ndarray] | None = None
        self._vectors: dict[str, tuple[np.ndarray, np.ndarray] | None] = {}
        self._keys: np.ndarray | None = None

    def _all_keys(self) -> np.ndarray:
        if self._keys is None:
            self._keys = np.asarray(self.values.keys(), dtype=np.uint64)  # sorted, as GTSAM stores them
        return self._keys

    def _pose_table(self) -> tuple[np.ndarray, np.ndarray]:
        """(keys (n,), homogeneous matrices (n, 4, 4)) of every Pose3, in key order."""
        if self._poses is None:
            rows = gtsam.utilities.extractPose3(self.values)  # (n, 12): R row-major, then t
            T = np.zeros((len(rows), 4, 4))
            T[:, :3, :3] = rows[:, :9].reshape(-1, 3, 3)
            T[:, :3, 3] = rows[:, 9:]
            T[:, 3, 3] = 1.0
            self._poses = (np.asarray(gtsam.utilities.allPose3s(self.values).keys(), dtype=np.uint64), T)
        return self._poses

    def _vector_table(self, letter: str) -> tuple[np.ndarray, np.ndarray] | None:
        """(keys, rows) of the vectors under a symbol letter, or None where they are not all vectors of
        one size."""
        if letter not in self._vectors:
            keys = self._all_keys()
            mine = keys[(keys >> np.uint64(56)) == np.uint64(ord(letter))]
            try:
                rows = np.asarray(gtsam.utilities.extractVectors(self.values, letter))
            except RuntimeError:  # vectors of different sizes under one letter
                rows = None
            self._vectors[letter] = None if rows is None or len(rows) != len(mine) else (mine, rows)
        return self._vectors[letter]

    def column(self, kind: VarKind, keys: np.ndarray) -> np.ndarray:
        """The variables ``keys`` (N,) (uint64) of one kind stacked, as ``kind.read`` gives each: (N, n),
        (N, 3, 3), (N, 4, 4), ...; a key repeated in ``keys`` is read once."""
        keys = np.asarray(keys, dtype=np.uint64)
        table = None
        if len(keys) >= BULK_FROM:
            if kind.value == "Pose3":
                table = self._pose_table()
            elif kind.value == "Vector":
                letters = {int(k) >> 56 for k in (keys[0], keys[-1])}
                if len(letters) == 1:
                    table = self._vector_table(chr(letters.pop()))
        if table is not None:
            table_keys, rows = table
            at = np.minimum(np.searchsorted(table_keys, keys), max(len(table_keys) - 1, 0))
            if len(table_keys) and np.array_equal(table_keys[at], keys):
                return rows[at]
        if len(keys) < BULK_FROM:  # a few factors: reading them (once per key) is all there is to do
            return np.stack([self._one(kind, int(k)) for k in keys])
        if keys[0] == keys[-1] and np.all(keys == keys[0]):  # the parameters, the tilt: one variable
            x = self._one(kind, int(keys[0]))
            return np.broadcast_to(x, (len(keys), *np.shape(x)))
        distinct, where = np.unique(keys, return_inverse=True)
        if len(distinct) == len(keys):
            return np.stack([self._one(kind, int(k)) for k in keys])
        return np.stack([self._one(kind, int(k)) for k in distinct])[where.reshape(-1)]

    def _one(self, kind: VarKind, key: int) -> np.ndarray:
        x = self._read.get(key)
        if x is None:
            x = self._read[key] = kind.read(self.values, key)
        return x
