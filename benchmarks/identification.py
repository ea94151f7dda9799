"""Identification of the Panda-like arm (``datasets/panda.urdf``): its base inertial parameters, joint friction and
reflected rotor inertias from a simulated 10 s log, by the classic least squares (the peer) and by mbfg's
Levenberg-Marquardt over physically consistent parameters (``mbfg.arm_identification``), in one run.

The log: an exciting trajectory optimized by ``mbfg.excitation.excite`` (a small optimization: 3 harmonics,
100 samples, 40 iterations), sampled at 1 kHz for 10 s; torques by inverse dynamics of the URDF's parameters plus
the friction law of ``mbfg.joint_friction`` (viscous, Coulomb as tanh(qd / 0.02 rad/s), offset, rotor inertia:
the values in FRICTION below); Gaussian noise of 1e-4 rad on the angles and 0.05 N m on the torques.

Both methods see the same data, as identification papers prepare it (``mbfg identify --cutoff 5``): angles
filtered by a zero-phase Butterworth (order 4, 5 Hz: about 17 times the trajectory's highest harmonic, 0.3 Hz;
scipy's sosfiltfilt), rates and accelerations by central differences of the filtered angles
(``mbfg.joint_derivatives``), 1 s (5 / cutoff, the filter's start-up) dropped at each end; the regressor built
there beside the measured torques. Noise the filter leaves in the accelerations biases both estimates (errors in
variables); ``benchmarks/identification_bias.py`` measures that bias over many draws of the noise, at this
cutoff and at 10 Hz.

- peer: ordinary least squares on the base columns (no physics: its estimate need not be any mass
  distribution); standard deviations sigma^2 (W_b^T W_b)^-1.
- mbfg: bounded LM over the log-Cholesky coordinates of the seven pseudo-inertias (Rucker and Wensing 2022) and
  the friction (F_v, F_c, I_a >= 0), each link's mass spread about its centre of mass at least 0.1 mm, from the
  URDF's parameters perturbed as a CAD model differs from the arm (mass factor e^N(0, 0.1), centre of mass N(0, 1
  cm), spreads e^N(0, 0.2)); every iterate's pseudo-inertia checked positive definite.

Figures: wall time, iterations, the base parameters' errors relative to the truth (max, median), their errors in
standard deviations, the friction errors (F_v, F_c, F_o relative), and the torque prediction RMS per joint on a
held-out trajectory (a random Fourier trajectory of another seed, exact states), against the noiseless torques.

    python benchmarks/identification.py
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import _record
import numpy as np

from mbfg.arm_identification import (
    consistent_identification,
    extended_base_parameters,
    least_squares_identification,
    stacked_regressor,
)
from mbfg.excitation import ExcitationOptions, condition_number, excite, random_trajectory
from mbfg.inverse_dynamics import inverse_dynamics
from mbfg.joint_derivatives import DerivativeOptions, joint_derivatives
from mbfg.joint_friction import FrictionModel, friction_torques
from mbfg.kinematic_tree import load_tree
from mbfg.lm_config import LMConfig
from mbfg.pseudo_inertia import log_cholesky_from_standard, standard_from_log_cholesky

PANDA = Path(__file__).resolve().parents[1] / "datasets" / "panda.urdf"
#: Per joint: F_v [N m s/rad], F_c [N m], F_o [N m], I_a [kg m^2] (the truth of the simulated log).
FRICTION = np.array([[0.20, 0.50, 0.10, 0.30], [0.25, 0.60, -0.08, 0.30], [0.15, 0.45, 0.05, 0.20],
                     [0.20, 0.55, -0.05, 0.20], [0.08, 0.25, 0.03, 0.05], [0.06, 0.20, -0.02, 0.05],
                     [0.05, 0.15, 0.02, 0.04]])
MODEL = FrictionModel(coulomb_width=0.02, rotor=True)
RATE, CUTOFF_HZ, TRIM_S = 1000.0, 5.0, 1.0


def simulate(tree, trajectory, duration, rng, angle_noise, torque_noise):
    t = np.arange(int(round(duration * RATE)) + 1) / RATE
    q, qd, qdd = trajectory.evaluate(t)
    tau = inverse_dynamics(tree, q, qd, qdd) + friction_torques(FRICTION, qd, qdd, MODEL)
    return t, q, qd, qdd, tau, q + rng.normal(0.0, angle_noise, q.shape), tau + rng.normal(0.0, torque_noise, q.shape)


def prepared(tree, q_meas, tau_meas, decimate):
    """The stacked regressor (rows, p) and torques (rows,) of the log: the regressor at the filtered angles and
    their differences, every ``decimate``-th sample, without the first and last TRIM_S."""
    t = np.arange(len(q_meas)) / RATE
    qf, qd, qdd = joint_derivatives(t, q_meas, options=DerivativeOptions(cutoff=CUTOFF_HZ))
    keep = slice(int(TRIM_S * RATE), len(q_meas) - int(TRIM_S * RATE), decimate)
    W = stacked_regressor(tree, qf[keep], qd[keep], qdd[keep], MODEL)
    return W.reshape(-1, W.shape[-1]), tau_meas[keep].reshape(-1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--angle-noise", type=float, default=1e-4)
    parser.add_argument("--torque-noise", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--decimate", type=int, default=1, help="use every k-th sample of the 1 kHz log")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    tree = load_tree(PANDA)
    n = tree.n

    options = ExcitationOptions(duration=args.duration, harmonics=3, samples=100, max_iterations=40, seed=args.seed)
    start = time.perf_counter()
    excitation = excite(tree, options)
    excite_s = time.perf_counter() - start
    held = random_trajectory(tree, ExcitationOptions(duration=args.duration, harmonics=3, seed=args.seed + 1))
    print(f"excitation: condition {excitation.condition:.4g} (random start {excitation.random_condition:.4g}), "
          f"{excite_s:.1f} s; held-out random trajectory: condition {condition_number(tree, held, options):.4g}")

    _, _, _, _, _, q_meas, tau_meas = simulate(tree, excitation.trajectory, args.duration, rng, args.angle_noise,
                                               args.torque_noise)
    base = extended_base_parameters(tree, MODEL)
    truth = np.concatenate([tree.pi.ravel(), FRICTION.ravel()])
    truth_base = base.values(truth)
    th, qh, qdh, qddh, tau_h, _, _ = simulate(tree, held, args.duration, rng, 0.0, 0.0)
    W_held = stacked_regressor(tree, qh, qdh, qddh, MODEL)
    friction_columns = [k for k in range(n * MODEL.size) if k % MODEL.size < 3]

    def summary(name, wall, iterations, values, std, phi, prediction, sigma):
        rel = np.abs(values - truth_base) / np.abs(truth_base)
        in_std = np.abs(values - truth_base) / std
        f_rel = np.abs(phi.ravel()[friction_columns] - FRICTION.ravel()[friction_columns]) / np.abs(
            FRICTION.ravel()[friction_columns])
        rms = np.sqrt(np.mean((prediction - tau_h) ** 2, axis=0))
        row = {"wall_s": round(wall, 2), "iterations": iterations, "residual_rms_Nm": sigma, "base_parameters": base.rank,
               "base_rel_error_max": float(rel.max()), "base_rel_error_median": float(np.median(rel)),
               "base_within_1pct": int(np.sum(rel <= 0.01)), "base_within_1pct_or_2std": int(np.sum((rel <= 0.01)
                                                                                                    | (in_std <= 2.0))),
               "base_error_std_max": float(in_std.max()), "base_error_std_median": float(np.median(in_std)),
               "friction_rel_error_max": float(f_rel.max()), "friction_rel_error_median": float(np.median(f_rel)),
               "friction_within_5pct": int(np.sum(f_rel <= 0.05)), "friction_parameters": len(friction_columns),
               "friction_rel_error_max_by_kind": {kind: float(f_rel.reshape(n, 3)[:, j].max())
                                                  for j, kind in enumerate(("Fv", "Fc", "Fo"))},
               "heldout_rms_Nm": [round(float(x), 4) for x in rms]}
        print(f"{name}: {wall:.2f} s, {iterations} iterations, residual RMS {sigma:.7g} N m; base parameters ({base.rank}): relative error max "
              f"{rel.max():.3g}, median {np.median(rel):.3g}, {row['base_within_1pct']} within 1 %, "
              f"{row['base_within_1pct_or_2std']} within 1 % or 2 std (std error max {in_std.max():.3g}, median "
              f"{np.median(in_std):.3g}); friction F_v, F_c, F_o: relative error max {f_rel.max():.3g}, median "
              f"{np.median(f_rel):.3g}, {row['friction_within_5pct']}/{len(friction_columns)} within 5 %; held-out "
              f"torque RMS [N m] {np.round(rms, 4).tolist()}")
        return row

    start = time.perf_counter()
    W, tau = prepared(tree, q_meas, tau_meas, args.decimate)
    ls = least_squares_identification(tree, W, tau, base, MODEL)
    ls_wall = time.perf_counter() - start
    pred_ls = W_held.reshape(-1, W.shape[1])[:, base.independent] @ ls.values
    phi_ls = np.zeros(n * MODEL.size)
    for k, col in enumerate(base.independent):  # friction that is its own base parameter (every F_v, F_c, F_o)
        if col >= 10 * n:
            phi_ls[col - 10 * n] = ls.values[k]
    peer = summary("least squares (peer)", ls_wall, 1, ls.values, ls.std, phi_ls, pred_ls.reshape(-1, n),
                   ls.sigma)

    theta0 = log_cholesky_from_standard(tree.pi)
    theta0 = theta0 + rng.normal(0.0, 1.0, theta0.shape) * np.array([0.05, 0.2, 0.2, 0.2, 0.0, 0.0, 0.0, 0.01, 0.01, 0.01])
    pi0 = np.asarray(standard_from_log_cholesky(theta0))
    phi0 = np.tile([0.1, 0.1, 0.0, 0.1], (n, 1))
    start = time.perf_counter()
    W, tau = prepared(tree, q_meas, tau_meas, args.decimate)
    config = LMConfig(max_iterations=200, damping_update="nielsen")
    result = consistent_identification(tree, W, tau, pi0, phi0, MODEL, config, base=base, sigma=args.torque_noise,
                                       min_spread=1e-4)
    lm_wall = time.perf_counter() - start
    eig = np.array(result.min_eigenvalues)
    x = np.concatenate([result.pi.ravel(), result.phi.ravel()])
    pred = W_held.reshape(-1, W.shape[1]) @ x
    ours = summary(f"mbfg LM ({result.lm.status}: {result.lm.message})", lm_wall, result.lm.iterations,
                   result.base_values, result.base_std, result.phi, pred.reshape(-1, n), result.sigma)
    at_bound = [tree.links[k] for k in np.flatnonzero(np.any(result.theta[:, 1:4] <= np.log(1e-4) + 1e-9, axis=1))]
    ours.update(lm_history_wall_s=round(result.lm.history[-1]["wall_s"], 2), status=result.lm.status, iterates_checked=len(eig), min_pseudo_inertia_eigenvalue=float(eig.min()),
                iterates_positive_definite=bool(np.all(eig > 0.0)), links_at_spread_bound=", ".join(at_bound))
    print(f"mbfg: {len(eig)} iterates, smallest pseudo-inertia eigenvalue {eig.min():.3g} kg m^2 "
          f"(all positive: {bool(np.all(eig > 0.0))}); links ending at the 0.1 mm spread bound: {at_bound}")
    common = {"duration_s": args.duration, "angle_noise_rad": args.angle_noise, "torque_noise_Nm": args.torque_noise,
              "condition": excitation.condition, "random_condition": excitation.random_condition}
    _record.write(__file__, [{**common, **ours}],
                  peer={"name": "least squares of the base regressor on filtered, differentiated angles",
                        "figures": [{**common, **peer}]}, out=args.out)


if __name__ == "__main__":
    main()
