"""Inverse dynamics as a factor graph (Blanco-Claraco et al. (2021) sections 5.3 and 7.2).

Given a prescribed trajectory of some coordinates ("imposed" coordinates,
e.g. a crank angle), find the generalized forces on those coordinates that
produce it. The graph is solved in batch (Gauss-Newton) in four
stages, each starting from the previous stage's solution (section 7.2):

1. q with priors on the imposed coordinates, position constraints f_pc^d and
   soft equalities f_eq between consecutive q;
2. + qdot, qddot and trapezoidal integrators f_ti (priors on qdot_0 and
   qddot_0 from velocity and acceleration analysis anchor the integrators'
   free modes);
3. + velocity constraints f_vc^d;
4. + generalized forces F with inverse-dynamics factors f_idyn^d and zero
   priors on the components of F that are not actuated.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import gtsam
import numpy as np
import pandas as pd

from mbfg import keys
from mbfg.adapter import FactorType, PerFactor, noise_model
from mbfg.errors import DataError, ModelError
from mbfg.factors import prior_factor
from mbfg.factors.constraints import POSITION, VELOCITY
from mbfg.factors.dynamics import INVERSE_DEPENDENT
from mbfg.factors.equality import SOFT_EQUALITY
from mbfg.factors.integrators import TRAPEZOIDAL
from mbfg.factors.prior import PARTIAL_PRIOR
from mbfg.limits import MAX_COORDINATE
from mbfg.planar import PlanarMechanism
from mbfg.progress import Progress


@dataclass(frozen=True)
class InverseNoise:
    """Standard deviations of the inverse-dynamics factors (see :class:`ForwardNoise`)."""

    trajectory: float = 1e-6
    integrator: float = 1e-1
    dynamics: float = 1e-2
    constraint: float = 1e-6
    equality: float = 1e3
    unactuated_force: float = 1e-6


@dataclass
class InverseResult:
    """Generalized forces on the imposed coordinates along the trajectory.

    Attributes:
        t: times (N,) [s].
        forces: (N, k) generalized force on each imposed coordinate [N or N m].
        imposed: indices of the imposed coordinates in q.
        q, qdot, qddot: (N, n) the solved motion.
        coordinate_names: names of all n coordinates.
        stage_iterations: Gauss-Newton iterations of each of the four stages.
        stage_converged: whether each stage's Gauss-Newton converged (False: it stopped at its
            iteration limit, and the forces are not a solution).
        wall_s: wall time [s].
    """

    t: np.ndarray
    forces: np.ndarray
    imposed: np.ndarray
    q: np.ndarray
    qdot: np.ndarray
    qddot: np.ndarray
    coordinate_names: tuple[str, ...]
    stage_iterations: list[int] = field(default_factory=list)
    stage_converged: list[bool] = field(default_factory=list)
    wall_s: float = 0.0

    @property
    def converged(self) -> bool:
        """Whether every stage's Gauss-Newton converged."""
        return all(self.stage_converged)

    def to_dataframe(self) -> pd.DataFrame:
        """Columns ``t`` then ``Q_<name>`` for each imposed coordinate."""
        data = {"t": self.t}
        for col, i in enumerate(self.imposed):
            data[f"Q_{self.coordinate_names[i]}"] = self.forces[:, col]
        return pd.DataFrame(data)


def initial_derivatives(t: np.ndarray, x: np.ndarray, samples: int = 7) -> tuple[np.ndarray, np.ndarray]:
    """First and second derivatives at t[0] of sampled x (N, k), by a polynomial fit.

    A degree ``samples - 1`` polynomial through the first samples is exact to
    O(dt^(samples - 1)); the trapezoidal integrators propagate any error in
    these initial values as an undamped (-1)^k oscillation, so they must be accurate.
    """
    samples = min(samples, len(t))
    tau = t[:samples] - t[0]
    scale = tau[-1] if tau[-1] > 0 else 1.0
    V = np.vander(tau / scale, samples, increasing=True)
    coef = np.linalg.solve(V, x[:samples])
    return coef[1] / scale, 2.0 * coef[2] / scale**2


class GaussNewtonResult(NamedTuple):
    """What :func:`gauss_newton` returns."""

    values: gtsam.Values
    """The last iterate."""
    iterations: int
    """Gauss-Newton steps taken."""
    converged: bool
    """Whether the last step changed the cost by at most ``relative_tol`` of it (or left it below
    ``absolute_tol``); False when the iteration limit stopped it first."""
    cost: float
    """The cost at ``values`` (GTSAM's error: half the sum of squared whitened residuals)."""


def gauss_newton(
    graph: gtsam.NonlinearFactorGraph,
    values: gtsam.Values,
    max_iterations: int = 50,
    relative_tol: float = 1e-6,
    on_iteration: Callable[[int, float], None] | None = None,
    absolute_tol: float = 1e-10,
) -> GaussNewtonResult:
    """Gauss-Newton with a multifrontal QR solve and a COLAMD ordering computed once.

    Each inverse-dynamics stage starts from a consistent solution of the
    previous one and is well posed, so a few steps converge; LM would spend its
    time on rejected trial steps at the least-squares floor. QR because the
    trapezoidal chain determines its (-1)^k mode only weakly, which a Cholesky
    factorization (condition number squared) reports as indeterminate.
    (``gtsam.GaussNewtonOptimizer`` with the same settings was an order of
    magnitude slower here, for a reason not pinned down.)

    Converged: a step changed the cost by at most ``relative_tol`` of it, or left it below
    ``absolute_tol``. A step that raises the cost by more is not convergence (undamped Gauss-Newton
    can overshoot): the iteration goes on, and at ``max_iterations`` the result says it did not
    converge.

    Args:
        graph, values: the problem and the start.
        max_iterations: the most steps.
        relative_tol: the convergence threshold, relative to the cost.
        on_iteration: called after each step with its number (1-based) and the new cost.
        absolute_tol: a cost this low is converged whatever its change: it is float64 rounding
            noise (pendulum2.yaml's stages sit at 1.5e-13 and move by 0.3 % from step to step).
    """
    ordering = None
    error = graph.error(values)
    for iteration in range(1, max_iterations + 1):
        linear = graph.linearize(values)
        if ordering is None:
            ordering = gtsam.Ordering.ColamdGaussianFactorGraph(linear)
        delta = linear.eliminateMultifrontal(ordering, gtsam.EliminateQR).optimize()
        values = values.retract(delta)
        new_error = graph.error(values)
        if on_iteration is not None:
            on_iteration(iteration, new_error)
        converged = new_error <= absolute_tol or abs(error - new_error) <= relative_tol * error
        error = new_error
        if converged:
            return GaussNewtonResult(values, iteration, True, error)
    return GaussNewtonResult(values, max_iterations, False, error)


def solve_inverse_dynamics(
    mech: PlanarMechanism,
    t: np.ndarray,
    trajectory: np.ndarray,
    imposed: Sequence[int | str],
    *,
    g: float = 9.81,
    q_guess: np.ndarray | None = None,
    noise: InverseNoise | None = None,
    max_iterations: int = 50,
    quiet: bool = True,
) -> InverseResult:
    """Forces on the ``imposed`` coordinates that make them follow ``trajectory``.

    Args:
        mech: the mechanism.
        t: sample times (N,) [s], uniformly spaced.
        trajectory: (N, k) prescribed values of the k imposed coordinates.
        imposed: the imposed coordinates, as indices into q or names.
        g: gravity along -y [m/s^2].
        q_guess: configuration near the start, picks the assembly branch (default q0).
        noise: factor sigmas.
        max_iterations: Gauss-Newton iteration limit per stage.
        quiet: no progress records (:mod:`mbfg.progress`; else: the start and the end of the position analysis and of
            each of the four stages, and a stage's Gauss-Newton iterations every 2 s).

    Returns the forces and the motion; ``converged`` is False when a stage stopped at
    ``max_iterations`` (``stage_converged`` says which). With redundant constraints
    (``mech.redundant_rows``) the multipliers are not unique, but the generalized forces on the
    imposed coordinates are (one imposed coordinate per degree of freedom, ``mech.dof``).
    """
    t = np.asarray(t, dtype=float).reshape(-1)
    traj = np.asarray(trajectory, dtype=float)
    if traj.ndim == 1:
        traj = traj[:, None]
    idx = np.array([mech.coordinate_index(c) for c in imposed], dtype=np.int32)
    _check_trajectory(t, traj, idx)
    noise = noise or InverseNoise()
    dt = float(t[1] - t[0])
    n, N = mech.n, len(t)
    progress = Progress("inverse dynamics", 4, quiet=quiet)

    # Every stage's start and end, unthrottled: a rate-limited line can skip a whole stage.
    say = progress.say

    # Initial values: the position problem along the trajectory, warm-started.
    say(f"position analysis of {N} samples (initial values)")
    q_init = np.zeros((N, n))
    q = np.array(mech.q0 if q_guess is None else q_guess, dtype=float)
    for k in range(N):
        q[idx] = traj[k]
        q = mech.solve_position(q, fixed=idx)
        q_init[k] = q
    say("position analysis done")
    qdot_init = np.gradient(q_init, dt, axis=0)
    qddot_init = np.gradient(qdot_init, dt, axis=0)
    # The trapezoidal integrators leave a (-1)^k mode free in qdot and qddot; full
    # priors on qdot_0 and qddot_0 (velocity and acceleration analysis) anchor it.
    v0_imposed, a0_imposed = initial_derivatives(t, traj)
    qdot0 = np.zeros(n)
    qdot0[idx] = v0_imposed
    qdot0 = mech.solve_velocity(q_init[0], qdot0, fixed=idx)
    qddot0 = np.zeros(n)
    qddot0[idx] = a0_imposed
    qddot0 = mech.solve_acceleration(q_init[0], qdot0, qddot0, fixed=idx)

    graph, values = gtsam.NonlinearFactorGraph(), gtsam.Values()
    iterations: list[int] = []
    converged: list[bool] = []
    stages = {1: "positions", 2: "+ velocities, accelerations, integrators", 3: "+ velocity constraints",
              4: "+ generalized forces, inverse dynamics"}

    def solve(stage: int) -> None:
        nonlocal values
        say(f"stage {stage}/4 ({stages[stage]}): {graph.size()} factors, {values.size()} variables, "
            f"cost {graph.error(values):.4g}")
        steps = Progress(f"inverse dynamics stage {stage}/4: Gauss-Newton iteration", max_iterations, quiet=quiet)
        steps.start = progress.start  # every line's t= counts from the start of the solve
        solved = gauss_newton(graph, values, max_iterations, on_iteration=lambda i, cost: steps.update(i, cost=cost))
        values = solved.values
        iterations.append(solved.iterations)
        converged.append(solved.converged)
        outcome = "converged" if solved.converged else "NOT converged (iteration limit)"
        say(f"stage {stage}/4 done: {solved.iterations} Gauss-Newton iterations, cost {solved.cost:.4g}, {outcome}")

    steps, pairs = range(N), range(1, N)

    def add(ft: FactorType, rows: Sequence[Sequence[int]], sigma: float, dim: int, *constants: object) -> None:
        # One vmapped JAX evaluation per factor type and stage, not one per factor.
        for factor in ft.make_many(rows, noise_model(sigma, dim), *constants):
            graph.add(factor)

    # Stage 1: positions.
    for k in steps:
        values.insert(keys.Q(k), q_init[k])
    add(PARTIAL_PRIOR, [[keys.Q(k)] for k in steps], noise.trajectory, len(idx), PerFactor(traj), idx)
    add(POSITION, [[keys.Q(k)] for k in steps], noise.constraint, mech.m, mech.arrays)
    add(SOFT_EQUALITY, [[keys.Q(k - 1), keys.Q(k)] for k in pairs], noise.equality, n)
    solve(1)
    # Stage 2: velocities, accelerations and the integrators.
    for k in steps:
        values.insert(keys.V(k), qdot_init[k])
        values.insert(keys.A(k), qddot_init[k])
    for x, xdot in ((keys.Q, keys.V), (keys.V, keys.A)):
        rows = [[x(k - 1), x(k), xdot(k - 1), xdot(k)] for k in pairs]
        add(TRAPEZOIDAL, rows, noise.integrator, n, dt)
    graph.add(prior_factor(keys.V(0), qdot0, noise.trajectory))
    graph.add(prior_factor(keys.A(0), qddot0, noise.trajectory))
    solve(2)
    # Stage 3: velocity constraints.
    add(VELOCITY, [[keys.Q(k), keys.V(k)] for k in steps], noise.constraint, mech.m, mech.arrays)
    solve(3)
    # Stage 4: unknown generalized forces.
    Q_known = mech.gravity_forces(g)
    unactuated = np.setdiff1d(np.arange(n), idx).astype(np.int32)
    for k in steps:
        values.insert(keys.F(k), np.zeros(n))
    rows = [[keys.Q(k), keys.V(k), keys.A(k), keys.F(k)] for k in steps]
    add(INVERSE_DEPENDENT, rows, noise.dynamics, n, mech.arrays, mech.mass_matrix, Q_known)
    if len(unactuated):
        zeros = np.zeros(len(unactuated))
        add(PARTIAL_PRIOR, [[keys.F(k)] for k in steps], noise.unactuated_force, len(unactuated), zeros, unactuated)
    solve(4)

    stack = lambda key: np.array([values.atVector(key(k)) for k in range(N)])  # noqa: E731
    F = stack(keys.F)
    return InverseResult(
        t=t,
        forces=F[:, idx],
        imposed=idx,
        q=stack(keys.Q),
        qdot=stack(keys.V),
        qddot=stack(keys.A),
        coordinate_names=mech.coordinate_names,
        stage_iterations=iterations,
        stage_converged=converged,
        wall_s=progress.elapsed,
    )


def _check_trajectory(t: np.ndarray, traj: np.ndarray, idx: np.ndarray) -> None:
    """Shapes, finite values and uniform times of arrays given to :func:`solve_inverse_dynamics`."""
    if len(t) < 3:
        raise DataError(f"trajectory: {len(t)} rows; at least 3 samples are needed")
    if traj.shape != (len(t), len(idx)):
        raise DataError(
            f"trajectory: expected {len(idx)} value column(s) (one per imposed coordinate), got shape {traj.shape}"
        )
    _check_samples(t, traj, lambda row: f"trajectory: row {row} (0-based)")
    if len(set(idx.tolist())) != len(idx):
        raise ModelError(f"imposed coordinates repeat an index: {idx.tolist()}")


def _check_samples(t: np.ndarray, values: np.ndarray, where: Callable[[int], str]) -> None:
    """Finite values and increasing, uniformly spaced times t (N,) [s]; values (N, k).

    ``where(i)`` names row i in a message: its 0-based index for arrays, its line for a file.
    """
    bad = np.flatnonzero(~np.isfinite(values).all(axis=1) | ~np.isfinite(t))
    if bad.size:
        raise DataError(f"{where(int(bad[0]))}: non-finite value (nan or inf)")
    far = np.flatnonzero((np.abs(values) > MAX_COORDINATE).any(axis=1))
    if far.size:  # 1e308 overflowed the solver's linear system (GTSAM: "Indeterminate linear system")
        row = int(far[0])
        raise DataError(f"{where(row)}: value {values[row][np.abs(values[row]) > MAX_COORDINATE][0]:g} is beyond "
                        f"+-{MAX_COORDINATE:g} [m or rad]; expected a coordinate of the mechanism")
    dt = np.diff(t)
    if np.any(dt <= 0):
        row = int(np.flatnonzero(dt <= 0)[0]) + 1
        raise DataError(f"{where(row)}: time {t[row]:.9g} s is not after the previous row's {t[row - 1]:.9g} s")
    off = np.flatnonzero(np.abs(dt - dt[0]) > 1e-6 * dt[0] + 1e-12)
    if off.size:
        row = int(off[0]) + 1  # the first row whose step differs
        raise DataError(
            f"{where(row)}: time step is not uniform ({dt[row - 1]:.9g} s from the previous row, "
            f"{dt[0]:.9g} s between the first two)"
        )


def load_mbse_trajectory(path: str | os.PathLike[str]) -> tuple[np.ndarray, np.ndarray]:
    """Read an MBSE trajectory file: ``%`` (or ``#``) comment lines, then rows ``t v1 [v2 ...]``.

    Checks what :func:`solve_inverse_dynamics` needs of it (at least 3 rows, finite numbers, time
    increasing and uniformly spaced); an error names the file and its line (1-based, comment lines
    counted).

    Returns t (N,) [s] and values (N, k) [m or rad].
    """
    rows: list[list[float]] = []
    lines: list[int] = []  # the file's line number of each row
    try:
        with open(path, encoding="utf-8-sig") as fh:  # a byte-order mark is accepted, as logs accept one
            for lineno, line in enumerate(fh, start=1):
                text = line.strip()
                if not text or text.startswith("%") or text.startswith("#"):
                    continue
                try:
                    rows.append([float(v) for v in text.split()])
                except ValueError:
                    raise DataError(f"{path}: line {lineno}: expected numbers 't v1 ...', got {text!r}") from None
                lines.append(lineno)
                if len(rows[-1]) != len(rows[0]):
                    raise DataError(f"{path}: line {lineno}: {len(rows[-1])} columns, expected {len(rows[0])}")
    except OSError as exc:
        raise DataError(f"{path}: cannot read trajectory: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise DataError(f"{path}: not a text (UTF-8) trajectory file ({exc.reason} at byte {exc.start})") from None
    if not rows:
        raise DataError(f"{path}: no data rows")
    data = np.array(rows)
    if data.shape[1] < 2:
        raise DataError(f"{path}: line {lines[0]}: expected a time column and at least one value column")
    if len(rows) < 3:
        raise DataError(f"{path}: {len(rows)} data row(s); at least 3 samples are needed")
    _check_samples(data[:, 0], data[:, 1:], lambda row: f"{path}: line {lines[row]}")
    return data[:, 0], data[:, 1:]
