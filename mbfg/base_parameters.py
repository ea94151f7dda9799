"""Base parameters of a kinematic tree: the combinations of standard inertial parameters that joint torques
determine, named, and the directions they cannot see, by name.

The method of Gautier (1990, "Numerical calculation of the base inertial parameters of robots") as
Pinocchio-based identification (FIGAROH) applies it: stack the inverse-dynamics regressor
(:func:`mbfg.inverse_dynamics.regressor`) at random joint angles, rates and accelerations within the
joint limits into W (T n, 10 n); drop the columns that are zero at every sample (parameters that never
reach a joint torque); then a QR factorization with column pivoting (``scipy.linalg.qr(pivoting=True)``)
W_P = Q [R1 R2] orders the columns, its rank r is the number of diagonal entries of R above
``tolerance * |R[0, 0]|``, and the first r pivoted columns are the independent ones. With
beta = R1^-1 R2 the torques are W_P [pi_indep; pi_dep] = W_indep (pi_indep + beta pi_dep), so

    pi_base = pi_indep + beta @ pi_dep          (r,)

are the base parameters, and each dependent parameter k moves along the unidentifiable direction
e_k - sum_i beta[i, k] e_indep_i without changing any torque.

These are the structural base parameters of the inertial model, known before any data is taken;
:mod:`mbfg.identifiability` finds the combinations that one calibration's data determine, from its
information matrix.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.linalg

from mbfg.errors import MbfgError
from mbfg.inverse_dynamics import GRAVITY, regressor
from mbfg.kinematic_tree import KinematicTree


@dataclass(frozen=True)
class BaseParameterOptions:
    """samples: random states at which the regressor is stacked; seed: of their generator;
    tolerance: relative size of R's diagonal below which a column is dependent (and of a column's norm,
    relative to the largest, below which it is zero); coefficient_tolerance: smallest |beta| written in a
    name; angle_range: [rad or m] half-width of the angles drawn for a joint without ``<limit>``;
    rate, acceleration: half-widths of the uniform rates [rad/s] and accelerations [rad/s^2] (a joint's
    ``<limit velocity>`` caps its rate)."""

    samples: int = 50
    seed: int = 0
    tolerance: float = 1e-8
    coefficient_tolerance: float = 1e-10
    angle_range: float = np.pi
    rate: float = 2.0
    acceleration: float = 5.0

    def __post_init__(self) -> None:
        if not (isinstance(self.samples, int) and self.samples >= 1):
            raise MbfgError(f"samples: expected an integer >= 1, got {self.samples!r}")
        for field in ("tolerance", "coefficient_tolerance", "angle_range", "rate", "acceleration"):
            value = getattr(self, field)
            if not (np.isfinite(value) and value > 0.0):
                raise MbfgError(f"{field}: expected a finite number > 0, got {value!r}")


@dataclass(frozen=True)
class BaseParameters:
    """The base parameters of a tree (module docstring).

    names: (10 n,) standard parameter names (:attr:`KinematicTree.parameter_names`);
    independent: (r,) indices of the independent standard parameters (the pivots);
    dependent: (d,) indices of the dependent ones (their columns are combinations of the independent ones);
    zero: indices of the standard parameters that never reach a torque;
    beta: (r, d) coefficients, pi_base = pi[independent] + beta @ pi[dependent];
    rank: r; coefficient_tolerance: smallest |beta| written in :attr:`expressions`.
    """

    names: tuple[str, ...]
    independent: np.ndarray
    dependent: np.ndarray
    zero: np.ndarray
    beta: np.ndarray
    coefficient_tolerance: float

    @property
    def rank(self) -> int:
        """The number of base parameters."""
        return len(self.independent)

    @property
    def matrix(self) -> np.ndarray:
        """K (r, 10 n): pi_base = K @ pi."""
        K = np.zeros((self.rank, len(self.names)))
        K[np.arange(self.rank), self.independent] = 1.0
        K[:, self.dependent] = self.beta
        return K

    def values(self, pi: np.ndarray) -> np.ndarray:
        """The base parameters (r,) of standard parameters ``pi`` (10 n,) or (n, 10)."""
        return self.matrix @ np.asarray(pi, dtype=float).ravel()

    @property
    def expressions(self) -> tuple[str, ...]:
        """Each base parameter as a combination of named standard parameters, e.g. ``Izz_link1 + 0.09*m_link2``."""
        return tuple(_combination(self.names, row, self.coefficient_tolerance) for row in self.matrix)

    @property
    def unidentifiable(self) -> tuple[str, ...]:
        """The directions of parameter space no torque sees, by name: each parameter that never reaches a torque,
        and for each dependent parameter k the combination e_k - sum_i beta[i, k] e_independent_i."""
        out = [self.names[k] for k in self.zero]
        for col, k in enumerate(self.dependent):
            d = np.zeros(len(self.names))
            d[k] = 1.0
            d[self.independent] = -self.beta[:, col]
            out.append(_combination(self.names, d, self.coefficient_tolerance))
        return tuple(out)


def _combination(names: tuple[str, ...], coefficients: np.ndarray, tol: float) -> str:
    terms = []
    for name, c in zip(names, coefficients, strict=True):
        if abs(c) <= tol:
            continue
        magnitude = "" if np.isclose(abs(c), 1.0, rtol=1e-12, atol=0.0) else f"{abs(c):.6g}*"
        terms.append((" - " if c < 0 else " + ") + magnitude + name)
    text = "".join(terms)
    return text[3:] if text.startswith(" + ") else "-" + text[3:] if text else "0"


def random_states(tree: KinematicTree, options: BaseParameterOptions) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """q, qd, qdd (samples, n) drawn uniformly within the joints' limits (:class:`BaseParameterOptions`)."""
    rng = np.random.default_rng(options.seed)
    lo = np.array([tree.limits[j].get("lower", -options.angle_range) for j in tree.joints])
    hi = np.array([tree.limits[j].get("upper", options.angle_range) for j in tree.joints])
    rate = np.array([min(options.rate, tree.limits[j].get("velocity", np.inf)) for j in tree.joints])
    shape = (options.samples, tree.n)
    return (rng.uniform(lo, hi, shape), rng.uniform(-rate, rate, shape),
            rng.uniform(-options.acceleration, options.acceleration, shape))


def inertial_base_parameters(tree: KinematicTree, options: BaseParameterOptions | None = None,
                    gravity: tuple[float, float, float] = GRAVITY) -> BaseParameters:
    """The base parameters of ``tree`` from its regressor at random states (module docstring)."""
    options = options or BaseParameterOptions()
    q, qd, qdd = random_states(tree, options)
    W = regressor(tree, q, qd, qdd, gravity).reshape(-1, 10 * tree.n)
    if not np.linalg.norm(W, axis=0).max() > 0.0:
        raise MbfgError(f"{tree.name}: no joint torque depends on any inertial parameter (is gravity zero and every "
                        f"state at rest?)")
    return column_base_parameters(W, tree.parameter_names, options)


def column_base_parameters(W: np.ndarray, names: tuple[str, ...],
                           options: BaseParameterOptions | None = None) -> BaseParameters:
    """The base parameters of any regressor W (rows, p) linear in parameters named ``names`` (p,) (module
    docstring: zero columns, then the pivoted QR): inertial parameters with friction columns appended
    (:mod:`mbfg.joint_friction`), for instance."""
    options = options or BaseParameterOptions()
    W = np.asarray(W, dtype=float)
    if W.ndim != 2 or W.shape[1] != len(names):
        raise MbfgError(f"W: expected shape (rows, {len(names)}) (one column per name), got {W.shape}")
    norms = np.linalg.norm(W, axis=0)
    if not norms.max() > 0.0:
        raise MbfgError("W: every column is zero; no parameter reaches a torque")
    zero = np.flatnonzero(norms <= options.tolerance * norms.max())
    kept = np.flatnonzero(norms > options.tolerance * norms.max())
    _, R, perm = scipy.linalg.qr(W[:, kept], mode="economic", pivoting=True)
    diagonal = np.abs(np.diag(R))
    r = int(np.sum(diagonal > options.tolerance * diagonal[0]))
    beta = scipy.linalg.solve_triangular(R[:r, :r], R[:r, r:])
    return BaseParameters(
        names=tuple(names), independent=kept[perm[:r]], dependent=kept[perm[r:]], zero=zero,
        beta=beta, coefficient_tolerance=options.coefficient_tolerance,
    )

__all__ = ["BaseParameterOptions", "BaseParameters", "column_base_parameters", "inertial_base_parameters", "random_states"]
