"""Spook forward-simulation speed (issue: Spook rigid-body models and simulator).

Run from anywhere::

    python benchmarks/spook_simulate.py            # Furuta, 10 s at h = 1 ms, with and without dry friction
    python benchmarks/spook_simulate.py --duration 2

For each model it prints the JIT compile time (one ``lax.scan`` chunk of 1000
steps, compiled ahead of time), the wall time of the stepping alone, simulated
seconds per wall second, and the total (compile + stepping) against the
simulated duration: a simulation must not take longer than the data it
produces would take to record. Asserts nothing.

The control is a +-1 V square wave at 0.5 Hz (the arm swings back and forth,
so dry friction switches between stick and slip and the LCP works every step).
"""

from __future__ import annotations

import argparse
import os
import platform

import _record
import numpy as np

from mbfg.models import furuta
from mbfg.spook import simulate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=10.0, help="simulated seconds (default 10)")
    parser.add_argument("--dt", type=float, default=1e-3, help="time-step h [s] (default 1e-3)")
    args = parser.parse_args()
    print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"load average {os.getloadavg()[0]:.2f}")
    n = int(round(args.duration / args.dt))
    u = np.sign(np.sin(2 * np.pi * 0.5 * np.arange(n) * args.dt))[:, None]
    print(f"{'model':<16} {'LCP rows':>8} {'compile s':>10} {'stepping s':>11} {'sim s/wall s':>13} "
          f"{'total s':>8} {'recorded s':>11}")
    rows = []
    for model in (furuta(dry=False), furuta(dry=True)):
        traj = simulate(model, args.duration, args.dt, initial=model.initial_state({"alpha": 0.3}), controls=u)
        stepping = traj.wall_s - traj.compile_s
        print(f"{model.name:<16} {model.layout.n_B:>8d} {traj.compile_s:>10.2f} {stepping:>11.2f} "
              f"{args.duration / stepping:>13.1f} {traj.wall_s:>8.2f} {args.duration:>11.1f}")
        rows.append({"model": model.name, "lcp_rows": model.layout.n_B, "compile_s": traj.compile_s,
                     "stepping_s": stepping, "sim_s_per_wall_s": args.duration / stepping, "total_s": traj.wall_s,
                     "recorded_s": args.duration})
    _record.write(__file__, rows)


if __name__ == "__main__":
    main()
