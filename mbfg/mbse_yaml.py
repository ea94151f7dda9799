"""Load planar mechanisms from MBSE YAML files (MBDS/multibody-state-estimation).

Format (``docs/mechanism-definition-yaml.md`` of the MBSE project). Units are SI
throughout: lengths and coordinates in metres, masses in kilograms, inertias in
kg m^2, angles inside expressions in radians (``deg2rad`` converts degrees)::

    %YAML 1.2
    ---
    parameters:             # optional, evaluated in order
      L: 1.0                # [m]
    points:                 # required; x, y [m], optional fixed: true
      - {x: 0, y: 0, fixed: true}
      - {x: L, y: 0}
      - {x: x1, y: 2*L}     # x1, y1: coordinates of point 1 (0-based, earlier points only)
    planar_bodies:          # required
      - points: [0, 1]      # point indices (0-based), two or more
        length: auto        # [m] 2-point bodies: number, expression or auto
        mass: 1.0           # [kg]
        I0: (1/3)*mass*length^2   # [kg m^2] about the first point
        cog: [0.5*length, 0.0]    # [m] in the body frame (x axis: first -> second point)
    relative_coordinates:   # optional
      - {type: RelativeAngleAbsoluteDOF, points: [0, 1]}

Expressions are strings parsed by a small safe evaluator (Python's :mod:`ast`,
never ``eval``): numbers, ``+ - * /``, ``^`` or ``**`` as power, unary
minus, parentheses, names and the functions listed in :data:`FUNCTIONS`, plus
the constant ``pi``. ``^`` is the power operator with Python's ``**``
precedence and right associativity: ``-a^2 = -(a^2)``, ``a^b^c = a^(b^c)``.
Plain YAML numbers are taken as they are.

Names available to expressions (as in MBSE's ``ModelDefinition::FromYAML``):

* ``parameters``: the earlier parameters and ``pi``;
* ``points[k]``: the parameters and ``x0, y0, ..., x{k-1}, y{k-1}``, the
  coordinates of the earlier points, numbered from 0 like the points;
* ``planar_bodies[b]``: the parameters, every point's ``xk, yk``, ``index``
  (= b, 0-based) and, evaluated in this order (as MBSE does):
  ``length`` (in its own expression the name ``auto`` is the distance between
  the body's first two points), then ``mass``, ``I0`` and the two ``cog``
  entries. ``length`` is available to mass, I0 and cog; ``mass`` to I0 and
  cog; ``I0`` to cog. ``lengthIJ`` (e.g. ``length12``, ``length14``) is the
  distance between the body's I-th and J-th point, 1-based within the body.
  For bodies of three or more points ``length`` is ignored in the file (as in
  MBSE) and ``length`` = ``length12``.

Every malformed input raises :class:`mbfg.ModelError` whose message names the
file, the entry (``planar_bodies[1].I0``, ``points[3].x`` ...) and what was
expected.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from mbfg._fields import checked_mapping
from mbfg.errors import ModelError
from mbfg.expressions import BODY_LENGTH_NAME, CONSTANTS, FUNCTIONS, POINT_COORDINATE_NAME, evaluate_expression
from mbfg.limits import MAX_COORDINATE, MAX_PARAMETER
from mbfg.planar import Body, PlanarMechanism, Point, RelativeAngle

__all__ = [
    "CONSTANTS",
    "FUNCTIONS",
    "evaluate_expression",
    "load_mbse_yaml",
    "mechanism_from_mbse_dict",
]

# --------------------------------------------------------------------------------------
# YAML 1.2 loading
# --------------------------------------------------------------------------------------


class _Yaml12Loader(yaml.SafeLoader):
    """SafeLoader with YAML 1.2 core-schema scalars and an error on duplicate keys.

    MBSE files declare ``%YAML 1.2``; PyYAML implements 1.1, where ``yes``/``on``
    are booleans, ``010`` is octal and ``1e3`` is a string. The core schema has
    ``true``/``false`` only, decimal ``010``, ``0o``/``0x`` prefixes and ``1e3``
    as a float.
    """

    def construct_mapping(self, node: yaml.Node, deep: bool = False) -> dict[Any, Any]:
        if isinstance(node, yaml.MappingNode):
            self.flatten_mapping(node)
            seen: set[Any] = set()
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=deep)
                try:
                    duplicate = key in seen
                    seen.add(key)
                except TypeError:
                    continue  # unhashable: the base class reports it
                if duplicate:
                    raise yaml.constructor.ConstructorError(
                        "while constructing a mapping",
                        node.start_mark,
                        f"found duplicate key {key!r}",
                        key_node.start_mark,
                    )
        return super().construct_mapping(node, deep=deep)


_REPLACED_TAGS = {
    "tag:yaml.org,2002:bool",
    "tag:yaml.org,2002:int",
    "tag:yaml.org,2002:float",
    "tag:yaml.org,2002:null",
}
_Yaml12Loader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag not in _REPLACED_TAGS]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_Yaml12Loader.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)
_Yaml12Loader.add_implicit_resolver(
    "tag:yaml.org,2002:null", re.compile(r"^(?:~|null|Null|NULL|)$"), ["~", "n", "N", ""]
)
_Yaml12Loader.add_implicit_resolver(
    "tag:yaml.org,2002:int",
    re.compile(r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$"),
    list("-+0123456789"),
)
_Yaml12Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(
        r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
        r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
    ),
    list("-+0123456789."),
)


def _construct_int12(loader: yaml.SafeLoader, node: yaml.Node) -> int:
    text = str(loader.construct_scalar(node))
    if text[:2] in ("0o", "0x"):
        return int(text, 0)
    return int(text, 10)


_Yaml12Loader.add_constructor("tag:yaml.org,2002:int", _construct_int12)

_YAML_DIRECTIVE = re.compile(r"^%YAML[ \t]+1\.[0-9]+[ \t]*$", re.MULTILINE)


def parse_yaml(text: str, source: str) -> Any:
    # The directive only announces the version; the loader above implements the
    # 1.2 core schema whatever PyYAML thinks of "1.2" (line numbers are kept).
    text = _YAML_DIRECTIVE.sub("%YAML 1.1", text)
    try:
        return yaml.load(text, Loader=_Yaml12Loader)  # noqa: S506 (a SafeLoader subclass)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        at = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        context = f" ({exc.context})" if exc.context else ""
        raise ModelError(f"{source}: not a valid YAML file: {at}{exc.problem}{context}") from None
    except yaml.YAMLError as exc:
        raise ModelError(f"{source}: not a valid YAML file: {exc}") from None


# --------------------------------------------------------------------------------------
# Mechanism construction
# --------------------------------------------------------------------------------------

_TOP_KEYS = ("parameters", "points", "planar_bodies", "relative_coordinates")
_POINT_KEYS = ("x", "y", "fixed")
_BODY_KEYS = ("points", "length", "mass", "I0", "cog", "visual")
_RELATIVE_KEYS = ("type", "points")
_RELATIVE_TYPES = ("RelativeAngleAbsoluteDOF",)
_RESERVED = {"index", "auto", "length", "mass", "I0"}
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class _Builder:
    """Walks an MBSE document, evaluating expressions with the entry names for errors."""

    def __init__(self, doc: Any, name: str, source: str) -> None:
        self.doc = doc
        self.name = name
        self.source = source

    def error(self, entry: str, message: str) -> ModelError:
        return ModelError(f"{self.source}: {entry}: {message}")

    def where(self, entry: str) -> str:
        return f"{self.source}: {entry}"

    def mapping(self, value: Any, entry: str, allowed: tuple[str, ...], required: tuple[str, ...]) -> dict[str, Any]:
        """``value`` as a dict with only ``allowed`` keys and all ``required`` ones (entry "" = top level)."""
        return checked_mapping(value, entry, allowed, required, self.error)

    def sequence(self, value: Any, entry: str, what: str) -> list[Any]:
        if not isinstance(value, list):
            raise self.error(entry, f"expected a list of {what}, got {type(value).__name__} {value!r}")
        return value

    def number(self, value: Any, entry: str, variables: Mapping[str, float], limit: float = MAX_PARAMETER,
               unit: str = "") -> float:
        """The value of ``entry`` (a number or an expression), finite and of magnitude at most ``limit``:
        beyond it the solvers' squares overflow (a mass of 1e300) or float64 cannot resolve the motion."""
        number = evaluate_expression(value, variables, where=self.where(entry))
        if abs(number) > limit:
            raise self.error(entry, f"{number:g}{unit} is beyond +-{limit:g}{unit}; expected a value of a mechanism")
        return number

    def index(self, value: Any, entry: str, variables: Mapping[str, float], n_points: int) -> int:
        """A 0-based point index: an integer (or an expression giving one) in 0..n_points-1."""
        number = self.number(value, entry, variables)
        if not number.is_integer():
            raise self.error(entry, f"expected an integer point index, got {value!r}")
        index = int(number)
        if not 0 <= index < n_points:
            raise self.error(
                entry, f"unknown point index {index}; points are numbered 0..{n_points - 1}"
            )
        return index

    # -- sections ----------------------------------------------------------------------
    def build(self) -> PlanarMechanism:
        if self.doc is None:
            raise ModelError(f"{self.source}: empty document; expected a mapping with 'points' and 'planar_bodies'")
        doc = self.mapping(self.doc, "", _TOP_KEYS, ("points", "planar_bodies"))
        params = self.parameters(doc.get("parameters"))
        points, coords = self.points(doc["points"], params)
        bodies = self.bodies(doc["planar_bodies"], {**params, **coords}, points)
        relative = self.relative(doc.get("relative_coordinates"), {**params, **coords}, len(points))
        try:
            return PlanarMechanism(points, bodies, relative, name=self.name)
        except ModelError as exc:
            if self.source == self.name:
                raise
            raise ModelError(f"{self.source}: {exc}") from None

    def parameters(self, section: Any) -> dict[str, float]:
        if section is None:
            return {}
        if not isinstance(section, dict):
            raise self.error("parameters", f"expected a mapping name -> value, got {type(section).__name__}")
        params: dict[str, float] = {}
        for key, value in section.items():
            entry = f"parameters.{key}"
            if not (isinstance(key, str) and _IDENTIFIER.match(key)):
                raise self.error(entry, f"parameter name must be an identifier, got {key!r}")
            reserved = key in _RESERVED or key in CONSTANTS or key in FUNCTIONS
            if reserved or POINT_COORDINATE_NAME.match(key) or BODY_LENGTH_NAME.match(key):
                raise self.error(
                    entry,
                    f"{key!r} is a reserved name (index, auto, length, mass, I0, lengthIJ, xK, yK, pi and functions)",
                )
            params[key] = self.number(value, entry, params)
        return params

    def points(self, section: Any, params: Mapping[str, float]) -> tuple[list[Point], dict[str, float]]:
        items = self.sequence(section, "points", "points {x: ..., y: ...}")
        if not items:
            raise self.error("points", "is empty; a mechanism needs at least two points")
        coords: dict[str, float] = {}
        points: list[Point] = []
        for k, item in enumerate(items):
            entry = f"points[{k}]"
            spec = self.mapping(item, entry, _POINT_KEYS, ("x", "y"))
            variables = {**params, **coords}
            x = self.number(spec["x"], f"{entry}.x", variables, MAX_COORDINATE, " m")
            y = self.number(spec["y"], f"{entry}.y", variables, MAX_COORDINATE, " m")
            fixed = spec.get("fixed", False)
            if not isinstance(fixed, bool):
                raise self.error(f"{entry}.fixed", f"expected true or false, got {fixed!r}")
            points.append(Point(x, y, fixed))
            coords[f"x{k}"] = x
            coords[f"y{k}"] = y
        return points, coords

    def bodies(self, section: Any, variables: Mapping[str, float], points: list[Point]) -> list[Body]:
        items = self.sequence(section, "planar_bodies", "bodies")
        if not items:
            raise self.error("planar_bodies", "is empty; a mechanism needs at least one body")
        return [self.body(item, b, variables, points) for b, item in enumerate(items)]

    def body(self, item: Any, b: int, variables: Mapping[str, float], points: list[Point]) -> Body:
        entry = f"planar_bodies[{b}]"
        spec = self.mapping(item, entry, _BODY_KEYS, ("points", "mass", "I0", "cog"))
        raw_points = self.sequence(spec["points"], f"{entry}.points", "point indices")
        if len(raw_points) < 2:
            raise self.error(
                f"{entry}.points", f"a body needs at least two points, got {len(raw_points)}: {raw_points!r}"
            )
        idx = [
            self.index(p, f"{entry}.points[{k}]", variables, len(points)) for k, p in enumerate(raw_points)
        ]
        if len(set(idx)) != len(idx):
            raise self.error(f"{entry}.points", f"lists a point twice: {idx}")

        env: dict[str, float] = {**variables, "index": float(b)}
        for i, pi in enumerate(idx):
            for j, pj in enumerate(idx):
                if i != j:
                    env[f"length{i + 1}{j + 1}"] = math.hypot(points[pj].x - points[pi].x, points[pj].y - points[pi].y)
        distance = env["length12"]

        body_length: float | None = None
        if len(idx) == 2:
            raw_length = spec.get("length", "auto")
            if isinstance(raw_length, str) and raw_length.strip() == "auto":
                length = distance
            else:
                length = self.number(raw_length, f"{entry}.length", {**env, "auto": distance})
                body_length = length
            if not length > 0:
                raise self.error(f"{entry}.length", f"must be > 0 m, got {length} (points {idx[0]} and {idx[1]})")
        else:
            length = distance  # MBSE: 'length' is ignored for bodies of 3+ points
        if not distance > 0:
            raise self.error(
                f"{entry}.points", f"its first two points {idx[0]} and {idx[1]} coincide; the body frame is undefined"
            )
        env["length"] = length

        mass = self.number(spec["mass"], f"{entry}.mass", env)
        if not mass > 0:
            raise self.error(f"{entry}.mass", f"must be > 0 kg, got {mass}")
        env["mass"] = mass
        inertia = self.number(spec["I0"], f"{entry}.I0", env)
        if not inertia > 0:
            raise self.error(f"{entry}.I0", f"must be > 0 kg m^2, got {inertia}")
        env["I0"] = inertia
        cog = self.sequence(spec["cog"], f"{entry}.cog", "two coordinates [a, b] in metres")
        if len(cog) != 2:
            raise self.error(f"{entry}.cog", f"expected two coordinates [a, b] in metres, got {cog!r}")
        a = self.number(cog[0], f"{entry}.cog[0]", env)
        c = self.number(cog[1], f"{entry}.cog[1]", env)
        return Body(points=tuple(idx), mass=mass, I0=inertia, cog=(a, c), length=body_length)

    def relative(self, section: Any, variables: Mapping[str, float], n_points: int) -> list[RelativeAngle]:
        if section is None:
            return []
        items = self.sequence(section, "relative_coordinates", "relative coordinates {type: ..., points: [i, j]}")
        result: list[RelativeAngle] = []
        for r, item in enumerate(items):
            entry = f"relative_coordinates[{r}]"
            spec = self.mapping(item, entry, _RELATIVE_KEYS, _RELATIVE_KEYS)
            kind = spec["type"]
            if kind not in _RELATIVE_TYPES:
                raise self.error(
                    f"{entry}.type",
                    f"unknown relative-coordinate type {kind!r}; supported: {', '.join(_RELATIVE_TYPES)}",
                )
            pts = self.sequence(spec["points"], f"{entry}.points", "two point indices [i, j]")
            if len(pts) != 2:
                raise self.error(f"{entry}.points", f"{kind} needs exactly two point indices [i, j], got {pts!r}")
            i, j = (self.index(p, f"{entry}.points[{k}]", variables, n_points) for k, p in enumerate(pts))
            if i == j:
                raise self.error(f"{entry}.points", f"uses point {i} twice; expected two different points")
            result.append(RelativeAngle(i, j))
        return result


def mechanism_from_mbse_dict(doc: dict[str, Any], name: str, *, source: str | None = None) -> PlanarMechanism:
    """Build a :class:`PlanarMechanism` from a parsed MBSE YAML document.

    Args:
        doc: the document as a dict (``parameters``, ``points``,
            ``planar_bodies``, ``relative_coordinates``; see the module
            docstring). Coordinates and lengths in metres, masses in kg,
            inertias in kg m^2.
        name: the mechanism's name.
        source: what error messages name first (a file path); default ``name``.

    Raises:
        ModelError: naming the source and the entry for every malformed input.
    """
    return _Builder(doc, name, name if source is None else source).build()


def load_mbse_yaml(path: str | os.PathLike[str], name: str | None = None) -> PlanarMechanism:
    """Load an MBSE mechanism YAML file (units: m, kg, kg m^2, rad).

    Args:
        path: the ``.yaml`` file.
        name: the mechanism's name; default the file name without extension.

    Raises:
        ModelError: naming the file when it cannot be read, is not YAML, or has a
            malformed entry (the entry is named too, e.g. ``planar_bodies[1].I0``).
    """
    file = Path(path)
    source = str(path)
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ModelError(f"{source}: mechanism file not found") from None
    except UnicodeDecodeError:
        raise ModelError(f"{source}: not a text (UTF-8) YAML file") from None
    except OSError as exc:
        raise ModelError(f"{source}: cannot read mechanism file ({exc.strerror or exc})") from None
    doc = parse_yaml(text, source)
    return mechanism_from_mbse_dict(doc, file.stem if name is None else name, source=source)
