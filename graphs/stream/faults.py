"""Faults of a stream: warnings, dropped samples, encoder unwrapping, the jump gate.
"""

from __future__ import annotations

import math
import warnings
from typing import TYPE_CHECKING

import numpy as np

from mbfg.graphs.stream.results import StreamStep, StreamWarning

if TYPE_CHECKING:  # the estimator's attributes and methods the mixin uses
    from mbfg.graphs.stream._host import StreamHost
else:
    StreamHost = object


def _wrap_angle(x: float) -> float:
    """An angle [rad] wrapped to (-pi, pi], a Python float (:func:`~mbfg.graphs.stream.readout.wrap_angles` for arrays)."""
    return math.atan2(math.sin(x), math.cos(x))


class FaultGate(StreamHost):
    """The fault handling of :class:`StreamEstimator` (a mixin): warnings once per kind, dropped samples,
    encoder unwrapping and the jump gate."""

    def _warn(self, kind: str, message: str) -> None:
        if kind in self._warned:
            return
        self._warned.add(kind)
        text = f"{message} (further ones are counted in the status, not reported)"
        if self.on_warning is not None:
            self.on_warning(text)
        else:
            warnings.warn(text, StreamWarning, stacklevel=3)

    def report_malformed(self, t: float, what: str = "a malformed sample") -> StreamStep:
        """Count a sample that could not be read (e.g. a CSV line with the wrong number of cells) as a fault."""
        self.status.samples += 1
        return self._drop("malformed", what, [], t)

    def _drop(self, kind: str | None, message: str | None, flags: list[str], t: float,
              warn: tuple[str, str] | None = None) -> StreamStep:
        if kind is not None:
            setattr(self.status, kind, getattr(self.status, kind) + 1)
            flags = flags + [kind]
            self._warn(kind, f"stream: {message} was dropped")
        if warn is not None:
            self._warn(*warn)
        if self._pending:  # the estimates repeated here are not those of the samples waiting for an update
            flags = flags + ["pending"]
        return StreamStep(t, tuple(flags), self._filtered, self._smoothed, self._refined)

    def _leap(self, t: float, j: int, flags: list[str]) -> StreamStep | None:
        """A time more than ``max_gap`` from the last accepted one (forward or back): a bad clock, or a stream
        that really went on elsewhere (a long outage, a restarted rig). The sample is dropped (fault
        ``leaps``) unless it is the ``resync``-th in a row on the new clock (consecutive slots, within
        ``max_gap`` of each other): then the window restarts there (flag ``restart``) and None is returned
        so that the caller takes the sample in. Never a bridge of thousands of states."""
        cand = self._leap_run
        if cand is not None and 0 < j - cand[0] <= self._max_gap_slots:
            run = (j, cand[1] + 1)
        else:
            run = (j, 1)
        if run[1] >= self.resync:
            self._leap_run = None
            self.status.restarts += 1
            self._warn("restart", f"stream: the clock went on at t = {t:g} s for {self.resync} samples in a row; "
                       "the window restarts there")
            if self._smoother is not None:
                try:
                    self._update()  # the samples waiting before the leap, then a fresh window
                except Exception:  # noqa: BLE001 - the restart discards that window anyway
                    pass
            self._smoother = None
            self._pending = []
            self._restart_velocity = None  # unknown after a leap: the weak prior, the readings decide
            self._smoothed = None  # no stale smoothed values after the restart (the cells stay empty)
            self._filtered = None
            self._jumps_in_row[:] = 0
            self._last_j = j - 1 if j > self._last_j else self._last_j  # (push re-bases a clock set back)
            flags.append("restart")
            return None
        self._leap_run = run
        self.status.leaps += 1
        return self._drop(None, None, flags + ["leap"], t,
                          warn=("leap", f"stream: sample t = {t:g} s is {abs(j - self._last_j) * self.period:.3g} s "
                                f"from the last one (more than max_gap = {self.max_gap:g} s); dropped"))

    def _unwrap(self, y: np.ndarray, pred: np.ndarray | None = None, gap: bool = False) -> np.ndarray:
        """Raw readings -> unwrapped [rad, m]: counter wrap-around, counts to radians, angles modulo 2 pi.

        Between consecutive samples the shortest way round is taken (a step of less than half a turn, or half
        the counter). After a gap (gap: samples are missing before y, whether the gap is bridged or the window
        restarts after it) the turn comes from the reading wherever the readings carry it, never from an
        extrapolation across the gap, however long it was:

        - raw counts without a modulus are absolute: the count moved is the reading's difference;
        - readings in rad of a channel that has never stepped by more than pi between consecutive samples are
          taken as they come: a source that counts turns reads the turn itself, and one within one turn that
          has not wrapped so far reads its own branch (an extrapolation, a full turn off, would stay a
          turn off the readings for good).

        Only where the readings cannot carry it, angles within one turn that have wrapped before (a step of
        more than pi between samples) and a counter that wraps after ``counter_modulus`` counts, is the turn
        (the number of counter wraps; the count within the counter stays the reading's) the one nearest the
        model's prediction ``pred`` (n_obs,) [rad, m] of the new state across a bridged gap, or without one
        (a restart) nearest the last reading; a warning (once) says so where the reading lies more than a
        quarter turn (quarter counter) from that reference."""
        out = y.copy()
        if self._raw_prev is None:
            self._raw_prev = np.full_like(y, np.nan)
        # Python floats: this runs on every sample, and scalar NumPy arithmetic costs microseconds a step.
        raws, raw_prevs, prevs = y.tolist(), self._raw_prev.tolist(), self._unwrapped.tolist()
        for c, raw in enumerate(raws):
            if math.isnan(raw):
                continue
            prev_raw, prev = raw_prevs[c], prevs[c]
            guess = None if pred is None or not np.isfinite(pred[c]) else float(pred[c])
            if self.counts and self.hinge[c]:
                assert self.step_rad is not None  # counts need ppr
                if math.isnan(prev_raw):
                    counts = raw
                elif self.counter_modulus is not None:
                    M = self.counter_modulus
                    base_counts = prev / self.step_rad
                    # The counter has wrapped an unknown number of times: the wraps nearest the reference (the
                    # model's turn across a bridged gap, else the last reading), the count within it the reading's.
                    ref = guess / self.step_rad if gap and guess is not None else base_counts
                    d = raw - prev_raw - (ref - base_counts)
                    off = (d + M / 2) % M - M / 2
                    counts = ref + off
                    if gap and abs(off) > M / 4:
                        self._warn_turn(c, f"a counter that wraps after {M} counts", guess is not None,
                                        f"{abs(off):.0f} counts")
                else:
                    counts = prev / self.step_rad + (raw - prev_raw)  # absolute counts: no ambiguity
                value = counts * self.step_rad
            elif self.hinge[c]:
                if not gap and not math.isnan(prev_raw) and abs(raw - prev_raw) > math.pi:
                    self._turn_steps[c] = True  # turns that are not motion: the source does not count turns
                if math.isnan(prev):
                    value = raw
                elif gap and not self._turn_steps[c]:
                    value = raw  # the reading says which turn
                elif gap:
                    ref = guess if guess is not None else prev
                    off = _wrap_angle(raw - ref)
                    value = ref + off
                    if abs(off) > math.pi / 2:
                        self._warn_turn(c, "angles within one turn", guess is not None, f"{abs(off):.3g} rad")
                else:
                    value = prev + _wrap_angle(raw - prev_raw)  # a reading wrapped to one turn is unwrapped
            else:
                value = raw
            self._raw_prev[c] = raw
            self._unwrapped[c] = value
            out[c] = value
        return out

    def _warn_turn(self, c: int, source: str, predicted: bool, far: str) -> None:
        """Warn (once) that the turn of channel c after a gap is not in its readings and was decided narrowly."""
        reference = "the model's prediction across the gap" if predicted else "the last reading before the gap"
        self._warn("turn", f"stream: the readings of {self.model.observations[c]!r} ({source}) do not say how "
                   f"many turns were made in a gap; the turn nearest {reference} was taken, {far} from the "
                   "reading: the angles that follow may be a whole turn off")

    def _gate(self, y: np.ndarray, k: int, flags: list[str], pred: np.ndarray | None = None) -> np.ndarray:
        """Readings too far from the prediction are left out (``jump``); ``resync`` in a row are believed.

        pred (n_obs,): the model's prediction of state k (after a gap). Else each reading is expected at the
        newest of: the filtered estimate, the model's prediction across the last gap, and the channel's last
        believed reading of a sample still awaiting its update; extrapolated from there at the rates of the
        first two. (With several samples per update the filtered estimate lags the readings by up to an
        update: extrapolated over that at a start's unknown rate, a fast rig's readings would look like
        jumps.)"""
        f = self._filtered
        if f is None:
            return y
        k_ref, coordinates, rates = f.k, f.coordinates, f.rates
        if self._gate_ref is not None and self._gate_ref[0] > k_ref:  # samples after a gap await their update
            k_ref, coordinates, rates = self._gate_ref
        # In Python floats: this runs on every sample, and a NumPy operation on a few readings costs more
        # than its arithmetic.
        readings, hinges, h = y.tolist(), self._hinge_list, self.h
        if pred is not None:
            expected = pred.tolist()
        else:
            expected = []
            for q, qd, (k_c, q_c) in zip(coordinates.tolist(), rates.tolist(), self._believed):
                expected.append(q_c + qd * (k - k_c) * h if k_ref < k_c < k else q + qd * (k - k_ref) * h)
        out = y
        for c, (reading, guess) in enumerate(zip(readings, expected)):
            if math.isnan(reading):  # missing: nothing to gate
                continue
            d = reading - guess
            if hinges[c]:
                d = _wrap_angle(d) if math.isfinite(d) else math.nan  # as np.arctan2 of a non-finite angle
            if not abs(d) > self.jump:  # (a NaN guess believes the reading)
                self._jumps_in_row[c] = 0
                self._believed[c] = (k, reading)
                continue
            self._jumps_in_row[c] += 1
            if self._jumps_in_row[c] >= self.resync:
                self.status.resyncs += 1
                flags.append("resync")
                self._jumps_in_row[c] = 0
                self._believed[c] = (k, reading)
                continue
            self.status.jumps += 1
            if "jump" not in flags:
                flags.append("jump")
            assert self._t0 is not None  # set by the first sample
            self._warn("jump", f"stream: reading {self.model.observations[c]!r} at t = {self._t0 + k * self.h:g} s "
                       f"is {abs(d):.3g} from the prediction (more than {self.jump:.3g}); left out")
            if out is y:
                out = y.copy()
            out[c] = np.nan
        return out
