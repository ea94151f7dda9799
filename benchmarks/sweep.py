"""A 12-cell method-parameter sweep on 2 Dask workers against the same 12 calibrations one after another.

The cells: the built-in viscous pendulum (J and b free, started 20 % / 30 % off), 2 simulated
recordings (``--duration`` s at 1 ms, 1e-3 rad of noise) x h in {1, 2} ms x w in {1e4, 1e6, 1e8};
calibrations only. The one-process peer runs in a process of its own, started like the workers, so
that both sides find their JAX persistent compilation cache the same way (set in the environment
before JAX starts). It calibrates from one model object, so it too compiles once per distinct h (as
a worker does). Printed: both wall times, their ratio, the compile time (JAX tracing, lowering,
compiling) per worker and in the peer, and that every cell agrees.

Cold (the default): each side gets its own empty cache. ``--warm``: both sides start from one cache
that an untimed sweep of the same cells filled first, a lab's second sweep of a rig (other weights,
new recordings of the same length), where the workers load their programs instead of compiling them.

    python benchmarks/sweep.py [--workers 2] [--duration 0.5] [--warm]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import _record

HS, WS = (1e-3, 2e-3), (1e4, 1e6, 1e8)


def _problem(duration: float):
    from mbfg.models import pendulum
    from mbfg.spook import simulate

    model = pendulum()
    truth = model.parameters.numpy_values()
    start = model.with_parameters({"J": 1.2 * truth["J"], "b": 0.7 * truth["b"]})
    logs = {f"rec{i}": simulate(model, duration, 1e-3, initial=model.initial_state({"theta": th}))
            .to_log(noise=1e-3, seed=i, source=f"rec{i}") for i, th in enumerate((2.0, 1.4))}
    return start, logs


def peer(duration: float) -> None:
    """The 12 calibrations one after another in this process; prints JSON (wall, compile, parameters)."""
    from mbfg._jax import jax
    from mbfg.calibration import calibrate

    compile_s = [0.0]
    jax.monitoring.register_event_duration_secs_listener(
        lambda event, d, **_: compile_s.__setitem__(0, compile_s[0] + d) if event.startswith("/jax/core/compile/")
        else None)
    t0 = time.perf_counter()
    start, logs = _problem(duration)  # the recordings' simulation is part of either side's work
    values = {f"{name}|{h}|{w}": {p.name: p.value for p in
                                  calibrate(start, log, free=["J", "b"], h=h, weight=w).parameters}
              for name, log in logs.items() for h in HS for w in WS}
    print(json.dumps({"wall_s": time.perf_counter() - t0, "compile_s": compile_s[0], "values": values}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--duration", type=float, default=0.5, help="length of each recording [s]")
    parser.add_argument("--warm", action="store_true",
                        help="both sides start from a compilation cache filled by an untimed sweep")
    parser.add_argument("--peer", action="store_true", help=argparse.SUPPRESS)  # the one-process side
    args = parser.parse_args()
    if args.peer:
        peer(args.duration)
        return

    with tempfile.TemporaryDirectory() as sweep_cache, tempfile.TemporaryDirectory() as peer_cache:
        # This process and its workers use the sweep's cache (the workers inherit the environment).
        os.environ["JAX_COMPILATION_CACHE_DIR"] = sweep_cache
        from mbfg.sweep import sweep

        if args.warm:
            t0 = time.perf_counter()
            start, logs = _problem(args.duration)
            sweep(start, logs, h=list(HS), weight=list(WS), free=["J", "b"], crossval=False,
                  n_workers=args.workers, quiet=True)
            print(f"untimed sweep filling the cache: {time.perf_counter() - t0:.1f} s")
            peer_cache = sweep_cache
        t0 = time.perf_counter()
        start, logs = _problem(args.duration)
        result = sweep(start, logs, h=list(HS), weight=list(WS), free=["J", "b"], crossval=False,
                       n_workers=args.workers, quiet=True)
        wall_sweep = time.perf_counter() - t0

        env = dict(os.environ, JAX_COMPILATION_CACHE_DIR=peer_cache)
        done = subprocess.run([sys.executable, __file__, "--peer", "--duration", str(args.duration)], env=env,
                              capture_output=True, text=True, check=True)
        alone = json.loads(done.stdout.strip().splitlines()[-1])

    cal = result.calibrations
    worst = max(abs(row[f"value:{name}"] - value) / abs(value) for _, row in cal.iterrows()
                for name, value in alone["values"][f"{row['log']}|{row['h']}|{row['weight']}"].items())
    wall_seq = alone["wall_s"]
    print(f"{len(cal)} cells ({(cal['status'] == 'ok').sum()} ok), {len(logs)} recordings of {args.duration:g} s, "
          f"{'warm' if args.warm else 'cold'} compilation caches")
    print(f"sweep on {args.workers} Dask workers (cluster start and recordings included): {wall_sweep:.1f} s wall")
    print(f"one process, one after another (recordings included, not the interpreter start): {wall_seq:.1f} s wall")
    print(f"ratio (one process / sweep): {wall_seq / wall_sweep:.2f}x")
    for worker, g in cal.groupby("worker"):
        print(f"  worker {worker}: {len(g)} cells, compile {g['compile_s'].sum():.1f} s of "
              f"{g['wall_s'].sum():.1f} s in its tasks")
    print(f"  one process: compile {alone['compile_s']:.1f} s of {wall_seq:.1f} s")
    print(f"largest relative difference of a parameter, sweep vs alone: {worst:.1e}")
    _record.write(__file__, [{"cells": len(cal), "ok": int((cal["status"] == "ok").sum()), "recordings": len(logs),
                              "recording_s": args.duration, "caches": "warm" if args.warm else "cold",
                              "workers": args.workers, "wall_s": wall_sweep, "compile_s": cal["compile_s"].sum(),
                              "largest_relative_difference_from_peer": worst}],
                  peer={"name": "the same calibrations one after another in one process",
                        "figures": [{"wall_s": wall_seq, "compile_s": alone["compile_s"]}]})


if __name__ == "__main__":
    main()
