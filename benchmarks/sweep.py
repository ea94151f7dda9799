"""A 12-cell method-parameter sweep on 2 Dask workers against the same 12 calibrations one after another.

The cells: the built-in viscous pendulum (J and b free, started 20 % / 30 % off), 2 simulated
recordings (``--duration`` s at 1 ms, 1e-3 rad of noise) x h in {1, 2} ms x w in {1e4, 1e6, 1e8};
calibrations only. Both sides start cold: each gets its own empty JAX persistent compilation
cache, and the one-process peer calibrates from one model object, so it too compiles once per
distinct h (as a worker does). Printed: both wall times, their ratio, the compile time
(JAX tracing, lowering, compiling) per worker and in the peer, and that every cell agrees.

    python benchmarks/sweep.py [--workers 2] [--duration 0.5]
"""

from __future__ import annotations

import argparse
import tempfile
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--duration", type=float, default=0.5, help="length of each recording [s]")
    args = parser.parse_args()

    from mbfg._jax import jax
    from mbfg.calibration import calibrate
    from mbfg.models import pendulum
    from mbfg.spook import simulate
    from mbfg.sweep import sweep

    model = pendulum()
    truth = model.parameters.numpy_values()
    start = model.with_parameters({"J": 1.2 * truth["J"], "b": 0.7 * truth["b"]})
    logs = {f"rec{i}": simulate(model, args.duration, 1e-3, initial=model.initial_state({"theta": th}))
            .to_log(noise=1e-3, seed=i, source=f"rec{i}") for i, th in enumerate((2.0, 1.4))}
    hs, ws = [1e-3, 2e-3], [1e4, 1e6, 1e8]

    with tempfile.TemporaryDirectory() as sweep_cache, tempfile.TemporaryDirectory() as own_cache:
        t0 = time.perf_counter()
        result = sweep(start, logs, h=hs, weight=ws, free=["J", "b"], crossval=False, n_workers=args.workers,
                       cache_dir=sweep_cache, quiet=True)
        wall_sweep = time.perf_counter() - t0

        jax.config.update("jax_compilation_cache_dir", own_cache)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
        compile_s = [0.0]
        jax.monitoring.register_event_duration_secs_listener(
            lambda event, d, **_: compile_s.__setitem__(0, compile_s[0] + d)
            if event.startswith("/jax/core/compile/") else None)
        t0 = time.perf_counter()
        alone = {(name, h, w): calibrate(start, log, free=["J", "b"], h=h, weight=w, quiet=True)
                 for name, log in logs.items() for h in hs for w in ws}
        wall_seq = time.perf_counter() - t0

    cal = result.calibrations
    worst = max(abs(row[f"value:{p.name}"] - p.value) / abs(p.value)
                for _, row in cal.iterrows() for p in alone[(row["log"], row["h"], row["weight"])].parameters)
    print(f"{len(cal)} cells ({(cal['status'] == 'ok').sum()} ok), {len(logs)} recordings of {args.duration:g} s")
    print(f"sweep on {args.workers} Dask workers (cluster start included): {wall_sweep:.1f} s wall")
    print(f"one process, one after another:                    {wall_seq:.1f} s wall")
    print(f"ratio (one process / sweep): {wall_seq / wall_sweep:.2f}x")
    for worker, g in cal.groupby("worker"):
        print(f"  worker {worker}: {len(g)} cells, compile {g['compile_s'].sum():.1f} s of "
              f"{g['wall_s'].sum():.1f} s in its tasks")
    print(f"  one process: compile {compile_s[0]:.1f} s of {wall_seq:.1f} s")
    print(f"largest relative difference of a parameter, sweep vs alone: {worst:.1e}")


if __name__ == "__main__":
    main()
