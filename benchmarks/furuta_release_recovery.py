"""Synthetic recovery on a Furuta release log (seed 001 section 4.7), a diagnostic.

Run from anywhere::

    python benchmarks/furuta_release_recovery.py                     # h = 1 ms, w = 1e6, 60 LM iterations
    python benchmarks/furuta_release_recovery.py --dt 2e-3 --weight 1e8

The viscous Furuta pendulum (motor off) is released at alpha = pi - 0.2 rad and
simulated for 2 s at 1 ms; Gaussian noise of 1e-3 rad is added to both angles.
Four parameters (J_Az, J_Bx, b_1, b_2), started 20 % above the truth, are
identified; printed: LM iterations, wall time, the cost split, and each
estimate's error in units of its linearized standard deviation. Asserts nothing.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from mbfg.calibration import calibrate
from mbfg.logs import Log
from mbfg.models import furuta
from mbfg.spook import simulate, unwrap_angles

FREE = ["J_Az", "J_Bx", "b_1", "b_2"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dt", type=float, default=1e-3, help="estimation time-step h [s] (multiple of 1 ms)")
    parser.add_argument("--weight", type=float, default=1e6, help="state error weight w")
    parser.add_argument("--iterations", type=int, default=60, help="LM iteration limit")
    args = parser.parse_args()
    model = furuta(dry=False)
    traj = simulate(model, 2.0, 1e-3, initial=model.initial_state({"alpha": np.pi - 0.2}))
    rng = np.random.default_rng(0)
    y = unwrap_angles(model, traj.observations) + 1e-3 * rng.standard_normal(traj.observations.shape)
    log = Log(traj.t, y, np.zeros((len(traj.t), 1)), model.observations, model.controls, "release")
    truth = model.parameters.numpy_values()
    start = model.with_parameters({k: 1.2 * truth[k] for k in FREE})
    t0 = time.perf_counter()
    result = calibrate(start, log, free=FREE, h=args.dt, weight=args.weight, max_iterations=args.iterations,
                       quiet=True)
    print(f"h = {args.dt} s, w = {args.weight:g}: {result.iterations} LM iterations, "
          f"{'converged' if result.converged else 'NOT converged'}, {time.perf_counter() - t0:.0f} s; "
          f"cost per step: observation {result.cost_observation:.3e}, impulse {result.cost_impulse:.3e}")
    print(f"{'parameter':<8} {'estimate':>12} {'truth':>12} {'std':>10} {'error/std':>10}")
    for p in result.parameters:
        print(f"{p.name:<8} {p.value:>12.5e} {truth[p.name]:>12.5e} {p.std:>10.2e} "
              f"{(p.value - truth[p.name]) / p.std:>10.2f}")


if __name__ == "__main__":
    main()
