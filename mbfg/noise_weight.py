"""The state error weight w estimated from the data: maximum marginal likelihood over w.

The joint problem of Marklund, Servin, Larson (2025, eq. 3.17) minimizes

    C(w) = sum_k |Delta y_k|^2 + w sum_k |Delta p_k|^2

over the states x and the free parameters theta. Read as a Gaussian model, the readings have noise
variance sigma^2 and the impulses (the dynamics' residuals, what the model leaves unexplained) sigma^2 / w:
w is the ratio of two variances, sigma_y^2 / sigma_p^2, and the data can estimate it. With a flat prior on
theta, the impulse residuals as the density of the state sequence (n_p rows, their Jacobian in x of full rank),
and the states and parameters integrated out by the Laplace approximation at the solution x*(w) -- the
Gauss-Newton information H(w) = J^T W J the LM already builds -- the negative log marginal likelihood is,
up to a constant,

    -2 log L(w, sigma^2) = C(w) / sigma^2 + (n_y + n_p - d) log sigma^2 - n_p log w + log det H(w)

with n_y readings and d = dim x + dim theta unknowns. The variance sigma^2 = C(w) / (n_y + n_p - d) maximizes
it (the readings' degrees of freedom left after the parameters: the restricted likelihood's estimate), leaving
one dimension:

    -2 log L(w) = (n_y + n_p - d) log C(w) - n_p log w + log det H(w).

:func:`estimate_weight` minimizes it over log10 w, each evaluation a solve of the joint problem at that w started
from the neighbouring solution. Its stationarity condition is Helmert's variance-component equation (the
reading and impulse variances each equal to their residuals' squares over their redundancy), the method of
geodesy's variance-component estimation (Forstner 1979; Koch, *Parameter estimation and hypothesis testing in
linear models*, 1999), which it solves without computing the redundancy numbers. Left out: the determinant of
the impulse residuals' Jacobian in x, which does not depend on w (the flow map of the discrete dynamics along
trajectories that differ by the noise).

What it does not fix: the joint estimate of states and parameters (a maximum a posteriori over both) is biased
for parameters that scale the dynamics when the impulse noise is large. On a stage of 5 kg whose current carries
a hidden disturbance of 7.5 N per step, the weight found implies both noise levels to within 10 %, and the mass
at that weight, 4.86 kg, is 4.5 of its linearized standard deviations from the truth, the same from the true
parameters as from 20 % off (``tests/test_noise_weight.py`` holds the noise levels).

Units: w in (observation unit)^2 / (impulse unit)^2: rad^2 / (N m s)^2 for hinges read as angles, m^2 / (N s)^2
for sliders read as positions.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import gtsam
import numpy as np

from mbfg import keys
from mbfg.errors import ModelError

if TYPE_CHECKING:
    from mbfg.graphs.joint import JointProblem
    from mbfg.logs import Log
    from mbfg.rigid import RigidModel
    from mbfg.solvers import LMResult

#: Decades searched on either side of the starting weight before giving up on a bracket.
SEARCH_DECADES = 12
#: The step of the walk that brackets the minimum [decades of w].
STEP_DECADES = 1.5
#: Parabolic steps at most after the bracket; they stop when the vertex moves less than LOG10_TOLERANCE.
PARABOLA_STEPS = 5
#: The search's resolution in log10 w [decades]: well below the estimate's own spread on logs of a few
#: thousand samples (a factor 1.1-2 in w).
LOG10_TOLERANCE = 0.05
#: d log C / d log w above this: the low end, where the states follow the readings exactly (C proportional to w).
LOW_END_SLOPE = 0.8
#: A fall of -2 log L smaller than this over a step towards larger w is no evidence for the larger w (the
#: likelihood ratio of one step; 3.84 would be the 95 % point of chi-square with one degree of freedom).
INSIGNIFICANT = 1.0
#: A damping of the information's diagonal, relative to it, before its determinant: it keeps a direction that
#: nothing determines (a gauge freedom) from making log det H minus infinity. Relative, so that it scales with w
#: as the impulse rows' information does; far below it, so that it does not move the minimum: a fixed damping
#: (the same rows at every w) took over the directions only the impulses determine (the joints' constrained
#: ones) as w fell, and -2 log L then fell with it.
DETERMINANT_DAMPING = 1e-16


@dataclass(frozen=True)
class WeightEvaluation:
    """One point of the search: the weight, the criterion -2 log L(w) (up to a constant), the cost C(w) and
    log det H(w), and the LM iterations its solve took."""

    weight: float
    criterion: float
    cost: float
    log_det: float
    iterations: int
    converged: bool


@dataclass
class WeightEstimate:
    """The maximum-likelihood state error weight (module docstring) and the solve at it.

    weight: w; log10_std: the standard deviation of log10 w from the criterion's curvature (the Laplace
    approximation's, NaN where the curvature is not positive); sigma_observation: the implied reading noise
    sigma = sqrt(C / (n_y + n_p - d)) [observation unit]; sigma_impulse: sigma / sqrt(w) [impulse unit];
    evaluations: every w tried, in order; problem, solution: the joint problem at w and its solve;
    at_limit: the search ran into its range (:data:`SEARCH_DECADES`) without a minimum inside it;
    lower_bound: towards larger w the criterion fell by less than :data:`INSIGNIFICANT` over a step, so the data
    show no impulse noise and w is where they stop telling weights apart (a larger one fits as well).
    """

    weight: float
    log10_std: float
    sigma_observation: float
    sigma_impulse: float
    evaluations: list[WeightEvaluation]
    problem: JointProblem = field(repr=False)
    solution: LMResult = field(repr=False)
    at_limit: bool = False
    lower_bound: bool = False
    wall_s: float = 0.0

    def summary(self, units: tuple[str, str, str] = ("", "", "")) -> str:
        """One line: w with its spread, the search's limit if it ended there, and the implied noise levels.

        Args:
            units: of w, of the readings and of the impulses (:mod:`mbfg.roles`), printed after each figure.
        """
        w_unit, reading, impulse = (f" {u}" if u else "" for u in units)
        spread = f" (x/ {10 ** self.log10_std:.2g})" if np.isfinite(self.log10_std) else ""
        limit = ("; at the search's limit" if self.at_limit else
                 "; a lower bound: the data show no impulse noise beyond it" if self.lower_bound else "")
        return (f"w = {self.weight:.3g}{spread}{w_unit}, the maximum marginal likelihood over "
                f"{len(self.evaluations)} solves{limit}: reading noise {self.sigma_observation:.3g}{reading}, "
                f"impulse noise {self.sigma_impulse:.3g}{impulse}")


def log_determinant(problem: JointProblem, values: gtsam.Values) -> float:
    """log det H of the problem's Gauss-Newton information H = J^T W J at ``values``.

    The whitened linear system over the problem's blocks (states in time order, parameters last), each column
    damped by :data:`DETERMINANT_DAMPING` of its diagonal, is eliminated by GTSAM (sparse Cholesky, QR where a
    pivot is lost to round-off); log det H = 2 log |det R|."""
    graph = problem.vectorized
    if graph is None:
        raise ModelError("log_determinant: the problem has no vectorized graph")
    linear, diag = graph.linearize(values)
    damping = np.sqrt(DETERMINANT_DAMPING * np.maximum(diag, 1e-300))
    damped = gtsam.GaussianFactorGraph()
    damped.push_back(linear)
    for block, size in graph.blocks.size.items():
        start = graph.blocks.start[block]
        damped.push_back(gtsam.JacobianFactor(block, np.diag(damping[start:start + size]), np.zeros(size),
                                              gtsam.noiseModel.Unit.Create(size)))
    order = gtsam.Ordering(graph.order)
    try:
        bayes_net = damped.eliminateSequential(order)
    except RuntimeError:  # a pivot lost to round-off in a stiff system: QR works on J itself
        bayes_net = damped.eliminateSequential(order, gtsam.EliminateQR)
    return 2.0 * _log_abs_det(bayes_net)


def _log_abs_det(bayes_net: gtsam.GaussianBayesNet) -> float:
    """log |det R| of a Bayes net's conditionals, from their diagonals (QR's may be negative, which GTSAM's
    logDeterminant does not allow)."""
    return sum(float(np.sum(np.log(np.abs(np.diag(bayes_net.at(i).R()))))) for i in range(bayes_net.size()))


def impulse_log_determinant(problem: JointProblem, values: gtsam.Values) -> float:
    """log |det (sqrt(w) J_x)|, J_x the impulse residuals' (and the initial state's) Jacobian in the states at
    ``values``, whitened as in the graph (sigma 1 / sqrt(w)): the states are eliminated from the impulse rows alone,
    parameters last, and the states' R holds R^T R = w J_x^T J_x. It enters the likelihood as the density's change of variables from impulses to states;
    it varies with the states (where a joint sticks or slides, the rows of its friction change their
    stiffness), so it is part of the criterion, not a constant."""
    impulses = gtsam.NonlinearFactorGraph()
    for i, label in enumerate(problem.factor_kinds):
        if label == "impulse":
            impulses.push_back(problem.graph.at(i))
    linear = impulses.linearize(values)
    state_keys = [key for k in range(problem.n)
                  for key in [*(keys.X(k, i) for i in range(problem.model.nb)), keys.V(k)]]
    bayes_net, _ = linear.eliminatePartialSequential(gtsam.Ordering(state_keys), gtsam.EliminateQR)
    return _log_abs_det(bayes_net)


def starting_weight(problem: JointProblem) -> float:
    """A first w from the data, before any solve: the readings' noise variance over the impulses' at the
    initial states (the filtered readings, :func:`mbfg.graphs.joint.initial_states`).

    The readings' noise from their second differences, y_{k+1} - 2 y_k + y_{k-1}, whose variance is 6 sigma^2
    where the motion's own curvature over a sample, a h^2, is below the noise. The impulses at the filtered states
    carry the filter's lag and the noise it lets through besides the dynamics' own residuals: their variance is
    an upper bound, so this w lies at or below the maximum-likelihood one, where the solves converge quickly and
    the search walks up."""
    y = problem.y
    second = y[2:] - 2.0 * y[1:-1] + y[:-2]
    second = second[np.isfinite(second)]
    reading_variance = float(np.mean(second**2)) / 6.0 if second.size else 0.0
    n_y, n_p, _ = _rows(problem)
    impulse_variance = float(problem.step_costs(problem.initial)["impulse"].sum()) / problem.weight / max(n_p, 1)
    if not (reading_variance > 0 and impulse_variance > 0):
        return float(problem.weight)
    return reading_variance / impulse_variance


def _rows(problem: JointProblem) -> tuple[int, int, int]:
    """(n_y finite readings, n_p impulse rows, d unknowns) of the problem."""
    n_y = int(np.isfinite(problem.y).sum())
    n_p = sum(int(problem.graph.at(i).dim()) for i, label in enumerate(problem.factor_kinds) if label == "impulse")
    d = int(sum(problem.initial.zeroVectors().at(key).shape[0] for key in problem.initial.keys()))
    return n_y, n_p, d


def estimate_weight(
    model: RigidModel,
    log: Log,
    *,
    free: Sequence[str] | None = None,
    h: float | None = None,
    start: float | None = None,
    priors: Mapping[str, float] | None = None,
    solve: Callable[[JointProblem], LMResult] | None = None,
    quiet: bool = True,
) -> WeightEstimate:
    """The state error weight that maximizes the marginal likelihood of ``log`` (module docstring).

    Args:
        model, log, free, h, priors: the joint problem, as :func:`mbfg.calibration.calibrate` takes them.
        start: the first weight tried (default :func:`starting_weight`, from the readings and the initial states).
        solve: how each problem is solved (default :func:`mbfg.graphs.joint.solve` with 20 iterations at most).
        quiet: no progress lines.

    The search walks from ``start`` by :data:`STEP_DECADES` downhill until the criterion rises again, then
    refines by parabolas through the best point and its neighbours until the vertex moves less than
    :data:`LOG10_TOLERANCE` decades; each solve starts from the states and parameters of the solve at the
    nearest weight tried.
    """
    from mbfg.graphs.joint import build_joint_problem
    from mbfg.graphs.joint import solve as joint_solve

    began = time.perf_counter()
    run = solve or (lambda problem: joint_solve(problem, quiet=quiet, label=f"weight {problem.weight:.3g}"))
    if start is not None and not (isinstance(start, (int, float)) and np.isfinite(start) and start > 0):
        raise ModelError(f"start: the first weight must be a positive number, got {start!r}")
    first = build_joint_problem(model, log, h=h, free=free, weight=float(model.weight), priors=priors, quiet=True)
    w0 = float(start) if start is not None else starting_weight(first)
    if w0 != first.weight:
        first = build_joint_problem(model, log, h=first.h, free=first.variables.names, weight=w0, priors=priors,
                                    states=first.state_list(first.initial), quiet=True)
    n_y, n_p, d = _rows(first)
    dof = n_y + n_p - d
    if dof <= 0:
        raise ModelError(f"{log.source}: {n_y} readings leave no degree of freedom for the noise "
                         f"({n_p} impulse rows, {d} unknowns)")
    solved: dict[float, tuple[JointProblem, LMResult, WeightEvaluation]] = {}

    def _restarted(problem: JointProblem, lm: LMResult, w: float) -> JointProblem:
        return build_joint_problem(problem.model, log, h=problem.h, free=problem.variables.names, weight=w,
                                   priors=priors, initial_parameters=_free_values(problem, lm),
                                   states=problem.state_list(lm.values), quiet=True)

    def evaluate(log10_w: float, fresh: bool = False) -> float:
        log10_w = round(log10_w, 6)
        if log10_w in solved:
            return solved[log10_w][2].criterion
        w = 10.0 ** log10_w
        if not solved or fresh:
            problem = first if not solved else build_joint_problem(
                model, log, h=first.h, free=first.variables.names, weight=w, priors=priors,
                states=first.state_list(first.initial), quiet=True)
        else:  # from the nearest solve
            near = min(solved, key=lambda x: abs(x - log10_w))
            prev, prev_lm, _ = solved[near]
            problem = _restarted(prev, prev_lm, w)
        lm = run(problem)
        if not lm.converged:  # once more from where it stopped; a criterion of an unconverged solve overstates C
            again = _restarted(problem, lm, w)
            more = run(again)
            problem, lm = again, replace(more, iterations=lm.iterations + more.iterations,
                                         history=lm.history + more.history)
        costs = problem.step_costs(lm.values)
        cost = float(costs["observation"].sum() + costs["impulse"].sum())
        log_det = log_determinant(problem, lm.values)
        # -n_p log w - 2 log |det J_x| = -2 log |det (sqrt(w) J_x)|, the whitened rows' determinant.
        criterion = dof * math.log(max(cost, 1e-300)) + log_det - 2.0 * impulse_log_determinant(problem, lm.values)
        solved[log10_w] = (problem, lm, WeightEvaluation(w, criterion, cost, log_det, lm.iterations, lm.converged))
        return criterion

    # Off the low end: where the states follow the readings exactly, C grows in proportion to w and the
    # criterion is flat (its terms in log w cancel), and the parameters fitted there are anything; climb out
    # first, each solve from the problem's own start rather than those parameters.
    x0 = math.log10(w0)
    fresh = True
    while abs(x0 + STEP_DECADES - math.log10(w0)) <= SEARCH_DECADES:
        evaluate(x0, fresh)
        evaluate(x0 + STEP_DECADES, fresh)
        lower, upper = solved[round(x0, 6)][2], solved[round(x0 + STEP_DECADES, 6)][2]
        slope = math.log(max(upper.cost, 1e-300) / max(lower.cost, 1e-300)) / math.log(upper.weight / lower.weight)
        if slope < LOW_END_SLOPE:
            break
        x0 += STEP_DECADES
    fresh = False
    # Bracket: steps of STEP_DECADES downhill from there, until the criterion rises again.
    f0, f_up, f_down = evaluate(x0), evaluate(x0 + STEP_DECADES), evaluate(x0 - STEP_DECADES)
    at_limit = lower_bound = False
    if min(f_up, f_down) < f0:
        step = STEP_DECADES if f_up < f_down else -STEP_DECADES
        b = x0 + step
        while True:
            c = b + step
            if abs(c - x0) > SEARCH_DECADES:
                at_limit = True
                break
            fb, fc = evaluate(b), evaluate(c)
            if fc >= fb or not solved[round(c, 6)][2].converged:
                # Risen, or a solve that does not converge there (the LM creeps at weights far above the
                # data's): the minimum is behind.
                break
            if step > 0 and fb - fc < INSIGNIFICANT:
                # Towards rigid dynamics the criterion flattens out to the fit of a free simulation: the data show
                # no impulse noise, and a larger w only makes the problem stiffer. w is then a lower bound.
                lower_bound = True
                break
            b = c
    # Parabolas through the best point and its neighbours: -2 log L is close to a parabola in log10 w near its
    # minimum (its curvature is the inverse variance of log10 w).
    for _ in range(PARABOLA_STEPS):
        if at_limit or lower_bound:
            break
        xs = sorted(solved)
        i = min(range(len(xs)), key=lambda j: solved[xs[j]][2].criterion)
        if i == 0 or i == len(xs) - 1:
            break
        x = np.array(xs[i - 1 : i + 2])
        f = np.array([solved[v][2].criterion for v in x])
        a, b_, _ = np.polyfit(x - x[1], f, 2)
        if a <= 0:
            break
        vertex = float(np.clip(x[1] - b_ / (2 * a), x[0], x[2]))
        if abs(vertex - x[1]) < LOG10_TOLERANCE:
            break
        evaluate(vertex)
    best = round(b, 6) if lower_bound else min(solved, key=lambda x: solved[x][2].criterion)
    problem, lm, chosen = solved[best]
    w = chosen.weight
    sigma = math.sqrt(chosen.cost / dof)
    return WeightEstimate(w, float("nan") if lower_bound else _log10_std(solved, best), sigma, sigma / math.sqrt(w),
                          [solved[x][2] for x in solved], problem, lm, at_limit, lower_bound,
                          time.perf_counter() - began)


def _free_values(problem: JointProblem, lm: LMResult) -> dict[str, float]:
    """The values of the problem's variable parameters in the solve ``lm``."""
    found = problem.parameter_values(lm.values)
    return {name: found[name] for name in problem.variables.names}


def _log10_std(solved: Mapping[float, tuple], best: float) -> float:
    """The standard deviation of log10 w: -2 log L is, near its minimum, (log10 w - best)^2 / var; the
    curvature from a parabola through the best point and its two nearest neighbours (NaN without one on
    each side or a positive curvature)."""
    xs = sorted(solved)
    i = xs.index(best)
    if i == 0 or i == len(xs) - 1:
        return float("nan")
    x = np.array(xs[i - 1 : i + 2])
    f = np.array([solved[v][2].criterion for v in x])
    a = np.polyfit(x - x[1], f, 2)[0]  # f = a (x - x_min)^2 + ...; -2 log L's a = 1 / var
    return float(1.0 / math.sqrt(a)) if a > 0 else float("nan")


__all__ = ["WeightEstimate", "WeightEvaluation", "estimate_weight", "log_determinant"]
