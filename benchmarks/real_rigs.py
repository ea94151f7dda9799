"""Calibration on the two real rigs of ../shared/data, with cross-validation on a second recording.

Run from the repository root::

    python benchmarks/real_rigs.py                 # both rigs, 4 s of each recording at h = 4 ms
    python benchmarks/real_rigs.py --rig dfki --seconds 10
    python benchmarks/real_rigs.py --rig dfki --lab-model --seconds 2   # the lab's model, free simulation
    python benchmarks/real_rigs.py --rig dfki --lab-model --seconds 10 --dt 2e-3 --weights 1e3,1e4,1e6
    python benchmarks/real_rigs.py --output-error --dt 2e-3   # the lab's model fitted to its free simulation

1. DFKI double pendulum (``double-pendulum-torque``, measured motor torques as the
   known input): ``trajectory_00.csv`` resampled to its 2 ms grid
   (``resample_uniform``, it has gaps), calibrated from the lab's own identified
   parameters (``model_parameters.yml`` mapped by ``dfki_to_mbfg_parameters``;
   their ``J2`` is negative, below our bound, so it starts at 1e-4 kg m^2), free
   ``r1, r2, J1, J2, b1, b2`` (masses and the link length stay at the lab's:
   planar motion cannot tell ``m2`` from ``r2``). Cross-validation score on
   ``trajectory_01.csv``. The identified values are printed beside the lab's,
   mapped to the lab's joint-axis inertias ``I = J + m r^2``.
2. QUBE-Servo (``qube-servo``: ``furuta`` with dry friction, plant voltage as input): the first
   recording from t = 5 s (the episodes open with the voltage saturated at -10 V
   while the pendulum is caught),
   from the vendor's nominal values (K = k_t / R_m = 0.042 / 8.4 N m/V,
   b_1 = k_t k_m / R_m = 2.1e-4 N m s/rad, the back-EMF damping), free ``K, J_Bx,
   b_1, b_2, mu_r1, mu_r2``; cross-validation on the second recording.

Each part prints the LM progress, the parameter table, the costs, the
cross-validation score with the start parameters and with the identified ones
(lower is better; each state estimation at most ``--cv-iterations``, with its
iterations and whether it converged), the RMS of a simulation of the identified
model from the estimated first state with the recorded input (Marklund et al. (2025) Figure
5), and wall times. Asserts nothing.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace
from pathlib import Path

import _record
import numpy as np

from mbfg.calibration import calibrate
from mbfg.calibration_options import calibration_lm
from mbfg.cli.calibrate import why_not_converged
from mbfg.datasets.rigs import (
    DFKI_PERIOD,
    QUBE_PERIOD,
    dfki_reference_parameters,
    dfki_to_mbfg_parameters,
    load_dfki_double_pendulum,
    load_qube,
    resample_uniform,
)
from mbfg.graphs.joint import cross_validation, state_estimation_lm
from mbfg.logs import Log
from mbfg.models import double_pendulum, furuta

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data"
DFKI = DATA / "dfki_double_pendulum"
QUBE = DATA / "qube_servo"
QUBE_FILES = ("qube_20230828T150615_434_696_394.csv", "qube_20230828T150709_610_277_801.csv")


def _halvings(backtracking: int | None) -> dict[str, int]:
    """calibration_lm's change for --backtracking (None: its default for the model, 8 with contacts)."""
    return {} if backtracking is None else {"backtracking": backtracking}

def window(log: Log, start: float, seconds: float) -> Log:
    """The part of a log from ``start`` [s] after its first sample, ``seconds`` long, time from 0."""
    i = int(np.searchsorted(log.t, log.t[0] + start - 1e-9))
    k = int(np.searchsorted(log.t, log.t[0] + start + seconds + 1e-9, side="right"))
    return replace(log, t=log.t[i:k] - log.t[i], y=log.y[i:k], u=log.u[i:k])


#: State estimation iterations of the cross-validations at most (--cv-iterations): the QUBE's held-out episode
#: takes 76-139 to converge with the identified parameters, and more than 300 with the vendor's.
CV_ITERATIONS = 300


#: What this run printed, by table, for its JSON record (benchmarks/_record.py).
FIGURES: dict[str, list[dict]] = {}


def report(result, start_model, validation: Log, wall: float) -> None:
    print(result.table())
    print("gain ratios of the LM steps: " + " ".join(f"{row['rho']:.3g}" for row in result.history[1:]))
    if not result.converged:  # what 'mbfg calibrate' says of it
        print(f"not converged: {why_not_converged(result.history, result.model.layout.n_B > 0)}")
    t0 = time.perf_counter()
    cv_start, est_start = cross_validation(start_model, validation, start_model.parameters.numpy_values(), h=result.h,
                                           weight=result.weight,
                                           lm=state_estimation_lm(start_model, max_iterations=CV_ITERATIONS))
    # The calibration's free parameters held: its compiled programs.
    cv, est = cross_validation(result.model, validation, result.model.parameters.numpy_values(), h=result.h,
                               weight=result.weight, free=result.problem.variables.free,
                               lm=state_estimation_lm(result.model, max_iterations=CV_ITERATIONS))
    cv_wall = time.perf_counter() - t0

    def solve(estimate) -> str:
        return f"{estimate.iterations} it., {'converged' if estimate.converged else 'NOT converged'}"

    _, rmse = result.simulate()
    print(f"calibration: {result.iterations} LM iterations ({'converged' if result.converged else 'NOT converged'}), "
          f"{wall:.1f} s; cost {result.cost:.4g} per step (observation {result.cost_observation:.3g}, "
          f"impulse {result.cost_impulse:.3g}); noise estimates sigma_y {result.sigma_observation:.3g}, "
          f"sigma_p {result.sigma_impulse:.3g} N s")
    print(f"cross-validation score on the other recording: {cv:.4g} with the identified parameters ({solve(est)}), "
          f"{cv_start:.4g} with the start parameters ({solve(est_start)}); {cv_wall:.1f} s for both")
    print("simulation of the identified model from the estimated x_0 with the recorded input, RMS vs the log: "
          + ", ".join(f"{k} {v:.3g} rad" for k, v in rmse.items()))
    FIGURES.setdefault("calibrations", []).append({
        "model": result.model.name, "h_s": result.h, "w": result.weight, "iterations": result.iterations,
        "converged": result.converged, "wall_s": wall, "cost": result.cost, "sigma_y": result.sigma_observation,
        "sigma_p": result.sigma_impulse, "crossval_identified": cv, "crossval_start": cv_start,
        "simulation_rms_rad": dict(rmse), "values": dict(result.values)})


def save(result, save_dir: str | None, rig: str) -> None:
    """Write the calibration JSON (what 'mbfg calibrate --out' writes) for 'mbfg smooth' and benchmarks/stream.py."""
    if save_dir:
        path = Path(save_dir) / f"{rig}_calibration.json"
        path.write_text(result.to_json(indent=1))
        print(f"calibration written to {path}")


def torque_model(lab: dict) -> tuple:
    """``double-pendulum-torque`` (viscous hinges only) at the lab's values, J2 at 1e-4 (the lab's is negative),
    and those values."""
    start_values = dfki_to_mbfg_parameters(lab, shaft_inertias=True)
    start_values["J2"] = 1e-4
    return double_pendulum(torques=True).with_parameters(start_values), start_values


def dfki(seconds: float, h: float, max_iterations: int, save_dir: str | None = None,
         backtracking: int | None = None) -> None:
    print(f"\n# DFKI double pendulum: {seconds:g} s of trajectory_00.csv, h = {h:g} s; "
          f"cross-validation on trajectory_01.csv")
    lab = dfki_reference_parameters(DFKI / "model_parameters.yml")
    model, start_values = torque_model(lab)
    print(f"lab's J2 = I2 - m2 r2^2 = {dfki_to_mbfg_parameters(lab, shaft_inertias=True)['J2']:.4g} kg m^2 "
          "(negative; starts at 1e-4)")
    train, val = (window(log, 0.0, seconds) for log in dfki_recordings().values())
    t0 = time.perf_counter()
    result = calibrate(model, train, free=("r1", "r2", "J1", "J2", "b1", "b2"), h=h,
                       lm=calibration_lm(model, max_iterations=max_iterations, **_halvings(backtracking)))
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
    FIGURES["beside the lab's values"] = [{"parameter": k, "mbfg": ours[k], "lab": theirs[k]} for k in ours]


def every(log: Log, k: int) -> Log:
    """Every k-th sample of a log (a uniform log at k times its step)."""
    return replace(log, t=log.t[::k], y=log.y[::k], u=log.u[::k])


def dfki_recordings() -> dict[str, Log]:
    """trajectory_00 (training) and trajectory_01 (held out), resampled to the lab's 2 ms grid (they have gaps)."""
    return {name: resample_uniform(load_dfki_double_pendulum(DFKI / f"{name}.csv"), DFKI_PERIOD)
            for name in ("trajectory_00", "trajectory_01")}


def free_sim_logs(recordings: dict[str, Log], h: float, seconds: float) -> dict[str, Log]:
    """The first ``seconds`` (+ one step) of each recording at step ``h``: what a free simulation compares with."""
    k = int(round(h / DFKI_PERIOD))
    return {name: every(window(log, 0.0, seconds + h), k) for name, log in recordings.items()}


def free_sim_line(label: str, model, log: Log, seconds: float) -> None:
    from mbfg.validation import free_simulation

    fs = free_simulation(model, log, seconds=seconds)
    print(f"  {label:44} " + "  ".join(f"{o}: RMS {fs.rms[o]:.3g} rad, drift > 0.1 rad at {fs.drift_time[o]:.3g} s"
                                     for o in fs.rms))
    FIGURES.setdefault("free simulations", []).append({"model": label, "recording": log.source,
                                                       "rms_rad": dict(fs.rms), "drift_s": dict(fs.drift_time)})


def dfki_lab(seconds: float, h: float, max_iterations: int, weights: list[float], sim_seconds: float) -> None:
    """``dfki-double-pendulum`` (the lab's model: viscous + Coulomb, geared rotors) from the lab's values, at each
    state error weight; free simulations on the training and the held-out recording beside the viscous-only
    models'."""
    from mbfg.dfki import SLIDING, lab_combinations
    from mbfg.identifiability import combination, result_combinations
    from mbfg.models import load_model

    lab = dfki_reference_parameters(DFKI / "model_parameters.yml")
    model = load_model("dfki-double-pendulum")
    recordings = dfki_recordings()
    train, val = (window(log, 0.0, seconds) for log in recordings.values())
    sims = free_sim_logs(recordings, h, sim_seconds)
    simulated: dict[str, object] = {"lab's values": model}
    for weight in weights or [model.weight]:
        print(f"\n# DFKI double pendulum as the lab models it (dfki-double-pendulum): {seconds:g} s of "
              f"trajectory_00, h = {h:g} s, w = {weight:g} (the model's: {model.weight:g}); validation on "
              f"trajectory_01")
        t0 = time.perf_counter()
        result = calibrate(model, train, h=h, weight=weight, lm=calibration_lm(model, max_iterations=max_iterations))
        wall = time.perf_counter() - t0
        report(result, model, val, wall)
        v = result.model.parameters.numpy_values()
        names = [p.name for p in result.parameters]
        vals = [p.value for p in result.parameters]
        fixed = {n: x for n, x in v.items() if n not in names}
        start = lab_combinations(model.parameters.numpy_values())
        print("\nidentifiable combinations (planar motion; joint-axis inertias incl. the rotor Ir on link 1):")
        print(f"{'':16} {'mbfg':>11} {'std':>9} {'lab':>11} {'diff %':>7}")
        for key in ("I1 + m2 l1^2", "I2"):
            val_, std = combination(lambda p, key=key: lab_combinations(p)[key], names, vals, result.covariance,
                                    fixed=fixed)
            print(f"{key:16} {val_:>11.5g} {std:>9.2g} {start[key]:>11.5g} {100 * (val_ / start[key] - 1):>7.1f}")
            FIGURES.setdefault("beside the lab's values", []).append(
                {"w": weight, "parameter": key, "mbfg": val_, "std": std, "lab": start[key]})
        print("Coulomb friction tau_c / (pi/2) [N m] (the lab's cf, whose sliding torque is (pi/2) cf):")
        for i in (1, 2):
            cf = v[f"tau_c{i}"] / SLIDING
            print(f"cf{i:<14} {cf:>11.4g} {'':>9} {lab[f'cf{i}']:>11.4g} {100 * (cf / lab[f'cf{i}'] - 1):>7.1f}")
            FIGURES["beside the lab's values"].append({"w": weight, "parameter": f"cf{i}", "mbfg": cf,
                                                       "lab": lab[f"cf{i}"]})
        for i in (1, 2):
            print(f"b{i:<15} {v[f'b{i}']:>11.4g} {'':>9} {lab[f'b{i}']:>11.4g}")
            FIGURES["beside the lab's values"].append({"w": weight, "parameter": f"b{i}", "mbfg": v[f"b{i}"],
                                                       "lab": lab[f"b{i}"]})
        print("combinations the data determine / leave free (mbfg.identifiability):")
        for c in result_combinations(result):
            print(f"  {'determined' if c.determined else 'FREE      '} rel. std {c.relative_std:.2g}: {c.label}")
        simulated[f"identified, w = {weight:g} ({result.iterations} it.)"] = result.model
    viscous = model.without_dry_friction()
    weight = weights[0] if weights else model.weight
    visc = calibrate(viscous, train, h=h, weight=weight, free=("J1", "J2", "b1", "b2"),
                     lm=calibration_lm(viscous, max_iterations=max_iterations))
    simulated[f"viscous-only, w = {weight:g} ({visc.iterations} it.)"] = visc.model
    simulated["lab's values, Coulomb dropped"] = viscous
    # The viscous-only model as it was before the lab's model (double-pendulum-torque, free r1, r2, J1, J2, b1,
    # b2 at its default w, from the lab's values): what dfki() below calibrates.
    old = calibrate(torque_model(lab)[0], train, free=("r1", "r2", "J1", "J2", "b1", "b2"), h=h,
                    lm=calibration_lm(torque_model(lab)[0], max_iterations=max_iterations))
    simulated[f"double-pendulum-torque, w = {old.weight:g} ({old.iterations} it.)"] = old.model
    print(f"\nfree simulation over the first {sim_seconds:g} s (h = {h:g} s, measured torques), RMS [rad] "
          "and the time it first drifts beyond 0.1 rad [s]:")
    for name, log in sims.items():
        print(f"on {name}{' (training)' if name == 'trajectory_00' else ' (held out)'}:")
        for label, m in simulated.items():
            free_sim_line(label, m, log, sim_seconds)


#: The parameter sets of :func:`dfki_output_error`: the friction and inertia parameters the calibration frees,
#: and those with the centres of mass, the motor gains and the rotor inertias.
OUTPUT_ERROR_SETS = (("J1", "J2", "b1", "b2", "tau_c1", "tau_c2"),
                     ("J1", "J2", "b1", "b2", "tau_c1", "tau_c2", "r1", "r2", "K_q1", "K_q2", "J_s_q1", "J_s_q2"))


def dfki_output_error(h: float, sim_seconds: float, max_evaluations: int) -> None:
    """How close the lab's model can free-simulate at all: parameters of ``dfki-double-pendulum`` (each set of
    :data:`OUTPUT_ERROR_SETS`, from the lab's values) fitted to the free-simulation error itself (an output-error
    fit, scipy's ``least_squares`` on the log of each parameter, finite differences), once on the training
    recording and once on the held-out one (an oracle: parameters no estimate from other data can be sure to
    find). Prints both recordings' RMS for the lab's values and each fit."""
    from scipy.optimize import least_squares

    from mbfg.models import load_model
    from mbfg.validation import free_simulation

    model = load_model("dfki-double-pendulum")
    logs = free_sim_logs(dfki_recordings(), h, sim_seconds)
    lab_values = model.parameters.numpy_values()
    print(f"\n# DFKI: output-error fits of dfki-double-pendulum (free simulation over the first {sim_seconds:g} s at "
          f"h = {h:g} s, from the lab's values); RMS q1 / q2 [rad]")
    print(f"{'parameters':54} {'trajectory_00':>15} {'trajectory_01':>15}  values / the lab's")
    for names in OUTPUT_ERROR_SETS:
        x_lab = np.array([float(lab_values[n]) for n in names])

        def simulated(x: np.ndarray, log: Log, names: tuple[str, ...] = names):
            return free_simulation(model.with_parameters(dict(zip(names, x))), log, seconds=sim_seconds)

        def residuals(log_scale: np.ndarray, log: Log, x_lab: np.ndarray = x_lab) -> np.ndarray:
            fs = simulated(np.exp(log_scale) * x_lab, log)
            return (fs.simulated - fs.recorded).ravel()

        fits = {"the lab's values": x_lab}
        for fitted_on in ("trajectory_00", "trajectory_01"):
            t0 = time.perf_counter()
            out = least_squares(residuals, np.zeros(len(names)), args=(logs[fitted_on],), diff_step=1e-3,
                                max_nfev=max_evaluations)
            label = f"{len(names)} fitted on {fitted_on} ({out.nfev} sim., {time.perf_counter() - t0:.0f} s)"
            fits[label + (" [oracle]" if fitted_on == "trajectory_01" else "")] = np.exp(out.x) * x_lab
        print(f"free: {', '.join(names)}")
        for label, x in fits.items():
            rms = [simulated(x, log).rms for log in logs.values()]
            print(f"  {label:52} " + " ".join(f"{r['q1']:.4f} / {r['q2']:.4f}" for r in rms) + "  "
                  + ", ".join(f"{n} {v:.3g}" for n, v in zip(names, x / x_lab)))
            FIGURES.setdefault("output-error fits", []).append({
                "free": ", ".join(names), "fit": label,
                "rms_rad": {name: dict(r) for name, r in zip(logs, rms)},
                "per_lab": dict(zip(names, x / x_lab))})


def qube(seconds: float, h: float, max_iterations: int, start: float, weights: list[float], viscous: bool = False,
         save_dir: str | None = None, backtracking: int | None = None) -> None:
    from mbfg.models import load_model

    if viscous:  # the model benchmarks/stream.py reads back (--save)
        model = furuta(dry=False).with_parameters({"K": 0.042 / 8.4, "b_1": 0.042 * 0.042 / 8.4})
        free: tuple[str, ...] | None = ("K", "J_Bx", "b_1", "b_2")
    else:
        model, free = load_model("qube-servo"), None  # its free set: K, J_Bx, b_1, b_2, mu_r1, mu_r2
    train = window(load_qube(QUBE / QUBE_FILES[0]), start, seconds)
    val = window(load_qube(QUBE / QUBE_FILES[1]), start, seconds)
    assert abs(np.diff(train.t).mean() - QUBE_PERIOD) < 1e-9
    for weight in weights or [model.weight]:
        print(f"\n# QUBE-Servo ({model.name}): {seconds:g} s of {QUBE_FILES[0]} from t = {start:g} s, h = {h:g} s, "
              f"w = {weight:g} (the model's: {model.weight:g}); cross-validation on the same window of "
              f"{QUBE_FILES[1]}")
        t0 = time.perf_counter()
        result = calibrate(model, train, free=free, h=h, weight=weight,
                           lm=calibration_lm(model, max_iterations=max_iterations, **_halvings(backtracking)))
        report(result, model, val, time.perf_counter() - t0)
        save(result, save_dir, "qube")
        k = int(round(h / QUBE_PERIOD))
        sim_log = every(window(load_qube(QUBE / QUBE_FILES[1]), start, min(2.0, seconds - h) + h), k)
        print(f"free simulation on {QUBE_FILES[1]} from t = {start:g} s:")
        free_sim_line("start (vendor's nominal values)", model, sim_log, min(2.0, seconds - h))
        free_sim_line("identified", result.model, sim_log, min(2.0, seconds - h))


def main() -> None:
    global CV_ITERATIONS
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rig", choices=("dfki", "qube", "both"), default="both")
    parser.add_argument("--seconds", type=float, default=4.0, help="length of each recording used [s] (default 4)")
    parser.add_argument("--dt", type=float, default=4e-3, help="time-step h [s], a multiple of 2 ms (default 4e-3)")
    parser.add_argument("--qube-start", type=float, default=5.0,
                        help="QUBE window start [s] (default 5: the episodes open with the voltage saturated)")
    parser.add_argument("--qube-viscous", action="store_true",
                        help="the QUBE as furuta(dry=False): viscous hinges only (the model benchmarks/stream.py uses)")
    parser.add_argument("--save", metavar="DIR", default=None, help="write <rig>_calibration.json files to DIR")
    parser.add_argument("--lab-model", action="store_true",
                        help="DFKI: the dfki-double-pendulum model (the lab's: Coulomb + viscous, rotors)")
    parser.add_argument("--weights", type=lambda text: [float(w) for w in text.split(",")], default=[],
                        help="state error weights w for --lab-model and the QUBE, comma-separated "
                             "(default: the model's)")
    parser.add_argument("--sim-seconds", type=float, default=2.0, help="free-simulation span [s] (default 2)")
    parser.add_argument("--max-iterations", type=int, default=30, help="LM iterations at most (default 30)")
    parser.add_argument("--backtracking", type=int, default=None,
                        help="calibrate(backtracking=N) of the two default calibrations (default: calibrate's, 0 "
                             "for these models without contacts: the plain LM)")
    parser.add_argument("--cv-iterations", type=int, default=CV_ITERATIONS,
                        help=f"state estimation iterations of each cross-validation at most (default {CV_ITERATIONS})")
    parser.add_argument("--output-error", action="store_true",
                        help="DFKI: only the output-error fits of the lab's model (on the training and on the held-out "
                             "recording) at --dt over --sim-seconds")
    args = parser.parse_args()
    CV_ITERATIONS = args.cv_iterations
    if args.output_error:
        dfki_output_error(args.dt, args.sim_seconds, 150)
        _record.write(__file__, FIGURES)
        return
    if args.rig in ("dfki", "both") and args.lab_model:
        dfki_lab(args.seconds, args.dt, args.max_iterations, args.weights, args.sim_seconds)
    elif args.rig in ("dfki", "both"):
        dfki(args.seconds, args.dt, args.max_iterations, args.save, args.backtracking)
    if args.rig in ("qube", "both"):
        qube(args.seconds, args.dt, args.max_iterations, args.qube_start, args.weights, args.qube_viscous, args.save,
             args.backtracking)
    _record.write(__file__, FIGURES)


if __name__ == "__main__":
    main()
