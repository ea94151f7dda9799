"""Forward dynamics as a factor graph (Blanco-Claraco et al. (2021) sections 5.1, 5.2 and 7.1).

Known: the initial state and the applied forces (gravity along -y plus an
optional constant generalized force). Unknown: positions, velocities and
accelerations at every step. Two formulations:

* dependent coordinates (Figure 2): per step q, qdot, qddot with f_pc^d,
  f_vc^d, f_dyn^d and two trapezoidal integrators;
* independent coordinates (Figure 3): per step q, qdot and z, zdot, zddot with
  f_pc^i, f_vc^i, f_dyn^i, trapezoidal integrators on z, and the soft equality
  f_eq between consecutive q that keeps the solver on the mechanism's branch.

Solved in batch (Levenberg-Marquardt over the whole horizon) or with GTSAM's
fixed-lag smoother over a window of Nw steps.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import SupportsFloat, SupportsIndex, SupportsInt

import gtsam
import numpy as np
import pandas as pd

from mbfg import keys
from mbfg.errors import ModelError
from mbfg.factors import (
    forward_dynamics_factor,
    forward_dynamics_independent_factor,
    independent_position_factor,
    independent_velocity_factor,
    position_factor,
    prior_factor,
    soft_equality_factor,
    trapezoidal_factor,
    velocity_factor,
)
from mbfg.limits import steps_of
from mbfg.planar import PlanarMechanism, best_independent_coordinates
from mbfg.progress import Progress


@dataclass(frozen=True)
class ForwardNoise:
    """Standard deviations of the forward-dynamics factors.

    Blanco-Claraco et al. (2021) Table 2 gives covariances: 1e-2 for the integrators, 1e-4 for the
    dynamics, 1e2 for the soft equality and 0 (exact) for priors and
    constraints; these are their square roots, with "exact" as a sigma small
    enough to be exact at float64 without making GTSAM's solve singular.
    Only the ratios matter.
    """

    integrator: float = 1e-1
    dynamics: float = 1e-2
    constraint: float = 1e-6
    prior: float = 1e-6
    equality: float = 1e3
    branch_prior: float = 1.0  # weak prior on q0 that picks the branch (independent coordinates)


@dataclass
class ForwardResult:
    """A simulated trajectory.

    Attributes:
        t: times (N+1,) [s].
        q, qdot, qddot: (N+1, n) coordinates, velocities, accelerations (SI).
        coordinate_names: names of the n coordinates.
        iterations: per solved step, the smoother's count (LM iterations for the batch
            smoother, 1 per iSAM2 update for the incremental one); one entry for a whole-horizon
            batch solve: its iterations (Gauss-Newton steps, then LM iterations if a step failed;
            0 when its start was already a minimum).
        wall_s: wall time of the solve [s].
        converged: for a whole-horizon batch solve, whether it reached a minimum (its
            linear model at the result predicts less than ``BATCH_RELATIVE_TOL`` of further
            decrease); None for the fixed-lag smoothers, which solve step by step.
        start_difference: for a whole-horizon batch solve, the largest difference of any
            coordinate at any step [m or rad] between its result and its start, the fixed-lag
            trajectory (Nw = 2, two Gauss-Newton steps per update); None for the fixed-lag
            smoothers. The discretization is overdetermined (constraints, integrators and dynamics
            disagree at O(dt^3)): the whole-horizon least squares spreads that compromise over the
            horizon, which a fixed-lag smoother cannot do for the states it has marginalized, so
            the two differ by more the longer the horizon (the four-bar, ``mbfg forward fourbar
            --duration T --batch``: 1.7e-8 m at 1 s, 3.2e-6 m at 5 s).
    """

    t: np.ndarray
    q: np.ndarray
    qdot: np.ndarray
    qddot: np.ndarray
    coordinate_names: tuple[str, ...]
    iterations: list[int] = field(default_factory=list)
    wall_s: float = 0.0
    converged: bool | None = None
    start_difference: float | None = None

    def to_dataframe(self) -> pd.DataFrame:
        """Columns ``t``, every coordinate, then ``d<name>`` velocities."""
        data = {"t": self.t}
        data.update({name: self.q[:, i] for i, name in enumerate(self.coordinate_names)})
        data.update({f"d{name}": self.qdot[:, i] for i, name in enumerate(self.coordinate_names)})
        return pd.DataFrame(data)


class _Builder:
    """Factors and initial values of one forward-dynamics problem, step by step."""

    def __init__(
        self,
        mech: PlanarMechanism,
        dt: float,
        g: float,
        q0: np.ndarray,
        qdot0: np.ndarray,
        Q_applied: np.ndarray | None,
        independent: np.ndarray | None,
        noise: ForwardNoise,
    ) -> None:
        self.mech, self.dt, self.noise, self.indep = mech, dt, noise, independent
        self.Q = mech.gravity_forces(g) + (np.zeros(mech.n) if Q_applied is None else np.asarray(Q_applied, float))
        self.q0 = np.asarray(q0, dtype=float)
        self.qdot0 = np.asarray(qdot0, dtype=float)
        self.qddot0 = mech.qddot(self.q0, self.qdot0, self.Q)
        # Independent coordinates are re-chosen when the current ones lose rank
        # (e.g. the x of a crank tip at 0 and 180 degrees). Each choice is a
        # "slot": z variables are keyed by step + slot, so a switch at step k
        # gives step k a second set of z, zdot, zddot in the new coordinates,
        # tied to the same q, qdot; the integrators continue from that set.
        self.slot = 0
        self.switch_steps: list[int] = []
        self._step_keys: list[int] = []

    def initial(self) -> tuple[gtsam.NonlinearFactorGraph, gtsam.Values]:
        """Factors and values of step 0."""
        graph, values = gtsam.NonlinearFactorGraph(), gtsam.Values()
        noise = self.noise
        self._step_keys = []
        if self.indep is None:
            graph.add(prior_factor(keys.Q(0), self.q0, noise.prior))
            graph.add(prior_factor(keys.V(0), self.qdot0, noise.prior))
        else:
            z, zd, _ = self._z_keys(0)
            graph.add(prior_factor(z, self.q0[self.indep], noise.prior))
            graph.add(prior_factor(zd, self.qdot0[self.indep], noise.prior))
            graph.add(prior_factor(keys.Q(0), self.q0, noise.branch_prior))
        self._step_factors(graph, 0)
        self._insert(values, 0, self.q0, self.qdot0, self.qddot0)
        return graph, values

    def transition(
        self,
        k: int,
        q: np.ndarray,
        qdot: np.ndarray,
        qddot: np.ndarray,
        next_state: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
    ) -> tuple[gtsam.NonlinearFactorGraph, gtsam.Values]:
        """Factors linking step k to k+1 and the new step's own factors, and the values of step k+1:
        ``next_state`` (q, qdot, qddot), each (n,), where given, else predicted from the (q, qdot,
        qddot) of step k by a Taylor step."""
        graph, values = gtsam.NonlinearFactorGraph(), gtsam.Values()
        dt, n, noise = self.dt, self.mech.n, self.noise
        self._step_keys = []
        if self.indep is None:
            graph.add(trapezoidal_factor(keys.Q(k), keys.Q(k + 1), keys.V(k), keys.V(k + 1), dt, n, noise.integrator))
            graph.add(trapezoidal_factor(keys.V(k), keys.V(k + 1), keys.A(k), keys.A(k + 1), dt, n, noise.integrator))
        else:
            d = len(self.indep)
            (z0, zd0, zdd0), (z1, zd1, zdd1) = self._z_keys(k), self._z_keys(k + 1)
            graph.add(trapezoidal_factor(z0, z1, zd0, zd1, dt, d, noise.integrator))
            graph.add(trapezoidal_factor(zd0, zd1, zdd0, zdd1, dt, d, noise.integrator))
            graph.add(soft_equality_factor(keys.Q(k), keys.Q(k + 1), n, noise.equality))
        self._step_factors(graph, k + 1)
        if next_state is None:
            q_next = q + dt * qdot + 0.5 * dt**2 * qddot
            qdot_next, qddot_next = qdot + dt * qddot, qddot
        else:
            q_next, qdot_next, qddot_next = next_state
        self._insert(values, k + 1, q_next, qdot_next, qddot_next)
        better = self._better_independent(q_next) if self.indep is not None else None
        if better is not None:
            self.indep = better
            self.slot += 1
            self.switch_steps.append(k + 1)
            self._step_factors(graph, k + 1)
            self._insert(values, k + 1, q_next, qdot_next, qddot_next, z_only=True)
        return graph, values

    def _better_independent(self, q: np.ndarray, hysteresis: float = 3.0) -> np.ndarray | None:
        """The best independent coordinates at q if the current ones are ``hysteresis``
        times worse conditioned (|R| = 1 / sigma_min(B N), N = null(Phi_q)), else None."""
        null = self.mech.null_space(q)
        best = best_independent_coordinates(null)
        assert self.indep is not None  # the caller checks

        def gain(indep: np.ndarray) -> float:
            return 1.0 / np.linalg.svd(null[indep], compute_uv=False)[-1]

        return best if gain(self.indep) > hysteresis * gain(best) else None

    def _z_keys(self, k: int) -> tuple[int, int, int]:
        return keys.Z(k + self.slot), keys.ZD(k + self.slot), keys.ZDD(k + self.slot)

    def _step_factors(self, graph: gtsam.NonlinearFactorGraph, k: int) -> None:
        mech, noise = self.mech, self.noise
        if self.indep is None:
            graph.add(position_factor(mech, keys.Q(k), noise.constraint))
            graph.add(velocity_factor(mech, keys.Q(k), keys.V(k), noise.constraint))
            graph.add(forward_dynamics_factor(mech, keys.Q(k), keys.V(k), keys.A(k), self.Q, noise.dynamics))
            return
        z, zd, zdd = self._z_keys(k)
        graph.add(independent_position_factor(mech, self.indep, keys.Q(k), z, noise.constraint))
        graph.add(independent_velocity_factor(mech, self.indep, keys.Q(k), keys.V(k), zd, noise.constraint))
        graph.add(
            forward_dynamics_independent_factor(mech, self.indep, keys.Q(k), keys.V(k), zdd, self.Q, noise.dynamics)
        )

    def _insert(
        self, values: gtsam.Values, k: int, q: np.ndarray, qdot: np.ndarray, qddot: np.ndarray, z_only: bool = False
    ) -> None:
        """Initial values of step k (with ``z_only``, just a new slot's z, zdot, zddot)."""
        new: list[tuple[int, np.ndarray]] = []
        if not z_only:
            new += [(keys.Q(k), q), (keys.V(k), qdot)]
        if self.indep is None:
            new.append((keys.A(k), qddot))
        else:
            z, zd, zdd = self._z_keys(k)
            new += [(z, q[self.indep]), (zd, qdot[self.indep]), (zdd, qddot[self.indep])]
        for key, value in new:
            values.insert(key, value)
            self._step_keys.append(key)

    def new_keys(self) -> list[int]:
        """Keys created by the last :meth:`initial` or :meth:`transition`."""
        return list(self._step_keys)

    def state(self, values: gtsam.Values, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        q, qdot = values.atVector(keys.Q(k)), values.atVector(keys.V(k))
        if self.indep is None:
            return q, qdot, values.atVector(keys.A(k))
        # qddot of the dependent coordinates follows from the dynamics at (q, qdot).
        return q, qdot, self.mech.qddot(q, qdot, self.Q)


def lm_params(max_iterations: int = 15) -> gtsam.LevenbergMarquardtParams:
    """Levenberg-Marquardt settings of the forward problems (Blanco-Claraco et al. (2021) section 7.1: at most 15)."""
    params = gtsam.LevenbergMarquardtParams()
    params.setMaxIterations(max_iterations)
    # One Gauss-Newton step reaches the least-squares floor (the constraints and the
    # integrators disagree at O(dt^3)); past it every trial step fails, and each
    # failure costs an error evaluation of the window. Stop as soon as the
    # decrease is negligible and give up raising lambda early.
    params.setRelativeErrorTol(1e-3)
    params.setAbsoluteErrorTol(0.0)
    params.setlambdaUpperBound(1e2)
    # Near-exact constraints next to loose integrators: QR avoids squaring the condition number.
    params.setLinearSolverType("MULTIFRONTAL_QR")
    return params


def simulate_forward(
    mech: PlanarMechanism,
    dt: float,
    duration: float,
    *,
    g: float = 9.81,
    q0: np.ndarray | None = None,
    qdot0: np.ndarray | None = None,
    Q_applied: np.ndarray | None = None,
    coordinates: str = "dependent",
    independent: list[int] | np.ndarray | None = None,
    window: int | None = 2,
    smoother: str = "incremental",
    noise: ForwardNoise | None = None,
    max_iterations: int = 15,
    gauss_newton_steps: int = 1,
    quiet: bool = True,
) -> ForwardResult:
    """Simulate ``mech`` from (q0, qdot0) for ``duration`` seconds with step ``dt``.

    Args:
        mech: the mechanism.
        dt: time step [s]; duration: [s].
        g: gravity along -y [m/s^2].
        q0, qdot0: initial state (n,); default: the mechanism's assembly at rest.
        Q_applied: constant applied generalized forces (n,) besides gravity.
        coordinates: ``"dependent"`` (Figure 2) or ``"independent"`` (Figure 3).
        independent: indices of z in q (independent coordinates); default: a
            well-conditioned choice at q0.
        window: fixed-lag window Nw in steps; ``None`` solves the whole horizon in batch: Gauss-Newton
            (Levenberg-Marquardt where a step fails) from the trajectory of a fixed-lag run (Nw = 2,
            two Gauss-Newton steps per update), with ``converged`` on the result saying whether it
            reached a minimum.
        smoother: ``"batch"`` (BatchFixedLagSmoother, LM in the window) or
            ``"incremental"`` (IncrementalFixedLagSmoother, iSAM2).
        noise: factor sigmas (see :class:`ForwardNoise`).
        max_iterations: iteration limit per solve (LM: batch fixed-lag; Gauss-Newton and LM in all:
            whole-horizon batch).
        gauss_newton_steps: iSAM2 updates per time step (incremental smoother);
            each is one Gauss-Newton step.
        quiet: no progress records (:mod:`mbfg.progress`; else: the steps every 2 s; for a batch solve, those of
            its fixed-lag start guess, then every iteration with its cost).
    """
    if not (np.isfinite(dt) and np.isfinite(duration) and 0 < dt <= duration):
        raise ModelError(f"dt and duration must be finite with 0 < dt <= duration, got dt={dt}, duration={duration}")
    steps_of(duration, dt, "duration", "dt")  # a run of at most mbfg.limits.MAX_STEPS, before any allocation
    if coordinates not in ("dependent", "independent"):
        raise ModelError(f"coordinates must be 'dependent' or 'independent', got {coordinates!r}")
    if window is not None and window < 1:
        raise ModelError(f"window must be >= 1 step, got {window}")
    n_steps = int(round(duration / dt))
    q0 = mech.q0 if q0 is None else np.asarray(q0, dtype=float)
    qdot0 = np.zeros(mech.n) if qdot0 is None else np.asarray(qdot0, dtype=float)
    indep = None
    if coordinates == "independent":
        indep = np.asarray(mech.independent_coordinates(q0) if independent is None else independent, dtype=np.int32)
        if len(indep) != mech.dof:
            raise ModelError(f"{mech.name} has {mech.dof} degrees of freedom, got {len(indep)} independent coordinates")
    def builder() -> _Builder:  # a builder keeps per-run state (the independent coordinates' slots)
        return _Builder(mech, dt, g, q0, qdot0, Q_applied, indep, noise or ForwardNoise())

    progress = Progress(f"forward {coordinates}", n_steps, quiet=quiet)
    if window is None:
        # The start guess is a fixed-lag run (2 Gauss-Newton steps per update), over half the wall
        # time of a 5 s batch solve: it reports its progress too.
        start_progress = Progress(f"forward {coordinates}: fixed-lag start guess", n_steps, quiet=quiet)
        start = _solve_fixed_lag(builder(), n_steps, 2, "incremental", max_iterations, 2, start_progress)
        lm_progress = Progress(f"forward {coordinates}: batch iteration", max_iterations, quiet=quiet,
                               interval_s=0.0)
        start_progress.start = lm_progress.start = progress.start  # t= counts from the start of the solve
        result = _solve_batch(builder(), n_steps, max_iterations, lm_progress, start)
        result.start_difference = float(np.abs(result.q - start.q).max())
    else:
        result = _solve_fixed_lag(
            builder(), n_steps, window, smoother, max_iterations, gauss_newton_steps, progress
        )
    result.wall_s = progress.elapsed
    return result


#: A whole-horizon batch solve has converged when the Gauss-Newton model at its result predicts
#: less than this fraction of further decrease of the cost.
BATCH_RELATIVE_TOL = 1e-3


def _solve_batch(builder: _Builder, n_steps: int, max_iterations: int, progress: Progress,
                 start: ForwardResult) -> ForwardResult:
    """The whole horizon in one least-squares solve, started from ``start``'s states (the fixed-lag
    trajectory: the same discretization solved step by step, so the solve starts near its minimum).

    Gauss-Newton steps (QR) while each lowers the cost, until the Gauss-Newton model predicts less than
    ``BATCH_RELATIVE_TOL`` of further decrease (converged; that last step is taken too where it lowers
    the cost) or ``max_iterations`` steps are spent. A step that raises the cost before convergence
    hands over to GTSAM's Levenberg-Marquardt (damping) for the iterations left.
    Gauss-Newton first because the LM spends its last iteration on trial steps at the least-squares
    floor, each a whole-horizon solve and cost evaluation, until its lambda passes its bound (from
    the same start, the 1 s four-bar took 32 s for 1 accepted LM iteration, the 5 s one over 15 min;
    see benchmarks/README.md).

    ``progress`` gets one line per iteration (its number, the cost after it, the time).

    Starting step k+1 from a Taylor step of ``start``'s step k instead was wrong: its velocities and
    accelerations are O(dt^2) and O(dt) off, which the near-exact velocity constraints (sigma 1e-6)
    and the dynamics factors weigh heavily (a 1 s four-bar run started at a cost of about 2.5e8
    instead of 4e-9; the LM ran out of its 15 iterations 4 mm off, after 290 s)."""
    graph, values = builder.initial()
    for k in range(n_steps):
        state = (start.q[k + 1], start.qdot[k + 1], start.qddot[k + 1])
        g_k, v_k = builder.transition(k, start.q[k], start.qdot[k], start.qddot[k], next_state=state)
        graph.push_back(g_k)
        values.insert(v_k)
    cost, iterations, ordering = graph.error(values), 0, None
    while True:
        linear = graph.linearize(values)
        if ordering is None:  # COLAMD once: the graph's structure does not change
            ordering = gtsam.Ordering.ColamdGaussianFactorGraph(linear)
        delta = linear.eliminateMultifrontal(ordering, gtsam.EliminateQR).optimize()
        # First-order check: how much further would the Gauss-Newton model lower the cost?
        converged = bool(cost - linear.error(delta) <= BATCH_RELATIVE_TOL * cost + 1e-12)
        if iterations == max_iterations:
            break
        trial = values.retract(delta)
        trial_cost = graph.error(trial)
        if trial_cost < cost:
            values, cost, iterations = trial, trial_cost, iterations + 1
            progress.update(iterations, cost=cost)
            if converged:  # the last, small step is taken: the result is the batch minimum, not the start
                break
        elif converged:  # at the least-squares floor, where a step is rounding noise
            break
        else:
            values, cost, iterations, converged = _levenberg_marquardt(
                graph, values, max_iterations - iterations, iterations, progress)
            break
    result = _collect(builder, values, n_steps, [iterations])
    result.converged = converged
    return result


def _levenberg_marquardt(graph: gtsam.NonlinearFactorGraph, values: gtsam.Values, max_iterations: int,
                         done: int, progress: Progress) -> tuple[gtsam.Values, float, int, bool]:
    """GTSAM's LM from ``values`` for at most ``max_iterations``, after ``done`` Gauss-Newton steps.

    Returns the solution, its cost, the iterations in all (``done`` + LM's) and whether it converged
    (the same first-order check as :func:`_solve_batch`'s).
    """
    params = lm_params(max_iterations)
    params.setlambdaUpperBound(1e5)  # the whole horizon may need damping a window step never does

    def report(iteration: SupportsInt | SupportsIndex, _: object, cost_after: SupportsFloat | SupportsIndex) -> None:
        progress.update(done + int(iteration), cost=float(cost_after))  # GTSAM calls it after every iteration

    params.iterationHook = report
    optimizer = gtsam.LevenbergMarquardtOptimizer(graph, values, params)
    solution = optimizer.optimize()
    cost = graph.error(solution)
    linear = graph.linearize(solution)
    delta = linear.eliminateSequential(gtsam.Ordering.ColamdGaussianFactorGraph(linear), gtsam.EliminateQR).optimize()
    converged = bool(cost - linear.error(delta) <= BATCH_RELATIVE_TOL * cost + 1e-12)
    return solution, cost, done + optimizer.iterations(), converged


def _solve_fixed_lag(
    builder: _Builder,
    n_steps: int,
    window: int,
    kind: str,
    max_iterations: int,
    gauss_newton_steps: int,
    progress: Progress,
) -> ForwardResult:
    dt = builder.dt
    # Keys stamped t >= t_now - lag stay in the window: Nw states.
    lag = (window - 0.5) * dt
    if kind == "batch":
        smoother: gtsam.BatchFixedLagSmoother | gtsam.IncrementalFixedLagSmoother = gtsam.BatchFixedLagSmoother(
            lag, lm_params(max_iterations))
    elif kind == "incremental":
        isam_params = gtsam.ISAM2Params()
        # Relinearize every variable on every update: each update is one Gauss-Newton step.
        isam_params.setRelinearizeThreshold(0.0)
        isam_params.relinearizeSkip = 1
        isam_params.setFactorization("QR")
        smoother = gtsam.IncrementalFixedLagSmoother(lag, isam_params)
    else:
        raise ModelError(f"smoother must be 'batch' or 'incremental', got {kind!r}")
    # Held so that GTSAM's binding hands the factor callbacks this wrapper of the smoother's own
    # linearization point instead of a copy of it per factor (see graphs/stream.py's ISAM2Window).
    theta = smoother.getLinearizationPoint()  # noqa: F841 - kept alive for the callbacks
    n = builder.mech.n
    q_hist = np.zeros((n_steps + 1, n))
    qd_hist, qdd_hist = np.zeros_like(q_hist), np.zeros_like(q_hist)
    iterations: list[int] = []

    graph, values = builder.initial()
    k_new = 0
    for k in range(n_steps + 1):
        stamps = gtsam.FixedLagSmootherKeyTimestampMap()
        for key in builder.new_keys():
            stamps.insert((key, k_new * dt))
        result = smoother.update(graph, values, stamps)
        if kind == "incremental":
            # iSAM2 does one Gauss-Newton step per update; iterate to convergence.
            for _ in range(gauss_newton_steps - 1):
                smoother.update()
        estimate = smoother.calculateEstimate()
        q, qdot, qddot = builder.state(estimate, k_new)
        q_hist[k_new], qd_hist[k_new], qdd_hist[k_new] = q, qdot, qddot
        iterations.append(result.getIterations())
        if kind == "batch":
            progress.update(k_new, iterations=result.getIterations(), error=result.getError())
        else:  # iSAM2 does not evaluate the nonlinear error unless asked to
            progress.update(k_new, simulated_s=k_new * dt)
        if k == n_steps:
            break
        graph, values = builder.transition(k_new, q, qdot, qddot)
        k_new += 1
    # Values still in the window were refined after they were recorded.
    for key_k in range(max(0, n_steps - window + 1), n_steps + 1):
        q_hist[key_k], qd_hist[key_k], qdd_hist[key_k] = builder.state(estimate, key_k)
    t = dt * np.arange(n_steps + 1)
    return ForwardResult(t, q_hist, qd_hist, qdd_hist, builder.mech.coordinate_names, iterations)


def _collect(builder: _Builder, values: gtsam.Values, n_steps: int, iterations: list[int]) -> ForwardResult:
    states = [builder.state(values, k) for k in range(n_steps + 1)]
    q, qdot, qddot = (np.array(s) for s in zip(*states))
    t = builder.dt * np.arange(n_steps + 1)
    return ForwardResult(t, q, qdot, qddot, builder.mech.coordinate_names, iterations)


__all__ = ["ForwardNoise", "ForwardResult", "lm_params", "simulate_forward"]
