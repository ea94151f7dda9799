"""Soak test of the stream estimator (mbfg.graphs.stream): an hour of 1 kHz stream time with faults every few
seconds, replayed as fast as possible; memory (RSS) over stream time and the per-sample time percentiles.

The stream is a simulated pendulum (2048 counts per revolution, quantized
readings) of ``--segment`` seconds, repeated: each copy follows the last after
a 1 s outage (a gap beyond ``max_gap``: dropped as leaps, then the window
restarts on the clock), and inside each copy a seeded generator puts a fault
every ``--fault-every`` seconds on average: a time leap (+1 s, +60 s or to
t = 1e6 s), a gap of 20-100 ms, a non-finite reading, a duplicate, an empty
reading or an encoder glitch (a jump). Memory must stay flat: RSS is printed at
1, 10, 30 and 60 minutes of stream time (those within ``--minutes``) and at the
end.

    python benchmarks/stream_soak.py               # the hour (about an hour of wall time or more)
    python benchmarks/stream_soak.py --minutes 3   # a shorter soak
"""

from __future__ import annotations

import argparse
import gc
import math
import os
import sys
import time

import _record
import numpy as np

from mbfg.graphs.stream import StreamEstimator
from mbfg.logs import quantize
from mbfg.models import pendulum
from mbfg.spook import simulate, unwrap_angles

PPR = 2048
H = 1e-3
MARKS_MIN = (1, 10, 30, 60)


def rss_mb() -> float:
    """Resident set size of this process [MB] (Linux /proc)."""
    with open("/proc/self/statm") as fh:
        pages = int(fh.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 1e6


def segment(seconds: float) -> tuple[np.ndarray, np.ndarray]:
    """A swinging pendulum: times (n,) [s] from 0 and quantized readings (n,) [rad]."""
    model = pendulum()
    traj = simulate(model, seconds, H, initial=model.initial_state({"theta": 2.5}, {"theta": 3.0}))
    return np.asarray(traj.t), quantize(unwrap_angles(model, traj.observations), PPR)[:, 0]


def faulted_stream(t_seg: np.ndarray, y_seg: np.ndarray, minutes: float, fault_every: float, seed: int,
                   injected: dict[str, int]):
    """Yield (t, reading or None) for ``minutes`` of stream time; count the injected faults by kind in
    ``injected``."""
    rng = np.random.default_rng(seed)
    seg_len = t_seg[-1] + H
    offset, end = 0.0, minutes * 60.0
    p_fault = H / fault_every
    while offset < end:
        i = 0
        while i < len(t_seg):
            t, y = offset + t_seg[i], float(y_seg[i])
            if t >= end:
                return
            if i > 10 and rng.random() < p_fault:
                kind = ("leap", "gap", "nan", "duplicate", "empty", "glitch")[int(rng.integers(0, 6))]
                injected[kind] = injected.get(kind, 0) + 1
                if kind == "leap":
                    yield (1e6 if rng.random() < 0.3 else t + float(rng.choice([1.0, 60.0]))), y
                    i += 1
                    continue
                if kind == "gap":
                    i += int(rng.integers(20, 101))
                    continue
                if kind == "nan":
                    y = math.nan
                elif kind == "duplicate":
                    yield t, y
                elif kind == "empty":
                    y = None
                else:
                    y += 1.0
            yield t, y
            i += 1
        offset += seg_len + 1.0  # a 1 s outage between copies (a restart of the window)
        injected["outage"] = injected.get("outage", 0) + 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=60.0, help="stream time [min] (default: %(default)s)")
    ap.add_argument("--segment", type=float, default=20.0, help="seconds of simulated log repeated (default: 20)")
    ap.add_argument("--fault-every", type=float, default=3.0, help="mean seconds between faults (default: 3)")
    ap.add_argument("--update-every", type=int, default=1)
    ap.add_argument("--seed", type=int, default=20)
    args = ap.parse_args(argv)

    t_seg, y_seg = segment(args.segment)
    est = StreamEstimator(pendulum(), lag=0.05, h=H, ppr=PPR, update_every=args.update_every,
                          on_warning=lambda m: None)
    print(f"compiling ... {est.warm_up():.1f} s", flush=True)
    gc.collect()
    gc.freeze()  # as 'mbfg smooth' does: full collections off JAX's objects
    n_max = int(args.minutes * 60 / H) + 1000
    step_s = np.empty(n_max, dtype=np.float32)
    marks = [m for m in MARKS_MIN if m <= args.minutes]
    rows = []
    n = 0
    wall0 = time.perf_counter()
    next_mark = 0
    injected: dict[str, int] = {}
    gen = faulted_stream(t_seg, y_seg, args.minutes, args.fault_every, args.seed, injected)
    for t, y in gen:
        start = time.perf_counter()
        est.push(t, [y])
        if n < n_max:
            step_s[n] = time.perf_counter() - start
        n += 1
        stream_min = est.status.samples * H / 60.0
        if next_mark < len(marks) and stream_min >= marks[next_mark]:
            rows.append((marks[next_mark], rss_mb(), time.perf_counter() - wall0))
            print(f"  {marks[next_mark]:>4g} min of stream: RSS {rows[-1][1]:.0f} MB, "
                  f"{rows[-1][2]:.0f} s wall", flush=True)
            next_mark += 1
    est.flush()
    wall = time.perf_counter() - wall0
    rows.append((n * H / 60.0, rss_mb(), wall))
    st = est.status
    ms = np.asarray(step_s[: min(n, n_max)], dtype=float) * 1e3
    print(f"\nsoak: {n} samples ({n * H / 60:.1f} min of stream at 1 kHz), {wall:.0f} s wall, "
          f"{n / wall:.0f} samples per wall second")
    print(f"injected: {injected}")
    print(f"status: {st.summary()}")
    print("RSS [MB] by stream time:  " + ", ".join(f"{m:.3g} min {r:.0f}" for m, r, _ in rows))
    pct = np.percentile(ms, [50, 90, 99, 99.9])
    print(f"per-sample time [ms]: p50 {pct[0]:.3f}, p90 {pct[1]:.3f}, p99 {pct[2]:.3f}, p99.9 {pct[3]:.3f}, "
          f"max {ms.max():.1f}")
    _record.write(__file__, [{"stream_min": m, "rss_mb": r, "wall_s": w} for m, r, w in rows[:-1]] + [{
        "stream_min": rows[-1][0], "rss_mb": rows[-1][1], "wall_s": wall, "samples": n,
        "samples_per_wall_s": n / wall, "sample_ms_p50": pct[0], "sample_ms_p90": pct[1], "sample_ms_p99": pct[2],
        "sample_ms_p99.9": pct[3], "sample_ms_max": ms.max(), "injected": dict(injected),
        "status": st.summary()}])
    return 0


if __name__ == "__main__":
    sys.exit(main())
