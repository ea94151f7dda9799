"""A lab's own recording given to ``mbfg calibrate``, ``crossval`` and ``sweep`` (mbfg.cli.recordings).

The DFKI double pendulum and QUBE-Servo CSVs of ../shared/data are recognised by their header; a
recording that does not fit the model is refused, and so is a non-uniform one without --resample.
Nothing here compiles an estimation: the command-line cases stop at the reading or at the time-step
check right after it.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from mbfg.cli import main
from mbfg.cli.common import rigid_model
from mbfg.cli.recordings import read_recording
from mbfg.datasets.rigs import DFKI_PERIOD, find_gaps, load_dfki_double_pendulum, load_qube, resample_uniform
from mbfg.errors import DataError
from mbfg.logs import Log, read_log, write_log

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data"
DFKI = DATA / "dfki_double_pendulum" / "trajectory_00.csv"
QUBE = DATA / "qube_servo" / "qube_20230828T150615_434_696_394.csv"


def _need(path: Path) -> str:
    if not path.is_file():
        pytest.fail(f"rig recording not found: {path.resolve()} (shared/data beside the repository is absent)")
    return str(path)


def _same(a: Log, b: Log) -> None:
    """Bit for bit: times, observations (NaN included), controls, names and source."""
    for name in ("t", "y", "u"):
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes(), name
    assert (a.observations, a.controls, a.source) == (b.observations, b.controls, b.source)


@pytest.fixture(scope="module")
def piece(tmp_path_factory) -> Path:
    """The first 0.5 s of trajectory_00.csv as published (header and rows copied verbatim; it has gaps)."""
    lines = Path(_need(DFKI)).read_text(encoding="utf-8").splitlines(keepends=True)
    rows = [line for line in lines[1:] if float(line.split(",", 1)[0]) < 0.5]
    path = tmp_path_factory.mktemp("rigs") / "piece.csv"
    path.write_text(lines[0] + "".join(rows), encoding="utf-8")
    return path


@pytest.mark.parametrize("name", ["dfki-double-pendulum", "double-pendulum-torque"])
def test_dfki_without_resample_is_refused_with_its_gap_count(name, capsys):
    path = _need(DFKI)
    gaps = find_gaps(load_dfki_double_pendulum(path), DFKI_PERIOD)
    assert len(gaps) == 10  # the count the message must give (checked independently of mbfg.cli)
    with pytest.raises(DataError) as info:
        read_recording(path, rigid_model(name))
    message = str(info.value)
    assert message.startswith(path) and "DFKI double pendulum" in message, message
    assert "10 of its 4992 sample intervals are irregular" in message and "10 gaps" in message, message
    assert "--resample 0.002" in message, message
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize(("file", "model", "expects"), [
    (DFKI, "furuta", "model 'furuta' expects observations theta, alpha and controls u"),
    (DFKI, "double-pendulum", "model 'double-pendulum' expects observations q1, q2 and controls (none)"),
    (QUBE, "dfki-double-pendulum", "model 'dfki-double-pendulum' expects observations q1, q2 and controls tau1, tau2"),
])
def test_a_recording_for_another_model_is_refused_naming_the_format(file, model, expects):
    path = _need(file)
    fmt = "DFKI double pendulum recording" if file == DFKI else "QUBE-Servo recording"
    with pytest.raises(DataError) as info:
        read_recording(path, rigid_model(model), resample=0.002)  # refused before any resampling
    message = str(info.value)
    assert message.startswith(path) and f"a {fmt} (recognised by its columns" in message, message
    assert expects in message, message


def test_a_standard_log_reads_exactly_as_before(tmp_path, capsys):
    model = rigid_model("double-pendulum-torque")
    path = tmp_path / "log.csv"
    # Irregular times and a missing reading: what read_log accepts passes through untouched (the estimation,
    # not the reader, judges a standard log's sampling).
    t = [0.0, 0.001, 0.002, 0.0045, 0.0055]
    write_log(path, t, {"q1": [0.1, 0.2, np.nan, 0.4, 0.5], "q2": [1e-17, 2, 3, 4, 5], "extra": [0] * 5},
              {"tau1": [1, 2, 3, 4, 5], "tau2": [0.3, 0.1, 0.2, 0.5, 0.4]})
    # A column the model does not have is refused (a log of another model?) unless the columns to read are named.
    with pytest.raises(DataError, match=r"column\(s\) extra are not columns of 'double-pendulum-torque'"):
        read_recording(str(path), model)
    columns = ["t", *model.observations, *model.controls]
    _same(read_recording(str(path), model, columns=columns),
          read_log(str(path), model.observations, model.controls))
    assert capsys.readouterr().err == ""  # nothing said about a standard log read as it is
    resampled = read_recording(str(path), model, resample=0.001, columns=columns)
    _same(resampled, resample_uniform(read_log(str(path), model.observations, model.controls), 0.001))
    assert "standard format" in capsys.readouterr().err


def test_dfki_resampled_equals_resample_uniform_of_the_loader(capsys):
    path = _need(DFKI)
    log = read_recording(path, rigid_model("dfki-double-pendulum"), resample=0.002, command="mbfg calibrate")
    _same(log, resample_uniform(load_dfki_double_pendulum(path), 0.002))
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"mbfg calibrate: {path}: read 4993 rows as a DFKI double"), err
    assert "10 gaps" in err and "--resample 0.002" in err and "uniform 0.002 s grid" in err, err
    assert err.rstrip().endswith(f"{len(log.t)} rows") and len(log.t) == 5000, err
    read_recording(path, rigid_model("dfki-double-pendulum"), resample=0.002, quiet=True)
    assert capsys.readouterr().err == ""


def test_qube_is_recognised_and_read_as_load_qube(capsys):
    path = _need(QUBE)
    log = read_recording(path, rigid_model("furuta"))
    _same(log, load_qube(path))
    err = capsys.readouterr().err
    assert "10000 rows as a QUBE-Servo recording" in err and "alpha = pi - alpha_file" in err, err
    read_recording(path, rigid_model("furuta"), quiet=True)
    assert capsys.readouterr().err == ""


def test_a_file_with_a_lab_format_and_the_standard_columns_is_refused(tmp_path):
    path = tmp_path / "both.csv"
    path.write_text("t,theta,alpha,plant_input,u\n0,0,0,0,0\n0.002,0,0,0,0\n0.004,0,0,0,0\n", encoding="utf-8")
    with pytest.raises(DataError, match="QUBE-Servo recording .* and those of a standard log .* cannot tell"):
        read_recording(str(path), rigid_model("furuta"))


def _run(capsys, *argv: object) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_the_commands_read_lab_recordings(piece, tmp_path, capsys):
    """calibrate, crossval and sweep refuse the raw piece without --resample (its gaps counted), and refuse
    it for a model it does not fit; calibrate with --resample reads it onto the 2 ms grid (the --dt check
    right after the reading then stops it before any compilation, naming the grid's period)."""
    params = tmp_path / "start.yaml"
    params.write_text("b1: 0.002\n", encoding="utf-8")
    gaps = len(find_gaps(load_dfki_double_pendulum(piece), DFKI_PERIOD))
    assert gaps == 8
    for argv in (["calibrate"], ["crossval", "--params", params], ["sweep", "--out", tmp_path / "sweep.csv"]):
        cmd, rest = argv[0], argv[1:]
        code, out, err = _run(capsys, cmd, "dfki-double-pendulum", piece, *rest, "--quiet")
        assert code == 2 and out == "", (cmd, out, err)
        assert re.search(rf"{re.escape(str(piece))}: a DFKI double pendulum recording that is not uniformly sampled"
                         rf": {gaps} of its \d+ sample intervals are irregular", err), (cmd, err)
        assert "--resample 0.002" in err, (cmd, err)
    code, out, err = _run(capsys, "calibrate", "furuta", piece, "--resample", "0.002")
    assert code == 2 and "a DFKI double pendulum recording (recognised by its columns" in err, err
    code, out, err = _run(capsys, "calibrate", "dfki-double-pendulum", piece, "--resample", "0.002", "--dt", "0.003")
    assert code == 2, (out, err)
    assert "--resample 0.002: resampled onto a uniform 0.002 s grid" in err and f"{gaps} gaps" in err, err
    assert "--dt 0.003: the estimation time-step must be a whole multiple of the sample period 0.002 s" in err, err
    code, out, err = _run(capsys, "calibrate", "dfki-double-pendulum", piece, "--resample", "0")
    assert code == 2 and "argument --resample: expected a finite number > 0" in err, err
