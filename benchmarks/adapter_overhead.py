"""The adapter's overhead: a user's simple residual against GTSAM's native factor, in the same run.

Run from the repository root::

    python benchmarks/adapter_overhead.py                 # 2,000 range factors, best of 3
    python benchmarks/adapter_overhead.py --repeat 5 --out /tmp/overhead.json

The problem: 100 Pose3 and 50 Point3 landmarks, each pose ranging 20 landmarks (2,000 range factors,
``|l - t| - r``, sigma 1 cm), and a ``PriorFactorPose3`` on every pose (GTSAM's own in every variant). The
range factors are built four ways:

- ``native``: GTSAM's ``RangeFactor3D`` (the peer);
- ``make``: ``FactorType.make`` per factor (one JAX call per factor and evaluation);
- ``make_many``: ``FactorType.make_many`` (one vmapped JAX call per group and evaluation; GTSAM still calls
  back once per factor);
- ``vectorized``: the ``make_many`` graph through ``VectorizedGraph.from_graph`` (no per-factor callback:
  one call per group, the linear factors built in Python);
- ``make_bundles``: ``FactorType.make_bundles(..., by=0)``: one CustomFactor per pose for its 20 ranges (100
  callbacks per evaluation instead of 2,000), from the same vectorized evaluation.

Timed, best of ``--repeat``: ``linearize`` (``graph.linearize(values)`` with the user's ``Values``), and a
4-iteration Levenberg-Marquardt solve, by GTSAM's ``LevenbergMarquardtOptimizer`` and by mbfg's
``bounded_levenberg_marquardt`` (no bounds). Each solution is checked against the native factors' under the
same solver (max difference of the poses' matrices and the landmarks; the run fails above 1e-9 m).

Floors: what GTSAM's Python binding costs whatever the adapter does. ``floor: native + no-op callbacks`` is
the native graph plus, per range, a CustomFactor whose callback returns a zero residual and zero Jacobians
(precomputed arrays): the problem, hence every solver's iterates, are the native one's, and the time beyond
native is that of 2,000 Python callbacks per evaluation, the least one factor per row can cost. Under GTSAM's
optimizers each callback's ``Values`` is a copy of the optimizer's (pybind copies a C++ ``Values`` that Python
did not create), so it costs in proportion to the number of variables. ``floor: native + no-op bundles`` adds
the 100 bundles' no-op CustomFactors instead (the same keys and sizes as ``make_bundles``'): the least
bundling can cost, callbacks and the bundles' zero blocks in the elimination. ``floor: building
JacobianFactors``: 2,000 ``JacobianFactor`` s built and added from Python (what any linearization in Python
pays).

Writes the figures (and the native peer's) to ``--out`` (default ``benchmarks/results/adapter_overhead.json``).
Asserts only the agreement of the solutions; times are wall times on a possibly shared machine (the record
keeps the load average).
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from typing import Any

import _record
import gtsam
import numpy as np

LOAD_AT_START = os.getloadavg()

from mbfg._jax import jax, jnp  # noqa: E402  (after the load is taken)
from mbfg.adapter import PerFactor  # noqa: E402
from mbfg.factor_type import Point3Var, Pose3Var, factor_type  # noqa: E402
from mbfg.lm_config import LMConfig  # noqa: E402
from mbfg.solvers import LMResult, bounded_levenberg_marquardt  # noqa: E402
from mbfg.vectorized import VectorizedGraph  # noqa: E402

POSES, LANDMARKS, RANGES_PER_POSE = 100, 50, 20
SIGMA_RANGE = 0.01  # [m]
ITERATIONS = 4


@factor_type(name="benchmark_range_3d")
def range_3d(pose: Pose3Var, landmark: Point3Var, distance: jax.Array) -> jax.Array:
    """Distance (1,) [m] from a pose's origin (4, 4) to a landmark (3,) [m], minus the measured one: GTSAM's
    ``RangeFactor3D``."""
    return jnp.atleast_1d(jnp.linalg.norm(landmark - pose[:3, 3]) - distance)


class Problem:
    """The range problem (module docstring): truth, measurements with noise, a perturbed initial guess."""

    def __init__(self, seed: int = 0) -> None:
        rng = np.random.default_rng(seed)
        self.X = [gtsam.symbol("x", i) for i in range(POSES)]
        self.L = [gtsam.symbol("l", j) for j in range(LANDMARKS)]
        self.poses = [gtsam.Pose3(gtsam.Rot3.Expmap(rng.standard_normal(3)), rng.uniform(-10, 10, 3))
                      for _ in range(POSES)]
        landmarks = [rng.uniform(-10, 10, 3) for _ in range(LANDMARKS)]
        self.measurements = [(i, int(j), self.poses[i].range(landmarks[j]) + SIGMA_RANGE * rng.standard_normal())
                             for i in range(POSES) for j in rng.choice(LANDMARKS, RANGES_PER_POSE, replace=False)]
        self.noise = gtsam.noiseModel.Isotropic.Sigma(1, SIGMA_RANGE)
        self.prior_noise = gtsam.noiseModel.Diagonal.Sigmas(np.array([0.05, 0.05, 0.05, 0.1, 0.1, 0.1]))
        self.initial = gtsam.Values()
        for i in range(POSES):
            self.initial.insert(self.X[i], self.poses[i].retract(0.05 * rng.standard_normal(6)))
        for j in range(LANDMARKS):
            self.initial.insert(self.L[j], gtsam.Point3(*(landmarks[j] + 0.2 * rng.standard_normal(3))))

    def graph(self, how: str) -> gtsam.NonlinearFactorGraph:
        graph = gtsam.NonlinearFactorGraph()
        for i in range(POSES):
            graph.add(gtsam.PriorFactorPose3(self.X[i], self.poses[i], self.prior_noise))
        rows = [[self.X[i], self.L[j]] for i, j, _ in self.measurements]
        distances = np.array([r for _, _, r in self.measurements])
        if how == "native":
            for (x, l), r in zip(rows, distances):
                graph.add(gtsam.RangeFactor3D(x, l, r, self.noise))
        elif how == "make":
            for row, r in zip(rows, distances):
                graph.add(range_3d.make(row, self.noise, r))
        elif how in ("make_many", "vectorized"):
            for factor in range_3d.make_many(rows, self.noise, PerFactor(distances)):
                graph.add(factor)
        elif how == "make_bundles":
            for factor in range_3d.make_bundles(rows, self.noise, PerFactor(distances), by=0):
                graph.add(factor)
        elif how == "floor: native + no-op callbacks":
            graph = self.graph("native")
            for row in rows:
                graph.add(gtsam.CustomFactor(self.noise, row, no_op([np.zeros((1, 6)), np.zeros((1, 3))])))
        elif how == "floor: native + no-op bundles":
            graph = self.graph("native")
            for bundle in range_3d.make_bundles(rows, self.noise, PerFactor(distances), by=0):
                m = bundle.dim()
                blocks = [np.zeros((m, 6 if gtsam.Symbol(key).chr() == ord("x") else 3)) for key in bundle.keys()]
                graph.add(gtsam.CustomFactor(bundle.noiseModel(), bundle.keys(), no_op(blocks)))
        else:
            raise ValueError(how)
        return graph

    def difference(self, a: gtsam.Values, b: gtsam.Values) -> float:
        """Max abs difference of the poses' matrices and the landmarks [m]."""
        d = [np.abs(a.atPose3(x).matrix() - b.atPose3(x).matrix()).max() for x in self.X]
        d += [np.abs(a.atPoint3(l) - b.atPoint3(l)).max() for l in self.L]
        return float(max(d))


def no_op(blocks: list[np.ndarray]) -> Callable[[Any, gtsam.Values, Any], np.ndarray]:
    """A CustomFactor callback that costs only the callback: a zero residual and the zero Jacobians
    ``blocks`` (precomputed), which add nothing to the problem."""
    r = np.zeros(blocks[0].shape[0])

    def nothing(_: Any, __: gtsam.Values, jacobians: Any) -> np.ndarray:
        if jacobians is not None:
            for i, block in enumerate(blocks):
                jacobians[i] = block
        return r

    return nothing


def best(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    """The shortest wall time of ``repeat`` calls [s] and that call's result."""
    runs = []
    for _ in range(repeat):
        start = time.perf_counter()
        out = fn()
        runs.append((time.perf_counter() - start, out))
    return min(runs, key=lambda run: run[0])


def gtsam_lm(graph: gtsam.NonlinearFactorGraph, initial: gtsam.Values) -> gtsam.Values:
    params = gtsam.LevenbergMarquardtParams()
    params.setMaxIterations(ITERATIONS)
    params.setRelativeErrorTol(0.0)  # four iterations, as mbfg's LM below
    params.setAbsoluteErrorTol(0.0)
    return gtsam.LevenbergMarquardtOptimizer(graph, initial, params).optimize()


def mbfg_lm(graph: gtsam.NonlinearFactorGraph | VectorizedGraph, initial: gtsam.Values) -> LMResult:
    return bounded_levenberg_marquardt(graph, initial, quiet=True,
                                       config=LMConfig(max_iterations=ITERATIONS, relative_tol=0.0, gradient_tol=0.0))


def build_floor(problem: Problem) -> gtsam.GaussianFactorGraph:
    """2,000 binary JacobianFactors built and added from Python: what any linearization in Python pays."""
    A1, A2, b = np.zeros((1, 6)), np.zeros((1, 3)), np.zeros(1)
    unit = gtsam.noiseModel.Unit.Create(1)
    linear = gtsam.GaussianFactorGraph()
    for i, j, _ in problem.measurements:
        linear.push_back(gtsam.JacobianFactor(problem.X[i], A1, problem.L[j], A2, b, unit))
    return linear


def run(repeat: int, skip_make_gtsam_lm: bool) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    problem = Problem()
    initial = problem.initial
    graphs = {how: problem.graph(how) for how in ("native", "make", "make_many", "vectorized", "make_bundles",
                                                  "floor: native + no-op callbacks", "floor: native + no-op bundles")}
    vectorized = VectorizedGraph.from_graph(graphs["vectorized"], initial)
    solutions: dict[tuple[str, str], gtsam.Values] = {}
    rows: list[dict[str, Any]] = []
    for how, graph in graphs.items():
        row: dict[str, Any] = {"factors": how}
        if how == "vectorized":
            vectorized.linearize(initial)  # compiles
            row["linearize_s"] = best(lambda: vectorized.linearize(initial), repeat)[0]
        else:
            graph.linearize(initial)  # compiles
            row["linearize_s"] = best(lambda: graph.linearize(initial), repeat)[0]  # noqa: B023
        if how != "vectorized" and not (how == "make" and skip_make_gtsam_lm):
            row["gtsam_lm_s"], solutions["gtsam", how] = best(lambda: gtsam_lm(graph, initial), repeat)  # noqa: B023
        if not how.startswith("floor"):
            target = vectorized if how == "vectorized" else graph
            row["mbfg_lm_s"], result = best(lambda: mbfg_lm(target, initial), repeat)  # noqa: B023
            solutions["mbfg", how] = result.values
            # Where the LM's time goes (the fastest run): its linearizations, and its damped solves with the trials'
            # error evaluations.
            row["mbfg_lm_linearize_s"] = sum(h["linearize_s"] for h in result.history)
            row["mbfg_lm_solve_s"] = sum(h["solve_s"] for h in result.history)
        rows.append(row)
        print(f"{how:<34}" + "  ".join(f"{k} {v:.4f}" for k, v in row.items() if k != "factors"), flush=True)
    rows.append({"factors": "floor: building JacobianFactors",
                 "linearize_s": best(lambda: build_floor(problem), repeat)[0]})
    native = rows[0]
    for row in rows[1:]:
        for column in ("linearize_s", "gtsam_lm_s", "mbfg_lm_s"):
            if column in row:
                row[column.replace("_s", "_x_native")] = row[column] / native[column]
        if "mbfg_lm_s" in row:  # against what a user of GTSAM's factors would run
            row["mbfg_lm_x_native_gtsam_lm"] = row["mbfg_lm_s"] / native["gtsam_lm_s"]
        for solver in ("gtsam", "mbfg"):
            if (solver, row["factors"]) in solutions:
                difference = problem.difference(solutions[solver, row["factors"]], solutions[solver, "native"])
                row[f"{solver}_lm_difference_m"] = difference
                if difference > 1e-9:
                    raise SystemExit(f"{row['factors']}: {solver} LM's solution differs from the native factors' "
                                     f"by {difference:.3g} m (> 1e-9)")
    return rows[1:], [native]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3, help="timed runs per figure; the best is kept")
    parser.add_argument("--skip-make-gtsam-lm", action="store_true",
                        help="leave out GTSAM's LM on make's factors (the slowest row, seconds per run)")
    parser.add_argument("--out", help="where to write the record (default benchmarks/results/adapter_overhead.json)")
    args = parser.parse_args()
    print(f"# {len(Problem().measurements)} range factors, {POSES} poses, {LANDMARKS} landmarks; best of "
          f"{args.repeat}; load average {LOAD_AT_START[0]:.1f} on {os.cpu_count()} cores")
    figures, peer = run(args.repeat, args.skip_make_gtsam_lm)
    print(f"{'factors':<34}{'linearize':>16}{'GTSAM LM':>16}{'mbfg LM':>16}   (s, x native with the same solver)")
    for row in peer + figures:
        cells = []
        for column in ("linearize", "gtsam_lm", "mbfg_lm"):
            s, x = row.get(f"{column}_s"), row.get(f"{column}_x_native")
            cells.append("" if s is None else f"{s:.4f}" + ("" if x is None else f" {x:5.1f}x"))
        print(f"{row['factors']:<34}" + "".join(f"{c:>16}" for c in cells))
    for row in figures:
        if "mbfg_lm_x_native_gtsam_lm" in row:
            print(f"mbfg LM on {row['factors']}: {row['mbfg_lm_x_native_gtsam_lm']:.1f}x GTSAM's LM on native factors")
    _record.write(__file__, figures, out=args.out,
                  peer={"name": "GTSAM's native factors (RangeFactor3D), same run", "figures": peer})


if __name__ == "__main__":
    main()
