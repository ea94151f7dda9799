"""Four-bar forward-dynamics benchmark (Blanco-Claraco et al. (2021) section 7.1 and Table 1).

Run from anywhere::

    python benchmarks/fourbar_forward.py            # full: ~40 min on 2 busy cores
    python benchmarks/fourbar_forward.py --quick    # smoke test: ~1-2 min
    python benchmarks/fourbar_forward.py --batch 0.2,1,5   # only figure 4, at these horizons: ~6 min

Prints four figures, asserts nothing:

1. Table 1 of Blanco-Claraco et al. (2021): RMSE of the q trajectories (x1, y1, x2, y2 [m]) of the
   four-bar of ``../shared/data/mbse/fourbars1.yaml`` released from rest
   (g = 9.8 m/s^2, dt = 1 ms, 5 s) for fixed-lag windows Nw = 2..10, in
   dependent (DC) and independent (IC) coordinates, against the independent
   minimal-coordinate solution of ``tests/references.py`` (DOP853 at
   rtol 1e-10), next to the paper's numbers (which are against MSC Adams).
2. Performance of the Nw = 2 dependent-coordinate simulation at dt = 1 ms:
   simulated seconds per wall second, mean smoother iterations per step and
   wall time, for the incremental (iSAM2) and batch (LM) fixed-lag smoothers.
3. Overhead of the JAX residuals: the median time of one
   ``graph.linearize(values)`` of a 1000-step batch forward-dynamics graph
   (dependent coordinates, built as ``graphs/forward.py`` builds it) divided by
   that of a graph of GTSAM's built-in C++ factors with the same keys and the
   same number of factors (BetweenFactorVector / PriorFactorVector, see the
   printed mapping), plus an exact-shape C++ reference
   (LinearContainerFactor) and a plain-Python CustomFactor of the same shape;
   wall and process CPU times.
4. The whole-horizon batch solve (``mbfg forward fourbar --duration T --batch``:
   ``simulate_forward(window=None)``, g = 9.81 m/s^2 as the command line's default) against the
   default fixed-lag run (Nw = 2, iSAM2, one Gauss-Newton step per update) at horizons T = 0.2,
   1 and 5 s (``--quick``: 0.2 s): the largest difference of any coordinate at any step
   max |q_batch - q_fixed-lag| [m], the batch solve's iterations (Gauss-Newton, then LM if a
   step fails) and whether it converged (``ForwardResult.converged``), the wall times, and both
   runs' RMSE against the reference of 1. ``--lag-runs NW:GN,...`` adds fixed-lag runs of other windows
   and Gauss-Newton steps per update, each against the same batch solve.

The reported wall times exclude JAX compilation: every configuration is warmed
up on a short run first.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import _record
import gtsam
import jax
import numpy as np

import mbfg
from mbfg import keys
from mbfg.factors import forward_dynamics_factor, position_factor, prior_factor, trapezoidal_factor, velocity_factor
from mbfg.factors.constraints import POSITION, VELOCITY
from mbfg.factors.dynamics import FORWARD_DEPENDENT
from mbfg.factors.integrators import TRAPEZOIDAL
from mbfg.graphs import ForwardNoise, simulate_forward

REPO = Path(__file__).resolve().parents[1]
MECHANISM_FILE = (REPO / ".." / "shared" / "data" / "mbse" / "fourbars1.yaml").resolve()
# The independent reference lives with the tests (it does not import mbfg).
sys.path.insert(0, str(REPO / "tests"))
import references  # noqa: E402

G = 9.8  # [m/s^2], Blanco-Claraco et al. (2021) section 7.1
DT = 1e-3  # [s]
POINT_COORDINATES = ("x1", "y1", "x2", "y2")

#: Blanco-Claraco et al. (2021) Table 1: Nw -> (DC RMSE, IC RMSE) [m], against MSC Adams.
SEED_TABLE_1 = {
    2: (0.002361, 0.023834),
    3: (0.002356, 0.019645),
    4: (0.002352, 0.020019),
    5: (0.002348, 0.016647),
    6: (0.002344, 0.016677),
    7: (0.002341, 0.016677),
    8: (0.002338, 0.016677),
    9: (0.002335, 0.017056),
    10: (0.002332, 0.016677),
}


# --------------------------------------------------------------------------------------
# 1. Accuracy: Blanco-Claraco et al. (2021) Table 1
# --------------------------------------------------------------------------------------


def q_rmse(result: mbfg.graphs.ForwardResult, g: float) -> float:
    """RMSE [m] of the four point coordinates over all samples against the reference.

    sqrt(mean over the N+1 samples and the 4 coordinates of (q - q_ref)^2).
    """
    ref = references.fourbar_forward(result.t, g=g)
    q_ref = np.column_stack([ref[name] for name in POINT_COORDINATES])
    cols = [result.coordinate_names.index(name) for name in POINT_COORDINATES]
    return float(np.sqrt(np.mean((result.q[:, cols] - q_ref) ** 2)))


#: What this run printed, by figure, for its JSON record (benchmarks/_record.py).
FIGURES: dict[str, list[dict]] = {}


def table_1(mech: mbfg.PlanarMechanism, duration: float, windows: list[int], smoother: str) -> None:
    """Print the RMSE of DC and IC simulations for each window, beside the paper's."""
    print(f"== 1. Blanco-Claraco et al. (2021) Table 1: RMSE of q (x1, y1, x2, y2) [m], {duration:g} s from rest, "
          f"dt = {DT * 1e3:g} ms, g = {G}, smoother = {smoother}")
    print("   ours: against the minimal-coordinate reference (tests/references.py, DOP853, rtol 1e-10);")
    print("   seed: against MSC Adams (its own discretization and solver errors are in the paper's figures).")
    print(f"{'Nw':>4} {'DC RMSE (m)':>13} {'IC RMSE (m)':>13}   {'seed DC':>9} {'seed IC':>9}   "
          f"{'DC wall (s)':>11} {'IC wall (s)':>11}")
    for window in windows:
        row = {}
        for coordinates in ("dependent", "independent"):
            result = simulate_forward(
                mech, DT, duration, g=G, coordinates=coordinates, window=window, smoother=smoother
            )
            row[coordinates] = (q_rmse(result, G), result.wall_s)
        seed_dc, seed_ic = SEED_TABLE_1.get(window, (float("nan"), float("nan")))
        (dc, dc_wall), (ic, ic_wall) = row["dependent"], row["independent"]
        print(f"{window:>4} {dc:>13.6g} {ic:>13.6g}   {seed_dc:>9.6f} {seed_ic:>9.6f}   "
              f"{dc_wall:>11.1f} {ic_wall:>11.1f}", flush=True)
        FIGURES.setdefault("1. Table 1: RMSE of q", []).append({
            "Nw": window, "smoother": smoother, "simulated_s": duration, "dc_rmse_m": dc, "ic_rmse_m": ic,
            "dc_wall_s": dc_wall, "ic_wall_s": ic_wall, "blanco_claraco_2021_dc_rmse_m": seed_dc,
            "blanco_claraco_2021_ic_rmse_m": seed_ic})
    print()


# --------------------------------------------------------------------------------------
# 2. Performance of the Nw = 2 simulation
# --------------------------------------------------------------------------------------


def performance(mech: mbfg.PlanarMechanism, duration: float) -> None:
    """Print real-time factor, iterations per step and wall time for both smoothers."""
    print(f"== 2. Performance: dependent coordinates, Nw = 2, dt = {DT * 1e3:g} ms, {duration:g} s simulated")
    print(f"{'smoother':>12} {'sim s / wall s':>15} {'iterations/step':>16} {'wall (s)':>9}")
    for smoother in ("incremental", "batch"):
        result = simulate_forward(mech, DT, duration, g=G, window=2, smoother=smoother)
        # The first update (step 0) has no predecessor; count the N transitions.
        iterations = np.mean(result.iterations[1:])
        print(f"{smoother:>12} {duration / result.wall_s:>15.3f} {iterations:>16.2f} {result.wall_s:>9.2f}",
              flush=True)
        FIGURES.setdefault("2. performance", []).append({
            "smoother": smoother, "simulated_s": duration, "sim_s_per_wall_s": duration / result.wall_s,
            "iterations_per_step": iterations, "wall_s": result.wall_s})
    print("   iterations/step: the smoother's count per update (incremental: iSAM2 updates, one")
    print("   Gauss-Newton step each, gauss_newton_steps=1; batch: Levenberg-Marquardt iterations).")
    print()


# --------------------------------------------------------------------------------------
# 3. Linearization overhead against GTSAM's built-in factors
# --------------------------------------------------------------------------------------


def forward_graph(
    mech: mbfg.PlanarMechanism, n_steps: int, g: float
) -> tuple[gtsam.NonlinearFactorGraph, gtsam.Values]:
    """The batch dependent-coordinate forward-dynamics graph of ``graphs/forward.py`` (Figure 2).

    Priors on q0 and qdot0; per step k the factors f_pc(q_k), f_vc(q_k, qdot_k),
    f_dyn(q_k, qdot_k, qddot_k); between steps two trapezoidal integrators
    (q, qdot) and (qdot, qddot). Values: the reference trajectory from rest.
    """
    noise = ForwardNoise()
    Q = mech.gravity_forces(g)
    t = DT * np.arange(n_steps + 1)
    ref = references.fourbar_forward(t, g=g)
    q = np.column_stack([ref[name] for name in POINT_COORDINATES])
    qdot = np.column_stack([ref["v" + name] for name in POINT_COORDINATES])
    graph, values = gtsam.NonlinearFactorGraph(), gtsam.Values()
    graph.add(prior_factor(keys.Q(0), q[0], noise.prior))
    graph.add(prior_factor(keys.V(0), qdot[0], noise.prior))
    for k in range(n_steps + 1):
        values.insert(keys.Q(k), q[k])
        values.insert(keys.V(k), qdot[k])
        values.insert(keys.A(k), mech.qddot(q[k], qdot[k], Q))
        graph.add(position_factor(mech, keys.Q(k), noise.constraint))
        graph.add(velocity_factor(mech, keys.Q(k), keys.V(k), noise.constraint))
        graph.add(forward_dynamics_factor(mech, keys.Q(k), keys.V(k), keys.A(k), Q, noise.dynamics))
        if k > 0:
            graph.add(trapezoidal_factor(keys.Q(k - 1), keys.Q(k), keys.V(k - 1), keys.V(k), DT, mech.n,
                                         noise.integrator))
            graph.add(trapezoidal_factor(keys.V(k - 1), keys.V(k), keys.A(k - 1), keys.A(k), DT, mech.n,
                                         noise.integrator))
    return graph, values


def forward_graph_batched(
    mech: mbfg.PlanarMechanism, n_steps: int, g: float
) -> gtsam.NonlinearFactorGraph:
    """The same factors as :func:`forward_graph`, built with ``FactorType.make_many``:
    each factor type is linearized by one vmapped JAX call per set of values."""
    noise = ForwardNoise()
    Q = mech.gravity_forces(g)
    graph = gtsam.NonlinearFactorGraph()
    graph.add(prior_factor(keys.Q(0), mech.q0, noise.prior))
    graph.add(prior_factor(keys.V(0), np.zeros(mech.n), noise.prior))
    steps, pairs = range(n_steps + 1), range(1, n_steps + 1)
    groups = [
        (POSITION, [[keys.Q(k)] for k in steps], noise.constraint, mech.m, (mech.arrays,)),
        (VELOCITY, [[keys.Q(k), keys.V(k)] for k in steps], noise.constraint, mech.m, (mech.arrays,)),
        (FORWARD_DEPENDENT, [[keys.Q(k), keys.V(k), keys.A(k)] for k in steps], noise.dynamics, mech.n,
         (mech.arrays, mech.mass_matrix, Q)),
        (TRAPEZOIDAL, [[keys.Q(k - 1), keys.Q(k), keys.V(k - 1), keys.V(k)] for k in pairs], noise.integrator,
         mech.n, (DT,)),
        (TRAPEZOIDAL, [[keys.V(k - 1), keys.V(k), keys.A(k - 1), keys.A(k)] for k in pairs], noise.integrator,
         mech.n, (DT,)),
    ]
    for factor_type, rows, sigma, dim, constants in groups:
        for factor in factor_type.make_many(rows, mbfg.noise_model(sigma, dim), *constants):
            graph.add(factor)
    return graph


#: How each factor of :func:`forward_graph` is mapped onto a built-in factor
#: (same keys; a built-in factor's dimension is that of its variables, n = 4).
BUILTIN_MAPPING = (
    "prior(q0), prior(qdot0)          [1 key, 4 rows] -> PriorFactorVector(q0 | qdot0)            [1 key, 4 rows]",
    "f_pc(q_k)                        [1 key, 3 rows] -> PriorFactorVector(q_k)                   [1 key, 4 rows]",
    "f_vc(q_k, qdot_k)                [2 keys, 3 rows] -> BetweenFactorVector(q_k, qdot_k)         [2 keys, 4 rows]",
    "f_dyn(q_k, qdot_k, qddot_k)      [3 keys, 4 rows] -> BetweenFactorVector(qdot_k, qddot_k)     [2 keys, 4 rows]",
    "f_ti(q_k-1, q_k, qdot_k-1, qdot_k) [4 keys, 4 rows] -> BetweenFactorVector(q_k-1, q_k)        [2 keys, 4 rows]",
    "f_ti(qdot_k-1, qdot_k, qddot_k-1, qddot_k)          -> BetweenFactorVector(qdot_k-1, qdot_k)  [2 keys, 4 rows]",
)


def builtin_graph(n_steps: int, n: int) -> gtsam.NonlinearFactorGraph:
    """GTSAM built-in factors in place of :func:`forward_graph`'s, as in :data:`BUILTIN_MAPPING`.

    Same keys and the same number of factors, in the same order; arity-3 and
    arity-4 factors keep two of their keys, the 3-row constraints get n = 4 rows.
    """
    model = gtsam.noiseModel.Isotropic.Sigma(n, 1.0)
    zero = np.zeros(n)
    graph = gtsam.NonlinearFactorGraph()
    graph.add(gtsam.PriorFactorVector(keys.Q(0), zero, model))
    graph.add(gtsam.PriorFactorVector(keys.V(0), zero, model))
    for k in range(n_steps + 1):
        graph.add(gtsam.PriorFactorVector(keys.Q(k), zero, model))
        graph.add(gtsam.BetweenFactorVector(keys.Q(k), keys.V(k), zero, model))
        graph.add(gtsam.BetweenFactorVector(keys.V(k), keys.A(k), zero, model))
        if k > 0:
            graph.add(gtsam.BetweenFactorVector(keys.Q(k - 1), keys.Q(k), zero, model))
            graph.add(gtsam.BetweenFactorVector(keys.V(k - 1), keys.V(k), zero, model))
    return graph


def exact_shape_graph(graph: gtsam.NonlinearFactorGraph, values: gtsam.Values) -> gtsam.NonlinearFactorGraph:
    """LinearContainerFactor copies of the linearized ``graph``: C++ nonlinear factors with
    exactly the same keys, rows and Jacobian blocks (relinearization = b - A delta)."""
    linear = graph.linearize(values)
    out = gtsam.NonlinearFactorGraph()
    for i in range(linear.size()):
        out.add(gtsam.LinearContainerFactor(linear.at(i), values))
    return out


def python_graph(graph: gtsam.NonlinearFactorGraph, values: gtsam.Values) -> gtsam.NonlinearFactorGraph:
    """CustomFactors of exactly ``graph``'s shape whose callback is plain NumPy (returns stored
    arrays): the cost of GTSAM's Python callback alone, without JAX."""
    linear = graph.linearize(values)
    out = gtsam.NonlinearFactorGraph()
    for i in range(graph.size()):
        factor = graph.at(i)
        A, b = linear.at(i).jacobian()
        factor_keys = list(factor.keys())
        dims = [values.atVector(key).shape[0] for key in factor_keys]
        blocks = np.split(A, np.cumsum(dims)[:-1], axis=1)
        out.add(gtsam.CustomFactor(gtsam.noiseModel.Unit.Create(len(b)), factor_keys, _stored(b, blocks)))
    return out


def _stored(b: np.ndarray, blocks: list[np.ndarray]) -> Callable:
    def callback(_: gtsam.CustomFactor, values: gtsam.Values, H: list | None) -> np.ndarray:
        if H is not None:
            for i, block in enumerate(blocks):
                H[i] = block
        return b

    return callback


def median_times(fns: dict[str, Callable[[], object]], repeats: int) -> dict[str, tuple[float, float]]:
    """Median wall and process CPU times [s] of each function over ``repeats`` rounds,
    after one untimed warm-up.

    Each round calls every function once, in turn, so that a change of load on the
    machine affects all of them alike. CPU time counts only this process (all its
    threads): it is less sensitive than wall time to other processes on a shared machine.
    """
    for fn in fns.values():
        fn()
    wall: dict[str, list[float]] = {name: [] for name in fns}
    cpu: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            start, start_cpu = time.perf_counter(), time.process_time()
            fn()
            cpu[name].append(time.process_time() - start_cpu)
            wall[name].append(time.perf_counter() - start)
    return {name: (statistics.median(wall[name]), statistics.median(cpu[name])) for name in fns}


def overhead(mech: mbfg.PlanarMechanism, n_steps: int, repeats: int) -> None:
    """Print the time of one linearization of each graph and the ratios."""
    graph, values = forward_graph(mech, n_steps, G)
    batched = forward_graph_batched(mech, n_steps, G)
    builtin = builtin_graph(n_steps, mech.n)
    exact = exact_shape_graph(graph, values)
    plain = python_graph(graph, values)
    assert builtin.size() == exact.size() == plain.size() == graph.size() == batched.size()
    # The batched graph caches its group evaluation per set of values: every round
    # linearizes at freshly perturbed values so that nothing is served from a cache.
    rng = np.random.default_rng(0)
    perturbed = []
    for _ in range(repeats + 1):
        delta = gtsam.VectorValues()
        for key in values.keys():
            delta.insert(key, 1e-9 * rng.standard_normal(mech.n))
        perturbed.append(values.retract(delta))
    rounds = iter(perturbed)
    times = median_times(
        {
            "mbfg (JAX residuals in gtsam.CustomFactor)": lambda: graph.linearize(values),
            "mbfg make_many (one vmapped call per factor type)": lambda: batched.linearize(next(rounds)),
            "built-in BetweenFactorVector/PriorFactorVector (C++)": lambda: builtin.linearize(values),
            "exact shape: LinearContainerFactor (C++)": lambda: exact.linearize(values),
            "exact shape: CustomFactor with NumPy callback (no JAX)": lambda: plain.linearize(values),
        },
        repeats,
    )
    (t_mbfg, c_mbfg), (t_many, c_many), (t_builtin, c_builtin), _, (t_plain, _) = times.values()
    print(f"== 3. Linearization overhead: one graph.linearize(values), {n_steps}-step batch forward graph, "
          f"dependent coordinates")
    print(f"   {graph.size()} factors on {values.size()} Vector variables of dimension {mech.n}; "
          f"median of {repeats} interleaved runs after a warm-up")
    print("   built-in graph: same keys, same number of factors, same order; mapping:")
    for line in BUILTIN_MAPPING:
        print("     " + line)
    print(f"{'graph':>58} {'wall (ms)':>10} {'CPU (ms)':>9} {'mbfg/it wall':>13} {'mbfg/it CPU':>12}")
    for label, (wall, cpu) in times.items():
        print(f"{label:>58} {wall * 1e3:>10.2f} {cpu * 1e3:>9.2f} {t_mbfg / wall:>13.1f} {c_mbfg / cpu:>12.1f}")
        FIGURES.setdefault("3. linearization overhead", []).append({
            "graph": label, "steps": n_steps, "factors": graph.size(), "wall_ms": wall * 1e3, "cpu_ms": cpu * 1e3,
            "mbfg_per_this_wall": t_mbfg / wall, "mbfg_per_this_cpu": c_mbfg / cpu})
    print(f"   overhead ratio mbfg / built-in BetweenFactorVector graph: {t_mbfg / t_builtin:.1f} (wall), "
          f"{c_mbfg / c_builtin:.1f} (CPU)")
    print(f"   overhead ratio mbfg make_many / built-in: {t_many / t_builtin:.1f} (wall), "
          f"{c_many / c_builtin:.1f} (CPU)")
    per = 1e6 / graph.size()
    print(f"   per factor (wall): mbfg {t_mbfg * per:.1f} us, built-in {t_builtin * per:.2f} us, "
          f"Python callback alone {t_plain * per:.1f} us")
    print()


# --------------------------------------------------------------------------------------
# 4. Batch against fixed-lag
# --------------------------------------------------------------------------------------

#: Gravity of figure 4 [m/s^2]: the command line's default, so that its figures are those of
#: ``mbfg forward fourbar --duration T --batch``.
G_CLI = 9.81


def batch_vs_fixed_lag(mech: mbfg.PlanarMechanism, durations: list[float],
                       lag_runs: list[tuple[int, int]] | None = None) -> None:
    """Print, per horizon, the batch solve's agreement with the default fixed-lag run, and with each further
    fixed-lag run of ``lag_runs`` (window Nw, Gauss-Newton steps per update) against the same batch solve."""
    print("== 4. Batch (whole horizon: Gauss-Newton, LM if a step fails) against fixed-lag (Nw = 2, incremental): "
          f"dependent coordinates, dt = {DT * 1e3:g} ms, g = {G_CLI}")
    print("   batch wall includes its start guess (a fixed-lag run with 2 Gauss-Newton steps per update);")
    print("   RMSE of q against the reference of figure 1 [m].")
    print("   max |dq|: batch against the default fixed-lag run; vs start: against its own start (ForwardResult.start_difference).")
    print(f"{'T (s)':>6} {'max |dq| (m)':>13} {'vs start (m)':>13} {'iter':>5} {'converged':>10} {'batch wall (s)':>15} "
          f"{'fixed-lag wall (s)':>19} {'batch RMSE':>11} {'fixed-lag RMSE':>15}")
    for duration in durations:
        batch = simulate_forward(mech, DT, duration, g=G_CLI, window=None)
        lag = simulate_forward(mech, DT, duration, g=G_CLI, window=2)
        difference = float(np.abs(batch.q - lag.q).max())
        print(f"{duration:>6g} {difference:>13.2e} {batch.start_difference:>13.2e} {batch.iterations[0]:>5d} "
              f"{batch.converged!s:>10} "
              f"{batch.wall_s:>15.1f} {lag.wall_s:>19.1f} {q_rmse(batch, G_CLI):>11.3e} "
              f"{q_rmse(lag, G_CLI):>15.3e}", flush=True)
        FIGURES.setdefault("4. batch against fixed-lag", []).append({
            "T_s": duration, "max_dq_m": difference, "vs_start_m": batch.start_difference,
            "iterations": batch.iterations[0], "converged": batch.converged, "batch_wall_s": batch.wall_s,
            "fixed_lag_wall_s": lag.wall_s, "batch_rmse_m": q_rmse(batch, G_CLI), "fixed_lag_rmse_m": q_rmse(lag, G_CLI)})
        for window, steps in lag_runs or []:
            other = simulate_forward(mech, DT, duration, g=G_CLI, window=window, gauss_newton_steps=steps)
            print(f"{'':>6} {float(np.abs(batch.q - other.q).max()):>13.2e}   fixed-lag Nw = {window}, {steps} "
                  f"Gauss-Newton step(s) per update: wall {other.wall_s:.1f} s, RMSE {q_rmse(other, G_CLI):.3e}",
                  flush=True)
            FIGURES["4. batch against fixed-lag"].append({
                "T_s": duration, "max_dq_m": float(np.abs(batch.q - other.q).max()), "fixed_lag_Nw": window,
                "gauss_newton_steps": steps, "fixed_lag_wall_s": other.wall_s, "fixed_lag_rmse_m": q_rmse(other, G_CLI)})
    print()


# --------------------------------------------------------------------------------------


def warm_up(mech: mbfg.PlanarMechanism) -> None:
    """Compile every JAX function the measured runs use (a few steps of each configuration)."""
    for coordinates in ("dependent", "independent"):
        for smoother in ("incremental", "batch"):
            simulate_forward(mech, DT, 5 * DT, g=G, coordinates=coordinates, window=2, smoother=smoother)


def _load() -> str:
    """The 1, 5 and 15 min load averages: other processes on the machine skew the timings."""
    try:
        return "load average " + ", ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "load average unknown"


def _lag_runs(text: str) -> list[tuple[int, int]]:
    try:
        runs = [tuple(int(part) for part in item.split(":")) for item in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected NW:GN pairs such as 2:2,5:2, got {text!r}") from None
    if any(len(run) != 2 or min(run) < 1 for run in runs):
        raise argparse.ArgumentTypeError(f"expected NW:GN pairs of positive integers such as 2:2,5:2, got {text!r}")
    return [(run[0], run[1]) for run in runs]


def _durations(text: str) -> list[float]:
    """``--batch`` 0.2,1,5 -> [0.2, 1.0, 5.0] [s]."""
    try:
        values = [float(item) for item in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated durations in s, e.g. 0.2,1,5; got {text!r}"
        ) from None
    if not all(np.isfinite(v) and v >= DT for v in values):
        raise argparse.ArgumentTypeError(f"durations must be finite and at least dt = {DT} s; got {text!r}")
    return values


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="reduced run for smoke testing (0.5 s, Nw = 2, 3)")
    parser.add_argument("--smoother", choices=("incremental", "batch"), default="incremental",
                        help="fixed-lag smoother of the Table 1 runs (default: incremental)")
    parser.add_argument("--batch", metavar="T,...", type=_durations, default=None,
                        help="run only figure 4 (batch against fixed-lag), at these horizons [s], e.g. 0.2,1,5")
    parser.add_argument("--lag-runs", metavar="NW:GN,...", type=_lag_runs, default=None,
                        help="with --batch: also compare the batch solve with fixed-lag runs of window NW and GN "
                             "Gauss-Newton steps per update, e.g. 2:2,5:2,20:2")
    args = parser.parse_args(argv)
    duration, windows = (0.5, [2, 3]) if args.quick else (5.0, list(range(2, 11)))
    perf_duration = 0.5 if args.quick else 2.0
    n_steps, repeats = 1000, (3 if args.quick else 7)

    mech = mbfg.load_mbse_yaml(str(MECHANISM_FILE))
    print(f"mbfg four-bar forward benchmark{' (--quick)' if args.quick else ''}: {MECHANISM_FILE.name}, "
          f"q = {list(mech.coordinate_names)}")
    print(f"python {platform.python_version()}, gtsam {importlib.metadata.version('gtsam')}, "
          f"jax {jax.__version__}, {os.cpu_count()} CPUs, {platform.machine()}; {_load()}")
    print()
    start = time.perf_counter()
    warm_up(mech)
    if args.batch is not None:
        batch_vs_fixed_lag(mech, args.batch, args.lag_runs)
    else:
        table_1(mech, duration, windows, args.smoother)
        performance(mech, perf_duration)
        overhead(mech, n_steps, repeats)
        batch_vs_fixed_lag(mech, [0.2] if args.quick else [0.2, 1.0, 5.0])
    print(f"total wall time {time.perf_counter() - start:.0f} s; {_load()}")
    _record.write(__file__, FIGURES)


if __name__ == "__main__":
    main()
