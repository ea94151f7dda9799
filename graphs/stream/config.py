"""Settings: relinearization thresholds, calibration JSON, checked numbers.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from typing import Any, TypeGuard

from mbfg.errors import ModelError

#: iSAM2 relinearization thresholds per kind of variable (see :class:`StreamEstimator`).
DEFAULT_RELINEARIZE_THRESHOLD: dict[str, float] = {"pose": 0.05, "velocity": 10.0, "parameters": 0.05}


def read_calibration(path: str | os.PathLike[str] | Mapping[str, Any]) -> dict[str, Any]:
    """A calibration result (the JSON of ``mbfg calibrate --json``/``--out``) as a dict.

    Raises:
        ModelError: the file cannot be read, is not JSON, or has no ``parameters`` object.
    """
    import json

    if isinstance(path, Mapping):
        doc, where = dict(path), "calibration"
    else:
        where = os.fspath(path)
        try:
            with open(where, encoding="utf-8") as fh:
                doc = json.load(fh)
        except OSError as exc:
            raise ModelError(f"{where}: cannot read the calibration ({exc.strerror or exc})") from None
        except (ValueError, UnicodeDecodeError) as exc:
            raise ModelError(f"{where}: not a calibration JSON file ({exc})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("parameters"), dict):
        raise ModelError(
            f"{where}: expected the JSON object of 'mbfg calibrate --json' with a 'parameters' object "
            "({name: {\"value\", \"std\"}})"
        )
    for name, entry in doc["parameters"].items():
        value = entry.get("value") if isinstance(entry, dict) else entry
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
        ok = ok or (isinstance(value, list) and all(isinstance(v, (int, float)) for v in value))
        if not ok:
            raise ModelError(f"{where}: parameter {name!r} has no finite 'value' (got {value!r})")
    return doc


def _positive(name: str, value: Any) -> float:
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise ModelError(f"{name} must be a positive number, got {value!r}") from None
    if not (math.isfinite(x) and x > 0):
        raise ModelError(f"{name} must be a positive number, got {value!r}")
    return x




def _usable(value: Any) -> TypeGuard[float]:
    """A positive finite number in a calibration JSON (not a bool, not null)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0


def _decimals(x: float) -> int:
    """The decimals of x as written (0.001 -> 3, 1.899 -> 3, 2.0 -> 0; at most 12): output times are rounded to
    those of the sample period and the first time, so that the integer step index times h prints as the
    input's times do (no 1.8990000000000018 next to 1.899)."""
    for d in range(13):
        if abs(round(x, d) - x) <= 1e-12 * max(1.0, abs(x)):
            return d
    return 12
