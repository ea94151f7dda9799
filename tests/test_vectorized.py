"""The vectorized batch path (mbfg.vectorized, the bounded LM's block solve) against GTSAM's own.

The same joint problem (Marklund et al. (2025) section 3) is linearized by GTSAM through the
CustomFactors and by VectorizedGraph over blocks; the two linear systems, and
the LM iterates they lead to, must be the same.
"""

from __future__ import annotations

import gtsam
import numpy as np
import pytest

from mbfg import keys
from mbfg.graphs.joint import build_joint_problem
from mbfg.lm_config import LMConfig
from mbfg.logs import Log
from mbfg.models import furuta
from mbfg.solvers import bounded_levenberg_marquardt
from mbfg.spook import simulate, unwrap_angles
from mbfg.vectorized import Blocks, VectorizedGraph


@pytest.fixture(scope="module")
def furuta_problem():
    """A dry Furuta pendulum, 0.3 s at 1 ms, driven, with 10 scalar parameters and the tilt free."""
    model = furuta(dry=True)
    n = 300
    t = np.arange(n) * 1e-3
    u = (0.4 * np.sign(np.sin(2 * np.pi * 3.0 * t)))[:, None]
    traj = simulate(model, n * 1e-3, 1e-3, initial=model.initial_state({"alpha": 0.4}), controls=u)
    rng = np.random.default_rng(3)
    y = unwrap_angles(model, traj.observations) + 1e-3 * rng.standard_normal(traj.observations.shape)
    log = Log(traj.t, y, np.vstack([traj.controls, traj.controls[-1:]]), model.observations, model.controls, "furuta")
    truth = model.parameters.numpy_values()
    free = ["K", "J_Az", "J_Bx", "J_By", "b_1", "b_2", "mu_r1", "mu_r2", "tilt"]
    start = model.with_parameters({"K": 1.1 * truth["K"], "J_Bx": 0.8 * truth["J_Bx"], "b_1": 1.3 * truth["b_1"]})
    return build_joint_problem(start, log, free=free, smooth_start=None)


def _member_order(problem) -> list[int]:
    """The GTSAM variables in the order of the blocks' columns."""
    blocks = problem.vectorized.blocks
    return [key for block in problem.vectorized.order for key in blocks.members[block]]


@pytest.mark.slow
def test_vectorized_linearization_is_gtsams_linear_system_over_blocks(furuta_problem):
    """Hessian and information vector of the whitened system: blocks (one vectorized call per factor type)
    against GTSAM's linearization of the same graph through its CustomFactors."""
    problem = furuta_problem
    linear, diag = problem.vectorized.linearize(problem.initial)
    H_blocks, eta_blocks = linear.hessian(gtsam.Ordering(problem.vectorized.order))
    H, eta = problem.graph.linearize(problem.initial).hessian(gtsam.Ordering(_member_order(problem)))
    scale = np.abs(H).max()
    np.testing.assert_allclose(H_blocks, H, rtol=0, atol=1e-12 * scale)
    np.testing.assert_allclose(eta_blocks, eta, rtol=0, atol=1e-12 * np.abs(eta).max())
    np.testing.assert_allclose(diag, np.diag(H), rtol=1e-12, atol=1e-12 * scale)
    assert problem.vectorized.error(problem.initial) == pytest.approx(problem.graph.error(problem.initial), rel=1e-12)


def test_vectorized_lm_takes_the_iterates_of_the_ordinary_lm_with_a_bound_active(furuta_problem):
    """Marklund et al. (2025) eq. 3.18's box: a lower bound on b_1 above its optimum pins it; both paths (damped QR with
    stiff rows on the pinned components; Cholesky of the states then the exact small bounded solve) must
    take the same steps and end on the bound."""
    problem = furuta_problem
    i = problem.variables.free.index("b_1")
    lo, hi = (b.copy() for b in problem.bounds[keys.P()])
    start = problem.initial.atVector(keys.P())
    lo[i] = 0.999 * start[i]  # the truth is 1/1.3 of the start: the bound binds
    bounds = {keys.P(): (lo, hi)}
    runs = [bounded_levenberg_marquardt(g, problem.initial, bounds, quiet=True, config=LMConfig(max_iterations=4))
            for g in (problem.vectorized, problem.graph)]
    costs = [np.array([h["cost"] for h in r.history]) for r in runs]
    np.testing.assert_allclose(costs[0], costs[1], rtol=1e-7)
    chi = [r.values.atVector(keys.P()) for r in runs]
    np.testing.assert_allclose(chi[0], chi[1], rtol=1e-6, atol=1e-12)
    assert chi[0][i] == lo[i]


def test_a_foreign_gtsam_factor_joins_the_vectorized_graph(furuta_problem):
    """A GTSAM PriorFactorVector on the parameters, in the graph's ordinary part: the vectorized LM
    minimizes the same cost as the ordinary LM on the graph with that factor."""
    problem = furuta_problem
    chi0 = problem.initial.atVector(keys.P())
    prior = gtsam.PriorFactorVector(keys.P(), 0.5 * chi0, gtsam.noiseModel.Diagonal.Sigmas(1e-3 * np.abs(chi0) + 1e-9))
    others = gtsam.NonlinearFactorGraph()
    others.push_back(problem.vectorized.others)
    others.push_back(prior)
    vectorized = VectorizedGraph(problem.vectorized.groups, others, problem.vectorized.blocks,
                                 problem.vectorized.order)
    graph = gtsam.NonlinearFactorGraph()
    graph.push_back(problem.graph)
    graph.push_back(prior)
    assert vectorized.error(problem.initial) == pytest.approx(graph.error(problem.initial), rel=1e-12)
    runs = [bounded_levenberg_marquardt(g, problem.initial, problem.bounds, quiet=True,
                                        config=LMConfig(max_iterations=3))
            for g in (vectorized, graph)]
    np.testing.assert_allclose(runs[0].values.atVector(keys.P()), runs[1].values.atVector(keys.P()), rtol=1e-6)
    # The prior pulls the parameters halfway to half their start value.
    assert np.all(np.abs(runs[0].values.atVector(keys.P()) - 0.5 * chi0) < np.abs(chi0 - 0.5 * chi0))


def test_blocks_refuse_a_variable_in_two_blocks_by_name():
    dims = {keys.V(0): 3, keys.V(1): 3}
    with pytest.raises(Exception, match="v0"):
        Blocks([(keys.S(0), [keys.V(0)]), (keys.S(1), [keys.V(0), keys.V(1)])], dims)
