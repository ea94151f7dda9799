"""Named model parameters with units, defaults, bounds and a free/fixed flag.

A :class:`ParameterSet` is what a model's JAX functions read: ``params.arrays()``
is a dict ``name -> jnp array`` (a scalar, or a (3, 3) rotation matrix for a
rotation parameter such as the gravity tilt), a pytree, so changing a value
never recompiles anything. The bounds are the box B of seed 000 section 3.1
(the parameter space excludes non-physical values); calibration keeps free
parameters inside it.

Parameter files (``--params FILE``) are YAML (1.2: ``1e-4`` is a number) or JSON mappings, either
``name: value`` or ``name: {value: .., lower: .., upper: .., free: ..}``; a
rotation's value is a 3x3 matrix (list of rows) or a rotation vector [rad].
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from mbfg._jax import jnp
from mbfg.errors import ModelError

SCALAR = "scalar"
ROTATION = "rotation"


@dataclass(frozen=True)
class Parameter:
    """One named parameter.

    Args:
        name: identifier used in models, files and results, e.g. ``"J_Az"``.
        default: value [unit]: a float, or a (3, 3) rotation matrix for ``kind="rotation"``.
        unit: SI unit as text, e.g. ``"kg m^2"``; ``""`` for dimensionless.
        lower, upper: the box B of admissible values (scalars only).
        free: estimated by calibration (True) or held fixed.
        kind: ``"scalar"`` or ``"rotation"`` (a Rot3 variable in a factor graph).
        description: one line for ``mbfg models``.
    """

    name: str
    default: Any
    unit: str = ""
    lower: float = -math.inf
    upper: float = math.inf
    free: bool = False
    kind: str = SCALAR
    description: str = ""

    def __post_init__(self) -> None:
        if self.kind not in (SCALAR, ROTATION):
            raise ModelError(f"parameter {self.name!r}: kind must be 'scalar' or 'rotation', got {self.kind!r}")
        if self.kind == ROTATION:
            object.__setattr__(self, "default", _rotation_value(self.name, self.default))
            return
        if not (isinstance(self.default, (int, float, np.floating)) and math.isfinite(float(self.default))):
            raise ModelError(f"parameter {self.name!r}: value must be a finite number, got {self.default!r}")
        object.__setattr__(self, "default", float(self.default))
        if self.lower > self.upper:
            raise ModelError(
                f"parameter {self.name!r}: lower bound {self.lower} is above the upper bound {self.upper}"
            )
        if not self.lower <= self.default <= self.upper:
            raise ModelError(
                f"parameter {self.name!r}: value {self.default} [{self.unit}] is outside its bounds "
                f"[{self.lower}, {self.upper}]"
            )


def _rotation_value(name: str, value: Any) -> np.ndarray:
    """A (3, 3) rotation matrix from a matrix or a rotation vector; ModelError otherwise."""
    arr = np.asarray(value, dtype=float)
    if arr.shape == (3,):
        from scipy.spatial.transform import Rotation

        arr = Rotation.from_rotvec(arr).as_matrix()
    if arr.shape != (3, 3) or not np.all(np.isfinite(arr)):
        raise ModelError(f"parameter {name!r}: expected a 3x3 rotation matrix or a rotation vector, got {value!r}")
    if np.abs(arr @ arr.T - np.eye(3)).max() > 1e-6 or np.linalg.det(arr) < 0:
        raise ModelError(f"parameter {name!r}: the matrix is not a rotation (R R^T != I or det R < 0)")
    return arr


class ParameterSet(Mapping[str, Parameter]):
    """An ordered, immutable collection of :class:`Parameter` by name."""

    def __init__(self, parameters: Iterable[Parameter]) -> None:
        self._params: dict[str, Parameter] = {}
        for p in parameters:
            if p.name in self._params:
                raise ModelError(f"parameter {p.name!r} is defined twice")
            self._params[p.name] = p

    def __getitem__(self, name: str) -> Parameter:
        try:
            return self._params[name]
        except KeyError:
            raise ModelError(f"unknown parameter {name!r}; known parameters: {', '.join(self._params)}") from None

    def __contains__(self, name: object) -> bool:
        return name in self._params

    def __iter__(self) -> Iterator[str]:
        return iter(self._params)

    def __len__(self) -> int:
        return len(self._params)

    def __repr__(self) -> str:
        return f"ParameterSet({', '.join(self._params)})"

    def arrays(self) -> dict[str, jnp.ndarray]:
        """Current values as the pytree the model functions read: name -> jnp array."""
        return {name: jnp.asarray(p.default) for name, p in self._params.items()}

    def numpy_values(self) -> dict[str, Any]:
        """Current values as floats (scalars) and NumPy (3, 3) arrays (rotations)."""
        return {name: p.default for name, p in self._params.items()}

    @property
    def free(self) -> tuple[str, ...]:
        """Names of the free parameters, in definition order."""
        return tuple(n for n, p in self._params.items() if p.free)

    def updated(self, changes: Mapping[str, Any]) -> ParameterSet:
        """A copy with some parameters changed.

        ``changes[name]`` is a new value, or a mapping with any of ``value``,
        ``lower``, ``upper``, ``free``. Unknown names and values outside the
        bounds raise :class:`ModelError` naming the parameter.
        """
        new = dict(self._params)
        for name, change in changes.items():
            old = self[name]
            fields = dict(change) if isinstance(change, Mapping) else {"value": change}
            unknown = set(fields) - {"value", "lower", "upper", "free"}
            if unknown:
                raise ModelError(
                    f"parameter {name!r}: unknown field(s) {sorted(unknown)}; expected value, lower, upper, free"
                )
            kwargs: dict[str, Any] = {}
            if "value" in fields:
                kwargs["default"] = fields["value"] if old.kind == ROTATION else _number(name, fields["value"])
            for bound in ("lower", "upper"):
                if bound in fields:
                    kwargs[bound] = _number(f"{name}.{bound}", fields[bound])
            if "free" in fields:
                if not isinstance(fields["free"], bool):
                    raise ModelError(f"parameter {name!r}: 'free' must be true or false, got {fields['free']!r}")
                kwargs["free"] = fields["free"]
            new[name] = replace(old, **kwargs)
        return ParameterSet(new.values())

    def with_free(self, names: Iterable[str]) -> ParameterSet:
        """A copy in which exactly ``names`` are free (unknown names raise ModelError)."""
        names = list(names)
        for n in names:
            self[n]
        return self.updated({n: {"free": n in names} for n in self._params})

    def table(self) -> list[dict[str, Any]]:
        """One row per parameter (name, value, unit, lower, upper, free, description), for display."""
        rows = []
        for p in self._params.values():
            value = p.default if p.kind == SCALAR else np.round(p.default, 6).tolist()
            rows.append(
                dict(name=p.name, value=value, unit=p.unit, lower=p.lower, upper=p.upper, free=p.free,
                     description=p.description)
            )
        return rows


def _number(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(float(value)):
        raise ModelError(f"parameter {name!r}: expected a finite number, got {value!r}")
    return float(value)


def is_calibration_result(doc: Any) -> bool:
    """Whether a parsed file is the JSON of ``mbfg calibrate`` (top-level ``parameters`` and ``model``)."""
    return isinstance(doc, Mapping) and isinstance(doc.get("parameters"), Mapping) and "model" in doc


def result_changes(doc: Mapping[str, Any], model: Any | None, where: str) -> dict[str, Any]:
    """The whole parameter set of a calibration result (``CalibrationResult.to_dict``): the
    estimated values (``parameters``) and those held fixed (``fixed``), as changes ``{name: value}``.

    With ``model`` (anything with ``name`` and ``parameters``), a result of another model, or one
    that lacks a parameter of the model, raises :class:`ModelError` naming it: falling back on a
    built-in default would score or smooth with a model the calibration never saw.
    """
    if model is not None and doc.get("model") != model.name:
        raise ModelError(f"{where}: a calibration of model {doc.get('model')!r}, not of {model.name!r}; "
                         f"use it with {doc.get('model')!r} or calibrate {model.name!r}")
    if not isinstance(doc.get("fixed"), Mapping):
        raise ModelError(f"{where}: the calibration result has no 'fixed' object (the parameters held at their "
                         f"given values); it names only {', '.join(doc['parameters'])}. Calibrate again with "
                         f"this mbfg, which writes the whole parameter set")
    changes: dict[str, Any] = {}
    for section in ("fixed", "parameters"):
        for name, entry in doc[section].items():
            changes[str(name)] = entry["value"] if isinstance(entry, Mapping) and "value" in entry else entry
    if model is not None:
        unknown = [name for name in changes if name not in model.parameters]
        if unknown:
            raise ModelError(f"{where}: parameter(s) {', '.join(unknown)} are not parameters of {model.name!r}")
        missing = [name for name in model.parameters if name not in changes]
        if missing:
            raise ModelError(f"{where}: the calibration result lacks parameter(s) {', '.join(missing)} of "
                             f"{model.name!r}")
    return changes


def load_parameter_file(path: str | os.PathLike[str], model: Any | None = None) -> dict[str, Any]:
    """Read a parameter file (YAML or JSON, see module docstring) into a changes mapping.

    A calibration result (the JSON of ``mbfg calibrate``) gives its whole parameter set,
    checked against ``model`` when one is given (:func:`result_changes`).
    """
    from mbfg.mbse_yaml import _parse_yaml  # YAML 1.2 numbers (1e-4 is a number), duplicate keys rejected

    path = os.fspath(path)
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except OSError as exc:
        raise ModelError(f"{path}: cannot read parameter file ({exc.strerror})") from None
    except UnicodeDecodeError as exc:
        raise ModelError(f"{path}: not a text (UTF-8) parameter file ({exc.reason})") from None
    if path.endswith(".json"):
        try:
            doc = json.loads(text)
        except ValueError as exc:
            raise ModelError(f"{path}: not valid JSON ({exc})") from None
    else:
        doc = _parse_yaml(text, path)
    if is_calibration_result(doc):
        return {name: {"value": value} for name, value in result_changes(doc, model, path).items()}
    if not isinstance(doc, Mapping):
        raise ModelError(f"{path}: expected a mapping of parameter names to values")
    changes: dict[str, Any] = {}
    for name, value in doc.items():
        if isinstance(value, Mapping):
            changes[str(name)] = {k: v for k, v in value.items() if k in ("value", "lower", "upper", "free")}
        else:
            changes[str(name)] = value
    return changes
