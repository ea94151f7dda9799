"""GraphBuilder: factors added by type, each labelled with its kind and time-step."""

from __future__ import annotations

import gtsam
import numpy as np
import pytest

from mbfg import keys
from mbfg.adapter import PerFactor, noise_model
from mbfg.factors.integrators import EULER
from mbfg.graph_builder import GraphBuilder

DT = 0.01


def _euler_rows(n: int) -> list[list[int]]:
    return [[keys.Q(k), keys.Q(k + 1), keys.V(k)] for k in range(n)]


def test_cost_split_by_label_and_step_adds_up_to_gtsams_graph_error():
    builder = GraphBuilder()
    builder.add_group(EULER, _euler_rows(3), noise_model(0.1, 2), DT, label="integrator", steps=[0, 1, 2])
    builder.add(gtsam.PriorFactorVector(keys.Q(0), np.zeros(2), noise_model(0.5, 2)), label="prior")
    rng = np.random.default_rng(0)
    values = gtsam.Values()
    for k in range(4):
        values.insert(keys.Q(k), rng.normal(size=2))
        values.insert(keys.V(k), rng.normal(size=2))

    costs = builder.costs(values, 4, labels=("observation",))

    assert builder.labels == ("integrator",) * 3 + ("prior",)
    np.testing.assert_array_equal(builder.steps, [0, 1, 2, 0])
    assert len(builder.groups) == 1 and builder.others.size() == 1 and builder.graph.size() == 4
    for k in range(3):  # x_{k+1} - x_k - dt xdot_k, whitened by 0.1, as GTSAM computes it per factor
        r = (values.atVector(keys.Q(k + 1)) - values.atVector(keys.Q(k)) - DT * values.atVector(keys.V(k))) / 0.1
        assert costs["integrator"][k] == pytest.approx(r @ r, rel=1e-12)
    assert costs["prior"][0] == pytest.approx(np.sum((values.atVector(keys.Q(0)) / 0.5) ** 2), rel=1e-12)
    np.testing.assert_array_equal(costs["observation"], np.zeros(4))
    total = sum(c.sum() for c in costs.values())
    assert total == pytest.approx(2.0 * builder.graph.error(values), rel=1e-12)


def test_a_group_needs_one_step_per_factor():
    with pytest.raises(ValueError, match="euler_integrator: 3 factors labelled 'integrator' but 2 steps"):
        GraphBuilder().add_group(EULER, _euler_rows(3), noise_model(0.1, 2), DT, label="integrator", steps=[0, 1])


def test_single_factors_take_their_row_of_the_per_factor_constants_and_match_the_group():
    """vectorize=False (a stream's gap): N factors made one by one, each with its own dt, equal to the group's."""
    dts = PerFactor(np.array([0.01, 0.02, 0.03]))
    rows = _euler_rows(3)
    vectorized, single = GraphBuilder(), GraphBuilder()
    vectorized.add_group(EULER, rows, noise_model(0.1, 2), dts, label="integrator", steps=[0, 1, 2])
    assert single.add_group(EULER, rows, noise_model(0.1, 2), dts, label="integrator", steps=[0, 1, 2],
                            vectorize=False) is None
    assert (len(single.groups), single.others.size(), len(single.items)) == (0, 3, 3)
    assert single.labels == vectorized.labels and list(single.steps) == list(vectorized.steps)
    rng = np.random.default_rng(1)
    values = gtsam.Values()
    for k in range(4):
        values.insert(keys.Q(k), rng.normal(size=2))
        values.insert(keys.V(k), rng.normal(size=2))
    for k in range(3):
        r = (values.atVector(keys.Q(k + 1)) - values.atVector(keys.Q(k)) - dts.values[k] * values.atVector(keys.V(k)))
        assert single.graph.at(k).error(values) == pytest.approx(0.5 * np.sum((r / 0.1) ** 2), rel=1e-12)
        assert single.graph.at(k).error(values) == pytest.approx(vectorized.graph.at(k).error(values), rel=1e-12)
