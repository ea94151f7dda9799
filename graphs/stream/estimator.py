"""The fixed-lag stream estimator (:class:`StreamEstimator`); see the package docstring.
"""

from __future__ import annotations

import math
import os
import time
import warnings
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from mbfg._jax import jnp
from mbfg.adapter import noise_model
from mbfg.errors import DeclarationError, ModelError
from mbfg.factors._rigid import fixed_values, variables_for
from mbfg.graphs.stream.config import (
    StreamConfig,
    calibration_warnings,
    decimal_places,
    read_calibration,
    usable_value,
)
from mbfg.graphs.stream.faults import FaultGate
from mbfg.graphs.stream.growth import GraphGrowth
from mbfg.graphs.stream.readout import Readout
from mbfg.graphs.stream.replay import Replay
from mbfg.graphs.stream.results import DEFAULT_SIGMA, Estimate, StreamStatus, StreamStep, StreamWarning
from mbfg.graphs.stream.sensors import StreamFactors, read_sensors, sensor_kinds
from mbfg.graphs.stream.smoothers import relinearize_thresholds, smoother_factory
from mbfg.graphs.stream.window_readout import WindowReadout
from mbfg.rigid import RigidModel, State


class StreamEstimator(FaultGate, GraphGrowth, Replay, WindowReadout):
    """Fixed-lag smoother of a rigid-body model over a stream of encoder samples (module docstring).

    Args:
        model: the model, with the parameter values to use (e.g. from
            :meth:`from_calibration`).
        config: the settings below as one checked, frozen
            :class:`~mbfg.graphs.stream.config.StreamConfig`; settings given as
            keywords override its fields. Either way they are checked on
            construction.
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
        weight: a state error weight w: sigma_p = sigma_y / sqrt(w) (default: the model's,
            :attr:`~mbfg.rigid.RigidModel.weight`, as calibration takes it: 1e6, and 1e3 for
            ``dfki-double-pendulum``, whose real rig's unmodelled torques a larger w would hold the
            states to: at 1e6 its stream of the first second of ``trajectory_00.csv`` ran 0.05 and 0.08
            rad RMS off the encoders, at 1e3 7e-3 and 6e-3 rad: ``python benchmarks/stream_rigs.py --rig dfki
            --seconds 1 --strides 1 --every 1`` with and without ``--weight 1e6``).
        sigma_impulse: impulse noise sigma_p [N s] instead of sigma_y / sqrt(w).
        smoother: ``"chain"`` (our square-root information smoother over the
            chain of states, :mod:`mbfg.graphs.stream.chain`: an update's
            prediction, linearization and elimination in one compiled program,
            no GTSAM callbacks; the same estimates and standard deviations as
            iSAM2 to round-off, faster: ``python benchmarks/stream.py --only
            timing`` runs both), ``"incremental"`` (iSAM2),
            ``"gtsam-incremental"`` (GTSAM's IncrementalFixedLagSmoother) or
            ``"batch"`` (Levenberg-Marquardt over the whole window at every
            sample: accurate, much slower). Default: "chain", or "incremental"
            with ``refine`` (iSAM2 refines parameters online, the chain does not).
        refine: parameter names kept in the window as one Vector variable and
            refined online (never marginalized), each with a prior at its
            current value; bounds are not enforced online.
        refine_sigmas: prior standard deviation per refined parameter [its unit]
            (default: 10 % of its value).
        covariance: compute marginal standard deviations of both estimates on
            every sample (extra cost).
        jump: the largest believable difference between a reading and the
            filtered prediction [rad, m] (default: max(0.2, 50 sigma_y)).
        resync: believe a channel again after this many jumps in a row; restart
            the window on a new clock after this many samples in a row on it.
        max_gap: the longest gap [s] bridged by the model's dynamics (Spook
            steps, one state per time-step); a sample further than this from
            the last one, forward or back, is a leap: dropped and counted
            (``leaps``), unless ``resync`` samples in a row go on from it, when
            the window restarts there (``restarts``, flag ``restart``). Bounds the
            states one sample can add, whatever its time says.
        relinearize_threshold, relinearize_skip: relinearization (variables
            whose update exceeds the threshold are relinearized; iSAM2 checks every
            window variable every ``relinearize_skip`` updates, the chain the new
            states of each update and the frontier they extend); a smaller threshold is closer to
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
            ``relinearize_skip=1`` at w = 1e10. Joints stiffer than
            :data:`mbfg.trees.SOFT` (the built-in models' rigid ones, 1e5 times
            stiffer) divide the default pose and velocity thresholds by that
            stiffness ratio: the joints' rows weigh 1/eps, and their linearization
            error over an update (a product of the state's pose and velocity
            corrections) with them; at the rigid joints the default thresholds left
            the pendulum's stream 0.02 rad off the truth, the divided ones 5e-5 rad
            (0.014 counts at 2048 per revolution), in 3.2 passes per update.
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
        factors: the user's own factors on the stream's states, each a
            :class:`~mbfg.graphs.stream.sensors.StreamFactors` (a factor type over one state or two
            consecutive ones, declared once; its readings given per sample with ``push(...,
            sensors={name: value})``). The chain smoother's regular updates take any number of them in
            their one compiled program (:attr:`paths` counts the updates per path).

    Raises:
        ModelError: a bad setting (named), a bad factor declaration (named).
    """

    def __init__(
        self,
        model: RigidModel,
        config: StreamConfig | None = None,
        *,
        on_warning: Callable[[str], None] | None = None,
        factors: Sequence[StreamFactors] = (),
        **settings: Any,
    ) -> None:
        if not isinstance(model, RigidModel):
            raise ModelError(f"model: expected a RigidModel (e.g. mbfg.load_model('pendulum')), got "
                             f"{type(model).__name__}")
        self.model = model
        try:
            config = replace(config, **settings) if config is not None else StreamConfig(**settings)
        except TypeError as exc:  # a setting StreamConfig does not have
            raise DeclarationError(f"StreamEstimator: {exc}") from None
        self.config = config
        # StreamConfig checked both: at least one is given, h a whole multiple of the period.
        self.period = float(config.period if config.period is not None else config.h)  # type: ignore[arg-type]
        h = config.h if config.h is not None else self.period
        self.stride = int(round(h / self.period))
        self.h = self.stride * self.period
        self.lag = float(config.lag)
        self.update_every = int(config.update_every)
        self.m = max(int(round(self.lag / self.h)), 1)
        self.smoother_kind = config.smoother_kind
        n_obs = len(model.observations)
        self.hinge = model.angle_observation_mask()
        self._hinge_list: list[bool] = self.hinge.tolist()  # the per-sample gate reads it in Python
        ppr = config.ppr
        if ppr is not None and not self.hinge.any():
            raise ModelError(f"stream: ppr is set but {model.name} observes no hinge angle")
        self.ppr, self.counts, self.counter_modulus = ppr, bool(config.counts), config.counter_modulus
        self.step_rad = 2.0 * math.pi / ppr if ppr else None
        calibration_sigma = config.calibration_sigma
        if config.sigma_observation is None:
            if ppr is not None:
                base = calibration_sigma if calibration_sigma else DEFAULT_SIGMA
                assert self.step_rad is not None  # set with ppr
                sig = np.where(self.hinge, self.step_rad / math.sqrt(12.0), base)
            else:
                sig = np.full(n_obs, calibration_sigma if calibration_sigma else DEFAULT_SIGMA)
        else:
            try:
                sig = np.broadcast_to(np.asarray(config.sigma_observation, dtype=float), (n_obs,)).copy()
            except (TypeError, ValueError):
                raise ModelError(f"sigma_observation: expected a number or one per observation ({n_obs}: "
                                 f"{', '.join(model.observations)}), got {config.sigma_observation!r}") from None
        if not np.all(np.isfinite(sig)) or np.any(sig <= 0):
            raise ModelError(f"stream: observation noise must be positive, got {config.sigma_observation!r}")
        self.sigma_observation = sig
        self.weight = float(config.weight if config.weight is not None else model.weight)
        # One scale for the impulse sigma: the channels' RMS sigma (they are equal for like encoders).
        sigma_y = float(np.sqrt(np.mean(sig**2)))
        self.sigma_impulse = (float(config.sigma_impulse) if config.sigma_impulse is not None
                              else sigma_y / math.sqrt(self.weight))
        self.jump = float(config.jump) if config.jump is not None else max(0.2, 50.0 * sigma_y)
        self.resync = int(config.resync)
        self.max_gap = float(config.max_gap)
        self._max_gap_slots = max(int(round(self.max_gap / self.period)), 1)
        self.covariance = bool(config.covariance)
        self.on_warning = on_warning
        #: What :meth:`from_calibration` warned about the calibration (parameters the data did not fit).
        self.calibration_warnings: tuple[str, ...] = ()

        refine = config.refine
        for name in refine:
            if name not in model.parameters:
                raise ModelError(f"stream: {model.name} has no parameter {name!r} to refine; "
                                 f"its parameters: {', '.join(model.parameters)}")
            if name == model.tilt:
                raise ModelError(f"stream: the tilt {name!r} cannot be refined online (only scalar parameters)")
        self.variables = variables_for(model, refine)
        # On the device once: every JAX call of the stream takes these ~20 constants, and a NumPy leaf is
        # copied to the device on each call (benchmarks/README.md, stream section, third run).
        self.fixed = {name: jnp.asarray(value) for name, value in fixed_values(model).items()}
        self.parameters = model.parameters.numpy_values()
        self._refine_prior = None
        if refine:
            p0 = np.array([float(self.parameters[n]) for n in refine])
            sigmas = []
            for name, value in zip(refine, p0):
                s = (config.refine_sigmas or {}).get(name)
                s = 0.1 * abs(value) if s is None or not (math.isfinite(s) and s > 0) else float(s)
                if not s > 0:
                    raise ModelError(f"stream: parameter {name!r} is 0; give its prior sigma in refine_sigmas")
                sigmas.append(s)
            self._refine_prior = (p0, np.array(sigmas))

        self._obs_noise = noise_model(self.sigma_observation, n_obs)
        self._imp_noise = noise_model(self.sigma_impulse, 12 * model.nb)
        self._readout = Readout(model)
        self._fused: Callable[..., Any] | None = None  # the chain's regular update program (graphs/stream/fused.py)
        self._fused_kinds: tuple = ()  # the user's factor kinds in it
        self.sensor_kinds = sensor_kinds(factors, model.nb, bool(refine), config.smoother_kind == "chain")
        #: The smoother's updates so far by path: ``"fused"`` (the chain's regular update, one compiled
        #: program: prediction, linearization, elimination), ``"scan"`` (the chain's factor groups linearized
        #: vectorized, eliminated in one compiled scan), ``"loop"`` (the chain's NumPy elimination state by
        #: state: a window's first state, a gap's single factors), ``"gtsam"`` (GTSAM's smoothers, iSAM2).
        self.paths: Counter[str] = Counter()
        self._make_smoother = smoother_factory(config, relinearize_thresholds(model, config), self._window_lag,
                                               model.nb, len(refine))
        self._reset_stream()

    def _reset_stream(self) -> None:
        """The state of a stream that has not begun (construction, and after :meth:`warm_up`)."""
        n_obs = len(self.model.observations)
        self.status = StreamStatus()
        self._warned: set[str] = set()
        self._smoother: Any = None
        self._t0: float | None = None  # time of grid slot 0
        self._last_j = -1  # last accepted grid slot
        self._k = -1  # newest state index in the graph
        self._k_start = 0  # state index of the current smoother's first state
        self._u = np.zeros(len(self.model.controls))  # the last control received
        self._u_graph = self._u  # the control at the newest state in the smoother
        self._pending: list[tuple[int, np.ndarray, np.ndarray]] = []  # (k, readings, controls) awaiting an update
        self._sensor_rows: dict[int, dict[str, tuple[np.ndarray, ...]]] = {}  # state k -> the user sensors' readings
        self._sensor_shapes: dict[str, tuple] = {}  # per sensor: the shapes of its readings (its first sample's)
        self._rollout: Callable[..., Any] | None = None  # compiled Spook steps (update_every > 1)
        self._raw_prev: np.ndarray | None = None  # last finite raw reading per channel (counts or rad)
        self._unwrapped = np.full(n_obs, np.nan)  # last unwrapped reading [rad, m]
        self._refs: dict[int, np.ndarray] = {}  # per state: the readings' turn reference for unwrapping
        self._jumps_in_row = np.zeros(n_obs, dtype=int)
        self._filtered: Estimate | None = None
        self._smoothed: Estimate | None = None
        self._restart_velocity: np.ndarray | None = None
        self._refined: dict[str, float] | None = None
        self._leap_run: tuple[int, int] | None = None  # (last slot, samples in a row) on a leapt-to clock
        self._turn_steps = np.zeros(n_obs, dtype=bool)  # a channel has stepped by more than pi between samples
        self._t_decimals = 12  # decimals of the output times (those of the period and of t_0)
        self._pred_cache: tuple[Any, list] | None = None  # the last model rollout (key, states)
        self._gate_ref: tuple[int, np.ndarray, np.ndarray] | None = None  # (k, coordinates, rates) after a gap
        self._believed: list[tuple[int, float]] = [(-1, math.nan)] * n_obs  # per channel: (k, last believed reading)

    @classmethod
    def from_calibration(cls, model: RigidModel, calibration: str | os.PathLike[str] | Mapping[str, Any],
                         **kwargs: Any) -> StreamEstimator:
        """An estimator with the parameters, h and noise estimates of a calibration (``mbfg calibrate --json``).

        The impulse noise sigma_p is the calibration's estimate
        (``sigma_impulse``, Marklund et al. (2025) eq. 3.23), the observation noise its
        ``sigma_observation`` where no ``ppr`` gives the quantization noise.
        The sample period is the calibration log's (its ``period``; a file without one: its
        ``h``), which a stream of the rig at its own rate has too: at an h of several periods,
        a period of h would put every other sample half-way between two slots.
        ``kwargs`` override (``h``, ``period``, ``sigma_impulse``, ...); a ``weight`` w
        replaces the estimated sigma_p by sigma_y / sqrt(w). Parameters named in
        ``refine`` get the calibration's standard deviations as prior sigmas.
        A calibration without a usable ``sigma_impulse`` falls back on its
        ``weight``.

        A calibration whose parameters the data did not fit (ended on a bound, not excited, a combination
        not determined) or whose solve did not converge is taken, and said so by name, once per parameter
        (:func:`~mbfg.graphs.stream.config.calibration_warnings`), through ``on_warning`` or as a
        :class:`StreamWarning`; the messages stay in :attr:`calibration_warnings`.
        """
        from mbfg.parameters import result_changes

        if not isinstance(model, RigidModel):
            raise ModelError(f"model: expected a RigidModel (e.g. mbfg.load_model('pendulum')), got "
                             f"{type(model).__name__}")
        if not isinstance(calibration, (str, os.PathLike, Mapping)):
            raise ModelError(f"calibration: expected the path of a calibration JSON or its dict, got "
                             f"{type(calibration).__name__}")
        doc = read_calibration(calibration)
        where = "calibration" if isinstance(calibration, Mapping) else os.fspath(calibration)
        changes = result_changes(doc, model, where)  # the whole parameter set; a tilt as a rotation vector
        try:
            fitted = model.with_parameters(changes)
        except ModelError as exc:
            raise ModelError(f"{where}: {exc}") from None
        settings: dict[str, Any] = {}
        for key in ("h", "period", "weight"):  # period: the calibration log's sample period (newer files)
            if usable_value(doc.get(key)):
                settings[key] = float(doc[key])
        sigma = doc.get("sigma_observation")
        if usable_value(sigma):
            settings["calibration_sigma"] = float(sigma)
        sigma_p = doc.get("sigma_impulse")
        if usable_value(sigma_p) and kwargs.get("weight") is None and kwargs.get("sigma_impulse") is None:
            settings["sigma_impulse"] = float(sigma_p)
        stds = {}
        for name, entry in doc["parameters"].items():
            if isinstance(entry, Mapping) and isinstance(entry.get("std"), (int, float)):
                stds[name] = float(entry["std"])
        if kwargs.get("refine"):
            settings["refine_sigmas"] = {n: stds.get(n) for n in kwargs["refine"]}
        settings.update({k: v for k, v in kwargs.items() if v is not None})
        estimator = cls(fitted, **settings)
        estimator.calibration_warnings = tuple(calibration_warnings(doc, where))
        for message in estimator.calibration_warnings:
            if estimator.on_warning is not None:
                estimator.on_warning(message)
            else:
                warnings.warn(message, StreamWarning, stacklevel=2)
        return estimator

    # ------------------------------------------------------------------ the stream
    @property
    def initialized(self) -> bool:
        """True once a complete sample has started the smoother."""
        return self._smoother is not None

    def push(self, t: float, readings: Sequence[float | None],
             controls: Sequence[float] | np.ndarray | None = None,
             sensors: Mapping[str, Any] | None = None) -> StreamStep:
        """Feed one sample: time [s], one reading per observation (raw counts with ``ppr``, else rad / m;
        None for a reading the sensor did not deliver, NaN/inf for a broken one: a fault), the
        controls of this instant (held until the next state time; None: the last ones), and the readings of
        the user's own factors (``factors=``) by name: ``{name: value}``, the value of its
        :data:`~mbfg.graphs.stream.sensors.READING` constant (a tuple of them for several) in the units and
        frame its residual takes; a name left out gives no row of that factor at this sample. As the
        encoders' readings, they enter at state times only (h a multiple of the period: the samples between
        are not used).

        Never raises on a bad sample: it is handled, counted and flagged (module docstring); a non-finite
        sensor reading is dropped as a non-finite encoder reading is. Raises ModelError for a ``sensors``
        mapping that does not fit the declared factors (an unknown name, a shape other than the sensor's
        first reading's): a wrong call, not a bad sample.
        """
        st = self.status
        sensor_values, bad_sensors = read_sensors(self.sensor_kinds, sensors, self._sensor_shapes, t)
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
        if bad.any() or bad_u or bad_sensors:
            st.nonfinite += 1
            flags.append("nonfinite")
            what = ", ".join([n for n, b in zip(self.model.observations, bad) if b] + bad_sensors) or "control"
            self._warn("nonfinite", f"stream: a non-finite reading ({what}) at t = {t:g} s was dropped")
        y = np.where(bad, np.nan, y)
        if missing.any():
            st.missing += 1
            flags.append("missing")

        if self._t0 is None:
            if np.isnan(y).any():  # the first state needs every reading
                st.waiting += 1
                return StreamStep(t, tuple(flags + ["waiting"]), None, None)
            self._t0 = t
            self._t_decimals = max(decimal_places(self.period), decimal_places(t))
        j_float = (t - self._t0) / self.period
        j = int(round(j_float))
        if self._last_j >= 0 and abs(j - self._last_j) > self._max_gap_slots:
            dropped = self._leap(t, j, flags)
            if dropped is not None:
                return dropped
            if j <= self._last_j:  # a clock set back: the grid re-based, so that state indices keep growing
                self._t0 = t - (self._last_j + 1) * self.period
                self._t_decimals = max(decimal_places(self.period), decimal_places(t))
                j_float = (t - self._t0) / self.period
                j = self._last_j + 1
        else:
            self._leap_run = None  # back on the clock: a leap was one bad time
        if j <= self._last_j:
            kind, counter = ("duplicate", "duplicates") if j == self._last_j else ("out_of_order", "out_of_order")
            setattr(st, counter, getattr(st, counter) + 1)
            return self._drop(None, None, flags + [kind], t,
                              warn=(kind, f"stream: a {kind.replace('_', '-')} sample (t = {t:g} s) was dropped"))
        if abs(j_float - j) > 0.25:
            st.off_grid += 1
            flags.append("off_grid")
            half = abs(abs(j_float - j) - 0.5) < 0.05  # as a sample period of half the one set gives
            self._warn("off_grid", f"stream: sample t = {t:g} s is {abs(j_float - j) * self.period:.3g} s off the "
                       f"{self.period:g} s grid; placed on the nearest slot" + (
                           "; half-way between two slots, as samples twice as frequent as the sample period "
                           "set: give the input's own period" if half else ""))
        gap = self._last_j >= 0 and j > self._last_j + 1
        if gap:
            st.gaps += 1
            st.missing_samples += j - self._last_j - 1
            flags.append("gap")
        self._last_j = j
        held_u = u  # (the last control when this one is not finite)
        k, between = divmod(j, self.stride)
        pred = None
        early: tuple[tuple[Estimate, ...], tuple[Estimate, ...]] = ((), ())
        try:
            if gap and not between and self._smoother is not None:
                if self._pending:  # the samples before the gap first: an update never straddles a gap
                    early = self._update()
                pred, pred_rates = self._predicted_coordinates(k)
                # The gate's reference until an update takes the samples after the gap in: with several
                # samples per update the filtered estimate stays before the gap meanwhile.
                self._gate_ref = (k, pred, pred_rates)
        except Exception as exc:  # noqa: BLE001 - a stream must go on; the failure is counted and reported
            return self._solver_failed(t, exc, flags)
        # A restart on a new clock follows a gap too (the samples of the leap were dropped): its turn is the
        # readings', not the last reading's before the leap extrapolated across it.
        y = self._unwrap(y, pred, gap or "restart" in flags)
        if between:
            st.between += 1
            return StreamStep(t, tuple(flags + ["between"]), self._filtered, self._smoothed, self._refined)
        try:
            if self._smoother is None:
                if np.isnan(y).any():
                    st.waiting += 1
                    return StreamStep(t, tuple(flags + ["waiting"]), self._filtered, self._smoothed, self._refined)
                self._sensor_rows[k] = sensor_values
                self._start(k, y, held_u)
                added, smoothed_added = self._read([k])
            else:
                y = self._gate(y, k, flags, pred)
                if "resync" in flags and not np.isnan(y).any():
                    # The readings moved for good: start afresh from them, the velocity carried over.
                    self._update()
                    assert self._filtered is not None  # set by the update
                    self._restart_velocity = self._filtered.velocity.copy()
                    self._k = k
                    self._sensor_rows[k] = sensor_values
                    self._start(k, y, held_u)
                    added, smoothed_added = self._read([k])
                else:
                    self._pending.append((k, y, np.asarray(held_u, dtype=float).copy()))
                    self._sensor_rows[k] = sensor_values
                    if len(self._pending) < self.update_every:
                        self._u = np.asarray(held_u, dtype=float).copy()
                        return StreamStep(t, tuple(flags + ["pending"]), self._filtered, self._smoothed,
                                          self._refined, updated=bool(early[0]), added=early[0],
                                          smoothed_added=early[1])
                    added, smoothed_added = self._update()
            self._u = np.asarray(held_u, dtype=float).copy()
        except Exception as exc:  # noqa: BLE001 - a stream must go on; the failure is counted and reported
            return self._solver_failed(t, exc, flags)
        return StreamStep(t, tuple(flags), self._filtered, self._smoothed, self._refined, updated=True,
                          added=early[0] + added, smoothed_added=early[1] + smoothed_added)

    def warm_up(self) -> float:
        """Compile what the stream will call (the first state, one update of ``update_every`` samples, a
        bridged gap) on synthetic samples at the model's initial state, then forget them: the first real
        sample is then answered at once instead of after seconds of JAX compiling. Returns the seconds
        it took. Call it before the stream begins: after the first sample it raises ModelError (it would
        reset the stream, the window and its estimates lost)."""
        if self.status.samples:
            raise ModelError(f"warm_up: the stream has had {self.status.samples} samples; warm_up compiles on "
                             f"synthetic samples and resets the stream, so call it before the first push")
        start = time.perf_counter()
        from mbfg.graphs.stream.readout import joint_coordinates

        x0 = self.model.initial_state()
        q, _ = joint_coordinates(self.model, State(*(np.asarray(a)[None] for a in x0)))
        y = np.where(self.hinge, q[0] / self.step_rad, q[0]) if self.counts else q[0]
        u = np.zeros(len(self.model.controls)) if self.model.controls else None
        on_warning, self.on_warning = self.on_warning, (lambda message: None)
        try:
            n = 3 * self.update_every + 2
            slots = list(range(n)) + [n + 2 + i for i in range(self.update_every)]  # a gap of two states
            for j in slots:
                self.push(j * self.h, [float(v) for v in y], u)
            self.flush()
        finally:
            self.on_warning = on_warning
        self._reset_stream()
        return time.perf_counter() - start

    def _solver_failed(self, t: float, exc: Exception, flags: list[str]) -> StreamStep:
        """Count and report a failed update; the smoother restarts at the next complete sample, its velocity
        prior centred on the last estimate, or, where the failed smoother was such a restart that failed
        within its first ``resync`` states, on no velocity (the readings decide, as at the stream's start)."""
        self.status.solver_failures += 1
        self._warn("solver", f"stream: the smoother failed at t = {t:g} s ({type(exc).__name__}: {exc}); "
                   "restarting at the next complete sample")
        # A restart that fails within its first ``resync`` states was most likely sent off by the velocity it
        # carried (a diverged estimate): carried again, it fails at every restart for the rest of the stream.
        # Not only one that fails before its first state: the chain takes a restart's first states with a
        # diverged velocity prior, and the failure comes a few states later.
        failed_fresh = self._smoother is not None and self._k - self._k_start < self.resync
        if failed_fresh:
            self._restart_velocity = None
        elif self._filtered is not None:
            self._restart_velocity = self._filtered.velocity.copy()
        self._smoother = None
        self._pending = []
        self._smoothed = None  # the restart's window has no smoothed state yet: no stale values meanwhile
        return StreamStep(t, tuple(flags + ["solver_failure"]), self._filtered, self._smoothed, self._refined)

    def flush(self) -> StreamStep | None:
        """Update the smoother with the state-time samples waiting for the next update (``update_every`` > 1;
        at the end of a stream). Returns their step (None when none wait). Never raises, as :meth:`push`."""
        if not self._pending or self._smoother is None:
            return None
        assert self._t0 is not None  # set with the smoother
        t = self._t0 + self._pending[-1][0] * self.h
        try:
            added, smoothed_added = self._update()
        except Exception as exc:  # noqa: BLE001 - as in push
            return self._solver_failed(t, exc, [])
        return StreamStep(t, (), self._filtered, self._smoothed, self._refined, updated=True, added=added,
                          smoothed_added=smoothed_added)
