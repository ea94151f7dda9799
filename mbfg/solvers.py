"""Levenberg-Marquardt on a GTSAM graph that keeps Vector variables inside a box (Marklund, Servin, Larson 2025,
eq. 3.18 and App. C), ending in one of three outcomes.

Each iteration linearizes the graph once (GTSAM calls our JAX factors), then tries damped steps
``(J^T J + lam D) delta = -J^T r`` with Marquardt's scaling D = diag(J^T J) (floored). Bounds: the box B of the
parameters is enforced on the step exactly: every variable without a bound is eliminated first (GTSAM, sparse),
which leaves the damped system of the bounded variables alone (its Schur complement, a few dozen columns), and
that box-constrained quadratic is solved exactly by an active-set method that holds and releases bounds by the
signs of their multipliers (:func:`mbfg.box.box_qp`); back-substitution gives the other variables. This is the
box-constrained linear least-squares subproblem of App. C (the paper solves it as an MLCP). Two paths share it:
a GTSAM graph is linearized by GTSAM and eliminated by QR in a COLAMD ordering with the bounded variables last;
a :class:`~mbfg.vectorized.VectorizedGraph` takes the vectorized path: each factor type linearized in one call,
and the elimination by GTSAM's sparse Cholesky over the graph's blocks in its explicit order (states in time
order, parameters last), or, where those blocks form a band (a log's states, each coupled with the next), by a
banded Cholesky of the normal equations with the parameters' Schur complement (:mod:`mbfg.banded`); the linear
systems of both are in :mod:`mbfg.lm_systems`. The options named below
(``relative_tol``, ``damping_update``, ...) are the fields of :class:`~mbfg.lm_config.LMConfig`.

A step is accepted when it lowers the cost. The damping then follows one of two rules
(``damping_update``): "tenfold" divides lam by 10 after an accepted step and multiplies it
by 10 per rejected trial; "nielsen" (Madsen, Nielsen & Tingleff, *Methods for non-linear
least squares problems*, 2004, with Nielsen's growth factor nu) sets lam *= max(1/3, 1 - (2 rho - 1)^3)
after an accepted step, so a step the linearization predicted badly keeps its damping, and
doubles the growth factor with each rejected trial in a row. With ``backtracking`` > 0, a rejected step is first halved
along its direction (up to that many times) before lam grows. The gain ratio rho = (actual decrease) / (decrease the
linearization predicts) is reported per iteration: with complementarity
(friction, contact) a full step often crosses a kink where a multiplier switches,
and rho far from 1 shows it.

Outcomes (:class:`LMResult`'s ``status``, as Ceres reports them):

- "converged": an accepted step lowered the cost by less than ``relative_tol`` of it (a step taken at the
  initial damping or less, or :data:`STALL_STEPS` steps in a row at any damping) *and* at the point it reached
  the bounded first-order conditions hold: the projected gradient is small
  (:func:`~mbfg.lm_systems.projected_gradient_cosine` at most ``gradient_tol``) *and* the Gauss-Newton step there (:func:`gauss_newton_check`, damping
  :data:`LAMBDA_MIN`) predicts a decrease of at most ``relative_tol`` of the cost, or none of its fractions
  realizes more. Both earlier tests are scale-free bounds that ill-conditioning defeats (a damped step that barely
  moves along a weakly curved direction; columns each nearly orthogonal to the residual that together see it):
  the pendulum at rigid joints stalled at a thousand times its minimum with both passed. The cost at most
  ``absolute_tol`` also converges. So does a point where no damped step lowers the cost while the projected
  gradient is small and the Gauss-Newton check agrees (a minimum to round-off).
- "not_converged": the iteration or time limit came first (the message says where the steps stalled while the
  Gauss-Newton step promised more), or no damped step lowers the cost but the Gauss-Newton step does.
- "failed": the cost or the Jacobian is not finite (the factors that made it so are named), or no step lowers
  the cost up to the damping ``lambda_max`` while the projected gradient is not small (a kink, or a Jacobian
  that does not match the residual).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import gtsam
import numpy as np

from mbfg.errors import MbfgError
from mbfg.keys import name as key_name
from mbfg.lm_config import LAMBDA_INITIAL, LMConfig
from mbfg.lm_systems import BlockedSystem, OrdinarySystem
from mbfg.progress import Progress
from mbfg.vectorized import VectorizedGraph

#: The three outcomes of a solve (module docstring).
Status = Literal["converged", "not_converged", "failed"]
STATUSES: tuple[str, ...] = ("converged", "not_converged", "failed")


@dataclass
class LMResult:
    """values: the solution (the last accepted point; the start where a solve failed before a step);
    iterations: accepted + rejected linearizations; status: "converged", "not_converged" or "failed"
    (module docstring); history: per iteration (iteration, cost, lambda, rho = the step's gain ratio, wall s,
    linearize s, solve s, alpha = the fraction of the damped step taken: 1, or less after backtracking,
    gradient = the projected gradient's cosine at the point linearized, :func:`~mbfg.lm_systems.projected_gradient_cosine`);
    message: why it stopped."""

    values: gtsam.Values
    iterations: int
    status: Status
    history: list[dict[str, float]] = field(default_factory=list)
    message: str = ""

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise MbfgError(f"LMResult status must be one of {STATUSES}, got {self.status!r}")

    @property
    def converged(self) -> bool:
        """True only for status "converged"."""
        return self.status == "converged"

    @property
    def failed(self) -> bool:
        return self.status == "failed"


def status_words(status: str, message: str) -> str:
    """A solve's outcome as a report says it: "converged", "NOT converged (message)" or "FAILED (message)"."""
    if status == "converged":
        return "converged"
    return f"{'FAILED' if status == 'failed' else 'NOT converged'}" + (f" ({message})" if message else "")


#: Accepted steps in a row, each lowering the cost by less than ``relative_tol``, after which
#: :func:`bounded_levenberg_marquardt` checks the projected gradient even though their damping stayed above
#: ``lambda_initial``.
STALL_STEPS = 3

#: The smallest damping the LM takes, and the damping of its Gauss-Newton check (:func:`gauss_newton_check`).
#: Marquardt's damping scales the diagonal of J^T J, where a joint row of compliance eps weighs 1/eps^2 (1e14 at
#: eps_lin 1e-7 m/N): a damping of 1e-12 still adds ~100 to every state's diagonal, more than the readings'
#: curvature along the parameters, and the LM then creeps (gain ratio 1, the cost falling by a constant fraction per
#: iteration). On a pendulum log (2 s at 1 kHz, joints at mbfg.trees.JOINTS) a floor of 1e-12 took 47 iterations
#: to a relative decrease of 1e-9, and the default stopping rule left J 1.3 std from the minimum after 14; a
#: floor of 1e-20 reaches the minimum in 12, converging quadratically, and the default rule stops on it.
LAMBDA_MIN = 1e-20

#: The fractions of the Gauss-Newton check's step whose cost :func:`gauss_newton_check` evaluates.
NEWTON_FRACTIONS = (1.0, 0.5, 0.25, 0.125)


def bounded_levenberg_marquardt(
    graph: gtsam.NonlinearFactorGraph | VectorizedGraph,
    values: gtsam.Values,
    bounds: Mapping[int, tuple[np.ndarray, np.ndarray]] | None = None,
    config: LMConfig = LMConfig(),
    *,
    quiet: bool = False,
    label: str = "LM",
    on_iteration: Callable[[dict[str, float], gtsam.Values], None] | None = None,
) -> LMResult:
    """Minimize ``graph.error`` from ``values`` with Vector variables kept in ``bounds``.

    Args:
        graph, values: the problem and the initial guess (inside the bounds); a
            :class:`~mbfg.vectorized.VectorizedGraph` takes the vectorized path (module docstring).
        bounds: key -> (lower (n,), upper (n,)) for Vector variables; +-inf where unbounded.
        config: the options (:class:`~mbfg.lm_config.LMConfig`: iteration and time limits, the tolerances of the
            tests of convergence, the damping's start, limit and rule, backtracking); change one with
            ``dataclasses.replace(LMConfig(), max_iterations=50)``. Convergence by the decrease test needs the
            gradient test and the Gauss-Newton check (:func:`gauss_newton_check`: one more damped solve and up to
            four cost evaluations at the last point, no linearization) as well; where the check finds a decrease
            to take, the solve goes on from its step. A step accepted after backtracking at a fraction ``alpha``
            < 1 (in the history row) keeps its damping for the next linearization: the damped step's direction
            held up to a kink, and raising the damping instead turns it towards the damping's scaled gradient,
            which along heavily weighted rows moves little.
        quiet: no progress records (iteration, cost, lambda, time; :mod:`mbfg.progress`); label: their label.
        on_iteration: called after each iteration with its history row and the current values.

    Returns an :class:`LMResult` whose status is "converged", "not_converged" or "failed" (module docstring).
    """
    if not isinstance(config, LMConfig):
        raise MbfgError(f"config: expected an mbfg.LMConfig (e.g. LMConfig(max_iterations=50)), "
                        f"got {type(config).__name__}")
    max_iterations, relative_tol, absolute_tol = config.max_iterations, config.relative_tol, config.absolute_tol
    lambda_max, damping_update, backtracking = config.lambda_max, config.damping_update, config.backtracking
    gradient_tol, time_limit_s = config.gradient_threshold, config.time_limit_s
    bounds = dict(bounds or {})
    for key, (lo, hi) in bounds.items():
        x = values.atVector(key)
        if np.any(x < lo) or np.any(x > hi):
            raise MbfgError(f"initial value of bounded variable {key_name(key)} is outside its box")
    system: BlockedSystem | OrdinarySystem
    if isinstance(graph, VectorizedGraph):
        system = BlockedSystem(graph, values, bounds)
    else:
        system = OrdinarySystem(graph, values, bounds)
    progress = Progress(label, max_iterations, quiet=quiet, interval_s=0.0)
    start = time.perf_counter()
    cost = system.error(values)
    lam = config.lambda_initial
    history: list[dict[str, float]] = [
        dict(iteration=0, cost=cost, lam=lam, rho=float("nan"), wall_s=0.0, linearize_s=0.0, solve_s=0.0)
    ]

    def result(status: Status, message: str) -> LMResult:
        return LMResult(values, len(history) - 1, status, history, message)

    if not np.isfinite(cost):
        return result("failed", f"the cost at the initial values is {cost}: {system.nonfinite(values)}")
    if cost <= absolute_tol:
        return result("converged", f"the cost {cost:.3g} is at most absolute_tol {absolute_tol:g}")
    small = False  # the last accepted step lowered the cost by less than relative_tol (undamped, or a stall)
    stalled = 0
    stall = ""  # why the tests of convergence did not hold where the steps' decrease was small
    for iteration in range(1, max_iterations + 2):
        if time_limit_s is not None and time.perf_counter() - start > time_limit_s:
            return result("not_converged", f"time limit {time_limit_s:g} s after {len(history) - 1} iterations")
        t0 = time.perf_counter()
        diag: Any  # the Hessian's diagonal: flat (BlockedSystem) or per key (OrdinarySystem)
        linear: Any  # GTSAM's linear graph, or the banded path's system (mbfg.banded.BandedLinear)
        linear, diag = system.linearize(values)
        t_lin = time.perf_counter() - t0
        gradient = system.gradient_cosine(linear, diag, values, cost)
        history[-1]["gradient"] = gradient
        if not np.isfinite(gradient):
            return result("failed", f"the Jacobian is not finite: {system.nonfinite(values, linear)}")
        t0 = time.perf_counter()
        linear_cost = linear.error(system.zeros)
        newton = None  # the Gauss-Newton check's step, where it was made and showed a decrease to take
        if small and gradient <= gradient_tol:
            # Both tests are scale-free bounds that ill-conditioning defeats: a Marquardt-damped step moves
            # little along a direction whose curvature is below lam's share of the diagonal, and each column's
            # cosine can be small while the columns together see much of the residual. The Gauss-Newton step
            # says whether the point is stationary.
            check = gauss_newton_check(system, linear, diag, values, cost, linear_cost, bounds, relative_tol)
            if check.stationary:
                return result("converged", f"relative decrease below {relative_tol:g}, projected gradient cosine "
                                           f"{gradient:.2g} <= {gradient_tol:.2g} and {check.words}")
            stall = (f"stalled at iteration {iteration - 1}: the steps' decrease fell below relative_tol {relative_tol:g} (projected gradient "
                     f"cosine {gradient:.2g}) but {check.words}: the LM's damping hid it (an ill-conditioned problem)")
            newton, lam, small, stalled = check, LAMBDA_MIN, False, 0
        if iteration > max_iterations:
            break
        accepted = False
        growth = 10.0 if damping_update == "tenfold" else 2.0
        alpha = 1.0
        while lam <= lambda_max:
            try:
                if newton is not None and lam == LAMBDA_MIN and newton.step is not None:
                    delta, delta_linear = newton.step  # solved already
                else:
                    delta, delta_linear = system.step(linear, diag, lam, values)
                lengths = [0.5**i for i in range(backtracking + 1)]  # the fractions of the step to try
            except (RuntimeError, np.linalg.LinAlgError):
                # GTSAM found the damped system indeterminate (round-off in a stiff system under
                # a tiny damping): a rejected trial, so more damping.
                lengths = []
            for alpha in lengths:
                new_values, new_cost = _trial(system, values, delta if alpha == 1.0 else delta.scale(alpha), bounds)
                if np.isfinite(new_cost) and new_cost < cost:
                    accepted = True
                    break
            if accepted:
                break
            lam *= growth
            if damping_update == "nielsen":
                growth *= 2.0
        t_solve = time.perf_counter() - t0
        if not accepted:
            history.append(dict(iteration=iteration, cost=cost, lam=lam, rho=float("nan"),
                                wall_s=time.perf_counter() - start, linearize_s=t_lin, solve_s=t_solve,
                                gradient=gradient))
            if gradient <= gradient_tol:
                check = gauss_newton_check(system, linear, diag, values, cost, linear_cost, bounds, relative_tol)
                if check.stationary:
                    return result("converged", f"no damped step lowers the cost, the projected gradient cosine "
                                               f"{gradient:.2g} <= {gradient_tol:.2g} and {check.words}: a minimum "
                                               "to round-off")
                return result("not_converged", f"no damped step up to lambda_max {lambda_max:g} lowers the cost, "
                                               f"but {check.words}")
            return result("failed", f"no damped step lowers the cost up to lambda_max {lambda_max:g}, and the "
                                    f"projected gradient cosine {gradient:.2g} > {gradient_tol:.2g} is not small "
                                    "(a kink the linearization does not see, or a Jacobian that does not match "
                                    "the residual)")
        decrease = cost - new_cost
        predicted = linear_cost - linear.error(delta_linear if alpha == 1.0 else delta_linear.scale(alpha))
        rho = decrease / predicted if predicted > 0 else 0.0
        # A small decrease of a heavily damped step (just after lambda grew), or of a step cut short at a
        # kink, says nothing about convergence.
        undamped = lam <= config.lambda_initial and alpha == 1.0
        values, cost = new_values, new_cost
        # A step cut short keeps its damping: its direction held up to a kink the linearization did not see.
        if alpha == 1.0 and damping_update == "tenfold":
            lam = max(lam / 10.0, LAMBDA_MIN)
        elif alpha == 1.0:
            lam = max(lam * max(1.0 / 3.0, 1.0 - (2.0 * rho - 1.0) ** 3), LAMBDA_MIN)
        row = dict(iteration=iteration, cost=cost, lam=lam, rho=rho, wall_s=time.perf_counter() - start,
                   linearize_s=t_lin, solve_s=t_solve, alpha=alpha)
        history.append(row)
        # Where steps are halved, the fraction taken shows how often a kink cut a step short.
        progress.update(iteration, cost=cost, lam=lam, rho=rho, **({"alpha": alpha} if backtracking else {}))
        if on_iteration is not None:
            on_iteration(row, values)
        if cost <= absolute_tol:
            return result("converged", f"the cost {cost:.3g} is at most absolute_tol {absolute_tol:g}")
        tiny = decrease <= relative_tol * (cost + decrease)
        stalled = stalled + 1 if tiny else 0
        small = (undamped and tiny) or stalled >= STALL_STEPS
        if not small and iteration == max_iterations:
            break  # no gradient test to make: the last step still lowered the cost
    gradient_said = (f"; projected gradient cosine {history[-1]['gradient']:.2g} > {gradient_tol:.2g}"
                     if "gradient" in history[-1] and history[-1]["gradient"] > gradient_tol else "")
    return result("not_converged", f"iteration limit {max_iterations}{gradient_said}" + (f"; {stall}" if stall else ""))


@dataclass
class NewtonCheck:
    """:func:`gauss_newton_check`'s finding. stationary: the point is stationary to ``relative_tol``; predicted,
    realized: the decrease of the Gauss-Newton step that the linearization predicts, and the largest that one of
    :data:`NEWTON_FRACTIONS` of it realizes, as fractions of the cost (NaN where no step could be solved);
    step: (delta, its linear twin) as the LM's ``system.step`` returns them, None where none was solved;
    words: the finding as a message says it."""

    stationary: bool
    predicted: float
    realized: float
    step: tuple[gtsam.VectorValues, Any] | None
    words: str


def gauss_newton_check(system: Any, linear: Any, diag: Any, values: gtsam.Values, cost: float,
                       linear_cost: float, bounds: Mapping[int, tuple[np.ndarray, np.ndarray]],
                       relative_tol: float) -> NewtonCheck:
    """Whether the point ``values`` (cost ``cost``, linearized as ``linear``, whose cost at the zero step is
    ``linear_cost``) is stationary to ``relative_tol``, by the step of the least damping :data:`LAMBDA_MIN` (a
    Gauss-Newton step, the box included).

    Stationary where the decrease that step's linearization predicts is at most ``relative_tol`` of the cost, or
    where none of its fractions (:func:`newton_fractions`) lowers the actual cost by more than that, nor by a
    quarter of what the linearization predicts for the fraction (a kink the linearization does not see: the
    prediction is not the cost's). Where it predicts more and
    a fraction of it realizes more, the small steps that preceded were the damping's, not the cost's: the
    LM damps each direction by ``lam`` times its share of the diagonal, so along a direction whose curvature is
    below that share it barely moves, whatever the decrease to be had there. The step's predicted decrease is
    the linearization's for the step solved, whatever round-off the solve took: a decrease it predicts is there
    to the linearization. Costs one damped solve and up to four cost evaluations, and no linearization."""
    try:
        step = system.step(linear, diag, LAMBDA_MIN, values)
    except (RuntimeError, np.linalg.LinAlgError):
        # The system is numerically singular even so: no step to judge by. The other tests stand.
        return NewtonCheck(True, float("nan"), float("nan"), None,
                           f"no Gauss-Newton step could be solved (damping {LAMBDA_MIN:g})")
    predicted = max(linear_cost - linear.error(step[1]), 0.0) / cost
    said = f"the Gauss-Newton step predicts a decrease of {predicted:.3g} of the cost"
    if not np.isfinite(predicted):
        return NewtonCheck(True, predicted, float("nan"), None, said)
    if predicted <= relative_tol:
        return NewtonCheck(True, predicted, float("nan"), step, said)
    realized, tried = -np.inf, []
    for alpha in newton_fractions(predicted, relative_tol):
        _, new_cost = _trial(system, values, step[0] if alpha == 1.0 else step[0].scale(alpha), bounds)
        tried.append(alpha)
        gain = (cost - new_cost) / cost if np.isfinite(new_cost) else -np.inf
        realized = max(realized, gain)
        # What the linearization predicts for this fraction; a quarter of it realized shows the prediction holds
        # there, however small the fraction (a smooth cost's decrease along the step is the linearization's to
        # first order), so the point is not stationary.
        expected = max(linear_cost - linear.error(step[1] if alpha == 1.0 else step[1].scale(alpha)), 0.0) / cost
        if gain > relative_tol or (gain > 0.0 and gain >= 0.25 * expected):
            fraction = "it" if alpha == 1.0 else f"{alpha:g} of it"
            return NewtonCheck(False, predicted, realized, step, f"{said} and {fraction} realizes {gain:.3g}")
    return NewtonCheck(True, predicted, realized, step,
                       f"{said} but none of its fractions {tuple(tried)} realizes more than {max(realized, 0):.3g}")


def newton_fractions(predicted: float, relative_tol: float) -> list[float]:
    """The fractions of the Gauss-Newton check's step it tries: :data:`NEWTON_FRACTIONS`, then halved on while the
    fraction times the decrease ``predicted`` (a fraction of the cost) is above ``relative_tol``. Where the
    linearization predicts much, a step too long for the cost's curvature (stiff joint rows) realizes nothing,
    and only a short one shows whether the prediction is the cost's (at most 60 fractions)."""
    fractions = list(NEWTON_FRACTIONS)
    while fractions[-1] * predicted > relative_tol and len(fractions) < 60:
        fractions.append(fractions[-1] / 2.0)
    return fractions


def _trial(system: Any, values: gtsam.Values, delta: gtsam.VectorValues,
           bounds: Mapping[int, tuple[np.ndarray, np.ndarray]]) -> tuple[gtsam.Values, float]:
    """The values ``values + delta`` (bounded variables landed exactly on the bound they reach) and their cost."""
    new_values = values.retract(delta)
    for key, (lo, hi) in bounds.items():
        # x + (bound - x) can miss the bound by one ulp; land on it exactly.
        new_values.update(key, np.clip(new_values.atVector(key), lo, hi))
    return new_values, system.error(new_values)


__all__ = ["LAMBDA_INITIAL", "LAMBDA_MIN", "LMConfig", "LMResult", "NEWTON_FRACTIONS", "STALL_STEPS", "STATUSES",
           "NewtonCheck", "Status", "bounded_levenberg_marquardt", "gauss_newton_check", "newton_fractions", "status_words"]
