"""Method-parameter sweeps and cross-validation matrices on Dask (Marklund et al. (2025) sections 4.5-4.7).

Marklund et al. (2025) leaves three method parameters to the user: the time-step h, the state
error weight w and the constraint compliance eps. Its Figures 4 and 6 sweep
them, and its Tables 3 and 4 score every tuned model on every other recording.
:func:`sweep` runs that grid, h x w x eps x recordings, as independent tasks on
a ``dask.distributed`` cluster (Dask is the optional ``sweep`` extra: ``pip install 'mbfg[sweep]'``):

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
a contact's ``eps``) to the same number, Marklund et al.'s (2025) "global hinge compliance";
``None`` keeps the model's own values.
"""

from __future__ import annotations

import hashlib
import logging
import math
import os
import pickle
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from mbfg.errors import DataError, ModelError
from mbfg.logs import Log
from mbfg.optional import require
from mbfg.sweep_tasks import (
    COLUMNS,
    COMPLIANCE,
    calibration_task,
    crossval_task,
    empty_row,
    identified_values,
)

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

    from mbfg.rigid import RigidModel

__all__ = ["COLUMNS", "COMPLIANCE", "SweepResult", "identified_values", "read_results", "sweep"]

_LOG = logging.getLogger("mbfg.sweep")

_KEY = ("kind", "log", "scored_log", "h", "weight", "eps")


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
        frame = pd.read_csv(path)  # pandas reads back the shortest round-trip repr it writes
    except (OSError, pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise DataError(f"{path}: cannot read the sweep results ({exc})") from None
    missing = [c for c in _KEY + ("status",) if c not in frame]
    if missing:
        raise DataError(f"{path}: not a sweep results file (no column {missing[0]!r}); "
                        "give --out a new file name or the file of an earlier sweep")
    for c in ("status", "error", "worker", "log", "scored_log", "solve_status", "solve_message"):
        if c in frame:
            frame[c] = frame[c].astype(object).where(frame[c].notna(), "").astype(str)
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
    def calibrations(self) -> pd.DataFrame:
        """The calibration rows (one per cell)."""
        return self.frame[self.frame["kind"] == "calibration"].reset_index(drop=True)

    @property
    def crossval(self) -> pd.DataFrame:
        """The cross-validation rows (one per tuned cell and other recording)."""
        return self.frame[self.frame["kind"] == "crossval"].reset_index(drop=True)

    def matrix(self) -> pd.DataFrame:
        """The cross-validation matrix: rows (log, h, weight, eps) of the tuned cells, columns the scored
        recordings; the diagonal holds each calibration's own cost (Marklund et al. (2025) Tables 3-4 put them side by side)."""
        import pandas as pd

        cal = self.calibrations.assign(scored_log=lambda f: f["log"], score=lambda f: f["cost"])
        both = pd.concat([cal, self.crossval], ignore_index=True)
        return both.pivot_table(index=["log", "h", "weight", "eps"], columns="scored_log", values="score",
                                dropna=False)

    def plot(self, path: str | os.PathLike[str] | None = None) -> Figure:
        """Marklund et al. (2025) Figures 4 and 6 (identified parameters and cost against each swept w, eps and h) and
        the cross-validation heat map; saved to ``path`` if given. Needs matplotlib (``pip install 'mbfg[plot]'``)."""
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
    model: RigidModel | str,
    logs: Mapping[str, Log | str] | Sequence[Log | str],
    *,
    h: Iterable[float | None] | float | None = None,
    weight: Iterable[float] | float | None = None,
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
    simulate: float | None = None,
    quiet: bool = False,
    crossval_iterations: int | None = None,
) -> SweepResult:
    """Calibrate ``model`` on every recording for every (h, w, eps), then cross-validate each tuned cell
    on every other recording (module docstring).

    Args:
        model: a :class:`~mbfg.rigid.RigidModel` (its values are the start, its bounds the box) or a
            built-in model name / model file path.
        logs: the recordings: :class:`~mbfg.logs.Log` objects or CSV paths, or a mapping name -> either
            (names label the rows; a log's own name is its ``source``).
        h: time-steps [s], each a whole multiple of the sample period (None: the period of each log).
        weight: state error weights w (None: the model's, ``model.weight``).
        eps: global compliances (None: the model's own; see module docstring).
        free: the parameters to identify (default: those the model marks free).
        out: results CSV; rows already there are skipped, new ones written after every finished task.
        crossval: also score every tuned cell on every other recording (same h, w, eps).
        scheduler: address of a running Dask scheduler (``tcp://host:8786``); default an in-process
            LocalCluster of ``n_workers`` single-threaded worker processes (default: one per core).
        client: an existing ``distributed.Client`` to use instead (not closed here).
        retry_failed: run the cells whose row in ``out`` says error again.
        cache_dir: JAX's persistent compilation cache on the workers (default: the folder
            :func:`mbfg.enable_compilation_cache` chooses on each worker, ``MBFG_CACHE_DIR=off`` none;
            False: none).
        max_iterations: LM iterations of each calibration at most.
        simulate: also free-simulate each tuned model over the first ``simulate`` seconds of every other
            recording (:func:`mbfg.validation.free_simulation`, at the cell's h): the cross-validation rows
            gain ``sim_rms:NAME`` [rad] and ``sim_drift:NAME`` [s] per observed angle.
        quiet: no progress records (one per finished task, INFO on the ``mbfg.sweep`` logger).
        crossval_iterations: LM iterations of each cross-validation's state estimation at most (default:
            :data:`~mbfg.graphs.joint.STATE_ESTIMATION_ITERATIONS`, as :func:`~mbfg.graphs.joint.estimate_states`
            and ``mbfg crossval``, so that the matrix holds their scores); its row says whether it converged
            (``solve_status`` "converged", "not_converged" or "failed", and ``solve_message`` the reason).
    """
    from mbfg.calibration_arguments import whole
    from mbfg.graphs.joint import STATE_ESTIMATION_ITERATIONS
    from mbfg.models import load_model

    require("distributed", "a sweep")  # the sweep extra: said before the recordings are read
    start = time.perf_counter()
    if isinstance(model, str):
        model = load_model(model)
    recordings = _as_logs(logs, model)
    hs = _values("h", h, allow_none=True)
    ws = cast("list[float]", _values("weight", model.weight if weight is None else weight, allow_none=False))
    epss = _values("eps", eps, allow_none=True)
    if any(e is not None for e in epss) and not any(n in model.parameters for n in COMPLIANCE):
        raise ModelError(f"eps: {model.name} has no compliance parameter ({', '.join(COMPLIANCE)})")
    if crossval_iterations is None:
        crossval_iterations = STATE_ESTIMATION_ITERATIONS
    whole("max_iterations", max_iterations, 1)
    whole("crossval_iterations", crossval_iterations, 1)
    if simulate is not None and not (math.isfinite(simulate) and simulate > 0):
        raise ModelError(f"simulate must be a positive number of seconds, got {simulate!r}")
    if simulate is not None and not crossval:
        raise ModelError("simulate: the free simulations run on the other recordings, with the cross-validation; "
                         "it is off (crossval=False, --no-crossval)")
    path = Path(out) if out is not None else None
    rows: dict[tuple, dict[str, Any]] = {}
    if path is not None and path.exists():
        rows = {_key(r): r for r in read_results(path)}
        if retry_failed:
            rows = {k: r for k, r in rows.items() if r["status"] == "ok"}
    cells = [(name, hh if hh is not None else _period(log), w, e)
             for name, log in recordings.items() for hh in hs for w in ws for e in epss]
    todo_cal = [c for c in cells if _key(empty_row("calibration", c[0], c[0], *c[1:])) not in rows]
    todo_cv = [(c, other) for c in cells for other in recordings if crossval and other != c[0]
               and _key(empty_row("crossval", c[0], other, *c[1:])) not in rows]
    computed = 0
    if todo_cal or todo_cv:
        computed = _run(model, recordings, todo_cal, todo_cv, rows, path, free, max_iterations, crossval_iterations,
                        simulate, cache_dir, scheduler, client, n_workers, quiet)
    wanted = {_key(empty_row("calibration", c[0], c[0], *c[1:])) for c in cells} | {
        _key(empty_row("crossval", c[0], o, *c[1:])) for c in cells for o in recordings if crossval and o != c[0]}
    frame = _frame(r for k, r in rows.items() if k in wanted)
    return SweepResult(frame, computed, time.perf_counter() - start)


def _run(model, recordings: dict[str, Log], todo_cal: list, todo_cv: list, rows: dict, path: Path | None,
         free, max_iterations: int, crossval_iterations: int, simulate: float | None, cache_dir,
         scheduler: str | None, client, n_workers: int | None, quiet: bool) -> int:
    from distributed import Client, LocalCluster, as_completed

    from mbfg.calibration_options import CalibrationOptions, calibration_lm
    from mbfg.graphs.joint import state_estimation_lm

    own_client = client is None
    cluster = None
    if own_client and scheduler:
        try:
            client = Client(scheduler, timeout="20s")
        except (OSError, ValueError, TypeError) as exc:  # distributed raises ValueError for a malformed address
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
        # Each worker unpickles the model once and keeps it: its compiled factor types are reused.
        blob = pickle.dumps(model)
        shared = (hashlib.sha1(blob).hexdigest(), blob)
        # The LM options of each kind of task: the calibration's and the state estimation's defaults for the
        # model, at the sweep's iteration limits.
        cal_lm = calibration_lm(model, max_iterations=max_iterations)
        cv_lm = state_estimation_lm(model, max_iterations=crossval_iterations)
        futures: dict[Any, dict[str, Any]] = {}
        cal_futures = {}
        prefer = _placement(todo_cal, recordings, list(client.scheduler_info().get("workers", {})))
        for name, hh, w, e in todo_cal:
            # A preferred worker only where there is one: Dask refuses allow_other_workers without workers.
            cell = (name, hh, w, e)
            where = {"workers": prefer[cell], "allow_other_workers": True} if cell in prefer else {}
            f = client.submit(calibration_task, shared, recordings[name], name, hh, w, e, free, cal_lm,
                              CalibrationOptions(), cache, pure=False, priority=1, **where)
            cal_futures[(name, hh, w, e)] = f
            futures[f] = empty_row("calibration", name, name, hh, w, e)
        for (name, hh, w, e), other in todo_cv:
            source = cal_futures.get((name, hh, w, e)) or rows[_key(empty_row("calibration", name, name, hh, w, e))]
            f = client.submit(crossval_task, shared, source, recordings[other], other, cv_lm, simulate, cache, free,
                              pure=False)
            futures[f] = empty_row("crossval", name, other, hh, w, e)
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


def _placement(cells: list, recordings: dict[str, Log], workers: list[str]) -> dict[tuple, list[str]]:
    """A preferred worker per calibration cell: cells that compile the same functions (same number of
    time-steps, same eps) on the same worker, in equal shares. A worker compiles once per distinct
    shape, so this halves the compiles of a 2 h x n w grid on 2 workers. A preference only (the
    scheduler may run a cell elsewhere); none with fewer than 2 workers."""
    if len(workers) < 2 or len(cells) < 2:
        return {}
    def steps(cell: tuple) -> int:
        log = recordings[cell[0]]
        return int(round((log.t[-1] - log.t[0]) / cell[1]))

    order = sorted(cells, key=lambda c: (steps(c), str(c[3]), c[2], c[0]))
    share = math.ceil(len(order) / len(workers))
    return {cell: [workers[i // share]] for i, cell in enumerate(order)}


def _progress(row: Mapping[str, Any], done: int, total: int, elapsed: float) -> None:
    what = "calibrate" if row["kind"] == "calibration" else f"crossval on {row['scored_log']}"
    eps = "" if math.isnan(float(row["eps"])) else f" eps={float(row['eps']):g}"
    if row["status"] == "ok":
        figure = f"cost {row['cost']:.4g}" if row["kind"] == "calibration" else f"score {row['score']:.4g}"
        result = f"{figure} ({row['wall_s']:.1f} s, compile {row['compile_s']:.1f} s)"
    else:
        result = f"FAILED: {str(row['error'])[:160]}"
    _LOG.info(f"[sweep] {done}/{total} t={elapsed:.0f}s {what} {row['log']} h={float(row['h']):g} "
              f"w={float(row['weight']):g}{eps}: {result}")
