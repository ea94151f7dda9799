"""The options of the box-constrained Levenberg-Marquardt (:func:`mbfg.solvers.bounded_levenberg_marquardt`) in one
frozen object, as GTSAM's ``LevenbergMarquardtParams``, Ceres' ``Solver::Options`` and jaxls' ``TrustRegionConfig``
keep theirs.

Every caller of the LM (:func:`mbfg.calibration.calibrate`, :func:`mbfg.graphs.joint.estimate_states`, the
controller of :mod:`mbfg.graphs.control`, ...) takes an :class:`LMConfig`; one field is changed with
``dataclasses.replace(config, max_iterations=50)``. A bad field is refused when the object is made, naming it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from mbfg.errors import MbfgError

#: The LM's damping at its start (:attr:`LMConfig.lambda_initial`), GTSAM's default.
LAMBDA_INITIAL = 1e-5

#: The rules for the damping between trials (:attr:`LMConfig.damping_update`).
DAMPING_UPDATES: tuple[str, ...] = ("tenfold", "nielsen")


@dataclass(frozen=True)
class LMConfig:
    """The options of :func:`mbfg.solvers.bounded_levenberg_marquardt` (its module docstring says what each
    test of convergence is).

    Attributes:
        max_iterations: linearizations at most (one more checks the gradient at the last point reached where the
            last step's decrease was small); a whole number >= 1.
        relative_tol: the decrease test of convergence: an accepted step taken at ``lambda_initial`` or less
            lowers the cost by less than this fraction of it, or :data:`mbfg.solvers.STALL_STEPS` accepted steps in
            a row do, whatever their damping. Convergence also needs the gradient test and the Gauss-Newton check.
            A number >= 0 (unit-free; 0: that test never holds, the solve runs to its limits or a cost of
            ``absolute_tol``).
        gradient_tol: the gradient test: :func:`mbfg.lm_systems.projected_gradient_cosine` at most this (unit-free,
            >= 0); None: ``sqrt(relative_tol)``, what an undamped step's small decrease implies
            (:attr:`gradient_threshold`).
        absolute_tol: converged when the cost (0.5 sum of squared whitened residuals) is at most this; >= 0.
        lambda_initial: the damping at the start (unit-free: it scales Marquardt's diagonal); > 0.
        lambda_max: the damping at which the LM gives up on a point (no step lowers the cost); >= lambda_initial.
        damping_update: "tenfold" (lam / 10 after an accepted step, x 10 per rejected trial) or "nielsen"
            (Madsen, Nielsen and Tingleff 2004: by the gain ratio, and a growth factor doubled per rejected trial).
        backtracking: halvings of a rejected step tried along its direction before the damping grows (0: the
            plain LM); a whole number >= 0. For costs with kinks the linearization cannot see (contacts).
        time_limit_s: wall seconds after which no new iteration starts (status "not_converged"); None: no limit.
    """

    max_iterations: int = 20
    relative_tol: float = 1e-6
    gradient_tol: float | None = None
    absolute_tol: float = 0.0
    lambda_initial: float = LAMBDA_INITIAL
    lambda_max: float = 1e10
    damping_update: Literal["tenfold", "nielsen"] = "tenfold"
    backtracking: int = 0
    time_limit_s: float | None = None

    def __post_init__(self) -> None:
        _whole("max_iterations", self.max_iterations, 1)
        _whole("backtracking", self.backtracking, 0)
        _number("relative_tol", self.relative_tol, "a number >= 0", lambda x: x >= 0)
        if self.gradient_tol is not None:
            _number("gradient_tol", self.gradient_tol, "a number >= 0 (or None: sqrt(relative_tol))", lambda x: x >= 0)
        _number("absolute_tol", self.absolute_tol, "a number >= 0", lambda x: x >= 0)
        _number("lambda_initial", self.lambda_initial, "a number > 0", lambda x: x > 0)
        _number("lambda_max", self.lambda_max, f"a number >= lambda_initial ({self.lambda_initial!r})",
                lambda x: x >= self.lambda_initial)
        if self.damping_update not in DAMPING_UPDATES:
            raise MbfgError(f"LMConfig.damping_update: expected 'tenfold' or 'nielsen', got {self.damping_update!r}")
        if self.time_limit_s is not None:
            _number("time_limit_s", self.time_limit_s, "a number of seconds > 0 (or None: no limit)", lambda x: x > 0)

    @property
    def gradient_threshold(self) -> float:
        """The gradient test's bound: ``gradient_tol``, or ``sqrt(relative_tol)`` where that is None."""
        return math.sqrt(self.relative_tol) if self.gradient_tol is None else float(self.gradient_tol)


def _whole(name: str, value: Any, minimum: int) -> None:
    # bool is an int to Python; True iterations is a mistake, not 1.
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise MbfgError(f"LMConfig.{name}: expected a whole number >= {minimum}, got {value!r}")


def _number(name: str, value: Any, what: str, ok: Callable[[float], bool]) -> None:
    real = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))
    if not (real and math.isfinite(value) and ok(value)):
        raise MbfgError(f"LMConfig.{name}: expected {what}, got {value!r}")


__all__ = ["DAMPING_UPDATES", "LAMBDA_INITIAL", "LMConfig"]
