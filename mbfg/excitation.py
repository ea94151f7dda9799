"""Exciting trajectories for identifying a robot arm's inertial parameters: a finite Fourier series per joint,
optimized so that the base-parameter regressor is well conditioned within the joints' limits.

The trajectory of Swevers, Ganseman, Tukel, De Schutter, Van Brussel 1997 ("Optimal robot excitation and
identification", IEEE Trans. Robotics and Automation 13(5)): for joint i, N harmonics of the base pulsation
w_f = 2 pi f, in closed form with its rate and acceleration::

    q_i(t)   = q_i0 + sum_k  a_ik / (w_f k) sin(w_f k t) - b_ik / (w_f k) cos(w_f k t)
    qd_i(t)  =        sum_k  a_ik cos(w_f k t) + b_ik sin(w_f k t)
    qdd_i(t) =        sum_k -a_ik w_f k sin(w_f k t) + b_ik w_f k cos(w_f k t)          k = 1 .. N

periodic with period 1/f [s], so a rig repeats it and averages the periods. Its coefficients
x = (q0, a, b) minimize the condition number of the base-parameter regressor stacked at S sample times
t_s = s T / S of the duration T::

    W(x) = [Y(q(t_s), qd(t_s), qdd(t_s))[:, base]]_s        (S n, r)        cond W = sigma_max / sigma_min

with Y the inverse-dynamics regressor of :mod:`mbfg.inverse_dynamics` and ``base`` the independent columns of
:func:`mbfg.base_parameters.inertial_base_parameters` (torques are Y pi = Y[:, base] pi_base exactly, so these
columns carry everything the torques say about the inertia). The limits, from the URDF's ``<limit>``:

- angle and rate by Swevers et al.'s bounds, which hold at every t, not only at the samples:
  |q_i(t) - q_i0| <= sum_k |(a_ik, b_ik)| / (w_f k) and |qd_i(t)| <= sum_k |(a_ik, b_ik)|;
- torque (``effort``) by inverse dynamics of the URDF's nominal parameters at the S sample times, at
  ``torque_margin`` of the limit; checked afterwards on a fine grid (:func:`check_limits`).

The optimizer is scipy's L-BFGS-B on log cond W plus a quadratic penalty on the violated limits (each relative
to its limit), and the result is the best point it visited within all the limits. The gradient of
log cond W = log s_max - log s_min is u_max^T dW v_max / s_max - u_min^T dW v_min / s_min (the singular
vectors' perturbation formula), and W v is the torque of the standard parameters holding v at the base
columns, so it costs two reverse-mode torque evaluations by JAX, not a derivative of the regressor (one
jitted, vmapped evaluation over the samples; the tree's arrays are arguments, so a second robot of the same
size compiles nothing). It starts from a random Fourier trajectory within the limits (``seed``), the peer the
optimized condition number is reported beside.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import scipy.optimize

import mbfg._jax  # noqa: F401  (float64)
from mbfg.base_parameters import BaseParameterOptions, inertial_base_parameters
from mbfg.errors import MbfgError
from mbfg.inverse_dynamics import GRAVITY, sample_regressor, sample_torques, tree_arrays
from mbfg.kinematic_tree import KinematicTree


@dataclass(frozen=True)
class ExcitationOptions:
    """duration: T [s] of the trajectory; harmonics: N per joint; base_frequency: f [Hz] (default 1/T: one
    period over the duration); samples: S times at which the regressor and the torques are evaluated;
    seed: of the random start; max_iterations: of L-BFGS-B; penalty: weight of the squared relative
    violations of the limits; torque_margin: fraction of each ``effort`` limit
    the torque may reach at the samples (the rest is room between them); fill: fraction of each angle and
    rate limit the random start uses; angle_range: [rad or m] half-width about 0 of a joint without
    ``lower``/``upper`` (a continuous joint)."""

    duration: float
    harmonics: int
    base_frequency: float | None = None
    samples: int = 150
    seed: int = 0
    max_iterations: int = 100
    torque_margin: float = 0.9
    fill: float = 0.5
    angle_range: float = np.pi
    penalty: float = 1e3

    def __post_init__(self) -> None:
        if not (isinstance(self.harmonics, int) and self.harmonics >= 1):
            raise MbfgError(f"harmonics: expected a whole number >= 1, got {self.harmonics!r}")
        if not (isinstance(self.samples, int) and self.samples >= 2):
            raise MbfgError(f"samples: expected a whole number >= 2, got {self.samples!r}")
        if not (isinstance(self.max_iterations, int) and self.max_iterations >= 1):
            raise MbfgError(f"max_iterations: expected a whole number >= 1, got {self.max_iterations!r}")
        for field in ("duration", "angle_range"):
            value = getattr(self, field)
            if not (np.isfinite(value) and value > 0.0):
                raise MbfgError(f"{field}: expected a finite number > 0 [s or rad], got {value!r}")
        if self.base_frequency is not None and not (np.isfinite(self.base_frequency) and self.base_frequency > 0.0):
            raise MbfgError(f"base_frequency: expected a finite number > 0 [Hz], got {self.base_frequency!r}")
        for field in ("torque_margin", "fill"):
            value = getattr(self, field)
            if not (np.isfinite(value) and 0.0 < value <= 1.0):
                raise MbfgError(f"{field}: expected a number in (0, 1], got {value!r}")

    @property
    def frequency(self) -> float:
        """f [Hz]: ``base_frequency``, or 1/duration."""
        return self.base_frequency if self.base_frequency is not None else 1.0 / self.duration


@dataclass(frozen=True)
class FourierTrajectory:
    """A finite Fourier series per joint (module docstring). q0: (n,) [rad or m]; a, b: (n, N) [rad/s or m/s];
    frequency: f [Hz]."""

    q0: np.ndarray
    a: np.ndarray
    b: np.ndarray
    frequency: float

    @property
    def period(self) -> float:
        """1/f [s]."""
        return 1.0 / self.frequency

    def evaluate(self, t: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """q, qd, qdd (T, n) at the times ``t`` (T,) [s], in closed form."""
        out = _fourier(jnp.asarray(_coefficients(self)), jnp.asarray(np.asarray(t, dtype=float)),
                       2.0 * np.pi * self.frequency)
        return tuple(np.asarray(x) for x in out)  # type: ignore[return-value]

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """Swevers et al.'s bounds (n,) of |q - q0| [rad or m] and |qd| [rad/s or m/s], valid at every t."""
        return _amplitude_bounds(jnp.asarray(_coefficients(self)), 2.0 * np.pi * self.frequency)


@dataclass(frozen=True)
class Excitation:
    """An optimized trajectory and its random start. condition, random_condition: cond W (module docstring)
    of each at the samples; iterations: L-BFGS-B's; message: its exit message; success: its exit flag;
    base_rank: the number of base parameters r."""

    trajectory: FourierTrajectory
    random: FourierTrajectory
    condition: float
    random_condition: float
    iterations: int
    success: bool
    message: str
    base_rank: int


def _coefficients(traj: FourierTrajectory) -> np.ndarray:
    return np.concatenate([np.asarray(traj.q0, dtype=float)[:, None], traj.a, traj.b], axis=1)


def _fourier(C: jax.Array, t: jax.Array, wf: float | jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """q, qd, qdd (T, n) of coefficients C = [q0 | a | b] (n, 1 + 2N) at times t (T,)."""
    N = (C.shape[1] - 1) // 2
    q0, a, b = C[:, 0], C[:, 1:N + 1], C[:, N + 1:]
    wk = wf * jnp.arange(1, N + 1)
    s, c = jnp.sin(t[:, None] * wk), jnp.cos(t[:, None] * wk)
    q = q0 + s @ (a / wk).T - c @ (b / wk).T
    qd = c @ a.T + s @ b.T
    qdd = -s @ (a * wk).T + c @ (b * wk).T
    return q, qd, qdd


def _amplitude_bounds(C: jax.Array, wf: float | jax.Array) -> tuple[Any, Any]:
    N = (C.shape[1] - 1) // 2
    # sqrt(a^2 + b^2 + tiny): differentiable at zero amplitude (the gradient), above |(a, b)| by 1e-12
    amp = jnp.sqrt(C[:, 1:N + 1] ** 2 + C[:, N + 1:] ** 2 + 1e-24)
    return amp @ (1.0 / (wf * jnp.arange(1, N + 1))), amp.sum(axis=1)


def _regressor_columns(C: jax.Array, t: jax.Array, wf: float | jax.Array, columns: jax.Array,
                       arrays: dict[str, jax.Array]) -> jax.Array:
    """W (S n, r): the regressor's base columns stacked over the samples."""
    q, qd, qdd = _fourier(C, t, wf)
    n = q.shape[1]
    Y = jax.vmap(sample_regressor, in_axes=(None, 0, 0, 0, None))(jnp.zeros((n, 10)), q, qd, qdd, arrays)
    return Y.reshape(-1, 10 * n)[:, columns]


def _sample_torques(C: jax.Array, t: jax.Array, wf: float | jax.Array, pi: jax.Array,
                    arrays: dict[str, jax.Array]) -> jax.Array:
    q, qd, qdd = _fourier(C, t, wf)
    return jax.vmap(sample_torques, in_axes=(None, 0, 0, 0, None))(pi, q, qd, qdd, arrays)


def _singular_value_gradient(C: jax.Array, t: jax.Array, wf: float | jax.Array, pis: jax.Array, us: jax.Array,
                             weights: jax.Array, arrays: dict[str, jax.Array]) -> jax.Array:
    """d/dC of sum_j weights_j u_j . W(C) v_j, with pis[j] (n, 10) the standard parameters that hold v_j at the base
    columns (zeros elsewhere): W v_j = tau(pi_j), so each term is one torque evaluation, not the regressor."""

    def value(C: jax.Array) -> jax.Array:
        tau = jax.vmap(_sample_torques, in_axes=(None, None, None, 0, None))(C, t, wf, pis, arrays)  # (2, S, n)
        return jnp.sum(weights * jnp.einsum("jk,jk->j", us, tau.reshape(tau.shape[0], -1)))

    return jax.grad(value)(C)


_regressor_values = jax.jit(_regressor_columns)
_condition_gradient = jax.jit(_singular_value_gradient)
_torque_values = jax.jit(_sample_torques)
_bounds_values = jax.jit(_amplitude_bounds)
_bounds_jacobian = jax.jit(jax.jacfwd(_amplitude_bounds))


def _joint_limits(tree: KinematicTree, options: ExcitationOptions) -> tuple[np.ndarray, ...]:
    """lower, upper [rad or m], velocity, effort (n,); inf where the URDF gives none."""
    lim = [tree.limits[j] for j in tree.joints]
    lo = np.array([d.get("lower", -options.angle_range) for d in lim])
    hi = np.array([d.get("upper", options.angle_range) for d in lim])
    vel = np.array([d.get("velocity", np.inf) for d in lim])
    eff = np.array([d.get("effort", np.inf) for d in lim])
    for name, v in zip(tree.joints, vel, strict=True):
        if not v > 0.0:
            raise MbfgError(f"joint {name}: <limit velocity> is {v:g}; expected > 0 for the joint to move")
    for name, e in zip(tree.joints, eff, strict=True):
        if not e > 0.0:
            raise MbfgError(f"joint {name}: <limit effort> is {e:g}; expected > 0 for the joint to move")
    return lo, hi, vel, eff


def random_trajectory(tree: KinematicTree, options: ExcitationOptions) -> FourierTrajectory:
    """A random Fourier trajectory within the angle and rate limits by Swevers et al.'s bounds: q0 at the middle
    of each joint's range, coefficients uniform in [-1, 1] scaled so that each bound is ``fill`` of its room."""
    lo, hi, vel, _ = _joint_limits(tree, options)
    rng = np.random.default_rng(options.seed)
    N = options.harmonics
    a, b = rng.uniform(-1.0, 1.0, (tree.n, N)), rng.uniform(-1.0, 1.0, (tree.n, N))
    q0 = 0.5 * (lo + hi)
    angle_bound, rate_bound = FourierTrajectory(q0, a, b, options.frequency).bounds()
    scale = options.fill * np.minimum(0.5 * (hi - lo) / angle_bound, np.where(np.isfinite(vel), vel, np.inf) / rate_bound)
    return FourierTrajectory(q0, a * scale[:, None], b * scale[:, None], options.frequency)


def sample_times(options: ExcitationOptions) -> np.ndarray:
    """The S sample times t_s = s T / S (S,) [s] at which cond W and the torques are evaluated."""
    return np.arange(options.samples) * (options.duration / options.samples)


def condition_number(tree: KinematicTree, trajectory: FourierTrajectory, options: ExcitationOptions,
                     columns: np.ndarray | None = None, gravity: tuple[float, float, float] = GRAVITY) -> float:
    """cond W (module docstring) of ``trajectory`` at the samples of ``options``; ``columns`` the base columns
    (default: from :func:`inertial_base_parameters`)."""
    if columns is None:
        columns = inertial_base_parameters(tree, gravity=gravity).independent
    W = _regressor_values(jnp.asarray(_coefficients(trajectory)), jnp.asarray(sample_times(options)),
                          2.0 * np.pi * trajectory.frequency, jnp.asarray(columns), tree_arrays(tree, gravity))
    return float(np.linalg.cond(np.asarray(W)))


def excite(tree: KinematicTree, options: ExcitationOptions,
           gravity: tuple[float, float, float] = GRAVITY) -> Excitation:
    """The optimized exciting trajectory of ``tree`` (module docstring) and its random start."""
    lo, hi, vel, eff = _joint_limits(tree, options)
    n, N = tree.n, options.harmonics
    wf = 2.0 * np.pi * options.frequency
    base = inertial_base_parameters(tree, BaseParameterOptions(seed=options.seed), gravity=gravity)
    columns = jnp.asarray(base.independent)
    arrays = tree_arrays(tree, gravity)
    t = jnp.asarray(sample_times(options))
    pi = jnp.asarray(tree.pi)
    start = random_trajectory(tree, options)
    shape = (n, 1 + 2 * N)
    has_vel, has_eff = np.isfinite(vel), np.isfinite(eff)

    def log_condition(x: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
        W = np.asarray(_regressor_values(jnp.asarray(x.reshape(shape)), t, wf, columns, arrays))
        u, sv, vt = np.linalg.svd(W, full_matrices=False)
        return float(np.log(sv[0] / sv[-1])), u[:, [0, -1]].T, vt[[0, -1]] / sv[[0, -1], None]

    # Violations relative to each limit (<= 0 where it holds): angle above, angle below, rate; torque (S, n).
    def violations(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        C = x.reshape(shape)
        angle, rate = (np.asarray(v) for v in _bounds_values(jnp.asarray(C), wf))
        tau = np.asarray(_torque_values(jnp.asarray(C), t, wf, pi, arrays))
        kinematic = np.concatenate([(C[:, 0] + angle - hi) / (hi - lo), (lo - C[:, 0] + angle) / (hi - lo),
                                    np.where(has_vel, rate / vel - 1.0, -1.0)])
        return kinematic, np.where(has_eff, np.abs(tau) / eff - options.torque_margin, -1.0), tau

    best: dict[str, Any] = {}

    def penalized(x: np.ndarray) -> tuple[float, np.ndarray]:
        value, us, vs = log_condition(x)
        kinematic, torque, tau = violations(x)
        if value < best.get("value", np.inf) and kinematic.max() <= 0.0 and torque.max() <= 0.0:
            best.update(value=value, x=x.copy())  # L-BFGS-B may end elsewhere than its best point within the limits
        over_k, over_t = np.maximum(kinematic, 0.0), np.maximum(torque, 0.0)
        mu = options.penalty
        # One reverse-mode pass for the three torque-linear terms: d log(s_max / s_min) = u_max^T dW v_max / s_max
        # - u_min^T dW v_min / s_min (the singular values' perturbation), W v the torque of v at the base columns;
        # and the torque penalty mu sum over^2, whose derivative in tau is 2 mu over sign(tau) / effort.
        pis = np.zeros((3, 10 * n))
        pis[:2, base.independent] = vs
        pis[2] = tree.pi.ravel()
        weights = np.stack([us[0], us[1], (2.0 * mu * over_t * np.sign(tau) / eff).ravel()])
        grad = np.asarray(_condition_gradient(jnp.asarray(x.reshape(shape)), t, wf, jnp.asarray(pis.reshape(3, n, 10)),
                                              jnp.asarray(weights), jnp.array([1.0, -1.0, 1.0]), arrays)).ravel()
        if over_k.any():
            C = jnp.asarray(x.reshape(shape))
            d_angle, d_rate = (np.asarray(v).reshape(n, -1) for v in _bounds_jacobian(C, wf))
            d_q0 = np.zeros((n, x.size))
            d_q0[np.arange(n), np.arange(n) * shape[1]] = 1.0
            span = (hi - lo)[:, None]
            d_kin = np.concatenate([(d_q0 + d_angle) / span, (d_angle - d_q0) / span,
                                    np.where(has_vel[:, None], d_rate / vel[:, None], 0.0)])
            grad = grad + 2.0 * mu * over_k @ d_kin
        return value + mu * float(over_k @ over_k + np.sum(over_t**2)), grad

    x0 = _coefficients(start).ravel()
    result = scipy.optimize.minimize(penalized, x0, jac=True, method="L-BFGS-B",
                                     options={"maxiter": options.max_iterations})
    start_value = log_condition(x0)[0]
    if "x" in best and best["value"] < start_value:
        x, value, message = best["x"], best["value"], str(result.message)
    else:  # no point within the limits better than the start: the start, said so
        x, value, message = x0, start_value, f"kept the random start: {result.message}"
    C = x.reshape(shape)
    trajectory = FourierTrajectory(C[:, 0].copy(), C[:, 1:N + 1].copy(), C[:, N + 1:].copy(), options.frequency)
    return Excitation(
        trajectory=trajectory, random=start, condition=float(np.exp(value)),
        random_condition=float(np.exp(start_value)), iterations=int(result.nit), success=bool(result.success),
        message=message, base_rank=base.rank,
    )


def check_limits(tree: KinematicTree, trajectory: FourierTrajectory, t: np.ndarray, options: ExcitationOptions,
                 gravity: tuple[float, float, float] = GRAVITY) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The trajectory's angles, rates and torques by inverse dynamics (T, n) at the times ``t``, after checking
    them against the URDF's limits (the torque against the full ``effort``); MbfgError naming the joint, the
    quantity and the first time one is exceeded."""
    from mbfg.inverse_dynamics import inverse_dynamics

    lo, hi, vel, eff = _joint_limits(tree, options)
    q, qd, qdd = trajectory.evaluate(t)
    tau = inverse_dynamics(tree, q, qd, qdd, gravity=gravity)
    for what, bad in (("angle below <limit lower>", q < lo), ("angle above <limit upper>", q > hi),
                      ("rate beyond <limit velocity>", np.abs(qd) > vel),
                      ("torque beyond <limit effort>", np.abs(tau) > eff)):
        if bad.any():
            row, col = np.argwhere(bad)[0]
            raise MbfgError(f"joint {tree.joints[col]}: {what} at t = {t[row]:g} s between the samples; "
                            f"evaluate at more samples (samples = {options.samples}) or lower torque_margin")
    return q, qd, tau


__all__ = ["Excitation", "ExcitationOptions", "FourierTrajectory", "check_limits", "condition_number", "excite",
           "random_trajectory", "sample_times"]
