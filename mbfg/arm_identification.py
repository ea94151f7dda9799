"""Identification of a robot arm's inertial parameters and joint friction from joint angles and torques: the
classic least squares on the base regressor, and a Levenberg-Marquardt over physically consistent parameters.

Both take the stacked regressor of a trajectory (:func:`stacked_regressor`): the inverse-dynamics regressor of
:mod:`mbfg.inverse_dynamics` with the friction and rotor columns of :mod:`mbfg.joint_friction` appended::

    tau = W x        W (T n, 10 n + k n),  x = [pi.ravel(), phi.ravel()]

- :func:`least_squares_identification`, the method of most identification papers (Gautier 1990; Swevers et al.
  1997): ordinary least squares on the independent (base) columns of W (:func:`extended_base_parameters`),
  with standard deviations sigma^2 (W_b^T W_b)^-1, sigma^2 = |residual|^2 / (rows - r). It knows nothing of
  physics: its estimate need not belong to any mass distribution.
- :func:`consistent_identification`: mbfg's box-constrained LM (:func:`mbfg.solvers.bounded_levenberg_marquardt`)
  on the same residual W x - tau, over the log-Cholesky coordinates theta of every link's pseudo-inertia
  (:mod:`mbfg.pseudo_inertia`; Rucker and Wensing 2022) and the friction parameters, with the bounds
  F_v >= 0, F_c >= 0, I_a >= 0 (F_o free). Every iterate is a physically consistent arm by construction: pi(theta)
  has a positive-definite pseudo-inertia for every theta, and the LM keeps the box exactly. One more bound
  keeps that true in floating point: each link's mass spreads at least ``min_spread`` about its centre of
  mass (e^d_i >= min_spread), so no iterate is a body flat to round-off. The directions no torque sees
  (:attr:`mbfg.base_parameters.BaseParameters.unidentifiable`) stay where the start puts them (their
  gradient is zero) unless a prior on theta is given.

Both estimate the same base parameters when the least-squares estimate is itself consistent; where noise puts
it outside the consistent set, the LM ends on the boundary (a spread at ``min_spread``), and its base
parameters are the nearest consistent ones in the torques' metric.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import gtsam
import jax.numpy as jnp
import numpy as np

import mbfg._jax  # noqa: F401  (float64)
from mbfg.adapter import FactorType
from mbfg.base_parameters import BaseParameterOptions, BaseParameters, column_base_parameters, random_states
from mbfg.errors import MbfgError
from mbfg.inverse_dynamics import GRAVITY, regressor
from mbfg.joint_friction import DEFAULT_MODEL, FrictionModel, friction_regressor
from mbfg.keys import P
from mbfg.kinematic_tree import KinematicTree
from mbfg.lm_config import LMConfig
from mbfg.noise import noise_model
from mbfg.pseudo_inertia import (
    LOG_CHOLESKY_NAMES,
    log_cholesky_from_standard,
    pseudo_inertia,
    standard_from_log_cholesky,
)
from mbfg.registry import register
from mbfg.solvers import LMResult, bounded_levenberg_marquardt
from mbfg.var_kinds import VECTOR

#: The keys of the two variables of :func:`consistent_identification`: log-Cholesky coordinates, friction.
THETA_KEY, PHI_KEY = P(0), P(1)


def parameter_names(tree: KinematicTree, model: FrictionModel) -> tuple[str, ...]:
    """The (10 n + k n,) names of x = [pi.ravel(), phi.ravel()]."""
    return tree.parameter_names + model.parameter_names(tree.joints)


def stacked_regressor(tree: KinematicTree, q: Any, qd: Any, qdd: Any, model: FrictionModel = DEFAULT_MODEL,
                      gravity: tuple[float, float, float] = GRAVITY) -> np.ndarray:
    """W (T, n, 10 n + k n) of samples q, qd, qdd (T, n): inverse-dynamics columns, then friction columns."""
    Y = regressor(tree, q, qd, qdd, gravity)
    return np.concatenate([Y, friction_regressor(np.asarray(qd, dtype=float).reshape(Y.shape[:2]),
                                                 np.asarray(qdd, dtype=float).reshape(Y.shape[:2]), model)], axis=2)


def extended_base_parameters(tree: KinematicTree, model: FrictionModel = DEFAULT_MODEL,
                             options: BaseParameterOptions | None = None,
                             gravity: tuple[float, float, float] = GRAVITY) -> BaseParameters:
    """The base parameters of inertia and friction together (:func:`mbfg.base_parameters.column_base_parameters`
    of :func:`stacked_regressor` at random states): a rotor inertia about the base's vertical axis merges with
    the first link's I_zz, for instance."""
    options = options or BaseParameterOptions()
    q, qd, qdd = random_states(tree, options)
    W = stacked_regressor(tree, q, qd, qdd, model, gravity).reshape(-1, (10 + model.size) * tree.n)
    return column_base_parameters(W, parameter_names(tree, model), options)


def _stacked(W: Any, tau: Any, tree: KinematicTree, model: FrictionModel) -> tuple[np.ndarray, np.ndarray]:
    p = (10 + model.size) * tree.n
    W = np.asarray(W, dtype=float)
    W = W.reshape(-1, W.shape[-1]) if W.ndim == 3 else W
    tau = np.asarray(tau, dtype=float).reshape(-1)
    if W.ndim != 2 or W.shape[1] != p:
        raise MbfgError(f"W: expected (T, n, {p}) or (T n, {p}) (10 + {model.size} columns per joint of {tree.name}), "
                        f"got {np.shape(W)}")
    if tau.shape[0] != W.shape[0]:
        raise MbfgError(f"tau: expected {W.shape[0]} torques (one per row of W), got {tau.shape[0]}")
    if not (np.all(np.isfinite(W)) and np.all(np.isfinite(tau))):
        raise MbfgError("W, tau: expected finite numbers (a sample is NaN or infinite)")
    return W, tau


@dataclass(frozen=True)
class LeastSquaresIdentification:
    """base: the base parameters (names, matrix K); values, std: (r,) estimates of K x and their standard
    deviations; sigma: the residual's standard deviation [N m]; rows: the number of torques used; condition:
    the condition number of the base columns W_b, each scaled to unit norm (a log that does not excite some base
    parameter makes it large: :data:`MAX_CONDITION`)."""

    base: BaseParameters
    values: np.ndarray
    std: np.ndarray
    sigma: float
    rows: int
    condition: float = float("nan")


#: The largest condition number of the column-scaled base regressor at which a log is taken to excite every base
#: parameter: beyond it a least-squares estimate loses more than 6 of float64's 16 digits.
MAX_CONDITION = 1e10


def _base_statistics(Wb: np.ndarray, residual: np.ndarray) -> tuple[np.ndarray, float]:
    rows, r = Wb.shape
    sigma = float(np.sqrt(residual @ residual / max(rows - r, 1)))
    R = np.linalg.qr(Wb, mode="r")
    Rinv = np.linalg.inv(R)
    return sigma * np.sqrt(np.sum(Rinv**2, axis=1)), sigma


def least_squares_identification(tree: KinematicTree, W: Any, tau: Any, base: BaseParameters,
                                 model: FrictionModel = DEFAULT_MODEL) -> LeastSquaresIdentification:
    """Least squares of the base columns of ``W`` (T, n, p) on ``tau`` (T, n) [N m] (module docstring)."""
    W, tau = _stacked(W, tau, tree, model)
    if W.shape[0] <= base.rank:
        raise MbfgError(f"W: {W.shape[0]} torques for {base.rank} base parameters; expected more torques than base "
                        f"parameters (a longer log)")
    Wb = W[:, base.independent]
    values, *_ = np.linalg.lstsq(Wb, tau, rcond=None)
    std, sigma = _base_statistics(Wb, tau - Wb @ values)
    norms = np.linalg.norm(Wb, axis=0)
    singular = np.linalg.svd(Wb / np.where(norms > 0.0, norms, 1.0), compute_uv=False)
    condition = float(singular[0] / singular[-1]) if singular[-1] > 0.0 else float("inf")
    return LeastSquaresIdentification(base=base, values=values, std=std, sigma=sigma, rows=W.shape[0],
                                      condition=condition)


def standard_from_base(base: BaseParameters, values: Any, x0: Any) -> np.ndarray:
    """The parameters x (p,) nearest ``x0`` (p,) (Euclidean distance, in SI units) whose base parameters K x are
    ``values`` (r,): x = x0 + K^+ (values - K x0). The directions no torque sees keep their values from ``x0``;
    x need not be physically consistent (:func:`mbfg.pseudo_inertia.is_physically_consistent` tells)."""
    K = base.matrix
    x0 = np.asarray(x0, dtype=float).ravel()
    values = np.asarray(values, dtype=float).ravel()
    if x0.shape != (K.shape[1],) or values.shape != (K.shape[0],):
        raise MbfgError(f"values, x0: expected ({K.shape[0]},) base parameters and ({K.shape[1]},) parameters, got "
                        f"{values.shape} and {x0.shape}")
    step, *_ = np.linalg.lstsq(K, values - K @ x0, rcond=None)
    return x0 + step


def _residual(theta: jnp.ndarray, phi: jnp.ndarray, W: jnp.ndarray, tau: jnp.ndarray) -> jnp.ndarray:
    """W [pi(theta), phi] - tau (rows,): theta (10 n,), phi (k n,), W (rows, 10 n + k n)."""
    pi = standard_from_log_cholesky(theta.reshape(-1, 10)).ravel()
    return W @ jnp.concatenate([pi, phi]) - tau


def _inertia_residual(theta: jnp.ndarray, W: jnp.ndarray, tau: jnp.ndarray) -> jnp.ndarray:
    """W pi(theta) - tau (rows,) of a model without friction parameters: W (rows, 10 n)."""
    return W @ standard_from_log_cholesky(theta.reshape(-1, 10)).ravel() - tau


def _prior_residual(theta: jnp.ndarray, theta0: jnp.ndarray, weights: jnp.ndarray) -> jnp.ndarray:
    """(theta - theta0) / prior sigma (10 n,)."""
    return (theta - theta0) * weights


def _torques_example(rng: np.random.Generator) -> tuple[tuple, tuple]:
    """Two links with the friction law's three parameters per joint; 7 torques of a random regressor."""
    theta, phi = 0.3 * rng.standard_normal(20), rng.uniform(0.01, 0.5, 6)
    return (theta, phi), (rng.standard_normal((7, 26)), rng.standard_normal(7))


def _inertia_example(rng: np.random.Generator) -> tuple[tuple, tuple]:
    """Two links without friction; 7 torques of a random regressor."""
    return (0.3 * rng.standard_normal(20),), (rng.standard_normal((7, 20)), rng.standard_normal(7))


def _prior_example(rng: np.random.Generator) -> tuple[tuple, tuple]:
    return (0.3 * rng.standard_normal(20),), (0.3 * rng.standard_normal(20), rng.uniform(0.5, 2.0, 20))


#: The inverse-dynamics torques of the log-Cholesky parameters (Rucker and Wensing 2022) and the friction law, and
#: the optional prior on the log-Cholesky coordinates: both through the shared Jacobian battery.
ARM_TORQUES = register(FactorType("arm_identification_torques", _residual, (VECTOR, VECTOR), example=_torques_example))
ARM_INERTIA_TORQUES = register(FactorType("arm_identification_inertia_torques", _inertia_residual, (VECTOR,),
                                         example=_inertia_example))
ARM_PRIOR = register(FactorType("arm_identification_prior", _prior_residual, (VECTOR,), example=_prior_example))

#: The LM's options unless given: Nielsen's damping update (Madsen, Nielsen and Tingleff 2004), which keeps the
#: damping of a step the linearization predicted badly; with the tenfold rule the exponential coordinates take
#: long steps early and the solve crawls back along the min_spread bound for hundreds of iterations.
DEFAULT_CONFIG = LMConfig(max_iterations=200, damping_update="nielsen")

#: A weak prior's standard deviations of one link's log-Cholesky coordinates (:data:`LOG_CHOLESKY_NAMES`):
#: 10 for alpha and d (log of the square root of the mass, and of the spreads of the mass about the centre of mass
#: [m]), 1 m for s and t (t is the centre of mass [m]).
PRIOR_SIGMA = (10.0, 10.0, 10.0, 10.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0)


@dataclass
class ConsistentIdentification:
    """pi: (n, 10) standard parameters (physically consistent); phi: (n, k) friction parameters; theta: (n, 10)
    their log-Cholesky coordinates; lm: the solve's :class:`~mbfg.solvers.LMResult`; min_eigenvalues: per
    iterate (the start, then each accepted point), the smallest eigenvalue of each link's pseudo-inertia (n,)
    [kg m^2]; base_values, base_std: (r,) K x at the solution and the standard deviations of the least-squares
    estimate there (sigma^2 (W_b^T W_b)^-1: the linearization, without the constraint); sigma: the residual's
    standard deviation [N m]."""

    pi: np.ndarray
    phi: np.ndarray
    theta: np.ndarray
    lm: LMResult
    min_eigenvalues: list[np.ndarray] = field(default_factory=list)
    base_values: np.ndarray | None = None
    base_std: np.ndarray | None = None
    sigma: float = float("nan")


def friction_bounds(n: int, model: FrictionModel) -> tuple[np.ndarray, np.ndarray]:
    """(k n,) lower and upper bounds of phi: F_v, F_c, I_a >= 0, F_o free."""
    lower_row = np.array([-np.inf if name == "Fo" else 0.0 for name in model.names])
    return np.tile(lower_row, n), np.full(n * model.size, np.inf)


def consistent_identification(tree: KinematicTree, W: Any, tau: Any, pi0: Any, phi0: Any,
                              model: FrictionModel = DEFAULT_MODEL, config: LMConfig | None = None,
                              base: BaseParameters | None = None, sigma: float = 1.0,
                              prior_sigma: Any = None, min_spread: float = 1e-4,
                              on_iteration: Callable[[dict[str, float], np.ndarray, np.ndarray], None] | None = None,
                              quiet: bool = True) -> ConsistentIdentification:
    """The LM over log-Cholesky coordinates and friction (module docstring) from ``pi0`` (n, 10), physically
    consistent (MbfgError naming the link otherwise), and ``phi0`` (n, k) within the friction bounds.

    ``sigma``: the torque noise's standard deviation [N m] (weights the residual against the prior);
    ``prior_sigma``: (10,) or (n, 10) standard deviations of a prior on theta about the start (None, the default:
    none; :data:`PRIOR_SIGMA` is a weak one), which holds the directions no torque sees and biases the rest by
    its weight: without it they stay at the start (zero gradient);
    ``min_spread``: [m] the lower bound of e^d1, e^d2, e^d3, the spreads of each link's mass about its centre
    of mass (U's diagonal, over e^alpha): Marquardt's scaling otherwise lets a weakly seen d take a step to
    -20 or beyond, a body flat to round-off whose pseudo-inertia is positive definite only in exact arithmetic; ``base``: when given, the base parameters of the solution and their standard deviations are filled
    in; ``on_iteration(row, pi, phi)``: called after each iteration with the LM's history row and the point.
    """
    W, tau = _stacked(W, tau, tree, model)
    config = config or DEFAULT_CONFIG
    n, k = tree.n, model.size
    theta0 = log_cholesky_from_standard(np.asarray(pi0, dtype=float).reshape(n, 10), tree.links)
    phi0 = np.asarray(phi0, dtype=float).reshape(-1)
    lower, upper = friction_bounds(n, model)
    if phi0.shape != (k * n,) or not np.all(np.isfinite(phi0)):
        raise MbfgError(f"phi0: expected {k * n} finite friction parameters ({k} per joint: {', '.join(model.names)}), "
                        f"got shape {phi0.shape}")
    for i in np.flatnonzero((phi0 < lower) | (phi0 > upper)):
        raise MbfgError(f"phi0: {model.parameter_names(tree.joints)[i]} = {phi0[i]:g} is outside its bounds "
                        f"[{lower[i]:g}, {upper[i]:g}]")
    if not (np.isfinite(sigma) and sigma > 0.0):
        raise MbfgError(f"sigma: expected a finite number > 0 [N m], got {sigma!r}")
    if not (np.isfinite(min_spread) and min_spread > 0.0):
        raise MbfgError(f"min_spread: expected a finite number > 0 [m], got {min_spread!r}")
    theta_lower = np.full((n, 10), -np.inf)
    theta_lower[:, 1:4] = np.log(min_spread)
    for link, d in np.argwhere(theta0 < theta_lower):
        raise MbfgError(f"pi0: {tree.links[link]}: its mass spreads {np.exp(theta0[link, d]):.3g} m along "
                        f"{LOG_CHOLESKY_NAMES[d]} (exp {LOG_CHOLESKY_NAMES[d]}); expected at least min_spread = "
                        f"{min_spread:g} m")

    graph = gtsam.NonlinearFactorGraph()
    if k:
        graph.add(ARM_TORQUES.make([THETA_KEY, PHI_KEY], noise_model(sigma, W.shape[0]), W, tau))
    else:  # no friction parameters: no friction variable (the LM takes no variable of size 0)
        graph.add(ARM_INERTIA_TORQUES.make([THETA_KEY], noise_model(sigma, W.shape[0]), W, tau))
    if prior_sigma is not None:
        ps = np.broadcast_to(np.asarray(prior_sigma, dtype=float), (n, 10)).ravel()
        if not (np.all(np.isfinite(ps)) and np.all(ps > 0.0)):
            raise MbfgError(f"prior_sigma: expected finite numbers > 0, (10,) or (n, 10), got {prior_sigma!r}")
        graph.add(ARM_PRIOR.make([THETA_KEY], noise_model(1.0, 10 * n), theta0.ravel(), 1.0 / ps))
    values = gtsam.Values()
    values.insert(THETA_KEY, theta0.ravel())
    if k:
        values.insert(PHI_KEY, phi0)
    eigenvalues = [_min_eigenvalues(theta0.ravel())]

    def record(row: dict[str, float], current: gtsam.Values) -> None:
        theta = current.atVector(THETA_KEY)
        eigenvalues.append(_min_eigenvalues(theta))
        if on_iteration is not None:
            on_iteration(row, np.asarray(standard_from_log_cholesky(theta.reshape(n, 10))),
                         current.atVector(PHI_KEY).reshape(n, k) if k else np.zeros((n, 0)))

    bounds: dict[int, tuple[np.ndarray, np.ndarray]] = {THETA_KEY: (theta_lower.ravel(), np.full(10 * n, np.inf))}
    if k:
        bounds[PHI_KEY] = (lower, upper)
    lm = bounded_levenberg_marquardt(graph, values, bounds, config, quiet=quiet,
                                     label="arm identification", on_iteration=record)
    theta = lm.values.atVector(THETA_KEY).reshape(n, 10)
    pi = np.asarray(standard_from_log_cholesky(theta))
    phi = lm.values.atVector(PHI_KEY).reshape(n, k) if k else np.zeros((n, 0))
    out = ConsistentIdentification(pi=pi, phi=phi, theta=theta, lm=lm, min_eigenvalues=eigenvalues)
    x = np.concatenate([pi.ravel(), phi.ravel()])
    out.sigma = float(np.sqrt(np.mean((W @ x - tau) ** 2)))
    if base is not None:
        Wb = W[:, base.independent]
        out.base_values = base.values(x)
        out.base_std, out.sigma = _base_statistics(Wb, tau - W @ x)
    return out


def _min_eigenvalues(theta: np.ndarray) -> np.ndarray:
    J = np.asarray(pseudo_inertia(np.asarray(standard_from_log_cholesky(np.asarray(theta).reshape(-1, 10)))))
    return np.linalg.eigvalsh(J)[:, 0]


__all__ = ["DEFAULT_CONFIG", "MAX_CONDITION", "PHI_KEY", "PRIOR_SIGMA", "THETA_KEY", "ConsistentIdentification", "LeastSquaresIdentification",
           "consistent_identification", "extended_base_parameters", "friction_bounds", "least_squares_identification",
           "parameter_names", "stacked_regressor", "standard_from_base"]
