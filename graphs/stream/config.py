"""Settings: the stream's configuration (:class:`StreamConfig`), relinearization thresholds, calibration
JSON, checked numbers.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeGuard

import numpy as np

from mbfg.errors import LimitError, ModelError
from mbfg.limits import MAX_STEPS, MAX_UPDATE_EVERY, check_count, check_window

#: Relinearization thresholds per kind of variable (see :class:`StreamEstimator`).
DEFAULT_RELINEARIZE_THRESHOLD: dict[str, float] = {"pose": 0.05, "velocity": 10.0, "parameters": 0.05}

#: The smoothers a stream can run on (see :class:`StreamEstimator`).
SMOOTHERS = ("chain", "incremental", "gtsam-incremental", "batch")


def _whole(name: str, value: Any, least: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < least:
        raise ModelError(f"stream: {name} must be a whole number >= {least}, got {value!r}")
    return int(value)


@dataclass(frozen=True)
class StreamConfig:
    """The settings of a :class:`~mbfg.graphs.stream.StreamEstimator`, checked when made (a bad one is
    named in a :class:`~mbfg.errors.ModelError`); what each means is in the estimator's docstring.

    Settings that need the model (``ppr`` with a model that observes no hinge, ``refine`` names) are
    checked by the estimator. ``StreamEstimator(model, config)`` and ``StreamEstimator(model, **settings)``
    are the same; ``dataclasses.replace(config, lag=0.2)`` makes a variant.
    """

    lag: float = 0.1
    h: float | None = None
    period: float | None = None
    ppr: int | None = None
    counts: bool = False
    counter_modulus: int | None = None
    sigma_observation: float | Sequence[float] | None = None
    weight: float | None = None
    sigma_impulse: float | None = None
    smoother: str | None = None
    refine: tuple[str, ...] = ()
    refine_sigmas: Mapping[str, float] | None = None
    covariance: bool = False
    jump: float | None = None
    resync: int = 5
    max_gap: float = 0.25
    relinearize_threshold: float | Mapping[str, float] | None = None
    relinearize_skip: int = 5
    wildfire_threshold: float = 0.0
    max_iterations: int = 5
    update_every: int = 1
    calibration_sigma: float | None = None
    #: Relinearization threshold per kind of variable, from ``relinearize_threshold`` and the defaults.
    thresholds: dict[str, float] = field(init=False, repr=False, compare=False)
    #: The smoother the stream runs on: ``smoother``, or for None the default for these settings.
    smoother_kind: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.h is None and self.period is None:
            raise ModelError("stream: give the model time-step h or the sample period [s]")
        period = _positive("stream sample period", self.period if self.period is not None else self.h)
        h = _positive("stream time-step h", self.h if self.h is not None else period)
        stride = int(round(h / period))
        if stride < 1 or abs(stride * period - h) > 1e-6 * h:
            raise ModelError(f"stream: time-step h = {h:g} s must be a whole multiple of the sample period {period:g} s")
        _positive("stream lag", self.lag)
        _whole("update_every", self.update_every, 1)
        # Sizes before any allocation or compile: the window's states, each update's scan.
        check_window(float(self.lag), h, "stream: lag", "h")
        check_count("stream: update_every", self.update_every, MAX_UPDATE_EVERY,
                    "each update compiles a scan of that many steps")
        refine = (self.refine,) if isinstance(self.refine, str) else tuple(self.refine)
        object.__setattr__(self, "refine", refine)
        smoother = self.smoother
        if smoother is None:
            smoother = "chain" if not refine else "incremental"
        if smoother not in SMOOTHERS:
            raise ModelError(f"stream: smoother must be one of {', '.join(map(repr, SMOOTHERS))}, got {smoother!r}")
        if smoother == "chain" and refine:
            raise ModelError("stream: smoother 'chain' does not refine parameters online; use "
                             "smoother='incremental' with refine")
        object.__setattr__(self, "smoother_kind", smoother)
        if self.ppr is not None:
            _whole("encoder counts per revolution (ppr)", self.ppr, 1)
        if self.counts and self.ppr is None:
            raise ModelError("stream: raw encoder counts need ppr, the counts per revolution")
        if self.counter_modulus is not None:
            if not self.counts:
                raise ModelError("stream: counter_modulus needs raw encoder counts (counts=True and ppr)")
            _whole("counter_modulus", self.counter_modulus, 2)
        if self.weight is not None:
            _positive("stream state error weight", self.weight)
        if self.sigma_impulse is not None:
            _positive("stream impulse noise", self.sigma_impulse)
        if self.jump is not None:
            _positive("stream jump threshold", self.jump)
        _whole("resync", self.resync, 1)
        _positive("stream max_gap", self.max_gap)
        if not float(self.max_gap) / period <= MAX_STEPS:  # a gap is bridged by stepping the model through it
            raise LimitError(f"stream: max_gap {float(self.max_gap):g} s is {float(self.max_gap) / period:.3g} "
                             f"sample periods of {period:g} s; at most {MAX_STEPS:.0e} (a bridged gap is stepped "
                             f"through by the model)")
        object.__setattr__(self, "thresholds", _threshold_kinds(self.relinearize_threshold))


def _threshold_kinds(threshold: float | Mapping[str, float] | None) -> dict[str, float]:
    """Relinearization threshold per kind of variable ("pose", "velocity", "parameters"), checked."""
    per_kind = dict(DEFAULT_RELINEARIZE_THRESHOLD)
    if isinstance(threshold, Mapping):
        unknown = set(threshold) - set(per_kind)
        if unknown:
            raise ModelError(f"stream: relinearize_threshold has unknown kind(s) {sorted(unknown)}; "
                             f"expected some of {sorted(per_kind)}")
        per_kind.update(threshold)
    elif threshold is not None:
        per_kind = dict.fromkeys(per_kind, threshold)
    for kind, value in per_kind.items():
        _positive(f"stream relinearize_threshold[{kind!r}]", value)
    return per_kind


def read_calibration(path: str | os.PathLike[str] | Mapping[str, Any]) -> dict[str, Any]:
    """A calibration result (the JSON of ``mbfg calibrate --json``/``--out``) as a dict.

    Raises:
        ModelError: the file cannot be read, is not JSON, or has no ``parameters`` object.
    """

    if isinstance(path, Mapping):
        doc, where = dict(path), "calibration"
    else:
        where = os.fspath(path)
        from mbfg.parameters import json_document

        try:
            with open(where, encoding="utf-8") as fh:
                text = fh.read()
        except OSError as exc:
            raise ModelError(f"{where}: cannot read the calibration ({exc.strerror or exc})") from None
        except UnicodeDecodeError as exc:
            raise ModelError(f"{where}: not a calibration JSON file ({exc})") from None
        doc = json_document(text, where)  # a key given twice is refused, not resolved to the last
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


def calibration_warnings(doc: Mapping[str, Any], where: str = "calibration") -> list[str]:
    """What a stream should be told about a calibration (the JSON of ``mbfg calibrate --json``), one message
    per parameter or combination the calibration log did not fit, and one for a solve that did not converge.

    A parameter counts as not fitted where its entry (or the top-level lists) says it ended on a bound
    (``at_bound``) or was not excited (``excited`` false, ``not_excited``: its std exceeds its value), and a
    combination of parameters where ``not_determined`` names it: the stream would use such values as if
    the data had determined them, and its dynamics may then leave the readings (jumps, solver restarts).
    Parameters a calibration lists as ``held`` (at given values, not fitted) are not reported; a
    ``status`` other than "converged" (or ``converged`` false where there is no status) is. Fields a file
    lacks (older calibrations) are taken as raising nothing."""
    params = doc.get("parameters")
    params = params if isinstance(params, Mapping) else {}
    held_doc = doc.get("held")
    held = set(held_doc) if isinstance(held_doc, (list, tuple, Mapping)) else set()

    def listed(key: str) -> set[str]:
        value = doc.get(key)
        return {str(n) for n in value} if isinstance(value, (list, tuple)) else set()

    at_bound, not_excited = listed("at_bound"), listed("not_excited")
    out = []
    for name in list(params) + sorted((at_bound | not_excited) - set(params)):
        if name in held:
            continue
        entry = params.get(name)
        entry = entry if isinstance(entry, Mapping) else {}
        value = entry.get("value")
        shown = f"{name!r} = {value:.6g}" if _number(value) else repr(name)
        reasons = []
        if entry.get("at_bound") is True or name in at_bound:
            side = _bound_side(entry)
            reasons.append(f"ended on its {side}" if side else "ended on a bound")
        if entry.get("excited") is False or name in not_excited:
            std = entry.get("std")
            reasons.append("was not excited by the calibration log" + (
                f" (std {std:.3g} > |value|)" if _number(std) else ""))
        if reasons:
            out.append(f"{where}: parameter {shown} {' and '.join(reasons)}: the data did not determine it, yet the "
                       "stream uses it as fitted and its dynamics may leave the readings (jumps, solver restarts); "
                       "calibrate with it fixed at a known value, or held")
    for label in listed("not_determined"):
        out.append(f"{where}: the calibration log did not determine {label}: the stream uses the parameters in it "
                   "as fitted; calibrate with one of them fixed at a known value")
    status = doc.get("status")
    if isinstance(status, str) and status != "converged":
        reason = doc.get("reason")
        out.append(f"{where}: the calibration's solve ended {status!r}" + (f" ({reason})" if reason else "")
                   + ": its parameters are not a converged fit")
    elif status is None and doc.get("converged") is False:
        out.append(f"{where}: the calibration did not converge: its parameters are not a converged fit")
    return out


def _bound_side(entry: Mapping[str, Any]) -> str:
    """'lower bound 1e-10' or 'upper bound ...' for the bound a parameter's entry sits on (its value at or
    beyond it, as the calibration judges), else ''."""
    value = entry.get("value")
    if not _number(value):
        return ""
    lower, upper = entry.get("lower"), entry.get("upper")
    if _number(lower) and value <= lower:
        return f"lower bound {lower:.6g}"
    if _number(upper) and value >= upper:
        return f"upper bound {upper:.6g}"
    return ""


def _number(x: Any) -> TypeGuard[float]:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _positive(name: str, value: Any) -> float:
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise ModelError(f"{name} must be a positive number, got {value!r}") from None
    if not (math.isfinite(x) and x > 0):
        raise ModelError(f"{name} must be a positive number, got {value!r}")
    return x




def usable_value(value: Any) -> TypeGuard[float]:
    """A positive finite number in a calibration JSON (not a bool, not null)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0


def decimal_places(x: float) -> int:
    """The decimals of x as written (0.001 -> 3, 1.899 -> 3, 2.0 -> 0; at most 12): output times are rounded to
    those of the sample period and the first time, so that the integer step index times h prints as the
    input's times do (no 1.8990000000000018 next to 1.899)."""
    for d in range(13):
        if abs(round(x, d) - x) <= 1e-12 * max(1.0, abs(x)):
            return d
    return 12
