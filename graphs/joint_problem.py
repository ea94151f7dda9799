"""A built joint state-parameter problem (:class:`JointProblem`, made by
:func:`mbfg.graphs.joint.build_joint_problem`) and what it reads from a solution: parameters, states, the
per-step costs and the noise levels they imply.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import gtsam
import numpy as np

from mbfg import keys
from mbfg import quaternion as quat
from mbfg.factors._rigid import Variables
from mbfg.graph_builder import GraphBuilder
from mbfg.graphs.user_factors import LABEL as USER_LABEL
from mbfg.logs import Log
from mbfg.rigid import RigidModel, State
from mbfg.solvers import LMResult
from mbfg.time_grid import round_time
from mbfg.vectorized import VectorizedGraph

if TYPE_CHECKING:
    from mbfg.spook import Trajectory

__all__ = ["JointProblem"]


@dataclass
class JointProblem:
    """A built joint estimation problem.

    t: (n,) state times [s]; y: (n, n_obs) readings at those times (NaN: missing);
    u: (n, n_controls) controls held over [t_k, t_k+1); h: time-step [s];
    stride: log samples per time-step; weight: the state error weight w;
    graph, initial: the GTSAM problem and its initial values; bounds: key -> box;
    factors: how the graph was assembled (:class:`~mbfg.graph_builder.GraphBuilder`): its factor groups,
    the other factors, and each factor's label and time-step (:meth:`step_costs`);
    vectorized: the same problem for the vectorized batch solver (:mod:`mbfg.vectorized`).
    """

    model: RigidModel
    variables: Variables
    t: np.ndarray
    y: np.ndarray
    u: np.ndarray
    h: float
    stride: int
    weight: float
    graph: gtsam.NonlinearFactorGraph
    initial: gtsam.Values
    bounds: dict[int, tuple[np.ndarray, np.ndarray]]
    factors: GraphBuilder = field(repr=False, default_factory=GraphBuilder)
    smooth_start: LMResult | None = field(repr=False, default=None)
    vectorized: VectorizedGraph | None = field(repr=False, default=None)
    #: The solve this problem restarts from (:func:`mbfg.graphs.restarts.restart_from_simulation`), None for a
    #: first solve.
    restarted_from: LMResult | None = field(repr=False, default=None)
    #: The solve with softer joints this problem starts from (:func:`mbfg.graphs.restarts.stiffen`), None if none.
    softened_from: LMResult | None = field(repr=False, default=None)
    #: The user's own factors in the problem (:mod:`mbfg.graphs.user_factors`), as given to the builder.
    user_factors: tuple[Any, ...] = field(repr=False, default=())

    @property
    def n(self) -> int:
        return len(self.t)

    @property
    def period(self) -> float:
        """The log's sample period [s]: h / stride to the period's decimals (0.001, not 0.0010000000000000002)."""
        return round_time(1, self.h / self.stride)

    def parameter_values(self, values: gtsam.Values) -> dict[str, Any]:
        """Every parameter's value (free ones from ``values``)."""
        p = self.model.parameters.numpy_values()
        if self.variables.free:
            chi = values.atVector(keys.P())
            p.update({name: float(chi[i]) for i, name in enumerate(self.variables.free)})
        if self.variables.tilt_free:
            p[self.variables.tilt] = values.atRot3(keys.T()).matrix()
        return p

    def states(self, values: gtsam.Values) -> State:
        """The state trajectory in ``values`` as a :class:`State` with a leading axis n."""
        nb = self.model.nb
        r = np.zeros((self.n, nb, 3))
        e = np.zeros((self.n, nb, 4))
        for k in range(self.n):
            for i in range(nb):
                pose = values.atPose3(keys.X(k, i))
                r[k, i] = pose.translation()
                e[k, i] = quat.from_matrix(pose.rotation().matrix())
        vel = np.stack([values.atVector(keys.V(k)) for k in range(self.n)]).reshape(self.n, nb, 6)
        return State(r, e, vel[:, :, :3], vel[:, :, 3:])

    def state_log(self) -> Log:
        """The readings at the state times, with their controls: the log this problem's graph was built on."""
        return Log(self.t, self.y, self.u, self.model.observations, self.model.controls)

    def free_simulation(self, values: gtsam.Values, model: RigidModel | None = None) -> Trajectory:
        """``model`` (default this problem's) simulated with Spook from the initial state x_0 in ``values``, under
        the log's controls, over the state times: no correction by the readings."""
        from mbfg.spook import simulate

        states = self.states(values)
        x0 = State(*(np.asarray(a[0]) for a in states))
        return simulate(model or self.model, (self.n - 1) * self.h, self.h, initial=x0, controls=self.u[:-1])

    def simulation_residuals(self, traj: Trajectory) -> np.ndarray:
        """(n, observations) simulated minus read at the state times (hinge angles unwrapped, their difference
        wrapped to (-pi, pi]); NaN where no reading was logged."""
        from mbfg.spook import unwrap_angles

        diff = unwrap_angles(self.model, traj.observations) - self.y
        hinge = self.model.angle_observation_mask()
        diff[:, hinge] = np.angle(np.exp(1j * diff[:, hinge]))
        return diff

    def state_list(self, values: gtsam.Values) -> list[State]:
        """The state trajectory in ``values`` as n :class:`State` s (the ``states`` argument of the builder)."""
        states = self.states(values)
        return [State(*(a[k] for a in states)) for k in range(self.n)]

    def step_costs(self, values: gtsam.Values) -> dict[str, np.ndarray]:
        """Per time-step objective terms: ``observation`` |Delta y_k|^2 and ``impulse`` w |Delta p_k|^2
        (the impulse of step k-1 -> k and the initial-state residual at 0), both (n,); ``prior`` the parameter
        priors' and ``user`` the user's own factors' (:mod:`mbfg.graphs.user_factors`) at their steps."""
        return self.factors.costs(values, self.n, labels=("observation", "impulse", "prior", USER_LABEL))

    def noise_sigmas(self, values: gtsam.Values) -> tuple[float, float]:
        """(the readings' sigma (3.22), the impulses' sigma (3.23)) estimated from the residuals at ``values``,
        ``sum r^2 / (N - 1)`` in the objective's weights (readings at unit sigma, impulses at 1/sqrt(w))."""
        costs = self.step_costs(values)
        n_obs = int(np.isfinite(self.y).sum())
        n_imp = 12 * self.model.nb * self.n
        return (float(np.sqrt(costs["observation"].sum() / max(n_obs - 1, 1))),
                float(np.sqrt(costs["impulse"].sum() / self.weight / max(n_imp - 1, 1))))

    @property
    def factor_kinds(self) -> tuple[str, ...]:
        """The label of each factor of :attr:`graph` (``"impulse"``, ``"observation"``, ``"prior"``, ``"user"``)."""
        return self.factors.labels

    @property
    def factor_steps(self) -> np.ndarray:
        """(number of factors,) the time-step of each factor of :attr:`graph`."""
        return self.factors.steps
