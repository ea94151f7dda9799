"""Model files: a YAML description of a chain or tree of hinged rigid bodies.

::

    name: my-chain                 # optional (default: the file name without extension)
    description: two links on hinges about y          # optional, one line
    weight: 1e3                    # optional: calibration's state error weight w (default 1e6)
    parameters:                    # name: value, or name: {value, unit, lower, upper, free, description}
      m1: {value: 0.6, unit: kg, lower: 1e-6, description: link 1 mass}
      l1: {value: 0.3, unit: m, lower: 0}
      J1: {value: 1e-3, unit: kg m^2, lower: 1e-9, free: true}
      ...
      g: 9.81                      # required: gravity along -z [m/s^2]
      eps_lin: 1e-8                # required: compliance of the hinges' translational rows [m/N]
      eps_rot: 1e-6                # required: compliance of the hinges' rotational rows [rad/(N m)]
      tau: 2e-3                    # required: constraint damping (relaxation time) [s]
    links:                         # parents before children
      - {name: link1, joint: q1, parent: null, mass: m1, inertia: [J_perp, J1, J_perp],
         offset: [0, 0, 0], com: r1, axis: y, viscous: b1}
      - {name: link2, joint: q2, parent: link1, mass: m2, inertia: [J_perp, J2, J_perp],
         offset: [0, 0, -l1], com: r2, axis: y}

Each link is one body on one hinge (see :class:`mbfg.models.Link` and
:func:`mbfg.models.hinged_tree`); at zero joint angles every link hangs along
-z (world z is up, gravity ``(0, 0, -g)``):

- ``name`` (required): the body's name; ``joint`` (required): the hinge's name,
  which is also the name of its angle observation [rad] and log column;
- ``parent`` (required): the parent link's name, or ``null`` for the world;
- ``mass`` [kg] and ``inertia`` (principal Jx, Jy, Jz about the CoM [kg m^2]) (required);
- ``com`` (required): distance from the joint down to the CoM [m];
- ``offset`` (default ``[0, 0, 0]``): the joint's position relative to the
  parent's joint (or the world origin) at zero angles [m];
- ``axis`` (default ``y``): the hinge axis at zero angles, ``x``, ``y`` or ``z``;
- ``viscous`` (optional): viscous drag [N m s/rad];
- ``motor`` (optional): the name of a control driving the joint (e.g. ``tau1``);
  it needs the parameters ``K_<joint>`` (torque per unit of control) and
  ``J_s_<joint>`` (shaft inertia [kg m^2], > 0).

Wherever a number goes (``mass``, ``inertia``, ``offset``, ``com``,
``viscous``) a parameter name or a sum of names and numbers such as
``"L_A - r_A"`` or ``-l1`` may stand instead, so the model stays
differentiable in its parameters. Numbers follow YAML 1.2 (``1e-6`` is a
number). Any problem raises :class:`~mbfg.errors.ModelError` naming the file
and the entry, e.g. ``chain.yaml: links[1].parent: unknown link 'link3'``.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mbfg._fields import checked_mapping
from mbfg.errors import ModelError
from mbfg.parameters import Parameter
from mbfg.parts import param_names
from mbfg.rigid.model import DEFAULT_WEIGHT
from mbfg.trees import AXIS_FRAMES, Link, hinged_tree

if TYPE_CHECKING:
    from mbfg.rigid import RigidModel

__all__ = ["load_model_file", "model_from_dict"]

_TOP_KEYS = ("name", "description", "weight", "parameters", "links")
_TOP_REQUIRED = ("parameters", "links")
_LINK_KEYS = ("name", "joint", "parent", "mass", "inertia", "offset", "com", "axis", "viscous", "motor")
_LINK_REQUIRED = ("name", "joint", "parent", "mass", "inertia", "com")
_PARAM_KEYS = ("value", "unit", "lower", "upper", "free", "description")
_REQUIRED_PARAMETERS = {
    "g": "gravitational acceleration [m/s^2]",
    "eps_lin": "compliance of the hinges' translational rows [m/N]",
    "eps_rot": "compliance of the hinges' rotational rows [rad/(N m)]",
    "tau": "constraint damping (relaxation time) [s]",
}
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class _Reader:
    def __init__(self, source: str) -> None:
        self.source = source

    def error(self, entry: str, message: str) -> ModelError:
        return ModelError(f"{self.source}: {entry}: {message}" if entry else f"{self.source}: {message}")

    def mapping(self, value: Any, entry: str, allowed: tuple[str, ...], required: tuple[str, ...]) -> dict[str, Any]:
        return checked_mapping(value, entry, allowed, required, self.error, word="key")

    def text(self, value: Any, entry: str, identifier: bool = False) -> str:
        if not isinstance(value, str) or not value.strip():
            raise self.error(entry, f"expected a name (text), got {value!r}")
        if identifier and not _IDENTIFIER.match(value):
            raise self.error(entry, f"{value!r} is not a valid name (letters, digits and _, not starting with a digit)")
        return value

    def number(self, value: Any, entry: str, allow_inf: bool = False) -> float:
        """A float from a YAML number (or a numeric string such as ``'1e-6'`` or ``'-inf'`` for bounds)."""
        if isinstance(value, bool):
            raise self.error(entry, f"expected a number, got {value!r}")
        if isinstance(value, str):
            try:
                value = float(value.strip())
            except ValueError:
                raise self.error(entry, f"expected a number, got {value!r}") from None
        if not isinstance(value, (int, float)):
            raise self.error(entry, f"expected a number, got {type(value).__name__} {value!r}")
        value = float(value)
        if math.isnan(value) or (math.isinf(value) and not allow_inf):
            raise self.error(entry, f"expected a finite number, got {value!r}")
        return value

    def param_like(self, value: Any, entry: str, parameters: Mapping[str, Parameter]) -> float | str:
        """A number, or an expression of parameter names (each must be defined)."""
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            raise self.error(
                entry, f"expected a number or a parameter expression such as 'l1' or 'L_A - r_A', got {value!r}"
            )
        if isinstance(value, str):
            try:
                number = float(value.strip())
            except ValueError:
                pass
            else:
                value = number
        if not isinstance(value, str):
            return self.number(value, entry)
        try:
            names = param_names(value)
        except ModelError as exc:
            raise self.error(entry, str(exc)) from None
        for name in names:
            if name not in parameters:
                raise self.error(
                    entry, f"{value!r} names unknown parameter {name!r}; parameters: {', '.join(parameters)}"
                )
        return value

    def vec3(self, value: Any, entry: str, parameters: Mapping[str, Parameter]) -> tuple:
        if not isinstance(value, list) or len(value) != 3:
            raise self.error(entry, f"expected a list of 3 entries [x, y, z], got {value!r}")
        return tuple(self.param_like(v, f"{entry}[{i}]", parameters) for i, v in enumerate(value))


def _parameters(reader: _Reader, section: Any) -> dict[str, Parameter]:
    if not isinstance(section, dict) or not section:
        raise reader.error("parameters", f"expected a mapping of parameter names to values, got {section!r}")
    params: dict[str, Parameter] = {}
    for name, spec in section.items():
        entry = f"parameters.{name}"
        if not isinstance(name, str) or not _IDENTIFIER.match(name):
            raise reader.error(entry, "a parameter name must be letters, digits and _, not starting with a digit")
        if isinstance(spec, dict):
            spec = reader.mapping(spec, entry, _PARAM_KEYS, ("value",))
            value = reader.number(spec["value"], f"{entry}.value")
        else:
            value = reader.number(spec, entry)
            spec = {"value": value}
        lower = reader.number(spec.get("lower", -math.inf), f"{entry}.lower", allow_inf=True)
        upper = reader.number(spec.get("upper", math.inf), f"{entry}.upper", allow_inf=True)
        free = spec.get("free", False)
        if not isinstance(free, bool):
            raise reader.error(f"{entry}.free", f"expected true or false, got {free!r}")
        unit = spec.get("unit", "")
        if unit is None:
            unit = ""
        if not isinstance(unit, str):
            raise reader.error(f"{entry}.unit", f"expected the unit as text (e.g. 'kg m^2'), got {unit!r}")
        description = spec.get("description", "")
        if description is None:
            description = ""
        if not isinstance(description, str):
            raise reader.error(f"{entry}.description", f"expected text, got {description!r}")
        try:
            params[name] = Parameter(name, value, unit, lower, upper, free, description=description)
        except ModelError as exc:
            raise reader.error(entry, str(exc)) from None
    for name, what in _REQUIRED_PARAMETERS.items():
        if name not in params:
            raise reader.error(f"parameters.{name}", f"missing required parameter {name!r} ({what})")
    return params


def model_from_dict(doc: Any, name: str, *, source: str | None = None) -> RigidModel:
    """Build a :class:`~mbfg.rigid.RigidModel` from a parsed model document (see the module docstring).

    Args:
        doc: the parsed YAML document.
        name: model name used when the document has no ``name``.
        source: what error messages call the document (default: ``name``).
    """
    reader = _Reader(source or name)
    if doc is None:
        raise reader.error("", "empty document; expected a mapping with 'parameters' and 'links'")
    doc = reader.mapping(doc, "", _TOP_KEYS, _TOP_REQUIRED)
    model_name = reader.text(doc["name"], "name") if "name" in doc else name
    description = doc.get("description", "") or ""
    if not isinstance(description, str):
        raise reader.error("description", f"expected one line of text, got {description!r}")
    weight = reader.number(doc["weight"], "weight") if "weight" in doc else DEFAULT_WEIGHT
    if not weight > 0:
        raise reader.error("weight", f"expected a positive state error weight, got {doc['weight']!r}")
    params = _parameters(reader, doc["parameters"])
    section = doc["links"]
    if not isinstance(section, list) or not section:
        raise reader.error("links", f"expected a non-empty list of links, got {section!r}")
    links: list[Link] = []
    seen_links: dict[str, int] = {}
    seen_joints: dict[str, int] = {}
    for i, item in enumerate(section):
        entry = f"links[{i}]"
        if isinstance(item, dict) and isinstance(item.get("name"), str):
            entry = f"links[{i}] ({item['name']})"
        spec = reader.mapping(item, entry, _LINK_KEYS, _LINK_REQUIRED)
        link_name = reader.text(spec["name"], f"{entry}.name")
        if link_name in seen_links:
            raise reader.error(
                f"{entry}.name", f"link name {link_name!r} is used twice (links[{seen_links[link_name]}])"
            )
        joint = reader.text(spec["joint"], f"{entry}.joint", identifier=True)
        if joint in seen_joints:
            raise reader.error(f"{entry}.joint", f"joint name {joint!r} is used twice (links[{seen_joints[joint]}])")
        if joint in seen_links or joint == link_name:
            raise reader.error(f"{entry}.joint", f"joint name {joint!r} is also a link name; names must be unique")
        parent = spec["parent"]
        if parent is not None:
            parent = reader.text(parent, f"{entry}.parent")
            if parent not in seen_links:
                later = [str(s.get("name")) for s in section[i + 1 :] if isinstance(s, dict)]
                hint = " (list parents before their children)" if parent in later else ""
                known = ", ".join(seen_links) or "none yet"
                raise reader.error(
                    f"{entry}.parent",
                    f"unknown link {parent!r}{hint}; links before this one: {known}; use null for the world",
                )
        axis = spec.get("axis", "y")
        if axis not in AXIS_FRAMES:
            raise reader.error(f"{entry}.axis", f"expected x, y or z, got {axis!r}")
        viscous = spec.get("viscous")
        if viscous is not None:
            viscous = reader.param_like(viscous, f"{entry}.viscous", params)
        motor = spec.get("motor")
        if motor is not None:
            motor = reader.text(motor, f"{entry}.motor", identifier=True)
            for needed, what in ((f"K_{joint}", "torque per unit of control"), (f"J_s_{joint}", "shaft inertia")):
                if needed not in params:
                    raise reader.error(
                        f"{entry}.motor", f"a motor on joint {joint!r} needs the parameter {needed!r} ({what})"
                    )
        links.append(
            Link(
                name=link_name,
                joint=joint,
                parent=parent,
                mass=reader.param_like(spec["mass"], f"{entry}.mass", params),
                inertia=reader.vec3(spec["inertia"], f"{entry}.inertia", params),
                offset=reader.vec3(spec.get("offset", [0.0, 0.0, 0.0]), f"{entry}.offset", params),
                com=reader.param_like(spec["com"], f"{entry}.com", params),
                axis=axis,
                viscous=viscous,
                motor=motor,
            )
        )
        seen_links[link_name] = i
        seen_joints[joint] = i
    try:
        return hinged_tree(model_name, links, list(params.values()), description=description, weight=weight)
    except ModelError as exc:
        raise ModelError(f"{reader.source}: {exc}") from None


def load_model_file(path: str | os.PathLike[str]) -> RigidModel:
    """Load a model file (YAML, see the module docstring) as a :class:`~mbfg.rigid.RigidModel`.

    Raises:
        ModelError: a missing or unreadable file, invalid YAML, or a bad entry
            (the message names the file and the entry).
    """
    from mbfg.mbse_yaml import parse_yaml

    source = os.fspath(path)
    p = Path(source)
    if not p.exists():
        raise ModelError(f"{source}: model file not found")
    if p.is_dir():
        raise ModelError(f"{source}: is a folder; expected a model file (.yaml)")
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ModelError(f"{source}: cannot read the model file ({exc})") from None
    return model_from_dict(parse_yaml(text, source), p.stem, source=source)
