"""What a stream's window holds, and its states read out as estimates (:class:`WindowReadout`, a mixin of
:class:`~mbfg.graphs.stream.StreamEstimator`): the lag that keeps ``m + update_every`` states, the oldest state
still in the window, and the filtered and smoothed estimates of an update's states (coordinates and rates, with
their marginal standard deviations on request).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import gtsam
import numpy as np

from mbfg import keys
from mbfg.graphs.stream.readout import wrap_angles
from mbfg.graphs.stream.results import Estimate

if TYPE_CHECKING:  # the estimator's attributes and methods the mixin uses
    from mbfg.graphs.stream._host import StreamHost
else:
    StreamHost = object

__all__ = ["WindowReadout"]


class WindowReadout(StreamHost):
    """The window's bookkeeping and read-out of :class:`~mbfg.graphs.stream.StreamEstimator` (a mixin)."""

    def _window_lag(self) -> float:
        """The smoother's lag [s]: states stamped more than this before the newest are marginalized."""
        # Keys stamped before t_new - lag are marginalized: m + update_every states stay, so that the smoothed
        # state of every sample of an update is still there (the half step absorbs rounding).
        return (self.m + self.update_every - 0.5) * self.h

    def _estimates(self, ks: Sequence[int], covariance: bool) -> tuple[Estimate, ...]:
        """Estimates of the states ``ks``, read out together."""
        if not ks:
            return ()
        est = self._smoother
        assert self._t0 is not None  # set with the smoother
        state_keys = [self._state_keys(k) for k in ks]  # per state: its poses, then its velocity
        if self.smoother_kind == "chain":  # our chain smoother (graphs/stream/chain.py) reads out in bulk
            T_world_body, vel = est.estimates(state_keys)
        else:
            T_world_body = np.array([[est.calculateEstimatePose3(key).matrix() for key in sk[:-1]] for sk in state_keys])
            vel = np.array([est.calculateEstimateVector(sk[-1]) for sk in state_keys])
        R_world_body, r_world_body = T_world_body[:, :, :3, :3], T_world_body[:, :, :3, 3]
        out = self._readout(R_world_body, r_world_body, vel, jacobians=covariance)
        q, qd = out[0], out[1]
        unread = np.full(q.shape[1], np.nan)  # (once: a default argument is built whether it is needed or not)
        refs = np.array([self._refs.get(k, unread) for k in ks])
        # Angles next to the encoder's turn count (states without a reference keep (-pi, pi]).
        q = np.where(self.hinge & np.isfinite(refs), refs + wrap_angles(q - refs), q)
        estimates = []
        for j, k in enumerate(ks):
            q_std = qd_std = None
            if covariance:
                C = self._joint_covariance(self._state_keys(k))
                Jq, Jv = out[2][j], out[3][j]
                q_std = np.sqrt(np.clip(np.einsum("ij,jk,ik->i", Jq, C, Jq), 0, None))
                qd_std = np.sqrt(np.clip(np.einsum("ij,jk,ik->i", Jv, C, Jv), 0, None))
            estimates.append(Estimate(round(self._t0 + k * self.h, self._t_decimals), k, q[j], qd[j], q_std, qd_std,
                                      R_world_body[j], r_world_body[j], vel[j]))
        return tuple(estimates)

    def _joint_covariance(self, key_list: list[int]) -> np.ndarray:
        """Joint marginal covariance of ``key_list`` in GTSAM tangent coordinates, blocks in that order."""
        if self.smoother_kind == "chain":
            return self._smoother.joint_covariance(key_list)
        if self.smoother_kind != "batch":
            joint = self._smoother.getISAM2().jointMarginalCovariance(key_list)
        else:
            marginals = gtsam.Marginals(self._smoother.getFactors(), self._smoother.calculateEstimate())
            joint = marginals.jointMarginalCovariance(key_list)
        return np.block([[joint.at(a, b) for b in key_list] for a in key_list])

    def _oldest_in_window(self) -> int:
        """Index of the oldest state the smoother still holds: it keeps m + update_every states."""
        return max(self._k_start, self._k - self.m - self.update_every + 1)

    def _read(self, ks: Sequence[int]) -> tuple[tuple[Estimate, ...], tuple[Estimate, ...]]:
        """Filtered estimates of the states ks and smoothed ones of the states a lag before them (those in
        this smoother); the newest of each become :attr:`_filtered` and :attr:`_smoothed`."""
        # A gap among the samples may have pushed some of their smoothed states out of the window.
        oldest = self._oldest_in_window()
        ks = [k for k in ks if k >= oldest]  # (a bridged gap longer than the window: its first ones are gone)
        lagged = [k - self.m for k in ks if k - self.m >= oldest]
        both = self._estimates(list(ks) + lagged, self.covariance)
        added, smoothed_added = both[: len(ks)], both[len(ks) :]
        self._filtered = added[-1]
        if smoothed_added:
            self._smoothed = smoothed_added[-1]
        if self._refine_prior is not None:
            chi = np.asarray(self._smoother.calculateEstimateVector(keys.P()))
            self._refined = {n: float(v) for n, v in zip(self.variables.free, chi)}
        return added, smoothed_added
