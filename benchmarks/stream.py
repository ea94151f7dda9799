"""Fixed-lag smoothing of a 1 kHz encoder stream (mbfg.graphs.stream): time per sample, memory, real data.

Sections (each can be picked with --only):

1. ``timing``: the viscous pendulum and the viscous Furuta pendulum, synthetic
   logs at 1 kHz (encoders of 2048 counts per revolution; the Furuta driven by
   a square-wave voltage), lags 0.05, 0.1, 0.5 s, and the Furuta pendulum at
   lag 0.1 s with 5, 10, 20 samples per smoother update and with h = 2 ms (1 and 10): mean
   and 99th-percentile wall time per sample and the real-time factor (stream
   seconds per wall second), the slowest sample and Python's full garbage
   collections during the stream,
   after a warm-up stream that compiles every factor type (no figure includes
   JAX compilation). The Furuta rows at lag 0.1 s run twice, with the stream's
   default smoother (``chain``, mbfg.graphs.stream.chain) and with iSAM2
   (``incremental``), on the same samples. Each row is also split per sample into our JAX
   programs (linearizations; the chain's one program per regular update, mbfg.graphs.stream.fused),
   the smoother's own update, the read-out and the rest. Where the Furuta pendulum at 0.1 s
   lag is below 2x real time with the chain, a cProfile of its run (1 and 10 samples per update) says
   where the time goes.
   After the warm-up the process calls ``gc.freeze()``, as ``mbfg smooth`` does
   (``--no-gc-freeze``: not).
2. ``memory``: a long stream (10 min of 1 kHz samples; ``--minutes``) replayed
   as fast as possible, the pendulum at lag 0.1 s, resident memory (RSS) at
   1, 5 and 10 min of stream time (and at every minute in between).
3. ``factors``: the cost of one factor evaluation, the Furuta impulse and
   observation factors of the stream: wall time of the residual and of the
   residual with its Jacobian (mean of 500 calls, inputs already on the
   device), of 10 at once vmapped with one joint forward pass and with one
   per variable (the stream's batched updates), each with its compile time,
   the number of primitive operations of the
   residual's jaxpr (the most frequent kinds) and of fused kernels XLA:CPU
   compiles the residual / the residual with its Jacobian into.
4. ``qube``: the real QUBE-Servo episode (../shared/data/qube_servo, 500 Hz,
   furuta-viscous model) from t = 1 s (``--qube-start``: the episode opens
   with the voltage saturated at -10 V, where the calibrated motor model does
   not hold; the calibration skips its episode's opening too), states
   estimated by the stream and by the batch
   graph (mbfg.graphs.joint) with the same fixed parameters; the arm and
   pendulum rates of the smoothed stream and of finite differences of the
   encoder angles, each against the batch solution (RMS difference and RMS of
   the second difference, a roughness measure). Parameters: ``--qube-params``
   (the JSON of 'mbfg calibrate' on the other episode; its estimate of the
   impulse noise weights the dynamics, or ``--qube-weight W``) or the model's
   defaults (say which in the output).

Usage::

    python benchmarks/stream.py --quick      # about 3 min: short logs, a 1-minute memory run, 4 s of QUBE
    python benchmarks/stream.py              # the full run (10-minute stream): about 1 h on 2 cores
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import os
import pstats
import resource
import sys
import time
from pathlib import Path

import _record
import numpy as np

from mbfg.graphs.stream import StreamEstimator, joint_coordinates
from mbfg.lm_config import LMConfig
from mbfg.logs import Log, quantize
from mbfg.models import furuta, pendulum
from mbfg.spook import simulate, unwrap_angles

REPO = Path(__file__).resolve().parents[1]
QUBE_DIR = REPO / ".." / "shared" / "data" / "qube_servo"
PPR = 2048
H = 1e-3


def _rss_mb() -> float:
    """Resident memory now [MB] (Linux /proc; the peak from getrusage elsewhere)."""
    try:
        with open("/proc/self/statm") as fh:
            pages = int(fh.read().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE") / 2**20
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _log(model, duration: float, seed: int = 0) -> tuple[Log, np.ndarray]:
    """A synthetic log, released from an angle (and driven by a square-wave voltage if the model has a motor),
    and the true rates of its observed coordinates (n, n_obs) [rad/s]."""
    n = int(round(duration / H))
    if model.controls:
        u = 0.5 * np.sign(np.sin(2 * np.pi * 0.7 * np.arange(n) * H))[:, None]
        x0 = model.initial_state({"alpha": 0.5})
    else:
        u = None
        x0 = model.initial_state({"theta": 2.0})
    traj = simulate(model, n * H, H, initial=x0, controls=u)
    y = quantize(unwrap_angles(model, traj.observations), PPR)
    uu = np.vstack([traj.controls, traj.controls[-1:]]) if model.controls else np.zeros((n + 1, 0))
    log = Log(traj.t, y, uu, model.observations, model.controls, f"synthetic {model.name} (seed {seed})")
    return log, joint_coordinates(model, traj.states)[1]


class _FullCollections:
    """Counts Python's full (generation 2) garbage collections and their time while active."""

    def __enter__(self) -> _FullCollections:
        self.count, self.seconds, self._start = 0, 0.0, 0.0
        gc.callbacks.append(self._callback)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self._callback)

    def _callback(self, phase: str, info: dict) -> None:
        if info["generation"] != 2:
            return
        if phase == "start":
            self._start = time.perf_counter()
        else:
            self.count += 1
            self.seconds += time.perf_counter() - self._start


class _Split:
    """Wall time of the parts of the stream's updates while active [s]: ``jax`` (our JAX programs: the
    factor linearizations, vmapped groups and single factors, wherever GTSAM or the chain calls them, and
    the chain's one program per regular update, with the Spook prediction and the elimination in it),
    ``smoother`` (the window's update and marginalization without those programs: the chain's or
    iSAM2's), ``readout`` (filtered and smoothed states from the window). The rest of a push is Python
    bookkeeping."""

    def __enter__(self) -> _Split:
        import jax

        from mbfg.adapter import FactorGroup
        from mbfg.graphs.stream.chain import ChainWindow
        from mbfg.graphs.stream.readout import Readout
        from mbfg.graphs.stream.window import ISAM2Window

        self.seconds = {"jax": 0.0, "smoother": 0.0, "readout": 0.0}
        split = self

        def update_regular(chain, *args):
            *rest, solve = args

            def timed_solve(*inputs):  # waits for the results, as the chain's conversion to NumPy would
                start = time.perf_counter()
                out = jax.block_until_ready(solve(*inputs))
                split.seconds["jax"] += time.perf_counter() - start
                return out

            return original_regular(chain, *rest, timed_solve)

        original_regular = ChainWindow.update_regular
        self._patched = [(FactorGroup, "evaluate", "jax"), (FactorGroup, "_alone", "jax"),
                         (ISAM2Window, "update", "smoother"), (ChainWindow, "update", "smoother"),
                         (ChainWindow, "update_regular", "smoother"), (Readout, "__call__", "readout")]
        self._originals = [getattr(cls, name) for cls, name, _ in self._patched]
        for (cls, name, part), original in zip(self._patched, self._originals):
            wrapped = update_regular if (cls, name) == (ChainWindow, "update_regular") else original
            setattr(cls, name, self._timed(wrapped, part))
        return self

    def _timed(self, original, part: str):
        def timed(*args, **kwargs):
            start = time.perf_counter()
            inner = self.seconds["jax"]
            try:
                return original(*args, **kwargs)
            finally:
                spent = time.perf_counter() - start
                if part == "smoother":  # the JAX programs the smoother calls are counted as such
                    spent -= self.seconds["jax"] - inner
                self.seconds[part] += spent

        return timed

    def __exit__(self, *exc: object) -> None:
        for (cls, name, _), original in zip(self._patched, self._originals):
            setattr(cls, name, original)


def _stream(model, log: Log, lag: float, **kwargs) -> tuple[np.ndarray, StreamEstimator, dict]:
    """Wall time of each push [s], the estimator, and the estimates {"filtered"/"smoothed": {k: Estimate}}."""
    kwargs.setdefault("h", H)
    est = StreamEstimator(model, lag=lag, period=H, ppr=PPR, **kwargs)
    times = np.zeros(len(log.t))
    estimates: dict = {"filtered": {}, "smoothed": {}}
    has_u = bool(log.u.shape[1])
    for i in range(len(log.t)):
        start = time.perf_counter()
        step = est.push(log.t[i], log.y[i], log.u[i] if has_u else None)
        times[i] = time.perf_counter() - start
        estimates["filtered"].update((e.k, e) for e in step.added)
        estimates["smoothed"].update((e.k, e) for e in step.smoothed_added)
    return times, est, estimates


#: What this run printed, by section, for its JSON record (benchmarks/_record.py).
FIGURES: dict[str, list[dict]] = {}


def timing(quick: bool, profile_lines: int, settings: dict, freeze: bool = True) -> None:
    duration = 1.0 if quick else 5.0
    print(f"\n== 1. time per sample at 1 kHz ({duration:g} s streams, encoders {PPR} counts/rev) ==")
    print("   rate error: RMS of the filtered / smoothed rate estimates against the true rates, per observed")
    print("   coordinate [rad/s], after the first 0.15 s")
    print("   update every N: one smoother update per N state-time samples (StreamEstimator(update_every=N));")
    print("   p99 is then the time of an update, the latency the batching adds")
    print("   max: the slowest sample; full gc: Python's full garbage collections during the stream (number, "
          "seconds);")
    print("   per sample: each row's stream split into our JAX programs (linearizations; for the chain's regular")
    print("   updates one program with the Spook prediction, the linearizations and the elimination), the smoother's")
    print("   update without them,")
    print("   the read-out of the estimates, and the rest (Python bookkeeping), over all its samples")
    print(f"   gc.freeze() after the warm-up: {'yes' if freeze else 'no (--no-gc-freeze)'}")
    print(f"{'model':<16} {'smoother':<11} {'h [ms]':>6} {'lag [s]':>7} {'update every':>12} {'window':>6} {'mean [ms]':>10} "
          f"{'p99 [ms]':>9} {'max [ms]':>9} {'full gc':>10} {'real-time x':>12}  rate error filtered / smoothed")
    for model in (pendulum(), furuta(dry=False)):
        log, qd_true = _log(model, duration)
        warm = Log(log.t[:80], log.y[:80], log.u[:80], log.observations, log.controls, "warm-up")
        cases = [(H, 0.05, 1, "chain"), (H, 0.1, 1, "chain"), (H, 0.5, 1, "chain")]
        if model.controls:
            # The Furuta pendulum at lag 0.1 s: several samples per update, and h = 2 ms (stride 2), the
            # same 1 kHz stream with half the states, one and ten samples per update; iSAM2 beside the chain.
            cases = [(H, 0.05, 1, "chain"), (H, 0.5, 1, "chain")]
            cases += [(h, 0.1, n, smoother) for h, n in ((H, 1), (H, 5), (H, 10), (H, 20), (2 * H, 1), (2 * H, 10))
                      for smoother in ("chain", "incremental")]
        for n, smoother in sorted({(n, smoother) for _, _, n, smoother in cases}):
            # compiles the factor types (vmapped over n) and the chain's scan: not timed
            _stream(model, warm, 0.01, update_every=n, smoother=smoother)
        if freeze:
            gc.collect()
            gc.freeze()
        speed: dict[tuple[float, int], dict[str, float]] = {}  # (h, per update) -> smoother -> real-time factor
        for h, lag, n, smoother in cases:
            with _FullCollections() as full_gc, _Split() as split:
                times, est, estimates = _stream(model, log, lag, h=h, update_every=n, smoother=smoother, **settings)
            steady = times[est.m * est.stride:]  # once the window is full
            mean = steady.mean()
            errors = []
            for kind in ("filtered", "smoothed"):
                d = [e.rates - qd_true[int(round((e.t - log.t[0]) / H))]
                     for e in estimates[kind].values() if e.t - log.t[0] >= 0.15]
                errors.append(np.sqrt(np.mean(np.square(d), axis=0)))
            err = "  ".join(f"{f:.2g} / {s:.2g}" for f, s in zip(*errors))
            print(f"{model.name:<16} {smoother:<11} {1e3 * h:>6g} {lag:>7g} {n:>12} {est.m + est.update_every:>6} {1e3 * mean:>10.3f} "
                  f"{1e3 * np.percentile(steady, 99):>9.3f} {1e3 * steady.max():>9.1f} "
                  f"{f'{full_gc.count} / {full_gc.seconds:.2f}':>10} {H / mean:>12.2f}  {err}", flush=True)
            if lag == 0.1:
                speed.setdefault((h, n), {})[smoother] = H / mean
            per_sample = {part: 1e3 * seconds / len(times) for part, seconds in split.seconds.items()}
            rest = 1e3 * times.mean() - sum(per_sample.values())
            FIGURES.setdefault("time per sample", []).append({
                "model": model.name, "smoother": smoother, "h_ms": 1e3 * h, "lag_s": lag, "update_every": n,
                "window": est.m + est.update_every, "mean_ms": 1e3 * mean, "p99_ms": 1e3 * np.percentile(steady, 99),
                "max_ms": 1e3 * steady.max(), "full_gc": full_gc.count, "full_gc_s": full_gc.seconds,
                "real_time_x": H / mean, "rate_error_filtered": errors[0], "rate_error_smoothed": errors[1],
                "per_sample_ms": {**per_sample, "rest": rest}})
            print(f"{'':<16} per sample [ms] over the whole stream: JAX {per_sample['jax']:.3f}, smoother "
                  f"{per_sample['smoother']:.3f}, read-out {per_sample['readout']:.3f}, the rest {rest:.3f}",
                  flush=True)
            if model.name == "furuta-viscous" and lag == 0.1 and h == H and n in (1, 10) and H / mean < 2.0 \
                    and smoother == "chain" and profile_lines:
                prof = cProfile.Profile()
                prof.enable()
                _stream(model, Log(log.t[:500], log.y[:500], log.u[:500], log.observations, log.controls), lag,
                        update_every=n, smoother=smoother, **settings)
                prof.disable()
                out = io.StringIO()
                pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(profile_lines)
                print("   below 2x real time: cProfile of 0.5 s of this stream (sorted by own time; the JAX "
                      "calls run inside mbfg/adapter.py's FactorGroup.evaluate):")
                print("\n".join("   " + line for line in out.getvalue().splitlines() if line.strip()))
        pairs = [(key, by) for key, by in sorted(speed.items()) if {"chain", "incremental"} <= by.keys()]
        if pairs:  # the peer on the same samples in the same run: steadier than either figure on a shared machine
            print(f"{model.name}, lag 0.1 s: the chain's speed / iSAM2's on the same samples: " + ", ".join(
                f"{by['chain'] / by['incremental']:.2f}x at {n} per update (h = {1e3 * h:g} ms)"
                for (h, n), by in pairs), flush=True)


def memory(minutes: float) -> None:
    print(f"\n== 2. memory of a {minutes:g}-minute stream at 1 kHz (pendulum, lag 0.1 s, replayed as fast as possible) ==")
    model = pendulum()
    # One simulation of the whole stream: a minute replayed with shifted angles would show a
    # pendulum swinging about a point that is not its bottom, which the dynamics cannot explain.
    t0 = time.perf_counter()
    log, _ = _log(model, minutes * 60)
    print(f"simulated {minutes:g} min at 1 kHz in {time.perf_counter() - t0:.0f} s "
          f"(final amplitude {np.abs(log.y[-1000:]).max():.3f} rad)", flush=True)
    est = StreamEstimator(model, lag=0.1, h=H, ppr=PPR)
    marks = {1, 5, 10} | set(range(1, int(minutes) + 1))
    print(f"RSS before the stream: {_rss_mb():.0f} MB", flush=True)
    start = last = time.perf_counter()
    for i in range(len(log.t) - 1):
        est.push(log.t[i], log.y[i])
        minute = (i + 1) * H / 60
        if abs(minute - round(minute)) < H / 120 and round(minute) in marks:
            now = time.perf_counter()
            FIGURES.setdefault("memory", []).append({
                "stream_min": round(minute), "rss_mb": _rss_mb(), "wall_s": now - start,
                "ms_per_sample_last_minute": 1e3 * (now - last) / (60 / H), "states": est.status.states})
            print(f"  {round(minute):>3} min of stream: RSS {_rss_mb():.0f} MB, {now - start:.0f} s wall "
                  f"({1e3 * (now - last) / (60 / H):.2f} ms per sample over the last minute), "
                  f"{est.status.states} states", flush=True)
            last = now
    print(f"status: {est.status.summary()}")


def factor_cost() -> None:
    import collections

    import jax

    from mbfg.factors._rigid import fixed_values, state_values, variables_for
    from mbfg.factors.impulse import impulse_type
    from mbfg.factors.observation import observation_type
    from mbfg.testing import example_step

    print("\n== 3. one factor evaluation (furuta-viscous, the stream's factor types) ==")
    model = furuta(dry=False)
    variables = variables_for(model, ())
    x0, x1, u = example_step(np.random.default_rng(0), model)
    fixed = fixed_values(model)
    y = np.asarray(model.observe(x1, model.parameters.numpy_values()))
    cases = (("impulse", impulse_type(variables), (*state_values(model, x0), *state_values(model, x1)),
              (fixed, u, H)),
             ("observation", observation_type(variables), tuple(state_values(model, x1)),
              (fixed, y, np.ones_like(y))))
    print(f"{'factor':<12} {'residual [ms]':>13} {'+ Jacobian [ms]':>15} "
          f"{'vmapped x10, each [ms] (compile [s]): joint / per variable':>58} "
          f"{'jaxpr ops':>9} {'fused kernels':>15}  most frequent ops")
    for name, ft, xs, cs in cases:
        xs = tuple(jax.device_put(np.asarray(x)) for x in xs)
        cs = jax.device_put(cs)
        batch = tuple(jax.numpy.stack([x] * 10) for x in xs)
        times, compile_s = [], []
        for per_variable in (False, True):
            # A fresh jit of the same vmapped function, so that its compile is timed.
            fn = jax.jit(ft._vmapped((None,) * len(cs), per_variable)[1])
            start = time.perf_counter()
            fn.lower(batch, cs).compile()
            compile_s.append(time.perf_counter() - start)
        for fn, args in ((ft._error_fn, (xs, cs)), (ft._linearize_fn, (xs, cs)),
                         (ft._vmapped((None,) * len(cs))[1], (batch, cs)),
                         (ft._vmapped((None,) * len(cs), per_variable=True)[1], (batch, cs))):
            jax.block_until_ready(fn(*args))
            start = time.perf_counter()
            for _ in range(500):
                jax.block_until_ready(fn(*args))
            times.append((time.perf_counter() - start) / 500)
        times[2] /= 10
        times[3] /= 10
        counts: collections.Counter = collections.Counter()

        def count(jaxpr) -> None:
            for eqn in jaxpr.eqns:
                counts[eqn.primitive.name] += 1  # noqa: B023  (called at once, in this iteration)
                for value in eqn.params.values():  # nested jaxprs (pjit, custom_jvp, ...)
                    inner = getattr(value, "jaxpr", None)
                    if inner is not None:
                        count(getattr(inner, "jaxpr", inner))

        count(jax.make_jaxpr(lambda xs, cs: ft.residual(*xs, *cs))(xs, cs).jaxpr)  # noqa: B023  (traced at once)
        kernels = [fn.jitted.lower(xs, cs).compile().as_text().count(" fusion(") for fn in (ft._error_fn, ft._linearize_fn)]
        top = ", ".join(f"{k} {v}" for k, v in counts.most_common(4))
        vmapped = f"{1e3 * times[2]:.3f} ({compile_s[0]:.1f}) / {1e3 * times[3]:.3f} ({compile_s[1]:.1f})"
        FIGURES.setdefault("one factor evaluation", []).append({
            "factor": name, "residual_ms": 1e3 * times[0], "with_jacobian_ms": 1e3 * times[1],
            "vmapped_each_ms": {"joint": 1e3 * times[2], "per_variable": 1e3 * times[3]},
            "compile_s": {"joint": compile_s[0], "per_variable": compile_s[1]}, "jaxpr_ops": sum(counts.values()),
            "fused_kernels": kernels})
        print(f"{name:<12} {1e3 * times[0]:>13.3f} {1e3 * times[1]:>15.3f} {vmapped:>58} "
              f"{sum(counts.values()):>9} {kernels[0]:>6} / {kernels[1]:<6}  {top}")


def qube(quick: bool, params: str | None, start_s: float, weight: float | None = None) -> None:
    import gtsam

    from mbfg import keys
    from mbfg.datasets.rigs import load_qube
    from mbfg.graphs.joint import build_joint_problem, solve
    from mbfg.graphs.stream import VELOCITY_PRIOR_SIGMA, StreamEstimator

    files = sorted(QUBE_DIR.glob("qube_*.csv"))
    if not files:
        print(f"\n== 4. QUBE-Servo: no data in {QUBE_DIR}; skipped ==")
        return
    seconds = 4.0 if quick else 10.0
    full = load_qube(files[-1])
    i0 = int(np.searchsorted(full.t, full.t[0] + start_s - 1e-9))
    n = int(round(seconds / 0.002)) + 1
    sl = slice(i0, i0 + n)
    log = Log(full.t[sl], full.y[sl], full.u[sl], full.observations, full.controls, full.source)
    model = furuta(dry=False)
    weighted = {"weight": weight} if weight else {}
    if params:
        est = StreamEstimator.from_calibration(model, params, lag=0.1, period=0.002, ppr=PPR, **weighted)
        where = f"parameters of {params}"
    else:
        est = StreamEstimator(model, lag=0.1, h=0.002, ppr=PPR, **weighted)
        where = "the furuta-viscous model's default parameters (not calibrated)"
    origin = "the calibration's estimate" if params and not weight else f"sigma_y / sqrt({est.weight:g})"
    print(f"\n== 4. QUBE-Servo {Path(log.source).name}, {seconds:g} s at 500 Hz from t = {log.t[0] - full.t[0]:g} s "
          f"(max |u| before: {np.abs(full.u[:i0]).max(initial=0.0):.3g} V, after: {np.abs(log.u).max():.3g} V), "
          f"{where}, lag 0.1 s ==")
    print(f"noise: sigma_y {est.sigma_observation[0]:.3g} rad (quantization), sigma_p {est.sigma_impulse:.3g} N s "
          f"({origin})")
    start = time.perf_counter()
    rep = est.replay(log)
    wall = time.perf_counter() - start
    print(f"stream: {wall:.1f} s wall (compilation included); {est.status.summary()}")
    problem = build_joint_problem(est.model, log, h=est.h, free=(),
                                  sigmas=(float(est.sigma_observation[0]), est.sigma_impulse))
    v0 = np.asarray(problem.initial.atVector(keys.V(0)))
    problem.graph.push_back(gtsam.PriorFactorVector(keys.V(0), v0, gtsam.noiseModel.Isotropic.Sigma(len(v0),
                                                                                                      VELOCITY_PRIOR_SIGMA)))
    result = solve(problem, LMConfig(max_iterations=30), quiet=True)
    print(f"batch: {result.iterations} LM iterations, converged {result.converged}")
    _, qd_b = joint_coordinates(est.model, problem.states(result.values))
    # The states the stream estimated (a solver restart leaves some out), on the batch solution's grid.
    k = np.rint((rep.t - log.t[0]) / est.h).astype(int)
    if len(k) < len(qd_b):
        print(f"the stream estimated {len(k)} of {len(qd_b)} states; the rows below compare those (the second "
              "difference then spans the missing ones)")
    # Central finite differences of the encoder angles (every sample), at the state times (every stride-th).
    fd = np.gradient(log.y, log.t, axis=0)[k * est.stride]
    qd_b = qd_b[k]
    skip = int(np.searchsorted(k, round(0.05 / est.h)))  # the first 50 ms: the stream's start from rest
    print(f"{'rate':<8} {'estimate':<22} {'rms vs batch [rad/s]':>20} {'rms 2nd diff [rad/s]':>21}")
    for c, name in enumerate(est.model.observations):
        for label, x in (("smoothed stream", rep.smoothed_qdot[:, c]), ("filtered stream", rep.filtered_qdot[:, c]),
                         ("finite differences", fd[:, c]), ("batch", qd_b[:, c])):
            d = x[skip:] - qd_b[skip:, c]
            rough = np.sqrt(np.mean(np.diff(x[skip:], 2) ** 2))
            print(f"d{name:<7} {label:<22} {np.sqrt(np.mean(d**2)):>20.4g} {rough:>21.4g}")
            FIGURES.setdefault("QUBE-Servo rates", []).append({
                "rate": f"d{name}", "estimate": label, "rms_vs_batch_rad_s": np.sqrt(np.mean(d**2)),
                "rms_second_difference_rad_s": rough})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="short logs, a 1-minute memory run, 4 s of QUBE data")
    parser.add_argument("--minutes", type=float, default=None, help="length of the memory run [min] (default 10, "
                        "--quick 1)")
    parser.add_argument("--only", choices=("timing", "memory", "factors", "qube"), action="append",
                        help="run only these sections (repeatable)")
    parser.add_argument("--qube-params", default=None, metavar="CALIB.json",
                        help="parameters for the QUBE section (the JSON of 'mbfg calibrate')")
    parser.add_argument("--qube-start", type=float, default=1.0, metavar="S",
                        help="start of the QUBE stream in its episode [s] (default 1: past the saturated opening)")
    parser.add_argument("--qube-weight", type=float, default=None, metavar="W",
                        help="QUBE section: impulse noise sigma_y / sqrt(W) instead of the calibration's estimate")
    parser.add_argument("--relinearize-threshold", type=float, default=None, metavar="T",
                        help="relinearization threshold of the timed streams (default: the estimator's)")
    parser.add_argument("--no-gc-freeze", action="store_true",
                        help="time the streams without gc.freeze() after the warm-up (mbfg smooth freezes)")
    parser.add_argument("--profile-lines", type=int, default=15, help="cProfile lines to print (0: no profile)")
    parser.add_argument("--cpus", type=int, default=None, metavar="N",
                        help="run on N CPUs only (os.sched_setaffinity; default: all): the streams' JAX calls "
                             "are small, and XLA's thread pool competes with the calling thread (one CPU was "
                             "faster in most rows on 2 cores, see benchmarks/README.md)")
    args = parser.parse_args(argv)
    sections = args.only or ["timing", "memory", "factors", "qube"]
    if args.cpus is not None:
        os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[: args.cpus])
    cpus = len(os.sched_getaffinity(0))
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs ({cpus} used), load average {os.getloadavg()[0]:.2f}, "
          f"XLA_FLAGS={os.environ.get('XLA_FLAGS', '')!r}")
    if "timing" in sections:
        settings = {} if args.relinearize_threshold is None else {"relinearize_threshold": args.relinearize_threshold}
        timing(args.quick, args.profile_lines, settings, freeze=not args.no_gc_freeze)
    if "memory" in sections:
        memory(args.minutes if args.minutes is not None else (1.0 if args.quick else 10.0))
    if "factors" in sections:
        factor_cost()
    if "qube" in sections:
        qube(args.quick, args.qube_params, args.qube_start, args.qube_weight)
    print(f"\nload average at the end {os.getloadavg()[0]:.2f}")
    _record.write(__file__, FIGURES)
    return 0


if __name__ == "__main__":
    sys.exit(main())
