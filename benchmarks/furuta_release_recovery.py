"""Synthetic recovery on a Furuta release log (Marklund et al. (2025) section 4.7), a diagnostic.

Run from anywhere::

    python benchmarks/furuta_release_recovery.py                     # h = 1 ms, w = 1e6, 60 LM iterations
    python benchmarks/furuta_release_recovery.py --dt 2e-3 --weight 1e8
    python benchmarks/furuta_release_recovery.py --sim-dt 2.5e-4 --dt 1e-3,2e-3,4e-3   # shadow-parameter study

The viscous Furuta pendulum (motor off) is released at alpha = pi - 0.2 rad and
simulated for 2 s at --sim-dt (default 1 ms); Gaussian noise of --noise rad
(default 1e-3) is added to both angles. Four parameters (J_Az, J_Bx, b_1, b_2),
started 20 % above the truth, are identified at each time-step h of --dt;
printed per h: LM iterations, wall time, the cost split, and each estimate's
error in units of its linearized standard deviation and relative to the truth.

Shadow parameters (Marklund et al. (2025) section 4.7): the discrete Spook model at step h
is fitted to a log from the continuous system (here: a Spook simulation at a
much finer step), so the best-fitting parameters differ from the true ones by a
bias that vanishes as h -> 0 with the method's order (first order for Spook).
With --sim-dt well below the finest h the relative errors should shrink
roughly in proportion to h. Asserts nothing.
"""

from __future__ import annotations

import argparse
import time

import _record
import numpy as np

from mbfg.calibration import calibrate
from mbfg.calibration_options import calibration_lm
from mbfg.models import furuta
from mbfg.spook import simulate

FREE = ["J_Az", "J_Bx", "b_1", "b_2"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dt", default="1e-3",
                        help="estimation time-step(s) h [s], comma-separated, multiples of --sim-dt (default 1e-3)")
    parser.add_argument("--sim-dt", type=float, default=1e-3, help="simulation step and log period [s] (default 1e-3)")
    parser.add_argument("--noise", type=float, default=1e-3, help="angle noise standard deviation [rad]")
    parser.add_argument("--weight", type=float, default=1e6, help="state error weight w")
    parser.add_argument("--iterations", type=int, default=60, help="LM iteration limit")
    args = parser.parse_args()
    model = furuta(dry=False)
    traj = simulate(model, 2.0, args.sim_dt, initial=model.initial_state({"alpha": np.pi - 0.2}))
    log = traj.to_log(noise=args.noise, seed=0, source="release")
    truth = model.parameters.numpy_values()
    start = model.with_parameters({k: 1.2 * truth[k] for k in FREE})
    print(f"# release log: 2 s simulated at {args.sim_dt:g} s, noise {args.noise:g} rad; w = {args.weight:g}")
    rows = []
    figures = []
    for h in (float(x) for x in args.dt.split(",")):
        t0 = time.perf_counter()
        result = calibrate(start, log, free=FREE, h=h, weight=args.weight,
                           lm=calibration_lm(start, max_iterations=args.iterations))
        print(f"\nh = {h:g} s: {result.iterations} LM iterations, "
              f"{'converged' if result.converged else 'NOT converged'}, {time.perf_counter() - t0:.0f} s; "
              f"cost per step: observation {result.cost_observation:.3e}, impulse {result.cost_impulse:.3e}")
        print("cost per step by iteration: " + " ".join(f"{2 * row['cost'] / result.problem.n:.3e}"
                                                        for row in result.history))
        print(f"{'parameter':<8} {'estimate':>12} {'truth':>12} {'std':>10} {'error/std':>10} {'error/truth':>12}")
        for p in result.parameters:
            print(f"{p.name:<8} {p.value:>12.5e} {truth[p.name]:>12.5e} {p.std:>10.2e} "
                  f"{(p.value - truth[p.name]) / p.std:>10.2f} {(p.value - truth[p.name]) / truth[p.name]:>12.2e}")
        rows.append((h, {p.name: (p.value - truth[p.name]) / truth[p.name] for p in result.parameters}))
        figures += [{"h_s": h, "parameter": p.name, "estimate": p.value, "truth": truth[p.name], "std": p.std,
                     "error_per_std": (p.value - truth[p.name]) / p.std,
                     "error_per_truth": (p.value - truth[p.name]) / truth[p.name], "iterations": result.iterations,
                     "converged": result.converged, "wall_s": time.perf_counter() - t0} for p in result.parameters]
    if len(rows) > 1:
        print("\nrelative error (estimate - truth) / truth against h:")
        print(f"{'h [s]':>8} " + " ".join(f"{name:>10}" for name in FREE))
        for h, rel in rows:
            print(f"{h:>8.1e} " + " ".join(f"{rel[name]:>10.2e}" for name in FREE))
    _record.write(__file__, figures)


if __name__ == "__main__":
    main()
