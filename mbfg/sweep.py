"""Method-parameter sweeps and cross-validation matrices on Dask (seed 001 sections 4.5-4.7).

Seed 001 leaves three method parameters to the user: the time-step h, the state
error weight w and the constraint compliance eps. Its Figures 4 and 6 sweep
them, and its Tables 3 and 4 score every tuned model on every other recording.
:func:`sweep` runs that grid, h x w x eps x recordings, as independent tasks on
a ``dask.distributed`` cluster:

- one task per cell: :func:`mbfg.calibration.calibrate` of the model on one
  recording with one (h, w, eps);
- one task per (tuned cell, other recording): the cross-validation score
  (:func:`mbfg.graphs.joint.cross_validation_score`, the cost per time-step of
  state estimation with the tuned parameters fixed) at the cell's h, w and eps.

By default the cluster is an in-process ``LocalCluster`` with one single-threaded
worker process per core; ``scheduler="tcp://host:8786"`` uses an existing
scheduler instead, unchanged. Worker processes live for the whole sweep and keep
the model they were sent, so cells with the same h share their compiled JAX
functions; JAX's persistent compilation cache (``cache_dir``) also lets a new
worker, or a new model object (every tuned model of the cross-validation is one),
skip the XLA compilation.

A task that raises (a bad recording, an h that is not a multiple of the sample
period, a failed solve) or whose worker dies is recorded with its error; the
others go on. Results are one tidy pandas DataFrame (:data:`COLUMNS` and one
``value:NAME`` / ``std:NAME`` pair per free parameter), written to ``out`` (CSV)
after every finished task; running the same sweep again skips the rows already
there (``retry_failed=True`` runs the failed ones again).

eps: a swept compliance sets every compliance parameter of the model
(:data:`COMPLIANCE`: the hinges' ``eps_lin`` [m/N] and ``eps_rot`` [rad/(N m)],
a contact's ``eps``) to the same number, seed 001's "global hinge compliance";
``None`` keeps the model's own values.
"""

from __future__ import annotations

import math
import os
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mbfg.errors import DataError, MbfgError, ModelError
from mbfg.logs import Log

__all__ = ["COLUMNS", "COMPLIANCE", "SweepResult", "default_cache_dir", "sweep"]

#: Parameters a swept compliance eps sets (those the model has).
COMPLIANCE = ("eps_lin", "eps_rot", "eps")
#: Columns every row has, in order; then value:NAME and std:NAME per free parameter.
#: kind: "calibration" or "crossval"; log: the recording tuned on; scored_log: the one scored
#: (the same for a calibration); h [s], weight, eps (NaN: the model's own compliances);
#: status "ok" or "error"; cost*: per time-step (a calibration's); score: the cross-validation
#: cost per time-step; wall_s, compile_s: of the task (compile_s: JAX tracing, lowering and
#: compiling in it); worker: the worker's address.
COLUMNS = ("kind", "log", "scored_log", "h", "weight", "eps", "status", "error", "cost", "cost_observation",
           "cost_impulse", "score", "iterations", "converged", "sigma_observation", "sigma_impulse", "wall_s",
           "compile_s", "worker")
_KEY = ("kind", "log", "scored_log", "h", "weight", "eps")


def default_cache_dir() -> str:
    """The sweep's JAX compilation cache folder when none is given: ``$XDG_CACHE_HOME/mbfg/jax``
    (``~/.cache/mbfg/jax``), resolved on each worker's own machine."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "mbfg", "jax")


# ----------------------------------------------------------------------------- worker side

#: Per worker process: the compile-time counter (seconds) fed by JAX's monitoring events.
_COMPILE_S = [0.0]
_JAX_READY: dict[str, Any] = {}
#: Per worker process: (id(model), eps) -> (model, model with that compliance), so the cells
#: of one eps share one model object and so their compiled factor types.
_EPS_MODELS: dict[tuple[int, float], tuple[Any, Any]] = {}


def _setup_jax(cache_dir: str | bool | None) -> None:
    """Point JAX's persistent compilation cache at ``cache_dir`` (False: none) before this process
    compiles anything, and count compile time. Idempotent; runs at the start of every task."""
    if "done" in _JAX_READY:
        return
    from mbfg._jax import jax

    if cache_dir is not False:
        folder = default_cache_dir() if cache_dir in (None, True) else str(cache_dir)
        os.makedirs(folder, exist_ok=True)
        jax.config.update("jax_compilation_cache_dir", folder)
        # Cache every compilation: the factor types' are each well under JAX's 1 s default.
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)

    def listen(event: str, duration: float, **_: Any) -> None:
        if event.startswith("/jax/core/compile/"):  # tracing, lowering to MLIR, backend compile
            _COMPILE_S[0] += duration

    jax.monitoring.register_event_duration_secs_listener(listen)
    _JAX_READY["done"] = cache_dir


def _with_eps(model, eps: float | None):
    if eps is None or (isinstance(eps, float) and math.isnan(eps)):
        return model
    key = (id(model), float(eps))
    if key not in _EPS_MODELS:
        names = [n for n in COMPLIANCE if n in model.parameters]
        if not names:
            raise ModelError(f"{model.name} has no compliance parameter ({', '.join(COMPLIANCE)}) for eps to set")
        _EPS_MODELS[key] = (model, model.with_parameters({n: float(eps) for n in names}))
    return _EPS_MODELS[key][1]


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


def calibration_task(model, log: Log, name: str, h: float, weight: float, eps: float | None,
                     free: Sequence[str] | None, options: Mapping[str, Any], cache_dir: str | bool | None) -> dict:
    """One cell: calibrate ``model`` (with compliance ``eps``) on ``log`` at (h, w); a row of the results."""
    _setup_jax(cache_dir)

    def work() -> dict[str, Any]:
        from mbfg.calibration import calibrate

        result = calibrate(_with_eps(model, eps), log, free=free, h=h, weight=weight, quiet=True, **options)
        out = dict(cost=result.cost, cost_observation=result.cost_observation, cost_impulse=result.cost_impulse,
                   iterations=result.iterations, converged=result.converged,
                   sigma_observation=result.sigma_observation, sigma_impulse=result.sigma_impulse)
        for p in result.parameters:
            out[f"value:{p.name}"], out[f"std:{p.name}"] = p.value, p.std
        return out

    return _run_task(_row("calibration", name, name, h, weight, eps), work)


def crossval_task(model, calibration: Mapping[str, Any], log: Log, name: str, options: Mapping[str, Any],
                  cache_dir: str | bool | None) -> dict:
    """Score a tuned cell (a calibration row) on another recording ``log`` at the cell's h, w and eps."""
    _setup_jax(cache_dir)
    eps = calibration["eps"]
    row = _row("crossval", calibration["log"], name, calibration["h"], calibration["weight"], eps)

    def work() -> dict[str, Any]:
        from mbfg.graphs.joint import cross_validation_score

        if calibration.get("status") != "ok":
            raise MbfgError(f"the calibration on {calibration['log']} failed ({calibration.get('error')})")
        tuned = _with_eps(model, eps)
        values = tuned.parameters.numpy_values() | identified_values(tuned, calibration)
        return dict(score=cross_validation_score(tuned, log, values, h=calibration["h"],
                                                 weight=calibration["weight"], **options))

    return _run_task(row, work)


def identified_values(model, row: Mapping[str, Any]) -> dict[str, Any]:
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


def _row(kind: str, log: str, scored: str, h: float, weight: float, eps: float | None) -> dict[str, Any]:
    row: dict[str, Any] = {c: math.nan for c in COLUMNS}
    row.update(kind=kind, log=log, scored_log=scored, h=float(h), weight=float(weight),
               eps=math.nan if eps is None else float(eps), status="", error="", worker="")
    return row


# ----------------------------------------------------------------------------- results


def _key(row: Mapping[str, Any]) -> tuple:
    """A row's identity: kind, logs, and the method parameters at 12 significant digits (CSV round trip)."""
    def num(x: Any) -> str:
        x = float(x)
        return "nan" if math.isnan(x) else f"{x:.12g}"

    return (row["kind"], str(row["log"]), str(row["scored_log"]), num(row["h"]), num(row["weight"]), num(row["eps"]))


def _frame(rows: Iterable[Mapping[str, Any]]):
    import pandas as pd

    frame = pd.DataFrame(list(rows))
    for c in COLUMNS:
        if c not in frame:
            frame[c] = math.nan
    extra = sorted(c for c in frame.columns if c not in COLUMNS)
    return frame[list(COLUMNS) + extra]


def read_results(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The rows of a results file written by :func:`sweep` (CSV)."""
    import pandas as pd

    try:
        frame = pd.read_csv(path, float_precision="round_trip")
    except (OSError, pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise DataError(f"{path}: cannot read the sweep results ({exc})") from None
    missing = [c for c in _KEY + ("status",) if c not in frame]
    if missing:
        raise DataError(f"{path}: not a sweep results file (no column {missing[0]!r}); "
                        "give --out a new file name or the file of an earlier sweep")
    for c in ("status", "error", "worker", "log", "scored_log"):
        if c in frame:
            frame[c] = frame[c].fillna("").astype(str)
    return frame.to_dict("records")


def _write(rows: Iterable[Mapping[str, Any]], path: Path) -> None:
    tmp = path.with_name(path.name + ".part")
    try:
        _frame(rows).to_csv(tmp, index=False)
        os.replace(tmp, path)  # a reader (or a crash) never sees half a file
    except OSError as exc:
        raise DataError(f"--out {path}: cannot write the results ({exc.strerror or exc})") from None


@dataclass
class SweepResult:
    """What :func:`sweep` found: ``frame`` (every row, :data:`COLUMNS`), ``computed`` (tasks run by
    this call, 0 when everything was in the results file already) and ``wall_s``."""

    frame: Any
    computed: int
    wall_s: float

    @property
    def calibrations(self):
        """The calibration rows (one per cell)."""
        return self.frame[self.frame["kind"] == "calibration"].reset_index(drop=True)

    @property
    def crossval(self):
        """The cross-validation rows (one per tuned cell and other recording)."""
        return self.frame[self.frame["kind"] == "crossval"].reset_index(drop=True)

    def matrix(self):
        """The cross-validation matrix: rows (log, h, weight, eps) of the tuned cells, columns the scored
        recordings; the diagonal holds each calibration's own cost (seed 001 Tables 3-4 put them side by side)."""
        import pandas as pd

        cal = self.calibrations.assign(scored_log=lambda f: f["log"], score=lambda f: f["cost"])
        both = pd.concat([cal, self.crossval], ignore_index=True)
        return both.pivot_table(index=["log", "h", "weight", "eps"], columns="scored_log", values="score",
                                dropna=False)

    def plot(self, path: str | os.PathLike[str] | None = None):
        """Seed 001 Figure 4 (identified parameters and cost against w) and the cross-validation heat map;
        saved to ``path`` if given. Needs matplotlib (``pip install 'mbfg[plot]'``)."""
        from mbfg.sweep_plot import plot

        return plot(self, path)


# ----------------------------------------------------------------------------- the sweep


def _as_logs(logs: Mapping[str, Log | str] | Sequence[Log | str], model) -> dict[str, Log]:
    from mbfg.logs import read_log

    items = list(logs.items()) if isinstance(logs, Mapping) else [
        (item.source if isinstance(item, Log) else str(item), item) for item in logs]
    out: dict[str, Log] = {}
    for name, item in items:
        if name in out:
            raise DataError(f"recording {name!r} is given twice; recordings need distinct names "
                            "(pass a mapping name -> log)")
        out[name] = item if isinstance(item, Log) else read_log(item, model.observations, model.controls)
    if not out:
        raise DataError("no recordings to sweep over")
    return out


def _values(what: str, values: Iterable[float | None] | float | None, allow_none: bool) -> list[float | None]:
    items = list(values) if isinstance(values, Iterable) else [values]
    if not items:
        raise ModelError(f"{what}: expected at least one value")
    for v in items:
        if v is None and allow_none:
            continue
        if v is None or not (math.isfinite(float(v)) and float(v) > 0):
            raise ModelError(f"{what}: expected finite numbers > 0, got {v!r}")
    return [None if v is None else float(v) for v in items]


def _period(log: Log) -> float:
    return float(np.median(np.diff(log.t))) if len(log.t) > 1 else math.nan


def sweep(
    model,
    logs: Mapping[str, Log | str] | Sequence[Log | str],
    *,
    h: Iterable[float | None] | float | None = None,
    weight: Iterable[float] | float = 1e6,
    eps: Iterable[float | None] | float | None = None,
    free: Sequence[str] | None = None,
    out: str | os.PathLike[str] | None = None,
    crossval: bool = True,
    scheduler: str | None = None,
    client: Any = None,
    n_workers: int | None = None,
    retry_failed: bool = False,
    cache_dir: str | os.PathLike[str] | bool | None = None,
    max_iterations: int = 20,
    quiet: bool = False,
) -> SweepResult:
    """Calibrate ``model`` on every recording for every (h, w, eps), then cross-validate each tuned cell
    on every other recording (module docstring).

    Args:
        model: a :class:`~mbfg.rigid.RigidModel` (its values are the start, its bounds the box) or a
            built-in model name / model file path.
        logs: the recordings: :class:`~mbfg.logs.Log` objects or CSV paths, or a mapping name -> either
            (names label the rows; a log's own name is its ``source``).
        h: time-steps [s], each a whole multiple of the sample period (None: the period of each log).
        weight: state error weights w. eps: global compliances (None: the model's own; see module docstring).
        free: the parameters to identify (default: those the model marks free).
        out: results CSV; rows already there are skipped, new ones written after every finished task.
        crossval: also score every tuned cell on every other recording (same h, w, eps).
        scheduler: address of a running Dask scheduler (``tcp://host:8786``); default an in-process
            LocalCluster of ``n_workers`` single-threaded worker processes (default: one per core).
        client: an existing ``distributed.Client`` to use instead (not closed here).
        retry_failed: run the cells whose row in ``out`` says error again.
        cache_dir: JAX's persistent compilation cache on the workers (default :func:`default_cache_dir`;
            False: none).
        max_iterations: LM iterations of each calibration and of each cross-validation's state estimation.
        quiet: no progress lines (one per finished task, on stderr).
    """
    from mbfg.models import load_model

    start = time.perf_counter()
    if isinstance(model, str):
        model = load_model(model)
    recordings = _as_logs(logs, model)
    hs = _values("h", h, allow_none=True)
    ws = _values("weight", weight, allow_none=False)
    epss = _values("eps", eps, allow_none=True)
    if any(e is not None for e in epss) and not any(n in model.parameters for n in COMPLIANCE):
        raise ModelError(f"eps: {model.name} has no compliance parameter ({', '.join(COMPLIANCE)})")
    path = Path(out) if out is not None else None
    rows: dict[tuple, dict[str, Any]] = {}
    if path is not None and path.exists():
        rows = {_key(r): r for r in read_results(path)}
        if retry_failed:
            rows = {k: r for k, r in rows.items() if r["status"] == "ok"}
    cells = [(name, hh if hh is not None else _period(log), w, e)
             for name, log in recordings.items() for hh in hs for w in ws for e in epss]
    todo_cal = [c for c in cells if _key(_row("calibration", c[0], c[0], *c[1:])) not in rows]
    todo_cv = [(c, other) for c in cells for other in recordings if crossval and other != c[0]
               and _key(_row("crossval", c[0], other, *c[1:])) not in rows]
    computed = 0
    if todo_cal or todo_cv:
        computed = _run(model, recordings, todo_cal, todo_cv, rows, path, free, max_iterations, cache_dir,
                        scheduler, client, n_workers, quiet)
    wanted = {_key(_row("calibration", c[0], c[0], *c[1:])) for c in cells} | {
        _key(_row("crossval", c[0], o, *c[1:])) for c in cells for o in recordings if crossval and o != c[0]}
    frame = _frame(r for k, r in rows.items() if k in wanted)
    return SweepResult(frame, computed, time.perf_counter() - start)


def _run(model, recordings: dict[str, Log], todo_cal: list, todo_cv: list, rows: dict, path: Path | None,
         free, max_iterations: int, cache_dir, scheduler: str | None, client, n_workers: int | None,
         quiet: bool) -> int:
    from distributed import Client, LocalCluster, as_completed

    own_client = client is None
    cluster = None
    if own_client and scheduler:
        try:
            client = Client(scheduler, timeout="20s")
        except OSError as exc:
            raise DataError(f"--scheduler {scheduler}: cannot connect ({exc})") from None
    elif own_client:
        cluster = LocalCluster(n_workers=n_workers or os.cpu_count() or 1, threads_per_worker=1, processes=True,
                               dashboard_address=None)
        client = Client(cluster)
    cache = str(cache_dir) if isinstance(cache_dir, os.PathLike) else cache_dir
    total = len(todo_cal) + len(todo_cv)
    done = 0
    t0 = time.perf_counter()
    try:
        # One copy of the model per worker, kept for the whole sweep: its compiled factor types are reused.
        shared = client.scatter(model, broadcast=True)
        options = dict(max_iterations=max_iterations)
        futures: dict[Any, dict[str, Any]] = {}
        cal_futures = {}
        for name, hh, w, e in todo_cal:
            f = client.submit(calibration_task, shared, recordings[name], name, hh, w, e, free, options, cache,
                              pure=False, priority=1)
            cal_futures[(name, hh, w, e)] = f
            futures[f] = _row("calibration", name, name, hh, w, e)
        for (name, hh, w, e), other in todo_cv:
            source = cal_futures.get((name, hh, w, e)) or rows[_key(_row("calibration", name, name, hh, w, e))]
            f = client.submit(crossval_task, shared, source, recordings[other], other, options, cache, pure=False)
            futures[f] = _row("crossval", name, other, hh, w, e)
        for future in as_completed(list(futures)):
            try:
                row = future.result()
            except Exception as exc:  # the worker died (or the task could not even start): record it
                row = dict(futures[future], status="error", error=f"{type(exc).__name__}: {exc}")
            rows[_key(row)] = row
            done += 1
            if path is not None:
                _write(rows.values(), path)
            if not quiet:
                _progress(row, done, total, time.perf_counter() - t0)
    finally:
        if own_client:
            client.close()
            if cluster is not None:
                cluster.close()
    return done


def _progress(row: Mapping[str, Any], done: int, total: int, elapsed: float) -> None:
    what = "calibrate" if row["kind"] == "calibration" else f"crossval on {row['scored_log']}"
    eps = "" if math.isnan(float(row["eps"])) else f" eps={float(row['eps']):g}"
    if row["status"] == "ok":
        figure = f"cost {row['cost']:.4g}" if row["kind"] == "calibration" else f"score {row['score']:.4g}"
        result = f"{figure} ({row['wall_s']:.1f} s, compile {row['compile_s']:.1f} s)"
    else:
        result = f"FAILED: {str(row['error'])[:160]}"
    print(f"[sweep] {done}/{total} t={elapsed:.0f}s {what} {row['log']} h={float(row['h']):g} "
          f"w={float(row['weight']):g}{eps}: {result}", file=sys.stderr, flush=True)
