"""The stream on the real rigs' recordings: faults, and how far its filtered estimates run from the encoders.

For each recording in ../shared/data (the two QUBE-Servo episodes with ``qube-servo``, the DFKI double
pendulum's two trajectories with ``dfki-double-pendulum``; the models' own parameters and weights, no
calibration; ``--weight``: another state error weight), each time-step h (the sample period and twice it) and each number of samples per update,
a :class:`~mbfg.graphs.stream.StreamEstimator` takes the recording sample by sample, as ``mbfg smooth``
does. Printed per run: the solver failures (each one a restart of the smoother), the readings left out as
jumps and the channels believed again after them (resyncs), and the RMS and largest difference between
each sample's filtered estimate and its own readings [rad] (over the samples the stream placed within
half a period of their time: the DFKI recordings are not uniformly sampled), and the wall time.

The encoders resolve 2 pi / 2048 = 3.1e-3 rad (QUBE) and better (DFKI), so a filtered estimate a few
milliradians off its readings follows them; tenths of a radian mean the estimate ran away from them.

Usage::

    python benchmarks/stream_rigs.py                      # every recording, 20 s of each: about 6 min
    python benchmarks/stream_rigs.py --seconds 5 --rig qube
    python benchmarks/stream_rigs.py --rig dfki --weight 1e6  # the DFKI model streamed at another w than its own
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import _record
import numpy as np

from mbfg.datasets.rigs import DFKI_PERIOD, QUBE_PERIOD, load_dfki_double_pendulum, load_qube
from mbfg.graphs.stream import StreamEstimator
from mbfg.logs import Log
from mbfg.models import load_model

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data"
RECORDINGS = {
    "qube": ("qube-servo", QUBE_PERIOD, load_qube,
             [DATA / "qube_servo" / name for name in ("qube_20230828T150615_434_696_394.csv",
                                                      "qube_20230828T150709_610_277_801.csv")]),
    "dfki": ("dfki-double-pendulum", DFKI_PERIOD, load_dfki_double_pendulum,
             [DATA / "dfki_double_pendulum" / f"trajectory_0{i}.csv" for i in (0, 1)]),
}


def stream(model, log: Log, period: float, stride: int, every: int, weight: float | None
           ) -> tuple[StreamEstimator, np.ndarray, float]:
    """The stream of ``log`` (the estimator, each placed sample's filtered estimate minus its readings, wall s)."""
    est = StreamEstimator(model, period=period, h=stride * period, update_every=every, weight=weight,
                          on_warning=lambda m: None)
    diff = []
    start = time.perf_counter()
    for t, y, u in zip(log.t, log.y, log.u):
        step = est.push(t, list(y), u)
        if step.filtered is not None and abs(step.filtered.t - t) < period / 2:
            diff.append(step.filtered.coordinates - y)
    est.flush()
    return est, np.array(diff), time.perf_counter() - start


def _row(values: np.ndarray) -> str:
    return " ".join(f"{v:.2g}" for v in values)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rig", choices=("qube", "dfki", "both"), default="both")
    parser.add_argument("--seconds", type=float, default=20.0, help="stream the first S seconds of each recording")
    parser.add_argument("--strides", default="1,2", help="time-steps h as multiples of the sample period")
    parser.add_argument("--every", default="1,5,20", help="samples per smoother update")
    parser.add_argument("--weight", type=float, default=None,
                        help="state error weight w of every stream (default: each model's own)")
    args = parser.parse_args()
    print(f"{'recording':<40} {'h [ms]':>6} {'every':>5} {'failures':>8} {'jumps':>5} {'resyncs':>7} "
          f"{'RMS filtered - readings [rad]':>30} {'max':>20} {'wall s':>7}")
    rows = []
    for rig in ("qube", "dfki") if args.rig == "both" else (args.rig,):
        name, period, load, paths = RECORDINGS[rig]
        model = load_model(name)
        for path in paths:
            log = load(path)
            k = int(np.searchsorted(log.t, log.t[0] + args.seconds, side="right"))
            log = Log(log.t[:k], log.y[:k], log.u[:k], log.observations, log.controls, log.source)
            for stride in (int(s) for s in args.strides.split(",")):
                for every in (int(n) for n in args.every.split(",")):
                    est, diff, wall = stream(model, log, period, stride, every, args.weight)
                    st = est.status
                    rms = np.sqrt(np.mean(np.square(diff), axis=0))
                    print(f"{path.name:<40} {1e3 * stride * period:>6g} {every:>5} {st.solver_failures:>8} "
                          f"{st.jumps:>5} {st.resyncs:>7} {_row(rms):>30} {_row(np.abs(diff).max(axis=0)):>20} "
                          f"{wall:>7.1f}", flush=True)
                    rows.append({"recording": path.name, "h_ms": 1e3 * stride * period, "every": every,
                                 "failures": st.solver_failures, "jumps": st.jumps, "resyncs": st.resyncs,
                                 "rms_filtered_minus_readings": rms, "max_filtered_minus_readings":
                                 np.abs(diff).max(axis=0), "wall_s": wall})
    _record.write(__file__, rows)


if __name__ == "__main__":
    main()
