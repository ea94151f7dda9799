"""A group of a user's factors (``FactorType.make_many``) evaluated vectorized, against evaluation one factor
at a time (``FactorType.make``) and against GTSAM's own ``RangeFactor3D`` on the same data.

The residual is the range ``|l - t| - r`` from a Pose3's origin to a Point3 (GTSAM's ``RangeFactor<Pose3,
Point3>``); the linear systems are compared through their Hessian and information vector.
"""

from __future__ import annotations

import gtsam
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mbfg.adapter import FactorGroup, PerFactor
from mbfg.errors import MbfgError
from mbfg.factor_group import stacked_noise
from mbfg.factor_type import Point3Var, Pose3Var, factor_type
from mbfg.vectorized import VectorizedGraph


@factor_type(name="test_vectorized_range_3d")
def range_3d(pose: Pose3Var, landmark: Point3Var, distance: jax.Array) -> jax.Array:
    """Distance (1,) [m] from a pose's origin to a landmark, minus the measured one."""
    return jnp.atleast_1d(jnp.linalg.norm(landmark - pose[:3, 3]) - distance)


def _problem(n_poses: int = 12, n_landmarks: int = 6, seed: int = 0):
    """Poses and landmarks at random, every pose ranging every landmark (72 factors, one group)."""
    rng = np.random.default_rng(seed)
    X = [gtsam.symbol("x", i) for i in range(n_poses)]
    L = [gtsam.symbol("l", j) for j in range(n_landmarks)]
    values = gtsam.Values()
    for x in X:
        values.insert(x, gtsam.Pose3(gtsam.Rot3.Expmap(rng.standard_normal(3)), rng.uniform(-5, 5, 3)))
    for l in L:
        values.insert(l, gtsam.Point3(*rng.uniform(-5, 5, 3)))
    rows = [[x, l] for x in X for l in L]
    distances = rng.uniform(1.0, 8.0, len(rows))
    return X, L, values, rows, distances


def _graph(how: str, rows, distances, noise) -> gtsam.NonlinearFactorGraph:
    graph = gtsam.NonlinearFactorGraph()
    if how == "native":
        for (x, l), r in zip(rows, distances):
            graph.add(gtsam.RangeFactor3D(x, l, r, noise))
    elif how == "make":
        for row, r in zip(rows, distances):
            graph.add(range_3d.make(row, noise, r))
    else:
        for factor in range_3d.make_many(rows, noise, PerFactor(distances)):
            graph.add(factor)
    return graph


def _hessian(linear: gtsam.GaussianFactorGraph, keys) -> tuple[np.ndarray, np.ndarray]:
    return linear.hessian(gtsam.Ordering(keys))


def test_range_group_linear_system_equals_per_factor_and_gtsams_range_factor():
    """J^T J and J^T b of the whitened system: the group's (GTSAM calling back per factor, and
    VectorizedGraph's single vectorized pass) = make's per-factor evaluation = RangeFactor3D's, to 1e-9."""
    X, L, values, rows, distances = _problem()
    noise = gtsam.noiseModel.Isotropic.Sigma(1, 0.01)
    keys = X + L
    H_native, eta_native = _hessian(_graph("native", rows, distances, noise).linearize(values), keys)
    many = _graph("make_many", rows, distances, noise)
    vectorized = VectorizedGraph.from_graph(many, values)
    assert len(vectorized.groups) == 1 and vectorized.others.size() == 0
    systems = {"make": _hessian(_graph("make", rows, distances, noise).linearize(values), keys),
               "make_many": _hessian(many.linearize(values), keys),
               "vectorized": _hessian(vectorized.linearize(values)[0], keys)}
    scale, eta_scale = np.abs(H_native).max(), np.abs(eta_native).max()
    for name, (H, eta) in systems.items():
        np.testing.assert_allclose(H, H_native, rtol=0, atol=1e-9 * scale, err_msg=name)
        np.testing.assert_allclose(eta, eta_native, rtol=0, atol=1e-9 * eta_scale, err_msg=name)
    native_error = _graph("native", rows, distances, noise).error(values)
    assert abs(vectorized.error(values) - native_error) <= 1e-9 * native_error


def test_group_is_evaluated_once_per_linearization_and_follows_values_changed_in_place(monkeypatch):
    """One vectorized evaluation serves all the group's callbacks of one linearization (each factor's check
    of its own variables agrees with the group's bulk read); a Values changed in place is noticed."""
    X, L, values, rows, distances = _problem(seed=1)
    noise = gtsam.noiseModel.Isotropic.Sigma(1, 0.05)
    many = _graph("make_many", rows, distances, noise)
    native = _graph("native", rows, distances, noise)
    calls = []
    evaluate = FactorGroup.evaluate
    monkeypatch.setattr(FactorGroup, "evaluate", lambda self, xs, linearize: (calls.append(linearize),
                                                                              evaluate(self, xs, linearize))[1])
    many.linearize(values)
    assert calls == [True]
    values.update(X[3], values.atPose3(X[3]).retract(np.full(6, 0.1)))
    values.update(L[2], values.atPoint3(L[2]) + 0.3)
    H, eta = _hessian(many.linearize(values), X + L)
    assert calls == [True, True]
    H_native, eta_native = _hessian(native.linearize(values), X + L)
    np.testing.assert_allclose(H, H_native, rtol=0, atol=1e-9 * np.abs(H_native).max())
    np.testing.assert_allclose(eta, eta_native, rtol=0, atol=1e-9 * np.abs(eta_native).max())
    # The error at the same values is the linearization's residual: no evaluation of its own.
    assert abs(many.error(values) - native.error(values)) <= 1e-9 * native.error(values)
    assert calls == [True, True]


def test_from_graph_keeps_only_the_groups_factors_that_are_in_the_graph():
    """Half of a group's factors in a graph beside a GTSAM prior: the vectorized linear system (a group of
    those factors, with their own measurements) is that of the same prior and RangeFactor3D's."""
    X, L, values, rows, distances = _problem(seed=2)
    noise = gtsam.noiseModel.Isotropic.Sigma(1, 0.02)
    factors = range_3d.make_many(rows, noise, PerFactor(distances))
    graph = gtsam.NonlinearFactorGraph()
    graph.add(gtsam.PriorFactorPose3(X[0], values.atPose3(X[0]), gtsam.noiseModel.Isotropic.Sigma(6, 0.1)))
    for factor in factors[1::2]:
        graph.add(factor)
    vectorized = VectorizedGraph.from_graph(graph, values)
    assert [len(g) for g in vectorized.groups] == [len(factors[1::2])] and vectorized.others.size() == 1
    native = _graph("native", rows[1::2], distances[1::2], noise)
    native.add(graph.at(0))
    H, eta = _hessian(vectorized.linearize(values)[0], X + L)
    H_gtsam, eta_gtsam = _hessian(native.linearize(values), X + L)
    np.testing.assert_allclose(H, H_gtsam, rtol=0, atol=1e-9 * np.abs(H_gtsam).max())
    np.testing.assert_allclose(eta, eta_gtsam, rtol=0, atol=1e-9 * np.abs(eta_gtsam).max())


def test_from_graph_leaves_a_group_under_a_robust_noise_model_to_gtsam():
    """A Huber-weighted group is not diagonal Gaussian: its factors stay GTSAM's to linearize (reweighted), and
    the linear system is GTSAM's."""
    X, L, values, rows, distances = _problem(seed=3)
    robust = gtsam.noiseModel.Robust.Create(gtsam.noiseModel.mEstimator.Huber.Create(0.5),
                                            gtsam.noiseModel.Isotropic.Sigma(1, 0.02))
    graph = _graph("make_many", rows, distances + 1.0, robust)  # residuals of about 1 m: beyond Huber's knee
    vectorized = VectorizedGraph.from_graph(graph, values)
    assert vectorized.groups == [] and vectorized.others.size() == len(rows)
    H, eta = _hessian(vectorized.linearize(values)[0], X + L)
    H_gtsam, eta_gtsam = _hessian(_graph("native", rows, distances + 1.0, robust).linearize(values), X + L)
    np.testing.assert_allclose(H, H_gtsam, rtol=0, atol=1e-9 * np.abs(H_gtsam).max())
    np.testing.assert_allclose(eta, eta_gtsam, rtol=0, atol=1e-9 * np.abs(eta_gtsam).max())


# -- bundles (FactorType.make_bundles): fewer GTSAM factors for GTSAM's own optimizers ------------------------

def _with_pose_priors(graph: gtsam.NonlinearFactorGraph, X, values) -> gtsam.NonlinearFactorGraph:
    """Ranges leave the poses' rotations free: a prior on every pose (at its value) makes the problem proper."""
    out = gtsam.NonlinearFactorGraph()
    for x in X:
        out.add(gtsam.PriorFactorPose3(x, values.atPose3(x), gtsam.noiseModel.Isotropic.Sigma(6, 0.1)))
    out.push_back(graph)
    return out


def _tangent(values: gtsam.Values, step) -> gtsam.VectorValues:
    """A tangent vector at ``values``: ``step(key, dim)`` per variable."""
    out = gtsam.VectorValues()
    zeros = values.zeroVectors()
    for key in values.keys():
        out.insert(key, step(key, zeros.at(key).shape[0]))
    return out


def _bundled(rows, distances, noise, **options) -> gtsam.NonlinearFactorGraph:
    graph = gtsam.NonlinearFactorGraph()
    for factor in range_3d.make_bundles(rows, noise, PerFactor(distances), **options):
        graph.add(factor)
    return graph


@pytest.mark.parametrize("options", [{"by": 0}, {"by": 1}, {"by": 0, "size": 4}])
def test_bundles_linear_system_and_error_equal_range_factor_3d(options):
    """A bundle stacks its rows: the whitened system's J^T J and J^T b and the error are RangeFactor3D's to
    1e-9, whether the rows are bundled by pose (12 bundles of 6), by landmark (6 of 12) or by pose in fours."""
    X, L, values, rows, distances = _problem(seed=4)
    noise = gtsam.noiseModel.Isotropic.Sigma(1, 0.01)
    bundled = _bundled(rows, distances, noise, **options)
    shared = len(X) if options["by"] == 0 else len(L)
    assert bundled.size() == (shared * 2 if "size" in options else shared)
    native = _graph("native", rows, distances, noise)
    H, eta = _hessian(bundled.linearize(values), X + L)
    H_native, eta_native = _hessian(native.linearize(values), X + L)
    np.testing.assert_allclose(H, H_native, rtol=0, atol=1e-9 * np.abs(H_native).max())
    np.testing.assert_allclose(eta, eta_native, rtol=0, atol=1e-9 * np.abs(eta_native).max())
    assert abs(bundled.error(values) - native.error(values)) <= 1e-9 * native.error(values)


def test_bundle_jacobian_follows_every_change_of_the_values_between_calls(monkeypatch):
    """The group's cache is keyed on the bytes of each bundle's own variables: a trial point's error, then the
    linearization at the current point, then one landmark or one pose changed in place, each gives GTSAM's
    RangeFactor3D's error and Jacobian at the values of that call (1e-9), never the previous call's; one
    vectorized evaluation per distinct point."""
    X, L, values, rows, distances = _problem(seed=5)
    noise = gtsam.noiseModel.Isotropic.Sigma(1, 0.05)
    bundled = _bundled(rows, distances, noise, by=0)
    native = _graph("native", rows, distances, noise)
    calls = []
    evaluate = FactorGroup.evaluate
    monkeypatch.setattr(FactorGroup, "evaluate", lambda self, xs, linearize: (calls.append(linearize),
                                                                              evaluate(self, xs, linearize))[1])

    def agrees(at: gtsam.Values) -> None:
        H, eta = _hessian(bundled.linearize(at), X + L)
        H_native, eta_native = _hessian(native.linearize(at), X + L)
        np.testing.assert_allclose(H, H_native, rtol=0, atol=1e-9 * np.abs(H_native).max())
        np.testing.assert_allclose(eta, eta_native, rtol=0, atol=1e-9 * np.abs(eta_native).max())
        assert abs(bundled.error(at) - native.error(at)) <= 1e-9 * native.error(at)

    trial = values.retract(_tangent(values, lambda k, dim: np.full(dim, 1e-3)))
    assert abs(bundled.error(trial) - native.error(trial)) <= 1e-9 * native.error(trial)
    agrees(values)
    assert calls == [False, True]  # the error at the same point is the linearization's residual
    values.update(L[2], values.atPoint3(L[2]) + 1e-6)  # one landmark, by a little: every bundle sees it
    agrees(values)
    values.update(X[7], values.atPose3(X[7]).retract(np.full(6, 1e-7)))  # one pose: one bundle sees it
    agrees(values)
    assert calls == [False, True, True, True]


def test_gtsam_levenberg_marquardt_on_bundles_takes_range_factor_3ds_steps():
    """gtsam.LevenbergMarquardtOptimizer on the bundled factors (and on make_many's one factor per row) takes
    the steps it takes on RangeFactor3D: the iterates agree to 1e-9 m at every iteration."""
    X, L, values, rows, distances = _problem(seed=6)
    noise = gtsam.noiseModel.Isotropic.Sigma(1, 0.01)
    truth = values
    rng = np.random.default_rng(6)
    start = truth.retract(_tangent(truth, lambda k, dim: 0.05 * rng.standard_normal(dim)))
    graphs = {how: _with_pose_priors(graph, X, truth) for how, graph in
              (("native", _graph("native", rows, distances, noise)),
               ("make_many", _graph("make_many", rows, distances, noise)),
               ("bundles", _bundled(rows, distances, noise, by=0)))}
    optimizers = {how: gtsam.LevenbergMarquardtOptimizer(graph, start, gtsam.LevenbergMarquardtParams())
                  for how, graph in graphs.items()}
    moved = 0.0
    for _ in range(4):
        for optimizer in optimizers.values():
            optimizer.iterate()
        reference = optimizers["native"].values()
        moved = max(moved, max(np.abs(reference.atPoint3(l) - start.atPoint3(l)).max() for l in L))
        for how in ("make_many", "bundles"):
            mine = optimizers[how].values()
            difference = max([np.abs(mine.atPose3(x).matrix() - reference.atPose3(x).matrix()).max() for x in X]
                             + [np.abs(mine.atPoint3(l) - reference.atPoint3(l)).max() for l in L])
            assert difference <= 1e-9, (how, difference)
    assert moved > 1e-3  # the iterates went somewhere


@pytest.mark.parametrize("noise", [gtsam.noiseModel.Unit.Create(3), gtsam.noiseModel.Isotropic.Sigma(3, 0.2),
                                   gtsam.noiseModel.Diagonal.Sigmas(np.array([0.1, 0.2, 0.3])),
                                   gtsam.noiseModel.Gaussian.Covariance(np.array([[2.0, 0.5, 0.1],
                                                                                  [0.5, 1.0, 0.2],
                                                                                  [0.1, 0.2, 0.5]]))])
def test_stacked_noise_whitens_each_row_as_the_model_does(noise):
    """The block-diagonal model of 4 copies whitens a stacked residual as the model whitens each part, and is
    of the model's kind."""
    rng = np.random.default_rng(8)
    parts = rng.standard_normal((4, 3))
    stacked = stacked_noise(noise, 4, "test")
    assert type(stacked) is type(noise) and stacked.dim() == 12
    np.testing.assert_allclose(stacked.whiten(parts.ravel()), np.concatenate([noise.whiten(p) for p in parts]),
                               rtol=1e-14, atol=1e-14)


@pytest.mark.parametrize("noise", [
    gtsam.noiseModel.Robust.Create(gtsam.noiseModel.mEstimator.Huber.Create(0.5),
                                   gtsam.noiseModel.Isotropic.Sigma(1, 0.02)),
    gtsam.noiseModel.Constrained.All(1)])
def test_bundles_refuse_a_robust_or_constrained_noise_model(noise):
    """A robust loss of a stacked residual is not the sum of the rows' losses: refused, naming the model."""
    X, L, values, rows, distances = _problem(seed=9)
    with pytest.raises(MbfgError, match=type(noise).__name__):
        range_3d.make_bundles(rows, noise, PerFactor(distances))


@pytest.mark.parametrize("options, field", [({"by": 2}, "by"), ({"by": -1}, "by"), ({"size": 0}, "size")])
def test_bundles_refuse_a_variable_or_size_out_of_range(options, field):
    X, L, values, rows, distances = _problem(seed=9)
    with pytest.raises(MbfgError, match=f"{field}="):
        range_3d.make_bundles(rows, gtsam.noiseModel.Unit.Create(1), PerFactor(distances), **options)


@factor_type(name="test_vectorized_point_between")
def point_between(a: Point3Var, b: Point3Var, measured: jax.Array) -> jax.Array:
    """(b - a) - measured (3,) [m]: GTSAM's ``BetweenFactor<Point3>``."""
    return (b - a) - measured


@pytest.mark.parametrize("by", [0, 1])
def test_bundles_of_a_factor_on_two_points_equal_between_factor_point3(by):
    """Both variables of one kind, keys met as either variable across rows (a loop and a star of points):
    the bundles' J^T J, J^T b and error are BetweenFactorPoint3's to 1e-9."""
    rng = np.random.default_rng(10)
    P = [gtsam.symbol("p", i) for i in range(6)]
    values = gtsam.Values()
    for p in P:
        values.insert(p, gtsam.Point3(*rng.uniform(-3, 3, 3)))
    rows = [[P[0], P[1]], [P[0], P[2]], [P[1], P[2]], [P[2], P[0]], [P[3], P[0]], [P[0], P[4]], [P[5], P[4]]]
    measured = rng.standard_normal((len(rows), 3))
    noise = gtsam.noiseModel.Diagonal.Sigmas(np.array([0.1, 0.2, 0.3]))
    bundled = gtsam.NonlinearFactorGraph()
    for factor in point_between.make_bundles(rows, noise, PerFactor(measured), by=by):
        bundled.add(factor)
    assert bundled.size() == len({row[by] for row in rows})
    native = gtsam.NonlinearFactorGraph()
    for (a, b), m in zip(rows, measured):
        native.add(gtsam.BetweenFactorPoint3(a, b, gtsam.Point3(*m), noise))
    H, eta = _hessian(bundled.linearize(values), P)
    H_native, eta_native = _hessian(native.linearize(values), P)
    np.testing.assert_allclose(H, H_native, rtol=0, atol=1e-9 * np.abs(H_native).max())
    np.testing.assert_allclose(eta, eta_native, rtol=0, atol=1e-9 * np.abs(eta_native).max())
    assert abs(bundled.error(values) - native.error(values)) <= 1e-9 * native.error(values)
