"""Control graphs (the control note): the activations that reach a target velocity or constraint force.

One step (``horizon=1``) is the control note exactly: from the known state x_0, find a_0 minimizing
``1/2 |qdot* - P qdot_1|^2`` and/or ``1/2 |lambda* - P_lambda lambda|^2`` subject to the implicit-Euler
step, the state being an implicit function of the activations. Over a horizon of N steps the same
step is chained (x_{k+1} = step(x_k, a_k)) and every step's targets enter:

- the horizon factor (:func:`mbfg.factors.control.horizon_type`): variables a_0 .. a_{N-1}, residual
  the target errors of every step of the rollout from x_0, its Jacobian the note's direct method
  through the chained steps;
- optional costs on the activations: their rate ``a_{k+1} - a_k`` (and ``a_0`` minus the activation
  applied last, in receding-horizon use), and their size (``effort``);
- activation bounds, kept by the bounded Levenberg-Marquardt of :mod:`mbfg.solvers`.

Variable: the plan a_0 .. a_{N-1} stacked into one Vector (``keys.C(0)``). The initial values are the previous solution
shifted by one step (a warm start). :class:`RecedingHorizon` re-solves from each new state (a
simulated one, or a stream estimate), and :meth:`RecedingHorizon.run` closes the loop on the Spook
simulator.

Weights: a target's residual is divided by its sigma (``velocity_sigma`` in rad/s or m/s,
``force_sigma`` in N), so with several targets the sigmas say which matters more. Where a
constraint prevents a target velocity, the step's sensitivity along it is of the order of the
joint compliance (the control note's "null variation"): the solution does not chase it, and an
``effort_sigma`` keeps the remaining compliant leak from being exploited.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

import gtsam
import numpy as np

from mbfg import control, keys, spook
from mbfg._jax import jax, jnp
from mbfg._programs import structure_cache
from mbfg.adapter import noise_model
from mbfg.errors import ModelError
from mbfg.factors._rigid import fixed_values, state_values
from mbfg.factors.control import ACTIVATION_RATE, horizon_type, rate_matrix
from mbfg.factors.prior import partial_prior_factor, prior_factor
from mbfg.limits import MAX_HORIZON, MAX_STEPS, check_count
from mbfg.lm_config import LMConfig
from mbfg.logs import quantize
from mbfg.progress import Progress
from mbfg.rigid import RigidModel, State
from mbfg.solvers import bounded_levenberg_marquardt

if TYPE_CHECKING:  # the stream is needed only by a loop that follows one, which builds its estimator
    from mbfg.graphs.stream import StreamEstimator


@structure_cache()
def _jitted_step(model: RigidModel):
    return jax.jit(functools.partial(control.step, model))


@structure_cache()
def _jitted_plant(model: RigidModel):
    """The Spook simulator's step, compiled once per model (not once per closed-loop run)."""
    return jax.jit(functools.partial(spook.step, model))


@structure_cache()
def _jitted_rates(model: RigidModel, names: tuple[str, ...]):
    return jax.jit(control.rate_function(model, names))


@dataclass
class ControlResult:
    """One solve. controls: (N, n_a) a_0 .. a_{N-1}; states: x_1 .. x_N; cost: the final objective
    (GTSAM's, 1/2 sum of whitened squares); iterations, converged, message: the LM's; wall_s [s]: the time to
    compute the controls (the roll-out of ``states`` after them not included)."""

    controls: np.ndarray
    states: list[State]
    cost: float
    iterations: int
    converged: bool
    message: str
    wall_s: float


class Plan(NamedTuple):
    """A solve's plan before the roll-out: :class:`ControlResult` without ``states``."""

    controls: np.ndarray
    cost: float
    iterations: int
    converged: bool
    message: str
    wall_s: float


@dataclass
class ClosedLoop:
    """A receding-horizon run on the simulator.

    t: (n + 1,) [s]; controls: (n, n_a) the applied a_k; states: x_0 .. x_n;
    rates: (n, k_v) the target rates after each step [rad/s, m/s]; forces: (n, k_f) the target
    reactions of each step [N]; solve_s: (n,) wall time of each solve [s]; iterations: (n,).
    """

    t: np.ndarray
    controls: np.ndarray
    states: list[State]
    rates: np.ndarray
    forces: np.ndarray
    solve_s: np.ndarray
    iterations: np.ndarray
    rate_names: tuple[str, ...] = ()
    force_names: tuple[str, ...] = ()
    rate_targets: np.ndarray = field(default_factory=lambda: np.zeros(0))
    force_targets: np.ndarray = field(default_factory=lambda: np.zeros(0))

    def rate_error(self) -> np.ndarray:
        """(n, k_v) achieved minus target rate per step."""
        return self.rates - self.rate_targets

    def force_error(self) -> np.ndarray:
        """(n, k_f) achieved minus target reaction per step [N]."""
        return self.forces - self.force_targets


class RecedingHorizon:
    """Activations over a horizon of N steps that reach target rates and reaction forces.

    Args:
        model: a model with controls and no complementarity rows (:func:`mbfg.control.check_controllable`).
        h: time-step [s].
        horizon: N >= 1 steps (1: the control note's one-step problem).
        rates: target rates by name (:func:`mbfg.control.rate_names`: a hinge name for its angle
            rate [rad/s], a body attached by one hinge for that hinge's rate, ``BODY.vx`` .. ``BODY.wz``).
        forces: target joint reactions by name (``JOINT.fx``, ``.fy``, ``.fz`` [N], world axes, on
            the joint's child body).
        lower, upper: activation bounds (n_a,) [control units]; default unbounded.
        rate_sigma: std of the activation change per step [control units]; None: no rate cost.
        effort_sigma: std of a zero-mean prior on every activation; None: none.
        velocity_sigma, force_sigma: the targets' sigmas [rad/s or m/s; N].
        parameters: parameter values (default the model's own).
        lm: the options of each solve's LM (:class:`~mbfg.lm_config.LMConfig`; default 20 iterations at most).
        quiet: no progress lines.

    Raises:
        ModelError: an unknown target name, no target, bad bounds or sigmas, a model that cannot be controlled.
    """

    def __init__(self, model: RigidModel, h: float, horizon: int = 1, *, rates: Mapping[str, float] | None = None,
                 forces: Mapping[str, float] | None = None, lower: Sequence[float] | np.ndarray | None = None,
                 upper: Sequence[float] | np.ndarray | None = None, rate_sigma: float | None = None,
                 effort_sigma: float | None = None, velocity_sigma: float = 1.0, force_sigma: float = 1.0,
                 parameters: Mapping[str, Any] | None = None, lm: LMConfig = LMConfig(), quiet: bool = True) -> None:
        control.check_controllable(model)
        if not (np.isfinite(h) and h > 0):
            raise ModelError(f"time-step h must be a positive number of seconds, got {h}")
        if int(horizon) != horizon or horizon < 1:
            raise ModelError(f"horizon must be a whole number of steps >= 1, got {horizon}")
        check_count("horizon", horizon, MAX_HORIZON, "each solve is a least squares over every step of it")
        rates, forces = dict(rates or {}), dict(forces or {})
        if not rates and not forces:
            raise ModelError(f"{model.name}: no target; name a rate ({', '.join(control.rate_names(model))}) "
                             f"or a reaction ({', '.join(control.force_names(model))})")
        self.model, self.h, self.horizon = model, float(h), int(horizon)
        self.rate_names = tuple(control.resolve_rate_name(model, n) for n in rates)
        self.rate_targets = np.array([float(v) for v in rates.values()])
        self.force_names = tuple(forces)
        self.P_lambda = control.force_projection(model, self.force_names)
        self.force_targets = np.array([float(v) for v in forces.values()])
        for what, values in (("rate", self.rate_targets), ("force", self.force_targets)):
            if not np.all(np.isfinite(values)):
                raise ModelError(f"{model.name}: every target {what} must be a finite number, got {values}")
        n_a = len(model.controls)
        self.lower = np.full(n_a, -np.inf) if lower is None else np.asarray(lower, dtype=float).reshape(-1)
        self.upper = np.full(n_a, np.inf) if upper is None else np.asarray(upper, dtype=float).reshape(-1)
        for name, b in (("lower", self.lower), ("upper", self.upper)):
            if b.shape != (n_a,) or np.any(np.isnan(b)):
                raise ModelError(f"{model.name}: activation bound {name} must be {n_a} numbers "
                                 f"({', '.join(model.controls)}), got {b}")
        if np.any(self.lower >= self.upper):
            raise ModelError(f"{model.name}: activation bounds must have lower < upper, got {self.lower}, {self.upper}")
        for name, s in (("rate_sigma", rate_sigma), ("effort_sigma", effort_sigma),
                        ("velocity_sigma", velocity_sigma), ("force_sigma", force_sigma)):
            if s is not None and not (np.isfinite(s) and s > 0):
                raise ModelError(f"{name} must be a positive number, got {s}")
        self.rate_sigma, self.effort_sigma = rate_sigma, effort_sigma
        self.velocity_sigma, self.force_sigma = float(velocity_sigma), float(force_sigma)
        self.params = fixed_values(model) if parameters is None else {
            k: np.asarray(v, dtype=float) for k, v in parameters.items()}
        self._p_jax = {k: jnp.asarray(v) for k, v in self.params.items()}
        if not isinstance(lm, LMConfig):
            raise ModelError(f"lm: expected an mbfg.LMConfig, got {type(lm).__name__}")
        self.lm, self.quiet = lm, quiet
        self.previous: np.ndarray | None = None  # the last solution, for the warm start
        self.applied: np.ndarray | None = None  # the activation applied last, for the rate cost on a_0
        self._h = np.asarray(self.h)
        N = self.horizon
        self._rate_targets = np.tile(self.rate_targets, (N, 1))
        self._force_targets = np.tile(self.force_targets, (N, 1))
        per_step = [self.velocity_sigma] * len(self.rate_names) + [self.force_sigma] * len(self.force_names)
        self._target_noise = noise_model(np.tile(per_step, N), N * len(per_step))
        self._D = rate_matrix(N, n_a)

    # -- one solve -----------------------------------------------------------------------------
    def rollout(self, state: State, controls: np.ndarray) -> list[State]:
        """x_1 .. x_N of the controlled steps from ``state`` with ``controls`` (N, n_a)."""
        stepper = _jitted_step(self.model)
        out, x = [], State(*(jnp.asarray(c) for c in state))
        for a in controls:
            x, _ = stepper(x, jnp.asarray(a), self._p_jax, self.h)
            out.append(x)
        return out

    def _guess(self) -> np.ndarray:
        n_a = len(self.model.controls)
        if self.previous is None:
            guess = np.zeros((self.horizon, n_a))
        else:  # warm start: the previous plan shifted by one step, its last activation held
            guess = np.vstack([self.previous[1:], self.previous[-1:]])
        return np.clip(guess, self.lower, self.upper)  # inside the box (zero may be outside a one-sided box)

    def _checked_guess(self, state: State, guess: np.ndarray | None, check_state: bool = True) -> np.ndarray:
        """``guess`` (N, n_a), or the warm start if None, checked against the bounds; ``state`` checked too
        unless ``check_state`` is False (a closed loop's own simulator or estimator gave it)."""
        if check_state:
            self.model.check_state(state)
        if guess is None:
            guess = self._guess()
        guess = np.asarray(guess, dtype=float).reshape(self.horizon, len(self.model.controls))
        if np.any(guess < self.lower) or np.any(guess > self.upper):
            raise ModelError(f"{self.model.name}: the guess activations leave the bounds "
                             f"[{self.lower}, {self.upper}]")
        return guess

    def build(self, state: State, guess: np.ndarray) -> tuple[gtsam.NonlinearFactorGraph, gtsam.Values]:
        """The graph and initial values over the horizon from ``state`` with the activations ``guess`` (N, n_a)."""
        model, N, n_a = self.model, self.horizon, len(self.model.controls)
        graph, values = gtsam.NonlinearFactorGraph(), gtsam.Values()
        key = keys.C(0)
        values.insert(key, np.ascontiguousarray(guess, dtype=float).reshape(-1))
        ft = horizon_type(model, self.rate_names, N)
        graph.add(ft.make([key], self._target_noise, *state_values(model, state),
                          self.params, self._h, self._rate_targets, self.P_lambda, self._force_targets))
        if self.rate_sigma is not None:
            if N > 1:
                graph.add(ACTIVATION_RATE.make([key], noise_model(self.rate_sigma, (N - 1) * n_a), self._D))
            if self.applied is not None:
                graph.add(partial_prior_factor(key, np.arange(n_a), self.applied, self.rate_sigma))
        if self.effort_sigma is not None:
            graph.add(prior_factor(key, np.zeros(N * n_a), self.effort_sigma))
        return graph, values

    def solve(self, state: State, guess: np.ndarray | None = None, *, quiet: bool | None = None) -> ControlResult:
        """The activations a_0 .. a_{N-1} from ``state``; ``guess`` (N, n_a) or the warm start.
        ``quiet``: no LM progress lines (default: the controller's ``quiet``)."""
        plan = self._plan(state, guess, quiet=quiet)
        states = [State(*(np.asarray(c) for c in x)) for x in self.rollout(state, plan.controls)]
        return ControlResult(plan.controls, states, *plan[1:])

    def _plan(self, state: State, guess: np.ndarray | None, *, quiet: bool | None = None,
              check_state: bool = True) -> Plan:
        """:meth:`solve` without the roll-out of the states (the closed loop applies a_0 and needs none)."""
        start = time.perf_counter()
        graph, values = self.build(state, self._checked_guess(state, guess, check_state))
        bounds: dict[int, tuple[np.ndarray, np.ndarray]] = {
            keys.C(0): (np.tile(self.lower, self.horizon), np.tile(self.upper, self.horizon))}
        lm = bounded_levenberg_marquardt(graph, values, bounds, self.lm, quiet=self.quiet if quiet is None else quiet,
                                         label=f"control {self.model.name}")
        controls = lm.values.atVector(keys.C(0)).reshape(self.horizon, -1)
        wall = time.perf_counter() - start
        self.previous = controls
        return Plan(controls, float(graph.error(lm.values)), lm.iterations, lm.converged, lm.message, wall)

    # -- closed loop ---------------------------------------------------------------------------
    def run(self, state: State, steps: int, plant_parameters: Mapping[str, Any] | None = None, *,
            estimator: StreamEstimator | None = None) -> ClosedLoop:
        """Re-solve from each state and apply a_0 to the Spook simulator (:func:`mbfg.spook.step`) for ``steps`` steps.

        ``plant_parameters``: the simulator's parameters (default the controller's; others model a mismatch).
        ``estimator``: follow a stream estimate instead of the simulator's state. Each step the plant's
        readings (its observations, hinge angles unwrapped and, where the estimator has ``ppr``, quantized to
        its encoder counts) and the applied activations are pushed into this
        :class:`~mbfg.graphs.stream.StreamEstimator` (one sample per time-step: its period must be ``h``), and
        the controller solves from its filtered estimate; until the estimator has one, the activations are
        zero (moved into the bounds). ``state`` is then the plant's initial state only.
        Progress (step, solve time, target error) is logged (:mod:`mbfg.progress`) unless ``quiet``.

        Raises:
            ModelError: an estimator of another model or another sample period.
        """
        if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps < 1:
            raise ModelError(f"steps: expected a whole number of steps >= 1, got {steps!r}")
        check_count("steps", steps, MAX_STEPS, "a day at 1 kHz is 8.64e7 steps; each step is one solve")
        model = self.model
        plant = self._p_jax if plant_parameters is None else {k: jnp.asarray(v) for k, v in plant_parameters.items()}
        sim = _jitted_plant(model)
        rates_fn = _jitted_rates(model, self.rate_names) if self.rate_names else None
        hol = control.constraint_rows(model)
        sensor = None if estimator is None else _Encoders(self, estimator, plant)
        progress = Progress(f"control {model.name}", steps, quiet=self.quiet)
        x = State(*(jnp.asarray(c) for c in state))
        states, controls, rates, forces, solve_s, iters = [x], [], [], [], [], []
        for k in range(steps):
            believed = x if sensor is None else sensor.estimate(k * self.h, x)
            if believed is None:  # the estimator has no estimate yet
                a, wall = np.clip(np.zeros(len(model.controls)), self.lower, self.upper), 0.0
                iterations = 0
            else:
                # One progress line per step, not per LM iteration; the state is the plant's or the estimator's.
                plan = self._plan(believed, None, quiet=True, check_state=False)
                a, wall, iterations = plan.controls[0], plan.wall_s, plan.iterations
            if sensor is not None:
                sensor.applied = a
            x, info = sim(x, jnp.asarray(a), plant, self.h)
            self.applied = a
            states.append(x)
            controls.append(a)
            solve_s.append(wall)
            iters.append(iterations)
            rates.append(np.asarray(rates_fn(x, self._p_jax)) if rates_fn else np.zeros(0))
            forces.append(self.P_lambda @ np.asarray(info.lam_A)[hol] / self.h)
            err = np.abs(np.concatenate([rates[-1] - self.rate_targets, forces[-1] - self.force_targets]))
            progress.update(k + 1, solve_ms=1e3 * wall, max_target_error=float(err.max()))
        n = steps
        return ClosedLoop(np.arange(n + 1) * self.h, np.array(controls).reshape(n, -1), states,
                          np.array(rates).reshape(n, -1), np.array(forces).reshape(n, -1), np.array(solve_s),
                          np.array(iters), self.rate_names, self.force_names, self.rate_targets, self.force_targets)


class _Encoders:
    """The plant's readings as a rig's encoders deliver them, pushed into a stream estimator (``RecedingHorizon.run``)."""

    def __init__(self, controller: RecedingHorizon, estimator: StreamEstimator, plant: Mapping[str, Any]) -> None:
        model = controller.model
        if estimator.model.name != model.name or estimator.model.observations != model.observations:
            raise ModelError(f"the estimator follows {estimator.model.name}, the controller {model.name}")
        if abs(estimator.period - controller.h) > 1e-12 * controller.h or estimator.config.counts:
            raise ModelError(f"the estimator must take one sample per control step (period {controller.h} s) in "
                             f"radians, not raw counts; it has period {estimator.period} s, counts={estimator.config.counts}")
        self.estimator = estimator
        self.observe = jax.jit(model.observe)
        self.plant = plant
        self.hinge = model.angle_observation_mask()
        self.ppr = estimator.ppr
        self.last: np.ndarray | None = None  # the last (unwrapped) reading
        self.applied = np.zeros(len(model.controls))

    def estimate(self, t: float, x: State) -> State | None:
        """Push the readings of true state ``x`` at time ``t`` [s]; the filtered estimate's state, if any."""
        y = np.array(self.observe(x, self.plant), dtype=float)
        if self.last is not None:  # multi-turn encoders: the angle continues through +-pi
            turns = np.round((y - self.last) / (2.0 * np.pi))
            y = np.where(self.hinge, y - 2.0 * np.pi * turns, y)
        self.last = y
        if self.ppr is not None:
            y = np.where(self.hinge, quantize(y, self.ppr), y)
        step = self.estimator.push(t, y.tolist(), self.applied)
        return None if step.filtered is None else step.filtered.state


def solve_one_step(model: RigidModel, state: State, h: float, **kwargs: Any) -> ControlResult:
    """The control note's one-step problem: the activations a_0 that bring the next step closest to the targets
    (keyword arguments as :class:`RecedingHorizon`, horizon 1)."""
    return RecedingHorizon(model, h, 1, **kwargs).solve(state)


__all__ = ["ClosedLoop", "ControlResult", "RecedingHorizon", "solve_one_step"]
