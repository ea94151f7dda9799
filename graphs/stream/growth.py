"""Growing the window's graph one update at a time: starts, predictions, new states and factors.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import gtsam
import numpy as np

from mbfg import keys
from mbfg import quaternion as quat
from mbfg._jax import jax
from mbfg.adapter import PerFactor
from mbfg.factor_group import as_constant
from mbfg.factors._rigid import state_values
from mbfg.factors.impulse import impulse_keys, impulse_type
from mbfg.factors.initial_state import initial_state_type
from mbfg.factors.observation import observation_factor, observation_keys, observation_type
from mbfg.graph_builder import GraphBuilder
from mbfg.graphs.joint import initial_states
from mbfg.graphs.stream.chain import ChainWindow
from mbfg.graphs.stream.fused import fused_kind, regular_update_program
from mbfg.graphs.stream.results import VELOCITY_PRIOR_SIGMA, Estimate
from mbfg.rigid import State

if TYPE_CHECKING:  # the estimator's attributes and methods the mixin uses
    from mbfg.graphs.stream._host import StreamHost
else:
    StreamHost = object


class GraphGrowth(StreamHost):
    """The graph growth of :class:`StreamEstimator` (a mixin): new smoothers, predictions, updates."""

    def _state_keys(self, k: int) -> list[int]:
        return keys.rigid_state(k, self.model.nb)

    def _insert_state(self, values: gtsam.Values, k: int, poses: Sequence[gtsam.Pose3], vel: np.ndarray) -> None:
        for i, pose in enumerate(poses):
            values.insert(keys.X(k, i), pose)
        values.insert(keys.V(k), np.asarray(vel, dtype=float))

    def _start(self, k: int, y: np.ndarray, u: np.ndarray) -> None:
        """A new smoother whose first state is x_k at the readings y (initial-state factor, observation, prior)."""
        (x0,) = initial_states(self.model, y[None], self.h, self.parameters)
        vals = state_values(self.model, x0)
        vel = self._restart_velocity if self._restart_velocity is not None else vals[-1]
        factors = GraphBuilder()
        values = gtsam.Values()
        self._insert_state(values, k, [gtsam.Pose3(T) for T in vals[:-1]], vel)
        pkeys = keys.parameter_keys(self.variables)
        factors.add(initial_state_type(self.variables).make(self._state_keys(k) + pkeys, self._imp_noise,
                                                            self.fixed, float(self.h)), label="initial_state", step=k)
        factors.add(observation_factor(self.variables, k, y, self._obs_noise, self.fixed), label="observation",
                    step=k)
        factors.add(gtsam.PriorFactorVector(keys.V(k), np.asarray(vel, dtype=float),
                                            gtsam.noiseModel.Isotropic.Sigma(len(vel), VELOCITY_PRIOR_SIGMA)),
                    label="velocity_prior", step=k)
        readings = self._take_sensor_rows([k], clear_before=k)
        for kind in self.sensor_kinds:  # a factor between states has no state before a window's first
            if kind.span == 1 and kind.name in readings[k]:
                factors.add(kind.ft.make(kind.row_keys(k), kind.spec.noise, *kind.constants(readings[k][kind.name])),
                            label="user", step=k)
        stamps = {key: k * self.h for key in self._state_keys(k)}
        if self._refine_prior is not None:
            p0, sig = self._refine_prior
            if self._refined is not None:  # a restart keeps what was learned
                p0 = np.array([self._refined[n] for n in self.variables.free])
            values.insert(keys.P(), p0)
            factors.add(gtsam.PriorFactorVector(keys.P(), p0, gtsam.noiseModel.Diagonal.Sigmas(sig)),
                        label="parameter_prior", step=k)
            stamps[keys.P()] = k * self.h
        self._smoother = self._make_smoother()
        self._k_start, self._k = k, k
        self._u_graph = np.asarray(u, dtype=float).copy()
        self._pending = []
        self._refs = {k: y.copy()}
        self._smoothed = None  # a new window: no smoothed state until a lag has passed (no stale values)
        self._restart_velocity = None
        self._update_smoother(factors, values, stamps)
        self.status.states += 1
        self.status.updates += 1

    def _predict(self, k_from: int, controls: Sequence[np.ndarray]) -> list[tuple[list[gtsam.Pose3], np.ndarray]]:
        """Predictions of x_{k_from+1} .. x_{k_from+n} from the estimate of x_{k_from}, ``controls`` (n, n_u)
        the u of each step: (poses, velocity) per step.

        One new state: constant velocity, positions by the Spook update q_{k+1} = q_k + h v (2.16).
        Several (``update_every`` > 1, or a gap bridged): Spook steps of the model (:func:`mbfg.spook.step`,
        one compiled scan of ``update_every`` steps per call). The new states' factors are linearized at
        these values and relinearized only past the pose threshold; extrapolated over several steps at
        constant velocity (error about a (n h)^2 / 2: 3 encoder counts after 20 ms at peak speed of a
        swinging pendulum) or at the last step's acceleration they lose accuracy, and after a gap the jump
        gate and the turn of the readings are judged against this prediction (tests/test_stream.py
        compares update_every 5 with 1; tests/test_stream_faults.py bridges gaps).
        """
        key = (k_from, self.status.updates, len(controls))
        if self._pred_cache is not None and self._pred_cache[0] == key:
            return self._pred_cache[1]
        est = self._smoother
        nb = self.model.nb
        vel = np.asarray(est.calculateEstimateVector(keys.V(k_from)))
        poses = [est.calculateEstimatePose3(keys.X(k_from, i)) for i in range(nb)]
        if len(controls) == 1:
            v, w = vel.reshape(nb, 6)[:, :3], vel.reshape(nb, 6)[:, 3:]
            moved = [gtsam.Pose3(pose.rotation().compose(gtsam.Rot3.Expmap(w[i] * self.h)),  # omega: body frame
                                 pose.translation() + v[i] * self.h) for i, pose in enumerate(poses)]
            return [(moved, vel)]
        from mbfg.spook import compiled_scan

        V = vel.reshape(nb, 6)
        x = State(np.stack([p.translation() for p in poses]),
                  np.stack([quat.from_matrix(p.rotation().matrix()) for p in poses]), V[:, :3], V[:, 3:])
        N = self.update_every
        u = np.asarray(controls, dtype=float).reshape(len(controls), -1)
        chunks = -(-len(u) // N)
        padded = np.concatenate([u, np.repeat(u[-1:], chunks * N - len(u), axis=0)])
        h = np.asarray(self.h, dtype=float)
        if self._rollout is None:
            self._rollout = compiled_scan(self.model, x, padded[:N], self.fixed, h)[0]
        out = []
        for c in range(chunks):
            x, (xs, _, _) = self._rollout(x, padded[c * N : (c + 1) * N], self.fixed, h)
            r, e, v, w = (np.asarray(a) for a in xs)
            for n in range(N):
                moved = [gtsam.Pose3(gtsam.Rot3.Quaternion(*e[n, i]), r[n, i]) for i in range(nb)]
                out.append((moved, np.concatenate([v[n], w[n]], axis=1).reshape(-1)))
        out = out[: len(u)]
        self._pred_cache = (key, out)
        return out

    def _predicted_coordinates(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The model's prediction of the observed coordinates (n_obs,) [rad, m] and their rates (n_obs,)
        [rad/s, m/s] of state k across a gap, from the newest state in the window (no sample waiting), the
        last control held: hinge angles unwrapped from the filtered estimate step by step (each step turns
        far less than pi)."""
        n = k - self._k
        states = self._predict(self._k, [self._u_graph] * n)
        R = np.array([[p.rotation().matrix() for p in poses] for poses, _ in states])
        r = np.array([[p.translation() for p in poses] for poses, _ in states])
        vel = np.array([v for _, v in states])
        q, qd = self._readout(R, r, vel)
        assert self._filtered is not None  # the window's newest state has its filtered estimate
        start = self._filtered.coordinates
        steps = np.diff(np.vstack([start, q]), axis=0)
        steps = np.where(self.hinge, np.arctan2(np.sin(steps), np.cos(steps)), steps)
        return np.where(self.hinge, start + steps.sum(axis=0), q[-1]), qd[-1]

    def _update_smoother(self, factors: GraphBuilder, values: gtsam.Values, stamps: dict[int, float]) -> None:
        """One smoother update with the new ``factors``: the chain window takes factor groups as they are
        (evaluated vectorized, no GTSAM callbacks); GTSAM's smoothers get their factors in a graph."""
        if isinstance(self._smoother, ChainWindow):
            self._smoother.update(factors.items, values, stamps)
            self.paths[self._smoother.last_path] += 1
            return
        self._smoother.update(factors.graph, values, stamps)
        self.paths["gtsam"] += 1

    def _take_sensor_rows(self, ks: Sequence[int], clear_before: int | None = None
                          ) -> dict[int, dict[str, tuple[np.ndarray, ...]]]:
        """The user sensors' readings of the samples of states ``ks`` (name -> readings; no entry: none of
        that sample), forgotten here; ``clear_before``: also forget those of states before it (a new window)."""
        out = {k: self._sensor_rows.pop(k, {}) for k in ks}
        if clear_before is not None:
            for kk in [kk for kk in self._sensor_rows if kk < clear_before]:
                del self._sensor_rows[kk]
        return out

    def _sensor_groups(self, readings: dict[int, dict[str, tuple[np.ndarray, ...]]]
                       ) -> list[tuple[Any, list[int], tuple[Any, ...]]]:
        """Per user factor kind with rows in ``readings`` (state k -> name -> readings): (kind, the states k
        of its rows, its constants with the readings stacked as PerFactor (rows, ...))."""
        out = []
        for kind in self.sensor_kinds:
            ks = [k for k, given in readings.items() if kind.name in given]
            if not ks:
                continue
            stacked = [PerFactor(np.stack([readings[k][kind.name][i] for k in ks])) for i in range(len(kind.readings))]
            out.append((kind, ks, kind.constants(tuple(stacked))))
        return out

    def _update(self) -> tuple[tuple[Estimate, ...], tuple[Estimate, ...]]:
        """Take the waiting samples into the smoother; their filtered and smoothed estimates."""
        if not self._pending:
            return (), ()
        pending, self._pending = self._pending, []
        self._extend(pending)
        return self._read([k for k, _, _ in pending])

    def _extend(self, pending: Sequence[tuple[int, np.ndarray, np.ndarray]]) -> None:
        """Add the states x_{k_last+1} .. x_k of the samples (k, readings, controls) in ``pending`` (bridged
        states without a sample included), their impulse factors, and their readings' observation factors.

        The chain smoother's regular updates (``update_every`` new states, each with its sample) take
        :meth:`_extend_regular`, one compiled program; every other update :meth:`_extend_factors`.
        """
        k_last, k_end = self._k, pending[-1][0]
        samples = {k: (y, u) for k, y, u in pending}
        controls = []
        u = self._u_graph
        ref = self._refs[k_last]
        for kk in range(k_last + 1, k_end + 1):
            controls.append(u)  # u_{kk-1}
            if kk in samples:
                y, u = samples[kk]
                ref = np.where(np.isfinite(y), y, ref)
            self._refs[kk] = ref
        if isinstance(self._smoother, ChainWindow) and k_end - k_last == len(pending) == self.update_every:
            self._extend_regular(pending, controls)
        else:
            self._extend_factors(pending, controls)
        self._k, self._u_graph = k_end, u
        oldest = self._oldest_in_window()
        for kk in [kk for kk in self._refs if kk < oldest - 1]:
            del self._refs[kk]
        self.status.states += k_end - k_last
        self.status.updates += 1

    def _extend_regular(self, pending: Sequence[tuple[int, np.ndarray, np.ndarray]],
                        controls: Sequence[np.ndarray]) -> None:
        """The chain's update with a sample for every new state (no gap): one compiled program per pass
        (:mod:`mbfg.graphs.stream.fused`), the same factors as :meth:`_extend_factors`."""
        ks = [k for k, _, _ in pending]
        readings = self._take_sensor_rows(ks)
        # The user's kinds in the program: those whose readings' shapes are known (a sensor that has not read
        # yet has no rows); a sample without a kind's readings gives zero rows (mask 0), its constants zeros.
        kinds = tuple(kind for kind in self.sensor_kinds if not kind.readings or kind.name in self._sensor_shapes)
        if self._fused is None or self._fused_kinds != kinds:
            self._fused = regular_update_program(self.variables, tuple(fused_kind(kind) for kind in kinds))
            self._fused_kinds = kinds
        program = self._fused
        user = []
        for kind in kinds:
            given = [kind.name in readings[k] for k in ks]
            zeros = tuple(np.zeros(shape) for shape in self._sensor_shapes.get(kind.name, ()))
            stacked = tuple(np.stack([readings[k][kind.name][i] if g else zeros[i] for k, g in zip(ks, given)])
                            for i in range(len(kind.readings)))
            constants = tuple(jax.tree_util.tree_map(as_constant, c) for c in kind.constants(stacked))
            user.append((constants, np.asarray(given, dtype=float), np.asarray(kind.spec.noise.sigmas(), dtype=float)))
        k_last = self._k
        ys = np.stack([y for _, y, _ in pending])
        data = (np.asarray(controls, dtype=float), np.nan_to_num(ys), np.isfinite(ys).astype(float), self.fixed,
                np.asarray(self.h, dtype=float))
        sigmas = (np.asarray(self._imp_noise.sigmas()), np.asarray(self._obs_noise.sigmas()))

        def solve(T_front, v_front, T_est, v_est, T_given, v_given, use_given, carried, binary_order,
                  unary_order, user_targets):
            rows = tuple((*u, target) for u, target in zip(user, user_targets))
            return program(T_front, v_front, T_est, v_est, T_given, v_given, use_given, carried, *data,
                           binary_order, unary_order, *sigmas, rows)

        self._smoother.update_regular(self._state_keys(k_last), [self._state_keys(k) for k in ks],
                                      [k * self.h for k in ks], impulse_keys(self.variables, k_last),
                                      observation_keys(self.variables, ks[0]), solve,
                                      [(kind.row_keys(ks[0]), kind.span) for kind in kinds])
        self.paths["fused"] += 1

    def _extend_factors(self, pending: Sequence[tuple[int, np.ndarray, np.ndarray]],
                        controls: Sequence[np.ndarray]) -> None:
        """The smoother's update with the new states' predictions and their factors (GTSAM's smoothers;
        the chain's updates across a gap or of fewer samples than ``update_every``).

        The factors of each type go in as one batch (:meth:`GraphBuilder.add_group`, keys (N, number of
        variables)). With ``update_every`` new states (no gap) the batch is linearized together, one vmapped
        JAX call per type (for the chain smoother also when ``update_every`` is 1; GTSAM's smoothers then take
        single factors, a group of one costs them its bookkeeping); otherwise as single factors (a gap's
        length would compile a program of its own).
        """
        factors = GraphBuilder()
        values = gtsam.Values()
        stamps: dict[int, float] = {}
        k_last, k_end = self._k, pending[-1][0]
        steps = range(k_last, k_end)  # impulse factor k: x_k -> x_{k+1}
        for kk in steps:
            for key in self._state_keys(kk + 1):
                stamps[key] = (kk + 1) * self.h
        for kk, (poses, vel) in zip(range(k_last + 1, k_end + 1), self._predict(k_last, controls)):
            self._insert_state(values, kk, poses, vel)
        grouped = self.update_every > 1 or isinstance(self._smoother, ChainWindow)
        # The impulse type's own Jacobian passes (one per state part and the parameters).
        factors.add_group(impulse_type(self.variables), [impulse_keys(self.variables, kk) for kk in steps],
                          self._imp_noise, self.fixed, PerFactor(np.asarray(controls, dtype=float)), float(self.h),
                          label="impulse", steps=steps, regroup=False,
                          vectorize=grouped and len(steps) == self.update_every)
        observed = [(k, y) for k, y, _ in pending if np.isfinite(y).any()]
        if observed:
            ys = np.stack([y for _, y in observed])
            factors.add_group(observation_type(self.variables), [observation_keys(self.variables, k) for k, _ in observed],
                              self._obs_noise, self.fixed, PerFactor(np.nan_to_num(ys)),
                              PerFactor(np.isfinite(ys).astype(float)), label="observation",
                              steps=[k for k, _ in observed], regroup=False,
                              vectorize=grouped and len(observed) == self.update_every)
        for kind, ks, constants in self._sensor_groups(self._take_sensor_rows([k for k, _, _ in pending])):
            factors.add_group(kind.ft, [kind.row_keys(k) for k in ks], kind.spec.noise, *constants, label="user",
                              steps=ks, regroup=False, vectorize=grouped and len(ks) == self.update_every)
        if self._refine_prior is not None:
            stamps[keys.P()] = k_end * self.h  # the parameters stay in the window
        self._update_smoother(factors, values, stamps)
