"""``mbfg torques``: the torques of a URDF robot along a logged trajectory, against the inverse dynamics at the
trajectory's closed-form rates and accelerations, and its user errors (exit 2, naming the culprit)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from mbfg.cli import main
from mbfg.inverse_dynamics import inverse_dynamics
from mbfg.kinematic_tree import load_tree

PANDA = Path(__file__).resolve().parents[1] / "datasets" / "panda.urdf"
H = 1e-3  # [s]


def _trajectory(tree):
    """A sum-of-sines trajectory per joint (within the Panda's limits) and its closed-form derivatives."""
    t = np.arange(0.0, 1.5 + H / 2, H)
    k = np.arange(1, tree.n + 1)
    a, w, phase = 0.4 / np.sqrt(k), 1.0 + 0.3 * k, 0.2 * k
    arg = w * t[:, None] + phase
    return t, a * np.sin(arg), a * w * np.cos(arg), -a * w**2 * np.sin(arg)


@pytest.fixture(scope="module")
def panda_log(tmp_path_factory):
    tree = load_tree(PANDA)
    t, q, qd, qdd = _trajectory(tree)
    path = tmp_path_factory.mktemp("torques") / "log.csv"
    pd.DataFrame({"t": t, **{j: q[:, i] for i, j in enumerate(tree.joints)}}).to_csv(path, index=False)
    return tree, path, t, inverse_dynamics(tree, q, qd, qdd)


def test_torques_of_a_logged_trajectory_match_inverse_dynamics_at_its_exact_derivatives(panda_log, tmp_path, capsys):
    tree, log, t, reference = panda_log
    out = tmp_path / "tau.csv"
    code = main(["torques", str(PANDA), str(log), "--smoothing", "0", "--out", str(out)])
    assert code == 0, capsys.readouterr().err
    frame = pd.read_csv(out)
    assert list(frame.columns) == ["t", *(f"tau_{j}" for j in tree.joints)]
    assert np.array_equal(frame["t"].to_numpy(), t)
    tau = frame.iloc[:, 1:].to_numpy()
    inside = slice(100, -100)  # the spline's natural ends bias the first and last accelerations
    assert np.abs(tau[inside] - reference[inside]).max() <= 1e-4 * np.abs(reference).max()
    assert "mbfg torques: panda, 7 joints, 1501 samples" in capsys.readouterr().err


def _user_error(capsys, *argv: str) -> str:
    code = main([str(a) for a in argv])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("mbfg: error: ") and "Traceback" not in err, err
    return err


def test_a_log_without_a_joint_column_is_refused_naming_it(panda_log, tmp_path, capsys):
    _, log, _, _ = panda_log
    short = tmp_path / "short.csv"
    pd.read_csv(log).drop(columns=["panda_joint5"]).to_csv(short, index=False)
    assert "panda_joint5" in _user_error(capsys, "torques", PANDA, short, "--out", tmp_path / "x.csv")
    assert not (tmp_path / "x.csv").exists()


def test_an_empty_angle_cell_is_refused_naming_joint_and_row(panda_log, tmp_path, capsys):
    _, log, _, _ = panda_log
    frame = pd.read_csv(log)
    frame.loc[40, "panda_joint3"] = np.nan
    gap = tmp_path / "gap.csv"
    frame.to_csv(gap, index=False)
    err = _user_error(capsys, "torques", PANDA, gap, "--smoothing", "0", "--out", tmp_path / "x.csv")
    assert "panda_joint3: row 40" in err


def test_output_onto_the_log_is_refused_before_anything_is_read(panda_log, capsys):
    _, log, _, _ = panda_log
    before = log.read_bytes()
    assert "same file as LOG.csv" in _user_error(capsys, "torques", PANDA, log, "--out", log)
    assert log.read_bytes() == before
