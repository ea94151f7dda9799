"""MBSE YAML loader: the reference files, the safe expression evaluator, malformed input."""

from __future__ import annotations

import math
import re
import textwrap
from pathlib import Path

import numpy as np
import pytest

from mbfg.errors import ModelError
from mbfg.mbse_yaml import evaluate_expression, load_mbse_yaml, mechanism_from_mbse_dict
from mbfg.planar import PlanarMechanism

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "mbse"
FILES = ["fourbars1", "fourbars1-with-rel-angle", "pendulum1", "pendulum2", "pendulum3"]


def _load(stem: str) -> PlanarMechanism:
    return load_mbse_yaml(DATA / f"{stem}.yaml")


# --------------------------------------------------------------------------------------
# The reference files
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("stem", FILES)
def test_reference_files_load_assembled(stem: str) -> None:
    mech = _load(stem)
    assert mech.name == stem
    assert np.max(np.abs(mech.phi(mech.q0))) < 1e-12
    M = mech.mass_matrix
    np.testing.assert_allclose(M, M.T, atol=1e-14)


def test_fourbars1() -> None:
    mech = _load("fourbars1")
    assert mech.coordinate_names == ("x1", "y1", "x2", "y2")
    np.testing.assert_allclose(mech.q0, [1.0, 0.0, 1.0, 2.0])
    assert (mech.n, mech.m, mech.dof) == (4, 3, 1)
    assert np.linalg.eigvalsh(mech.mass_matrix).min() > 0  # symmetric positive definite
    # I0 = (1/3) m L^2 and cog at mid-link, with L = 1, 2 and |(1,2)-(4,0)| = sqrt(13).
    lengths = [1.0, 2.0, math.sqrt(13.0)]
    for body, mass, L in zip(mech.bodies, [1.0, 2.0, 4.0], lengths, strict=True):
        assert body.mass == mass
        assert body.I0 == pytest.approx(mass * L**2 / 3)
        assert body.cog == pytest.approx((0.5 * L, 0.0))
    assert mech.bodies[0].length == 1.0 and mech.bodies[1].length == 2.0
    assert mech.points[0].fixed and mech.points[3].fixed and mech.points[3].x == 4.0


def test_fourbars1_with_relative_angle() -> None:
    mech = _load("fourbars1-with-rel-angle")
    assert mech.n == 5
    assert mech.coordinate_names[-1] == "theta1"
    assert mech.q0[4] == 0.0
    assert (mech.m, mech.dof) == (4, 1)
    assert [(r.i, r.j) for r in mech.relative_angles] == [(0, 1)]


def test_pendulum1_uses_deg2rad() -> None:
    mech = _load("pendulum1")
    np.testing.assert_allclose(mech.q0, [math.sqrt(2.0), math.sqrt(2.0)])
    assert (mech.n, mech.m, mech.dof) == (2, 1, 1)


def test_pendulum2_ternary_body_points_are_0_based() -> None:
    mech = _load("pendulum2")
    # x1, y1 in the file are the coordinates of point 1 (0-based): (7, 0).
    r = 5 * math.sqrt(0.5)
    assert (mech.points[2].x, mech.points[2].y) == pytest.approx((7 + r, r))
    assert (mech.points[3].x, mech.points[3].y) == pytest.approx((7 + r, -r))
    assert (mech.points[4].x, mech.points[4].y) == pytest.approx((9 + r, r))
    assert (mech.points[5].x, mech.points[5].y) == pytest.approx((10 + r, -r))
    # 5 free points; bodies of 2, 3, 2, 2 points give 1 + 3 + 1 + 1 constraints.
    assert (mech.n, mech.m, mech.dof) == (10, 6, 4)
    ternary = mech.bodies[1]
    assert ternary.points == (1, 2, 3)
    assert ternary.I0 == pytest.approx(0.5 * 3.0 * 5.0**2)  # (1/2) mass length12^2
    assert np.max(np.abs(mech.phi(mech.q0))) < 1e-12


def test_pendulum3_quaternary_body() -> None:
    mech = _load("pendulum3")
    # 6 free points; bodies of 4, 2, 2, 2 points give 5 + 1 + 1 + 1 constraints.
    assert (mech.n, mech.m, mech.dof) == (12, 8, 4)
    plate = mech.bodies[0]
    assert plate.points == (0, 1, 2, 3)
    assert plate.I0 == pytest.approx(2.0 * 4.0 / 3.0)  # (1/3) mass length12^2
    assert plate.cog == pytest.approx((1.0, 0.5))  # [0.5 length12, 0.5 length14]
    assert (mech.points[6].x, mech.points[6].y) == (0.0, -2.0)
    assert np.max(np.abs(mech.phi(mech.q0))) < 1e-12


def test_dict_entry_point_matches_file() -> None:
    doc = {
        "parameters": {"L": 2, "half": "L/2"},
        "points": [{"x": 0, "y": 0, "fixed": True}, {"x": "L", "y": 0}],
        "planar_bodies": [
            {"points": [0, 1], "length": "auto", "mass": 3, "I0": "mass*length^2/3", "cog": ["half", 0]}
        ],
    }
    mech = mechanism_from_mbse_dict(doc, "bar")
    assert mech.name == "bar"
    assert mech.bodies[0].I0 == pytest.approx(4.0)
    assert mech.bodies[0].cog == (1.0, 0.0)


# --------------------------------------------------------------------------------------
# Expression evaluator
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "variables", "expected"),
    [
        (3, {}, 3.0),
        (2.5, {}, 2.5),
        ("1+2*3", {}, 7.0),
        ("(1+2)*3", {}, 9.0),
        ("(1/3)*mass*length^2", {"mass": 3.0, "length": 2.0}, 4.0),
        ("length^2*mass", {"mass": 3.0, "length": 2.0}, 12.0),  # ^ binds tighter than *
        ("2^3^2", {}, 512.0),  # right associative
        ("2**3", {}, 8.0),
        ("2^-1", {}, 0.5),
        ("-2^2", {}, -4.0),  # -(2^2)
        ("-(-(3))", {}, 3.0),
        ("+4 - -1", {}, 5.0),
        ("((1 + (2 * (3 - 1))) / (5))", {}, 1.0),
        ("deg2rad(180)", {}, math.pi),
        ("rad2deg(pi/2)", {}, 90.0),
        ("2.0*cos(deg2rad(45.0))", {}, math.sqrt(2.0)),
        ("x1+5*cos(45*pi/180)", {"x1": 7.0}, 7.0 + 5 * math.sqrt(0.5)),
        ("sin(pi/6) + tan(0) + exp(0) + log(1)", {}, 1.5),
        ("acos(1) + asin(0) + atan(1)", {}, math.pi / 4),
        ("atan2(1, -1)", {}, 3 * math.pi / 4),
        ("sqrt(16) + abs(-2)", {}, 6.0),
        ("1e-3 * 2", {}, 0.002),
        ("  7  ", {}, 7.0),
        ("1/3", {}, 1 / 3),  # true division
    ],
)
def test_evaluate_expression(expression: str | float, variables: dict[str, float], expected: float) -> None:
    assert evaluate_expression(expression, variables) == pytest.approx(expected, rel=1e-15, abs=1e-15)


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("__import__('os')", "function '__import__' is unknown"),
        ("__import__('os').system('true')", "attribute access"),
        ("x.real", "attribute access"),
        ("().__class__", "attribute access"),
        ("(1).__class__.__bases__", "attribute access"),
        ("open('/etc/passwd')", "function 'open' is unknown"),
        ("[1][0]", "indexing|lists"),
        ("'abc'", "only numbers"),
        ("lambda: 1", "lambda"),
        ("x if x else 1", "if ... else"),
        ("1 < 2", "comparisons"),
        ("2 // 1", "FloorDiv"),
        ("3 % 2", "Mod"),
        ("True", "only numbers"),
        ("1j", "only numbers"),
        ("foo(1)", "function 'foo' is unknown"),
        ("x(1)", "variable, not a function"),
        ("cos(x=1)", "positional"),
        ("atan2(1)", "takes 2 argument"),
        ("cos", "without arguments"),
        ("y", "unknown name 'y'"),
        ("1 +", "syntax error"),
        ("(1", "syntax error"),
        ("1/0", "divides by zero"),
        ("sqrt(-1)", "cannot be evaluated"),
        ("10^10^10", "overflows"),
        ("", "empty"),
    ],
)
def test_evaluate_expression_rejects(expression: str, message: str) -> None:
    with pytest.raises(ModelError, match=message):
        evaluate_expression(expression, {"x": 1.0}, where="here")


@pytest.mark.parametrize("value", [True, None, [1], {"a": 1}, float("nan"), float("inf")])
def test_evaluate_expression_rejects_non_numbers(value: object) -> None:
    with pytest.raises(ModelError, match="^here: "):
        evaluate_expression(value, {}, where="here")  # type: ignore[arg-type]


# --------------------------------------------------------------------------------------
# Malformed files
# --------------------------------------------------------------------------------------

GOOD = """\
%YAML 1.2
---
parameters:
  L: 1.0
points:
  - {x: 0, y: 0, fixed: true}
  - {x: L, y: 0}
  - {x: x1, y: 2*L}
  - {x: 4, y: 0, fixed: true}
planar_bodies:
  - points: [0, 1]
    length: L
    mass: 1.0
    I0: (1/3)*mass*length^2
    cog: [0.5*length, 0.0]
  - points: [1, 2]
    length: auto
    mass: 2.0
    I0: (1/3)*mass*length^2
    cog: [0.5*length, 0.0]
  - points: [2, 3]
    length: auto
    mass: 4.0
    I0: (1/3)*mass*length^2
    cog: [0.5*length, 0.0]
relative_coordinates:
  - type: RelativeAngleAbsoluteDOF
    points: [0, 1]
"""


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "mech.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def _broken(tmp_path: Path, old: str, new: str) -> Path:
    assert old in GOOD
    return _write(tmp_path, GOOD.replace(old, new, 1))


def test_good_template_loads(tmp_path: Path) -> None:
    mech = load_mbse_yaml(_write(tmp_path, GOOD))
    assert mech.name == "mech"
    assert mech.coordinate_names == ("x1", "y1", "x2", "y2", "theta1")
    assert np.max(np.abs(mech.phi(mech.q0))) < 1e-12


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        # missing required fields
        ("  - {x: x1, y: 2*L}", "  - {x: x1}", r"points\[2\]\.y: missing required field 'y'"),
        ("  - {x: L, y: 0}", "  - {y: 0}", r"points\[1\]\.x: missing required field 'x'"),
        ("    mass: 2.0\n", "", r"planar_bodies\[1\]\.mass: missing required field 'mass'"),
        ("    I0: (1/3)*mass*length^2\n    cog: [0.5*length, 0.0]\n  - points: [2, 3]",
         "    cog: [0.5*length, 0.0]\n  - points: [2, 3]", r"planar_bodies\[1\]\.I0: missing required field"),
        ("  - points: [0, 1]\n", "  - pts: [0, 1]\n", r"planar_bodies\[0\]\.pts: unknown field"),
        ("    cog: [0.5*length, 0.0]\nrelative", "relative",
         r"planar_bodies\[2\]\.cog: missing required field"),
        ("  - type: RelativeAngleAbsoluteDOF\n    points: [0, 1]", "  - type: RelativeAngleAbsoluteDOF",
         r"relative_coordinates\[0\]\.points: missing required field"),
        # unknown point index
        ("  - points: [2, 3]", "  - points: [2, 7]",
         r"planar_bodies\[2\]\.points\[1\]: unknown point index 7; points are numbered 0\.\.3"),
        ("    points: [0, 1]\n", "    points: [0, 9]\n",
         r"relative_coordinates\[0\]\.points\[1\]: unknown point index 9"),
        ("  - points: [2, 3]", "  - points: [2, -1]",
         r"planar_bodies\[2\]\.points\[1\]: unknown point index -1"),
        ("  - points: [2, 3]", "  - points: [2, 1.5]",
         r"planar_bodies\[2\]\.points\[1\]: expected an integer point index"),
        # bodies with too few / repeated points
        ("  - points: [1, 2]", "  - points: [1]",
         r"planar_bodies\[1\]\.points: a body needs at least two points, got 1"),
        ("  - points: [1, 2]", "  - points: [1, 1]", r"planar_bodies\[1\]\.points: lists a point twice"),
        ("  - points: [1, 2]", "  - points: 1", r"planar_bodies\[1\]\.points: expected a list"),
        # bad expressions
        ("    mass: 2.0\n", "    mass: 2.0*(1\n", r"planar_bodies\[1\]\.mass: bad expression .*syntax error"),
        ("    I0: (1/3)*mass*length^2\n    cog: [0.5*length, 0.0]\n  - points: [2, 3]",
         "    I0: (1/3)*mas*length^2\n    cog: [0.5*length, 0.0]\n  - points: [2, 3]",
         r"planar_bodies\[1\]\.I0: bad expression .*unknown name 'mas'"),
        ("  - {x: x1, y: 2*L}", "  - {x: x1, y: 2*foo(L)}",
         r"points\[2\]\.y: bad expression .*function 'foo' is unknown"),
        ("  - {x: L, y: 0}", "  - {x: x2, y: 0}", r"points\[1\]\.x: bad expression .*unknown name 'x2'"),
        ("  - {x: L, y: 0}", "  - {x: \"__import__('os')\", y: 0}", r"points\[1\]\.x: bad expression"),
        ("  L: 1.0", "  L: 1.0 +", r"parameters\.L: bad expression"),
        ("    cog: [0.5*length, 0.0]\nrelative", "    cog: [0.5*length, 0.0.0]\nrelative",
         r"planar_bodies\[2\]\.cog\[1\]: bad expression"),
        # wrong types and values
        ("    mass: 2.0\n", "    mass: [2.0]\n",
         r"planar_bodies\[1\]\.mass: expected a number or an expression"),
        ("    mass: 2.0\n", "    mass: -2.0\n", r"planar_bodies\[1\]\.mass: must be > 0 kg"),
        ("    mass: 2.0\n", "    mass: 0\n", r"planar_bodies\[1\]\.mass: must be > 0 kg"),
        ("    length: L\n", "    length: -L\n", r"planar_bodies\[0\]\.length: must be > 0 m"),
        ("    cog: [0.5*length, 0.0]\nrelative", "    cog: [0.5*length]\nrelative",
         r"planar_bodies\[2\]\.cog: expected two coordinates"),
        ("  - {x: 0, y: 0, fixed: true}", "  - {x: 0, y: 0, fixed: maybe}",
         r"points\[0\]\.fixed: expected true or false"),
        ("  - {x: 0, y: 0, fixed: true}", "  - {x: 0, y: 0, fixd: true}", r"points\[0\]\.fixd: unknown field"),
        ("  - {x: 0, y: 0, fixed: true}", "  - [0, 0]", r"points\[0\]: expected a mapping"),
        ("  L: 1.0", "  length: 1.0", r"parameters\.length: 'length' is a reserved name"),
        ("  L: 1.0", "  L: 1.0\n  x1: 2.0", r"parameters\.x1: 'x1' is a reserved name"),
        ("planar_bodies:", "constraints: []\nplanar_bodies:", r"constraints: unknown field"),
        # relative coordinates
        ("  - type: RelativeAngleAbsoluteDOF", "  - type: RelativeAngleDOF",
         r"relative_coordinates\[0\]\.type: unknown relative-coordinate type 'RelativeAngleDOF'"),
        ("    points: [0, 1]\n", "    points: [0, 1, 2]\n", r"relative_coordinates\[0\]\.points: .*exactly two"),
        ("    points: [0, 1]\n", "    points: [1, 1]\n", r"relative_coordinates\[0\]\.points: uses point 1 twice"),
    ],
)
def test_malformed_entry_is_named(tmp_path: Path, old: str, new: str, message: str) -> None:
    path = _broken(tmp_path, old, new)
    with pytest.raises(ModelError, match=re.escape(str(path)) + ": " + message):
        load_mbse_yaml(path)


def test_missing_top_level_section(tmp_path: Path) -> None:
    path = _write(tmp_path, GOOD.split("planar_bodies:")[0])
    with pytest.raises(ModelError, match=re.escape(str(path)) + r": planar_bodies: missing required field"):
        load_mbse_yaml(path)


def test_empty_sections(tmp_path: Path) -> None:
    path = _write(tmp_path, "points: []\nplanar_bodies: []\n")
    with pytest.raises(ModelError, match=r"points: is empty"):
        load_mbse_yaml(path)


def test_coincident_first_points(tmp_path: Path) -> None:
    path = _broken(tmp_path, "  - {x: L, y: 0}", "  - {x: 0, y: 0}")
    with pytest.raises(ModelError, match=r"planar_bodies\[0\]\.points: its first two points 0 and 1 coincide"):
        load_mbse_yaml(path)


def test_file_not_found(tmp_path: Path) -> None:
    path = tmp_path / "nope.yaml"
    with pytest.raises(ModelError, match=re.escape(str(path)) + ": mechanism file not found"):
        load_mbse_yaml(path)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("points: [\n", "not a valid YAML file"),
        ("a: 1\na: 2\n", "duplicate key 'a'"),
        ("", "empty document"),
        ("- 1\n- 2\n", "document: expected a mapping"),
        ("just text\n", "document: expected a mapping"),
    ],
)
def test_not_a_mechanism_yaml(tmp_path: Path, text: str, message: str) -> None:
    path = _write(tmp_path, text)
    with pytest.raises(ModelError, match=re.escape(str(path)) + ": .*" + message):
        load_mbse_yaml(path)


def test_yaml_1_2_scalars(tmp_path: Path) -> None:
    # YAML 1.2 core schema: 010 is decimal ten (1.1: octal 8), 1e1 a float (1.1: a string).
    text = GOOD.replace("  - {x: 4, y: 0, fixed: true}", "  - {x: 010, y: 1e1, fixed: true}")
    mech = load_mbse_yaml(_write(tmp_path, text))
    assert (mech.points[3].x, mech.points[3].y) == (10.0, 10.0)


def test_dict_errors_name_the_mechanism() -> None:
    with pytest.raises(ModelError, match=r"^mymech: points: missing required field"):
        mechanism_from_mbse_dict({"planar_bodies": []}, "mymech")


def test_body_names_and_auto_in_expressions(tmp_path: Path) -> None:
    text = GOOD.replace("    length: auto\n    mass: 2.0", "    length: 1.0*auto\n    mass: 2.0*length + index - 1")
    mech = load_mbse_yaml(_write(tmp_path, text))
    assert mech.bodies[1].length == pytest.approx(2.0)
    assert mech.bodies[1].mass == pytest.approx(4.0)  # 2*2 + 1 - 1
    text = GOOD.replace(
        "    mass: 4.0\n    I0: (1/3)*mass*length^2", "    mass: 4.0\n    I0: mass*length12^2 + 0*length21"
    )
    assert load_mbse_yaml(_write(tmp_path, text)).bodies[2].I0 == pytest.approx(4.0 * 13.0)
