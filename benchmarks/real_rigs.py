"""Calibration on the two real rigs of ../shared/data, with cross-validation on a second recording.

Run from the repository root::

    python benchmarks/real_rigs.py                 # both rigs, 4 s of each recording at h = 4 ms
    python benchmarks/real_rigs.py --rig dfki --seconds 10

1. DFKI double pendulum (``double-pendulum-torque``, measured motor torques as the
   known input): ``trajectory_00.csv`` resampled to its 2 ms grid
   (``resample_uniform``, it has gaps), calibrated from the lab's own identified
   parameters (``model_parameters.yml`` mapped by ``dfki_to_mbfg_parameters``;
   their ``J2`` is negative, below our bound, so it starts at 1e-4 kg m^2), free
   ``r1, r2, J1, J2, b1, b2`` (masses and the link length stay at the lab's:
   planar motion cannot tell ``m2`` from ``r2``). Cross-validation score on
   ``trajectory_01.csv``. The identified values are printed beside the lab's,
   mapped to the lab's joint-axis inertias ``I = J + m r^2``.
2. QUBE-Servo (``furuta`` with dry friction, plant voltage as input): the first
   recording from t = 5 s (the episodes open with the voltage saturated at -10 V
   while the pendulum is caught; fitted from t = 0 the gain K goes to its bound 0),
   from the vendor's nominal values (K = k_t / R_m = 0.042 / 8.4 N m/V,
   b_1 = k_t k_m / R_m = 2.1e-4 N m s/rad, the back-EMF damping), free ``K, J_Bx,
   b_1, b_2, mu_r1, mu_r2``; cross-validation on the second recording.

Each part prints the LM progress, the parameter table, the costs, the
cross-validation score with the start parameters and with the identified ones
(lower is better), the RMS of a simulation of the identified model from the
estimated first state with the recorded input (seed 001 Figure 5), and wall
times. Asserts nothing.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from mbfg.calibration import calibrate
from mbfg.datasets.rigs import (
    DFKI_PERIOD,
    QUBE_PERIOD,
    dfki_reference_parameters,
    dfki_to_mbfg_parameters,
    load_dfki_double_pendulum,
    load_qube,
    resample_uniform,
)
from mbfg.graphs.joint import cross_validation_score
from mbfg.logs import Log
from mbfg.models import double_pendulum, furuta

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data"
DFKI = DATA / "dfki_double_pendulum"
QUBE = DATA / "qube_servo"
QUBE_FILES = ("qube_20230828T150615_434_696_394.csv", "qube_20230828T150709_610_277_801.csv")


def window(log: Log, start: float, seconds: float) -> Log:
    """The part of a log from ``start`` [s] after its first sample, ``seconds`` long, time from 0."""
    i = int(np.searchsorted(log.t, log.t[0] + start - 1e-9))
    k = int(np.searchsorted(log.t, log.t[0] + start + seconds + 1e-9, side="right"))
    return replace(log, t=log.t[i:k] - log.t[i], y=log.y[i:k], u=log.u[i:k])


def report(result, start_model, validation: Log, wall: float) -> None:
    print(result.table())
    t0 = time.perf_counter()
    cv_start = cross_validation_score(start_model, validation, start_model.parameters.numpy_values(),
                                      h=result.h, weight=result.weight, quiet=True)
    cv = result.cross_validate(validation, quiet=True)
    cv_wall = time.perf_counter() - t0
    _, rmse = result.simulate()
    print(f"calibration: {result.iterations} LM iterations ({'converged' if result.converged else 'NOT converged'}), "
          f"{wall:.1f} s; cost {result.cost:.4g} per step (observation {result.cost_observation:.3g}, "
          f"impulse {result.cost_impulse:.3g}); noise estimates sigma_y {result.sigma_observation:.3g}, "
          f"sigma_p {result.sigma_impulse:.3g} N s")
    print(f"cross-validation score on the other recording: {cv:.4g} with the identified parameters, "
          f"{cv_start:.4g} with the start parameters ({cv_wall:.1f} s for both)")
    print("simulation of the identified model from the estimated x_0 with the recorded input, RMS vs the log: "
          + ", ".join(f"{k} {v:.3g} rad" for k, v in rmse.items()))


def save(result, save_dir: str | None, rig: str) -> None:
    """Write the calibration JSON (what 'mbfg calibrate --out' writes) for 'mbfg smooth' and benchmarks/stream.py."""
    if save_dir:
        path = Path(save_dir) / f"{rig}_calibration.json"
        path.write_text(result.to_json(indent=1))
        print(f"calibration written to {path}")


def dfki(seconds: float, h: float, max_iterations: int, save_dir: str | None = None) -> None:
    print(f"\n# DFKI double pendulum: {seconds:g} s of trajectory_00.csv, h = {h:g} s; "
          f"cross-validation on trajectory_01.csv")
    lab = dfki_reference_parameters(DFKI / "model_parameters.yml")
    start_values = dfki_to_mbfg_parameters(lab, shaft_inertias=True)
    print(f"lab's J2 = I2 - m2 r2^2 = {start_values['J2']:.4g} kg m^2 (negative; starts at 1e-4)")
    start_values["J2"] = 1e-4
    model = double_pendulum(torques=True).with_parameters(start_values)
    train = window(resample_uniform(load_dfki_double_pendulum(DFKI / "trajectory_00.csv"), DFKI_PERIOD), 0.0, seconds)
    val = window(resample_uniform(load_dfki_double_pendulum(DFKI / "trajectory_01.csv"), DFKI_PERIOD), 0.0, seconds)
    t0 = time.perf_counter()
    result = calibrate(model, train, free=("r1", "r2", "J1", "J2", "b1", "b2"), h=h,
                       max_iterations=max_iterations)
    wall = time.perf_counter() - t0
    report(result, model, val, wall)
    save(result, save_dir, "dfki")
    v = result.values
    ours = {
        "r1": v["r1"], "r2": v["r2"], "b1": v["b1"], "b2": v["b2"],
        "I1": v["J1"] + start_values["m1"] * v["r1"] ** 2, "I2": v["J2"] + start_values["m2"] * v["r2"] ** 2,
        "m2 r2": start_values["m2"] * v["r2"],
    }
    theirs = {k: lab[k] for k in ("r1", "r2", "b1", "b2", "I1", "I2")} | {"m2 r2": lab["m2"] * lab["r2"]}
    print("\nidentified beside the lab's model_parameters.yml (I about the joint axes; the lab's model also has")
    print(f"Coulomb friction cf1 = {lab['cf1']} N m, cf2 = {lab['cf2']} N m, which ours lacks):")
    print(f"{'':8} {'mbfg':>12} {'lab':>12}")
    for k in ours:
        print(f"{k:8} {ours[k]:>12.5g} {theirs[k]:>12.5g}")


def qube(seconds: float, h: float, max_iterations: int, start: float, viscous: bool = False,
         save_dir: str | None = None) -> None:
    print(f"\n# QUBE-Servo: {seconds:g} s of {QUBE_FILES[0]} from t = {start:g} s, h = {h:g} s; "
          f"cross-validation on the same window of {QUBE_FILES[1]}")
    model = furuta(dry=not viscous).with_parameters({"K": 0.042 / 8.4, "b_1": 0.042 * 0.042 / 8.4})
    free = ("K", "J_Bx", "b_1", "b_2") + (() if viscous else ("mu_r1", "mu_r2"))
    train = window(load_qube(QUBE / QUBE_FILES[0]), start, seconds)
    val = window(load_qube(QUBE / QUBE_FILES[1]), start, seconds)
    assert abs(np.diff(train.t).mean() - QUBE_PERIOD) < 1e-9
    t0 = time.perf_counter()
    result = calibrate(model, train, free=free, h=h, max_iterations=max_iterations)
    report(result, model, val, time.perf_counter() - t0)
    save(result, save_dir, "qube")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rig", choices=("dfki", "qube", "both"), default="both")
    parser.add_argument("--seconds", type=float, default=4.0, help="length of each recording used [s] (default 4)")
    parser.add_argument("--dt", type=float, default=4e-3, help="time-step h [s], a multiple of 2 ms (default 4e-3)")
    parser.add_argument("--qube-start", type=float, default=5.0,
                        help="QUBE window start [s] (default 5: the episodes open with the voltage saturated)")
    parser.add_argument("--qube-viscous", action="store_true",
                        help="the QUBE as furuta(dry=False): viscous hinges only (the model benchmarks/stream.py uses)")
    parser.add_argument("--save", metavar="DIR", default=None, help="write <rig>_calibration.json files to DIR")
    parser.add_argument("--max-iterations", type=int, default=30, help="LM iterations at most (default 30)")
    args = parser.parse_args()
    if args.rig in ("dfki", "both"):
        dfki(args.seconds, args.dt, args.max_iterations, args.save)
    if args.rig in ("qube", "both"):
        qube(args.seconds, args.dt, args.max_iterations, args.qube_start, args.qube_viscous, args.save)


if __name__ == "__main__":
    main()
