"""Fixed-lag smoothing of a live encoder stream (the factors of :mod:`mbfg.graphs.joint`, added step by step).

:class:`StreamEstimator` takes samples one at a time, ``push(t, readings,
controls)``, and returns per sample the *filtered* estimate of the newest
state and the *smoothed* estimate of the state one lag back. Underneath, the
graph of :func:`mbfg.graphs.joint.build_joint_problem` is grown one time-step
at a time in GTSAM's ``IncrementalFixedLagSmoother`` (iSAM2; the
``BatchFixedLagSmoother``, Levenberg-Marquardt over the window, on request):

- the first state x_0 gets the initial-state factor (3.14-3.15), its
  observation (3.5) and a weak prior on its velocity (the observations fix
  the configuration; the velocity along the joints is unknown until a second
  state arrives and would leave the first linear system singular);
- each new state x_{k+1} gets the impulse factor (3.6-3.7) from x_k with the
  control u_k and, when any reading is valid, its observation factor;
- states stamped more than ``lag`` before the newest are marginalized: the
  window holds ``m + 1`` states, ``m = round(lag / h)``, and the *smoothed*
  estimate is that of the oldest one, x_{k-m};
- with ``update_every = N > 1`` the states of N samples enter in one update
  (predicted by the model's Spook steps, their factors linearized in one
  vmapped call per type) and the window holds ``m + N`` states.

Weights, as in the calibration (seed 001 section 4.4): the objective is
``sum |Delta y_k|^2 / sigma_y^2 + sum |Delta p_k|^2 / sigma_p^2``, and the
covariances are in the units of the readings. ``sigma_y`` defaults to the
encoder's quantization noise ``step / sqrt(12)`` (step = 2 pi / ppr), else the
calibration's estimated observation noise. ``sigma_p`` is, in this order: the
``sigma_impulse`` given; ``sigma_y / sqrt(w)`` for a state error weight w given
(then the minimizer is that of ``mbfg calibrate`` / ``mbfg crossval`` with the
same w); with :meth:`StreamEstimator.from_calibration`, the calibration's
estimate of the impulse noise (seed 001 eq. 3.23: what the model left
unexplained on the calibration log); else ``sigma_y / sqrt(1e6)``. On a real
rig the estimate is what makes the dynamics smooth the rates: on the QUBE-Servo
log a weight-derived sigma_p five times the estimate left the pendulum rate as
rough as finite differences of the encoder angle (``benchmarks/stream.py --only
qube`` prints both).

Time: samples are placed on the grid ``t_0 + j * period`` (t_0: the first
complete sample); states live every ``stride = h / period`` samples, and as in
the batch graph only the readings at state times enter observation factors
(the control of a state-time sample is held over the step). Keys come from the
state index k (:mod:`mbfg.keys`), the smoother's timestamps are ``k * h``.

Faults (never raised; counted in :attr:`StreamEstimator.status`, flagged on the
returned step):

- a gap (samples missing): the missing states are bridged by impulse factors
  alone (the dynamics), with the last control held;
- a non-finite reading: that reading is dropped (a warning the first time);
  a non-finite control is replaced by the last one; a non-finite time drops the sample;
- a duplicate or out-of-order timestamp (on or before the last sample's grid
  slot): the sample is dropped;
- a jump: a reading further than ``jump`` from the filtered prediction is left
  out of its observation factor; after ``resync`` such readings in a row on a
  channel the readings are believed again (a real jump, e.g. a slipped
  encoder): the smoother restarts from them, its velocity carried over;
- a failed solve (an exception from GTSAM): the smoother restarts at the next
  complete sample, its velocity prior centred on the last estimate.

Long streams: once JAX and GTSAM are loaded a process holds about half a
million objects, and each of Python's full garbage collections walks them all:
a stall of many samples at 1 kHz (``benchmarks/stream.py`` counts them). A streaming
process should call ``gc.freeze()`` once the first update that grows the window
has run (every factor type is then compiled), as ``mbfg smooth`` does when run
as a program; later collections then walk only what the stream made.
"""

from __future__ import annotations

import math
import os
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

import gtsam
import numpy as np

from mbfg import keys
from mbfg import quaternion as quat
from mbfg._jax import jax
from mbfg.adapter import PerFactor, noise_model
from mbfg.errors import DataError, ModelError
from mbfg.factors._rigid import fixed_values, state_values, variables_for
from mbfg.factors.impulse import impulse_factor, impulse_keys, impulse_type
from mbfg.factors.initial_state import initial_state_type
from mbfg.factors.observation import observation_factor, observation_keys, observation_type
from mbfg.graphs.joint import initial_states
from mbfg.logs import Log
from mbfg.progress import Progress
from mbfg.rigid import WORLD, Hinge, RigidModel, State

#: Observation noise [rad or m] when neither a counts-per-revolution nor a calibration gives one.
DEFAULT_SIGMA = 1e-3
#: Standard deviation of the first state's velocity prior [m/s, rad/s]: weak, it only makes x_0 determined.
VELOCITY_PRIOR_SIGMA = 100.0


class StreamWarning(UserWarning):
    """A bad sample in a stream (issued once per kind of fault; :class:`StreamStatus` counts them all)."""


@dataclass
class StreamStatus:
    """What happened to the samples of a stream so far (counts).

    samples: pushed; states: time-steps in the graph (bridged ones included);
    updates: smoother updates; between: samples between state times (h a
    multiple of the period; not used, not a fault); waiting: samples before the
    first complete one. Faults: gaps (events) and missing_samples (samples
    they skipped), nonfinite (samples with a non-finite reading, control or
    time), duplicates, out_of_order, off_grid (more than a quarter period off
    the sample grid; placed on the nearest slot), jumps (readings left out),
    resyncs (channels believed again after ``resync`` jumps), malformed (wrong
    number of values), solver_failures (restarts).
    """

    samples: int = 0
    states: int = 0
    updates: int = 0
    between: int = 0
    waiting: int = 0
    gaps: int = 0
    missing_samples: int = 0
    nonfinite: int = 0
    duplicates: int = 0
    out_of_order: int = 0
    off_grid: int = 0
    jumps: int = 0
    resyncs: int = 0
    malformed: int = 0
    solver_failures: int = 0

    FAULTS = ("gaps", "nonfinite", "duplicates", "out_of_order", "off_grid", "jumps", "malformed",
              "solver_failures")

    @property
    def faults(self) -> int:
        """Number of fault events (a gap counts once however many samples it skips)."""
        return sum(getattr(self, name) for name in self.FAULTS)

    def as_dict(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def summary(self) -> str:
        """One readable line, e.g. ``1000 samples, 998 states; faults: 1 gap (2 missing samples), ...``."""
        parts = [
            f"{self.gaps} gap{'s' * (self.gaps != 1)} ({self.missing_samples} missing samples)",
            f"{self.nonfinite} non-finite", f"{self.duplicates} duplicate", f"{self.out_of_order} out-of-order",
            f"{self.off_grid} off-grid", f"{self.jumps} jump{'s' * (self.jumps != 1)} ({self.resyncs} resyncs)",
            f"{self.malformed} malformed", f"{self.solver_failures} solver restarts",
        ]
        head = f"{self.samples} samples, {self.states} states, {self.updates} updates"
        if self.waiting:
            head += f", {self.waiting} before the first complete sample"
        if self.between:
            head += f", {self.between} between state times"
        return f"{head}; faults: " + ", ".join(parts)


@dataclass(frozen=True)
class Estimate:
    """The estimate of one state.

    t: state time [s] (the stream's time axis); k: state index; coordinates
    (n_obs,): the model's observations at the estimate (hinge angles unwrapped
    next to the encoder's readings [rad], CoM coordinates [m]); rates (n_obs,):
    their time derivatives [rad/s, m/s]; coordinate_std, rate_std (n_obs,):
    marginal standard deviations (None unless asked for); rotations (nb, 3, 3),
    positions (nb, 3) and velocity (6 nb,): the state's GTSAM values, also as
    :attr:`state`.
    """

    t: float
    k: int
    coordinates: np.ndarray
    rates: np.ndarray
    coordinate_std: np.ndarray | None
    rate_std: np.ndarray | None
    rotations: np.ndarray = field(repr=False)
    positions: np.ndarray = field(repr=False)
    velocity: np.ndarray = field(repr=False)

    @property
    def state(self) -> State:
        """The full :class:`State` (built on request: quaternions cost more than the rest of a read-out)."""
        e = np.stack([quat.from_matrix(R) for R in self.rotations])
        vel = self.velocity.reshape(-1, 6)
        return State(self.positions, e, vel[:, :3].copy(), vel[:, 3:].copy())


@dataclass(frozen=True)
class StreamStep:
    """What :meth:`StreamEstimator.push` returns for one sample.

    t: the sample's time [s]; flags: faults and notes of this sample
    (``"gap"``, ``"nonfinite"``, ``"duplicate"``, ``"out_of_order"``,
    ``"off_grid"``, ``"jump"``, ``"resync"``, ``"malformed"``,
    ``"solver_failure"``, ``"waiting"``, ``"between"``); filtered: the newest
    state's estimate; smoothed: the state one lag back (None until the window
    is full); parameters: the refined parameters (online refinement only).
    A dropped sample returns the latest estimates again, as does a sample
    that waits for the next update (``update_every`` > 1; flag ``"pending"``).
    updated: this sample updated the smoother; added: then the filtered
    estimates of the states of every sample it took in, oldest first (one, or
    the ``update_every`` waiting ones), and smoothed_added: the smoothed
    estimates of the states one lag before those (as far as the window reaches).
    """

    t: float
    flags: tuple[str, ...]
    filtered: Estimate | None
    smoothed: Estimate | None
    parameters: dict[str, float] | None = None
    updated: bool = False
    added: tuple[Estimate, ...] = ()
    smoothed_added: tuple[Estimate, ...] = ()


@dataclass
class StreamReplay:
    """A log replayed through :meth:`StreamEstimator.replay`, one row per state.

    t (n,): state times [s]; filtered_q, filtered_qdot, smoothed_q,
    smoothed_qdot (n, n_obs): coordinates [rad, m] and rates [rad/s, m/s] as
    estimated when the state was the newest (filtered) and one lag later
    (smoothed; the last ``m`` states from the window at the end of the stream);
    filtered_states, smoothed_states: :class:`State` with a leading axis n;
    step_s (samples,): wall time of each push [s]; status: the fault counts.
    """

    t: np.ndarray
    filtered_q: np.ndarray
    filtered_qdot: np.ndarray
    smoothed_q: np.ndarray
    smoothed_qdot: np.ndarray
    filtered_states: State
    smoothed_states: State
    step_s: np.ndarray
    status: StreamStatus
    parameters: dict[str, float] | None = None


def _usable(value: Any) -> bool:
    """A positive finite number in a calibration JSON (not a bool, not null)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0


def _wrap(x: np.ndarray | float) -> np.ndarray:
    return np.arctan2(np.sin(x), np.cos(x))


def _hinge_angles(R_a: np.ndarray, R_b: np.ndarray) -> np.ndarray:
    """NumPy twin of :func:`mbfg.rigid.hinge_angle` over a leading axis: rotations (n, 3, 3) of frames a
    and b; the rotation of b about a's z axis (n,) [rad]."""
    R_ab = np.einsum("nji,njk->nik", R_a, R_b)
    return np.arctan2(R_ab[:, 1, 0] - R_ab[:, 0, 1], R_ab[:, 0, 0] + R_ab[:, 1, 1])


class _Readout:
    """Coordinates, rates and their Jacobians from states, in NumPy (no JAX call per sample).

    For each observation: a hinge angle (from the bodies' rotations, as
    :meth:`RigidModel.observe`) and its rate ``n . (omega_b - omega_a)``
    (world angular velocities, n the hinge axis), or a CoM coordinate and its
    velocity. The Jacobians are with respect to the GTSAM tangent of the
    state's variables [pose_0 (omega, v), ..., pose_{nb-1}, V (6 nb)], for the
    marginal standard deviations. Vectorized over states: one read-out per
    smoother update, whatever the number of states it adds.
    """

    def __init__(self, model: RigidModel) -> None:
        self.model, self.nb = model, model.nb
        joints = {j.name: j for j in model.joints}
        self.channels: list[tuple] = []
        for name in model.observations:
            j = joints.get(name)
            if isinstance(j, Hinge):
                ia = None if j.a.body == WORLD else model.body_index[j.a.body]
                ib = model.body_index[j.b.body]
                self.channels.append(("hinge", ia, j.a.R(), ib, j.b.R()))
            else:
                body, _, axis = name.rpartition(".")
                self.channels.append(("com", model.body_index[body], "xyz".index(axis)))

    def __call__(self, R_world_body: np.ndarray, r_world_body: np.ndarray, vel: np.ndarray,
                 jacobians: bool = False):
        """From R_world_body (n, nb, 3, 3), r_world_body (n, nb, 3) [m] and V (n, 6 nb) [m/s, rad/s]:
        coordinates (n, n_obs), rates (n, n_obs) [and J_q, J_v (n, n_obs, 12 nb)]."""
        n, nb, n_obs = len(R_world_body), self.nb, len(self.channels)
        vel = vel.reshape(n, nb, 6)
        w_world = np.einsum("nbij,nbj->nbi", R_world_body, vel[:, :, 3:])
        q, qd = np.zeros((n, n_obs)), np.zeros((n, n_obs))
        if jacobians:
            Jq, Jv = np.zeros((n, n_obs, 12 * nb)), np.zeros((n, n_obs, 12 * nb))
        for c, ch in enumerate(self.channels):
            if ch[0] == "hinge":
                _, ia, R_a_frame, ib, R_b_frame = ch
                R_world_a = np.broadcast_to(np.eye(3), (n, 3, 3)) if ia is None else R_world_body[:, ia]
                R_world_fa = R_world_a @ R_a_frame
                axis = R_world_fa[:, :, 2]  # the hinge axis in the world
                q[:, c] = _hinge_angles(R_world_fa, R_world_body[:, ib] @ R_b_frame)
                w_rel = w_world[:, ib] - (0.0 if ia is None else w_world[:, ia])
                qd[:, c] = np.einsum("ni,ni->n", axis, w_rel)
                if jacobians:
                    # R_i Exp(delta) turns body i by R_i delta (world): the angle by n . R_i delta.
                    for i, sign in ((ib, 1.0), (ia, -1.0)):
                        if i is None:
                            continue
                        dq_domega = sign * np.einsum("ni,nij->nj", axis, R_world_body[:, i])
                        Jq[:, c, 6 * i : 6 * i + 3] += dq_domega
                        Jv[:, c, 6 * nb + 6 * i + 3 : 6 * nb + 6 * i + 6] += dq_domega
            else:
                _, i, axis = ch
                q[:, c], qd[:, c] = r_world_body[:, i, axis], vel[:, i, axis]
                if jacobians:
                    Jq[:, c, 6 * i + 3 : 6 * i + 6] = R_world_body[:, i, axis]  # Pose3 retract moves t by R dv
                    Jv[:, c, 6 * nb + 6 * i + axis] = 1.0
        if jacobians:
            return q, qd, Jq, Jv
        return q, qd


def joint_coordinates(model: RigidModel, states: State) -> tuple[np.ndarray, np.ndarray]:
    """Observed coordinates and their rates (n, n_obs) [rad, m; rad/s, m/s] of states with a leading axis n.

    The estimator's own read-out (hinge angles wrapped to (-pi, pi]), for
    comparing a batch solution or a simulation with the stream's estimates.
    """
    n = len(states.r)
    # One vmapped call: a JAX call per state and body costs more than the read-out itself.
    R_world_body = np.asarray(jax.vmap(quat.to_matrix)(np.asarray(states.e).reshape(-1, 4))).reshape(n, -1, 3, 3)
    vel = np.concatenate([np.asarray(states.v), np.asarray(states.w)], axis=2).reshape(n, -1)
    return _Readout(model)(R_world_body, np.asarray(states.r), vel)


class _ISAM2Window:
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


#: iSAM2 relinearization thresholds per kind of variable (see :class:`StreamEstimator`).
DEFAULT_RELINEARIZE_THRESHOLD: dict[str, float] = {"pose": 0.05, "velocity": 10.0, "parameters": 0.05}


def read_calibration(path: str | os.PathLike[str] | Mapping[str, Any]) -> dict[str, Any]:
    """A calibration result (the JSON of ``mbfg calibrate --json``/``--out``) as a dict.

    Raises:
        ModelError: the file cannot be read, is not JSON, or has no ``parameters`` object.
    """
    import json

    if isinstance(path, Mapping):
        doc, where = dict(path), "calibration"
    else:
        where = os.fspath(path)
        try:
            with open(where, encoding="utf-8") as fh:
                doc = json.load(fh)
        except OSError as exc:
            raise ModelError(f"{where}: cannot read the calibration ({exc.strerror or exc})") from None
        except (ValueError, UnicodeDecodeError) as exc:
            raise ModelError(f"{where}: not a calibration JSON file ({exc})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("parameters"), dict):
        raise ModelError(
            f"{where}: expected the JSON object of 'mbfg calibrate --json' with a 'parameters' object "
            "({name: {\"value\", \"std\"}})"
        )
    for name, entry in doc["parameters"].items():
        value = entry.get("value") if isinstance(entry, dict) else entry
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
        ok = ok or (isinstance(value, list) and all(isinstance(v, (int, float)) for v in value))
        if not ok:
            raise ModelError(f"{where}: parameter {name!r} has no finite 'value' (got {value!r})")
    return doc


def _positive(name: str, value: Any) -> float:
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise ModelError(f"{name} must be a positive number, got {value!r}") from None
    if not (math.isfinite(x) and x > 0):
        raise ModelError(f"{name} must be a positive number, got {value!r}")
    return x


class StreamEstimator:
    """Fixed-lag smoother of a rigid-body model over a stream of encoder samples (module docstring).

    Args:
        model: the model, with the parameter values to use (e.g. from
            :meth:`from_calibration`).
        lag: smoother lag [s]; the smoothed estimate is that of the state ``lag`` back.
        h: model time-step [s], a whole multiple of ``period`` (default: ``period``).
        period: sample period of the stream [s] (default: ``h``; one of them is needed).
        ppr: encoder counts per revolution: the default observation noise of
            the hinge readings is the quantization's, step / sqrt(12), step = 2 pi / ppr.
        counts: hinge readings are raw encoder counts (converted with 2 pi /
            ppr; needs ``ppr``), not radians.
        counter_modulus: the counter wraps around after this many counts (e.g.
            65536 for a 16-bit counter; needs ``counts``); wraps are unwrapped.
            Readings in rad are unwrapped modulo 2 pi in any case.
        sigma_observation: observation noise [rad, m], a scalar or one per
            observation (default: quantization noise with ``ppr``, else
            ``calibration_sigma`` if given, else :data:`DEFAULT_SIGMA`).
        weight: a state error weight w: sigma_p = sigma_y / sqrt(w) (default 1e6).
        sigma_impulse: impulse noise sigma_p [N s] instead of sigma_y / sqrt(w).
        smoother: ``"incremental"`` (iSAM2) or ``"batch"`` (Levenberg-Marquardt
            over the whole window at every sample: accurate, much slower).
        refine: parameter names kept in the window as one Vector variable and
            refined online (never marginalized), each with a prior at its
            current value; bounds are not enforced online.
        refine_sigmas: prior standard deviation per refined parameter [its unit]
            (default: 10 % of its value).
        covariance: compute marginal standard deviations of both estimates on
            every sample (extra cost).
        jump: the largest believable difference between a reading and the
            filtered prediction [rad, m] (default: max(0.2, 50 sigma_y)).
        resync: believe a channel again after this many jumps in a row.
        relinearize_threshold, relinearize_skip: iSAM2's relinearization
            (variables whose update exceeds the threshold are relinearized, checked
            every ``relinearize_skip`` updates); a smaller threshold is closer to
            the batch solution and costs more JAX linearizations. A float holds
            for every variable; a mapping gives one per kind of variable:
            ``"pose"`` (Pose3 tangent [rad, m]), ``"velocity"`` [rad/s, m/s] and
            ``"parameters"`` (refined ones, their units); kinds left out keep the
            default. The default relinearizes on pose changes (0.05) but hardly
            on velocities (10): the velocity along a hinge's constrained axes of
            a body with small inertia (the Furuta pendulum's spin about its long
            axis) swings by rad/s from update to update without changing the
            estimate, and a velocity threshold of 0.2 made the Furuta stream
            relinearize ~20 factors per sample (the profile of
            ``benchmarks/stream.py --only timing --relinearize-threshold 0.2``). With a
            high ``weight`` (dynamics trusted) that mode is held, linearization
            errors dominate, and a small threshold pays: the Furuta test in
            ``tests/test_stream.py`` uses 0.01 for every kind with
            ``relinearize_skip=1`` at w = 1e10.
        wildfire_threshold: iSAM2's back-substitution stops where the solution
            changes by less than this [tangent units]; 0 (default) updates the
            whole window, so the smoothed state is the solution's, not a stale one.
        max_iterations: Levenberg-Marquardt iterations per update (batch smoother).
        update_every: update the smoother once every this many state-time
            samples, with all of them at once (their impulse and observation
            factors linearized in one vmapped JAX call per type): more samples
            per wall second (``benchmarks/stream.py``), the estimates
            ``update_every - 1`` samples later. The samples in between return
            the last estimates, flagged ``"pending"``; :meth:`flush` takes the
            waiting ones in at the end of a stream. The filtered estimate of a
            state is then the one of the update that took it in (readings up to
            ``update_every - 1`` states after it).
        calibration_sigma: the calibration's estimated observation noise (used
            by :meth:`from_calibration`).
        on_warning: called with a message on the first fault of each kind
            (default: ``warnings.warn(message, StreamWarning)``).

    Raises:
        ModelError: a bad setting (named).
    """

    def __init__(
        self,
        model: RigidModel,
        *,
        lag: float = 0.1,
        h: float | None = None,
        period: float | None = None,
        ppr: int | None = None,
        counts: bool = False,
        counter_modulus: int | None = None,
        sigma_observation: float | Sequence[float] | None = None,
        weight: float = 1e6,
        sigma_impulse: float | None = None,
        smoother: str = "incremental",
        refine: Sequence[str] = (),
        refine_sigmas: Mapping[str, float] | None = None,
        covariance: bool = False,
        jump: float | None = None,
        resync: int = 5,
        relinearize_threshold: float | Mapping[str, float] | None = None,
        relinearize_skip: int = 5,
        wildfire_threshold: float = 0.0,
        max_iterations: int = 5,
        update_every: int = 1,
        calibration_sigma: float | None = None,
        on_warning: Callable[[str], None] | None = None,
    ) -> None:
        self.model = model
        if h is None and period is None:
            raise ModelError("stream: give the model time-step h or the sample period [s]")
        period = _positive("stream sample period", period if period is not None else h)
        h = _positive("stream time-step h", h if h is not None else period)
        stride = int(round(h / period))
        if stride < 1 or abs(stride * period - h) > 1e-6 * h:
            raise ModelError(f"stream: time-step h = {h:g} s must be a whole multiple of the sample period {period:g} s")
        self.period, self.stride, self.h = period, stride, stride * period
        self.lag = _positive("stream lag", lag)
        if isinstance(update_every, bool) or not isinstance(update_every, (int, np.integer)) or update_every < 1:
            raise ModelError(f"stream: update_every must be a whole number >= 1, got {update_every!r}")
        self.update_every = int(update_every)
        self.m = max(int(round(self.lag / self.h)), 1)
        if smoother not in ("incremental", "gtsam-incremental", "batch"):
            raise ModelError(f"stream: smoother must be 'incremental', 'gtsam-incremental' or 'batch', got {smoother!r}")
        self.smoother_kind = smoother
        n_obs = len(model.observations)
        self.hinge = model.angle_observation_mask()
        if ppr is not None:
            if isinstance(ppr, bool) or not isinstance(ppr, (int, np.integer)) or ppr < 1:
                raise ModelError(f"stream: encoder counts per revolution must be a whole number >= 1, got {ppr!r}")
            if not self.hinge.any():
                raise ModelError(f"stream: ppr is set but {model.name} observes no hinge angle")
        if counts and ppr is None:
            raise ModelError("stream: raw encoder counts need ppr, the counts per revolution")
        if counter_modulus is not None:
            if not counts:
                raise ModelError("stream: counter_modulus needs raw encoder counts (counts=True and ppr)")
            if isinstance(counter_modulus, bool) or not isinstance(counter_modulus, (int, np.integer)) \
                    or counter_modulus < 2:
                raise ModelError(f"stream: counter_modulus must be a whole number >= 2, got {counter_modulus!r}")
        self.ppr, self.counts, self.counter_modulus = ppr, bool(counts), counter_modulus
        self.step_rad = 2.0 * math.pi / ppr if ppr else None
        if sigma_observation is None:
            if ppr is not None:
                base = calibration_sigma if calibration_sigma else DEFAULT_SIGMA
                sig = np.where(self.hinge, self.step_rad / math.sqrt(12.0), base)
            else:
                sig = np.full(n_obs, calibration_sigma if calibration_sigma else DEFAULT_SIGMA)
        else:
            sig = np.broadcast_to(np.asarray(sigma_observation, dtype=float), (n_obs,)).copy()
        if not np.all(np.isfinite(sig)) or np.any(sig <= 0):
            raise ModelError(f"stream: observation noise must be positive, got {sigma_observation!r}")
        self.sigma_observation = sig
        self.weight = _positive("stream state error weight", weight)
        # One scale for the impulse sigma: the channels' RMS sigma (they are equal for like encoders).
        sigma_y = float(np.sqrt(np.mean(sig**2)))
        self.sigma_impulse = (_positive("stream impulse noise", sigma_impulse) if sigma_impulse is not None
                              else sigma_y / math.sqrt(self.weight))
        self.jump = _positive("stream jump threshold", jump) if jump is not None else max(0.2, 50.0 * sigma_y)
        if isinstance(resync, bool) or not isinstance(resync, (int, np.integer)) or resync < 1:
            raise ModelError(f"stream: resync must be a whole number >= 1, got {resync!r}")
        self.resync = int(resync)
        self.covariance = bool(covariance)
        self.on_warning = on_warning

        refine = tuple(refine)
        for name in refine:
            if name not in model.parameters:
                raise ModelError(f"stream: {model.name} has no parameter {name!r} to refine; "
                                 f"its parameters: {', '.join(model.parameters)}")
            if name == model.tilt:
                raise ModelError(f"stream: the tilt {name!r} cannot be refined online (only scalar parameters)")
        self.variables = variables_for(model, refine)
        self.fixed = fixed_values(model)
        self.parameters = model.parameters.numpy_values()
        self._refine_prior = None
        if refine:
            p0 = np.array([float(self.parameters[n]) for n in refine])
            sigmas = []
            for name, value in zip(refine, p0):
                s = (refine_sigmas or {}).get(name)
                s = 0.1 * abs(value) if s is None or not (math.isfinite(s) and s > 0) else float(s)
                if not s > 0:
                    raise ModelError(f"stream: parameter {name!r} is 0; give its prior sigma in refine_sigmas")
                sigmas.append(s)
            self._refine_prior = (p0, np.array(sigmas))

        self._obs_noise = noise_model(self.sigma_observation, n_obs)
        self._imp_noise = noise_model(self.sigma_impulse, 12 * model.nb)
        self._readout = _Readout(model)
        if smoother in ("incremental", "gtsam-incremental"):
            params = gtsam.ISAM2Params()
            params.setRelinearizeThreshold(self._threshold_map(relinearize_threshold, len(refine)))
            params.relinearizeSkip = int(relinearize_skip)
            # QR: the impulse rows (sigma_p ~ 1e-3 sigma_y) make the normal equations too stiff for Cholesky.
            params.setFactorization("QR")
            # Back-substitute the whole window on every update: with iSAM2's default "wildfire" threshold
            # (1e-3) changes below it stop propagating, and the oldest (smoothed) state lags the solution.
            params.setOptimizationParams(gtsam.ISAM2GaussNewtonParams(float(wildfire_threshold)))
            # Reuse the slots of marginalized factors, or the factor arrays grow with the stream.
            params.findUnusedFactorSlots = True
            if smoother == "incremental":
                self._make_smoother = lambda: _ISAM2Window(self._window_lag(), params, [keys.P()])
            else:
                self._make_smoother = lambda: gtsam.IncrementalFixedLagSmoother(self._window_lag(), params)
        else:
            lm = gtsam.LevenbergMarquardtParams()
            lm.setMaxIterations(int(max_iterations))
            self._make_smoother = lambda: gtsam.BatchFixedLagSmoother(self._window_lag(), lm)
        self.status = StreamStatus()
        self._warned: set[str] = set()
        self._smoother: Any = None
        self._t0: float | None = None  # time of grid slot 0
        self._last_j = -1  # last accepted grid slot
        self._k = -1  # newest state index in the graph
        self._k_start = 0  # state index of the current smoother's first state
        self._u = np.zeros(len(model.controls))  # the last control received
        self._u_graph = self._u  # the control at the newest state in the smoother
        self._pending: list[tuple[int, np.ndarray, np.ndarray]] = []  # (k, readings, controls) awaiting an update
        self._rollout: Callable[..., Any] | None = None  # compiled Spook steps (update_every > 1)
        self._raw_prev: np.ndarray | None = None  # last finite raw reading per channel (counts or rad)
        self._unwrapped = np.full(n_obs, np.nan)  # last unwrapped reading [rad, m]
        self._refs: dict[int, np.ndarray] = {}  # per state: the readings' turn reference for unwrapping
        self._jumps_in_row = np.zeros(n_obs, dtype=int)
        self._filtered: Estimate | None = None
        self._smoothed: Estimate | None = None
        self._restart_velocity: np.ndarray | None = None
        self._refined: dict[str, float] | None = None

    # ------------------------------------------------------------------ construction helpers
    def _threshold_map(self, threshold: float | Mapping[str, float] | None, n_refined: int) -> gtsam.ISAM2ThresholdMap:
        """iSAM2's per-symbol relinearization thresholds (one entry per key letter the window uses)."""
        per_kind = dict(DEFAULT_RELINEARIZE_THRESHOLD)
        if isinstance(threshold, Mapping):
            unknown = set(threshold) - set(per_kind)
            if unknown:
                raise ModelError(f"stream: relinearize_threshold has unknown kind(s) {sorted(unknown)}; "
                                 f"expected some of {sorted(per_kind)}")
            per_kind.update(threshold)
        elif threshold is not None:
            per_kind = dict.fromkeys(per_kind, threshold)
        for kind, value in per_kind.items():
            _positive(f"stream relinearize_threshold[{kind!r}]", value)
        dims = {"x": ("pose", 6), "v": ("velocity", 6 * self.model.nb), "p": ("parameters", max(n_refined, 1))}
        out = gtsam.ISAM2ThresholdMap()
        for letter, (kind, dim) in dims.items():
            out.insert((letter, np.full(dim, float(per_kind[kind]))))
        return out

    @classmethod
    def from_calibration(cls, model: RigidModel, calibration: str | os.PathLike[str] | Mapping[str, Any],
                         **kwargs: Any) -> StreamEstimator:
        """An estimator with the parameters, h and noise estimates of a calibration (``mbfg calibrate --json``).

        The impulse noise sigma_p is the calibration's estimate
        (``sigma_impulse``, seed 001 eq. 3.23), the observation noise its
        ``sigma_observation`` where no ``ppr`` gives the quantization noise.
        ``kwargs`` override (``h``, ``sigma_impulse``, ...); a ``weight`` w
        replaces the estimated sigma_p by sigma_y / sqrt(w). Parameters named in
        ``refine`` get the calibration's standard deviations as prior sigmas.
        A calibration without a usable ``sigma_impulse`` falls back on its
        ``weight``.
        """
        from mbfg.parameters import load_parameter_file

        doc = read_calibration(calibration)
        if isinstance(calibration, Mapping):
            changes = {k: (v["value"] if isinstance(v, Mapping) else v) for k, v in doc["parameters"].items()}
            where = "calibration"
        else:
            changes = load_parameter_file(calibration)
            where = os.fspath(calibration)
        if "tilt" in changes and isinstance(changes["tilt"], list) and len(changes["tilt"]) == 3:
            from scipy.spatial.transform import Rotation

            # The JSON holds the tilt as a rotation vector [rad].
            changes["tilt"] = Rotation.from_rotvec(np.asarray(changes["tilt"], dtype=float)).as_matrix()
        try:
            fitted = model.with_parameters(changes)
        except ModelError as exc:
            raise ModelError(f"{where}: {exc}") from None
        settings: dict[str, Any] = {}
        for key in ("h", "weight"):
            if _usable(doc.get(key)):
                settings[key] = float(doc[key])
        sigma = doc.get("sigma_observation")
        if _usable(sigma):
            settings["calibration_sigma"] = float(sigma)
        sigma_p = doc.get("sigma_impulse")
        if _usable(sigma_p) and kwargs.get("weight") is None and kwargs.get("sigma_impulse") is None:
            settings["sigma_impulse"] = float(sigma_p)
        stds = {}
        for name, entry in doc["parameters"].items():
            if isinstance(entry, Mapping) and isinstance(entry.get("std"), (int, float)):
                stds[name] = float(entry["std"])
        if kwargs.get("refine"):
            settings["refine_sigmas"] = {n: stds.get(n) for n in kwargs["refine"]}
        settings.update({k: v for k, v in kwargs.items() if v is not None})
        return cls(fitted, **settings)

    def _window_lag(self) -> float:
        # Keys stamped before t_new - lag are marginalized: m + update_every states stay, so that the smoothed
        # state of every sample of an update is still there (the half step absorbs rounding).
        return (self.m + self.update_every - 0.5) * self.h

    def _warn(self, kind: str, message: str) -> None:
        if kind in self._warned:
            return
        self._warned.add(kind)
        text = f"{message} (further ones are counted in the status, not reported)"
        if self.on_warning is not None:
            self.on_warning(text)
        else:
            warnings.warn(text, StreamWarning, stacklevel=3)

    # ------------------------------------------------------------------ the stream
    @property
    def initialized(self) -> bool:
        """True once a complete sample has started the smoother."""
        return self._smoother is not None

    def push(self, t: float, readings: Sequence[float | None], controls: Sequence[float] | None = None) -> StreamStep:
        """Feed one sample: time [s], one reading per observation (raw counts with ``ppr``, else rad / m;
        None for a reading the sensor did not deliver, NaN/inf for a broken one: a fault), and the
        controls of this instant (held until the next state time; None: the last ones).

        Never raises on a bad sample: it is handled, counted and flagged (module docstring).
        """
        st = self.status
        st.samples += 1
        flags: list[str] = []
        try:
            t = float(t)
            missing = np.array([v is None for v in readings], dtype=bool)
            y = np.array([math.nan if v is None else v for v in readings], dtype=float).reshape(-1)
            u = self._u if controls is None else np.asarray(controls, dtype=float).reshape(-1)
        except (TypeError, ValueError):
            return self._drop("malformed", "a sample that is not numbers", flags, math.nan)
        if y.shape != (len(self.model.observations),) or u.shape != (len(self.model.controls),):
            return self._drop("malformed", f"a sample with {y.size} readings and {u.size} controls (expected "
                              f"{len(self.model.observations)} and {len(self.model.controls)})", flags, t)
        if not math.isfinite(t):
            st.nonfinite += 1
            return self._drop(None, None, flags + ["nonfinite"], t, warn=("nonfinite", "a non-finite time"))
        bad = ~np.isfinite(y) & ~missing
        if not np.all(np.isfinite(u)):
            u = self._u
            bad_u = True
        else:
            bad_u = False
        if bad.any() or bad_u:
            st.nonfinite += 1
            flags.append("nonfinite")
            what = ", ".join(n for n, b in zip(self.model.observations, bad) if b) or "control"
            self._warn("nonfinite", f"stream: a non-finite reading ({what}) at t = {t:g} s was dropped")
        y = np.where(bad, np.nan, y)

        if self._t0 is None:
            if np.isnan(y).any():  # the first state needs every reading
                st.waiting += 1
                return StreamStep(t, tuple(flags + ["waiting"]), None, None)
            self._t0 = t
        j_float = (t - self._t0) / self.period
        j = int(round(j_float))
        if j <= self._last_j:
            kind, counter = ("duplicate", "duplicates") if j == self._last_j else ("out_of_order", "out_of_order")
            setattr(st, counter, getattr(st, counter) + 1)
            return self._drop(None, None, flags + [kind], t,
                              warn=(kind, f"stream: a {kind.replace('_', '-')} sample (t = {t:g} s) was dropped"))
        if abs(j_float - j) > 0.25:
            st.off_grid += 1
            flags.append("off_grid")
            self._warn("off_grid", f"stream: sample t = {t:g} s is {abs(j_float - j) * self.period:.3g} s off the "
                       f"{self.period:g} s grid; placed on the nearest slot")
        if self._last_j >= 0 and j > self._last_j + 1:
            st.gaps += 1
            st.missing_samples += j - self._last_j - 1
            flags.append("gap")
        self._last_j = j
        y = self._unwrap(y)
        held_u = u  # (the last control when this one is not finite)
        if j % self.stride:
            st.between += 1
            return StreamStep(t, tuple(flags + ["between"]), self._filtered, self._smoothed, self._refined)
        k = j // self.stride
        try:
            if self._smoother is None:
                if np.isnan(y).any():
                    st.waiting += 1
                    return StreamStep(t, tuple(flags + ["waiting"]), self._filtered, self._smoothed, self._refined)
                self._start(k, y, held_u)
                added, smoothed_added = self._read([k])
            else:
                y = self._gate(y, k, flags)
                if "resync" in flags and not np.isnan(y).any():
                    # The readings moved for good: start afresh from them, the velocity carried over.
                    self._update()
                    self._restart_velocity = self._filtered.velocity.copy()
                    self._k = k
                    self._start(k, y, held_u)
                    added, smoothed_added = self._read([k])
                else:
                    self._pending.append((k, y, np.asarray(held_u, dtype=float).copy()))
                    if len(self._pending) < self.update_every:
                        self._u = np.asarray(held_u, dtype=float).copy()
                        return StreamStep(t, tuple(flags + ["pending"]), self._filtered, self._smoothed,
                                          self._refined)
                    added, smoothed_added = self._update()
            self._u = np.asarray(held_u, dtype=float).copy()
        except Exception as exc:  # noqa: BLE001 - a stream must go on; the failure is counted and reported
            return self._solver_failed(t, exc, flags)
        return StreamStep(t, tuple(flags), self._filtered, self._smoothed, self._refined, updated=True,
                          added=added, smoothed_added=smoothed_added)

    def _solver_failed(self, t: float, exc: Exception, flags: list[str]) -> StreamStep:
        """Count and report a failed update; the smoother restarts at the next complete sample, its velocity
        prior centred on the last estimate."""
        self.status.solver_failures += 1
        self._warn("solver", f"stream: the smoother failed at t = {t:g} s ({type(exc).__name__}: {exc}); "
                   "restarting at the next complete sample")
        if self._filtered is not None:
            self._restart_velocity = self._filtered.velocity.copy()
        self._smoother = None
        self._pending = []
        return StreamStep(t, tuple(flags + ["solver_failure"]), self._filtered, self._smoothed, self._refined)

    def flush(self) -> StreamStep | None:
        """Update the smoother with the state-time samples waiting for the next update (``update_every`` > 1;
        at the end of a stream). Returns their step (None when none wait). Never raises, as :meth:`push`."""
        if not self._pending or self._smoother is None:
            return None
        t = self._t0 + self._pending[-1][0] * self.h
        try:
            added, smoothed_added = self._update()
        except Exception as exc:  # noqa: BLE001 - as in push
            return self._solver_failed(t, exc, [])
        return StreamStep(t, (), self._filtered, self._smoothed, self._refined, updated=True, added=added,
                          smoothed_added=smoothed_added)

    def report_malformed(self, t: float, what: str = "a malformed sample") -> StreamStep:
        """Count a sample that could not be read (e.g. a CSV line with the wrong number of cells) as a fault."""
        self.status.samples += 1
        return self._drop("malformed", what, [], t)

    def _drop(self, kind: str | None, message: str | None, flags: list[str], t: float,
              warn: tuple[str, str] | None = None) -> StreamStep:
        if kind is not None:
            setattr(self.status, kind, getattr(self.status, kind) + 1)
            flags = flags + [kind]
            self._warn(kind, f"stream: {message} was dropped")
        if warn is not None:
            self._warn(*warn)
        return StreamStep(t, tuple(flags), self._filtered, self._smoothed, self._refined)

    def _unwrap(self, y: np.ndarray) -> np.ndarray:
        """Raw readings -> unwrapped [rad, m]: counter wrap-around, counts to radians, angles modulo 2 pi."""
        out = y.copy()
        if self._raw_prev is None:
            self._raw_prev = np.full_like(y, np.nan)
        for c in range(len(y)):
            raw = y[c]
            if np.isnan(raw):
                continue
            prev_raw, prev = self._raw_prev[c], self._unwrapped[c]
            if self.counts and self.hinge[c]:
                if np.isnan(prev_raw):
                    counts = raw
                else:
                    d = raw - prev_raw
                    if self.counter_modulus is not None:
                        M = self.counter_modulus
                        d = (d + M / 2) % M - M / 2  # the shortest way round the counter
                    counts = prev / self.step_rad + d
                value = counts * self.step_rad
            elif self.hinge[c] and not np.isnan(prev):
                value = prev + float(_wrap(raw - prev_raw))  # a reading wrapped to one turn is unwrapped
            else:
                value = raw
            self._raw_prev[c] = raw
            self._unwrapped[c] = value
            out[c] = value
        return out

    def _gate(self, y: np.ndarray, k: int, flags: list[str]) -> np.ndarray:
        """Readings too far from the filtered prediction are left out (``jump``); ``resync`` in a row are believed."""
        f = self._filtered
        if f is None:
            return y
        dt = (k - f.k) * self.h
        pred = f.coordinates + f.rates * dt
        innovation = y - pred
        innovation = np.where(self.hinge, _wrap(innovation), innovation)
        out = y.copy()
        for c in np.flatnonzero(np.isfinite(y)):
            if abs(innovation[c]) > self.jump:
                self._jumps_in_row[c] += 1
                if self._jumps_in_row[c] >= self.resync:
                    self.status.resyncs += 1
                    flags.append("resync")
                    self._jumps_in_row[c] = 0
                    continue
                self.status.jumps += 1
                if "jump" not in flags:
                    flags.append("jump")
                self._warn("jump", f"stream: reading {self.model.observations[c]!r} at t = {self._t0 + k * self.h:g} s "
                           f"is {abs(innovation[c]):.3g} from the prediction (more than {self.jump:.3g}); left out")
                out[c] = np.nan
            else:
                self._jumps_in_row[c] = 0
        return out

    # ------------------------------------------------------------------ graph growth
    def _state_keys(self, k: int) -> list[int]:
        return [keys.X(k, i) for i in range(self.model.nb)] + [keys.V(k)]

    def _insert_state(self, values: gtsam.Values, k: int, poses: Sequence[gtsam.Pose3], vel: np.ndarray) -> None:
        for i, pose in enumerate(poses):
            values.insert(keys.X(k, i), pose)
        values.insert(keys.V(k), np.asarray(vel, dtype=float))

    def _start(self, k: int, y: np.ndarray, u: np.ndarray) -> None:
        """A new smoother whose first state is x_k at the readings y (initial-state factor, observation, prior)."""
        (x0,) = initial_states(self.model, y[None], self.h, self.parameters)
        vals = state_values(self.model, x0)
        vel = self._restart_velocity if self._restart_velocity is not None else vals[-1]
        graph, values = gtsam.NonlinearFactorGraph(), gtsam.Values()
        self._insert_state(values, k, [gtsam.Pose3(T) for T in vals[:-1]], vel)
        pkeys = keys.parameter_keys(self.variables)
        graph.push_back(initial_state_type(self.variables).make(self._state_keys(k) + pkeys, self._imp_noise,
                                                                self.fixed, float(self.h)))
        graph.push_back(observation_factor(self.variables, k, y, self._obs_noise, self.fixed))
        graph.push_back(gtsam.PriorFactorVector(keys.V(k), np.asarray(vel, dtype=float),
                                                gtsam.noiseModel.Isotropic.Sigma(len(vel), VELOCITY_PRIOR_SIGMA)))
        stamps = {key: k * self.h for key in self._state_keys(k)}
        if self._refine_prior is not None:
            p0, sig = self._refine_prior
            if self._refined is not None:  # a restart keeps what was learned
                p0 = np.array([self._refined[n] for n in self.variables.free])
            values.insert(keys.P(), p0)
            graph.push_back(gtsam.PriorFactorVector(keys.P(), p0, gtsam.noiseModel.Diagonal.Sigmas(sig)))
            stamps[keys.P()] = k * self.h
        self._smoother = self._make_smoother()
        self._k_start, self._k = k, k
        self._u_graph = np.asarray(u, dtype=float).copy()
        self._pending = []
        self._refs = {k: y.copy()}
        self._restart_velocity = None
        self._smoother.update(graph, values, stamps)
        self.status.states += 1
        self.status.updates += 1

    def _predict(self, k_from: int, controls: Sequence[np.ndarray]) -> list[tuple[list[gtsam.Pose3], np.ndarray]]:
        """Predictions of x_{k_from+1} .. x_{k_from+n} from the estimate of x_{k_from}, ``controls`` (n, n_u)
        the u of each step: (poses, velocity) per step.

        One state per update: constant velocity, positions by the Spook update q_{k+1} = q_k + h v (2.16).
        Several (``update_every`` > 1): Spook steps of the model (:func:`mbfg.spook.step`, one compiled
        scan of ``update_every`` steps per call). The new states' factors are linearized at these values
        and relinearized only past the pose threshold; extrapolated over several steps at constant
        velocity (error about a (n h)^2 / 2) or at the last step's acceleration (the Furuta pendulum's
        velocity along its constrained axes swings by rad/s between updates) they lose accuracy
        (tests/test_stream.py compares update_every 5 with 1).
        """
        est = self._smoother
        nb = self.model.nb
        vel = np.asarray(est.calculateEstimateVector(keys.V(k_from)))
        poses = [est.calculateEstimatePose3(keys.X(k_from, i)) for i in range(nb)]
        if self.update_every == 1:
            out = []
            for n in range(1, len(controls) + 1):
                moved = []
                for i, pose in enumerate(poses):
                    v, w = vel[6 * i : 6 * i + 3], vel[6 * i + 3 : 6 * i + 6]
                    R = pose.rotation().compose(gtsam.Rot3.Expmap(w * n * self.h))  # omega is in the body frame
                    moved.append(gtsam.Pose3(R, pose.translation() + v * n * self.h))
                out.append((moved, vel))
            return out
        from mbfg.spook import _compiled_scan

        V = vel.reshape(nb, 6)
        x = State(np.stack([p.translation() for p in poses]),
                  np.stack([quat.from_matrix(p.rotation().matrix()) for p in poses]), V[:, :3], V[:, 3:])
        N = self.update_every
        u = np.asarray(controls, dtype=float).reshape(len(controls), -1)
        chunks = -(-len(u) // N)
        padded = np.concatenate([u, np.repeat(u[-1:], chunks * N - len(u), axis=0)])
        h = np.asarray(self.h, dtype=float)
        if self._rollout is None:
            self._rollout = _compiled_scan(self.model, x, padded[:N], self.fixed, h)[0]
        out = []
        for c in range(chunks):
            x, (xs, _, _) = self._rollout(x, padded[c * N : (c + 1) * N], self.fixed, h)
            r, e, v, w = (np.asarray(a) for a in xs)
            for n in range(N):
                moved = [gtsam.Pose3(gtsam.Rot3.Quaternion(*e[n, i]), r[n, i]) for i in range(nb)]
                out.append((moved, np.concatenate([v[n], w[n]], axis=1).reshape(-1)))
        return out[: len(u)]

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

        With ``update_every`` new states (no gap) the impulse and observation factors are linearized
        together, one vmapped JAX call per type (:meth:`FactorType.make_many`); otherwise one by one.
        """
        graph, values = gtsam.NonlinearFactorGraph(), gtsam.Values()
        stamps: dict[int, float] = {}
        k_last, k_end = self._k, pending[-1][0]
        samples = {k: (y, u) for k, y, u in pending}
        impulse_keys_, controls = [], []
        u = self._u_graph
        ref = self._refs[k_last]
        for kk in range(k_last + 1, k_end + 1):
            impulse_keys_.append(impulse_keys(self.variables, kk - 1))
            controls.append(u)  # u_{kk-1}
            for key in self._state_keys(kk):
                stamps[key] = kk * self.h
            if kk in samples:
                y, u = samples[kk]
                ref = np.where(np.isfinite(y), y, ref)
            self._refs[kk] = ref
        for kk, (poses, vel) in zip(range(k_last + 1, k_end + 1), self._predict(k_last, controls)):
            self._insert_state(values, kk, poses, vel)
        observed = [(k, y) for k, y, _ in pending if np.isfinite(y).any()]
        if len(impulse_keys_) == self.update_every > 1:
            itype = impulse_type(self.variables)
            for f in itype.make_many(impulse_keys_, self._imp_noise, self.fixed, PerFactor(np.stack(controls)),
                                     float(self.h), regroup=False, per_variable=True):
                graph.push_back(f)
        else:
            for kk, u_k in zip(range(k_last + 1, k_end + 1), controls):
                graph.push_back(impulse_factor(self.variables, kk - 1, u_k, self.h, self._imp_noise, self.fixed))
        if len(observed) == self.update_every > 1:
            ys = np.stack([y for _, y in observed])
            for f in observation_type(self.variables).make_many(
                    [observation_keys(self.variables, k) for k, _ in observed], self._obs_noise, self.fixed,
                    PerFactor(np.nan_to_num(ys)), PerFactor(np.isfinite(ys).astype(float)), regroup=False,
                    per_variable=True):
                graph.push_back(f)
        else:
            for k, y in observed:
                graph.push_back(observation_factor(self.variables, k, y, self._obs_noise, self.fixed))
        if self._refine_prior is not None:
            stamps[keys.P()] = k_end * self.h  # the parameters stay in the window
        self._smoother.update(graph, values, stamps)
        self._k, self._u_graph = k_end, u
        oldest = self._oldest_in_window()
        for kk in [kk for kk in self._refs if kk < oldest - 1]:
            del self._refs[kk]
        self.status.states += k_end - k_last
        self.status.updates += 1

    # ------------------------------------------------------------------ read-out
    def _estimates(self, ks: Sequence[int], covariance: bool) -> tuple[Estimate, ...]:
        """Estimates of the states ``ks``, read out together."""
        if not ks:
            return ()
        est = self._smoother
        nb = self.model.nb
        T_world_body = np.array([[est.calculateEstimatePose3(keys.X(k, i)).matrix() for i in range(nb)] for k in ks])
        vel = np.array([est.calculateEstimateVector(keys.V(k)) for k in ks])
        R_world_body, r_world_body = T_world_body[:, :, :3, :3], T_world_body[:, :, :3, 3]
        out = self._readout(R_world_body, r_world_body, vel, jacobians=covariance)
        q, qd = out[0], out[1]
        refs = np.array([self._refs.get(k, np.full(q.shape[1], np.nan)) for k in ks])
        # Angles next to the encoder's turn count (states without a reference keep (-pi, pi]).
        q = np.where(self.hinge & np.isfinite(refs), refs + _wrap(q - refs), q)
        estimates = []
        for j, k in enumerate(ks):
            q_std = qd_std = None
            if covariance:
                C = self._joint_covariance(self._state_keys(k))
                Jq, Jv = out[2][j], out[3][j]
                q_std = np.sqrt(np.clip(np.einsum("ij,jk,ik->i", Jq, C, Jq), 0, None))
                qd_std = np.sqrt(np.clip(np.einsum("ij,jk,ik->i", Jv, C, Jv), 0, None))
            estimates.append(Estimate(self._t0 + k * self.h, k, q[j], qd[j], q_std, qd_std,
                                      R_world_body[j], r_world_body[j], vel[j]))
        return tuple(estimates)

    def _joint_covariance(self, key_list: list[int]) -> np.ndarray:
        """Joint marginal covariance of ``key_list`` in GTSAM tangent coordinates, blocks in that order."""
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

    # ------------------------------------------------------------------ whole logs, end of stream
    def window(self, covariance: bool | None = None) -> list[Estimate]:
        """Estimates of the last m + 1 states in the window, oldest first (at the end of a stream: its final
        smoothing; samples still waiting for an update are not in it, see :meth:`flush`)."""
        if self._smoother is None:
            return []
        cov = self.covariance if covariance is None else covariance
        first = max(self._k - self.m, self._k_start)
        return list(self._estimates(range(first, self._k + 1), cov))

    def replay(self, log: Log, *, quiet: bool = True) -> StreamReplay:
        """Push every row of ``log`` (readings in rad / m; converted to counts for an estimator that reads
        raw counts), and collect the filtered and smoothed estimate of every state.

        Raises:
            DataError: the log's columns are not the model's observations and controls.
        """
        if tuple(log.observations) != tuple(self.model.observations) or tuple(log.controls) != tuple(self.model.controls):
            raise DataError(
                f"{log.source}: columns {list(log.observations) + list(log.controls)} do not match the model "
                f"{self.model.name!r} ({list(self.model.observations) + list(self.model.controls)})"
            )
        y = log.y
        if self.counts:
            y = np.where(self.hinge, y / self.step_rad, y)  # the encoder's counts
        filtered: dict[int, Estimate] = {}
        smoothed: dict[int, Estimate] = {}
        step_s = np.zeros(len(log.t))
        progress = Progress(f"stream {self.model.name}", len(log.t), quiet=quiet)
        for i in range(len(log.t)):
            start = time.perf_counter()
            row = [None if math.isnan(v) else float(v) for v in y[i]]  # an empty cell: a missing reading
            out = self.push(log.t[i], row, log.u[i] if log.u.shape[1] else None)
            step_s[i] = time.perf_counter() - start
            for est in out.added:
                filtered[est.k] = est
            for est in out.smoothed_added:
                smoothed[est.k] = est
            progress.update(i + 1, stream_s=log.t[i] - log.t[0])
        last = self.flush()
        if last is not None:
            filtered.update((est.k, est) for est in last.added)
        for est in self.window(covariance=False):
            smoothed[est.k] = est
        ks = sorted(filtered)
        if not ks:
            raise DataError(f"{log.source}: no complete sample to start the stream from")

        def pick(src: dict[int, Estimate], attr: str) -> np.ndarray:
            return np.stack([getattr(src[k], attr) if k in src else np.full(len(self.model.observations), np.nan)
                             for k in ks])

        def states(src: dict[int, Estimate]) -> State:
            nb = self.model.nb
            nan = State(np.full((nb, 3), np.nan), np.full((nb, 4), np.nan), np.full((nb, 3), np.nan),
                        np.full((nb, 3), np.nan))
            rows = [src[k].state if k in src else nan for k in ks]
            return State(*(np.stack([np.asarray(s[f]) for s in rows]) for f in range(4)))

        return StreamReplay(
            np.array([filtered[k].t for k in ks]),
            pick(filtered, "coordinates"), pick(filtered, "rates"), pick(smoothed, "coordinates"),
            pick(smoothed, "rates"), states(filtered), states(smoothed), step_s, self.status, self._refined,
        )


__all__ = [
    "DEFAULT_SIGMA",
    "Estimate",
    "StreamEstimator",
    "StreamReplay",
    "StreamStatus",
    "StreamStep",
    "StreamWarning",
    "read_calibration",
]
