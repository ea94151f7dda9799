"""The tasks of a sweep (:mod:`mbfg.sweep`), as they run on a Dask worker: one calibration cell, one
cross-validation score. Each returns a row of the results and never raises: a failure is the row's
``status`` "error" and ``error`` message.

State kept per worker process for its whole life (module globals): the models it was sent, the
compliance variants of them, and a compile-time counter; so the cells a worker runs share their
compiled JAX functions.
"""

from __future__ import annotations

import math
import pickle
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from mbfg._programs import BoundedCache
from mbfg.calibration_options import CalibrationOptions
from mbfg.errors import MbfgError, ModelError
from mbfg.lm_config import LMConfig
from mbfg.logs import Log

if TYPE_CHECKING:
    from mbfg.rigid import RigidModel

#: Parameters a swept compliance eps sets (those the model has).
COMPLIANCE = ("eps_lin", "eps_rot", "eps")
#: Columns every row has, in order; then value:NAME and std:NAME per free parameter.
#: kind: "calibration" or "crossval"; log: the recording tuned on; scored_log: the one scored
#: (the same for a calibration); h [s], weight, eps (NaN: the model's own compliances);
#: status "ok" or "error" (of the task); cost*: per time-step (a calibration's); score: the cross-validation
#: cost per time-step; iterations, converged, solve_status, solve_message: of the calibration's LM, or of the
#: cross-validation's state estimation (solve_status "converged", "not_converged" or "failed", with the
#: solver's reason; converged: solve_status is "converged"); wall_s, compile_s: of the task (compile_s: JAX
#: tracing, lowering and compiling in it); worker: the worker's address.
COLUMNS = ("kind", "log", "scored_log", "h", "weight", "eps", "status", "error", "cost", "cost_observation",
           "cost_impulse", "score", "iterations", "converged", "solve_status", "solve_message", "sigma_observation",
           "sigma_impulse", "wall_s",
           "compile_s", "worker")


#: Per worker process: the compile-time counter (seconds) fed by JAX's monitoring events.
_COMPILE_S = [0.0]
_JAX_READY: dict[str, Any] = {}
#: Per worker process: the models it was sent, by the SHA-1 of their pickle, the most recently used (a rerun
#: or a second sweep of the same model skips unpickling it; its compiled programs are kept by structure).
_MODELS: BoundedCache[str, Any] = BoundedCache(8)


def _model(shipped: tuple[str, bytes]):
    token, blob = shipped
    if token not in _MODELS:
        _MODELS[token] = pickle.loads(blob)
    return _MODELS[token]


def _setup_jax(cache_dir: str | bool | None) -> None:
    """Turn JAX's persistent compilation cache on in this worker process before it compiles anything
    (:func:`mbfg.enable_compilation_cache`: ``cache_dir``, else the folder this process already uses, else
    ``MBFG_CACHE_DIR``, ``off`` keeping it off, else the user's cache folder; False: none), and count compile
    time. Idempotent; runs at the start of every task. A worker that is a thread of the caller's process (a
    LocalCluster with ``processes=False``) changes that process's JAX settings: give ``cache_dir=False`` there
    to leave them alone."""
    if "done" in _JAX_READY:
        return
    from mbfg._jax import enable_compilation_cache, jax

    if cache_dir is not False:
        enable_compilation_cache(None if cache_dir in (None, True) else str(cache_dir))

    def listen(event: str, duration_secs: float, **_: Any) -> None:
        if event.startswith("/jax/core/compile/"):  # tracing, lowering to MLIR, backend compile
            _COMPILE_S[0] += duration_secs

    jax.monitoring.register_event_duration_secs_listener(listen)
    _JAX_READY["done"] = cache_dir


def _with_eps(model, eps: float | None):
    if eps is None or (isinstance(eps, float) and math.isnan(eps)):
        return model
    # A copy per task: its programs are its structure's, compiled once per process (mbfg.factors._rigid).
    names = [n for n in COMPLIANCE if n in model.parameters]
    if not names:
        raise ModelError(f"{model.name} has no compliance parameter ({', '.join(COMPLIANCE)}) for eps to set")
    return model.with_parameters({n: float(eps) for n in names})


def _worker_address() -> str:
    try:
        from distributed import get_worker

        return get_worker().address
    except (ImportError, ValueError):
        return "local"


def _run_task(row: dict[str, Any], work) -> dict[str, Any]:
    start, compiled = time.perf_counter(), _COMPILE_S[0]
    try:
        row.update(work())
        row["status"] = "ok"
    except Exception as exc:  # a failed cell is a result of the sweep, not the end of it
        row.update(status="error", error=f"{type(exc).__name__}: {exc}")
    row.update(wall_s=time.perf_counter() - start, compile_s=_COMPILE_S[0] - compiled, worker=_worker_address())
    return row


def calibration_task(model: tuple[str, bytes], log: Log, name: str, h: float, weight: float, eps: float | None,
                     free: Sequence[str] | None, lm: LMConfig, options: CalibrationOptions,
                     cache_dir: str | bool | None) -> dict:
    """One cell: calibrate ``model`` (with compliance ``eps``) on ``log`` at (h, w) with the LM options ``lm`` and
    the workflow ``options``; a row of the results."""
    _setup_jax(cache_dir)

    def work() -> dict[str, Any]:
        from mbfg.calibration import calibrate

        result = calibrate(_with_eps(_model(model), eps), log, free=free, h=h, weight=weight, lm=lm, options=options)
        out = dict(cost=result.cost, cost_observation=result.cost_observation, cost_impulse=result.cost_impulse,
                   iterations=result.iterations, converged=result.converged, solve_status=result.status,
                   solve_message=result.message,
                   sigma_observation=result.sigma_observation, sigma_impulse=result.sigma_impulse)
        for p in result.parameters:
            out[f"value:{p.name}"], out[f"std:{p.name}"] = p.value, p.std
        return out

    return _run_task(empty_row("calibration", name, name, h, weight, eps), work)


def crossval_task(model: tuple[str, bytes], calibration: Mapping[str, Any], log: Log, name: str, lm: LMConfig,
                  simulate: float | None, cache_dir: str | bool | None, free: Sequence[str] | None = None) -> dict:
    """Score a tuned cell (a calibration row) on another recording ``log`` at the cell's h, w and eps, its state
    estimation with the LM options ``lm``; with ``simulate`` [s], also the free simulation of the tuned model
    over that much of ``log`` (:func:`_free_simulation_columns`).

    ``free``: the free parameters the calibration was given (None: the model's), in its order. A row read
    back from a results file lists its ``value:`` columns sorted by name; the held parameters follow the
    calibration's order instead, which makes the factor types, so the compiled programs, the calibration's.
    """
    _setup_jax(cache_dir)
    eps = calibration["eps"]
    row = empty_row("crossval", calibration["log"], name, calibration["h"], calibration["weight"], eps)

    def work() -> dict[str, Any]:
        from mbfg.graphs.joint import cross_validation

        if calibration.get("status") != "ok":
            raise MbfgError(f"the calibration on {calibration['log']} failed ({calibration.get('error')})")
        tuned = _with_eps(_model(model), eps)
        found = identified_values(tuned, calibration)
        order = list(tuned.parameters.free if free is None else free)
        identified = {k: found[k] for k in sorted(found, key=lambda k: order.index(k) if k in order else len(order))}
        values = tuned.parameters.numpy_values() | identified
        # The calibration's free parameters held at their values: the factor types, so the compiled
        # programs, of the calibration tasks on this worker.
        score, estimate = cross_validation(tuned, log, values, h=calibration["h"], weight=calibration["weight"],
                                           free=list(identified), lm=lm)
        out: dict[str, Any] = dict(score=score, iterations=estimate.iterations, converged=estimate.converged,
                                   solve_status=estimate.status, solve_message=estimate.message)
        if simulate is not None:
            out.update(_free_simulation_columns(tuned.with_parameters(identified), log, calibration["h"], simulate))
        return out

    return _run_task(row, work)


def _free_simulation_columns(model: RigidModel, log: Log, h: float, seconds: float) -> dict[str, float]:
    """``sim_rms:NAME`` [rad] and ``sim_drift:NAME`` [s] of a free simulation of ``model`` over the first
    ``seconds`` of ``log`` taken at the step ``h`` (:func:`mbfg.validation.free_simulation`)."""
    from mbfg.validation import free_simulation, log_at_step

    sim = free_simulation(model, log_at_step(log, h), seconds=seconds)
    return {**{f"sim_rms:{o}": v for o, v in sim.rms.items()}, **{f"sim_drift:{o}": v for o, v in sim.drift_time.items()}}


def identified_values(model: RigidModel, row: Mapping[str, Any]) -> dict[str, Any]:
    """The parameter values a calibration row found (``value:NAME`` columns); a tilt's three rotation
    vector components ``value:tilt[x]`` ... become its rotation matrix."""
    values: dict[str, Any] = {}
    rotvecs: dict[str, list[float]] = {}
    for column, value in row.items():
        if not column.startswith("value:") or value is None or (isinstance(value, float) and math.isnan(value)):
            continue
        name = column[len("value:"):]
        base, _, axis = name.partition("[")
        if axis:
            rotvecs.setdefault(base, [0.0, 0.0, 0.0])["xyz".index(axis[0])] = float(value)
        else:
            values[name] = float(value)
    if rotvecs:
        from scipy.spatial.transform import Rotation

        values.update({n: Rotation.from_rotvec(v).as_matrix() for n, v in rotvecs.items()})
    return values


def empty_row(kind: str, log: str, scored: str, h: float, weight: float, eps: float | None) -> dict[str, Any]:
    row: dict[str, Any] = {c: math.nan for c in COLUMNS}
    row.update(kind=kind, log=log, scored_log=scored, h=float(h), weight=float(weight),
               eps=math.nan if eps is None else float(eps), status="", error="", worker="", solve_status="",
               solve_message="")
    return row
