"""A new user's first stream, defaults only, on the command line: simulate the viscous Furuta pendulum under a
voltage square wave (4 s at 1 kHz, a 2048-count encoder), calibrate it with the model's default free set, and
smooth another run with that calibration. The filtered angles must stay within 2 encoder counts RMS of the
simulation's truth (the same run without the encoder's quantization)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from mbfg.cli import main

PPR = 2048
COUNT = 2 * np.pi / PPR  # one encoder count [rad]


def square_wave(path, duration: float = 4.0, h: float = 1e-3) -> None:
    """0.5 V at 1 Hz, the README's voltage, in the log format (t,u)."""
    t = np.arange(0.0, duration, h)
    np.savetxt(path, np.c_[t, 0.5 * np.sign(np.sin(2 * np.pi * t))], delimiter=",", header="t,u", comments="",
               fmt="%.6g")


@pytest.mark.slow
def test_simulate_calibrate_smooth_with_defaults_tracks_the_truth_within_two_counts(tmp_path, capsys):
    voltage, cal, other, truth = (str(tmp_path / f) for f in ("voltage.csv", "cal.csv", "other.csv", "truth.csv"))
    calib, states = str(tmp_path / "calib.json"), str(tmp_path / "states.csv")
    square_wave(voltage)
    run = ["simulate", "furuta-viscous", "--duration", "4", "--dt", "0.001", "--controls", voltage, "--quiet"]
    assert main([*run, "--ppr", str(PPR), "--seed", "1", "--init", "alpha=0.5", "--out", cal]) == 0
    assert main([*run, "--ppr", str(PPR), "--seed", "2", "--init", "alpha=1.0", "--out", other]) == 0
    assert main([*run, "--init", "alpha=1.0", "--out", truth]) == 0

    assert main(["calibrate", "furuta-viscous", cal, "--out", calib, "--quiet"]) == 0
    result = json.loads(open(calib, encoding="utf-8").read())
    print(capsys.readouterr().out)
    assert result["converged"] and result["at_bound"] == [] and result["not_excited"] == [], result
    assert sorted(result["parameters"]) == ["J_Az", "J_Bx", "J_By", "K", "b_1", "b_2"]  # the default free set

    assert main(["smooth", "furuta-viscous", "--params", calib, "--ppr", str(PPR), "--input", other,
                 "--output", states, "--quiet"]) == 0
    smoothed, exact = pd.read_csv(states), pd.read_csv(truth)
    assert len(smoothed) == len(exact)
    for name in ("theta", "alpha"):
        error = smoothed[name].to_numpy() - exact[name].to_numpy()
        rms = float(np.sqrt(np.mean(error**2)))
        print(f"{name}: filtered {rms:.3g} rad RMS from the truth ({rms / COUNT:.2f} counts)")
        assert np.isfinite(error).all() and rms < 2 * COUNT, (name, rms)
