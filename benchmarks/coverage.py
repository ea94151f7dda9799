"""Do the standard deviations cover the truth? Calibrations over noise draws of simulated logs.

Per model, one trajectory is simulated ten times finer than it is estimated (the estimation's discrete model then
differs from the data's, as a rig's does by its unmodelled effects), and each draw adds fresh reading noise. Each
draw is calibrated from the same start; per free parameter the run reports how often the truth lies within 2
standard deviations of the estimate (a correct interval covers it in about 95 % of draws) and, with ``--bias``,
within 2 total deviations ``sqrt(std^2 + bias^2)`` (:func:`mbfg.calibration.discretization_bias`), beside the
median ``|error| / std``.

Cases:

- ``pendulum``: the built-in pendulum released at 2 rad, 2 s, 1e-3 rad of reading noise; J and b from 30 % off.
- ``stage``: the linear stage (M = 5 kg, F_v = 20 N s/m, F_c = 8 N, F_0 = 1.5 N) driven by the README's current,
  2 s, 5e-6 m of reading noise on an encoder of 1e-6 m; from M = 4, F_v = 15, F_c = 6, F_0 = 0.
- ``furuta``: the built-in Furuta pendulum driven by a square wave at its pendulum's frequency from rest, 2 s, both
  angles with 1e-3 rad of noise; its default free set from 20 % off.

    python benchmarks/coverage.py --draws 50                       # the three models, the default weight
    python benchmarks/coverage.py --models pendulum --draws 10 --bias
    python benchmarks/coverage.py --weight estimate                # w from each draw's data (mbfg.noise_weight)

Writes ``benchmarks/results/coverage.json``.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from dataclasses import dataclass

import _record
import numpy as np

from mbfg.calibration import calibrate
from mbfg.calibration_options import CalibrationOptions
from mbfg.logs import Log
from mbfg.models import furuta, linear_stage, pendulum
from mbfg.noise_weight import estimate_weight
from mbfg.rigid import RigidModel
from mbfg.spook import simulate, unwrap_angles

H = 1e-3
FINE = 10  # the simulation's steps per estimation step


@dataclass
class Case:
    truth: RigidModel
    start: RigidModel
    free: list[str] | None
    clean: np.ndarray  # (n, n_y) readings at H without noise
    log: Callable[[np.ndarray], Log]  # readings -> the log
    noise: float
    resolution: float | None = None


def _simulated(model: RigidModel, duration: float, initial=None, controls=None) -> tuple[np.ndarray, np.ndarray]:
    fine = None if controls is None else np.repeat(controls, FINE, axis=0)
    traj = simulate(model, duration, H / FINE, initial=initial, controls=fine, quiet=True)
    return traj.t[::FINE], unwrap_angles(model, traj.observations)[::FINE]


def _case_log(model: RigidModel, t: np.ndarray, controls: np.ndarray | None) -> Callable[[np.ndarray], Log]:
    u = np.zeros((len(t), 0)) if controls is None else np.vstack([controls, controls[-1:]])[: len(t)]
    return lambda y: Log(t, y, u, model.observations, model.controls, "simulated")


def pendulum_case() -> Case:
    model = pendulum()
    values = model.parameters.numpy_values()
    t, y = _simulated(model, 2.0, initial=model.initial_state({"theta": 2.0}))
    start = model.with_parameters({"J": 1.3 * float(values["J"]), "b": 0.7 * float(values["b"])})
    return Case(model, start, ["J", "b"], y, _case_log(model, t, None), 1e-3)


def stage_case() -> Case:
    model = linear_stage().with_parameters({"M": 5.0, "F_v": 20.0, "F_c": 8.0, "F_0": 1.5})
    tt = np.arange(2000) * H
    current = (0.4 * np.sin(2 * np.pi * 0.7 * tt) + 0.1 * np.sign(np.sin(2 * np.pi * 2.1 * tt)))[:, None]
    t, y = _simulated(model, 2.0, controls=current)
    start = model.with_parameters({"M": 4.0, "F_v": 15.0, "F_c": 6.0, "F_0": 0.0})
    return Case(model, start, None, y, _case_log(model, t, current), 5e-6, 1e-6)


def furuta_case() -> Case:
    model = furuta()
    values = {k: float(v) for k, v in model.parameters.numpy_values().items() if np.ndim(v) == 0}
    f0 = 1.70  # Hz: the pendulum's small-angle frequency (benchmarks/furuta_calibration.py)
    tt = np.arange(2000) * H
    voltage = (0.4 * np.sign(np.sin(2 * np.pi * f0 * tt)))[:, None]
    t, y = _simulated(model, 2.0, controls=voltage)
    signs = np.random.default_rng(1).choice([-1.0, 1.0], size=len(values))
    start = model.with_parameters({k: v * (1 + 0.2 * s) for (k, v), s in zip(values.items(), signs)})
    return Case(model, start, None, y, _case_log(model, t, voltage), 1e-3)


CASES = {"pendulum": pendulum_case, "stage": stage_case, "furuta": furuta_case}


def _draw(case: Case, seed: int) -> Log:
    y = case.clean + case.noise * np.random.default_rng(seed).standard_normal(case.clean.shape)
    if case.resolution is not None:
        y = case.resolution * np.round(y / case.resolution)
    return case.log(y)


def run_case(name: str, draws: int, weight: str | None, bias: bool) -> dict:
    case = CASES[name]()
    truth = {k: float(v) for k, v in case.truth.parameters.numpy_values().items() if np.ndim(v) == 0}
    rows: dict[str, list[tuple[float, float, float]]] = {}
    converged, walls, weights = 0, [], []
    for seed in range(draws):
        log = _draw(case, 100 + seed)
        began = time.perf_counter()
        w = None
        if weight == "estimate":
            w = estimate_weight(case.start, log, free=case.free).weight
        elif weight is not None:
            w = float(weight)
        result = calibrate(case.start, log, free=case.free, weight=w, options=CalibrationOptions(bias=bias))
        walls.append(time.perf_counter() - began)
        weights.append(result.weight)
        converged += bool(result.converged)
        for p in result.parameters:
            if p.name in truth:
                rows.setdefault(p.name, []).append((p.value - truth[p.name], p.std, p.bias))
        print(f"  {name} draw {seed + 1}/{draws}: {result.status}, {walls[-1]:.1f} s, w {result.weight:.3g}", flush=True)
    table = []
    for pname, entries in rows.items():
        err, std, est_bias = (np.array(c) for c in zip(*entries))
        total = np.sqrt(std**2 + np.nan_to_num(est_bias) ** 2)
        table.append({
            "parameter": pname,
            "truth": truth[pname],
            "draws": len(err),
            "covered_2std": float(np.mean(np.abs(err) <= 2 * std)),
            "covered_2total": float(np.mean(np.abs(err) <= 2 * total)) if bias else None,
            "median_abs_error_over_std": float(np.median(np.abs(err) / std)),
            "mean_error_over_std": float(np.mean(err / std)),
            "median_std_percent": float(100 * np.median(std) / abs(truth[pname])),
            "mean_bias_over_std": float(np.mean(est_bias / std)) if bias else None,
        })
    return {"rows": table, "converged": converged, "draws": draws, "median_wall_s": float(np.median(walls)),
            "median_weight": float(np.median(weights))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", nargs="+", choices=sorted(CASES), default=list(CASES))
    parser.add_argument("--draws", type=int, default=50)
    parser.add_argument("--weight", default=None, help="a number, 'estimate' (from each draw's data), or the default")
    parser.add_argument("--bias", action="store_true", help="also estimate each parameter's discretization bias")
    args = parser.parse_args()
    figures: dict[str, list[dict]] = {}
    for name in args.models:
        out = run_case(name, args.draws, args.weight, args.bias)
        print(f"{name}: {out['converged']}/{out['draws']} converged, median {out['median_wall_s']:.1f} s per draw, "
              f"median w {out['median_weight']:.3g}")
        for row in out["rows"]:
            total = "" if row["covered_2total"] is None else f"  within 2 total {100 * row['covered_2total']:5.1f} %"
            print(f"  {row['parameter']:<8} within 2 std {100 * row['covered_2std']:5.1f} %{total}  "
                  f"median |err|/std {row['median_abs_error_over_std']:6.2f}  mean err/std {row['mean_error_over_std']:+7.2f}")
        figures[name] = [{**row, "converged": out["converged"], "median_wall_s": out["median_wall_s"],
                          "median_weight": out["median_weight"]} for row in out["rows"]]
    _record.write(__file__, figures)


if __name__ == "__main__":
    main()
