"""Time per receding-horizon solve (seed 004 control) for the Furuta pendulum at h = 1 ms.

For each horizon N the controller (:class:`mbfg.graphs.control.RecedingHorizon`, target arm rate
theta = 2 rad/s, |u| <= 10 V) runs in closed loop on the Spook simulator from rest; the first
solve compiles the horizon factor and is reported apart. Printed per N: the median and 90th
percentile wall time of the warm-started solves, LM iterations, the ratio to the 1 ms step they
control, and the arm-rate error at the end; then the Spook step itself (the compiled simulator,
per step) as the peer the controller must keep up with.

    python benchmarks/control.py                 # N = 1, 10, 50; 10 closed-loop steps each
    python benchmarks/control.py --horizons 1 10 --steps 20
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from mbfg import spook
from mbfg.graphs.control import RecedingHorizon
from mbfg.models import furuta

H = 1e-3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--horizons", type=int, nargs="+", default=[1, 10, 50])
    parser.add_argument("--steps", type=int, default=10, help="closed-loop steps per horizon (default 10)")
    args = parser.parse_args()
    model = furuta(dry=False)
    x0 = model.initial_state()

    sim = spook.simulate(model, 1000 * H, H, initial=x0)  # compiled once, then timed per step
    start = time.perf_counter()
    spook.simulate(model, 1000 * H, H, initial=x0)
    step_ms = 1e3 * (time.perf_counter() - start) / 1000
    del sim

    print(f"Furuta (furuta-viscous), h = {H * 1e3:g} ms, target theta = 2 rad/s, |u| <= 10 V, "
          f"{args.steps} closed-loop steps per horizon")
    print(f"{'N':>4} {'compile+first [s]':>18} {'median [ms]':>12} {'p90 [ms]':>10} {'LM iter':>8} "
          f"{'solve / step':>13} {'|theta rate - 2| end':>21}")
    for N in args.horizons:
        controller = RecedingHorizon(model, H, N, rates={"theta": 2.0}, lower=[-10.0], upper=[10.0])
        loop = controller.run(x0, args.steps)
        warm = 1e3 * loop.solve_s[1:]
        print(f"{N:>4} {loop.solve_s[0]:>18.2f} {np.median(warm):>12.2f} {np.percentile(warm, 90):>10.2f} "
              f"{np.mean(loop.iterations[1:]):>8.2f} {np.median(warm) / (H * 1e3):>12.1f}x "
              f"{abs(loop.rate_error()[-1, 0]):>21.2e}")
    print(f"peer: one Spook step of the same model, compiled scan: {step_ms:.4f} ms "
          f"({H * 1e3 / step_ms:.0f} steps per 1 ms of simulated time)")


if __name__ == "__main__":
    main()
