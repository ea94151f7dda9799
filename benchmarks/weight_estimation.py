"""The state error weight w from the data (mbfg.noise_weight) beside hand-chosen weights, in one run.

Cases (each log simulated, so the truth is known):

- ``stage``: the README's linear stage (M = 5 kg, F_v = 20 N s/m, F_c = 8 N, F_0 = 1.5 N), 2 s at 1 kHz of the
  README's current, simulated ten times finer than it is estimated (the estimation's model then differs from the
  data's by a discretization error, as a rig's does by its unmodelled effects), 5e-6 m of reading noise on an
  encoder of 1e-6 m. Calibrated from M = 4, F_v = 15, F_c = 6, F_0 = 0 at the estimated w and at hand-chosen
  weights: the default 1e6, the README's 100, and 1e-2.
- ``stage-disturbed``: the same stage simulated at the estimation's step with a hidden current disturbance of
  0.05 A per step (impulse noise h K_F 0.05 = 7.5e-3 N s): the implied reading and impulse noise beside the true
  ones, and the parameters at the estimated w.
- ``pendulum``: the built-in pendulum released at 2 rad, 2 s simulated ten times finer, 1e-3 rad of reading
  noise; J and b from 30 % off.

Writes the JSON record ``benchmarks/results/weight_estimation.json`` (the cases run) and prints a table.

    python benchmarks/weight_estimation.py            # about 10 min on two cores
    python benchmarks/weight_estimation.py --only stage
"""

from __future__ import annotations

import argparse
import time

import _record
import numpy as np

from mbfg.calibration import calibrate
from mbfg.logs import Log
from mbfg.models import linear_stage, pendulum
from mbfg.noise_weight import estimate_weight
from mbfg.spook import simulate, unwrap_angles

H = 1e-3


def _log(model, duration, step, initial=None, controls=None, recorded=None, noise=0.0, resolution=None, seed=0):
    """A log at H of a simulation at ``step`` (H / step a whole number), readings with Gaussian ``noise`` and an
    encoder of ``resolution``; ``recorded``: the controls written in the log (default the simulated ones)."""
    sub = int(round(H / step))
    fine = None if controls is None else np.repeat(controls, sub, axis=0)
    traj = simulate(model, duration, step, initial=initial, controls=fine)
    y = unwrap_angles(model, traj.observations)[::sub]
    y = y + noise * np.random.default_rng(seed).standard_normal(y.shape)
    if resolution is not None:
        y = resolution * np.round(y / resolution)
    t = traj.t[::sub]
    logged = controls if recorded is None else recorded
    u = np.zeros((len(t), 0)) if logged is None else np.vstack([logged, logged[-1:]])[: len(t)]
    return Log(t, y, u, model.observations, model.controls, "simulated")


def _errors(values, truth):
    return {name: 100.0 * (values[name] / truth[name] - 1.0) for name in truth}


def _calibrations(start, log, truth, weights, free=None):
    rows = []
    estimate = estimate_weight(start, log, free=free)
    found = estimate.problem.parameter_values(estimate.solution.values)
    rows.append(dict(weight="estimated", w=estimate.weight, log10_std=estimate.log10_std,
                     sigma_observation=estimate.sigma_observation, sigma_impulse=estimate.sigma_impulse,
                     solves=len(estimate.evaluations), converged=estimate.solution.converged,
                     wall_s=estimate.wall_s, error_percent=_errors(found, truth)))
    for w in weights:
        began = time.perf_counter()
        result = calibrate(start, log, free=free, weight=w)
        rows.append(dict(weight="given", w=w, converged=result.converged, iterations=result.iterations,
                         wall_s=time.perf_counter() - began, error_percent=_errors(result.values, truth)))
    return rows


def stage() -> list[dict]:
    truth = {"M": 5.0, "F_v": 20.0, "F_c": 8.0, "F_0": 1.5}
    model = linear_stage()
    t = np.arange(2000) * H
    current = (0.4 * np.sin(2 * np.pi * 0.7 * t) + 0.1 * np.sign(np.sin(2 * np.pi * 2.1 * t)))[:, None]
    log = _log(model.with_parameters(truth), 2.0, H / 10, controls=current, noise=5e-6, resolution=1e-6, seed=3)
    start = model.with_parameters({"M": 4.0, "F_v": 15.0, "F_c": 6.0, "F_0": 0.0})
    return _calibrations(start, log, truth, [1e6, 1e2, 1e-2])


def stage_disturbed() -> list[dict]:
    truth = {"M": 5.0, "F_v": 20.0, "F_c": 8.0, "F_0": 1.5}
    model = linear_stage().with_parameters(truth)
    t = np.arange(2000) * H
    current = (0.4 * np.sin(2 * np.pi * 0.7 * t) + 0.1 * np.sign(np.sin(2 * np.pi * 2.1 * t)))[:, None]
    disturbed = current + 0.05 * np.random.default_rng(4).standard_normal(current.shape)
    log = _log(model, 2.0, H, controls=disturbed, recorded=current, noise=5e-6, resolution=1e-6, seed=3)
    start = model.with_parameters({"M": 4.0, "F_v": 16.0, "F_c": 6.4, "F_0": 0.0})
    rows = _calibrations(start, log, truth, [])
    rows[0]["true_sigma_observation"] = float(np.hypot(5e-6, 1e-6 / np.sqrt(12)))
    rows[0]["true_sigma_impulse"] = H * 150.0 * 0.05
    return rows


def pendulum_case() -> list[dict]:
    model = pendulum()
    values = model.parameters.numpy_values()
    truth = {"J": float(values["J"]), "b": float(values["b"])}
    log = _log(model, 2.0, H / 10, initial=model.initial_state({"theta": 2.0}), noise=1e-3, seed=1)
    start = model.with_parameters({"J": 1.3 * truth["J"], "b": 0.7 * truth["b"]})
    rows = _calibrations(start, log, truth, [1e6], free=["J", "b"])
    rows[0]["true_sigma_observation"] = 1e-3
    return rows


CASES = {"stage": stage, "stage-disturbed": stage_disturbed, "pendulum": pendulum_case}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", choices=sorted(CASES), action="append", help="run only these cases")
    args = parser.parse_args()
    figures = {}
    for name in args.only or list(CASES):
        figures[name] = CASES[name]()
        print(f"\n{name}")
        for row in figures[name]:
            errors = "  ".join(f"{k} {v:+.3f}%" for k, v in row["error_percent"].items())
            extra = (f"  sigma_y {row['sigma_observation']:.3g}  sigma_p {row['sigma_impulse']:.3g}  "
                     f"{row['solves']} solves" if row["weight"] == "estimated" else f"  {row['iterations']} iterations")
            print(f"  w {row['w']:<10.3g} ({row['weight']:>9})  {'converged' if row['converged'] else 'NOT converged':<13}"
                  f"  {row['wall_s']:6.1f} s  {errors}{extra}")
    _record.write(__file__, figures)


if __name__ == "__main__":
    main()
