"""Calibration with stiff joints: the double pendulum of a minimal-coordinate ODE at several hinge compliances.

The log: ``tests/rigid_references.py``'s double pendulum (Lagrange's equations in the two hinge
angles, DOP853 at rtol 1e-12: rigid hinges, no discretization), released from (1.0, -0.5) rad,
``--duration`` s at 1 kHz, 1e-3 rad of noise on both angles. The model: ``double_pendulum()`` with
``eps_lin`` = each ``--eps`` value and ``eps_rot`` = 100 times it (the built-in ratio), J1, J2, b1, b2
free and started 20 % high (``--continuation``: each compliance from the previous one's result), at most
``--max-iterations`` LM iterations (calibrate's other defaults).

Printed per compliance: LM iterations, converged, wall, the error of each parameter [%] and the LM
history (cost, lambda after the iteration, gain ratio rho). A stiff hinge removes the compliance
bias (at the default 1e-5 m/N the inertias come out several % low) but the LM must then cross a
narrow curved valley; this shows where it stops.

    python benchmarks/stiff_joints.py                    # eps 1e-5, 1e-7, 1e-8: about 2 min
    python benchmarks/stiff_joints.py --eps 1e-8 --max-iterations 40
    python benchmarks/stiff_joints.py --eps 1e-6,1e-8 --continuation
    python benchmarks/stiff_joints.py --eps 1e-8 --soft-start 100   # CalibrationOptions(soft_start=100)

``--soft-start F`` solves each compliance with joints F times softer first and starts the model's own from
that solution's states and parameters (``CalibrationOptions(soft_start=F)``, :func:`mbfg.graphs.restarts.stiffen`);
``--continuation`` carries only the parameters from one compliance to the next.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import _record
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import rigid_references as reference  # noqa: E402

from mbfg.calibration import calibrate  # noqa: E402
from mbfg.calibration_options import CalibrationOptions, calibration_lm  # noqa: E402
from mbfg.logs import Log  # noqa: E402
from mbfg.models import double_pendulum  # noqa: E402

FREE = ["J1", "J2", "b1", "b2"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--eps", default="1e-5,1e-7,1e-8", help="eps_lin values [m/N] (default 1e-5,1e-7,1e-8)")
    parser.add_argument("--duration", type=float, default=4.0, help="log length [s] (default 4)")
    parser.add_argument("--max-iterations", type=int, default=20)
    parser.add_argument("--damping", default="tenfold", choices=("tenfold", "nielsen"))
    parser.add_argument("--continuation", action="store_true",
                        help="start each compliance from the previous one's result (continuation in eps) instead "
                             "of from +20 %%")
    parser.add_argument("--soft-start", type=float, default=None, metavar="F",
                        help="calibrate(soft_start=F): a first solve with joints F times softer (default: none)")
    args = parser.parse_args()
    print("# load average " + ", ".join(f"{x:.2f}" for x in os.getloadavg()))

    model = double_pendulum()
    truth = model.parameters.numpy_values()
    t = np.arange(0.0, args.duration + 1e-9, 1e-3)
    q = reference.simulate_reference(reference.double_pendulum_ode, [1.0, -0.5, 0.0, 0.0], t, truth)[:, :2]
    noise = 1e-3 * np.random.default_rng(0).standard_normal(q.shape)
    log = Log(t, q + noise, np.zeros((len(t), 0)), model.observations, model.controls, "minimal-coordinate ODE")
    start = model.with_parameters({name: 1.2 * truth[name] for name in FREE})
    print(f"# double pendulum, {args.duration:g} s at 1 kHz, 1e-3 rad noise; {', '.join(FREE)} free, started +20 %; "
          f"damping {args.damping}")
    rows = []
    for eps in (float(e) for e in args.eps.split(",")):
        stiff = start.with_parameters({"eps_lin": eps, "eps_rot": 100.0 * eps})
        t0 = time.perf_counter()
        result = calibrate(stiff, log, free=FREE,
                           lm=calibration_lm(stiff, max_iterations=args.max_iterations, damping_update=args.damping),
                           options=CalibrationOptions(covariance=False, soft_start=args.soft_start))
        errors = ", ".join(f"{p.name} {100 * (p.value - truth[p.name]) / truth[p.name]:+.3f} %" for p in result.parameters)
        soft = result.problem.softened_from
        soft_said = "" if soft is None else (
            f" ({soft.iterations} with joints {args.soft_start:g} x softer, "
            f"{'converged' if soft.converged else 'NOT converged'}; {result.iterations - soft.iterations} stiff)")
        print(f"\neps_lin {eps:g} m/N, eps_rot {100 * eps:g} rad/(N m): {result.iterations} iterations{soft_said}"
              + f", {'converged' if result.converged else 'NOT converged'}, {time.perf_counter() - t0:.1f} s; {errors}")
        rows.append({"eps_lin": eps, "eps_rot": 100.0 * eps, "iterations": result.iterations,
                     "soft_iterations": None if soft is None else soft.iterations, "converged": result.converged,
                     "wall_s": time.perf_counter() - t0, "final_cost": result.history[-1]["cost"],
                     "error_percent": {p.name: 100 * (p.value - truth[p.name]) / truth[p.name]
                                       for p in result.parameters}})
        print("  iter  cost (0.5 sum r^2)   lambda    rho")
        for row in result.history[1:]:
            print(f"  {int(row['iteration']):>4} {row['cost']:>19.4e} {row['lam']:>8.0e} {row['rho']:>6.3f}")
        if args.continuation:
            start = start.with_parameters({p.name: p.value for p in result.parameters})
    print("\n# load average " + ", ".join(f"{x:.2f}" for x in os.getloadavg()))
    _record.write(__file__, rows)


if __name__ == "__main__":
    main()
