"""Named model parameters with units, defaults, bounds and a free/fixed flag.

A :class:`ParameterSet` is what a model's JAX functions read: ``params.arrays()``
is a dict ``name -> jnp array`` (a scalar, or a (3, 3) rotation matrix for a
rotation parameter such as the gravity tilt), a pytree, so changing a value
never recompiles anything. The bounds are the box B of Marklund et al. (2025) section 3.1
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
from mbfg.limits import MAX_PARAMETER

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
        value = float(self.default)
        object.__setattr__(self, "default", value)
        if abs(value) > MAX_PARAMETER:
            raise ModelError(f"parameter {self.name!r}: value {value:g} [{self.unit}] is beyond +-"
                             f"{MAX_PARAMETER:g}: the estimation squares values and would overflow (no rig's mass, "
                             f"inertia, friction or gain comes near it)")
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

    def unbounded(self, names: Iterable[str]) -> list[str]:
        """Those of the scalar parameters ``names`` whose box [lower, upper] is not finite (rotations are left out:
        they have no box)."""
        return [n for n in names if self[n].kind != ROTATION
                and not (np.isfinite(self[n].lower) and np.isfinite(self[n].upper))]

    def updated(self, changes: Mapping[str, Any]) -> ParameterSet:
        """A copy with some parameters changed.

        ``changes[name]`` is a new value, or a mapping with any of ``value``,
        ``lower``, ``upper``, ``free``. Unknown names and values outside the
        bounds raise :class:`ModelError` naming the parameter.
        """
        if not isinstance(changes, Mapping):
            raise ModelError(f"parameter changes: expected a mapping of parameter names to values, e.g. "
                             f"{{'J': 0.002}}, got {type(changes).__name__} {changes!r:.80}")
        new = dict(self._params)
        for name, change in changes.items():
            if not isinstance(name, str):
                raise ModelError(f"parameter changes: expected parameter names (str) as keys, got {name!r}")
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
        names = free_names(self, names)
        return self.updated({n: {"free": n in names} for n in self._params})

    def arrays_with(self, values: Mapping[str, Any] | None, argument: str = "parameters") -> dict[str, jnp.ndarray]:
        """:meth:`arrays` with some values replaced: ``values`` maps some parameter names to new values (the
        others keep theirs). A name this set does not have, a value that is not a finite number (a rotation:
        not a rotation) or outside its bounds raises :class:`ModelError` naming ``argument`` and the parameter.
        """
        if values is None:
            return self.arrays()
        changes = {name: {"value": value} for name, value in _mapping(values, argument).items()}
        try:
            return self.updated(changes).arrays()
        except ModelError as exc:
            raise ModelError(f"{argument}: {exc}") from None

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
    """``value`` as a float: a Python, NumPy or 0-d array (NumPy, JAX) real number that is finite;
    ModelError naming ``name`` otherwise (a bool, a string, an array of several values)."""
    number: float | None = None
    if isinstance(value, (bool, np.bool_)):
        number = None  # True is an int to Python, never a parameter value
    elif isinstance(value, (int, float, np.integer, np.floating)):
        number = float(value)
    elif getattr(value, "shape", None) == () and getattr(value, "dtype", None) is not None:
        arr = np.asarray(value)
        number = float(arr) if arr.dtype.kind in "iuf" else None
    if number is None or not math.isfinite(number):
        raise ModelError(f"parameter {name!r}: expected a finite number, got {value!r}")
    return number


def _mapping(values: Any, argument: str) -> Mapping[str, Any]:
    """``values`` if it is a mapping; ModelError naming ``argument`` otherwise."""
    if not isinstance(values, Mapping):
        raise ModelError(f"{argument}: expected a mapping of parameter names to values, e.g. {{'J': 0.002}}, "
                         f"got {type(values).__name__}")
    return values


def free_names(parameters: Mapping[str, Any], names: Any, argument: str = "free") -> list[str]:
    """``names`` as a list of parameter names of ``parameters``; ModelError naming ``argument`` for a string
    (a sequence of characters to Python: "b_1" would be 'b', '_', '1'), a name that is not a str, an
    unknown name or one given twice."""
    if isinstance(names, (str, bytes)):
        raise ModelError(f"{argument}: expected a list of parameter names, e.g. [{names!r}], got the string "
                         f"{names!r}")
    if not isinstance(names, Iterable):
        raise ModelError(f"{argument}: expected a list of parameter names, got {type(names).__name__} {names!r}")
    out: list[str] = []
    for name in names:
        if not isinstance(name, str):
            raise ModelError(f"{argument}: expected parameter names (str), got {name!r}")
        if name not in parameters:
            raise ModelError(f"{argument}: unknown parameter {name!r}; known parameters: {', '.join(parameters)}")
        if name in out:
            raise ModelError(f"{argument}: parameter {name!r} is given twice")
        out.append(name)
    return out


#: A calibration result's settings, each a positive number where given (null: not recorded).
CALIBRATION_SETTINGS = {"h": "a time-step [s]", "period": "a sample period [s]", "weight": "a state error weight"}


def check_calibration_settings(doc: Mapping[str, Any], where: str) -> None:
    """ModelError ``where: field 'h' ...`` for a setting of :data:`CALIBRATION_SETTINGS` that is given but not a
    finite number > 0: a command must not replace a wrong "h": -0.001 or "weight": 0 by its default unsaid."""
    for key, what in CALIBRATION_SETTINGS.items():
        value = doc.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not (math.isfinite(value) and value > 0):
            raise ModelError(f"{where}: field {key!r}: expected {what}, a finite number > 0, got {value!r}")


def json_document(text: str, where: str) -> Any:
    """Parse JSON ``text`` (of file ``where``) refusing a key given twice in one object, which ``json`` would
    silently resolve to the last (YAML parameter files refuse duplicates too)."""

    def unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in pairs:
            if key in out:
                raise ModelError(f"{where}: key {key!r} appears twice in one JSON object; keep one")
            out[key] = value
        return out

    try:
        return json.loads(text, object_pairs_hook=unique)
    except ValueError as exc:
        if isinstance(exc, ModelError):
            raise
        raise ModelError(f"{where}: not valid JSON ({exc})") from None


def is_calibration_result(doc: Any) -> bool:
    """Whether a parsed file is the JSON of ``mbfg calibrate`` (top-level ``parameters`` and ``model``)."""
    return isinstance(doc, Mapping) and isinstance(doc.get("parameters"), Mapping) and "model" in doc


def result_changes(doc: Mapping[str, Any], model: Any | None, where: str) -> dict[str, Any]:
    """The whole parameter set of a calibration result (``CalibrationResult.to_dict``): the
    estimated values (``parameters``) and those held fixed (``fixed``), as changes
    ``{name: {"value": .., "lower": .., "upper": ..}}`` (:meth:`ParameterSet.updated`): the bounds are the box
    the calibration ran with, where the entry records finite ones; a bound that is not a number, or a lower
    above the upper, raises :class:`ModelError` naming ``where`` and the parameter, as a parameter file's does.

    With ``model`` (anything with ``name`` and ``parameters``), a result of another model, or one
    that lacks a parameter of the model, raises :class:`ModelError` naming it: falling back on a
    built-in default would score or smooth with a model the calibration never saw.
    """
    if not isinstance(doc.get("model"), str):
        raise ModelError(f"{where}: no 'model' field naming the model calibrated; expected the JSON of 'mbfg "
                         f"calibrate --out' (or CalibrationResult.to_dict())")
    check_calibration_settings(doc, where)
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
            if not isinstance(entry, Mapping):
                changes[str(name)] = entry
                continue
            if "value" not in entry:
                raise ModelError(f"{where}: parameter {name!r} has no 'value' in {section!r}")
            change = {"value": entry["value"]}
            # The bounds the calibration ran with travel with the values, checked as a parameter file's are
            # (a number each, lower <= value <= upper); null is an infinite bound, which the model keeps.
            for bound in ("lower", "upper"):
                if entry.get(bound) is not None:
                    try:
                        change[bound] = _number(f"{name}.{bound}", entry[bound])
                    except ModelError as exc:
                        raise ModelError(f"{where}: {exc}") from None
            if change.get("lower", -math.inf) > change.get("upper", math.inf):
                raise ModelError(f"{where}: parameter {name!r}: lower bound {change['lower']} is above the upper "
                                 f"bound {change['upper']}")
            changes[str(name)] = change
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
    from mbfg.mbse_yaml import parse_yaml  # YAML 1.2 numbers (1e-4 is a number), duplicate keys rejected

    if not isinstance(path, (str, os.PathLike)):
        raise ModelError(f"path: expected the path of a parameter file (str or Path), got {type(path).__name__}")
    path = os.fspath(path)
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except OSError as exc:
        raise ModelError(f"{path}: cannot read parameter file ({exc.strerror})") from None
    except UnicodeDecodeError as exc:
        raise ModelError(f"{path}: not a text (UTF-8) parameter file ({exc.reason})") from None
    if path.endswith(".json"):
        doc = json_document(text, path)
    else:
        doc = parse_yaml(text, path)
    if is_calibration_result(doc):
        return {name: change if isinstance(change, Mapping) else {"value": change}
                for name, change in result_changes(doc, model, path).items()}
    if not isinstance(doc, Mapping):
        raise ModelError(f"{path}: expected a mapping of parameter names to values")
    changes: dict[str, Any] = {}
    for name, value in doc.items():
        if isinstance(value, Mapping):
            changes[str(name)] = {k: v for k, v in value.items() if k in ("value", "lower", "upper", "free")}
        else:
            changes[str(name)] = value
    return changes
