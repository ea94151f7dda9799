"""Time per receding-horizon solve (the control note control) for the Furuta pendulum at h = 1 ms.

For each horizon N two controllers (target arm rate theta = 2 rad/s, |u| <= 10 V) run in closed loop on
the Spook simulator from rest (the linearized one for more steps, so that its median is steady): the
Levenberg-Marquardt solve to convergence (:class:`mbfg.graphs.control.RecedingHorizon`, "LM") and the
real-time scheme that linearizes the horizon once per step and solves it exactly
(:class:`mbfg.graphs.control_linearized.LinearizedHorizon`, "linearized"). The first solve compiles and
is reported apart. Printed per N and scheme: the median and 90th percentile wall time of the warm-started
solves (the time to compute the controls), iterations, the ratio to the 1 ms step they control, the
arm-rate error at the end, and the largest difference of the applied voltages from the LM's; then the
Spook step itself (the compiled simulator, per step) as the peer the controller must keep up with.

    python benchmarks/control.py                 # N = 1, 10, 50; 20 closed-loop steps (LM), 500 (linearized)
    python benchmarks/control.py --horizons 1 10 --steps 20
"""

from __future__ import annotations

import argparse
import time

import _record
import numpy as np

from mbfg import spook
from mbfg.graphs.control import RecedingHorizon
from mbfg.graphs.control_linearized import LinearizedHorizon
from mbfg.models import furuta

H = 1e-3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--horizons", type=int, nargs="+", default=[1, 10, 50])
    parser.add_argument("--steps", type=int, default=20, help="closed-loop steps per horizon and scheme (default 20)")
    parser.add_argument("--fast-steps", type=int, default=500,
                        help="closed-loop steps of the linearized scheme (default 500; its first --steps are compared)")
    args = parser.parse_args()
    model = furuta(dry=False)
    x0 = model.initial_state()

    sim = spook.simulate(model, 1000 * H, H, initial=x0)  # compiled once, then timed per step
    start = time.perf_counter()
    spook.simulate(model, 1000 * H, H, initial=x0)
    step_ms = 1e3 * (time.perf_counter() - start) / 1000
    del sim

    print(f"Furuta (furuta-viscous), h = {H * 1e3:g} ms, target theta = 2 rad/s, |u| <= 10 V, "
          f"{args.steps} closed-loop steps per horizon (LM), {args.fast_steps} (linearized; its first {args.steps} "
          "compared)")
    print(f"{'N':>4} {'scheme':>10} {'compile+first [s]':>18} {'median [ms]':>12} {'p90 [ms]':>10} {'iter':>5} "
          f"{'solve / step':>13} {'|theta rate - 2| end':>21} {'max |u - u_LM| [V]':>19}")
    rows = []
    for N in args.horizons:
        applied = None
        for scheme, kind in (("LM", RecedingHorizon), ("linearized", LinearizedHorizon)):
            controller = kind(model, H, N, rates={"theta": 2.0}, lower=[-10.0], upper=[10.0])
            loop = controller.run(x0, args.steps if scheme == "LM" else args.fast_steps)
            if applied is None:
                applied = loop.controls
            warm = 1e3 * loop.solve_s[1:]
            print(f"{N:>4} {scheme:>10} {loop.solve_s[0]:>18.2f} {np.median(warm):>12.2f} "
                  f"{np.percentile(warm, 90):>10.2f} {np.mean(loop.iterations[1:]):>5.1f} "
                  f"{np.median(warm) / (H * 1e3):>12.2f}x {abs(loop.rate_error()[-1, 0]):>21.2e} "
                  f"{np.abs(loop.controls[:len(applied)] - applied).max():>19.1e}")
            rows.append({"N": N, "scheme": scheme, "compile_first_s": loop.solve_s[0], "median_ms": np.median(warm),
                         "p90_ms": np.percentile(warm, 90), "iterations": np.mean(loop.iterations[1:]),
                         "solve_per_step": np.median(warm) / (H * 1e3),
                         "rate_error_end": abs(loop.rate_error()[-1, 0]),
                         "max_u_minus_u_LM_V": np.abs(loop.controls[:len(applied)] - applied).max()})
    print(f"peer: one Spook step of the same model, compiled scan: {step_ms:.4f} ms "
          f"({H * 1e3 / step_ms:.0f} steps per 1 ms of simulated time)")
    _record.write(__file__, rows, peer={"name": "one Spook step of the same model, compiled scan",
                                        "figures": [{"step_ms": step_ms}]})


if __name__ == "__main__":
    main()
