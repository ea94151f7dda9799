"""Receding-horizon control in real time: the horizon's problem linearized once per solve (successive linearization).

:class:`~mbfg.graphs.control.RecedingHorizon` solves the horizon's nonlinear least squares to convergence
by Levenberg-Marquardt, with a forward-mode Jacobian through the N chained steps at every iteration (40-55 ms
at N = 10 for the Furuta on a 2-core machine). :class:`LinearizedHorizon` is the real-time scheme of model-predictive
control: each solve linearizes *one* step at the current state x_0 and the warm-start activation a_bar,
in the chart ``x = x_0 boxplus xi`` (xi (12 nb,) = [dr, dtheta, dv, dw])::

    xi_{k+1} = d + A xi_k + B (a_k - a_bar),      y_k = y_0 + C xi_k + D (a_k - a_bar)

(d, y_0: the step from x_0 with a_bar; y_k: the step's target outputs, the named rates at x_{k+1} and the
named reactions ``P_lambda lambda_k / h``), chains that model over the N steps of the horizon, and solves
the resulting linear least squares in the plan exactly, bounds included (the active-set method of
:func:`mbfg.box.box_qp`, which holds and releases bounds by the signs of their multipliers, inside the compiled
program: :func:`box_qp_jax`), with the same targets, sigmas, rate and effort costs as ``RecedingHorizon``.
One compiled program and one small box-constrained dense solve (a few active-set changes): no LM iterations.

What it gives up: the model is frozen at x_0 over the horizon, so the plan is the exact optimum of the
nonlinear problem only to first order in the motion over the horizon (10 ms at h = 1 ms, N = 10). The
first activation, the one applied, is re-planned at the next state, which is how such controllers track
(``benchmarks/control.py`` compares the two schemes in closed loop).
"""

from __future__ import annotations

import functools
import time

import numpy as np

from mbfg import box, control
from mbfg import quaternion as quat
from mbfg._jax import jax, jnp
from mbfg._programs import structure_cache
from mbfg.rigid import RigidModel, State

from .control import Plan, RecedingHorizon

#: Ridge added to the plan's normal equations, relative to their largest diagonal entry: activations that
#: no target sees (a plan longer than the targets need) stay at the warm start instead of being undetermined.
RIDGE = 1e-12


def _retract(x0: State, xi: jnp.ndarray) -> State:
    """x_0 boxplus xi; xi (12 nb,) = [dr (3 nb) m, dtheta (3 nb) rad, dv (3 nb) m/s, dw (3 nb) rad/s]."""
    dr, dtheta, dv, dw = (part.reshape(-1, 3) for part in jnp.split(xi, 4))
    return State(x0.r + dr, jax.vmap(quat.boxplus)(x0.e, dtheta), x0.v + dv, x0.w + dw)


def _local(x1: State, x0: State) -> jnp.ndarray:
    """x_1 boxminus x_0 (12 nb,), the inverse of :func:`_retract`."""
    dtheta = jax.vmap(quat.boxminus)(x1.e, x0.e)
    return jnp.concatenate([(x1.r - x0.r).reshape(-1), dtheta.reshape(-1), (x1.v - x0.v).reshape(-1),
                            (x1.w - x0.w).reshape(-1)])


@structure_cache()
def linearized_horizon(model: RigidModel, rate_names: tuple[str, ...], horizon: int):
    """The linearization ``(x_0, a_bar (n_a,), p, h, P_lambda (k_f, m)) -> (Y_free (N, k), Gamma (N k, N n_a))``,
    a pure JAX function (compile it, or call it inside a compiled program).

    ``Y = Y_free + Gamma (a - a_bar)`` (stacked step after step, k = k_v + k_f outputs per step: the rates
    [rad/s, m/s], then the reactions [N]) is the horizon's outputs under the step linearized at (x_0, a_bar)
    (module docstring): ``Gamma[k, j] = C A^(k-1-j) B`` for j < k and ``D`` for j = k.
    """
    rates = control.rate_function(model, rate_names)
    N = horizon

    def step_outputs(xi, da, x0, a_bar, p, h, P_lambda):
        x1, lam = control.step(model, _retract(x0, xi), a_bar + da, p, h)
        return _local(x1, x0), jnp.concatenate([rates(x1, p), P_lambda @ lam / h])

    def linearize(x0: State, a_bar: jnp.ndarray, p: dict, h: jnp.ndarray, P_lambda: jnp.ndarray):
        xi0, da0 = jnp.zeros(12 * model.nb), jnp.zeros_like(a_bar)
        d, y0 = step_outputs(xi0, da0, x0, a_bar, p, h, P_lambda)
        (A, B), (C, D) = jax.jacfwd(step_outputs, argnums=(0, 1))(xi0, da0, x0, a_bar, p, h, P_lambda)

        def advance(carry, _):
            xi, AkB = carry  # the free motion before step k, and A^k B
            return (d + A @ xi, A @ AkB), (y0 + C @ xi, C @ AkB)

        _, (Y_free, CAkB) = jax.lax.scan(advance, (xi0, B), None, length=N)
        k, j = np.arange(N)[:, None], np.arange(N)[None, :]
        earlier = CAkB[np.clip(k - 1 - j, 0, N - 1)]  # (N, N, k_y, n_a): C A^(k-1-j) B
        blocks = jnp.where((j < k)[..., None, None], earlier, 0.0) + jnp.where((j == k)[..., None, None], D, 0.0)
        return Y_free, blocks.transpose(0, 2, 1, 3).reshape(N * D.shape[0], N * D.shape[1])

    return linearize


@structure_cache()
def _compiled_plan(model: RigidModel, rate_names: tuple[str, ...], horizon: int):
    """One compiled program from the state to the plan:
    ``(x_0, a_bar, p, h, P_lambda, targets (N k,), weights (N k,), J_costs, r_costs, lo, hi)``
    ``-> [delta, cost, optimal]``,
    delta = a - a_bar (N n_a,) the least squares of the rows ``J delta ~ r`` in the box [lo, hi] (the weighted
    targets over :func:`linearized_horizon`, then the cost rows ``J_costs``, ``r_costs``; the ridge
    :data:`RIDGE` on the diagonal of the normal equations) solved by :func:`box_qp_jax`,
    cost = 1/2 |r - J delta|^2, optimal = 1.0 where the box's KKT conditions hold at delta (0.0 only if the
    active set's iteration cap came first)."""
    linearize = linearized_horizon(model, rate_names, horizon)

    def normal_equations(x0, a_bar, p, h, P_lambda, targets, weights, J_costs, r_costs):
        Y_free, Gamma = linearize(x0, a_bar, p, h, P_lambda)
        J = jnp.vstack([weights[:, None] * Gamma, J_costs])
        r = jnp.concatenate([weights * (targets - Y_free.reshape(-1)), r_costs])
        normal = J.T @ J
        normal = normal + RIDGE * jnp.max(jnp.diag(normal)) * jnp.eye(normal.shape[0])
        eta = J.T @ r
        return normal, eta, r @ r

    @jax.jit
    def plan(x0, a_bar, p, h, P_lambda, targets, weights, J_costs, r_costs, lo, hi):
        normal, eta, rr = normal_equations(x0, a_bar, p, h, P_lambda, targets, weights, J_costs, r_costs)
        delta, optimal = box_qp_jax(normal, eta, lo, hi)
        # |r - J delta|^2 from the normal equations: r^T r - 2 delta^T J^T r + delta^T J^T J delta. One array
        # out, so the caller waits for one transfer.
        cost = 0.5 * (rr - 2.0 * delta @ eta + delta @ normal @ delta)
        return jnp.concatenate([delta, jnp.stack([cost, optimal.astype(delta.dtype)])])

    return plan


def box_qp_jax(H: jnp.ndarray, eta: jnp.ndarray, lo: jnp.ndarray, hi: jnp.ndarray) -> tuple[jnp.ndarray, jnp.ndarray]:
    """``argmin 0.5 x^T H x - eta^T x`` over ``lo <= x <= hi`` inside a compiled program: the active-set iteration
    of :func:`mbfg.box.box_qp` (hold the component that blocks the way to the free minimizer, release the held
    component whose multiplier has the most wrong sign) from x = 0 clipped into the box, in fixed shapes and at
    most :func:`mbfg.box.iteration_cap` (n) working-set changes.

    H (n, n) symmetric positive definite, eta, lo, hi (n,) (infinite sides allowed, ``lo == hi`` fixes a
    component). Returns (x (n,), optimal): optimal is True where the KKT conditions hold at x, False only if the
    cap was reached first. Tested against scipy's BVLS (tests/test_box_solve.py)."""
    n = H.shape[0]
    index = jnp.arange(n)
    fixed = lo == hi

    def free_minimizer(at_lower, at_upper, x):
        held = at_lower | at_upper | fixed
        free = ~held
        # The held components' rows become x_i = x_i; their columns move to the right-hand side.
        H_free = jnp.where(free[:, None] & free[None, :], H, 0.0) + jnp.diag(jnp.where(free, 0.0, 1.0))
        rhs = jnp.where(free, eta - H @ jnp.where(held, x, 0.0), x)
        return free, jnp.linalg.solve(H_free, rhs)

    def change(carry):
        at_lower, at_upper, x, count, _ = carry
        free, target = free_minimizer(at_lower, at_upper, x)
        below, above = free & (target < lo), free & (target > hi)
        blocked = jnp.any(below | above)
        # Blocked: move towards the target until the first free component reaches its bound; hold it.
        d = target - x
        ratio = jnp.where(below, (lo - x) / jnp.where(below, d, 1.0),
                          jnp.where(above, (hi - x) / jnp.where(above, d, 1.0), jnp.inf))
        j = jnp.argmin(ratio)
        alpha = jnp.clip(ratio[j], 0.0, 1.0)
        x_blocked = jnp.clip(x + alpha * d, lo, hi)
        x_blocked = jnp.where(index == j, jnp.where(below[j], lo[j], hi[j]), x_blocked)
        # Else: the target, and the held component whose multiplier has the most wrong sign released.
        x_free = jnp.clip(target, lo, hi)
        gradient = H @ x_free - eta
        scale = jnp.abs(H) @ jnp.abs(x_free) + jnp.abs(eta)
        wrong = jnp.where(at_lower, -gradient, 0.0) + jnp.where(at_upper, gradient, 0.0)
        wrong = jnp.where(wrong > box.SIGN_TOL * scale, wrong / jnp.maximum(scale, 1e-300), 0.0)
        optimal = ~blocked & ~jnp.any(wrong > 0.0)
        k = jnp.argmax(wrong)
        release = ~blocked & ~optimal & (index == k)
        at_lower = jnp.where(blocked, at_lower | ((index == j) & below[j]), at_lower & ~release)
        at_upper = jnp.where(blocked, at_upper | ((index == j) & above[j]), at_upper & ~release)
        return at_lower, at_upper, jnp.where(blocked, x_blocked, x_free), count + 1, optimal

    def again(carry):
        *_, count, optimal = carry
        return ~optimal & (count <= box.iteration_cap(n))

    x0 = jnp.clip(jnp.zeros(n), lo, hi)
    start = ((x0 == lo) & ~fixed, (x0 == hi) & ~fixed, x0, 0, jnp.asarray(False))
    _, _, x, _, optimal = jax.lax.while_loop(again, change, start)
    return x, optimal


class LinearizedHorizon(RecedingHorizon):
    """:class:`~mbfg.graphs.control.RecedingHorizon` (same arguments, targets, costs and closed loop), each
    solve the horizon's problem linearized at the current state and solved exactly (module docstring).

    A solve's ``iterations`` is 1 and its ``cost`` that of the linearized problem at the plan.
    """

    def _cost_rows(self, a_bar: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The rate and effort costs as rows ``J delta ~ r`` in delta = a - a_bar (a_bar at every step)."""
        N, n_a = self.horizon, len(self.model.controls)
        rows, rhs = [np.zeros((0, N * n_a))], [np.zeros(0)]
        if self.rate_sigma is not None:
            if N > 1:  # the same a_bar at every step: the rate cost sees delta alone
                rows.append(self._D / self.rate_sigma)
                rhs.append(np.zeros(self._D.shape[0]))
            if self.applied is not None:
                rows.append(np.eye(N * n_a)[:n_a] / self.rate_sigma)
                rhs.append((self.applied - a_bar) / self.rate_sigma)
        if self.effort_sigma is not None:
            rows.append(np.eye(N * n_a) / self.effort_sigma)
            rhs.append(-np.tile(a_bar, N) / self.effort_sigma)
        return np.vstack(rows), np.concatenate(rhs)

    def _plan(self, state: State, guess: np.ndarray | None, *, quiet: bool | None = None,
              check_state: bool = True) -> Plan:
        """The activations a_0 .. a_{N-1} from ``state``, linearized at the first activation of ``guess``
        (N, n_a) or of the warm start (the previous plan shifted). ``quiet`` is accepted for the interface:
        there are no iterations to report."""
        start = time.perf_counter()
        guess = self._checked_guess(state, guess, check_state)
        N, n_a = self.horizon, len(self.model.controls)
        a_bar = guess[0]
        a_bar_plan = np.tile(a_bar, N)
        # NumPy arguments go to the compiled program as they are: converting each with jnp.asarray first
        # is a separate transfer apiece, a visible share of a 1 ms step's budget.
        delta_cost = np.asarray(_compiled_plan(self.model, self.rate_names, N)(
            State(*state), a_bar, self._p_jax, self._h, self.P_lambda, self._targets, self._weights,
            *self._cost_rows(a_bar), self._box[0] - a_bar_plan, self._box[1] - a_bar_plan))
        # a_bar + (bound - a_bar) can miss the bound by one ulp: an activation held on its bound lands on it.
        controls = np.clip((a_bar_plan + delta_cost[:-2]).reshape(N, n_a), self.lower, self.upper)
        self.previous = controls
        optimal = bool(delta_cost[-1] == 1.0)
        message = ("the linearized horizon's least squares, solved exactly (box KKT conditions hold)" if optimal else
                   "the linearized horizon's box least squares stopped at its active-set iteration cap")
        return Plan(controls, float(delta_cost[-2]), 1, optimal, message, time.perf_counter() - start)

    @functools.cached_property
    def _box(self) -> tuple[np.ndarray, np.ndarray]:
        """The activation bounds of the stacked plan, (N n_a,) each."""
        return np.tile(self.lower, self.horizon), np.tile(self.upper, self.horizon)

    @functools.cached_property
    def _targets(self) -> np.ndarray:
        """(N k,) the targets step after step: the rates, then the reactions."""
        return np.hstack([self._rate_targets, self._force_targets]).reshape(-1)

    @functools.cached_property
    def _weights(self) -> np.ndarray:
        """(N k,) 1 / sigma of each target."""
        return np.tile(np.r_[np.full(len(self.rate_names), 1.0 / self.velocity_sigma),
                             np.full(len(self.force_names), 1.0 / self.force_sigma)], self.horizon)


__all__ = ["LinearizedHorizon", "box_qp_jax", "linearized_horizon"]
