"""Method-parameter sweeps on Dask (mbfg.sweep, mbfg sweep): Marklund et al. (2025) sections 4.5-4.7.

Short simulated pendulum recordings (0.3 s at 1 ms, 1e-3 rad of noise) keep each
calibration to seconds once compiled; one LocalCluster of 2 worker processes serves
the in-process tests, and the CLI test starts a real scheduler and workers. Every
calibration here runs at h = 1 ms: the grid sweeps w and eps, which change values but
not the programs' shapes, so each process compiles one calibration (a sweep over h
is a sweep over the number of states, one compile per h: ``notebooks/sweep.ipynb``).
"""

from __future__ import annotations

import hashlib
import math
import pickle
import socket
import subprocess
import sys
import time

import gtsam
import numpy as np
import pytest

from mbfg._jax import cache_dir
from mbfg.calibration import calibrate
from mbfg.errors import ModelError
from mbfg.lm_config import LMConfig
from mbfg.logs import Log, write_log
from mbfg.models import pendulum
from mbfg.solvers import LMResult
from mbfg.spook import simulate
from mbfg.sweep import read_results, sweep

NOISE = 1e-3  # [rad]
FREE = ["J", "b"]
H = 1e-3  # [s], the recordings' sample period
#: The grid's global compliances (eps_lin = eps_rot = eps; the model's own are 1e-5 m/N, 1e-3 rad/(N m)).
EPS = [1e-5, 1e-4]


def with_eps(model, eps: float):
    """``model`` with every hinge row's compliance eps (what the sweep's eps sets; tested below)."""
    return model.with_parameters({"eps_lin": eps, "eps_rot": eps})


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    model = pendulum()
    truth = model.parameters.numpy_values()
    start = model.with_parameters({"J": 1.2 * truth["J"], "b": 0.7 * truth["b"]})
    logs = {}
    for i, theta in enumerate((2.0, 1.4)):
        traj = simulate(model, 0.3, 1e-3, initial=model.initial_state({"theta": theta}))
        logs[f"rec{i}"] = traj.to_log(noise=NOISE, seed=i, source=f"rec{i}")
    return start, logs, tmp_path_factory.mktemp("jax-cache")


@pytest.fixture(scope="module")
def client():
    from distributed import Client, LocalCluster

    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
    c = Client(cluster)
    yield c
    c.close()
    cluster.close()


@pytest.fixture(scope="module")
def grid(setup, client, tmp_path_factory):
    """The 2 w x 2 eps x 2 recordings sweep, calibrations only, written to a results file."""
    start, logs, cache = setup
    out = tmp_path_factory.mktemp("sweep") / "grid.csv"
    result = sweep(start, logs, h=[H], weight=[1e4, 1e6], eps=EPS, free=FREE, out=out, crossval=False,
                   client=client, cache_dir=cache, quiet=True)
    return result, out


@pytest.mark.slow
def test_each_cell_of_a_2x2x2_sweep_on_2_workers_equals_the_calibration_run_alone(setup, grid) -> None:
    start, logs, _ = setup
    result, _ = grid
    cal = result.calibrations
    assert len(cal) == 8 and result.computed == 8
    assert set(cal["status"]) == {"ok"}, cal["error"].tolist()
    assert cal["worker"].nunique() == 2  # the grid was shared out
    assert set(cal["h"]) == {H} and set(cal["eps"]) == set(EPS)
    for _, row in cal.iterrows():
        alone = calibrate(with_eps(start, row["eps"]), logs[row["log"]], free=FREE, h=H, weight=row["weight"])
        for p in alone.parameters:
            assert row[f"value:{p.name}"] == pytest.approx(p.value, rel=1e-10, abs=0), (row["log"], row["eps"])
            assert row[f"std:{p.name}"] == pytest.approx(p.std, rel=1e-8)
        assert row["cost"] == pytest.approx(alone.cost, rel=1e-10)
        assert row["iterations"] == alone.iterations and bool(row["converged"]) == alone.converged


def test_a_failing_cell_is_recorded_with_its_error_and_the_others_complete(setup, grid, client, tmp_path) -> None:
    start, logs, cache = setup
    good = logs["rec0"]
    y = good.y.copy()
    y[100:, 0] += 4.0  # a jump no pendulum makes in 1 ms: a corrupt recording
    bad = Log(good.t, y, good.u, good.observations, good.controls, "corrupt")
    # h = 1.5 ms is no whole multiple of the 1 ms sample period: that cell fails too.
    result = sweep(start, {"rec0": good, "corrupt": bad}, h=[1e-3, 1.5e-3], weight=[1e6], eps=EPS[:1], free=FREE,
                   out=tmp_path / "failing.csv", crossval=False, client=client, cache_dir=cache, quiet=True)
    cal = result.calibrations.set_index(["log", "h"])
    assert result.computed == 4
    assert cal.loc[("rec0", 1e-3), "status"] == "ok"
    assert "jumps" in cal.loc[("corrupt", 1e-3), "error"] and "theta" in cal.loc[("corrupt", 1e-3), "error"]
    assert "whole multiple" in cal.loc[("rec0", 1.5e-3), "error"]
    assert (cal["status"] == "error").sum() == 3
    # The good cell is the same calibration as in the grid.
    same = grid[0].calibrations.set_index(["log", "weight", "eps"]).loc[("rec0", 1e6, EPS[0])]
    assert cal.loc[("rec0", 1e-3), "value:J"] == same["value:J"]
    saved = read_results(tmp_path / "failing.csv")
    assert sorted(r["status"] for r in saved) == ["error", "error", "error", "ok"]


def test_a_sweep_on_a_single_worker_runs_every_cell(setup, grid, tmp_path) -> None:
    """One worker (a one-core machine, ``--workers 1``, a one-worker scheduler): no placement preference."""
    from distributed import Client, LocalCluster

    start, logs, _ = setup
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) as cluster, \
            Client(cluster) as one:
        # The worker is a thread of this process: no persistent cache, as for the whole test session
        # (tests/conftest.py).
        result = sweep(start, {"rec0": logs["rec0"]}, h=[H], weight=[1e4, 1e6], eps=EPS[:1], free=FREE,
                       out=tmp_path / "one.csv", crossval=False, client=one, cache_dir=False, quiet=True)
    cal = result.calibrations.set_index(["log", "weight", "eps"])
    assert (cal["status"] == "ok").all() and len(cal) == 2, cal["error"]
    assert cache_dir() is None  # cache_dir=False left this process's JAX settings alone
    same = grid[0].calibrations.set_index(["log", "weight", "eps"])
    for w in (1e4, 1e6):
        expected = same.loc[("rec0", w, EPS[0]), "value:J"]
        assert cal.loc[("rec0", w, EPS[0]), "value:J"] == pytest.approx(expected, rel=1e-9)


def test_a_rerun_computes_nothing_new(setup, grid) -> None:
    start, logs, cache = setup
    first, out = grid
    before = out.read_bytes()
    # No client and no scheduler: had anything been left to do, a local cluster would have been started.
    again = sweep(start, logs, h=[H], weight=[1e4, 1e6], eps=EPS, free=FREE, out=out, crossval=False,
                  cache_dir=cache, quiet=True)
    assert again.computed == 0
    assert out.read_bytes() == before
    cols = ["log", "weight", "eps", "value:J", "value:b", "std:J", "std:b", "cost"]
    a = first.calibrations[cols].sort_values(cols[:3]).reset_index(drop=True)
    b = again.calibrations[cols].sort_values(cols[:3]).reset_index(drop=True)
    np.testing.assert_array_equal(a[cols[3:]].to_numpy(float), b[cols[3:]].to_numpy(float))  # CSV round trip


def test_eps_is_the_global_compliance_of_every_hinge_row_and_a_tilt_comes_back_as_its_rotation() -> None:
    """Marklund et al. (2025) section 4.6 sweeps one hinge compliance: eps sets eps_lin and eps_rot (and nothing else)."""
    from scipy.spatial.transform import Rotation

    from mbfg._programs import structure_fingerprint
    from mbfg.models import furuta
    from mbfg.sweep_tasks import _with_eps, identified_values

    model = furuta(dry=False)
    soft = _with_eps(model, 1e-5)
    before, after = model.parameters.numpy_values(), soft.parameters.numpy_values()
    assert after["eps_lin"] == after["eps_rot"] == 1e-5
    assert all(np.array_equal(before[n], after[n]) for n in before if n not in ("eps_lin", "eps_rot"))
    # A copy per task, of the model's structure: the programs compiled for the first serve the others.
    assert structure_fingerprint(_with_eps(model, 1e-5)) == structure_fingerprint(soft) == structure_fingerprint(model)
    assert _with_eps(model, None) is model
    rotvec = [0.01, -0.02, 0.0]
    row = {"value:K": 0.05, "value:tilt[x]": rotvec[0], "value:tilt[y]": rotvec[1], "value:tilt[z]": rotvec[2],
           "std:K": 1e-3, "value:b_1": math.nan}
    values = identified_values(model, row)
    assert values.keys() == {"K", model.tilt}
    np.testing.assert_allclose(values[model.tilt], Rotation.from_rotvec(rotvec).as_matrix(), atol=1e-15)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for(port: int, timeout: float = 60.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise TimeoutError(f"no scheduler on port {port}")


@pytest.mark.slow
def test_mbfg_sweep_on_a_real_dask_scheduler_and_workers_with_cross_validation(setup, tmp_path) -> None:
    """Separate dask scheduler and worker processes on localhost; the CLI connects by address. Each tuned
    model scored on the other recording costs about the noise variance (Marklund et al. (2025) section 4.5)."""
    start, logs, cache = setup
    paths = []
    for name, log in logs.items():
        path = tmp_path / f"{name}.csv"
        write_log(str(path), log.t, {n: log.y[:, i] for i, n in enumerate(log.observations)}, {})
        paths.append(str(path))
    values = start.parameters.numpy_values()
    (tmp_path / "start.yaml").write_text(f"J: {values['J']!r}\nb: {values['b']!r}\n")
    port = _free_port()
    address = f"tcp://127.0.0.1:{port}"
    procs = []
    try:
        procs.append(subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1",
                                       "--port", str(port), "--no-dashboard"],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        _wait_for(port)
        procs.append(subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_worker", address, "--nworkers",
                                       "2", "--nthreads", "1", "--no-dashboard"],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        out = tmp_path / "sweep.csv"
        cmd = [sys.executable, "-m", "mbfg", "sweep", "pendulum", *paths, "--free", "J,b", "--params",
               str(tmp_path / "start.yaml"), "--dt", "1e-3", "--weight", "1e6", "--scheduler", address,
               "--jax-cache", str(cache), "--crossval-iterations", "40", "--out", str(out)]
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        assert run.returncode == 0, run.stderr
        assert "crossval on" in run.stderr  # progress lines
        rows = read_results(out)
        assert len(rows) == 4 and all(r["status"] == "ok" for r in rows), [(r["kind"], r["status"], r["error"]) for r in rows]
        assert all(r["worker"].startswith("tcp://127.0.0.1:") for r in rows)  # run by the separate workers
        for r in rows:
            if r["kind"] == "crossval":
                assert r["log"] != r["scored_log"]
                assert 0.5 * NOISE**2 < r["score"] < 1.5 * NOISE**2, r
                assert r["converged"] and 1 <= r["iterations"] <= 40, r  # its state estimation's
        assert "cross-validation" in run.stdout
        # Bad input is a user error: exit status 2, the option named.
        bad = subprocess.run([*cmd[:-2], "--out", str(tmp_path / "bad.csv"), "--dt", "1.5e-3"],
                             capture_output=True, text=True, timeout=120)
        assert bad.returncode == 2 and "--dt 0.0015" in bad.stderr, bad.stderr
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in reversed(procs):
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
    assert math.isfinite(rows[0]["wall_s"])


def test_a_crossval_task_with_simulate_adds_the_free_simulation_of_the_tuned_model_on_the_other_recording(setup):
    from mbfg.sweep_tasks import crossval_task
    from mbfg.validation import free_simulation, log_at_step

    start, logs, _ = setup
    model = pendulum()
    truth = model.parameters.numpy_values()
    # A noise-free held-out recording that starts through the bottom (no angular acceleration there), so
    # the free simulation's start (the angle, and the rate fitted over the first samples) is the
    # recording's own, and what is left is the model.
    clean = simulate(model, 0.3, 1e-3, initial=model.initial_state({"theta": 0.0}, {"theta": 4.0})).to_log(
        noise=0.0, source="clean")
    blob = pickle.dumps(start)
    shared = (hashlib.sha1(blob).hexdigest(), blob)
    rms = []
    for values in (truth, {"J": 1.2 * truth["J"], "b": 0.7 * truth["b"]}):
        tuned = {"status": "ok", "log": "rec0", "h": 1e-3, "weight": 1e4, "eps": math.nan,
                 "value:J": values["J"], "value:b": values["b"]}
        row = crossval_task(shared, tuned, clean, "clean", LMConfig(max_iterations=20), 0.2, False)
        assert row["status"] == "ok", row["error"]
        alone = free_simulation(start.with_parameters({"J": values["J"], "b": values["b"]}),
                                log_at_step(clean, 1e-3), seconds=0.2)
        assert row["sim_rms:theta"] == alone.rms["theta"] and row["sim_drift:theta"] == alone.drift_time["theta"]
        rms.append(row["sim_rms:theta"])
    print("free simulation RMS on the held-out recording, true / start model [rad]:", rms)
    assert rms[0] < 1e-3 < rms[1]  # the true model follows the held-out recording; the start model drifts


def test_simulate_without_the_cross_validation_is_refused(setup):
    start, logs, _ = setup
    with pytest.raises(ModelError, match="simulate: the free simulations run on the other recordings"):
        sweep(start, logs, crossval=False, simulate=0.2)


@pytest.mark.parametrize("name", ["max_iterations", "crossval_iterations"])
def test_an_iteration_limit_below_one_is_refused_by_name(setup, name):
    start, logs, _ = setup
    with pytest.raises(ModelError, match=f"{name}: expected a whole number >= 1, got 0"):
        sweep(start, logs, **{name: 0})


def test_a_crossval_task_holds_the_parameters_in_the_calibrations_order_not_the_results_files(setup, monkeypatch):
    """A results file lists a row's ``value:`` columns sorted by name; a resumed sweep's cross-validation must
    still hold the parameters in the order the calibration had them (``free``, else the model's), for that
    order is part of the factor types: another order is another program, compiled again on every worker."""
    import mbfg.graphs.joint
    from mbfg.sweep_tasks import crossval_task

    start, logs, _ = setup
    blob = pickle.dumps(start)
    shared = (hashlib.sha1(blob).hexdigest(), blob)
    seen = []

    def score(*args, free, **kwargs):
        seen.append(list(free))
        return 1.0, LMResult(gtsam.Values(), 3, "converged", [], "test")

    monkeypatch.setattr(mbfg.graphs.joint, "cross_validation", score)
    from_file = {"status": "ok", "log": "rec0", "h": 1e-3, "weight": 1e4, "eps": math.nan,
                 "value:J": 1e-3, "value:b": 1e-3}  # sorted by name, as read_results gives it
    for free in (["b", "J"], ["J", "b"], None):
        row = crossval_task(shared, from_file, logs["rec1"], "rec1", LMConfig(max_iterations=5), None, False, free)
        assert row["status"] == "ok", row["error"]
        assert (row["score"], row["iterations"], row["converged"]) == (1.0, 3, True)
    assert list(start.parameters.free) == ["J", "b"]
    assert seen == [["b", "J"], ["J", "b"], ["J", "b"]]
