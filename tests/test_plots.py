"""Figures of results (mbfg.plots): CalibrationResult.plot, Trajectory.plot, StreamReplay.plot.

Cheap on purpose: one 0.5 s pendulum log at 1 kHz that swings over the top (so the hinge angle wraps at
pi), calibrated once at h = 2 ms and replayed once through a stream estimator for the module; the figures'
contents are compared with the results' arrays. JAX compilation is most of the file's time, so the shapes
are those of other test files (whose compiled programs the session's cache then holds): the simulation
and the estimator of tests/test_stream.py, the calibration's factor groups (256 at h = 2 ms) of
tests/test_sweep.py's.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

matplotlib = pytest.importorskip("matplotlib")

from matplotlib.collections import LineCollection  # noqa: E402
from matplotlib.colors import to_rgba  # noqa: E402
from matplotlib.container import BarContainer  # noqa: E402

from mbfg.calibration import calibrate  # noqa: E402
from mbfg.errors import DataError, MbfgError  # noqa: E402
from mbfg.logs import Log  # noqa: E402
from mbfg.models import load_model, pendulum  # noqa: E402
from mbfg.plots import pyplot  # noqa: E402
from mbfg.spook import Trajectory, simulate, unwrap_angles  # noqa: E402

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    pyplot().close("all")


@pytest.fixture(scope="module")
def swing():
    """A pendulum swinging over the top (theta from 2.9 rad up past pi: the wrapped angle jumps there), its
    log with 1e-3 rad of noise and one missing reading. As long as tests/test_stream.py's log (the same
    compiled simulation)."""
    model = pendulum()
    traj = simulate(model, 0.5, 1e-3, initial=model.initial_state({"theta": 2.9}, {"theta": 3.0}))
    y = unwrap_angles(model, traj.observations) + 1e-3 * np.random.default_rng(0).standard_normal((len(traj.t), 1))
    y[101, 0] = np.nan  # a missing reading between state times (h = 2 ms): the calibration never sees it
    log = Log(traj.t, y, np.zeros((len(traj.t), 0)), model.observations, model.controls, "swing")
    return model, traj, log


@pytest.fixture(scope="module")
def calibrated(swing):
    model, _, log = swing
    result = calibrate(model.with_parameters({"J": 1.2 * model.parameters["J"].default}), log, free=["J", "b"], h=2e-3)
    assert result.converged
    return result


def test_import_mbfg_does_not_import_matplotlib() -> None:
    code = ("import sys, mbfg, mbfg.calibration, mbfg.spook, mbfg.plots, mbfg.sweep_plot, mbfg.graphs.stream; "
            "print(sorted(m for m in sys.modules if m.startswith('matplotlib')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_calibration_figure_draws_the_log_the_fit_the_residuals_the_cost_and_relative_parameters(
        swing, calibrated, tmp_path) -> None:
    _, _, log = swing
    result = calibrated
    path = tmp_path / "fit.png"
    fig = result.plot(log, path)
    assert path.read_bytes()[:8] == PNG and path.stat().st_size > 1000
    assert len(fig.axes) == 4  # (fit, residual) per observation, then cost and parameters
    fit, residual, cost, params = fig.axes
    # The log at its own rate, on the problem's time axis (from the first sample).
    np.testing.assert_array_equal(fit.lines[0].get_xdata(), log.t - log.t[0])
    np.testing.assert_array_equal(fit.lines[0].get_ydata(), log.y[:, 0])
    # The estimated states' observation: unwrapped, on the log through the wrap at pi.
    problem = result.problem
    np.testing.assert_allclose(fit.lines[1].get_xdata(), problem.t)
    est = np.asarray(fit.lines[1].get_ydata())
    assert np.nanmax(log.y[:, 0]) > np.pi + 0.5 and est.max() > np.pi + 0.5
    assert np.nanmax(np.abs(est - problem.y[:, 0])) < 5e-3  # five sigma of the noise
    # Residuals: the log minus the fit at the state times; their squares are the observation cost.
    res = np.asarray(residual.lines[0].get_ydata())
    np.testing.assert_allclose(res, problem.y[:, 0] - est, atol=1e-12)
    assert np.sum(res**2) / problem.n == pytest.approx(result.cost_observation, rel=1e-9)
    np.testing.assert_array_equal(cost.lines[0].get_ydata(), result.per_step_cost)
    # One bar per free parameter: value / |value| with std / |value| error bars.
    bars = next(c for c in params.containers if isinstance(c, BarContainer))
    value = np.array([p.value for p in result.parameters])
    std = np.array([p.std for p in result.parameters])
    np.testing.assert_allclose([b.get_height() for b in bars.patches], value / np.abs(value))
    segments = bars.errorbar.lines[2][0].get_segments()
    np.testing.assert_allclose([s[1, 1] - s[0, 1] for s in segments], 2 * std / np.abs(value))
    assert [t.get_text() for t in params.get_xticklabels()] == [
        f"{p.name} ({100 * p.std / abs(p.value):.2g}%)" for p in result.parameters]
    assert all(b.get_facecolor() == to_rgba("C0") for b in bars.patches)  # both determined


def test_calibration_figure_without_the_log_draws_the_readings_at_the_state_times(swing, calibrated) -> None:
    _, _, log = swing
    fig = calibrated.plot()
    np.testing.assert_array_equal(fig.axes[0].lines[0].get_ydata(), calibrated.problem.y[:, 0])
    other = Log(log.t, log.y + 0.1, log.u, log.observations, log.controls, "other")
    with pytest.raises(DataError, match="not the log of this calibration"):
        calibrated.plot(other)


def test_parameter_bars_mark_not_excited_at_bound_and_missing_stds(calibrated) -> None:
    j, b = calibrated.parameters
    flagged = replace(calibrated, parameters=[replace(j, std=3 * j.value), replace(b, lower=b.value)])
    fig = flagged.plot()
    bars = next(c for c in fig.axes[3].containers if isinstance(c, BarContainer))
    assert bars.patches[0].get_facecolor() == to_rgba("C3") and not bars.patches[0].get_hatch()  # not excited
    assert bars.patches[1].get_facecolor() == to_rgba("C1") and bars.patches[1].get_hatch() == "//"  # at bound
    segments = bars.errorbar.lines[2][0].get_segments()
    assert segments[0][1, 1] - segments[0][0, 1] == pytest.approx(6.0)
    assert fig.axes[3].get_xticklabels()[0].get_text() == "J (3x)"
    no_std = replace(calibrated, parameters=[replace(j, std=float("nan")), b])
    ax = no_std.plot().axes[3]
    bars = next(c for c in ax.containers if isinstance(c, BarContainer))
    assert bars.patches[0].get_facecolor() == to_rgba("C7")
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == ["determined", "std not computed"]


def test_trajectory_figure_unwraps_observations_and_draws_held_controls(swing, tmp_path) -> None:
    _, traj, _ = swing
    fig = traj.plot(tmp_path / "traj.png")
    assert (tmp_path / "traj.png").read_bytes()[:8] == PNG
    assert len(fig.axes) == 1  # one observation, no control
    np.testing.assert_array_equal(fig.axes[0].lines[0].get_ydata(), traj.to_dataframe()["theta"])
    assert fig.axes[0].lines[0].get_ydata().max() > np.pi  # unwrapped
    # Two observations and two controls (a made-up trajectory: only what the figure reads).
    model = load_model("double-pendulum-torque")
    n = 40
    t = np.arange(n + 1) * 0.01
    obs = np.stack([np.angle(np.exp(1j * 4 * t)), 0.1 * t], axis=1)  # q1 wraps at pi
    u = np.stack([np.sin(t[:-1]), np.cos(t[:-1])], axis=1)
    made = Trajectory(model, t, None, obs, u, None, 0.0, 0.0)
    fig = made.plot()
    assert len(fig.axes) == 4
    np.testing.assert_allclose(fig.axes[0].lines[0].get_ydata(), 4 * t, atol=1e-12)
    np.testing.assert_array_equal(fig.axes[1].lines[0].get_ydata(), obs[:, 1])
    for j in range(2):
        line = fig.axes[2 + j].lines[0]
        np.testing.assert_array_equal(line.get_ydata(), np.append(u[:, j], u[-1, j]))
        assert line.get_drawstyle() == "steps-post"
    assert [ax.get_ylabel() for ax in fig.axes] == ["q1 [rad]", "q2 [rad]", "tau1", "tau2"]


def test_stream_figure_draws_readings_filtered_smoothed_and_marks_missing_readings(swing, tmp_path) -> None:
    from mbfg.graphs.stream import StreamEstimator

    model, _, log = swing
    rep = StreamEstimator(model, lag=0.05, h=1e-3, ppr=2048).replay(log)  # tests/test_stream.py's estimator
    fig = rep.plot(log, tmp_path / "stream.pdf")
    assert (tmp_path / "stream.pdf").read_bytes()[:4] == b"%PDF"
    assert len(fig.axes) == 2
    q, qdot = fig.axes
    np.testing.assert_array_equal(q.lines[0].get_ydata(), log.y[:, 0])
    np.testing.assert_array_equal(q.lines[1].get_ydata(), rep.filtered_q[:, 0])
    np.testing.assert_array_equal(q.lines[2].get_ydata(), rep.smoothed_q[:, 0])
    np.testing.assert_array_equal(q.lines[1].get_xdata(), rep.t)
    np.testing.assert_array_equal(qdot.lines[0].get_ydata(), rep.filtered_qdot[:, 0])
    np.testing.assert_array_equal(qdot.lines[1].get_ydata(), rep.smoothed_qdot[:, 0])
    for ax in (q, qdot):  # the missing reading, on both panels
        (marks,) = [c for c in ax.collections if isinstance(c, LineCollection)]
        assert [s[0, 0] for s in marks.get_segments()] == [log.t[101]]
    assert fig.get_suptitle() == "fault events (StreamStatus): missing 1"
    assert q.get_ylabel() == "theta"
    # Without the log: the estimates only.
    fig = rep.plot()
    assert len(fig.axes[0].lines) == 2


def test_without_matplotlib_the_error_says_how_to_install_it(swing, calibrated, monkeypatch) -> None:
    _, traj, _ = swing
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.setitem(sys.modules, name, None)
    with pytest.raises(MbfgError, match=r"plotting a calibration needs matplotlib: pip install 'mbfg\[plot\]'"):
        calibrated.plot()
    with pytest.raises(MbfgError, match=r"pip install 'mbfg\[plot\]'"):
        traj.plot()
    with pytest.raises(MbfgError, match=r"plotting a sweep needs matplotlib"):
        pyplot("plotting a sweep")  # as mbfg.sweep_plot.plot loads it


def test_sweep_figure_plots_parameters_and_cost_against_each_swept_method_parameter_seed_001_figures_4_and_6():
    from mbfg.sweep import SweepResult
    from mbfg.sweep_plot import plot

    rows = []
    for weight in (1e4, 1e6):
        for eps in (1e-8, 1e-6, 1e-4):
            rows.append({"kind": "calibration", "log": "a.csv", "scored_log": "", "h": 1e-3, "weight": weight,
                         "eps": eps, "status": "ok", "cost": weight * eps, "value:J": 1 + eps, "std:J": 0.1})
    rows.append({"kind": "calibration", "log": "a.csv", "scored_log": "", "h": 1e-3, "weight": 1e8, "eps": 1e-6,
                 "status": "failed", "cost": np.nan, "value:J": np.nan, "std:J": np.nan})
    result = SweepResult(pd.DataFrame(rows), computed=0, wall_s=0.0)
    fig = plot(result)
    # Against w: J, cost; against eps: J, cost; the heat map (empty: no cross-validation rows).
    j_w, cost_w, j_eps, cost_eps, heat = fig.axes[:5]
    assert j_w.get_xlabel() == "state error weight w" and j_eps.get_xlabel() == "global compliance eps"
    assert heat.get_title() == "cross-validation"
    assert len(cost_w.lines) == 3 and len(cost_eps.lines) == 2  # a line per eps, then a line per w; none failed
    line = cost_eps.lines[1]  # w = 1e6, ordered by eps
    np.testing.assert_array_equal(line.get_xdata(), [1e-8, 1e-6, 1e-4])
    np.testing.assert_allclose(line.get_ydata(), 1e6 * np.array([1e-8, 1e-6, 1e-4]))
    assert line.get_label() == "a.csv h=0.001 w=1e+06"
