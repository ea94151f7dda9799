"""Declaring a factor type: typed keys, the ``@factor_type`` decorator, explicit registration.

* keys that know their variable's kind (``mbfg.keys``), refused by ``make`` / ``make_many``
  at a variable of another kind, with a message naming the factor type and the argument;
* a factor type declared in one place with the decorator, as in a user's own code, through
  the Jacobian battery and in a small graph mixed with GTSAM's factors, solved by LM;
* registration for the battery only by an explicit ``register``;
* the example of the how-to guide's section "Declare a factor type" (docs/how-to/custom-factor.md), run as written.

``python tests/test_factor_declaration.py`` times the key handling of ``make`` / ``group``
against the ``int()`` per key it replaced (see :func:`time_key_handling`).
"""

from __future__ import annotations

import re
import timeit
from pathlib import Path

import gtsam
import numpy as np
import pytest

from mbfg import keys
from mbfg._jax import jax
from mbfg.adapter import POSE3, REGISTRY, ROT3, VECTOR, FactorType, Key, PerFactor, Pose3Key, VectorKey
from mbfg.factor_type import Pose3Var, Rot3Var, VectorVar, factor_type, kinds_from_annotations
from mbfg.factors import euler_factor, prior_factor
from mbfg.factors.integrators import EULER, TRAPEZOIDAL
from mbfg.registry import Registry, register

try:  # tests/ on sys.path (pytest's default rootdir-based "prepend" import mode)
    from test_jacobian_battery import check_factor_type
except ImportError:  # tests/ imported as a package
    from tests.test_jacobian_battery import check_factor_type

ROOT = Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------------------------
# A factor type declared in one place, as in a user's own code
# ---------------------------------------------------------------------------------


def _landmark_example(rng: np.random.Generator) -> tuple[tuple, tuple]:
    pose = gtsam.Pose3(gtsam.Rot3.Expmap(rng.normal(size=3)), rng.normal(size=3)).matrix()
    return (pose, rng.normal(size=3)), (rng.normal(size=3),)


@register  # "test_" keeps it out of the registry-wide battery of the product's types
@factor_type(name="test_landmark_in_body", example=_landmark_example)
def landmark_in_body(T: Pose3Var, landmark: VectorVar, z: jax.Array) -> jax.Array:
    """The landmark (3,) [m] seen from the body at pose T (4, 4), minus the measurement z (3,) [m]."""
    R, t = T[:3, :3], T[:3, 3]
    return R.T @ (landmark - t) - z


def L(j: int) -> int:
    """A user's own letter for landmarks, typed like mbfg's keys."""
    return VectorKey(gtsam.symbol("l", j))


def test_the_decorator_reads_the_variable_kinds_from_the_annotations():
    assert isinstance(landmark_in_body, FactorType)
    assert landmark_in_body.kinds == (POSE3, VECTOR)
    assert landmark_in_body.residual.__name__ == "landmark_in_body"
    assert EULER.kinds == (VECTOR,) * 3 and TRAPEZOIDAL.kinds == (VECTOR,) * 4


def test_a_declared_factor_type_passes_the_jacobian_battery():
    assert REGISTRY["test_landmark_in_body"] is landmark_in_body
    check_factor_type(landmark_in_body, np.random.default_rng(3))


def test_a_declared_factor_type_in_a_graph_with_gtsam_factors_is_solved_by_lm():
    rng = np.random.default_rng(11)
    poses = [gtsam.Pose3(gtsam.Rot3.Yaw(0.3 * k), np.array([k, 0.2 * k, 0.0])) for k in range(4)]
    marks = [np.array([2.0, 1.0, 0.5]), np.array([-1.0, 2.0, 1.0])]
    graph, values = gtsam.NonlinearFactorGraph(), gtsam.Values()
    graph.add(gtsam.PriorFactorPose3(keys.X(0, 0), poses[0], gtsam.noiseModel.Isotropic.Sigma(6, 1e-4)))
    odometry = gtsam.noiseModel.Isotropic.Sigma(6, 1e-2)
    seen = gtsam.noiseModel.Isotropic.Sigma(3, 1e-2)
    for k, pose in enumerate(poses):
        if k:
            graph.add(gtsam.BetweenFactorPose3(keys.X(k - 1, 0), keys.X(k, 0), poses[k - 1].between(pose), odometry))
        for j, mark in enumerate(marks):
            graph.add(landmark_in_body.make([keys.X(k, 0), L(j)], seen, pose.transformTo(mark)))
        values.insert(keys.X(k, 0), pose.retract(0.1 * rng.normal(size=6)))
    for j, mark in enumerate(marks):
        values.insert(L(j), mark + 0.3 * rng.normal(size=3))
    graph.add(prior_factor(L(0), marks[0], 1.0))  # one of mbfg's own factors in the same graph

    result = gtsam.LevenbergMarquardtOptimizer(graph, values).optimize()

    assert graph.error(result) < 1e-12
    for k, pose in enumerate(poses):
        assert result.atPose3(keys.X(k, 0)).equals(pose, 1e-6)
    for j, mark in enumerate(marks):
        np.testing.assert_allclose(result.atVector(L(j)), mark, atol=1e-6)


# ---------------------------------------------------------------------------------
# Typed keys
# ---------------------------------------------------------------------------------


def _labeled(letter: str, index: int) -> int:
    """GTSAM's own LabeledSymbol key (GTSAM's multi-robot layout) with mbfg's label 'm'."""
    return gtsam.LabeledSymbol(ord(letter), ord("m"), index).key()


def test_keys_are_gtsam_labeled_symbols_that_know_their_variable_kind():
    for make, letter, kind in ((keys.Q, "q", VECTOR), (keys.V, "v", VECTOR), (keys.A, "a", VECTOR),
                               (keys.Z, "z", VECTOR), (keys.ZD, "w", VECTOR), (keys.ZDD, "u", VECTOR),
                               (keys.F, "f", VECTOR), (keys.P, "p", VECTOR), (keys.T, "t", ROT3),
                               (keys.C, "c", VECTOR)):
        key = make(7)
        assert key == _labeled(letter, 7) and isinstance(key, int) and key.kind is kind
    x = keys.X(3, 2)
    assert x == _labeled("x", 3 * keys.BODY_STRIDE + 2) and isinstance(x, Pose3Key) and x.kind is POSE3
    assert type(x + 1) is int and str(x) == str(int(x)) and hash(x) == hash(int(x))
    # mbfg's keys never collide with a user's own plain symbols (gtsam.symbol_shorthand), whatever the index.
    for letter in "qvazwufptcx":
        for k in (0, 7, 302, 10**9):
            assert gtsam.symbol(letter, k) not in {keys.Q(k), keys.V(k), keys.X(k // keys.BODY_STRIDE,
                                                                            k % keys.BODY_STRIDE), keys.P(k)}
    assert keys.describe(keys.X(3, 2)) == "x3,2 (rigid body 2 pose at step 3)"
    assert keys.describe(keys.Q(17)) == "q17 (dependent coordinates)"
    assert "not an mbfg key" in keys.describe(gtsam.symbol("x", 3))
    # The arithmetic keys of the stream stay plain ints, equal to the typed ones.
    assert keys.rigid_state(3, 2) == [keys.X(3, 0), keys.X(3, 1), keys.V(3)]
    assert all(type(k) is int for k in keys.rigid_state(3, 2))
    with pytest.raises(ValueError, match="time-step index must be >= 0"):
        keys.Q(-1)


def test_typed_keys_work_wherever_gtsam_takes_a_key():
    values = gtsam.Values()
    values.insert(keys.X(0, 0), gtsam.Pose3())
    values.insert(keys.V(0), np.zeros(2))
    values.insert(keys.T(), gtsam.Rot3())
    assert values.exists(keys.X(0, 0)) and values.atVector(keys.V(0)).shape == (2,)
    graph = gtsam.NonlinearFactorGraph()
    graph.add(gtsam.PriorFactorVector(keys.V(0), np.ones(2), gtsam.noiseModel.Unit.Create(2)))
    graph.add(prior_factor(keys.V(0), np.ones(2), 1.0))
    assert set(graph.keyVector()) == {keys.V(0)}
    assert np.allclose(gtsam.LevenbergMarquardtOptimizer(graph, values).optimize().atVector(keys.V(0)), 1.0)


def test_a_key_of_the_wrong_kind_is_refused_naming_the_factor_and_the_argument():
    with pytest.raises(TypeError) as info:
        euler_factor(keys.Q(0), keys.Q(1), keys.X(0, 1), 1e-3, 2, 1.0)
    message = str(info.value)
    assert "'euler_integrator'" in message and "variable 2 ('xdot_t')" in message
    assert "takes a Vector key" in message and "a Pose3 key" in message and "x0,1" in message

    with pytest.raises(TypeError, match=r"'test_landmark_in_body': variable 1 \('landmark'\) takes a Vector key, "
                                        r"got t0 \(gravity tilt\), a Rot3 key"):
        landmark_in_body.make([keys.X(0, 0), keys.T()], gtsam.noiseModel.Unit.Create(3), np.zeros(3))


def test_make_many_names_the_factor_whose_key_is_of_the_wrong_kind():
    rows = [[keys.Q(0), keys.Q(1), keys.V(0)], [keys.Q(1), keys.Q(2), keys.T()]]
    with pytest.raises(TypeError, match=r"'euler_integrator': factor 1, variable 2 \('xdot_t'\) takes a Vector key"):
        EULER.make_many(rows, gtsam.noiseModel.Unit.Create(1), PerFactor(np.full(2, 1e-3)))


def test_plain_ints_and_mixed_rows_are_taken_without_a_kind_to_check():
    noise = gtsam.noiseModel.Unit.Create(1)
    plain = [_labeled("q", 0), _labeled("q", 1), _labeled("v", 0)]
    mixed = [keys.Q(0), int(keys.Q(1)), np.int64(keys.V(0))]
    for row in (plain, mixed, [keys.Q(0), keys.Q(1), keys.V(0)]):
        factor = EULER.make(row, noise, 1e-3)
        assert list(factor.keys()) == plain
        group = EULER.group([row, row], noise, 1e-3)
        assert group.keys == [plain, plain]
        assert all(isinstance(k, int) for k in group.keys[0])
    assert [type(k) for k in EULER.group([mixed], noise, 1e-3).keys[0]] == [int] * 3  # NumPy's made ints
    # Any integer is a key to GTSAM: a pose key where a Vector is expected passes when it is a plain int.
    EULER.make([int(keys.X(0, 0)), keys.Q(1), keys.V(0)], noise, 1e-3)


def test_impulse_keys_line_up_with_the_impulse_types_variable_kinds():
    from mbfg.factors._rigid import variables_for
    from mbfg.factors.impulse import impulse_keys, impulse_type
    from mbfg.testing import example_model

    variables = variables_for(example_model("furuta"), ("K", "J_Az", "tilt"))
    row = impulse_keys(variables, 4)
    assert [k.kind for k in row if isinstance(k, Key)] == list(impulse_type(variables).kinds)
    impulse_type(variables)._plain_rows([row])  # checked, and accepted
    swapped = [row[0], row[2], row[1], *row[3:]]  # the velocity before the second body's pose
    with pytest.raises(TypeError, match=r"variable 1 takes a Pose3 key, got v4 \(dependent velocities\), a Vector"):
        impulse_type(variables).make(swapped, gtsam.noiseModel.Unit.Create(24))  # an *args residual: no name


# ---------------------------------------------------------------------------------
# The decorator
# ---------------------------------------------------------------------------------


def test_explicit_kinds_serve_a_residual_without_annotations_and_must_agree_with_them():
    def summed(*args):
        return args[0] + args[1]

    ft = factor_type(summed, name="test_summed", kinds=(VECTOR, VECTOR))
    assert ft.kinds == (VECTOR, VECTOR) and "test_summed" not in REGISTRY  # built, not registered
    np.testing.assert_allclose(ft.error(np.ones(2), np.ones(2)), [2.0, 2.0])
    with pytest.raises(TypeError, match=r"kinds=\['Vector'\] but the annotations say \['Rot3'\]"):
        factor_type(name="test_disagree", kinds=(VECTOR,))(_rot3_residual)


def _rot3_residual(R: Rot3Var, v: jax.Array) -> jax.Array:
    return R @ v


def test_the_decorator_refuses_residuals_it_cannot_read():
    def no_variables(x: jax.Array) -> jax.Array:
        return x

    with pytest.raises(TypeError, match="no parameter is annotated as a variable"):
        factor_type(name="test_none")(no_variables)
    with pytest.raises(TypeError, match=r"variables come before constants, but \['x'\] follow the constant 'c'"):
        kinds_from_annotations(_late_variable)


def _late_variable(c: jax.Array, x: VectorVar) -> jax.Array:
    return x - c


# ---------------------------------------------------------------------------------
# Registration
# ---------------------------------------------------------------------------------


def test_a_residual_that_returns_a_scalar_is_refused_naming_the_factor_type():
    """GTSAM takes a residual vector (m,); a scalar would fail inside pybind without a name."""

    @factor_type(name="test_scalar_residual")
    def scalar(x: VectorVar, c: jax.Array) -> jax.Array:
        return x.sum() - c

    key, values = keys.Q(0), gtsam.Values()
    values.insert(key, np.zeros(2))
    single = scalar.make([key], gtsam.noiseModel.Unit.Create(1), 1.0)
    group = scalar.make_many([[key]], gtsam.noiseModel.Unit.Create(1), 1.0)
    graph = gtsam.NonlinearFactorGraph()
    graph.add(single)
    for evaluate in (lambda: single.error(values), lambda: graph.linearize(values), lambda: group[0].error(values)):
        with pytest.raises(TypeError, match=r"factor type 'test_scalar_residual': its residual must return a 1-D "
                                            r"array of shape \(m,\), got shape \(\)"):
            evaluate()


def test_registration_is_explicit_needs_an_example_and_refuses_a_second_declaration_of_a_name():
    registry = Registry()
    ft = FactorType("prior", lambda x, x0: x - x0, (VECTOR,))
    assert "prior" not in registry
    with pytest.raises(ValueError, match="needs example"):
        registry.register(ft)
    registry.register(REGISTRY["prior"])
    with pytest.raises(ValueError, match=r"'prior' is already registered with residual prior\.prior_residual"):
        registry.register(ft.with_example(REGISTRY["prior"].example))
    # The same declaration again (a reloaded module, a notebook cell run twice) replaces the entry.
    again = REGISTRY["prior"].with_example(REGISTRY["prior"].example)
    assert registry.register(again) is again and registry["prior"] is again and list(registry) == ["prior"]


def test_with_example_copies_the_type_and_leaves_it_unchanged():
    ft = FactorType("test_copy", lambda x: 2.0 * x, (VECTOR,))
    copy = ft.with_example(lambda rng: ((rng.normal(size=2),), ()))
    assert ft.example is None and copy.example is not None and copy.kinds == ft.kinds and copy.name == ft.name


# ---------------------------------------------------------------------------------
# The how-to guide's example
# ---------------------------------------------------------------------------------


def test_the_how_to_example_of_a_custom_factor_runs(capsys):
    readme = (ROOT / "docs" / "how-to" / "custom-factor.md").read_text()
    section = readme[readme.index("## Declare a factor type\n"):]
    section = section[: section.index("\n## ", 1)]
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    assert len(blocks) == 1
    # tests/test_readme.py's module name: both runs in one process are the same declaration of
    # "encoder_gain_offset" to the registry (the second replaces the first).
    namespace: dict = {"__name__": "__readme__"}
    exec(compile(blocks[0], "README.md", "exec"), namespace)
    out = capsys.readouterr().out
    assert re.search(r"gain 1\.0\d+ \+- 0\.0\d+, offset 0\.0\d+ \+- 0\.0\d+ rad", out)
    assert "factor type 'encoder_gain_offset': variable 0 ('q') takes a Vector key, got x0,0" in out
    encoder = namespace["encoder"]
    assert REGISTRY["encoder_gain_offset"] is encoder
    check_factor_type(encoder, np.random.default_rng(5))


# ---------------------------------------------------------------------------------
# What the kind check costs (run this file)
# ---------------------------------------------------------------------------------


def time_key_handling(rows: int = 20, repeat: int = 15) -> dict[str, tuple[float, float]]:
    """Seconds per call, (before, now), of turning ``rows`` rows of 7 keys (a stream update's impulse rows of a
    two-body model with free parameters) into plain ints: before, ``int()`` per key with no check; now,
    :meth:`FactorType._plain_rows` with its check; and of building one typed pose key (``keys.X``) against the
    plain one it replaced. Interleaved in one process, best of ``repeat``."""
    ft = FactorType("test_timing", lambda *xs: xs[2], (POSE3, POSE3, VECTOR, POSE3, POSE3, VECTOR, VECTOR))
    plain = [keys.rigid_state(k, 2) + keys.rigid_state(k + 1, 2) + [int(keys.P())] for k in range(rows)]
    typed = [[keys.X(k, 0), keys.X(k, 1), keys.V(k), keys.X(k + 1, 0), keys.X(k + 1, 1), keys.V(k + 1), keys.P()]
             for k in range(rows)]
    cases = {"plain int keys": plain, "typed keys": typed}
    out = {}
    for name, data in cases.items():
        before = now = np.inf
        for _ in range(repeat):
            before = min(before, min(timeit.repeat(lambda d=data: [[int(k) for k in r] for r in d],
                                                   number=200, repeat=3)) / 200)
            now = min(now, min(timeit.repeat(lambda d=data: ft._plain_rows(d, 0), number=200, repeat=3)) / 200)
        out[name] = (before, now)

    def x_before(k: int, i: int) -> int:  # keys.X as it was: checks, then gtsam.symbol, a plain int
        if not 0 <= i < keys.BODY_STRIDE or k < 0:
            raise ValueError(k, i)
        return _labeled("x", k * keys.BODY_STRIDE + i)

    before = now = np.inf
    for _ in range(repeat):
        before = min(before, min(timeit.repeat(lambda: x_before(5, 1), number=20000, repeat=3)) / 20000)
        now = min(now, min(timeit.repeat(lambda: keys.X(5, 1), number=20000, repeat=3)) / 20000)
    out["keys.X(5, 1)"] = (before, now)
    return out


if __name__ == "__main__":
    for name, (before, now) in time_key_handling().items():
        print(f"{name:24s} before {before * 1e6:8.2f} us   now {now * 1e6:8.2f} us")
