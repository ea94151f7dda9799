"""Faults of a stream: warnings, dropped samples, encoder unwrapping, the jump gate.
"""

from __future__ import annotations

import warnings

import numpy as np

from mbfg.graphs.stream.readout import _wrap
from mbfg.graphs.stream.results import StreamStep, StreamWarning


class _FaultGate:
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
        return StreamStep(t, tuple(flags), self._filtered, self._smoothed, self._refined)

    def _unwrap(self, y: np.ndarray) -> np.ndarray:
        """Raw readings -> unwrapped [rad, m]: counter wrap-around, counts to radians, angles modulo 2 pi."""
        out = y.copy()
        if self._raw_prev is None:
            self._raw_prev = np.full_like(y, np.nan)
        for c in range(len(y)):
            raw = y[c]
            if np.isnan(raw):
                continue
            prev_raw, prev = self._raw_prev[c], self._unwrapped[c]
            if self.counts and self.hinge[c]:
                if np.isnan(prev_raw):
                    counts = raw
                else:
                    d = raw - prev_raw
                    if self.counter_modulus is not None:
                        M = self.counter_modulus
                        d = (d + M / 2) % M - M / 2  # the shortest way round the counter
                    counts = prev / self.step_rad + d
                value = counts * self.step_rad
            elif self.hinge[c] and not np.isnan(prev):
                value = prev + float(_wrap(raw - prev_raw))  # a reading wrapped to one turn is unwrapped
            else:
                value = raw
            self._raw_prev[c] = raw
            self._unwrapped[c] = value
            out[c] = value
        return out

    def _gate(self, y: np.ndarray, k: int, flags: list[str]) -> np.ndarray:
        """Readings too far from the filtered prediction are left out (``jump``); ``resync`` in a row are believed."""
        f = self._filtered
        if f is None:
            return y
        dt = (k - f.k) * self.h
        pred = f.coordinates + f.rates * dt
        innovation = y - pred
        innovation = np.where(self.hinge, _wrap(innovation), innovation)
        out = y.copy()
        for c in np.flatnonzero(np.isfinite(y)):
            if abs(innovation[c]) > self.jump:
                self._jumps_in_row[c] += 1
                if self._jumps_in_row[c] >= self.resync:
                    self.status.resyncs += 1
                    flags.append("resync")
                    self._jumps_in_row[c] = 0
                    continue
                self.status.jumps += 1
                if "jump" not in flags:
                    flags.append("jump")
                self._warn("jump", f"stream: reading {self.model.observations[c]!r} at t = {self._t0 + k * self.h:g} s "
                           f"is {abs(innovation[c]):.3g} from the prediction (more than {self.jump:.3g}); left out")
                out[c] = np.nan
            else:
                self._jumps_in_row[c] = 0
        return out
