"""Figures of results, for a notebook or a report: a calibration, a simulated trajectory, a stream's replay.

matplotlib is an optional dependency (``pip install 'mbfg[plot]'``). This module is the one place that
loads it (:func:`pyplot`, called inside the figure functions; ``import mbfg`` does not import matplotlib),
and :mod:`mbfg.sweep_plot` draws with the same loader. Each figure function returns the matplotlib
``Figure`` and writes it to ``path`` when given (format from the extension: ``.png``, ``.pdf``, ``.svg``).
The results' own methods call them: :meth:`mbfg.calibration.CalibrationResult.plot`,
:meth:`mbfg.spook.Trajectory.plot`, :meth:`mbfg.graphs.stream.StreamReplay.plot` and
:meth:`mbfg.sweep.SweepResult.plot`.
"""

from __future__ import annotations

import os
import sys
from types import ModuleType
from typing import TYPE_CHECKING, Any

import numpy as np

from mbfg.angles import unwrap_angles
from mbfg.errors import DataError, MbfgError
from mbfg.optional import require

if TYPE_CHECKING:
    from matplotlib.figure import Figure

#: Resolution of a figure written to a raster file (``path`` ending in .png) [dots per inch].
DPI = 120


def pyplot(what: str = "plotting") -> ModuleType:
    """``matplotlib.pyplot``, loaded on first use.

    Without a display (a Linux machine with neither ``DISPLAY`` nor ``WAYLAND_DISPLAY``: a cluster
    node, CI) and without a backend chosen in ``MPLBACKEND``, the non-interactive Agg backend is
    selected, so figures are drawn to files; a backend already in use (pyplot imported before) is
    left alone. A Jupyter kernel sets ``MPLBACKEND`` to its inline backend.

    Raises:
        MbfgError: matplotlib is not installed (``what`` names the feature that needs it; the ``plot`` extra of
            :mod:`mbfg.optional`).
    """
    matplotlib = require("matplotlib", what)
    headless = (sys.platform.startswith("linux") and not os.environ.get("DISPLAY")
                and not os.environ.get("WAYLAND_DISPLAY"))
    if headless and not os.environ.get("MPLBACKEND") and "matplotlib.pyplot" not in sys.modules:
        matplotlib.use("Agg")
    return require("matplotlib.pyplot", what)


def save(fig: Figure, path: str | os.PathLike[str] | None) -> None:
    """Write ``fig`` to ``path`` (format from the extension, raster at :data:`DPI`); nothing when None."""
    if path is not None:
        fig.savefig(path, dpi=DPI)


def _unit(model, i: int) -> str:
    return "rad" if model.angle_observation_mask()[i] else "m"


# ----------------------------------------------------------------------------- a calibration


def calibration_curves(result: Any, log: Any = None) -> dict[str, np.ndarray]:
    """The numbers :func:`calibration_figure` draws, from a :class:`~mbfg.calibration.CalibrationResult`.

    ``estimated`` is the observation function h(x_k; chi) at the estimated states and identified
    parameters, hinge angles unwrapped next to the readings; ``residual`` is measured minus estimated
    at the state times, hinge angles wrapped to (-pi, pi] as the observation factors compare them
    (its squares summed over the readings and divided by n are ``result.cost_observation``).

    Args:
        result: a calibration (it keeps its problem and solution).
        log: the calibration's log at its own sample rate (default: the readings at the state times,
            which the result keeps); checked to be that log.

    Returns:
        ``t`` (n,) state times from the log's first sample [s]; ``measured``, ``estimated`` and
        ``residual`` (n, n_obs) at the state times [rad, m] (NaN: a missing reading); ``log_t`` (N,)
        and ``log_y`` (N, n_obs): the readings to draw (the log's rows, or the state times' readings).

    Raises:
        MbfgError: the result keeps no problem; DataError: ``log`` is not the calibration's log.
    """
    from mbfg._jax import jax, jnp
    from mbfg.residuals import wrap_angle

    problem, solution = result.problem, result.solution
    if problem is None or solution is None:
        raise MbfgError("this calibration result keeps no problem and solution (only calibrate()'s results "
                        "can be drawn)")
    model = problem.model
    t, measured = np.asarray(problem.t, dtype=float), np.asarray(problem.y, dtype=float)
    log_t, log_y = t, measured
    if log is not None:
        idx = np.arange(0, len(log.t), problem.stride)
        if (tuple(log.observations) != tuple(model.observations) or len(idx) != len(t)
                or not np.allclose(log.t[idx] - log.t[0], t, rtol=0, atol=1e-9 * max(1.0, abs(t[-1])))
                or not np.array_equal(log.y[idx], measured, equal_nan=True)):
            raise DataError(f"{log.source}: not the log of this calibration (its readings at the "
                            f"{len(t)} state times every {problem.h:g} s differ)")
        log_t, log_y = np.asarray(log.t, dtype=float) - log.t[0], np.asarray(log.y, dtype=float)
    states = problem.states(solution)
    p = {k: jnp.asarray(v) for k, v in problem.parameter_values(solution).items()}
    raw = np.asarray(jax.vmap(lambda x: model.observe(x, p))(type(states)(*(jnp.asarray(a) for a in states))))
    hinge = model.angle_observation_mask()
    residual = measured - raw
    residual[:, hinge] = np.asarray(wrap_angle(residual[:, hinge]))
    estimated = raw.copy()
    for i in np.flatnonzero(hinge):  # unwrapped, on the readings' turn
        est = np.unwrap(raw[:, i])
        ok = np.flatnonzero(np.isfinite(measured[:, i]))
        if ok.size:
            k = ok[0]
            est += 2 * np.pi * np.round((measured[k, i] - residual[k, i] - est[k]) / (2 * np.pi))
        estimated[:, i] = est
    return {"t": t, "measured": measured, "estimated": estimated, "residual": residual, "log_t": log_t,
            "log_y": log_y}


def parameter_bars(result: Any) -> dict[str, np.ndarray]:
    """The bars of :func:`calibration_figure`: each free parameter relative to its own size (unit-free).

    Returns ``names`` (n_p,); ``height`` value / |value| (+1 or -1; 0 for a value of 0); ``error``
    std / |value| (for a value of 0: 1, the std being the scale; NaN where the std is not finite or
    not computed); ``scale`` |value| (or the std, or 1) [the parameter's unit]; ``excited`` and
    ``at_bound`` (n_p,) booleans (the result's flags).
    """
    params = result.parameters
    value = np.array([p.value for p in params], dtype=float)
    std = np.array([p.std for p in params], dtype=float)
    scale = np.array([abs(p.value) if p.value != 0 else (p.std if np.isfinite(p.std) and p.std > 0 else 1.0)
                      for p in params], dtype=float)
    error = np.where(np.isfinite(std), std / scale, np.nan)
    return {"names": np.array([p.name for p in params], dtype=object), "height": value / scale, "error": error,
            "scale": scale, "excited": np.array([p.excited for p in params], dtype=bool),
            "at_bound": np.array([p.at_bound for p in params], dtype=bool)}


def calibration_figure(result: Any, log: Any = None, path: str | os.PathLike[str] | None = None) -> Figure:
    """A calibration at a glance: the fit, its residuals, the cost per step and the parameters.

    Axes, in a grid of n_obs + 1 rows and 2 columns (``fig.axes`` in this order):

    - per observation i, axes ``2 i``: the logged reading (the log's rows when ``log`` is given, else the
      readings at the state times) and h(x_k; chi) at the estimated states against t [s] (lines 0 and 1);
      axes ``2 i + 1``: the residual measured - estimated at the state times [rad, m] (line 0);
    - axes ``2 n_obs``: the per-step cost ``result.per_step_cost`` (n,) against the state times (line 0;
      log scale when all positive);
    - axes ``2 n_obs + 1``: one bar per free parameter, its value / |value| with +-1 std / |value| error
      bars (relative: the parameters have different units), labelled with the name and std / |value|; a parameter
      not excited (std > |value|) in red, one at a bound hatched in orange, one without a std
      (``CalibrationOptions(covariance=False)``) in grey (:func:`parameter_bars`).

    Args:
        result: a :class:`~mbfg.calibration.CalibrationResult` from :func:`~mbfg.calibration.calibrate`.
        log: the calibration's log (optional: the readings at the state times are in the result).
        path: write the figure there (format from the extension).

    Returns the matplotlib Figure.
    """
    plt = pyplot("plotting a calibration")
    curves = calibration_curves(result, log)
    model = result.problem.model
    names = list(model.observations)
    n_obs = len(names)
    fig, axes = plt.subplots(n_obs + 1, 2, figsize=(11, 2.6 * (n_obs + 1)), squeeze=False)
    t = curves["t"]
    for i, name in enumerate(names):
        unit = _unit(model, i)
        ax = axes[i, 0]
        ax.plot(curves["log_t"], curves["log_y"][:, i], ".", color="k", ms=1.5, label="log")
        ax.plot(t, curves["estimated"][:, i], "-", color="C0", lw=1, label="estimated states")
        ax.set_ylabel(f"{name} [{unit}]")
        ax.set_title(f"{name}: log and fit", fontsize="medium")
        ax.legend(fontsize="x-small", loc="best")
        ax = axes[i, 1]
        ax.plot(t, curves["residual"][:, i], "-", color="C3", lw=0.8)
        ax.axhline(0.0, color="grey", lw=0.5)
        ax.set_ylabel(f"[{unit}]")
        ax.set_title(f"{name}: residual (log - estimated)", fontsize="medium")
    for ax in axes[:n_obs].ravel():
        ax.set_xlabel("t [s]")
    ax = axes[n_obs, 0]
    cost = np.asarray(result.per_step_cost, dtype=float)
    ax.plot(t, cost, "-", color="C2", lw=0.8)
    if cost.size and np.all(cost > 0):
        ax.set_yscale("log")
    ax.set_xlabel("t [s]")
    ax.set_title(f"per-step cost (cost {result.cost:.3g} per step)", fontsize="medium")
    _parameter_axes(axes[n_obs, 1], result)
    fig.tight_layout()
    save(fig, path)
    return fig


def _relative(err: float, std: float) -> str:
    """A relative standard deviation as a tick label: "4.7%", "3x" (std three times the value), "std inf"."""
    if np.isnan(std):
        return "std n/a"
    if not np.isfinite(std):
        return "std inf"
    return f"{100 * err:.2g}%" if err < 1 else f"{err:.2g}x"


def _parameter_axes(ax, result: Any) -> None:
    bars = parameter_bars(result)
    n_p = len(bars["names"])
    ax.set_title("parameters: value and std relative to |value|", fontsize="medium")
    if not n_p:
        ax.text(0.5, 0.5, "no free parameter", ha="center", va="center", transform=ax.transAxes)
        ax.set_xticks([])
        return
    excited, at_bound, error = bars["excited"], bars["at_bound"], bars["error"]
    std = np.array([p.std for p in result.parameters], dtype=float)
    colors = ["C1" if b else ("C7" if np.isnan(s) else ("C0" if e else "C3"))
              for e, b, s in zip(excited, at_bound, std)]
    x = np.arange(n_p)
    container = ax.bar(x, bars["height"], yerr=error, color=colors, capsize=3,
                       error_kw={"ecolor": "k", "elinewidth": 1})
    for patch, bound in zip(container.patches, at_bound):
        if bound:
            patch.set_hatch("//")
    labels = [f"{name} ({_relative(err, s)})" for name, err, s in zip(bars["names"], error, std)]
    ax.axhline(0.0, color="grey", lw=0.5)
    low = -2.5 if np.any(bars["height"] < 0) else -1.5
    ax.set_ylim(low, 3.0)  # an error bar past the limits is a std well above the value (not excited)
    ax.set_xticks(x, labels, rotation=45, ha="right", fontsize="small")
    ax.set_ylabel("value / |value|")
    from matplotlib.patches import Patch

    kinds = [("C0", "", "determined", excited & ~at_bound),
             ("C3", "", "not excited (std > |value|)", ~excited & ~at_bound & ~np.isnan(std)),
             ("C1", "//", "at a bound (std not meaningful)", at_bound),
             ("C7", "", "std not computed", np.isnan(std) & ~at_bound)]
    handles = [Patch(facecolor=c, hatch=h, label=label) for c, h, label, which in kinds if which.any()]
    ax.legend(handles=handles, fontsize="x-small", loc="upper center", ncols=2)


# ----------------------------------------------------------------------------- a simulated trajectory


def trajectory_figure(traj: Any, path: str | os.PathLike[str] | None = None) -> Figure:
    """A :class:`~mbfg.spook.Trajectory`: one panel per observation, then one per control, against t [s].

    Axes ``i`` < n_obs: observation i (hinge angles unwrapped as :meth:`~mbfg.spook.Trajectory.to_dataframe`
    gives them [rad], CoM coordinates [m]), line 0 (n+1,) over ``traj.t``; axes n_obs + j: control j,
    line 0 a step line (u_k held on [t_k, t_k+1)) of the n controls and the last one again at t_n (n+1,).

    Returns the matplotlib Figure; written to ``path`` if given.
    """
    plt = pyplot("plotting a trajectory")
    model = traj.model
    obs = unwrap_angles(model, traj.observations)
    names, controls = list(model.observations), list(model.controls)
    panels = len(names) + len(controls)
    fig, axes = plt.subplots(panels, 1, figsize=(9, 2.2 * panels + 0.4), sharex=True, squeeze=False)
    axes = axes[:, 0]
    t = np.asarray(traj.t, dtype=float)
    for i, name in enumerate(names):
        axes[i].plot(t, obs[:, i], "-", lw=1)
        axes[i].set_ylabel(f"{name} [{_unit(model, i)}]")
    u = np.asarray(traj.controls, dtype=float)
    for j, name in enumerate(controls):
        held = np.append(u[:, j], u[-1, j] if len(u) else 0.0)
        axes[len(names) + j].step(t, held, where="post", color="C1", lw=1)
        axes[len(names) + j].set_ylabel(name)
    axes[-1].set_xlabel("t [s]")
    axes[0].set_title(f"{model.name}: simulated, {len(t) - 1} steps of {t[1] - t[0] if len(t) > 1 else 0:g} s",
                      fontsize="medium")
    fig.tight_layout()
    save(fig, path)
    return fig


# ----------------------------------------------------------------------------- a stream's replay


def stream_figure(replay: Any, log: Any = None, path: str | os.PathLike[str] | None = None) -> Figure:
    """A :class:`~mbfg.graphs.stream.StreamReplay`: per observation the coordinate and its rate against t.

    Axes ``2 i`` (observation i): the log's readings when ``log`` is given (line 0, its rows), then the
    filtered and the smoothed coordinate (n,) at the state times [rad, m]; axes ``2 i + 1``: the filtered
    and the smoothed rate (n,) [rad/s, m/s] (lines 0 and 1). Faults that the replay and the log show are
    marked on every panel: a missing or non-finite reading of that observation (a thin red vertical line
    at its time, with ``log``) and a gap between state times longer than 1.5 periods (a shaded span).
    (The replay keeps neither the estimates' standard deviations nor the samples' flags, so there are no
    std bands and the estimator's other faults - a jump left out, a duplicate - are not marked.)

    Args:
        replay: what :meth:`~mbfg.graphs.stream.StreamEstimator.replay` returned.
        log: the replayed log (optional: the readings); its column names label the panels.
        path: write the figure there (format from the extension).

    Returns the matplotlib Figure.
    """
    plt = pyplot("plotting a stream")
    t = np.asarray(replay.t, dtype=float)
    n_obs = replay.filtered_q.shape[1]
    if log is not None and np.asarray(log.y).shape[1] != n_obs:
        raise DataError(f"{log.source}: {np.asarray(log.y).shape[1]} observation columns, the replay has {n_obs}")
    names = list(log.observations) if log is not None else [f"observation {i}" for i in range(n_obs)]
    fig, axes = plt.subplots(n_obs, 2, figsize=(11, 2.8 * n_obs + 0.4), sharex=True, squeeze=False)
    gaps = []
    if len(t) > 2:
        dt = np.diff(t)
        period = float(np.median(dt))
        gaps = [(t[k], t[k + 1]) for k in np.flatnonzero(dt > 1.5 * period)]
    for i, name in enumerate(names):
        ax_q, ax_v = axes[i]
        if log is not None:
            ax_q.plot(log.t, log.y[:, i], ".", color="k", ms=1.5, label="log")
        ax_q.plot(t, replay.filtered_q[:, i], "-", color="C0", lw=1, label="filtered")
        ax_q.plot(t, replay.smoothed_q[:, i], "-", color="C1", lw=1, label="smoothed")
        ax_v.plot(t, replay.filtered_qdot[:, i], "-", color="C0", lw=1, label="filtered")
        ax_v.plot(t, replay.smoothed_qdot[:, i], "-", color="C1", lw=1, label="smoothed")
        ax_q.set_ylabel(f"{name}")
        ax_v.set_ylabel(f"d{name}/dt")
        ax_q.legend(fontsize="x-small", loc="best")
        marked = np.asarray(log.t)[~np.isfinite(np.asarray(log.y)[:, i])] if log is not None else ()
        for ax in (ax_q, ax_v):
            for a, b in gaps:
                ax.axvspan(a, b, color="grey", alpha=0.3, lw=0)
            if len(marked):  # one collection, however many readings are missing
                ax.vlines(marked, 0, 1, transform=ax.get_xaxis_transform(), color="C3", lw=0.5)
    axes[0, 0].set_title("coordinate [rad, m]: log, filtered, smoothed", fontsize="medium")
    axes[0, 1].set_title("rate [rad/s, m/s]: filtered, smoothed", fontsize="medium")
    for ax in axes[-1]:
        ax.set_xlabel("t [s]")
    status = getattr(replay, "status", None)
    if status is not None and status.faults:
        fig.suptitle("fault events (StreamStatus): " + ", ".join(
            f"{f} {getattr(status, f)}" for f in status.FAULTS if getattr(status, f)), fontsize="small")
    fig.tight_layout()
    save(fig, path)
    return fig


__all__ = ["calibration_curves", "calibration_figure", "parameter_bars", "pyplot", "save", "stream_figure",
           "trajectory_figure"]
