"""Bias of the Panda-like arm's friction estimates from the low-pass filter of the angles: the setting of
``benchmarks/identification.py`` (its exciting trajectory, friction and noise), identified by least squares of the
base regressor over many draws of the noise, with the angles low-passed at 10 Hz and at 5 Hz.

Noise left in the accelerations enters the regressor, and least squares with noise in its regressor is biased
(errors in variables). Per friction parameter (F_v, F_c, F_o of each joint): the mean error over the draws
relative to the truth (the bias; its Monte Carlo standard error is sd / sqrt(draws)), the spread sd of the errors,
the mean of the standard deviations least squares reports (sigma^2 (W_b^T W_b)^-1), and how many of the 21 land
within 5 % of the truth per draw. Two noise cases: angles only (1e-4 rad, no torque noise: the bias alone) and
both (1e-4 rad, 0.05 N m).

    python benchmarks/identification_bias.py
"""

from __future__ import annotations

import argparse
import time

import _record
import identification as setting
import numpy as np

from mbfg.arm_identification import extended_base_parameters, least_squares_identification, stacked_regressor
from mbfg.excitation import ExcitationOptions, excite
from mbfg.joint_derivatives import DerivativeOptions, joint_derivatives
from mbfg.kinematic_tree import load_tree

#: Cutoff [Hz] and the seconds dropped at each end (5 / cutoff: the filter's start-up).
FILTERS = ((10.0, 0.5), (5.0, 1.0))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--draws", type=int, default=10)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    tree = load_tree(setting.PANDA)
    n = tree.n
    excitation = excite(tree, ExcitationOptions(duration=10.0, harmonics=3, samples=100, max_iterations=40, seed=0))
    base = extended_base_parameters(tree, setting.MODEL)
    truth = base.values(np.concatenate([tree.pi.ravel(), setting.FRICTION.ravel()]))
    friction = [k for k, col in enumerate(base.independent) if col >= 10 * n and (col - 10 * n) % 4 < 3]
    names = [base.names[base.independent[k]] for k in friction]
    t = np.arange(int(round(10.0 * setting.RATE)) + 1) / setting.RATE
    figures = []
    for cutoff, trim in FILTERS:
        for angle_noise, torque_noise in ((1e-4, 0.0), (1e-4, 0.05)):
            start = time.perf_counter()
            errors, stds = [], []
            for draw in range(1, args.draws + 1):
                rng = np.random.default_rng(draw)
                *_, q_meas, tau_meas = setting.simulate(tree, excitation.trajectory, 10.0, rng, angle_noise,
                                                        torque_noise)
                q, qd, qdd = joint_derivatives(t, q_meas, options=DerivativeOptions(cutoff=cutoff))
                keep = slice(int(trim * setting.RATE), len(t) - int(trim * setting.RATE))
                W = stacked_regressor(tree, q[keep], qd[keep], qdd[keep], setting.MODEL)
                ls = least_squares_identification(tree, W, tau_meas[keep], base, setting.MODEL)
                errors.append(ls.values[friction] - truth[friction])
                stds.append(ls.std[friction])
            errors, stds = np.array(errors), np.array(stds)
            scale = np.abs(truth[friction])
            bias = errors.mean(axis=0) / scale
            spread = errors.std(axis=0, ddof=1) / scale
            within = np.sum(np.abs(errors) / scale <= 0.05, axis=1)
            worst = int(np.argmax(np.abs(bias)))
            row = {"cutoff_Hz": cutoff, "trim_s": trim, "angle_noise_rad": angle_noise, "torque_noise_Nm": torque_noise,
                   "draws": args.draws, "bias_rel_max": float(np.abs(bias).max()), "bias_worst": names[worst],
                   "bias_in_standard_errors_max": float(np.max(np.abs(bias) / (spread / np.sqrt(args.draws)))),
                   "spread_rel_max": float(spread.max()), "spread_worst": names[int(np.argmax(spread))],
                   "reported_std_rel_max": float((stds.mean(axis=0) / scale).max()),
                   "spread_over_reported_std_min": float((errors.std(axis=0, ddof=1) / stds.mean(axis=0)).min()),
                   "spread_over_reported_std_max": float((errors.std(axis=0, ddof=1) / stds.mean(axis=0)).max()),
                   "within_5pct_mean": float(within.mean()), "within_5pct_min": int(within.min()),
                   "friction_parameters": len(friction), "wall_s": round(time.perf_counter() - start, 1)}
            figures.append(row)
            print(f"{cutoff:g} Hz, angle noise {angle_noise:g} rad, torque noise {torque_noise:g} N m: bias max "
                  f"{100 * row['bias_rel_max']:.2f} % ({row['bias_worst']}, {row['bias_in_standard_errors_max']:.1f} "
                  f"standard errors), spread max {100 * row['spread_rel_max']:.2f} % ({row['spread_worst']}), "
                  f"reported std max {100 * row['reported_std_rel_max']:.2f} %, spread / reported std "
                  f"{row['spread_over_reported_std_min']:.2f} .. {row['spread_over_reported_std_max']:.2f}; within 5 %: "
                  f"{row['within_5pct_mean']:.1f} of {len(friction)} per draw (min {row['within_5pct_min']}); "
                  f"{row['wall_s']} s", flush=True)
    _record.write(__file__, figures, out=args.out)


if __name__ == "__main__":
    main()
