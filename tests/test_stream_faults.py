"""Fault injection into encoder streams (mbfg.graphs.stream, ``mbfg smooth``): what a real rig sends.

A seeded generator of faults over a simulated pendulum log (1 kHz, 2048
counts per revolution, spinning over the top at about 12 rad/s): time leaps of
+1 s, +60 s and to t = 1e6 s, gaps of 20, 100, 300 and 1000 ms at peak speed,
bytes that are not UTF-8 on standard input and in ``--input``. Every case, in
every update mode (one sample per update, and ``update_every`` 10 and 20), asserts:
the stream goes on, one answer per input line, the fault counted by kind, and
from 0.2 s of stream time after the fault on, the filtered estimate within 5
encoder counts of the clean run's.
"""

from __future__ import annotations

import io
import math
import os
import signal
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from mbfg.cli import main
from mbfg.graphs.stream import StreamEstimator
from mbfg.logs import quantize
from mbfg.models import pendulum
from mbfg.spook import simulate, unwrap_angles

PPR = 2048
H = 1e-3
LAG = 0.02
COUNT = 2 * math.pi / PPR
RECOVERY_S = 0.2
MODES = (1, 10, 20)


@pytest.fixture(scope="module")
def model():
    return pendulum()


@pytest.fixture(scope="module")
def log(model):
    """1.6 s of a pendulum spinning over the top: times (n,) [s] and quantized angles (n,) [rad, unwrapped]."""
    traj = simulate(model, 1.6, H, initial=model.initial_state({"theta": 0.0}, {"theta": 12.0}))
    y = quantize(unwrap_angles(model, traj.observations), PPR)[:, 0]
    return np.round(np.asarray(traj.t), 9), y


@pytest.fixture(scope="module")
def peak(log, model):
    """Index of the fastest sample in the first 0.3 s (where the faults go)."""
    t, y = log
    rate = np.abs(np.gradient(y, H))
    return int(np.argmax(rate[: int(0.3 / H)]))


def _estimator(model, update_every: int) -> StreamEstimator:
    return StreamEstimator(model, lag=LAG, h=H, ppr=PPR, update_every=update_every, on_warning=lambda m: None)


@pytest.fixture(scope="module")
def clean(model, log):
    """The clean run's filtered coordinate per state index, per update mode."""
    t, y = log
    out = {}
    for n in MODES:
        est = _estimator(model, n)
        filtered = {}
        for i in range(len(t)):
            for e in est.push(t[i], [y[i]]).added:
                filtered[e.k] = e.coordinates[0]
        last = est.flush()
        for e in last.added if last is not None else ():
            filtered[e.k] = e.coordinates[0]
        out[n] = filtered
    return out


def _faulted(log, peak: int, kind: str, size: float, rng: np.random.Generator) -> tuple[list, float]:
    """The samples (t, reading) with one fault at the peak speed, and the stream time at which it ends [s].

    leap: one sample's time replaced by t + size (size = 1e6: the time 1e6 s), the rest as recorded;
    gap: ``size`` seconds of samples left out, the stream going on from the same clock.
    """
    t, y = log
    i = peak + int(rng.integers(0, 5))  # seeded jitter of the fault's place
    rows = [(float(t[j]), float(y[j])) for j in range(len(t))]
    if kind == "leap":
        bad_t = 1e6 if size == 1e6 else rows[i][0] + size
        rows[i] = (bad_t, rows[i][1])
        end = t[i + 1]
    else:
        n = int(round(size / H))
        del rows[i : i + n]
        end = t[i + n]
    stop = int(np.searchsorted(t, end + RECOVERY_S + 0.05))  # the log up to 0.25 s after the fault
    return rows[: stop - (len(t) - len(rows))], float(end)


def _recovered(clean_filtered: dict[int, float], estimates: dict[int, float], after: float) -> float:
    """The largest |estimate - clean| [counts] over the states from ``after`` [s] on."""
    ks = [k for k in estimates if k * H >= after - 1e-9]
    assert ks, "no estimate after the fault"
    return max(abs(estimates[k] - clean_filtered[k]) / COUNT for k in ks)


CASES = [("leap", 1.0, "leaps"), ("leap", 60.0, "leaps"), ("leap", 1e6, "leaps"),
         ("gap", 0.02, "gaps"), ("gap", 0.1, "gaps"), ("gap", 0.3, "leaps"), ("gap", 1.0, "leaps")]


@pytest.mark.parametrize("update_every", MODES)
@pytest.mark.parametrize(("kind", "size", "counter"), CASES, ids=[f"{k}-{s:g}s" for k, s, _ in CASES])
def test_fault_is_counted_and_the_estimate_returns_to_the_clean_runs(model, log, peak, clean, kind, size, counter,
                                                                     update_every) -> None:
    rng = np.random.default_rng(20)
    rows, end = _faulted(log, peak, kind, size, rng)
    est = _estimator(model, update_every)
    estimates: dict[int, float] = {}
    steps = []
    start = time.perf_counter()
    for t, y in rows:
        step = est.push(t, [y])
        steps.append(step)
        for e in step.added:
            estimates[e.k] = e.coordinates[0]
    last = est.flush()
    for e in last.added if last is not None else ():
        estimates[e.k] = e.coordinates[0]
    wall = time.perf_counter() - start
    st = est.status
    assert len(steps) == len(rows) == st.samples  # one answer per input line
    assert getattr(st, counter) >= 1 and st.solver_failures == 0, st.summary()
    assert st.states < 2 * len(rows), st.summary()  # no thousands of bridged states
    if kind == "leap":
        assert st.leaps == 1 and st.restarts == 0 and st.gaps == 1 and st.missing_samples == 1, st.summary()
    elif counter == "gaps":
        assert st.gaps == 1 and st.missing_samples == round(size / H) and st.leaps == 0, st.summary()
    else:  # longer than max_gap: a few samples dropped as leaps, then the window restarts on the clock
        assert st.restarts == 1 and st.leaps == est.resync - 1, st.summary()
        restart = [s for s in steps if "restart" in s.flags]
        assert len(restart) == 1 and restart[0].smoothed is None  # no stale smoothed values after it
    worst = _recovered(clean[update_every], estimates, end + RECOVERY_S)
    print(f"\n{kind} {size:g} s, update_every {update_every}: {st.summary()}; worst {worst:.2f} counts "
          f"after {RECOVERY_S} s; {wall:.2f} s wall")
    assert worst < 5.0


@pytest.mark.parametrize("update_every", MODES)
def test_a_missing_reading_is_flagged_and_counted_and_fault_lines_of_a_pending_update_say_so(model, log,
                                                                                           update_every) -> None:
    t, y = log
    est = _estimator(model, update_every)
    steps = [est.push(t[i], [y[i]]) for i in range(8)]
    steps.append(est.push(t[8], [None]))  # an empty cell
    steps.append(est.push(t[8], [y[8]]))  # a duplicate (while samples wait for the update, with several per update)
    assert "missing" in steps[8].flags and est.status.missing == 1 and est.status.duplicates == 1
    assert steps[9].flags == (("duplicate", "pending") if update_every > 1 else ("duplicate",))


def _cli_rows(path: Path) -> tuple[list[str], list[list[str]]]:
    header, *rows = [r.split(",") for r in path.read_text().strip().splitlines()]
    return header, rows


@pytest.fixture(scope="module")
def calibration_file(tmp_path_factory, model) -> Path:
    import json

    path = tmp_path_factory.mktemp("faults") / "calib.json"
    p = model.parameters
    doc = {"model": "pendulum", "parameters": {n: {"value": p[n].default} for n in ("J", "b")}, "h": H,
           "fixed": {n: {"value": p[n].default} for n in p if n not in ("J", "b")},
           "weight": 1e6, "sigma_observation": 1e-3}
    path.write_text(json.dumps(doc))
    return path


def _log_bytes(log, peak: int, stop: int, bad: bytes | None) -> bytes:
    t, y = log
    lines = [b"t,theta"] + [f"{float(t[i])!r},{float(y[i])!r}".encode() for i in range(stop)]
    if bad is not None:
        lines[1 + peak] = bad
    return b"\n".join(lines) + b"\n"


@pytest.mark.parametrize("update_every", MODES)
@pytest.mark.parametrize("where", ["stdin", "input"])
def test_bytes_that_are_not_utf8_are_one_malformed_line(capsys, monkeypatch, tmp_path, model, log, peak, clean,
                                                        calibration_file, where, update_every) -> None:
    t, _ = log
    stop = peak + int((RECOVERY_S + 0.05) / H)
    data = _log_bytes(log, peak, stop, b"0.1\xff\xfe,1.0")
    out = tmp_path / "out.csv"
    argv = ["smooth", "pendulum", "--params", str(calibration_file), "--lag", str(LAG), "--ppr", str(PPR),
            "--update-every", str(update_every), "--output", str(out), "--quiet"]
    if where == "stdin":
        monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(data)))
    else:
        src = tmp_path / "log.csv"
        src.write_bytes(data)
        argv += ["--input", str(src)]
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 0, err
    header, rows = _cli_rows(out)
    assert len(rows) == stop  # one per input line
    assert rows[peak][-1].split("|")[0] == "malformed"
    assert "1 malformed" in err.strip().splitlines()[-1], err
    after = [r for r in rows if r[0] and float(r[0]) >= t[peak] + RECOVERY_S and r[1]]
    assert after
    i_theta = header.index("theta")
    worst = max(abs(float(r[i_theta]) - clean[update_every][int(round(float(r[0]) / H))]) / COUNT for r in after
                if "pending" not in r[-1])
    assert worst < 5.0


def test_output_times_are_the_step_index_times_h_rounded_to_the_periods_decimals(tmp_path, log, calibration_file,
                                                                                 capsys) -> None:
    t, y = log
    src, out = tmp_path / "log.csv", tmp_path / "out.csv"
    src.write_text("t,theta\n" + "".join(f"{float(round(t[i], 3))!r},{float(y[i])!r}\n" for i in range(1580, 1600)))
    assert main(["smooth", "pendulum", "--params", str(calibration_file), "--lag", "0.002", "--ppr", str(PPR),
                 "--input", str(src), "--output", str(out), "--quiet"]) == 0, capsys.readouterr().err
    header, rows = _cli_rows(out)
    smoothed = [r[header.index("t_smoothed")] for r in rows if r[header.index("t_smoothed")]]
    assert smoothed and all(len(s.split(".")[1]) <= 3 for s in smoothed), smoothed
    assert smoothed[-1] == rows[-3][0]  # a lag of two steps back, written as the input wrote that time


def test_headerless_stream_with_columns_then_ctrl_c_prints_the_summary_and_flushes(tmp_path, log,
                                                                                   calibration_file, capsys) -> None:
    """``tail -n +1 -f log.csv | mbfg smooth ... --columns t,theta``, ended by Ctrl-C (SIGINT)."""
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("SIGINT reaches the main thread only")
    t, y = log
    read_fd, write_fd = os.pipe()
    out = tmp_path / "out.csv"
    n = 30

    def feed() -> None:
        with os.fdopen(write_fd, "w") as w:
            w.write("".join(f"{float(t[i])!r},{float(y[i])!r}\n" for i in range(n)))  # no header line
            w.flush()
            # Ctrl-C once every line is answered; on a loaded machine compiling alone can take minutes, and a
            # Ctrl-C during it ends the command before the stream (a different test).
            deadline = time.monotonic() + 600
            while time.monotonic() < deadline:  # the pipe stays open, like tail -f; then Ctrl-C
                if _lines_written(out) >= n + 1:
                    break
                time.sleep(0.05)
            # Ctrl-C reaches a one-threaded process's only thread; os.kill may hand the signal to this
            # feeder thread instead, and the main thread, blocked in read(), then sees it only at EOF.
            signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)
            time.sleep(1.0)  # the pipe still open, as tail -f keeps it

    feeder = threading.Thread(target=feed)
    feeder.start()
    try:
        code = main(["smooth", "pendulum", "--params", str(calibration_file), "--lag", "0.01", "--ppr", str(PPR),
                     "--columns", "t,theta", "--input", f"/dev/fd/{read_fd}", "--output", str(out)])
    finally:
        feeder.join()
        os.close(read_fd)
    err = capsys.readouterr().err
    assert code == 130, err
    assert "compiling" in err  # said before the first sample was read
    summary = err.strip().splitlines()[-1]
    assert "interrupted" in summary and f"{n} samples" in summary, err
    header, rows = _cli_rows(out)
    assert header[:2] == ["t", "theta"] and len(rows) == n
    assert abs(float(rows[-1][1]) - y[n - 1]) < 5 * COUNT


def _lines_written(out: Path) -> int:
    """Lines in a running smooth's output: the temporary file beside ``out`` it writes until the run ends (then
    renamed to ``out``), or ``out``."""
    count = 0
    for path in [out, *out.parent.glob(f".{out.name}.*.part")]:
        try:
            count = max(count, len(path.read_text().splitlines()))
        except FileNotFoundError:  # renamed in between
            continue
    return count


@pytest.mark.parametrize("update_every", MODES)
def test_a_gap_on_a_wrapping_counter_takes_the_turn_the_model_predicts(model, log, peak, clean, update_every) -> None:
    """Raw counts from a counter that wraps every half turn (1024 of 2048 counts): after 150 ms at 12 rad/s
    (about 600 counts, more than half the modulus) the reading alone cannot say how often it wrapped."""
    t, y = log
    counts = np.round(y / COUNT).astype(int) % 1024
    est = StreamEstimator(model, lag=LAG, h=H, ppr=PPR, counts=True, counter_modulus=1024,
                          update_every=update_every, on_warning=lambda m: None)
    gap = int(0.15 / H)
    end = peak + gap
    estimates = {}
    for i in list(range(peak)) + list(range(end, end + int((RECOVERY_S + 0.05) / H))):
        for e in est.push(t[i], [float(counts[i])]).added:
            estimates[e.k] = e.coordinates[0]
    last = est.flush()
    for e in last.added if last is not None else ():
        estimates[e.k] = e.coordinates[0]
    assert est.status.gaps == 1 and est.status.jumps == 0, est.status.summary()
    assert _recovered(clean[update_every], estimates, t[end] + RECOVERY_S) < 5.0


@pytest.mark.parametrize("update_every", MODES)
def test_a_fast_start_is_no_jump_however_many_samples_wait_for_an_update(model, log, update_every) -> None:
    """The stream starts at 12 rad/s, its first state's rate unknown: the jump gate must expect each reading
    near the last believed one, not the first state's estimate extrapolated across a whole update (20 ms at
    an unknown rate is 0.24 rad, beyond the jump threshold)."""
    t, y = log
    est = _estimator(model, update_every)
    for i in range(100):
        est.push(t[i], [y[i]])
    assert est.status.jumps == 0 and est.status.resyncs == 0, est.status.summary()
