"""The JAX-to-GTSAM adapter (mbfg.adapter) and the Lie operations it relies on (mbfg.lie).

The product's factor types only have Vector variables so far; the test-only
factor types here exercise Rot3 and Pose3 variables through the shared Jacobian
battery. They are registered (explicitly, as the product's are); their names start
with ``test_`` so that the registry-wide battery in ``test_jacobian_battery.py``
leaves them out.
"""

from __future__ import annotations

import gtsam
import numpy as np
import pytest

from mbfg import lie
from mbfg._jax import jax, jnp
from mbfg.adapter import POSE3, REGISTRY, ROT3, VECTOR, FactorType, noise_model
from mbfg.factors import prior_factor, trapezoidal_factor
from mbfg.registry import register

try:  # tests/ on sys.path (pytest's default rootdir-based "prepend" import mode)
    from test_jacobian_battery import check_factor_type
except ImportError:  # tests/ imported as a package
    from tests.test_jacobian_battery import check_factor_type


# ---------------------------------------------------------------------------------
# Test-only factor types with Rot3 and Pose3 variables
# ---------------------------------------------------------------------------------


def _random_rotation(rng: np.random.Generator, max_angle: float = 3.0) -> np.ndarray:
    axis = rng.standard_normal(3)
    angle = rng.uniform(0.05, max_angle)
    return gtsam.Rot3.Expmap(angle * axis / np.linalg.norm(axis)).matrix()


def _random_pose(rng: np.random.Generator) -> np.ndarray:
    T = np.eye(4)
    T[:3, :3] = _random_rotation(rng)
    T[:3, 3] = rng.uniform(-2.0, 2.0, 3)
    return T


def rotate_vector_residual(R, v_body, v_world):
    """R v_body - v_world, (3,)."""
    return R @ v_body - v_world


def point_in_body_residual(T, p_world, p_body):
    """T^-1 p_world - p_body = R^T (p_world - t) - p_body, (3,)."""
    R, t = T[:3, :3], T[:3, 3]
    return R.T @ (p_world - t) - p_body


def mixed_residual(x, R, T, c, d):
    """A nonlinear mix of a Vector (3,), a Rot3 and a Pose3, (5,)."""
    R_T, t_T = T[:3, :3], T[:3, 3]
    y = R_T @ (R @ x) + t_T - c
    z = (R.T @ x)[:2] * x[2] - d
    return jnp.concatenate([y, z])


def rotation_prior_residual(R, R0):
    """Log(R0^T R), (3,) [rad]: the usual rotation prior / between residual."""
    return lie.so3_log(R0.T @ R)


TEST_ROTATE_VECTOR = FactorType(
    "test_rotate_vector",
    rotate_vector_residual,
    (ROT3,),
    example=lambda rng: ((_random_rotation(rng),), (rng.standard_normal(3), rng.standard_normal(3))),
)
TEST_POINT_IN_BODY = FactorType(
    "test_point_in_body",
    point_in_body_residual,
    (POSE3,),
    example=lambda rng: ((_random_pose(rng),), (rng.standard_normal(3), rng.standard_normal(3))),
)
TEST_MIXED = FactorType(
    "test_mixed_vector_rot3_pose3",
    mixed_residual,
    (VECTOR, ROT3, POSE3),
    example=lambda rng: (
        (rng.standard_normal(3), _random_rotation(rng), _random_pose(rng)),
        (rng.standard_normal(3), rng.standard_normal(2)),
    ),
)


def _rotation_prior_example(rng):
    R0 = _random_rotation(rng, max_angle=2.5)
    # R within 0.5 rad of R0, and R0 itself within 2.5 rad of identity, keeps every
    # point of the battery (identity included) below the angle pi where Log is singular.
    R = R0 @ _random_rotation(rng, max_angle=0.5)
    return (R,), (R0,)


TEST_ROTATION_PRIOR = FactorType("test_rotation_prior", rotation_prior_residual, (ROT3,), _rotation_prior_example)

TEST_FACTOR_TYPES = [TEST_ROTATE_VECTOR, TEST_POINT_IN_BODY, TEST_MIXED, TEST_ROTATION_PRIOR]
for _ft in TEST_FACTOR_TYPES:
    register(_ft)


@pytest.mark.parametrize("ft", TEST_FACTOR_TYPES, ids=lambda ft: ft.name)
def test_rot3_and_pose3_factor_types_pass_the_battery(ft):
    check_factor_type(ft, np.random.default_rng(7))


def test_registry_battery_leaves_out_test_only_factor_types():
    try:
        from test_jacobian_battery import PRODUCT_FACTOR_TYPES
    except ImportError:
        from tests.test_jacobian_battery import PRODUCT_FACTOR_TYPES
    assert all(ft.name in REGISTRY for ft in TEST_FACTOR_TYPES)
    assert not any(name.startswith("test_") for name in PRODUCT_FACTOR_TYPES)


def test_battery_catches_a_wrong_jacobian():
    @jax.custom_jvp
    def cube(x):
        return x**3

    @cube.defjvp
    def cube_jvp(primals, tangents):
        (x,), (dx,) = primals, tangents
        return cube(x), 3.0 * x**2 * dx * (1.0 + 1e-4)  # a 1e-4 relative error

    wrong = FactorType(
        "test_wrong_jacobian",
        lambda x, c: cube(x) - c,
        (VECTOR,),
        example=lambda rng: ((rng.uniform(0.5, 2.0, 3),), (rng.standard_normal(3),)),
    )
    with pytest.raises(AssertionError, match="differs from central differences"):
        check_factor_type(wrong, np.random.default_rng(0), n_examples=1)


def test_battery_catches_a_wrong_rot3_jacobian():
    @jax.custom_jvp
    def rotate(R, v):
        return R @ v

    @rotate.defjvp
    def rotate_jvp(primals, tangents):
        (R, v), (_dR, dv) = primals, tangents
        # Drops the dR term: a Jacobian that ignores the rotation.
        return rotate(R, v), R @ dv

    wrong = FactorType(
        "test_wrong_rot3_jacobian",
        lambda R, v, w: rotate(R, v) - w,
        (ROT3,),
        example=lambda rng: ((_random_rotation(rng),), (rng.standard_normal(3), rng.standard_normal(3))),
    )
    with pytest.raises(AssertionError, match=r"variable 0 \(Rot3\)"):
        check_factor_type(wrong, np.random.default_rng(0), n_examples=1)


def test_rotation_prior_at_its_measurement_has_identity_jacobian():
    factor = TEST_ROTATION_PRIOR.make([1], gtsam.noiseModel.Unit.Create(3), np.eye(3))
    values = gtsam.Values()
    values.insert(1, gtsam.Rot3())
    A, b = factor.linearize(values).jacobian()
    np.testing.assert_allclose(b, np.zeros(3), atol=1e-15)
    # d Log(Exp(xi)) / d xi = I at xi = 0.
    np.testing.assert_allclose(A, np.eye(3), atol=1e-12)


# ---------------------------------------------------------------------------------
# Lie operations against GTSAM
# ---------------------------------------------------------------------------------


def _unit(rng, n):
    u = rng.standard_normal(n)
    return u / np.linalg.norm(u)


@pytest.mark.parametrize("angle", [3.0, 1.0, 0.1, 1e-3, 1e-5, 1e-7, 1e-10, 0.0])
def test_so3_exp_equals_gtsam_expmap_and_so3_log_inverts_it(angle):
    rng = np.random.default_rng(int(angle * 1e3) + 11)
    for _ in range(10):
        omega = angle * _unit(rng, 3)
        R = np.asarray(lie.so3_exp(omega))
        R_gtsam = gtsam.Rot3.Expmap(omega).matrix()
        np.testing.assert_allclose(R, R_gtsam, rtol=0, atol=1e-12)
        np.testing.assert_allclose(np.asarray(lie.so3_log(R_gtsam)), omega, rtol=0, atol=1e-12)
        np.testing.assert_allclose(
            np.asarray(lie.so3_log(R_gtsam)), gtsam.Rot3.Logmap(gtsam.Rot3(R_gtsam)), rtol=0, atol=1e-12
        )


def test_hat_is_the_cross_product():
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal(3), rng.standard_normal(3)
    np.testing.assert_allclose(np.asarray(lie.hat(a)) @ b, np.cross(a, b), atol=1e-15)


@pytest.mark.parametrize("seed", range(5))
def test_rot3_retract_agrees_with_gtsam_to_first_order(seed):
    rng = np.random.default_rng(seed)
    R = _random_rotation(rng)
    direction = _unit(rng, 3)
    for size in (1e-1, 1e-2, 1e-3, 1e-4):
        xi = size * direction
        ours = np.asarray(lie.rot3_retract(R, xi))
        theirs = gtsam.Rot3(R).retract(xi).matrix()
        assert np.abs(ours - theirs).max() <= size**2, (size, np.abs(ours - theirs).max())


@pytest.mark.parametrize("seed", range(5))
def test_pose3_retract_agrees_with_gtsam_to_first_order(seed):
    rng = np.random.default_rng(seed)
    T = _random_pose(rng)
    direction = _unit(rng, 6)  # [omega, v]
    for size in (1e-1, 1e-2, 1e-3, 1e-4):
        xi = size * direction
        ours = np.asarray(lie.pose3_retract(T, xi))
        theirs = gtsam.Pose3(T).retract(xi).matrix()
        assert np.abs(ours - theirs).max() <= size**2, (size, np.abs(ours - theirs).max())


def test_pose3_tangent_is_rotation_then_translation():
    T = np.eye(4)
    moved = np.asarray(lie.pose3_retract(T, np.array([0.0, 0.0, 0.0, 1.0, 2.0, 3.0])))
    np.testing.assert_allclose(moved[:3, 3], [1.0, 2.0, 3.0])
    np.testing.assert_allclose(moved[:3, :3], np.eye(3))
    np.testing.assert_allclose(gtsam.Pose3(T).retract(np.array([0.0, 0, 0, 1, 2, 3])).matrix(), moved, atol=1e-15)


# ---------------------------------------------------------------------------------
# Compilation: once per factor type, never per instance
# ---------------------------------------------------------------------------------


def test_residual_is_traced_once_per_factor_type_not_per_instance():
    traces = []

    def counted_residual(x, target, weight):
        traces.append(1)  # runs only while JAX traces the residual
        return weight * (x - target)

    ft = FactorType("test_trace_counter", counted_residual, (VECTOR,))
    rng = np.random.default_rng(0)
    key = gtsam.symbol("x", 0)
    noise = gtsam.noiseModel.Unit.Create(3)

    traces_after_first = None
    for _ in range(20):
        target, weight = rng.standard_normal(3), float(rng.uniform(0.5, 2.0))
        factor = ft.make([key], noise, target, weight)
        values = gtsam.Values()
        x = rng.standard_normal(3)
        values.insert(key, x)
        np.testing.assert_allclose(factor.unwhitenedError(values), weight * (x - target), rtol=1e-14)
        A, b = factor.linearize(values).jacobian()
        np.testing.assert_allclose(A, weight * np.eye(3), rtol=1e-14)
        if traces_after_first is None:
            traces_after_first = len(traces)
    # Error-only program: one trace. Linearization program: the residual at x and the
    # residual under jacfwd, traced once each. The program cache's fingerprint (mbfg._programs):
    # one more; a program loaded from disk is not traced.
    assert 1 <= traces_after_first <= 4
    assert len(traces) == traces_after_first, (
        f"the residual was retraced for new instances: {len(traces)} traces after 20 instances, "
        f"{traces_after_first} after the first"
    )


# ---------------------------------------------------------------------------------
# float64
# ---------------------------------------------------------------------------------


def test_jax_runs_in_float64_after_importing_mbfg():
    assert jnp.zeros(1).dtype == jnp.float64
    assert jax.config.jax_enable_x64


def test_residuals_and_jacobians_are_float64():
    rng = np.random.default_rng(1)
    (R,), (v_body, v_world) = TEST_ROTATE_VECTOR.example(rng)
    r = TEST_ROTATE_VECTOR.error(R, v_body, v_world)
    r_lin, blocks = TEST_ROTATE_VECTOR.linearize(R, v_body, v_world)
    assert r.dtype == np.float64 and r_lin.dtype == np.float64
    assert all(block.dtype == np.float64 for block in blocks)

    # Through GTSAM, with a float32 measurement: the residual is still computed in float64.
    factor = TEST_ROTATE_VECTOR.make([1], gtsam.noiseModel.Unit.Create(3), v_body, v_world.astype(np.float32))
    values = gtsam.Values()
    values.insert(1, gtsam.Rot3(R))
    assert factor.unwhitenedError(values).dtype == np.float64


def test_residuals_keep_float64_precision():
    # 1 + 1e-12 - 1 is 0 in float32 and 1e-12 (to 1e-4 relative) in float64.
    factor = prior_factor(7, np.ones(2), 1.0)
    values = gtsam.Values()
    values.insert(7, np.array([1.0 + 1e-12, 1.0 - 1e-12]))
    np.testing.assert_allclose(factor.unwhitenedError(values), [1e-12, -1e-12], rtol=1e-3)
    A, b = factor.linearize(values).jacobian()
    np.testing.assert_allclose(-b, [1e-12, -1e-12], rtol=1e-3)


# ---------------------------------------------------------------------------------
# Our factors and GTSAM's in one graph
# ---------------------------------------------------------------------------------


def test_our_factors_and_gtsam_factors_solve_together():
    """x0 has a GTSAM prior (a, sa) and one of ours (a', sa'); v0, v1 have our priors;
    x1 only appears in our trapezoidal factor. Closed form: x0 is the weighted mean,
    v0 and v1 their priors, x1 = x0 + dt/2 (v0 + v1)."""
    X = gtsam.symbol_shorthand.X
    V = gtsam.symbol_shorthand.V
    dt, dim = 0.05, 2
    a, sa = np.array([1.0, -2.0]), 0.1
    a2, sa2 = np.array([1.3, -1.6]), 0.2
    b, c = np.array([0.5, 1.5]), np.array([0.7, 1.1])

    graph = gtsam.NonlinearFactorGraph()
    graph.add(gtsam.PriorFactorVector(X(0), a, gtsam.noiseModel.Isotropic.Sigma(dim, sa)))
    graph.add(prior_factor(X(0), a2, sa2))
    graph.add(prior_factor(V(0), b, 0.01))
    graph.add(prior_factor(V(1), c, 0.01))
    graph.add(trapezoidal_factor(X(0), X(1), V(0), V(1), dt, dim, 1e-3))

    initial = gtsam.Values()
    for key in (X(0), X(1), V(0), V(1)):
        initial.insert(key, np.zeros(dim))
    result = gtsam.LevenbergMarquardtOptimizer(graph, initial, gtsam.LevenbergMarquardtParams()).optimize()

    w, w2 = 1 / sa**2, 1 / sa2**2
    x0 = (w * a + w2 * a2) / (w + w2)
    np.testing.assert_allclose(result.atVector(X(0)), x0, atol=1e-9)
    np.testing.assert_allclose(result.atVector(V(0)), b, atol=1e-9)
    np.testing.assert_allclose(result.atVector(V(1)), c, atol=1e-9)
    np.testing.assert_allclose(result.atVector(X(1)), x0 + dt / 2 * (b + c), atol=1e-9)
    # Only the two conflicting priors on x0 leave an error: 0.5 * sum of whitened squares.
    expected_error = 0.5 * (w * np.sum((x0 - a) ** 2) + w2 * np.sum((x0 - a2) ** 2))
    assert graph.error(result) == pytest.approx(expected_error, rel=1e-9)


def test_rot3_factor_in_a_graph_with_a_gtsam_prior_on_the_same_rotation():
    """Our Rot3 factor (R v_body = v_world) plus GTSAM's PriorFactorRot3 on the same key: with a
    measurement consistent with the prior, LM returns the prior's rotation."""
    rng = np.random.default_rng(5)
    R_true = _random_rotation(rng, max_angle=1.0)
    v_body = np.array([1.0, 0.0, 0.0])
    graph = gtsam.NonlinearFactorGraph()
    graph.add(gtsam.PriorFactorRot3(1, gtsam.Rot3(R_true), gtsam.noiseModel.Isotropic.Sigma(3, 0.1)))
    graph.add(TEST_ROTATE_VECTOR.make([1], gtsam.noiseModel.Isotropic.Sigma(3, 0.01), v_body, R_true @ v_body))
    initial = gtsam.Values()
    initial.insert(1, gtsam.Rot3.Expmap(np.array([0.1, -0.2, 0.1])).compose(gtsam.Rot3(R_true)))
    result = gtsam.LevenbergMarquardtOptimizer(graph, initial).optimize()
    np.testing.assert_allclose(result.atRot3(1).matrix(), R_true, atol=1e-8)


# ---------------------------------------------------------------------------------
# Input checks
# ---------------------------------------------------------------------------------


def test_make_rejects_a_wrong_number_of_keys():
    with pytest.raises(ValueError, match="expected 3 keys"):
        TEST_MIXED.make([1, 2], gtsam.noiseModel.Unit.Create(5), np.zeros(3), np.zeros(2))


def test_noise_model_builds_isotropic_and_diagonal_models():
    iso = noise_model(0.5, 3)
    assert iso.dim() == 3
    np.testing.assert_allclose(iso.sigmas(), [0.5, 0.5, 0.5])
    diag = noise_model([0.1, 0.2], 2)
    np.testing.assert_allclose(diag.sigmas(), [0.1, 0.2])
    model = gtsam.noiseModel.Unit.Create(4)
    assert noise_model(model, 4) is model


def test_noise_model_rejects_a_model_of_the_wrong_dimension():
    with pytest.raises(ValueError, match="dimension 3"):
        noise_model(gtsam.noiseModel.Isotropic.Sigma(3, 1.0), 4)


def test_noise_model_rejects_sigmas_of_the_wrong_length():
    with pytest.raises(ValueError):
        noise_model([0.1, 0.2, 0.3], 2)


@pytest.mark.parametrize("sigma", [0.0, -1.0, np.nan, np.inf, [0.1, 0.0], [0.1, -0.2]])
def test_noise_model_rejects_non_positive_or_non_finite_sigmas(sigma):
    with pytest.raises(ValueError, match="sigmas must be finite and > 0"):
        noise_model(sigma, 2)


# ---------------------------------------------------------------------------------
# Batched linearization (FactorType.make_many)
# ---------------------------------------------------------------------------------


def test_make_many_linearizes_like_make_and_follows_changed_values():
    """One vmapped evaluation per group gives the same Jacobians and errors as one call
    per factor, with per-factor constants, and recomputes when the values change."""
    import mbfg.factors  # noqa: F401
    from mbfg.adapter import REGISTRY, PerFactor

    rng = np.random.default_rng(7)
    ft = REGISTRY["partial_prior"]
    n_factors, idx = 6, np.array([4, 1])
    targets = rng.standard_normal((n_factors, 2))
    rows = [[gtsam.symbol("x", i)] for i in range(n_factors)]
    noise = gtsam.noiseModel.Isotropic.Sigma(2, 0.5)
    batched = gtsam.NonlinearFactorGraph()
    single = gtsam.NonlinearFactorGraph()
    for f in ft.make_many(rows, noise, PerFactor(targets), idx):
        batched.add(f)
    for row, target in zip(rows, targets):
        single.add(ft.make(row, noise, target, idx))
    values = gtsam.Values()
    for (key,) in rows:
        values.insert(key, rng.standard_normal(5))
    for _ in range(2):
        A_b, b_b = batched.linearize(values).jacobian()
        A_s, b_s = single.linearize(values).jacobian()
        np.testing.assert_allclose(A_b, A_s, atol=1e-14)
        np.testing.assert_allclose(b_b, b_s, atol=1e-14)
        assert batched.error(values) == pytest.approx(single.error(values), rel=1e-14)
        values.update(rows[3][0], values.atVector(rows[3][0]) + 1.0)


def test_make_many_per_variable_linearizes_the_impulse_factor_like_make():
    """One forward pass per variable (the stream's batched updates) gives the Jacobians of the joint pass."""
    from mbfg import keys
    from mbfg.adapter import PerFactor
    from mbfg.factors._rigid import fixed_values, state_values, variables_for
    from mbfg.factors.impulse import impulse_keys, impulse_type
    from mbfg.testing import example_model, example_step

    model = example_model("pendulum")
    variables = variables_for(model, ())
    ft = impulse_type(variables)
    rng = np.random.default_rng(3)
    values, rows, controls = gtsam.Values(), [], []
    for k in range(3):
        x0, x1, u = example_step(rng, model)
        for j, x in ((2 * k, x0), (2 * k + 1, x1)):
            pose, vel = state_values(model, x)
            values.insert(keys.X(j, 0), gtsam.Pose3(pose))
            values.insert(keys.V(j), vel)
        rows.append(impulse_keys(variables, 2 * k))  # x_{2k} -> x_{2k+1}
        controls.append(u)
    noise = gtsam.noiseModel.Isotropic.Sigma(12, 1e-3)
    batched, single = gtsam.NonlinearFactorGraph(), gtsam.NonlinearFactorGraph()
    for f in ft.make_many(rows, noise, fixed_values(model), PerFactor(np.stack(controls)), 1e-3, per_variable=True):
        batched.add(f)
    for row, u in zip(rows, controls):
        single.add(ft.make(row, noise, fixed_values(model), u, 1e-3))
    A_b, b_b = batched.linearize(values).jacobian()
    A_s, b_s = single.linearize(values).jacobian()
    assert np.abs(A_s).max() > 0
    np.testing.assert_allclose(A_b, A_s, rtol=1e-12, atol=1e-12 * np.abs(A_s).max())
    np.testing.assert_allclose(b_b, b_s, rtol=1e-12, atol=1e-12 * np.abs(b_s).max())


def test_make_many_without_regroup_relinearizes_one_factor_alone():
    """regroup=False (fixed-lag smoothers): the group is evaluated together once; a later evaluation of
    one factor, at values that no longer hold the others' variables (marginalized), is that factor's alone."""
    import mbfg.factors  # noqa: F401
    from mbfg.adapter import REGISTRY, PerFactor

    rng = np.random.default_rng(8)
    ft = REGISTRY["partial_prior"]
    idx = np.array([0, 3])
    targets = rng.standard_normal((4, 2))
    rows = [[gtsam.symbol("x", i)] for i in range(4)]
    noise = gtsam.noiseModel.Isotropic.Sigma(2, 0.5)
    group = ft.make_many(rows, noise, PerFactor(targets), idx, regroup=False)
    values = gtsam.Values()
    for (key,) in rows:
        values.insert(key, rng.standard_normal(5))
    for f in group:
        f.linearize(values)
    later = gtsam.Values()
    later.insert(rows[2][0], rng.standard_normal(5))  # x0, x1, x3 are gone
    alone = ft.make(rows[2], noise, targets[2], idx)
    A_g, b_g = group[2].linearize(later).jacobian()
    A_s, b_s = alone.linearize(later).jacobian()
    np.testing.assert_allclose(A_g, A_s, atol=1e-14)
    np.testing.assert_allclose(b_g, b_s, atol=1e-14)
    assert group[2].error(later) == pytest.approx(alone.error(later), rel=1e-14)


def test_make_many_rejects_per_factor_constants_of_the_wrong_length():
    import mbfg.factors  # noqa: F401
    from mbfg.adapter import REGISTRY, PerFactor

    ft = REGISTRY["partial_prior"]
    with pytest.raises(ValueError, match="leading sizes"):
        ft.make_many([[1], [2]], gtsam.noiseModel.Unit.Create(1), PerFactor(np.zeros((3, 1))), np.array([0]))


def test_a_group_longer_than_a_chunk_is_evaluated_in_padded_chunks_like_one_factor_at_a_time():
    """A group of more than ``CHUNK`` factors runs as several calls of ``CHUNK`` factors, the last one padded
    with copies of the last factor; every factor's residual and Jacobian are those of its own single call."""
    import mbfg.factors  # noqa: F401
    from mbfg.adapter import CHUNK, REGISTRY, PerFactor

    rng = np.random.default_rng(3)
    ft = REGISTRY["partial_prior"]
    n_factors, idx = 2 * CHUNK + 5, np.array([4, 1])  # three calls, the last one padded
    targets = rng.standard_normal((n_factors, 2))
    group = ft.group([[gtsam.symbol("x", i)] for i in range(n_factors)], gtsam.noiseModel.Unit.Create(2),
                     PerFactor(targets), idx)
    xs = (rng.standard_normal((n_factors, 5)),)
    out = group.evaluate(xs, linearize=True)
    errors = group.evaluate(xs, linearize=False)
    assert out.shape == (n_factors, 2, 6)
    for i in (0, CHUNK - 1, CHUNK, 2 * CHUNK, n_factors - 1):
        r, (H,) = ft.linearize(xs[0][i], targets[i], idx)
        np.testing.assert_array_equal(out[i, :, 0], r)
        np.testing.assert_array_equal(out[i, :, 1:], H)
        np.testing.assert_array_equal(errors[i], r)
