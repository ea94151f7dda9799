"""What the mixins of :class:`StreamEstimator` use of each other and of the estimator, for the type checker.

:class:`StreamHost` lists the estimator's state (set by ``StreamEstimator.__init__`` and
``_reset_stream``) and the methods one part calls in another. The mixins derive from it only while
type checking (``if TYPE_CHECKING``): at run time they derive from ``object`` and this module is not
imported. Not a Protocol: mypy takes a mixin's ``self._filtered = None`` as redefining a protocol member.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import gtsam
import numpy as np

from mbfg.factors._rigid import Variables
from mbfg.graphs.stream.readout import Readout
from mbfg.graphs.stream.results import Estimate, StreamStatus, StreamStep
from mbfg.graphs.stream.sensors import SensorKind
from mbfg.rigid import RigidModel


class StreamHost:
    # Settings (StreamEstimator.__init__).
    model: RigidModel
    period: float
    h: float
    m: int
    update_every: int
    smoother_kind: str
    hinge: np.ndarray
    _hinge_list: list[bool]
    counts: bool
    counter_modulus: int | None
    step_rad: float | None
    jump: float
    resync: int
    max_gap: float
    _max_gap_slots: int
    covariance: bool
    on_warning: Callable[[str], None] | None
    variables: Variables
    fixed: dict[str, Any]
    parameters: dict[str, Any]
    _refine_prior: tuple[np.ndarray, np.ndarray] | None
    _obs_noise: gtsam.noiseModel.Base
    _imp_noise: gtsam.noiseModel.Base
    _readout: Readout
    _make_smoother: Callable[[], Any]

    # The stream's state (StreamEstimator._reset_stream).
    status: StreamStatus
    _warned: set[str]
    _smoother: Any
    _t0: float | None
    _last_j: int
    _k: int
    _k_start: int
    _u: np.ndarray
    _u_graph: np.ndarray
    _pending: list[tuple[int, np.ndarray, np.ndarray]]
    _rollout: Callable[..., Any] | None
    _fused: Callable[..., Any] | None
    _fused_kinds: tuple[SensorKind, ...]
    sensor_kinds: tuple[SensorKind, ...]
    paths: Counter[str]
    _sensor_rows: dict[int, dict[str, tuple[np.ndarray, ...]]]
    _sensor_shapes: dict[str, tuple]
    _raw_prev: np.ndarray | None
    _unwrapped: np.ndarray
    _refs: dict[int, np.ndarray]
    _jumps_in_row: np.ndarray
    _filtered: Estimate | None
    _smoothed: Estimate | None
    _restart_velocity: np.ndarray | None
    _refined: dict[str, float] | None
    _leap_run: tuple[int, int] | None
    _turn_steps: np.ndarray
    _t_decimals: int
    _pred_cache: tuple[Any, list] | None
    _gate_ref: tuple[int, np.ndarray, np.ndarray] | None
    _believed: list[tuple[int, float]]

    # Methods one part calls in another.
    def push(self, t: float, readings: Sequence[float | None],
             controls: Sequence[float] | np.ndarray | None = None) -> StreamStep:
        raise NotImplementedError

    def flush(self) -> StreamStep | None:
        raise NotImplementedError

    def _update(self) -> tuple[tuple[Estimate, ...], tuple[Estimate, ...]]:
        raise NotImplementedError

    def _estimates(self, ks: Sequence[int], covariance: bool) -> tuple[Estimate, ...]:
        raise NotImplementedError

    def _state_keys(self, k: int) -> list[int]:
        raise NotImplementedError

    def _oldest_in_window(self) -> int:
        raise NotImplementedError

    def _read(self, ks: Sequence[int]) -> tuple[tuple[Estimate, ...], tuple[Estimate, ...]]:
        raise NotImplementedError
