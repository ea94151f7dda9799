"""iSAM2 over a sliding window, the newest state eliminated last.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import gtsam
import numpy as np


class ISAM2Window:
    """iSAM2 over a sliding window: GTSAM's IncrementalFixedLagSmoother, with the newest state eliminated last.

    The same marginalization as ``gtsam.IncrementalFixedLagSmoother`` (keys
    stamped before ``t_newest - lag`` are eliminated first, then marginalized
    as leaves), but with one more ordering group. GTSAM's class hands iSAM2
    two groups (marginalizable keys, all others), which switches off iSAM2's
    own rule of eliminating the newly observed variables last; on a chain the
    re-eliminated part of the Bayes tree then grows by one state per update
    until iSAM2 falls back to a full relinearization and re-elimination (every
    ~30 updates at 1 kHz, tens of ms each). Here the newest state's keys form a
    third group, eliminated last, so an update re-eliminates a few cliques.
    The interface is the part of ``IncrementalFixedLagSmoother`` used here.
    """

    def __init__(self, lag: float, params: gtsam.ISAM2Params, kept: Sequence[int] = ()) -> None:
        self.lag = lag
        self.isam = gtsam.ISAM2(params)
        # GTSAM's Python binding hands a CustomFactor callback its Values as a Python object: a copy of
        # the whole linearization point (every variable of the window, per factor linearized) unless a
        # Python object already wraps that very Values. getLinearizationPoint() returns such a wrapper
        # of iSAM2's own, and holding it makes every callback receive it instead of a copy.
        self.theta = self.isam.getLinearizationPoint()
        self._states: list[tuple[float, list[int]]] = []  # (stamp, keys) per state, oldest first
        self._kept = list(kept)  # keys never marginalized (online parameters)

    def update(self, graph: gtsam.NonlinearFactorGraph, values: gtsam.Values, stamps: Mapping[int, float]) -> None:
        by_time: dict[float, list[int]] = {}
        kept = set(self._kept)
        for key, stamp in stamps.items():
            if key in kept or not values.exists(key):  # kept, or an existing key re-stamped
                continue
            by_time.setdefault(stamp, []).append(key)
        n_new = len(by_time)
        for stamp in sorted(by_time):
            self._states.append((stamp, by_time[stamp]))
        now = max(stamps.values()) if stamps else (self._states[-1][0] if self._states else 0.0)
        n_old = 0
        while n_old < len(self._states) and self._states[n_old][0] < now - self.lag:
            n_old += 1
        # Groups for CCOLAMD on the re-eliminated part only (labelling every key of the window would make
        # each update cost in proportion to the window): marginalizable keys first (0), the rest (1: the
        # states of this update and the one before them), the newest state last (2). Keys left out default
        # to group 0; only recent ones are ever re-eliminated.
        labels = [(key, 0) for _, key_list in self._states[:n_old] for key in key_list]
        labels += [(key, 1) for key in self._kept if self.isam.valueExists(key) or values.exists(key)]
        for _, key_list in self._states[max(n_old, len(self._states) - n_new - 1) : -1]:
            labels += [(key, 1) for key in key_list]
        labels += [(key, 2) for key in self._states[-1][1]] if self._states else []
        # CCOLAMD wants the group labels numbered 0, 1, ... without holes.
        used = sorted({g for _, g in labels})
        groups = gtsam.KeyGroupMap()
        for key, group in labels:
            groups.insert2(key, used.index(group))
        self.isam_result = self.isam.update(graph, values, [], groups)
        if n_old:
            leaves = gtsam.KeyList()
            for _, key_list in self._states[:n_old]:
                for key in key_list:
                    leaves.push_back(key)
            self.isam.marginalizeLeaves(leaves)
            del self._states[:n_old]

    def calculateEstimatePose3(self, key: int) -> gtsam.Pose3:  # noqa: N802 - GTSAM's name
        return self.isam.calculateEstimatePose3(key)

    def calculateEstimateVector(self, key: int) -> np.ndarray:  # noqa: N802
        return self.isam.calculateEstimateVector(key)

    def getISAM2(self) -> gtsam.ISAM2:  # noqa: N802
        return self.isam
