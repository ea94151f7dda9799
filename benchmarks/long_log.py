"""A long single-axis log: where a calibration's time goes on 25,000 samples of a positioning stage at its real scale.

The log: ``linear_stage()`` (`mbfg models linear-stage`) with M = 95 kg, F_v = 200 N s/m, F_c = 20 N, F_0 = 5 N
(K_F = 150 N/A, J_r = 1.18 kg), driven by a position loop (PD, 2e4 N/m and 2e3 N s/m through K_F, current held
within +-20 A) that follows a reference of three sines (50 mm at 0.4 Hz, 20 mm at 1.3 Hz, 5 mm at 3.7 Hz):
Spook steps the closed loop at h = 1 ms for ``--duration`` s (one compiled scan), and the encoder reads the
carriage's position with ``--noise`` [m] of Gaussian noise. The controller's currents are the log's controls.

Timed: ``calibrate`` of M, F_v, F_c, F_0 from 15 % off at the state error weight ``--weight``, warm (the second
call in the process, its programs compiled by the first), split by phase, each phase's time exclusive of the
phases it calls:

- ``linearize_s``: the LM's linearizations (the factor types' residuals and Jacobians, and the linear system
  assembled from them), every solve of the calibration (the states-only start of a model with dry friction too);
- ``linear_solve_s``: the LM's damped steps (the elimination, the box QP on the parameters, back-substitution);
- ``covariance_s``: the parameters' covariance after the solve (the problem re-weighted by the estimated noise,
  its linearization and marginal);
- ``cost_s``: the cost evaluations of the trial steps;
- ``build_s``: building the joint problems (initial states, factor groups, GTSAM values);
- ``other_s``: the rest (wall minus the above).

With ``--general``, the same again with the LM's linear solve on the general path (GTSAM's elimination of a
factor graph built per linearization, :mod:`mbfg.lm_systems`) instead of the banded one (:mod:`mbfg.banded`), as
it was before the banded path: the same estimates, and the time the banded path saves, in one run.

Beside it, per parameter: the value, the error against the truth [%], the standard deviation; iterations and
converged. The peer: classic inverse-dynamics least squares on the same log (positions filtered by a zero-phase
second-order Butterworth at ``--cutoff`` Hz, differentiated twice by central differences, samples slower than
1 mm/s left out, ``K_F i - J_r a = M a + F_v v + F_c sign(v) - F_0`` regressed), its errors and wall time.

    python benchmarks/long_log.py                       # about 5 min on two shared cores
    python benchmarks/long_log.py --general             # and the general path: 10 min more
    python benchmarks/long_log.py --duration 5          # a 5,000-sample log
"""

from __future__ import annotations

import argparse
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import _record
import jax
import jax.numpy as jnp
import numpy as np
from scipy import signal

import mbfg.calibration as calibration_module
import mbfg.graphs.joint as joint_module
import mbfg.solvers
from mbfg.calibration import calibrate
from mbfg.lm_systems import BlockedSystem
from mbfg.logs import Log
from mbfg.models import linear_stage
from mbfg.spook import step

TRUTH = {"M": 95.0, "F_v": 200.0, "F_c": 20.0, "F_0": 5.0}
START = {name: (1.15 * value if name != "F_0" else 0.0) for name, value in TRUTH.items()}
H = 1e-3
K_P, K_D, CURRENT_LIMIT = 2.0e4, 2.0e3, 20.0  # N/m, N s/m, A


def stage_log(duration: float, noise: float, seed: int) -> Log:
    """The closed-loop stage log of the module docstring."""
    model = linear_stage().with_parameters(TRUTH)
    p = model.parameters.arrays()
    k_f = float(model.parameters["K_F"].default)
    t = np.arange(int(round(duration / H))) * H
    ref = (0.05 * np.sin(2 * np.pi * 0.4 * t) + 0.02 * np.sin(2 * np.pi * 1.3 * t + 0.5)
           + 0.005 * np.sin(2 * np.pi * 3.7 * t))
    ref_rate = np.gradient(ref, H)

    def loop(x, target):
        r, rd = target
        position, velocity = x.r[0, 0], x.v[0, 0]
        current = jnp.clip((K_P * (r - position) + K_D * (rd - velocity)) / k_f, -CURRENT_LIMIT, CURRENT_LIMIT)
        x_next, _ = step(model, x, current[None], p, H)
        return x_next, (current, position)

    _, (current, position) = jax.jit(lambda x, r, rd: jax.lax.scan(loop, x, (r, rd)))(
        model.initial_state(), jnp.asarray(ref), jnp.asarray(ref_rate))
    y = np.asarray(position)[:, None] + noise * np.random.default_rng(seed).standard_normal((len(t), 1))
    return Log(t, y, np.asarray(current)[:, None], model.observations, model.controls, "synthetic stage")


class PhaseTimer:
    """Wall time per phase, each exclusive of the phases it calls (a stack of running phases)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self._stack: list[list[Any]] = []  # [phase, start, time spent in inner phases]

    def wrap(self, phase: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            self._stack.append([phase, time.perf_counter(), 0.0])
            try:
                return fn(*args, **kwargs)
            finally:
                name, began, inner = self._stack.pop()
                spent = time.perf_counter() - began
                self.seconds[name] += spent - inner
                if self._stack:
                    self._stack[-1][2] += spent
        return timed


def instrument(timer: PhaseTimer) -> None:
    """Route the calibration's phases through ``timer`` (the benchmark's process only)."""
    BlockedSystem.linearize = timer.wrap("linearize_s", BlockedSystem.linearize)  # type: ignore[method-assign]
    BlockedSystem.step = timer.wrap("linear_solve_s", BlockedSystem.step)  # type: ignore[method-assign]
    BlockedSystem.error = timer.wrap("cost_s", BlockedSystem.error)  # type: ignore[method-assign]
    calibration_module._estimates = timer.wrap("covariance_s", calibration_module._estimates)
    joint_module.build_joint_problem = timer.wrap("build_s", joint_module.build_joint_problem)


def inverse_dynamics(log: Log, cutoff_hz: float) -> tuple[dict[str, float], float]:
    """The peer (module docstring): parameters and wall seconds."""
    model = linear_stage()
    k_f, j_r = float(model.parameters["K_F"].default), float(model.parameters["J_r"].default)
    began = time.perf_counter()
    b, a = signal.butter(2, cutoff_hz * 2.0 * H)
    x = signal.filtfilt(b, a, log.y[:, 0])
    v = np.gradient(x, H)
    acc = np.gradient(v, H)
    moving = np.abs(v) > 1e-3
    moving[:50] = moving[-50:] = False  # the filter's ends
    A = np.column_stack([acc, v, np.sign(v), -np.ones_like(v)])[moving]
    rhs = (k_f * log.u[:, 0] - j_r * acc)[moving]
    theta = np.linalg.lstsq(A, rhs, rcond=None)[0]
    return dict(zip(("M", "F_v", "F_c", "F_0"), map(float, theta))), time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--duration", type=float, default=25.0, help="log length [s] (1 kHz)")
    parser.add_argument("--noise", type=float, default=2e-8, help="encoder noise [m]")
    parser.add_argument("--weight", type=float, default=1e-8, help="state error weight w [m^2/(N s)^2]")
    parser.add_argument("--cutoff", type=float, default=20.0, help="the peer's filter cut-off [Hz]")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--general", action="store_true",
                        help="also time the calibration with the LM's linear solve on the general path")
    parser.add_argument("--out", default=None, help="where to write the record (default benchmarks/results/)")
    args = parser.parse_args()

    log = stage_log(args.duration, args.noise, args.seed)
    print(f"stage log: {len(log.t)} samples at {H:g} s, encoder noise {args.noise:g} m, "
          f"stroke {1e3 * np.ptp(log.y):.1f} mm, current within {np.abs(log.u).max():.2f} A")
    start = linear_stage().with_parameters(START)
    timer = PhaseTimer()
    instrument(timer)
    runs, rows = [], []
    for path in ("banded", "general") if args.general else ("banded",):
        if path == "general":  # the LM's linear solve by GTSAM's elimination, as before the banded path
            mbfg.solvers.BlockedSystem = lambda *a: BlockedSystem(*a, banded=False)  # type: ignore[misc]
        began = time.perf_counter()
        calibrate(start, log, weight=args.weight)
        first = time.perf_counter() - began
        timer.seconds.clear()
        began = time.perf_counter()
        result = calibrate(start, log, weight=args.weight)
        wall = time.perf_counter() - began
        phases = {k: timer.seconds.get(k, 0.0) for k in
                  ("linearize_s", "linear_solve_s", "covariance_s", "cost_s", "build_s")}
        phases["other_s"] = wall - sum(phases.values())
        print(f"calibration, {path} path (w = {args.weight:g}): first call {first:.1f} s, warm {wall:.1f} s; "
              f"{result.iterations} iterations, {'converged' if result.converged else 'NOT converged'}")
        print("  " + ", ".join(f"{k[:-2]} {v:.2f} s" for k, v in phases.items()))
        runs.append(dict(path=path, samples=len(log.t), weight=args.weight, first_call_s=first, warm_s=wall,
                         iterations=result.iterations, converged=result.converged, **phases))
        for p in result.parameters:
            error = 100.0 * (p.value / TRUTH[p.name] - 1.0)
            rows.append(dict(path=path, parameter=p.name, value=p.value, truth=TRUTH[p.name], std=p.std,
                             error_percent=error))
            print(f"  {p.name:<5}{p.value:>12.6g} (truth {TRUTH[p.name]:g}, error {error:+.4f} %, std {p.std:.3g})")
    theta, peer_wall = inverse_dynamics(log, args.cutoff)
    peer_rows = [dict(parameter=name, value=value, error_percent=100.0 * (value / TRUTH[name] - 1.0))
                 for name, value in theta.items()]
    print(f"inverse-dynamics least squares: {1e3 * peer_wall:.1f} ms; errors "
          + ", ".join(f"{r['parameter']} {r['error_percent']:+.3f} %" for r in peer_rows))
    figures = {"calibration": runs, "parameters": rows}
    _record.write(__file__, figures, peer={"name": "inverse-dynamics least squares (filtered, differentiated "
                                                   "positions regressed on force)",
                                           "figures": {"wall": [dict(wall_s=peer_wall)], "parameters": peer_rows}},
                  out=args.out)


if __name__ == "__main__":
    main()
