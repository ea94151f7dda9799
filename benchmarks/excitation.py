"""The exciting trajectory of the Panda-like arm (``datasets/panda.urdf``): the condition number of the
base-parameter regressor of the optimized Fourier trajectory (``mbfg.excitation.excite``, Swevers et al. 1997)
beside the random Fourier trajectory of the same duration, harmonics and seed it starts from (the peer), the
limits checked on a 1 ms grid, and the wall time (compiling included: one run per process).

    python benchmarks/excitation.py                                   # 10 s, 5 harmonics, 150 samples
    python benchmarks/excitation.py --duration 10 --harmonics 3 --samples 100 --max-iterations 60
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import _record
import numpy as np

from mbfg.excitation import ExcitationOptions, check_limits, excite
from mbfg.kinematic_tree import load_tree

PANDA = Path(__file__).resolve().parents[1] / "datasets" / "panda.urdf"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--harmonics", type=int, default=5)
    parser.add_argument("--samples", type=int, default=150)
    parser.add_argument("--max-iterations", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    tree = load_tree(PANDA)
    options = ExcitationOptions(duration=args.duration, harmonics=args.harmonics, samples=args.samples,
                                max_iterations=args.max_iterations, seed=args.seed)
    start = time.perf_counter()
    result = excite(tree, options)
    wall = time.perf_counter() - start
    t = np.arange(int(round(args.duration / 1e-3)) + 1) * 1e-3
    check_limits(tree, result.trajectory, t, options)  # raises if a limit is exceeded between the samples
    row = {"duration_s": args.duration, "harmonics": args.harmonics, "samples": args.samples,
           "base_parameters": result.base_rank}
    figures = [{**row, "condition": result.condition, "iterations": result.iterations, "wall_s": round(wall, 2),
                "limits_held_1ms": True}]
    peer = [{**row, "condition": result.random_condition}]
    print(f"panda: condition number {result.condition:.4g} optimized ({result.iterations} iterations, {wall:.1f} s "
          f"wall with compiling) vs {result.random_condition:.4g} random Fourier start (seed {args.seed})")
    _record.write(__file__, figures, peer={"name": "the random Fourier trajectory it starts from (same seed)",
                                           "figures": peer}, out=args.out)


if __name__ == "__main__":
    main()
