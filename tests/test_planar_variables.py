"""Planar and point variables (Pose2, Rot2, Point2, Point3) in GTSAM's tangent conventions.

A user's bearing-range residual on a Pose2 and a Point2 is held against GTSAM's own
``BearingRangeFactor2D`` (its error is ``[Log(bearing_measured^-1 bearing(x, l)), range(x, l) - r]``),
values and Jacobians, and the new kinds go through the shared Jacobian battery.
"""

from __future__ import annotations

import gtsam
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from test_jacobian_battery import check_factor_type

from mbfg.adapter import POINT2, POSE2, Pose2Key, VectorKey
from mbfg.factor_type import Point2Var, Point3Var, Pose2Var, Pose3Var, Rot2Var, factor_type


def _pose2(rng: np.random.Generator) -> np.ndarray:
    return gtsam.Pose2(*rng.uniform(-3, 3, 2), rng.uniform(-np.pi, np.pi)).matrix()


def _bearing_range_example(rng):
    pose, landmark = _pose2(rng), rng.uniform(-5, 5, 2)
    return (pose, landmark), (rng.uniform(-np.pi, np.pi), rng.uniform(0.5, 5.0))


@factor_type(name="test_bearing_range_2d", example=_bearing_range_example)
def bearing_range(pose: Pose2Var, landmark: Point2Var, bearing: jax.Array, distance: jax.Array) -> jax.Array:
    """[bearing error [rad], range error [m]] of a landmark (2,) [m] seen from a planar pose (3, 3)."""
    d = pose[:2, :2].T @ (landmark - pose[:2, 2])  # the landmark in the pose's frame
    c, s = jnp.cos(bearing), jnp.sin(bearing)
    # The angle of d relative to the measured bearing, wrapped to (-pi, pi]: Rot2's local coordinates.
    angle = jnp.arctan2(d[1] * c - d[0] * s, d[0] * c + d[1] * s)
    return jnp.stack([angle, jnp.linalg.norm(d) - distance])


def _rot2_prior_example(rng):
    return (gtsam.Rot2(rng.uniform(-np.pi, np.pi)).matrix(),), (rng.uniform(-np.pi, np.pi),)


@factor_type(name="test_rot2_prior", example=_rot2_prior_example)
def rot2_prior(R: Rot2Var, theta: jax.Array) -> jax.Array:
    """Log(R0^T R) (1,) [rad] with R0 the rotation by ``theta``."""
    c, s = jnp.cos(theta), jnp.sin(theta)
    return jnp.arctan2(R[1, 0] * c - R[0, 0] * s, R[0, 0] * c + R[1, 0] * s)[None]


def _range_3d_example(rng):
    pose = gtsam.Pose3(gtsam.Rot3.Expmap(rng.standard_normal(3)), rng.standard_normal(3)).matrix()
    return (pose, rng.uniform(-5, 5, 3)), (rng.uniform(0.5, 5.0),)


@factor_type(name="test_range_3d", example=_range_3d_example)
def range_3d(pose: Pose3Var, point: Point3Var, distance: jax.Array) -> jax.Array:
    """Distance (1,) [m] from a pose's origin to a point, minus the measured one."""
    return (jnp.linalg.norm(point - pose[:3, 3]) - distance)[None]


@pytest.mark.parametrize("ft", [bearing_range, rot2_prior, range_3d], ids=lambda ft: ft.name)
def test_planar_and_point_kinds_pass_the_jacobian_battery(ft):
    check_factor_type(ft, np.random.default_rng(7))


def test_the_kinds_are_read_from_the_annotations():
    assert bearing_range.kinds == (POSE2, POINT2)


def test_bearing_range_linearizes_as_gtsams_bearing_range_factor_2d():
    rng = np.random.default_rng(3)
    x, l = gtsam.symbol("x", 0), gtsam.symbol("l", 0)
    noise = gtsam.noiseModel.Diagonal.Sigmas(np.array([0.01, 0.05]))
    for _ in range(20):
        (pose, landmark), (bearing, distance) = _bearing_range_example(rng)
        values = gtsam.Values()
        values.insert(x, gtsam.Pose2(pose[0, 2], pose[1, 2], np.arctan2(pose[1, 0], pose[0, 0])))
        values.insert(l, gtsam.Point2(*landmark))
        native = gtsam.BearingRangeFactor2D(x, l, gtsam.Rot2(bearing), distance, noise)
        ours = bearing_range.make([Pose2Key(x), l], noise, bearing, distance)
        np.testing.assert_allclose(ours.unwhitenedError(values), native.unwhitenedError(values), atol=1e-12)
        A_ours, b_ours = ours.linearize(values).jacobian()
        A_native, b_native = native.linearize(values).jacobian()
        np.testing.assert_allclose(A_ours, A_native, rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(b_ours, b_native, rtol=1e-9, atol=1e-9)


def test_a_planar_slam_graph_with_our_factors_solves_as_with_gtsams():
    """Two poses with a prior and an odometry factor (GTSAM's), two landmarks seen by bearing and range:
    ours and GTSAM's BearingRangeFactor2D give the same optimum."""
    rng = np.random.default_rng(11)
    poses = [gtsam.Pose2(0.0, 0.0, 0.0), gtsam.Pose2(2.0, 0.0, 0.3)]
    landmarks = [np.array([1.5, 2.0]), np.array([3.0, -1.0])]
    X = [gtsam.symbol("x", i) for i in range(2)]
    L = [gtsam.symbol("l", j) for j in range(2)]
    noise = gtsam.noiseModel.Diagonal.Sigmas(np.array([0.02, 0.05]))
    measurements = []
    for i, pose in enumerate(poses):
        for j, landmark in enumerate(landmarks):
            bearing, distance = pose.bearing(landmark).theta(), pose.range(landmark)
            measurements.append((i, j, bearing + 0.01 * rng.standard_normal(), distance + 0.02 * rng.standard_normal()))

    initial = gtsam.Values()
    for i, pose in enumerate(poses):
        initial.insert(X[i], pose.retract(0.1 * rng.standard_normal(3)))
    for j, landmark in enumerate(landmarks):
        initial.insert(L[j], gtsam.Point2(*(landmark + 0.3 * rng.standard_normal(2))))
    params = gtsam.LevenbergMarquardtParams()
    params.setRelativeErrorTol(1e-14)
    params.setAbsoluteErrorTol(1e-14)

    def solve(native: bool) -> gtsam.Values:
        graph = gtsam.NonlinearFactorGraph()
        graph.add(gtsam.PriorFactorPose2(X[0], poses[0], gtsam.noiseModel.Diagonal.Sigmas(np.full(3, 1e-3))))
        graph.add(gtsam.BetweenFactorPose2(X[0], X[1], poses[0].between(poses[1]),
                                           gtsam.noiseModel.Diagonal.Sigmas(np.array([0.05, 0.05, 0.02]))))
        for i, j, bearing, distance in measurements:
            if native:
                graph.add(gtsam.BearingRangeFactor2D(X[i], L[j], gtsam.Rot2(bearing), distance, noise))
            else:
                graph.add(bearing_range.make([X[i], L[j]], noise, bearing, distance))
        return gtsam.LevenbergMarquardtOptimizer(graph, initial, params).optimize()

    ours, theirs = solve(native=False), solve(native=True)
    for i in range(2):
        assert ours.atPose2(X[i]).equals(theirs.atPose2(X[i]), 1e-8)
    for j in range(2):
        np.testing.assert_allclose(ours.atPoint2(L[j]), theirs.atPoint2(L[j]), atol=1e-8)


def test_a_key_of_another_kind_is_refused_when_the_factor_is_made():
    noise = gtsam.noiseModel.Unit.Create(2)
    with pytest.raises(TypeError, match="takes a Pose2 key"):
        bearing_range.make([VectorKey(gtsam.symbol("q", 0)), gtsam.symbol("l", 0)], noise, 0.0, 1.0)
