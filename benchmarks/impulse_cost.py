"""The cost of the Spook impulse factor and of one LM iteration of the 13-parameter Furuta calibration.

Run from anywhere::

    python benchmarks/impulse_cost.py              # 2,001 and 10,001 steps
    python benchmarks/impulse_cost.py --steps 2001 # one size only

1. The impulse factor alone (dry-friction Furuta, all 13 parameters free, a
   simulated swing-up at h = 1 ms), vmapped over N steps: wall time per step of
   the residual and of the residual with its Jacobian, and the compile time, for
   - ``closed form, 5 passes``: the product path (:mod:`mbfg.complementarity`,
     the factor type's ``jacobian_groups``),
   - ``closed form, 1 pass``: the same residual differentiated in one joint pass,
   - ``Lemke, 1 pass``: the previous residual, the whole LCP of eq. 2.31 solved by
     Lemke's method (``residuals.impulse(..., lcp=True)``), as it was differentiated.
2. One LM iteration of the joint problem over the same log (calibration's graph:
   impulse, observation and initial-state factors, the tilt prior), per phase:
   the vectorized linearization (``VectorizedGraph.linearize``), the cost at a
   trial point (``VectorizedGraph.error``), the damped box-constrained step of the
   vectorized LM; beside them, as peers in the same run, GTSAM's sparse Cholesky
   of the same damped linear system (all blocks eliminated in the same order,
   no box) and the ordinary path (``NonlinearFactorGraph.linearize`` through the
   CustomFactors, ``.error``, the damped QR step with a COLAMD ordering).

Times are the best of ``--repeat`` calls after a warm-up (no compile in them).
Asserts nothing; the header prints the load average.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

import _record
import gtsam
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from furuta_calibration import FREE, natural_frequency, start_model, swing_log, truth_model  # noqa: E402

from mbfg import residuals  # noqa: E402
from mbfg._jax import jax  # noqa: E402
from mbfg.adapter import FactorType, PerFactor  # noqa: E402
from mbfg.factors._rigid import fixed_values  # noqa: E402
from mbfg.factors.impulse import impulse_keys, impulse_type  # noqa: E402
from mbfg.graphs.joint import build_joint_problem  # noqa: E402
from mbfg.lm_systems import BlockedSystem, OrdinarySystem  # noqa: E402


def load() -> str:
    return "load average " + ", ".join(f"{x:.2f}" for x in os.getloadavg())


def best(fn, repeat: int) -> float:
    fn()  # warm-up (compiles)
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def lcp_reference_type(variables) -> FactorType:
    """The impulse factor type with the whole LCP solved by Lemke's method, differentiated in one pass."""
    model = variables.model

    def residual(*args):
        (x0, x1), ps, (fixed, u, h) = variables.split(args, 2)
        return residuals.impulse(model, x0, x1, u, variables.parameters(ps, fixed), h, lcp=True)

    return FactorType(f"spook_impulse_lcp_reference[{model.name}]", residual,
                      variables.state_kinds * 2 + variables.parameter_kinds)


def factor_section(problem, repeat: int) -> list[dict]:
    variables = problem.variables
    n = problem.n - 1
    closed = impulse_type(variables)
    one_pass = FactorType(f"{closed.name}-one-pass", closed.residual, closed.kinds)
    lemke = lcp_reference_type(variables)
    fixed = fixed_values(problem.model)
    rows = [impulse_keys(variables, k) for k in range(n)]
    noise = gtsam.noiseModel.Unit.Create(12 * problem.model.nb)
    print(f"\n## 1. impulse factor, vmapped over {n} steps (chunks of 2048): ms per step")
    print(f"{'residual':<24} {'residual':>9} {'+ Jacobian':>11} {'compile s':>10}")
    out = []
    for name, ft in (("closed form, 5 passes", closed), ("closed form, 1 pass", one_pass),
                     ("Lemke, 1 pass", lemke)):
        group = ft.group(rows, noise, fixed, PerFactor(problem.u[:-1]), problem.h)
        xs = group.read(problem.initial)
        start = time.perf_counter()
        group.evaluate(xs, linearize=True)
        compile_s = time.perf_counter() - start
        t_err = best(lambda: group.evaluate(xs, linearize=False), repeat)  # noqa: B023
        t_lin = best(lambda: group.evaluate(xs, linearize=True), repeat)  # noqa: B023
        print(f"{name:<24} {1e3 * t_err / n:>9.4f} {1e3 * t_lin / n:>11.4f} {compile_s:>10.1f}")
        out.append({"steps": n, "figure": f"impulse factor: {name}", "residual_ms_per_step": 1e3 * t_err / n,
                    "with_jacobian_ms_per_step": 1e3 * t_lin / n, "compile_s": compile_s})
    return out


def iteration_section(problem, repeat: int) -> list[dict]:
    n = problem.n
    values = problem.initial
    blocked = BlockedSystem(problem.vectorized, values, problem.bounds)
    ordinary = OrdinarySystem(problem.graph, values, problem.bounds)
    lam = 1e-5
    linear, diag = blocked.linearize(values)
    damped = blocked._damped(linear, diag, lam)
    order = blocked.full_order
    rows = {
        "vectorized linearize": lambda: blocked.linearize(values),
        "vectorized error": lambda: blocked.error(values),
        "vectorized bounded step": lambda: blocked.step(linear, diag, lam, values),
        "  GTSAM sparse Cholesky of the same damped system": lambda: damped.eliminateSequential(order).optimize(),
    }
    o_linear, o_diag = ordinary.linearize(values)
    rows |= {
        "ordinary linearize (CustomFactors)": lambda: ordinary.linearize(values),
        "ordinary error": lambda: ordinary.error(values),
        "ordinary bounded step (damped QR, COLAMD)": lambda: ordinary.step(o_linear, o_diag, lam, values),
    }
    print(f"\n## 2. one LM iteration's phases at {n} steps")
    print(f"{'phase':<52} {'s':>8} {'ms per step':>12}")
    times = {}
    for name, fn in rows.items():
        times[name] = best(fn, repeat)
        print(f"{name:<52} {times[name]:>8.3f} {1e3 * times[name] / n:>12.4f}")
    ratio = times["vectorized bounded step"] / times["  GTSAM sparse Cholesky of the same damped system"]
    print(f"bounded step / sparse Cholesky of the same system: {ratio:.2f}")
    whole = times["vectorized linearize"] + times["vectorized error"] + times["vectorized bounded step"]
    print(f"one vectorized iteration (linearize + one trial: step and error): {whole:.3f} s, "
          f"{1e3 * whole / n:.4f} ms per step")
    times["one vectorized iteration (linearize + error + step)"] = whole
    return [{"steps": n, "figure": f"LM phase: {name.strip()}", "s": s, "ms_per_step": 1e3 * s / n}
            for name, s in times.items()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", default="2001,10001", help="log lengths in steps (default 2001,10001)")
    parser.add_argument("--repeat", type=int, default=3, help="timed calls per figure, best kept (default 3)")
    args = parser.parse_args()
    print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} cores, {load()}; "
          f"jax {jax.__version__}, XLA_FLAGS={os.environ.get('XLA_FLAGS', '')!r}")
    truth = truth_model()
    rows = []
    for steps in (int(s) for s in args.steps.split(",")):
        log, _ = swing_log(truth, steps * 1e-3, 1e-3, 0.4, natural_frequency(truth), 0.0, "swing-up")
        start = start_model(truth, np.random.default_rng(1))
        problem = build_joint_problem(start, log, free=FREE, weight=1e6, smooth_start=None)
        print(f"\n# furuta (dry friction), 13 free parameters, {problem.n} states at h = 1 ms")
        rows += factor_section(problem, args.repeat)
        rows += iteration_section(problem, args.repeat)
    print(f"\n# {load()}")
    _record.write(__file__, rows)


if __name__ == "__main__":
    main()
