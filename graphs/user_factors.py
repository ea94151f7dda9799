"""A user's own factors in the joint state-parameter problem (:func:`mbfg.graphs.joint.build_joint_problem`).

:func:`mbfg.calibration.calibrate`, :func:`mbfg.graphs.joint.estimate_states` and
:func:`mbfg.graphs.joint.cross_validation` take ``factors=[...]``, a list of

- :class:`UserFactors`: rows of one factor type of the user's (declared with
  :func:`mbfg.factor_type.factor_type` over the problem's variables), one row per time-step listed, built
  as one :class:`~mbfg.adapter.FactorGroup` (:meth:`~mbfg.adapter.FactorType.group`) that the batch
  solver linearizes in one vectorized call, like the built-in impulse and observation factors;
- plain GTSAM factors (any ``gtsam.NonlinearFactor`` on the problem's keys: ``gtsam.PriorFactorVector``
  on ``keys.P()``, a ``gtsam.CustomFactor`` ...), linearized by GTSAM.

The problem's variables, by :mod:`mbfg.keys` (time-step k = 0 .. n-1 at t_k = k h after the log's first row,
h the time-step of the problem, the log's sample period by default):

- ``keys.X(k, i)``: the pose of body i at step k (Pose3: its CoM position [m] in the world, its rotation body ->
  world; i in the model's body order ``model.bodies``);
- ``keys.V(k)``: the velocities of all bodies at step k (Vector (6 nb,): body i's CoM velocity [m/s] in the
  world frame in entries 6i .. 6i+2, its angular velocity [rad/s] in its body frame in 6i+3 .. 6i+5, as
  :class:`mbfg.rigid.State`'s ``v`` and ``w``);
- ``keys.P()``: the free scalar parameters (Vector, in the order of the ``free`` argument, or the model's
  free parameters in its order: :meth:`UserFactors` rows can look the index up with
  ``list(free).index(name)``); present only when a scalar parameter is free;
- ``keys.T()``: the gravity tilt (Rot3), only when the tilt is free.

A factor on a key the problem does not have (a step past the log's end, ``keys.P()`` with nothing free) is
refused with an :class:`~mbfg.errors.ModelError` naming the key and the factor. The user's factors stay in
the covariance of the calibration's standard deviations with their own noise models: a prior of the
user's is information the data are combined with (unlike ``priors=``, which only regularize the solve).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import gtsam
import numpy as np

from mbfg import keys as mbfg_keys
from mbfg.adapter import FactorType, PerFactor
from mbfg.errors import ModelError
from mbfg.graph_builder import GraphBuilder

#: The label of the user's factors in :meth:`mbfg.graphs.joint.JointProblem.step_costs`.
LABEL = "user"


@dataclass(frozen=True)
class UserFactors:
    """Rows of one factor type of the user's, one per time-step in ``steps``.

    Args:
        factor_type: a :class:`~mbfg.adapter.FactorType` (``@factor_type``) whose variables are the
            problem's (module docstring), e.g. ``(p: VectorVar)`` for a prior on the parameters or
            ``(x: Pose3Var, v: VectorVar)`` for a sensor on a body.
        keys: step k -> the keys of the factor at k, in the order of the residual's variables, e.g.
            ``lambda k: [keys.X(k, 1), keys.V(k)]``.
        noise: the noise model shared by the rows (``gtsam.noiseModel.Isotropic.Sigma(m, sigma)`` ...).
            A diagonal one is linearized in one vectorized call; any other by GTSAM, row by row.
        constants: the residual's constants, in its order: a value shared by every row, or a callable
            step k -> that row's value (a reading at t_k, say), or a :class:`~mbfg.adapter.PerFactor` with
            one row per step of ``steps``.
        steps: the time-steps that get a row (default: every step 0 .. n-1 of the problem); ``[0]`` for one
            factor that belongs to no step in particular (a prior on the parameters).
    """

    factor_type: FactorType
    keys: Callable[[int], Sequence[int]]
    noise: gtsam.noiseModel.Base
    constants: tuple[Any, ...] = ()
    steps: Sequence[int] | None = None

    def rows(self, n: int) -> tuple[list[int], list[list[int]], tuple[Any, ...]]:
        """(steps, keys (rows, number of variables), constants with the per-step ones as PerFactor) over a
        problem of ``n`` time-steps."""
        name = self.factor_type.name
        steps = list(range(n)) if self.steps is None else [int(k) for k in self.steps]
        if not steps:
            raise ModelError(f"user factors {name!r}: steps is empty; give at least one time-step")
        bad = [k for k in steps if not 0 <= k < n]
        if bad:
            raise ModelError(f"user factors {name!r}: step {bad[0]} is outside the problem's time-steps 0 .. {n - 1}")
        rows = [[int(key) for key in self.keys(k)] for k in steps]
        constants = tuple(PerFactor(np.stack([np.asarray(c(k), dtype=float) for k in steps])) if callable(c) else c
                          for c in self.constants)
        return steps, rows, constants


def add_user_factors(builder: GraphBuilder, factors: Sequence[UserFactors | gtsam.NonlinearFactor], n: int,
                     values: gtsam.Values) -> None:
    """Add ``factors`` (module docstring) to ``builder`` under the label :data:`LABEL`, over a problem of ``n``
    time-steps with the variables of ``values``.

    Raises:
        ModelError: a factor that is neither, a key not in ``values`` (naming it and the factor), bad steps.
    """
    if isinstance(factors, (UserFactors, gtsam.NonlinearFactor)):
        factors = [factors]
    for i, item in enumerate(factors):
        if isinstance(item, UserFactors):
            steps, rows, constants = item.rows(n)
            for k, row in zip(steps, rows):
                _check_keys(row, values, f"user factors {item.factor_type.name!r} at step {k}")
            plain = isinstance(item.noise, gtsam.noiseModel.Diagonal) and not isinstance(
                item.noise, gtsam.noiseModel.Constrained)
            builder.add_group(item.factor_type, rows, item.noise, *constants, label=LABEL, steps=steps,
                              vectorize=plain)
        elif isinstance(item, gtsam.NonlinearFactor):
            _check_keys(list(item.keys()), values, f"factors[{i}] ({type(item).__name__})")
            builder.add(item, label=LABEL)
        else:
            raise ModelError(f"factors[{i}]: expected a UserFactors or a gtsam.NonlinearFactor, "
                             f"got {type(item).__name__}")


def _check_keys(row: Sequence[int], values: gtsam.Values, what: str) -> None:
    for key in row:
        if not values.exists(key):
            present = "keys.P()" if values.exists(mbfg_keys.P()) else "no keys.P() (no scalar parameter is free)"
            raise ModelError(f"{what}: key {mbfg_keys.describe(key)} is not a variable of the problem "
                             f"(it has keys.X(k, i) and keys.V(k) for the time-steps k and {present})")


__all__ = ["LABEL", "UserFactors", "add_user_factors"]
