"""The user's own factors in a stream (:class:`StreamFactors`): declared once, their readings given per sample.

A sensor of the user's (a gyroscope on a link, an accelerometer, a force sensor ...) is a factor type
declared with :func:`mbfg.factor_type.factor_type` over the stream's state variables, as for
:class:`mbfg.graphs.user_factors.UserFactors` in a calibration::

    @factor_type(name="pendulum_gyroscope")
    def gyroscope(v: VectorVar, reading: jax.Array) -> jax.Array:
        # (3,): body 1's angular velocity in its body frame [rad/s] minus the gyroscope's reading
        return v[9:12] - reading

    gyro = StreamFactors(gyroscope, lambda k: [keys.V(k)], gtsam.noiseModel.Isotropic.Sigma(3, 1e-3),
                         name="gyro")
    estimator = StreamEstimator(furuta(), h=1e-3, ppr=2048, factors=[gyro])
    estimator.push(t, encoders, u, sensors={"gyro": omega_measured})

The variables of state k (:mod:`mbfg.keys`; k the state index, t_k = t_0 + k h):

- ``keys.X(k, i)``: the pose of body i (Pose3, a (4, 4) homogeneous matrix in the residual: its CoM position
  [m] in the world, its rotation body -> world; i in the model's body order ``model.bodies``);
- ``keys.V(k)``: the velocities of all bodies (Vector (6 nb,): body i's CoM velocity [m/s] in the world frame
  in entries 6i .. 6i+2, its angular velocity [rad/s] in its body frame in 6i+3 .. 6i+5);
- ``keys.P()``: the parameters refined online (Vector, in the order of ``refine``), only with ``refine``.

``keys(k)`` gives the factor's keys at state k, in the order of the residual's variables: variables of state
k only (a factor on one state), or of states k - 1 and k (a factor between consecutive states, e.g. an
integrated reading over the step). The factor of state k gets the readings of the sample at t_k; a factor
between states has none on the first state of a window (a stream's start, a restart).

``constants``: the residual's constants in its order, :data:`READING` where the sample's value goes (one
per :data:`READING`, given with each sample), any other value shared by every row. A sample that does not
carry a sensor's value (the key absent from ``push(..., sensors=...)``: a slower sensor, a dropped reading)
gives no row of that sensor; a declaration without :data:`READING` gives a row on every state with a sample.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import gtsam
import numpy as np

from mbfg import keys as mbfg_keys
from mbfg.adapter import FactorType
from mbfg.errors import ModelError


class _Reading:
    """The marker of a per-sample constant (:data:`READING`)."""

    def __repr__(self) -> str:
        return "READING"


#: In :attr:`StreamFactors.constants`: the place of a constant given with each sample.
READING = _Reading()


@dataclass(frozen=True)
class StreamFactors:
    """A factor type of the user's on the stream's states, one row per sample that carries its readings.

    Args:
        factor_type: a :class:`~mbfg.adapter.FactorType` (``@factor_type``) over the variables of one state or
            of two consecutive states (module docstring).
        keys: state index k -> the factor's keys at k, e.g. ``lambda k: [keys.X(k, 1), keys.V(k)]``, or
            ``lambda k: [keys.V(k - 1), keys.V(k)]`` between states.
        noise: the noise model shared by the rows, diagonal (``gtsam.noiseModel.Isotropic.Sigma(m, sigma)``,
            ``Diagonal.Sigmas``): the chain smoother whitens by dividing by the sigmas.
        constants: the residual's constants, :data:`READING` for each one given per sample (default: one).
        name: the key of its readings in ``push(..., sensors={name: value})`` (default: the factor type's name).
    """

    factor_type: FactorType
    keys: Callable[[int], Sequence[int]]
    noise: gtsam.noiseModel.Base
    constants: tuple[Any, ...] = (READING,)
    name: str | None = None

    @property
    def label(self) -> str:
        return self.name if self.name is not None else self.factor_type.name


@dataclass(frozen=True)
class SensorKind:
    """A checked :class:`StreamFactors` (:func:`sensor_kinds`).

    Attributes:
        spec: the declaration; name: its readings' key; span: 1 (one state) or 2 (states k - 1, k);
        layout: per variable of the residual, (state offset: 0 for k, -1 for k - 1, role: the position of its
        key in ``keys.rigid_state``'s [X(k, 0) .. X(k, nb - 1), V(k)], or -1 for ``keys.P()``);
        readings: the positions of the :data:`READING` constants in ``spec.constants``.
    """

    spec: StreamFactors
    name: str
    span: int
    layout: tuple[tuple[int, int], ...]
    readings: tuple[int, ...]

    @property
    def ft(self) -> FactorType:
        return self.spec.factor_type

    @property
    def on_parameters(self) -> bool:
        return any(role < 0 for _, role in self.layout)

    def row_keys(self, k: int) -> list[int]:
        return [int(key) for key in self.spec.keys(k)]

    def constants(self, readings: tuple[Any, ...]) -> tuple[Any, ...]:
        """The residual's constants of one row, the sample's ``readings`` in the :data:`READING` places."""
        given = iter(readings)
        return tuple(next(given) if c is READING else c for c in self.spec.constants)


def sensor_kinds(factors: Sequence[StreamFactors], nb: int, refine: bool, diagonal: bool) -> tuple[SensorKind, ...]:
    """``factors`` checked against a stream of ``nb`` bodies (``refine``: keys.P() is a variable; ``diagonal``:
    the smoother takes diagonal noise models only).

    Raises:
        ModelError: not a StreamFactors, a name used twice, keys off states k - 1 and k (naming the key), keys
        not laid out alike at every k, a noise model of the wrong size or kind.
    """
    if isinstance(factors, StreamFactors):
        factors = [factors]
    kinds: list[SensorKind] = []
    for i, spec in enumerate(factors):
        if not isinstance(spec, StreamFactors):
            raise ModelError(f"factors[{i}]: expected a StreamFactors (mbfg.graphs.stream.StreamFactors), got "
                             f"{type(spec).__name__}")
        name = spec.label
        if any(kind.name == name for kind in kinds):
            raise ModelError(f"factors[{i}]: the name {name!r} is taken by another of the stream's factors; give "
                             "each its own name=")
        where = f"stream factors {name!r}"
        layouts = [_layout(spec, k, nb, refine, where) for k in (5, 6)]  # any two states: the same pattern
        if layouts[0] != layouts[1]:
            raise ModelError(f"{where}: keys(k) lie differently on the states at k = 5 and k = 6; give the keys of "
                             "state k (and k - 1) the same way for every k")
        layout = layouts[0]
        if len(layout) != len(spec.factor_type.kinds):
            raise ModelError(f"{where}: keys(k) gives {len(layout)} keys, its factor type "
                             f"{spec.factor_type.name!r} has {len(spec.factor_type.kinds)} variables")
        if not any(offset == 0 for offset, role in layout if role >= 0):
            raise ModelError(f"{where}: keys(k) must include a variable of state k (its sample's state)")
        if not isinstance(spec.noise, gtsam.noiseModel.Base):
            raise ModelError(f"{where}: noise: expected a gtsam noise model, got {type(spec.noise).__name__}")
        is_diagonal = isinstance(spec.noise, gtsam.noiseModel.Diagonal) and not isinstance(
            spec.noise, gtsam.noiseModel.Constrained)
        if diagonal and not is_diagonal:
            raise ModelError(f"{where}: noise: the chain smoother takes diagonal noise models "
                             f"(Isotropic.Sigma, Diagonal.Sigmas), got {type(spec.noise).__name__}")
        span = 2 if any(offset == -1 for offset, role in layout if role >= 0) else 1
        readings = tuple(j for j, c in enumerate(spec.constants) if c is READING)
        kinds.append(SensorKind(spec, name, span, tuple(layout), readings))
    return tuple(kinds)


def _layout(spec: StreamFactors, k: int, nb: int, refine: bool, where: str) -> list[tuple[int, int]]:
    now, before = mbfg_keys.rigid_state(k, nb), mbfg_keys.rigid_state(k - 1, nb)
    try:
        row = [int(key) for key in spec.keys(k)]
    except Exception as exc:  # noqa: BLE001 - the user's callable: say whose it is
        raise ModelError(f"{where}: keys({k}) failed: {type(exc).__name__}: {exc}") from None
    out = []
    for key in row:
        if key in now:
            out.append((0, now.index(key)))
        elif key in before:
            out.append((-1, before.index(key)))
        elif key == mbfg_keys.P() and refine:
            out.append((0, -1))
        else:
            raise ModelError(f"{where}: keys({k}) gives {mbfg_keys.describe(key)}, not a variable of state {k} or "
                             f"{k - 1} (keys.X(k, i) for i < {nb}, keys.V(k))"
                             + ("" if refine else "; keys.P() only with refine"))
    return out


def read_sensors(kinds: Sequence[SensorKind], sensors: Mapping[str, Any] | None, shapes: dict[str, tuple],
                 t: Any) -> tuple[dict[str, tuple[np.ndarray, ...]], list[str]]:
    """The readings of one sample by sensor name (as float arrays) and the names of those dropped as not finite.
    ``shapes``: the shapes of each sensor's readings so far (filled here on a sensor's first reading).

    Raises:
        ModelError: a name no declared factor has, a value of another shape than the sensor's first (the call
        is wrong, not the sample).
    """
    out: dict[str, tuple[np.ndarray, ...]] = {}
    bad: list[str] = []
    by_name = {kind.name: kind for kind in kinds}
    for name in (sensors or {}):
        if name not in by_name:
            raise ModelError(f"push(t = {t} s): sensors has {name!r}, no factor of the stream's has that name; "
                             f"its factors: {', '.join(by_name) or 'none (give factors= to the estimator)'}")
    for kind in kinds:
        if not kind.readings:
            out[kind.name] = ()
            continue
        if sensors is None or kind.name not in sensors or sensors[kind.name] is None:
            continue
        value = sensors[kind.name]
        parts = (value,) if len(kind.readings) == 1 else tuple(value)
        try:
            arrays = tuple(np.array(p, dtype=float) for p in parts)
        except (TypeError, ValueError):
            raise ModelError(f"push(t = {t} s): sensors[{kind.name!r}] is not numbers") from None
        if len(arrays) != len(kind.readings):
            raise ModelError(f"push(t = {t} s): sensors[{kind.name!r}] has {len(arrays)} values, its factor takes "
                             f"{len(kind.readings)} READING constants (give them as a tuple)")
        shape = tuple(a.shape for a in arrays)
        expected = shapes.setdefault(kind.name, shape)
        if shape != expected:
            raise ModelError(f"push(t = {t} s): sensors[{kind.name!r}] has shape {shape[0] if len(shape) == 1 else shape}, "
                             f"its earlier readings {expected[0] if len(expected) == 1 else expected}")
        if not all(np.all(np.isfinite(a)) for a in arrays):
            bad.append(kind.name)
            continue
        out[kind.name] = arrays
    return out, bad


__all__ = ["READING", "SensorKind", "StreamFactors", "read_sensors", "sensor_kinds"]
