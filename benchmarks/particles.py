"""Berard and Trinkle (2008) reproduced: friction coefficients identified from noisy positions of falling, sliding particles.

Run from the repository root::

    python benchmarks/particles.py                 # the single particle at the paper's noise levels
    python benchmarks/particles.py --particles 3   # also 3 particles, each its own mu, in one graph
    python benchmarks/particles.py --weight 1e2    # the state error weight w (default 1e-5)
    python benchmarks/particles.py --restart-weight 1e3   # then again from a free simulation
    python benchmarks/particles.py --start-mu 0.3         # start elsewhere than the paper's mu = 1
    python benchmarks/particles.py --truth-lambda 1e-12   # the solve from the truth at less damping
    python benchmarks/particles.py --restart-weight 1e3 --draws 50   # (c) over 50 noise draws
    python benchmarks/particles.py --restart-weight 1e3 --draws 50 --restart-search 10   # multi-start
    python benchmarks/particles.py --restart-weight 1e3 --draws 50 --backtracking 0      # the plain LM

(a) Berard and Trinkle's (2008) particle (``mbfg.models.particle``: m = 1, q0 = (0, 3), push (5, -9.81 m), mu = 0.2,
h = 0.05 s, N = 100 steps) is simulated, uniform noise in [-eps, eps] is added to x and z, and mu
is identified with the joint estimator (:func:`mbfg.calibration.calibrate`) from the paper's
initial guess mu = 1 (``--start-mu``: another; with the particles, every mu). Printed: mu, its
error, our LM iterations (with a restart: the first solve's + the restarted one's), beside the paper's
KNITRO figures;
and, as the reference for what the estimator can reach on that noise, the same least squares solved
from the truth (the simulated states and mu = 0.2; at the restart weight when one is given): its
minimum there is the estimate the data support, so the gap between the two columns is the start's
local minimum, not the estimator's statistics.
With ``--restart-weight W``, the calibration is restarted at w = W from a free simulation of its first
result (``calibrate(restart_weight=W)``: from the estimated x_0, with the first result's parameters);
the iterations printed are then both solves'. With ``--restart-search N`` as well, N parameter vectors
spread over the boxes are free-simulated too and the two closest to the readings start restarts of their
own; the lowest cost wins (``calibrate(restart_search=N)``), and the iterations count every solve. With
``--backtracking N``, every LM solve of the calibration halves a rejected step up to N times along its direction
before it raises the damping (``calibrate(backtracking=N)``; the default, calibrate's for a model with contacts,
is 8; 0 is the plain LM).

(b) Several particles (random x0 in [-10, 10] m, z0 in [0, 5] m, mu in (0, 0.5], noise in
[-0.005, 0.005] m, as in the seed), each on its own contact with its own mu, identified together
in one graph; printed: the RMS mu error and the iterations beside the paper's.

(c) With ``--draws M``, the single particle again at every noise level over M independent noise draws
(seeds 1 .. M; (a) is draw 1 alone, and its five rows are one draw scaled by eps): the RMS and median of
|mu - 0.2| of the calibration and of the least-squares minimum (the solve from the truth), the median of the
standard deviation the calibration reports for mu, the median and largest LM iterations, and the fraction of draws whose calibration is as close to 0.2 as the paper's one
figure (its "0.2" read as 0.2 +- 5e-7, half its last printed digit). The spread over draws is what the
noise allows an estimator on these readings; the seed reports one draw. Last, the draws whose calibration
ended more than 0.02 from 0.2 (in another local minimum), how many of those the result itself flags (not
converged, or mu not determined by the data: ``CalibrationResult.not_excited``), and the smallest ratio among
them of the reading noise the calibration estimates (``sigma_observation``, 3.22) to the true one, eps / sqrt(3).

Asserts nothing: it prints what the estimator reaches.
"""

from __future__ import annotations

import argparse
import time

import _record
import numpy as np

from mbfg.calibration import calibrate
from mbfg.calibration_options import CalibrationOptions, calibration_lm
from mbfg.graphs.joint import build_joint_problem, solve
from mbfg.lm_config import LMConfig
from mbfg.logs import Log
from mbfg.models import particle, particles
from mbfg.rigid import RigidModel
from mbfg.solvers import LAMBDA_INITIAL
from mbfg.spook import simulate

#: Berard and Trinkle (2008), single particle (KNITRO): noise eps [m] -> (mu found, iterations).
SEED_SINGLE = {5e-5: (0.2, 301), 5e-4: (0.2, 443), 5e-3: (0.2, 19), 5e-2: (0.200022, 149), 5e-1: (0.199873, 96)}
#: Berard and Trinkle (2008), multiple particles (noise 0.005): particles -> (RMS mu error, iterations).
SEED_MULTI = {2: (0.0, 334), 3: (0.0, 185), 5: (0.000006, 364), 10: (0.0000072, 281)}


def _halvings(backtracking: int | None) -> dict[str, int]:
    """calibration_lm's change for --backtracking (None: its default for the model, 8 with contacts)."""
    return {} if backtracking is None else {"backtracking": backtracking}

def _noisy_log(model: RigidModel, eps: float, seed: int) -> tuple[Log, list]:
    """The log with uniform noise in [-eps, eps], and the simulated (true) states."""
    traj = simulate(model, 5.0, 0.05)
    y = traj.observations + np.random.default_rng(seed).uniform(-eps, eps, traj.observations.shape)
    log = Log(traj.t, y, np.zeros((len(traj.t), 0)), model.observations, (), f"{model.name} eps={eps}")
    return log, [traj.state(k) for k in range(len(traj.t))]


def _solve_from(model: RigidModel, log: Log, states: list, free: dict[str, float], weight: float,
                max_iterations: int, lambda_initial: float) -> tuple[dict[str, float], int]:
    """The joint least squares started at the given states and parameters, by the calibration's LM from the
    damping ``lambda_initial``: (the values found, LM iterations)."""
    problem = build_joint_problem(model, log, free=list(free), weight=weight, cutoff_hz=1e9,
                                  initial_parameters=free, states=states, quiet=True)
    lm = solve(problem, LMConfig(max_iterations=max_iterations, lambda_initial=lambda_initial), quiet=True)
    found = problem.parameter_values(lm.values)
    return {name: found[name] for name in free}, lm.iterations


def _draws(model: RigidModel, args: argparse.Namespace) -> list[dict]:
    """(c): the single particle at every noise level over ``args.draws`` noise draws."""
    print(f"\n(c) single particle over {args.draws} noise draws (seeds 1 .. {args.draws}); |error| = |mu - 0.2|")
    print(f"{'noise eps':>9} {'RMS |error|':>11} {'median':>9} {'LS minimum: RMS':>15} {'median':>9} "
          f"{'median std':>10} {'LM it median / max':>18} {'conv':>5} {'as close as the seed':>20} {'off by > 0.02 (flagged)':>23} "
          f"{'their sigma_y / noise':>21}   Berard and Trinkle (2008) |error|")
    rows = []
    for eps, (smu, _) in SEED_SINGLE.items():
        seed_error = max(abs(smu - 0.2), 5e-7)
        errors, minimum, stds, iterations, converged, off, flagged = [], [], [], [], 0, 0, 0
        noise_ratio = np.inf  # the smallest sigma_y / (eps / sqrt(3)) of the draws off by > 0.02
        for draw in range(1, args.draws + 1):
            log, truth = _noisy_log(model, eps, draw)
            r = calibrate(model.with_parameters({"mu": args.start_mu}), log, free=["mu"], weight=args.weight,
                          cutoff_hz=1e9,
                          lm=calibration_lm(model.with_parameters({"mu": args.start_mu}),
                                            max_iterations=args.max_iterations, **_halvings(args.backtracking)),
                          options=CalibrationOptions(restart_weight=args.restart_weight,
                                                     restart_search=args.restart_search))
            if abs(r.values["mu"] - 0.2) > 0.02:
                off += 1
                flagged += (not r.converged) or "mu" in r.not_excited
                noise_ratio = min(noise_ratio, r.sigma_observation / (eps / np.sqrt(3.0)))
            best, _ = _solve_from(model, log, truth, {"mu": 0.2}, args.restart_weight or args.weight,
                                  args.max_iterations, args.truth_lambda)
            errors.append(abs(r.values["mu"] - 0.2))
            stds.append(r.parameters[0].std)
            minimum.append(abs(best["mu"] - 0.2))
            iterations.append(r.iterations)
            converged += bool(r.converged)
        e, m = np.array(errors), np.array(minimum)
        print(f"{eps:9.0e} {np.sqrt(np.mean(e**2)):11.2e} {np.median(e):9.2e} {np.sqrt(np.mean(m**2)):15.2e} "
              f"{np.median(m):9.2e} {np.median(stds):10.2e} {f'{int(np.median(iterations))} / {max(iterations)}':>18} "
              f"{converged:>2}/{args.draws:<2} {f'{np.sum(e <= seed_error)} of {args.draws}':>20} "
              f"{f'{off} ({flagged})':>23} {'-' if off == 0 else f'{noise_ratio:.1f}':>21}   {seed_error:.1e}",
              flush=True)
        rows.append({"noise_eps": eps, "draws": args.draws, "rms_error": np.sqrt(np.mean(e**2)),
                     "median_error": np.median(e), "ls_minimum_rms_error": np.sqrt(np.mean(m**2)),
                     "ls_minimum_median_error": np.median(m), "median_std": np.median(stds),
                     "iterations_median": np.median(iterations), "iterations_max": max(iterations),
                     "converged": converged, "as_close_as_berard_trinkle": int(np.sum(e <= seed_error)),
                     "off_by_0.02": off, "off_and_flagged": flagged,
                     "berard_trinkle_2008_error": seed_error})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--particles", type=int, nargs="*", default=[], help="multi-particle cases (e.g. 2 3 5)")
    parser.add_argument("--max-iterations", type=int, default=40)
    parser.add_argument("--weight", type=float, default=1e-5, help="state error weight w (default 1e-5)")
    parser.add_argument("--restart-weight", type=float, default=None,
                        help="restart the calibration at this w from a free simulation of its result")
    parser.add_argument("--start-mu", type=float, default=1.0,
                        help="initial guess of every mu (default 1, the paper's)")
    parser.add_argument("--restart-search", type=int, default=0,
                        help="with --restart-weight: restarts from this many box samples' simulations too")
    parser.add_argument("--backtracking", type=int, default=None,
                        help="calibrate(backtracking=N): halve a rejected LM step up to N times before raising "
                             "the damping (default: calibrate's, 8 for these models with contacts; 0: the plain LM)")
    parser.add_argument("--draws", type=int, default=0,
                        help="(c): the single particle over this many noise draws (default 0: not run)")
    parser.add_argument("--truth-lambda", type=float, default=LAMBDA_INITIAL,
                        help="the LM's initial damping in the solve from the truth (default 1e-5, the calibration's)")
    args = parser.parse_args()

    model = particle()
    print(f"(a) single particle, mu = 0.2, start mu = {args.start_mu:g}; the solve from the truth from LM damping "
          f"{args.truth_lambda:g}")
    print(f"{'noise eps':>9} {'mu':>10} {'|error|':>9} {'LM it':>6} {'conv':>5} {'wall s':>7}   "
          f"{'from the truth: mu, |error|, it':>31}   Berard and Trinkle (2008) (KNITRO): mu, iterations")
    figures: dict[str, list[dict]] = {"single particle": []}
    for eps, (smu, sit) in SEED_SINGLE.items():
        log, truth = _noisy_log(model, eps, 1)
        start = time.perf_counter()
        r = calibrate(model.with_parameters({"mu": args.start_mu}), log, free=["mu"], weight=args.weight, cutoff_hz=1e9,
                      lm=calibration_lm(model.with_parameters({"mu": args.start_mu}),
                                        max_iterations=args.max_iterations, **_halvings(args.backtracking)),
                      options=CalibrationOptions(covariance=False, restart_weight=args.restart_weight,
                                                 restart_search=args.restart_search))
        mu, wall = r.values["mu"], time.perf_counter() - start
        best, best_it = _solve_from(model, log, truth, {"mu": 0.2}, args.restart_weight or args.weight,
                                    args.max_iterations, args.truth_lambda)
        first = getattr(r.problem, "restarted_from", None)  # with --restart-weight: the first solve's LM
        its = f"{first.iterations}+{r.iterations - first.iterations}" if first is not None else str(r.iterations)
        print(f"{eps:9.0e} {mu:10.6f} {abs(mu - 0.2):9.2e} {its:>6} {str(r.converged):>5} {wall:7.1f}   "
              f"{best['mu']:10.6f}, {abs(best['mu'] - 0.2):9.2e}, {best_it:3d}   {smu}, {sit}", flush=True)
        figures["single particle"].append({
            "noise_eps": eps, "mu": mu, "error": abs(mu - 0.2), "iterations": its, "converged": r.converged,
            "wall_s": wall, "from_truth_mu": best["mu"], "from_truth_iterations": best_it,
            "berard_trinkle_2008_mu": smu, "berard_trinkle_2008_iterations": sit})

    if args.draws:
        figures["single particle, noise draws"] = _draws(model, args)

    for n in args.particles:
        many = particles(n, seed=n)
        truth = np.array([many.parameters[f"mu_{i}"].default for i in range(n)])
        log, truth_states = _noisy_log(many, 0.005, 2)
        start = time.perf_counter()
        r = calibrate(many.with_parameters({f"mu_{i}": args.start_mu for i in range(n)}), log,
                      free=[f"mu_{i}" for i in range(n)], weight=args.weight, cutoff_hz=1e9,
                      lm=calibration_lm(many.with_parameters({f"mu_{i}": args.start_mu for i in range(n)}),
                                        max_iterations=args.max_iterations, **_halvings(args.backtracking)),
                      options=CalibrationOptions(covariance=False, restart_weight=args.restart_weight))
        found = np.array([r.values[f"mu_{i}"] for i in range(n)])
        rms = float(np.sqrt(np.mean((found - truth) ** 2)))
        wall = time.perf_counter() - start
        best, best_it = _solve_from(many, log, truth_states, {f"mu_{i}": float(truth[i]) for i in range(n)},
                                    args.restart_weight or args.weight, args.max_iterations, args.truth_lambda)
        best_rms = float(np.sqrt(np.mean((np.array(list(best.values())) - truth) ** 2)))
        serr, sit = SEED_MULTI.get(n, (float("nan"), "-"))
        print(f"(b) {n} particles: mu true {np.round(truth, 4)}, found {np.round(found, 4)}; RMS error {rms:.2e}, "
              f"LM iterations {r.iterations} (converged {r.converged}), {wall:.1f} s; from the truth: RMS error "
              f"{best_rms:.2e} in {best_it} iterations; Berard and Trinkle (2008): RMS {serr}, {sit} iterations", flush=True)
        figures.setdefault("particles", []).append({
            "particles": n, "rms_error": rms, "iterations": r.iterations, "converged": r.converged, "wall_s": wall,
            "from_truth_rms_error": best_rms, "from_truth_iterations": best_it,
            "berard_trinkle_2008_rms_error": serr, "berard_trinkle_2008_iterations": sit})
    _record.write(__file__, figures)


if __name__ == "__main__":
    main()
