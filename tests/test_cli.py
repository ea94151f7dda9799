"""The ``mbfg`` command line, run in-process through ``mbfg.cli.main``.

Physics runs are short (tens of steps): they check the plumbing (header, rows,
units, exit codes, messages), not the integrators' accuracy, which the
forward- and inverse-dynamics tests cover.
"""

from __future__ import annotations

import math
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from mbfg import ModelError, load_mbse_yaml
from mbfg.cli import COMMANDS, build_parser, main
from mbfg.datasets import builtin_mechanisms, fourbar_crank_trajectory, load_mechanism, mechanism_path

G = 9.81
FOURBAR_LINKS = {  # (point a, point b) -> length [m]; A = (0, 0), D = (4, 0) fixed
    ("A", "P1"): 1.0,
    ("P1", "P2"): 2.0,
    ("P2", "D"): math.sqrt(13.0),
}


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def _fourbar_link_errors(frame: pd.DataFrame) -> np.ndarray:
    """max over rows of |distance - L| for each link [m], from the CSV columns."""
    pts = {
        "A": (0.0, 0.0),
        "D": (4.0, 0.0),
        "P1": (frame["x1"].to_numpy(), frame["y1"].to_numpy()),
        "P2": (frame["x2"].to_numpy(), frame["y2"].to_numpy()),
    }
    errors = []
    for (a, b), length in FOURBAR_LINKS.items():
        (xa, ya), (xb, yb) = pts[a], pts[b]
        errors.append(np.max(np.abs(np.hypot(np.subtract(xb, xa), np.subtract(yb, ya)) - length)))
    return np.array(errors)


@pytest.fixture
def crank_slice(tmp_path, mbse_dir) -> Path:
    """The first 40 samples of the MBSE crank trajectory (header line kept)."""
    lines = (mbse_dir / "fourbars1-with-rel-angle-trajectory.txt").read_text().splitlines()
    header = [ln for ln in lines[:5] if ln.lstrip().startswith("%")]
    rows = [ln for ln in lines if ln.strip() and not ln.lstrip().startswith("%")][:40]
    path = tmp_path / "crank.txt"
    path.write_text("\n".join(header + rows) + "\n")
    return path


# --------------------------------------------------------------------------------------
# Built-in data
# --------------------------------------------------------------------------------------


def test_builtin_mechanisms_load_and_match_the_seed_parameters(mbse_dir):
    assert set(builtin_mechanisms()) == {"fourbar", "fourbar-crank", "pendulum", "parallelogram"}
    pairs = {"fourbar": "fourbars1.yaml", "fourbar-crank": "fourbars1-with-rel-angle.yaml",
             "pendulum": "pendulum1.yaml"}
    for name, reference in pairs.items():
        assert mechanism_path(name).is_file()
        ours, theirs = load_mechanism(name), load_mbse_yaml(mbse_dir / reference)
        assert ours.coordinate_names == theirs.coordinate_names
        np.testing.assert_allclose(ours.q0, theirs.q0, atol=1e-12)
        np.testing.assert_allclose(ours.mass_matrix, theirs.mass_matrix, atol=1e-12)
        np.testing.assert_allclose(ours.gravity_forces(G), theirs.gravity_forces(G), atol=1e-12)
        assert ours.dof == 1
    assert load_mechanism("fourbar-crank").coordinate_names == ("x1", "y1", "x2", "y2", "theta1")
    # A path works too.
    assert load_mechanism(mbse_dir / "pendulum2.yaml").n == 10


def test_load_mechanism_unknown_name_lists_the_builtins():
    with pytest.raises(ModelError, match="fourbar, fourbar-crank, pendulum"):
        load_mechanism("no-such-mechanism")


def test_fourbar_crank_trajectory_matches_the_mbse_file(mbse_dir):
    t, theta = fourbar_crank_trajectory()
    ref = np.loadtxt(mbse_dir / "fourbars1-with-rel-angle-trajectory.txt", comments="%")
    assert t.shape == theta.shape == (2000,)
    np.testing.assert_allclose(t, ref[:, 0], atol=1e-12)
    np.testing.assert_allclose(theta, ref[:, 1], atol=1e-7)  # the file has 8 significant digits


# --------------------------------------------------------------------------------------
# forward
# --------------------------------------------------------------------------------------


def test_forward_fourbar_writes_header_rows_and_satisfies_the_constraints(capsys, tmp_path):
    out = tmp_path / "q.csv"
    code, stdout, err = _run(capsys, "forward", "fourbar", "--dt", "1e-3", "--duration", "0.05", "--out", out)
    assert code == 0, err
    frame = pd.read_csv(out)
    assert list(frame.columns) == ["t", "x1", "y1", "x2", "y2"]
    assert len(frame) == 51
    np.testing.assert_allclose(frame["t"], 1e-3 * np.arange(51), atol=1e-12)
    assert _fourbar_link_errors(frame).max() < 1e-6
    # Released from rest at the YAML positions, it falls under gravity.
    np.testing.assert_allclose(frame.iloc[0, 1:], [1.0, 0.0, 1.0, 2.0], atol=1e-9)
    assert frame["y1"].iloc[-1] < -1e-4
    # Progress and the summary go to stderr, nothing to stdout.
    assert stdout == ""
    summary = err.strip().splitlines()[-1]
    assert summary.startswith("mbfg forward: 50 steps") and "max |Phi(q)|" in summary
    assert " s wall in all (solve " in summary  # the whole command's time, then the solve's


def test_forward_independent_coordinates_quiet(capsys, tmp_path):
    out = tmp_path / "q.csv"
    code, _, err = _run(
        capsys, "forward", "fourbar", "--dt", "1e-3", "--duration", "0.05",
        "--coords", "independent", "--velocities", "--quiet", "--out", out,
    )
    assert code == 0, err
    frame = pd.read_csv(out)
    assert list(frame.columns) == ["t", "x1", "y1", "x2", "y2", "dx1", "dy1", "dx2", "dy2"]
    assert len(frame) == 51
    assert _fourbar_link_errors(frame).max() < 1e-6
    # --quiet: only the summary line.
    assert len(err.strip().splitlines()) == 1 and err.startswith("mbfg forward:")


def test_forward_batch_to_stdout(capsys):
    code, stdout, err = _run(capsys, "forward", "pendulum", "--dt", "2e-3", "--duration", "0.04", "--batch",
                             "--out", "-")
    assert code == 0, err
    lines = stdout.strip().splitlines()
    assert lines[0] == "t,x1,y1" and len(lines) == 1 + 21
    frame = pd.DataFrame([[float(v) for v in ln.split(",")] for ln in lines[1:]], columns=["t", "x1", "y1"])
    np.testing.assert_allclose(np.hypot(frame["x1"], frame["y1"]), 2.0, atol=1e-6)
    assert "iterations (batch solve)" in err


def test_forward_batch_at_the_help_texts_horizon_converges_to_the_fixed_lag_trajectory(capsys, tmp_path):
    """`mbfg forward fourbar --duration 0.2 --batch` (the help's example) solves the whole horizon to
    the same discrete trajectory as the fixed-lag smoother, and says it converged (exit 0)."""
    batch, window = tmp_path / "batch.csv", tmp_path / "window.csv"
    code, _, err = _run(capsys, "forward", "fourbar", "--duration", "0.2", "--batch", "--out", batch, "--quiet")
    assert code == 0 and "warning" not in err, err
    assert _run(capsys, "forward", "fourbar", "--duration", "0.2", "--out", window, "--quiet")[0] == 0
    a, b = pd.read_csv(batch), pd.read_csv(window)
    assert len(a) == 201 and list(a.columns) == list(b.columns)
    np.testing.assert_allclose(a.to_numpy(), b.to_numpy(), rtol=0, atol=1e-9)


def test_forward_batch_that_does_not_converge_says_so_and_exits_1(capsys, tmp_path, monkeypatch):
    """A batch solve stopped by its iteration limit returns converged=False; the CLI warns and exits 1.

    At g = 1000 m/s^2 the fixed-lag start guess is off enough that the first Gauss-Newton step overshoots
    and the LM takes over for several iterations (at 9.81 one step reaches the minimum)."""
    from mbfg.datasets import load_mechanism
    from mbfg.graphs import forward

    mech = load_mechanism("fourbar")
    levenberg_marquardt, handed_over = forward._levenberg_marquardt, []
    monkeypatch.setattr(forward, "_levenberg_marquardt", lambda *a: handed_over.append(a) or levenberg_marquardt(*a))
    full = forward.simulate_forward(mech, 1e-3, 0.05, g=1000.0, window=None)
    assert full.converged is True and full.iterations[0] > 1 and handed_over, full.iterations
    assert forward.simulate_forward(mech, 1e-3, 0.05, g=1000.0, window=None, max_iterations=1).converged is False
    assert forward.simulate_forward(mech, 1e-3, 0.05).converged is None  # fixed-lag: not a batch solve
    solve_batch = forward._solve_batch
    monkeypatch.setattr(forward, "_solve_batch", lambda builder, n_steps, max_iterations, progress, start:
                        solve_batch(builder, n_steps, 1, progress, start))
    code, _, err = _run(capsys, "forward", "fourbar", "--duration", "0.05", "--gravity", "1000", "--batch",
                        "--out", tmp_path / "q.csv", "--quiet")
    assert code == 1 and "did not converge in 1 iterations" in err, err
    assert "iterations (batch solve) 1, NOT converged" in err
    assert (tmp_path / "q.csv").exists()


def test_forward_batch_at_1_s_agrees_with_the_fixed_lag_trajectory_and_reports_each_iteration(capsys, tmp_path):
    """`mbfg forward fourbar --duration 1 --batch` (issue 21: it once wrote its start guess, 2.5 cm off,
    with exit 0) converges and agrees with the default fixed-lag run to 1e-6 m (measured: 2.4e-8 m);
    its progress shows the fixed-lag start and every iteration. About 12 s on 2 busy cores."""
    batch, window = tmp_path / "batch.csv", tmp_path / "window.csv"
    code, _, err = _run(capsys, "forward", "fourbar", "--duration", "1", "--batch", "--out", batch)
    assert code == 0 and "warning" not in err, err
    summary = err.strip().splitlines()[-1]
    assert ", converged, " in summary and " from its fixed-lag start, max |Phi(q)|" in summary, summary
    moved = float(summary.split(", converged, ")[1].split(" from its fixed-lag start")[0])
    assert "[forward dependent: fixed-lag start guess] 1000/1000" in err
    lines = [line for line in err.splitlines() if line.startswith("[forward dependent: batch iteration]")]
    iterations = int(err.split("iterations (batch solve) ")[1].split(",")[0])
    assert len(lines) == iterations, err  # one line per iteration, with its cost and time
    assert all(" cost=" in line and " t=" in line for line in lines)
    assert _run(capsys, "forward", "fourbar", "--duration", "1", "--out", window, "--quiet")[0] == 0
    a, b = pd.read_csv(batch), pd.read_csv(window)
    assert len(a) == 1001 and list(a.columns) == list(b.columns)
    difference = np.abs(a.to_numpy() - b.to_numpy()).max()
    print(f"\n1 s four-bar: batch vs fixed-lag max |dq| = {difference:.2e} m (vs its start {moved:.2e} m), "
          f"{iterations} iterations")
    assert difference < 1e-6 and moved < 1e-6


# --------------------------------------------------------------------------------------
# inverse
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("coordinate", ["4", "theta1"])
def test_inverse_fourbar_crank_torque_at_rest(capsys, tmp_path, crank_slice, coordinate):
    out = tmp_path / "forces.csv"
    code, _, err = _run(capsys, "inverse", "fourbar-crank", crank_slice, "--coordinate", coordinate, "--out", out)
    assert code == 0, err
    frame = pd.read_csv(out)
    assert list(frame.columns) == ["t", "Q_theta1"]
    assert len(frame) == 40
    # At t = 0 the linkage is at rest with crank acceleration 1.2 * 2^2 = 4.8 rad/s^2,
    # so torque = J(0) * 4.8 + 4.5 * 9.81. Velocity analysis at theta = 0 for a crank
    # rate w: v_P1 = (0, w), v_P2 = (2/3, 1) w (perpendicular to D -> P2, same
    # component along the vertical coupler), coupler and rocker rates w/3.
    # J(0) = crank 1/3 + coupler 2 (1/9 + 1) + (2/3)(1/9) + rocker (52/3)(1/9) = 41/9 kg m^2;
    # gravity: the centres of gravity rise at 1/2, 1, 1/2 w -> 1 * 0.5 + 2 * 1 + 4 * 0.5 = 4.5.
    expected = 41.0 / 9.0 * 4.8 + 4.5 * G
    assert frame["Q_theta1"].iloc[0] == pytest.approx(expected, abs=0.1)
    assert frame["Q_theta1"].iloc[0] == pytest.approx(66.0, abs=0.1)


def test_inverse_progress_shows_every_stage_start_and_end(capsys, tmp_path, crank_slice):
    """A rate-limited progress line can skip a stage; every stage prints its start and its end."""
    code, _, err = _run(capsys, "inverse", "fourbar-crank", crank_slice, "--coordinate", "theta1",
                        "--out", tmp_path / "forces.csv")
    assert code == 0, err
    assert "[inverse dynamics] position analysis of 40 samples" in err
    for stage in range(1, 5):
        assert f"[inverse dynamics] stage {stage}/4 (" in err, err
        assert f"[inverse dynamics] stage {stage}/4 done: " in err and "NOT converged" not in err, err
    code, _, err = _run(capsys, "inverse", "fourbar-crank", crank_slice, "--coordinate", "theta1", "--quiet",
                        "--out", tmp_path / "forces.csv")
    assert code == 0 and len(err.strip().splitlines()) == 1, err  # --quiet: the summary only


def test_inverse_that_does_not_converge_says_so_and_exits_1(capsys, tmp_path, crank_slice, monkeypatch):
    """A Gauss-Newton stage stopped by its iteration limit: warning on stderr, forces still written, exit 1."""
    from mbfg.graphs import inverse

    gauss_newton = inverse.gauss_newton
    monkeypatch.setattr(inverse, "gauss_newton", lambda graph, values, max_iterations=50, **kw:
                        gauss_newton(graph, values, 1, **kw))
    out = tmp_path / "forces.csv"
    code, _, err = _run(capsys, "inverse", "fourbar-crank", crank_slice, "--coordinate", "theta1", "--out", out)
    assert code == 1, err
    assert "mbfg inverse: warning: Gauss-Newton stage(s) " in err and "did not converge in 1 iterations" in err, err
    assert "NOT converged (iteration limit)" in err  # the stage's own progress line says it too
    assert out.exists()


def test_inverse_builtin_trajectory_until(capsys, tmp_path):
    out = tmp_path / "forces.csv"
    code, _, err = _run(
        capsys, "inverse", "fourbar-crank", "builtin:fourbar-crank", "--coordinate", "theta1",
        "--until", "0.1", "--quiet", "--out", out,
    )
    assert code == 0, err
    frame = pd.read_csv(out)
    assert list(frame.columns) == ["t", "Q_theta1"] and len(frame) == 21
    assert frame["Q_theta1"].iloc[0] == pytest.approx(66.0, abs=0.1)


def test_inverse_multi_point_body_with_four_imposed_coordinates(capsys, tmp_path, mbse_dir):
    path = mbse_dir / "pendulum2.yaml"
    mech = load_mbse_yaml(path)
    assert mech.dof == 4
    indep = [int(i) for i in mech.independent_coordinates()]
    names = [mech.coordinate_names[i] for i in indep]
    t = 0.005 * np.arange(30)
    # A small smooth motion of the independent coordinates around the initial configuration.
    shape = (1.0 - np.cos(2.0 * t))[:, None]
    traj = mech.q0[indep][None, :] + 0.02 * shape * np.array([1.0, -0.5, 0.7, 0.3])[None, :]
    traj_file = tmp_path / "pendulum2.txt"
    np.savetxt(traj_file, np.column_stack([t, traj]), header="t " + " ".join(names), comments="% ")
    out = tmp_path / "forces.csv"
    code, _, err = _run(
        capsys, "inverse", path, traj_file, "--coordinate", ",".join(names), "--quiet", "--out", out
    )
    assert code == 0, err
    frame = pd.read_csv(out)
    assert list(frame.columns) == ["t"] + [f"Q_{n}" for n in names]
    assert len(frame) == 30 and np.isfinite(frame.to_numpy()).all()


# --------------------------------------------------------------------------------------
# mechanisms, help
# --------------------------------------------------------------------------------------


def test_mechanisms_lists_builtins_with_coordinates_and_dof(capsys):
    code, out, _ = _run(capsys, "mechanisms")
    assert code == 0
    for name in builtin_mechanisms():
        assert f"  {name}\n" in out
    assert "x1, y1, x2, y2, theta1" in out and "dof: 1" in out


def test_mechanisms_describes_a_file(capsys, mbse_dir):
    code, out, _ = _run(capsys, "mechanisms", mbse_dir / "pendulum2.yaml")
    assert code == 0 and "10 coordinates" in out and "4 dof" in out


@pytest.mark.parametrize("argv", [["--help"], ["forward", "--help"], ["inverse", "--help"], ["mechanisms", "--help"]])
def test_help_exits_zero(capsys, argv):
    code, out, _ = _run(capsys, *argv)
    assert code == 0
    assert "usage: mbfg" in out and "example" in out


def test_top_level_help_has_one_parsable_example_per_command(capsys):
    """'mbfg --help' shows one example of every subcommand, and each parses as written (files the examples
    read need not exist: parsing opens none)."""
    code, out, _ = _run(capsys, "--help")
    assert code == 0
    block = out[out.index("\nexamples"):].split("\n\n")[0]  # up to the next blank line
    examples = [line.strip() for line in block.splitlines() if line.startswith("  mbfg ")]
    assert len(examples) == len(COMMANDS), block
    parser = build_parser()
    named = []
    for example in examples:
        argv = shlex.split(example)[1:]
        args = parser.parse_args(argv)
        assert args.command == argv[0], example
        named.append(args.command)
    assert sorted(named) == sorted(command.__name__.rsplit(".", 1)[-1] for command in COMMANDS)
    assert "Marklund" in out and "Blanco-Claraco" in out  # the papers, by name


def test_help_texts_name_the_papers_not_the_seeds(capsys):
    for command in COMMANDS:
        name = command.__name__.rsplit(".", 1)[-1]
        code, out, _ = _run(capsys, name, "--help")
        assert code == 0 and "seed 00" not in out and "seed-00" not in out, name
    _, out, _ = _run(capsys, "crossval", "--help")
    assert "(Marklund et\nal. 2025, sec. 4.5)" in out and "arXiv:2502.06599" in out


def test_mechanism_repr_is_one_line():
    assert repr(load_mechanism("fourbar")) == "PlanarMechanism('fourbar': 4 coordinates [x1, y1, x2, y2], " \
                                              "3 constraints, 1 dof)"
    assert repr(load_mechanism("pendulum")).endswith("1 constraint, 1 dof)")


def test_usage_error_exits_two(capsys):
    code, _, err = _run(capsys, "forward", "fourbar")  # --out missing
    assert code == 2 and "--out" in err
    code, _, err = _run(capsys, "forward", "fourbar", "--dt", "-1", "--out", "q.csv")
    assert code == 2 and "--dt" in err
    code, _, err = _run(capsys, "forward", "fourbar", "--lag", "3", "--batch", "--out", "q.csv")
    assert code == 2 and "not allowed with" in err


# --------------------------------------------------------------------------------------
# user errors: exit 2, one line naming the culprit, no traceback
# --------------------------------------------------------------------------------------


def _assert_user_error(code: int, err: str, *needles: str) -> None:
    assert code == 2, err
    assert err.startswith("mbfg: error: "), err
    assert "Traceback" not in err
    for needle in needles:
        assert needle in err, f"{needle!r} not in {err!r}"


_INVERSE = ("inverse", "fourbar-crank", "{d}/traj.txt", "--coordinate", "theta1", "--out", "{d}/f.csv")
_BUILTIN = ("inverse", "fourbar-crank", "builtin:fourbar-crank", "--out", "{d}/f.csv", "--coordinate")

# The planar commands' user errors (the 3D commands' are in test_bad_inputs.py): (argv, files to write first,
# substrings of the message); "{d}" is the test's folder. Each is refused before anything is solved.
PLANAR_ERRORS = [
    pytest.param(["forward", "{d}/missing.yaml", "--duration", "0.01", "--out", "{d}/q.csv"], {},
                 ["missing.yaml", "not found", "fourbar"], id="forward-missing-mechanism-file"),
    pytest.param(["mechanisms", "{d}/bad.yaml"],
                 {"bad.yaml": mechanism_path("fourbar").read_text().replace("mass: 2.0", "mass: -2.0")},
                 ["bad.yaml", "planar_bodies[1].mass"], id="mechanisms-malformed-entry"),
    pytest.param([*_BUILTIN, "phi"], {}, ["'phi'", "theta1"], id="inverse-unknown-coordinate-name"),
    pytest.param([*_BUILTIN, "7"], {}, ["index 7"], id="inverse-coordinate-index-out-of-range"),
    pytest.param([*_BUILTIN, "x1,theta1"], {}, ["1 degree(s) of freedom", "x1, theta1"],
                 id="inverse-wrong-number-of-imposed-coordinates"),
    pytest.param(list(_INVERSE), {"traj.txt": "% t theta\n0.0 0.0\n0.005 abc\n0.010 0.0002\n"},
                 ["traj.txt", "line 3", "abc"], id="inverse-malformed-trajectory-line"),
    # The line is the file's (1-based, comment lines counted): the bad time is on line 5, data row 3.
    pytest.param(list(_INVERSE), {"traj.txt": "% t theta\n% rad\n0.0 0.0\n0.005 0.0001\n0.012 0.0002\n0.015 0\n"},
                 ["{d}/traj.txt: line 5: time step is not uniform"], id="inverse-trajectory-time-step-line"),
    pytest.param(list(_INVERSE), {"traj.txt": "% t theta\n0.0 0.0\n0.005 inf\n0.010 0.0002\n"},
                 ["{d}/traj.txt: line 3: non-finite value"], id="inverse-trajectory-inf"),
    pytest.param(list(_INVERSE), {"traj.txt": "0.0 0.0 1.0\n0.005 0.0 1.0\n0.010 0.0 1.0\n"},
                 ["traj.txt", "2 value column(s)", "theta1"], id="inverse-trajectory-columns-do-not-match"),
    pytest.param(["inverse", "fourbar-crank", "{d}/nope.txt", "--coordinate", "theta1", "--out", "{d}/f.csv"], {},
                 ["nope.txt", "not found"], id="inverse-missing-trajectory-file"),
    pytest.param(["inverse", "fourbar-crank", "builtin:nope", "--coordinate", "theta1", "--out", "{d}/f.csv"], {},
                 ["builtin:nope", "builtin:fourbar-crank"], id="inverse-unknown-builtin-trajectory"),
    pytest.param(["forward", "fourbar", "--out", "{d}/no/such/q.csv"], {}, ["does not exist"],
                 id="forward-output-folder-missing"),
]


@pytest.mark.parametrize(("argv", "files", "needles"), PLANAR_ERRORS)
def test_planar_user_error_exits_2_naming_the_culprit(capsys, tmp_path, argv, files, needles):
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    code, _, err = _run(capsys, *(a.format(d=tmp_path) for a in argv))
    _assert_user_error(code, err, *(n.format(d=tmp_path) for n in needles))
    assert not (tmp_path / "f.csv").exists() and not (tmp_path / "q.csv").exists()


# --------------------------------------------------------------------------------------
# the installed console script
# --------------------------------------------------------------------------------------


def test_installed_console_script_help():
    script = Path(sys.executable).parent / "mbfg"
    found = str(script) if script.exists() else shutil.which("mbfg")
    assert found, "the 'mbfg' console script is not installed next to the interpreter or on PATH"
    done = subprocess.run([found, "--help"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "usage: mbfg" in done.stdout and "forward" in done.stdout and "inverse" in done.stdout


def test_python_dash_m_mbfg_version():
    done = subprocess.run([sys.executable, "-m", "mbfg", "--version"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("mbfg ")
