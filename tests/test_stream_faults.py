"""Fault injection into encoder streams (mbfg.graphs.stream, ``mbfg smooth``): what a real rig sends.

A seeded generator of faults over a simulated pendulum log (1 kHz, 2048
counts per revolution, swung from the bottom at 12 rad/s, up to 1.8 rad): time leaps of
+1 s, +60 s and to t = 1e6 s, gaps of 20, 100, 300 and 1000 ms at peak speed,
bytes that are not UTF-8 on standard input and in ``--input``. Every case, in
every update mode (one sample per update, and ``update_every`` 10 and 20), asserts:
the stream goes on, one answer per input line, the fault counted by kind, and
from 0.2 s of stream time after the fault on, the filtered estimate within 5
encoder counts of the clean run's. The gaps of 300 ms and 1 s are run again on
logs that move more than half a turn in them (a pendulum spinning over the top,
one swinging through the bottom from 2.5 rad), restarted after the gap or
bridged, with readings in rad, in counts and from a wrapping counter: the turn
after the gap must come from the readings.
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
    """1.6 s of a pendulum swung from the bottom at 12 rad/s (it turns back at 1.8 rad): times (n,) [s] and
    quantized angles (n,) [rad, unwrapped]."""
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


# ---------------------------------------------------------------- a long gap's turn
LONG_GAPS = (0.3, 1.0)
RESYNC = 5
#: A 16-bit counter that read 31 turns at the start: it wraps to 0 a turn later, within the log.
COUNTER_MODULUS, COUNTER_START = 65536, 31 * PPR


@pytest.fixture(scope="module")
def turning_logs(model):
    """Two logs whose motion across a long gap is more than half a turn, the clean run's filtered angle per
    state index and update mode, and where each gap starts (its first missing sample) per gap length:

    - "spinning": 1.6 s of the pendulum spinning over the top from 24 rad/s (2.2 to 3.7 turns a second),
      the gap where the shortest way from the last reading before it is a whole turn wrong for the first
      ``RESYNC`` samples after it;
    - "swinging": 1.6 s of the pendulum released at rest from 2.5 rad, the samples after t = 0.2135 s missing
      (it swings through the bottom at 8 rad/s there: 3.3 rad in the 300 ms gap);
    - "mismatched": 1.6 s of a pendulum whose damping is 4 times the model's, swung from the bottom at 16 rad/s:
      it turns back at 2.2 rad, where the model goes over the top (1.4 turns in its first second), the samples
      after t = 0.05 s missing: a bridged gap's prediction is a turn or more off.
    """
    out = {}
    for name, theta0, rate0 in (("spinning", 0.0, 24.0), ("swinging", 2.5, 0.0), ("mismatched", 0.0, 16.0)):
        truth = model.with_parameters({"b": 4 * model.parameters["b"].default}) if name == "mismatched" else model
        traj = simulate(truth, 1.6, H, initial=truth.initial_state({"theta": theta0}, {"theta": rate0}))
        t = np.round(np.asarray(traj.t), 9)
        y = quantize(unwrap_angles(model, traj.observations), PPR)[:, 0]
        starts = {}
        for size in LONG_GAPS:
            n = int(round(size / H))
            starts[size] = (_turn_off_start(y, 100, n, RESYNC) if name == "spinning"
                            else int(np.searchsorted(t, 0.2135 if name == "swinging" else 0.05, side="right")))
        filtered = {}
        for mode in MODES:
            est, filtered[mode] = _estimator(model, mode), {}
            for i in range(len(t)):
                for e in est.push(t[i], [y[i]]).added:
                    filtered[mode][e.k] = e.coordinates[0]
            last = est.flush()
            for e in last.added if last is not None else ():
                filtered[mode][e.k] = e.coordinates[0]
            assert est.status.faults == 0, est.status.summary()
        out[name] = (t, y, filtered, starts)
    return out


def _source(y: np.ndarray, source: str) -> tuple[np.ndarray, dict, float]:
    """Readings of the (unwrapped, quantized) angles y [rad] as ``source`` sends them, the estimator's
    settings for them, and the whole turns [rad] their estimates carry more than the angles'."""
    counts = np.round(y / COUNT)
    if source == "rad":
        return y, {}, 0.0
    if source == "counts":
        return counts, {"counts": True}, 0.0
    return (counts + COUNTER_START) % COUNTER_MODULUS, {"counts": True, "counter_modulus": COUNTER_MODULUS}, \
        COUNTER_START * COUNT


def _turn_off_start(y: np.ndarray, first: int, n: int, resync: int) -> int:
    """The first sample from ``first`` on at which a gap of n samples hides a motion that the shortest way from
    the last reading before it gets a whole turn wrong, for the first ``resync`` samples after the gap (the
    bridged gap's first, a restart's last): where only the readings can tell the turn."""
    for i in range(first, len(y) - n - resync):
        moved = y[i + n : i + n + resync] - y[i - 1]
        if np.all(np.abs(moved - np.arctan2(np.sin(moved), np.cos(moved))) > math.pi):
            return i
    raise AssertionError("no gap start where the shortest way is a turn off")


#: (log, max_gap [s]): restarted after the gap (0.25 s) or bridged (2 s).
TURNING_CASES = [("spinning", 0.25), ("spinning", 2.0), ("swinging", 0.25), ("swinging", 2.0)]
#: (source, samples per update): each source of readings once, readings in rad at both ends of the update rates
#: (where a gap's first sample falls in an update does not depend on the source).
SOURCES = [("rad", 1), ("rad", 20), ("counts", 20), ("counter", 20)]


def _long_gap(model, turning_logs, motion: str, size: float, max_gap: float, source: str,
              update_every: int) -> tuple[float, StreamEstimator]:
    """Stream a turning log with ``size`` seconds missing; the largest |filtered - clean| [counts] from
    RECOVERY_S after the gap on, and the estimator (its status checked: no solver failure, the gap
    restarted or bridged as max_gap says)."""
    t, y, clean_filtered, starts = turning_logs[motion]
    i, n = starts[size], int(round(size / H))
    readings, settings, turns = _source(y, source)
    est = StreamEstimator(model, lag=LAG, h=H, ppr=PPR, update_every=update_every, max_gap=max_gap, resync=RESYNC,
                          on_warning=lambda m: None, **settings)
    stop = min(len(t), i + n + int((RECOVERY_S + 0.05) / H))
    estimates: dict[int, float] = {}
    for j in list(range(i)) + list(range(i + n, stop)):
        for e in est.push(t[j], [float(readings[j])]).added:
            estimates[e.k] = e.coordinates[0] - turns
    last = est.flush()
    for e in last.added if last is not None else ():
        estimates[e.k] = e.coordinates[0] - turns
    st = est.status
    assert st.solver_failures == 0, st.summary()
    if max_gap < size:
        assert st.restarts == 1 and st.leaps == RESYNC - 1, st.summary()
    else:
        assert st.gaps == 1 and st.missing_samples == n and st.leaps == 0, st.summary()
    worst = _recovered(clean_filtered[update_every], estimates, t[i + n] + RECOVERY_S)
    print(f"\n{motion}, gap {size:g} s from t = {t[i]:g} s, max_gap {max_gap:g} s, {source}, update_every "
          f"{update_every}: {st.summary()}; worst {worst:.2f} counts")
    return worst, est


@pytest.mark.parametrize(("source", "update_every"), SOURCES, ids=[f"{s}-every{u}" for s, u in SOURCES])
@pytest.mark.parametrize("size", LONG_GAPS, ids=[f"{s:g}s" for s in LONG_GAPS])
@pytest.mark.parametrize(("motion", "max_gap"), TURNING_CASES,
                         ids=[f"{m}-{'restart' if g < 1 else 'bridged'}" for m, g in TURNING_CASES])
def test_a_long_gaps_turn_comes_from_the_readings_and_the_estimate_returns_to_the_clean_runs(
        model, turning_logs, motion, size, max_gap, source, update_every) -> None:
    """300 ms and 1 s of samples missing, the window restarted after them (max_gap 0.25 s, 4 samples dropped
    as leaps) or the gap bridged by the dynamics (max_gap 2 s); readings in rad (a source that counts turns),
    absolute counts, or a wrapping 16-bit counter: from 0.2 s after the gap on, the filtered angle within 5
    counts of the clean run's. The shortest way from the last reading before the gap is a turn off there: a
    restart that took it ended a full turn off the readings for good."""
    worst, _ = _long_gap(model, turning_logs, motion, size, max_gap, source, update_every)
    assert worst < 5.0


@pytest.mark.parametrize(("source", "update_every"), SOURCES, ids=[f"{s}-every{u}" for s, u in SOURCES])
@pytest.mark.parametrize("size", LONG_GAPS, ids=[f"{s:g}s" for s in LONG_GAPS])
def test_a_bridged_gaps_prediction_a_turn_off_does_not_set_the_turn(model, turning_logs, size, source,
                                                                   update_every) -> None:
    """The mismatched log (damping 4 times the model's): across the bridged gap the model goes over the top
    where the pendulum turned back, its prediction a turn or more off. The turn is the readings': from 0.2 s
    after the gap on, the filtered angle within 32 counts (1/64 turn) of the clean run's (it was 2048 counts
    off when the prediction chose the turn of angles that had never passed pi). Not 5 counts: with this
    model the clean run is itself up to 20 counts off the readings, and the two runs' filtered estimates
    swing a few counts about each other for half a second after the resync."""
    worst, est = _long_gap(model, turning_logs, "mismatched", size, 2.0, source, update_every)
    assert est.status.resyncs == 1, est.status.summary()  # the readings were left out against the prediction
    assert worst < 32.0


def test_angles_within_one_turn_say_when_a_gap_left_their_turn_to_a_guess(model, turning_logs) -> None:
    """The spinning log as a source of angles within one turn (wrapped to (-pi, pi]: it has stepped by more
    than pi before the gap): after a restart the readings cannot say how many turns the gap hid. The turn
    nearest the last reading is taken and, where the reading lies more than a quarter turn from it, a
    warning names the channel; the estimates stay on the readings modulo 2 pi."""
    t, y, clean_filtered, _ = turning_logs["spinning"]
    wrapped = np.arctan2(np.sin(y), np.cos(y))
    n = int(round(0.3 / H))
    first = int(np.argmax(np.abs(np.diff(wrapped)) > math.pi)) + 1  # after the first wrap
    # A gap whose first sample taken in (after the RESYNC - 1 leaps) lies over a quarter turn from the last one
    i = next(i for i in range(first + 1, len(t) - n - RESYNC - 300)
             if abs(math.remainder(y[i + n + RESYNC - 1] - y[i - 1], 2 * math.pi)) > 0.6 * math.pi)
    heard: list[str] = []
    est = StreamEstimator(model, lag=LAG, h=H, ppr=PPR, max_gap=0.25, resync=RESYNC, on_warning=heard.append)
    last = None
    for j in list(range(i)) + list(range(i + n, i + n + 250)):
        step = est.push(t[j], [float(wrapped[j])])
        last = step.filtered if step.filtered is not None else last
    assert est.status.restarts == 1, est.status.summary()
    assert any("readings of 'theta' (angles within one turn) do not say how many turns" in m for m in heard), heard
    j = i + n + 249
    assert abs(math.remainder(last.coordinates[0] - y[j], 2 * math.pi)) / COUNT < 5.0
