"""Control factors (the control note): the implicit-Euler step with activations, and the two target costs.

States x_k are laid out as in :mod:`._rigid` (nb ``Pose3`` + the velocity ``Vector``), the
activations a_k (the model's controls, n_a,) are a ``Vector`` (``keys.C(k)``); every parameter
is a constant. A factor whose first state is the known current state (step 0 of a problem)
takes that state as constants instead (``start=True``).

- :func:`step_type`: the control note's residual of the step, ``Q = H qdot_{k+1} - h(a_k) - G^T lambda``
  [N s, N m s] with the multipliers of the regularized constraints ``lambda = E^-1 (g - G qdot_{k+1})``
  (H, G, E, g, h of :func:`mbfg.control.step_system` at x_k), and the position residual
  ``R_q = tau qdot_{k+1} - (q_{k+1} boxminus q_k)`` [m, rad] (the note's R_q, zero once projected).
  Both vanish exactly on the step :func:`mbfg.control.step` (the Spook step).
- :func:`velocity_target_type`: ``qdot* - P qdot_k`` [rad/s, m/s] for named rates (hinge angle rates
  and body velocity components, :func:`mbfg.control.rate_function`), P taken at x_k.
- :func:`force_target_type`: ``lambda* - P_lambda lambda / tau`` [N], the note's
  ``tau lambda* - tau P_lambda lambda`` divided by tau (so its sigma is in newtons), with the
  multipliers of the step x_k -> x_{k+1}.
- :data:`ACTIVATION_RATE`: ``a_{k+1} - a_k`` over a stacked plan, the optional activation-rate cost.
- :func:`horizon_type`: the reduced form the control graphs solve: the plan a_0 .. a_{N-1} is the only variable,
  the states implicit functions of them (the control note: "the state is implicitly a function of the
  control variables"): the steps from the known x_0 are rolled out inside the residual, which
  stacks every step's velocity and force target residuals. Its Jacobian is the note's direct
  method through the chained steps. (The full-space factors above hold the dynamics as stiff
  rows; Marquardt's scaled damping then freezes the activations, whose columns those rows
  dominate, so a Levenberg-Marquardt solve of the full-space graph stalls; Gauss-Newton solves it.)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from mbfg import control
from mbfg import quaternion as quat
from mbfg._jax import jax, jnp
from mbfg._programs import structure_cache
from mbfg.adapter import VECTOR, FactorType
from mbfg.registry import register
from mbfg.rigid import RigidModel, State

from ._rigid import variables_for


def _states(model: RigidModel):
    return variables_for(model, ())


def step_residual(model: RigidModel, x0: State, a: jnp.ndarray, x1: State, p: dict, h: Any) -> jnp.ndarray:
    """[Q (6 nb,) N s; R_q (6 nb,) m, rad] of the step x0 -> x1 with activations a (module docstring).

    ``Q = H qdot_1 - h(a) - G^T lambda`` is assembled from the rows of
    :meth:`RigidModel.position_rows` (A = rows_f.A J_pos, products with J_pos as JVP/VJP), which
    keeps its Jacobian cheap: with y = Sigma^-1 (A qdot_1 + a) on the drag and motor rows and
    y = -lambda on the joint rows, ``Q = M (qdot_1 - qdot_0) - tau f + A^T y``.
    """
    part = control._partition(model)
    hol, force = part.holonomic, part.force
    rows_f, J, J_T = model.position_rows(x0, a, p, h)
    v0, v1 = x0.velocity(), x1.velocity()
    Av1 = rows_f.A @ J(v1)
    lam = (-rows_f.a[hol] - Av1[hol]) / rows_f.Sigma_A[hol]
    y = jnp.zeros_like(Av1).at[force].set(rows_f.Sigma_A_inv[force] * (Av1[force] + rows_f.a[force])).at[hol].set(-lam)
    Q = model.mass_diagonal(p) * (v1 - v0) - h * model.forces(x0, p) + J_T(rows_f.A.T @ y)
    dtheta = jax.vmap(quat.boxminus)(x1.e, x0.e)
    dq = jnp.concatenate([x1.r - x0.r, dtheta], axis=1).reshape(-1)
    return jnp.concatenate([Q, h * v1 - dq])


def multipliers(model: RigidModel, x0: State, x1: State, p: dict, h: Any) -> jnp.ndarray:
    """The constraint impulses lambda (m,) [N s, N m s] of the step x0 -> x1, ``E^-1 (g - G qdot_1)``
    (:func:`mbfg.control.constraint_multipliers`, with J_pos products as JVPs)."""
    hol = control._partition(model).holonomic
    rows_f, J, _ = model.position_rows(x0, jnp.zeros(len(model.controls)), p, h)
    return (-rows_f.a[hol] - rows_f.A[hol] @ J(x1.velocity())) / rows_f.Sigma_A[hol]


def _split_states(model: RigidModel, args: Sequence[Any], n: int) -> tuple[list[State], tuple]:
    variables = _states(model)
    states, _, rest = variables.split(args, n)
    return states, rest


@structure_cache()
def step_type(model: RigidModel, start: bool = False) -> FactorType:
    """The step FactorType: variables (x_k, a_k, x_{k+1}), or (a_0, x_1) with x_0 constant when ``start``.

    Constants after the variables: [x_0 as nb (4, 4) poses and (6 nb,) velocity when ``start``],
    the parameters (dict), h [s].
    """
    control.check_controllable(model)
    variables = _states(model)
    per_state = model.nb + 1

    if start:
        def residual(a, *args):
            (x1,), rest = _split_states(model, args, 1)
            x0 = variables.state(rest[:per_state])
            p, h = rest[per_state:]
            return step_residual(model, x0, a, x1, p, h)

        kinds = (VECTOR,) + variables.state_kinds
    else:
        def residual(*args):  # type: ignore[misc]  # the other variant of the residual: other arguments
            x0 = variables.state(args[:per_state])
            a = args[per_state]
            (x1,), (p, h) = _split_states(model, args[per_state + 1:], 1)
            return step_residual(model, x0, a, x1, p, h)

        kinds = variables.state_kinds + (VECTOR,) + variables.state_kinds
    return FactorType(f"control_step[{model.name}{'; start' if start else ''}]", residual, kinds)


@structure_cache()
def velocity_target_type(model: RigidModel, names: tuple[str, ...]) -> FactorType:
    """Target-velocity FactorType on x_k: ``qdot* - P qdot_k`` (k,) for the named rates; constants: p, qdot* (k,)."""
    rates = control.rate_function(model, names)

    def residual(*args):
        (x,), (p, target) = _split_states(model, args, 1)
        return target - rates(x, p)

    return FactorType(f"control_velocity_target[{model.name}; {','.join(names)}]", residual,
                      _states(model).state_kinds)


@structure_cache()
def force_target_type(model: RigidModel, start: bool = False) -> FactorType:
    """Target-force FactorType on the step x_k -> x_{k+1} (x_{k+1} only when ``start``):
    ``lambda* - P_lambda lambda / h`` [N]; constants: [x_0 when ``start``], p, h, P_lambda (k, m), lambda* (k,)."""
    control.check_controllable(model)
    variables = _states(model)
    per_state = model.nb + 1

    def residual(*args):
        if start:
            (x1,), rest = _split_states(model, args, 1)
            x0, rest = variables.state(rest[:per_state]), rest[per_state:]
        else:
            (x0, x1), rest = _split_states(model, args, 2)
        p, h, P_lambda, target = rest
        return target - P_lambda @ multipliers(model, x0, x1, p, h) / h

    kinds = variables.state_kinds * (1 if start else 2)
    return FactorType(f"control_force_target[{model.name}{'; start' if start else ''}]", residual, kinds)


def _activation_rate(a: jnp.ndarray, D: jnp.ndarray) -> jnp.ndarray:
    """D a: the changes a_{k+1} - a_k of a plan a = (a_0, ..., a_{N-1}) stacked (N n_a,), D from :func:`rate_matrix`."""
    return D @ a


def rate_matrix(horizon: int, n_a: int) -> np.ndarray:
    """D ((N - 1) n_a, N n_a) with ``(D a)_k = a_{k+1} - a_k`` for a plan stacked step after step."""
    n = horizon * n_a
    return np.eye(n)[n_a:] - np.eye(n)[:-n_a]


ACTIVATION_RATE = register(FactorType(
    "control_activation_rate", _activation_rate, (VECTOR,),
    example=lambda rng: ((rng.standard_normal(6),), (rate_matrix(3, 2),)),
))


def horizon_residual(model: RigidModel, rate_names: tuple[str, ...], x0: State, a: jnp.ndarray, p: dict, h: Any,
                     rate_targets: jnp.ndarray, P_lambda: jnp.ndarray, force_targets: jnp.ndarray) -> jnp.ndarray:
    """Target residuals of N chained steps from x0 with activations a (N, n_a): per step k,
    ``[qdot*_k - P qdot_{k+1} (k_v,); lambda*_k - P_lambda lambda_k / h (k_f,)]``, flattened (N (k_v + k_f),).

    rate_targets (N, k_v) [rad/s, m/s] for the named rates (:func:`mbfg.control.rate_function`, taken at
    x_{k+1}); P_lambda (k_f, m), force_targets (N, k_f) [N].
    """
    rates = control.rate_function(model, rate_names)

    def body(x: State, inputs: tuple) -> tuple[State, jnp.ndarray]:
        a_k, rt, ft = inputs
        x1, lam = control.step(model, x, a_k, p, h)
        return x1, jnp.concatenate([rt - rates(x1, p), ft - P_lambda @ lam / h])

    if a.shape[0] == 1:
        # One step (the control note's problem): no scan, so JAX sees x_0 as a constant and the Jacobian
        # needs no second derivatives of the constraint rows (a much smaller program to compile).
        return body(x0, (a[0], rate_targets[0], force_targets[0]))[1]
    _, r = jax.lax.scan(body, x0, (a, rate_targets, force_targets))
    return r.reshape(-1)


@structure_cache()
def horizon_type(model: RigidModel, rate_names: tuple[str, ...], horizon: int) -> FactorType:
    """The reduced horizon FactorType: one variable, the plan a_0 .. a_{N-1} stacked (N n_a,); constants: x_0 as
    nb (4, 4) poses and the (6 nb,) velocity, p, h, rate_targets (N, k_v), P_lambda (k_f, m), force_targets (N, k_f).

    One stacked variable, not N: JAX's forward-mode Jacobian through the rolled-out steps is then one
    pass of N n_a tangents (with N separate arguments it ran ten times slower at N = 10).
    """
    control.check_controllable(model)
    variables = _states(model)
    per_state = model.nb + 1
    n_a = len(model.controls)

    def residual(plan, *rest):
        x0 = variables.state(rest[:per_state])
        return horizon_residual(model, rate_names, x0, plan.reshape(horizon, n_a), *rest[per_state:])

    return FactorType(f"control_horizon[{model.name}; {','.join(rate_names)}; N={horizon}]", residual, (VECTOR,))
