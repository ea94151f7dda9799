"""The recordings ``mbfg calibrate``, ``crossval`` and ``sweep`` read: a standard log, or a lab's own CSV.

:func:`read_recording` reads a file given as LOG. It tells the formats apart by the
file's header line:

- **DFKI double pendulum** (the underactuated lab's ``trajectory_NN.csv``): columns
  ``time, pos_meas1, pos_meas2, tau_meas1, tau_meas2`` (others ignored), read by
  :func:`mbfg.datasets.rigs.load_dfki_double_pendulum` as observations ``q1, q2``
  and controls ``tau1, tau2`` (the models ``double-pendulum-torque`` and
  ``dfki-double-pendulum``). Its samples are not uniformly spaced.
- **QUBE-Servo** (decargroup/closed_loop_koopman episodes): columns ``t, theta,
  alpha, plant_input``, read by :func:`mbfg.datasets.rigs.load_qube` as ``theta``,
  ``alpha = pi - alpha_file`` (the file's 0 is upright and turns the other way) and
  ``u = plant_input`` (the ``furuta`` models).
- Anything else is a log in the standard format and goes to :func:`mbfg.logs.read_log`
  unchanged (no check added, nothing printed).

A lab recording is checked against the model: its observations and controls must
be the model's, in the model's order, or it is refused (file, format and what the
model expects named). Its sampling is checked by the estimation's own rule (every
interval within 1 % of the median period, :func:`mbfg.graphs.joint.time_step`): a
recording with irregular intervals is refused, with their count, unless the caller
asks for a uniform grid (``resample=H``, the commands' ``--resample H``), which
:func:`mbfg.datasets.rigs.resample_uniform` makes and one line on stderr reports.
Nothing is resampled, dropped or reordered unasked.

A regular recording's times are checked against their uniform grid (:func:`mbfg.logs.time_grid`): jitter
below :data:`mbfg.logs.SNAP_TOLERANCE` of the period (a rig's clock written with rounding) is snapped onto
the grid, with one line on stderr; a recording with rows further off is refused, naming how many, unless
``--resample H`` asks for a grid: at the recording's own period it is put on its own grid
(:func:`mbfg.logs.onto_grid`: observations interpolated at the grid times, each row's control kept), at
another step resampled as above.
"""

from __future__ import annotations

import csv
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from mbfg.errors import DataError

if TYPE_CHECKING:
    from mbfg.logs import Log
    from mbfg.rigid import RigidModel

__all__ = ["read_recording"]

#: The relative deviation from the median sample period above which an interval is irregular (the
#: estimation's rule in mbfg.graphs.joint.time_step).
_RTOL = 0.01


@dataclass(frozen=True)
class _Format:
    name: str  # "DFKI double pendulum recording"
    columns: tuple[str, ...]  # the header columns that identify it (those its loader reads)
    observations: tuple[str, ...]
    controls: tuple[str, ...]
    meaning: str  # how the loader maps the file's columns
    models: str  # the built-in models that fit it
    period: float  # nominal sample period [s]
    load: Callable[[str], Log]


def _load_dfki(path: str) -> Log:
    from mbfg.datasets.rigs import load_dfki_double_pendulum

    return load_dfki_double_pendulum(path)


def _load_qube(path: str) -> Log:
    from mbfg.datasets.rigs import load_qube

    # load_qube refuses non-uniform sampling in its own (Python API) words; the sampling is checked below by
    # the same rule for every format, with the command line's remedy (--resample), so its check is opened wide.
    return load_qube(path, rtol=1e12)


def _formats() -> tuple[_Format, ...]:
    from mbfg.datasets.rigs import DFKI_PERIOD, QUBE_PERIOD

    return (
        _Format(
            "DFKI double pendulum recording", ("time", "pos_meas1", "pos_meas2", "tau_meas1", "tau_meas2"),
            ("q1", "q2"), ("tau1", "tau2"),
            "q1, q2 = pos_meas1, pos_meas2 [rad]; tau1, tau2 = tau_meas1, tau_meas2 [N m]",
            "double-pendulum-torque, dfki-double-pendulum", DFKI_PERIOD, _load_dfki,
        ),
        _Format(
            "QUBE-Servo recording", ("t", "theta", "alpha", "plant_input"),
            ("theta", "alpha"), ("u",),
            "theta; alpha = pi - alpha_file (the file's 0 is upright, its direction opposite); u = plant_input [V]",
            "furuta, furuta-viscous, qube-servo", QUBE_PERIOD, _load_qube,
        ),
    )


def _header(path: str) -> list[str] | None:
    """The first non-blank line's cells (stripped), None where the file cannot be read as CSV text
    (:func:`mbfg.logs.read_log` then says why, in its words)."""
    try:
        with open(path, encoding="utf-8-sig", newline="") as fh:
            for cells in csv.reader(fh):
                if any(c.strip() for c in cells):
                    return [c.strip() for c in cells]
    except (OSError, UnicodeDecodeError, csv.Error):
        return None
    return None


def _ms(seconds: float) -> str:
    return f"{1e3 * seconds:.5g} ms"


def _listing(names: tuple[str, ...]) -> str:
    return ", ".join(names) if names else "(none)"


def _irregular(t: np.ndarray) -> tuple[int, str]:
    """(number of irregular sample intervals, a description: median period, gaps, time missing, shorter ones).

    Irregular: more than 1 % longer (a gap) or shorter than the median period (:func:`mbfg.logs.sample_period`).
    """
    from mbfg.datasets.rigs import find_gaps
    from mbfg.logs import sample_period

    if len(t) < 2:
        return 0, "a single row"
    period = sample_period(t)
    dt = np.diff(t)
    longer = find_gaps(t, period, _RTOL)
    shorter = np.flatnonzero(dt < period * (1 - _RTOL))
    gaps = (f"{longer.size} gaps (longer, up to {_ms(float(dt[longer].max()))}; "
            f"{_ms(float(np.sum(dt[longer] - period)))} of samples missing in all)") if longer.size else "no gaps"
    irregular = longer.size + shorter.size
    return irregular, (f"{irregular} of its {len(dt)} sample intervals are irregular (more than {100 * _RTOL:g} % "
                       f"off the median period {_ms(period)}): {gaps} and {shorter.size} shorter")


def _read_columns(path: str, model: RigidModel, columns: list[str], standard: tuple[str, ...]) -> Log:
    """The columns ``columns`` of the standard log ``path`` as the model's ``standard`` (t, observations,
    controls); DataError naming --columns when their number is not the model's."""
    from mbfg.logs import Log, read_log

    if len(columns) != len(standard):
        raise DataError(f"--columns {','.join(columns)}: {len(columns)} names; {model.name!r} needs {len(standard)}, "
                        f"one for each of {', '.join(standard)} (in that order)")
    n_obs = len(model.observations)
    log = read_log(path, columns[1:1 + n_obs], columns[1 + n_obs:], time=columns[0], snap=False)
    return Log(log.t, log.y, log.u, tuple(model.observations), tuple(model.controls), log.source)


def _on_grid(log: Log, path: str, quiet: bool, command: str) -> Log:
    """``log`` with its times snapped onto their uniform grid where their jitter is below
    :data:`mbfg.logs.SNAP_TOLERANCE` of the period (one line on stderr unless ``quiet``); DataError with the number
    of rows off it where some are further, naming --resample; unchanged where it is on its grid or irregular
    (gaps: the estimation refuses it in its own words)."""
    from mbfg.logs import check_on_grid, snap_to_grid, time_grid

    if len(log.t) < 3:
        return log
    snapped, note = snap_to_grid(log)
    if note is not None:
        if not quiet:
            print(f"{command}: {path}: {note}", file=sys.stderr, flush=True)
        return snapped
    grid = time_grid(log.t)
    if grid.regular:
        check_on_grid(log, grid=grid, remedy=f"resample it explicitly with --resample {grid.period:.12g} (its own grid: observations "
                           "interpolated linearly at the grid times, each row's control kept)")
    return log


def read_recording(
    path: str,
    model: RigidModel,
    resample: float | None = None,
    quiet: bool = False,
    command: str = "mbfg",
    columns: list[str] | None = None,
) -> Log:
    """The log in ``path`` for ``model``: a standard log, or a DFKI or QUBE-Servo recording (see the module).

    Args:
        path: the CSV file.
        model: the model it is for (its ``observations``, ``controls`` and ``name``).
        resample: put the recording on the uniform grid ``t[0], t[0] + resample, ...`` [s]
            (:func:`mbfg.datasets.rigs.resample_uniform`); None keeps the file's own times.
        quiet: no line on stderr (a lab format recognised, a resampling done).
        command: the prefix of that line (``"mbfg calibrate"``).
        columns: a standard log's columns to read as the model's t, observations and controls, in that order
            (``--columns``); None: the log's header must name exactly those, nothing else.

    Returns:
        A :class:`mbfg.logs.Log` with the model's observation and control names.

    Raises:
        DataError: what :func:`mbfg.logs.read_log` or the rig loaders raise; a lab recording whose
            observations or controls are not the model's; a lab recording that is not uniformly sampled,
            without ``resample``; both a lab format's and the model's standard columns in one file.
    """
    from mbfg.datasets.rigs import resample_uniform
    from mbfg.logs import read_log

    if resample is not None and not (isinstance(resample, (int, float)) and math.isfinite(resample) and resample > 0):
        raise DataError(f"--resample {resample}: expected a time-step > 0 [s]")
    header = _header(path)
    present = set(header or ())
    fmt = next((f for f in _formats() if present.issuperset(f.columns)), None)
    standard = ("t", *model.observations, *model.controls)
    if columns is not None:
        log = _read_columns(path, model, columns, standard)
        fmt = None
    elif fmt is None:
        extra = [name for name in header or () if name and name not in standard]
        missing = [name for name in standard if header is not None and name not in present]
        if extra and missing:
            raise DataError(
                f"{path}: no column {', '.join(map(repr, missing))} of {model.name!r} (it reads "
                f"{', '.join(standard)}); the log has {', '.join(extra)} instead: a log of another model? Use the "
                f"model the log is of, or say which columns to read with --columns (e.g. --columns "
                f"{','.join(standard)} with the log's names)"
            )
        if extra:
            raise DataError(
                f"{path}: column(s) {', '.join(extra)} are not columns of {model.name!r}, which reads "
                f"{', '.join(standard)}: a log of another model? Use the model the log is of, or say which "
                f"columns to read with --columns (e.g. --columns {','.join(standard)})"
            )
        log = read_log(path, model.observations, model.controls, snap=False)
    if fmt is None:
        if resample is None:
            return _on_grid(log, path, quiet, command)
        what = "a log in the standard format"
    else:
        if present.issuperset(standard):
            raise DataError(
                f"{path}: has the columns of a {fmt.name} ({', '.join(fmt.columns)}) and those of a standard log "
                f"for {model.name} ({', '.join(standard)}); cannot tell which it is. Keep one set of columns"
            )
        if (fmt.observations, fmt.controls) != (tuple(model.observations), tuple(model.controls)):
            raise DataError(
                f"{path}: a {fmt.name} (recognised by its columns {', '.join(fmt.columns)}) gives observations "
                f"{_listing(fmt.observations)} and controls {_listing(fmt.controls)} (for the models {fmt.models}); "
                f"model {model.name!r} expects observations {_listing(tuple(model.observations))} and controls "
                f"{_listing(tuple(model.controls))}. Choose a model that fits the recording, or write the recording "
                f"as a standard log (columns {', '.join(standard)})"
            )
        log = fmt.load(path)
        what = f"a {fmt.name} ({fmt.meaning})"
        if resample is None:
            irregular, sampling = _irregular(log.t)
            if irregular:
                raise DataError(
                    f"{path}: a {fmt.name} that is not uniformly sampled: {sampling}. The estimation needs a "
                    f"uniform time grid; resample it explicitly with --resample {fmt.period:g} (observations "
                    "interpolated linearly and controls held across the gaps: not measured data there)"
                )
            if not quiet:
                print(f"{command}: {path}: read {len(log.t)} rows as {what}", file=sys.stderr, flush=True)
            return _on_grid(log, path, quiet, command)
    from mbfg.limits import steps_of
    from mbfg.logs import onto_grid, time_grid

    steps_of(float(log.t[-1] - log.t[0]), float(resample), f"{path}: a recording of", "--resample")  # rows to make
    grid = time_grid(log.t) if len(log.t) >= 3 else None
    if grid is not None and grid.regular and abs(float(resample) - grid.period) <= grid.tolerance:
        # Its own grid: resample_uniform would hold the previous row's control wherever the clock ran late.
        regridded = onto_grid(log, grid)
        if not quiet:
            print(f"{command}: {path}: read {len(log.t)} rows as {what}; --resample {resample:g}: put on its own "
                  f"uniform grid t = {grid.start:.12g} + k * {grid.period:.12g} s (rows up to "
                  f"{1e9 * grid.max_deviation:.3g} ns off it; observations interpolated linearly at the grid times, "
                  f"each row's control kept): {len(regridded.t)} rows", file=sys.stderr, flush=True)
        return regridded
    resampled = resample_uniform(log, float(resample))
    if not quiet:
        _, sampling = _irregular(log.t)
        print(
            f"{command}: {path}: read {len(log.t)} rows as {what}, {sampling}; --resample {resample:g}: "
            f"resampled onto a uniform {resample:g} s grid (observations interpolated linearly, controls held): "
            f"{len(resampled.t)} rows",
            file=sys.stderr, flush=True,
        )
    return resampled
