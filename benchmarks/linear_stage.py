"""The linear stage (a carriage on a ball screw, `mbfg models linear-stage`): calibration and the stream.

The log: ``linear_stage()`` with M = 5 kg, F_v = 20 N s/m, F_c = 8 N, F_0 = 1.5 N, driven by the
current ``0.4 sin(2 pi 0.7 t) + 0.1 sign(sin(2 pi 2.1 t))`` [A] (K_F = 150 N/A) for ``--duration`` s at
1 kHz; ``--noise`` [m] of Gaussian noise, then a linear encoder of ``--resolution`` m per count.

1. Calibration of M, F_v, F_c, F_0 from M = 4, F_v = 15, F_c = 6, F_0 = 0 at the state error weight
   ``--weight``: iterations, converged, wall, and per parameter the value, std, error [%] and error / std.
2. The fixed-lag stream (``StreamEstimator``, lag 20, 5 samples per update) on the same log with the
   true parameters: filtered and smoothed position error [um] and velocity RMS error [mm/s] against the
   simulated states after the first 50 ms (the stream starts with an unknown velocity), and the time per
   sample.

    python benchmarks/linear_stage.py                      # about 1 min
    python benchmarks/linear_stage.py --weight 1e6         # the default weight: see the README
"""

from __future__ import annotations

import argparse
import time

import _record
import numpy as np

from mbfg.calibration import calibrate
from mbfg.graphs.stream import StreamEstimator, joint_coordinates
from mbfg.models import linear_stage
from mbfg.spook import simulate

TRUTH = {"M": 5.0, "F_v": 20.0, "F_c": 8.0, "F_0": 1.5}
START = {"M": 4.0, "F_v": 15.0, "F_c": 6.0, "F_0": 0.0}
H = 1e-3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--duration", type=float, default=2.0, help="log length [s]")
    parser.add_argument("--noise", type=float, default=5e-6, help="observation noise [m]")
    parser.add_argument("--resolution", type=float, default=1e-6, help="encoder resolution [m per count]")
    parser.add_argument("--weight", type=float, default=1e2, help="state error weight w")
    parser.add_argument("--seed", type=int, default=3)
    args = parser.parse_args()

    model = linear_stage()
    n = int(round(args.duration / H))
    t = np.arange(n) * H
    current = 0.4 * np.sin(2 * np.pi * 0.7 * t) + 0.1 * np.sign(np.sin(2 * np.pi * 2.1 * t))
    truth = model.with_parameters(TRUTH)
    trajectory = simulate(truth, n * H, H, controls=current[:, None])
    log = trajectory.to_log(noise=args.noise, seed=args.seed, resolution=args.resolution)
    print(f"linear stage: {n} steps of {H:g} s, noise {args.noise:g} m, encoder {args.resolution:g} m per count")

    result = calibrate(model.with_parameters(START), log, weight=args.weight)
    print(f"calibration (w = {args.weight:g}): {result.iterations} LM iterations, "
          f"{'converged' if result.converged else 'NOT converged'}, {result.wall_s:.1f} s wall (compile included)")
    print(f"  {'parameter':<10}{'value':>12}{'std':>12}{'error %':>10}{'error/std':>11}")
    figures: dict[str, list] = {"calibration": [], "stream": []}
    for p in result.parameters:
        error = p.value - TRUTH[p.name]
        figures["calibration"].append({"parameter": p.name, "value": p.value, "truth": TRUTH[p.name], "std": p.std,
                                       "error_percent": 100 * error / TRUTH[p.name], "error_per_std": error / p.std,
                                       "iterations": result.iterations, "converged": result.converged,
                                       "wall_s": result.wall_s})
        print(f"  {p.name:<10}{p.value:>12.6g}{p.std:>12.3g}{100 * error / TRUTH[p.name]:>10.4f}"
              f"{error / p.std:>11.2f}")

    sigma = float(np.hypot(args.noise, args.resolution / np.sqrt(12.0)))  # noise and quantization
    estimator = StreamEstimator(truth, lag=20, h=H, sigma_observation=sigma, update_every=5)
    start = time.perf_counter()
    replay = estimator.replay(log)
    wall = time.perf_counter() - start
    q, qd = joint_coordinates(truth, trajectory.states)
    k = len(replay.t)
    print(f"stream (lag 20, 5 samples per update): {k} samples in {wall:.1f} s wall "
          f"({1e3 * wall / k:.2f} ms per sample, compile included)")
    for label, q_est, qd_est in (("filtered", replay.filtered_q, replay.filtered_qdot),
                                 ("smoothed", replay.smoothed_q, replay.smoothed_qdot)):
        # After the first 50 ms: the stream starts with an unknown velocity.
        dq = np.asarray(q_est)[50:, 0] - q[50:k, 0]
        dqd = np.asarray(qd_est)[50:, 0] - qd[50:k, 0]
        print(f"  {label}: position error max {1e6 * np.abs(dq).max():.3f} um, "
              f"velocity error RMS {1e3 * np.sqrt(np.mean(dqd ** 2)):.4f} mm/s")
        figures["stream"].append({"estimate": label, "position_error_max_um": 1e6 * np.abs(dq).max(),
                                  "velocity_error_rms_mm_s": 1e3 * np.sqrt(np.mean(dqd ** 2)),
                                  "ms_per_sample": 1e3 * wall / k})
    _record.write(__file__, figures)


if __name__ == "__main__":
    main()
