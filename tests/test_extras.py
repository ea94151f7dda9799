"""The optional extras (pyproject's ``sweep``, ``urdf``, ``plot``): the core runs without them, and a feature
that needs a missing one says which extra to install.

"Not installed" is simulated by a ``None`` entry in ``sys.modules``, which makes ``import name`` raise
ImportError as for a missing package (monkeypatched here; set before ``import mbfg`` in the subprocess).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from mbfg.cli import main
from mbfg.errors import MbfgError

# The top-level modules of each extra's distributions (what mbfg imports, and what they bring).
EXTRA_MODULES = {
    "sweep": ["dask", "distributed"],
    "urdf": ["yourdfpy", "lxml", "trimesh"],
    "plot": ["matplotlib"],
}
ARM = ('<robot name="arm"><link name="base"/><link name="l1"><inertial><mass value="1"/>'
       '<inertia ixx="0.01" ixy="0" ixz="0" iyy="0.01" iyz="0" izz="0.01"/></inertial></link>'
       '<joint name="j1" type="revolute"><parent link="base"/><child link="l1"/><axis xyz="0 1 0"/></joint></robot>')


def _uninstall(monkeypatch, extra: str) -> None:
    """As if ``extra``'s packages were not installed: loaded modules of theirs are hidden too."""
    for top in EXTRA_MODULES[extra]:
        for name in [m for m in sys.modules if m == top or m.startswith(top + ".")] or [top]:
            monkeypatch.setitem(sys.modules, name, None)


def test_sweep_command_without_dask_names_the_sweep_extra(monkeypatch, capsys, tmp_path):
    _uninstall(monkeypatch, "sweep")
    # The recordings need not exist: the missing extra is said before anything is read.
    code = main(["sweep", "pendulum", str(tmp_path / "a.csv"), str(tmp_path / "b.csv"), "--out",
                 str(tmp_path / "sweep.csv")])
    out, err = capsys.readouterr()
    assert code == 2, (out, err)
    assert err == "mbfg: error: mbfg sweep needs Dask: pip install 'mbfg[sweep]' (or pip install 'dask[distributed]')\n"
    assert not (tmp_path / "sweep.csv").exists()


def test_sweep_function_without_dask_names_the_sweep_extra(monkeypatch, tmp_path):
    from mbfg.sweep import sweep

    _uninstall(monkeypatch, "sweep")
    with pytest.raises(MbfgError, match=r"^a sweep needs Dask: pip install 'mbfg\[sweep\]'"):
        sweep("pendulum", [str(tmp_path / "a.csv"), str(tmp_path / "b.csv")])


@pytest.mark.parametrize("module", ["yourdfpy", "lxml"])
def test_urdf_without_yourdfpy_names_the_urdf_extra(monkeypatch, capsys, tmp_path, module):
    """Either half of the urdf extra missing (yourdfpy, or the lxml it brings) is the same message."""
    from mbfg.urdf import load_urdf, urdf_from_string

    path = tmp_path / "arm.urdf"
    path.write_text(ARM)
    assert list(load_urdf(path).observations) == ["j1"]  # the file itself is fine
    for name in [m for m in sys.modules if m == module or m.startswith(module + ".")]:
        monkeypatch.setitem(sys.modules, name, None)
    expected = "reading a URDF needs yourdfpy: pip install 'mbfg[urdf]' (or pip install yourdfpy)"
    with pytest.raises(MbfgError) as caught:
        load_urdf(path)
    assert str(caught.value) == f"{path}: {expected}"
    with pytest.raises(MbfgError, match=r"^arm\.urdf: reading a URDF needs yourdfpy: pip install 'mbfg\[urdf\]'"):
        urdf_from_string(ARM, source="arm.urdf")
    assert main(["models", str(path)]) == 2
    assert capsys.readouterr().err == f"mbfg: error: {path}: {expected}\n"


def test_figure_without_matplotlib_names_the_plot_extra(monkeypatch):
    from mbfg.plots import pyplot

    _uninstall(monkeypatch, "plot")
    with pytest.raises(MbfgError) as caught:
        pyplot("plotting a trajectory")
    assert str(caught.value) == ("plotting a trajectory needs matplotlib: pip install 'mbfg[plot]' "
                                 "(or pip install matplotlib)")


@pytest.mark.slow
def test_simulate_calibrate_smooth_run_without_any_extra(tmp_path):
    """The README's main job (simulate a rig, calibrate, smooth a second recording) in a process where no
    extra's package can be imported; ``mbfg sweep`` there names its extra."""
    blocked = [m for modules in EXTRA_MODULES.values() for m in modules]
    script = textwrap.dedent(f"""
        import sys
        for name in {blocked!r}:
            sys.modules[name] = None
        from mbfg.cli import main

        def run(*argv):
            code = main(list(argv))
            print("exit", argv[0], code, flush=True)

        run("simulate", "pendulum", "--duration", "0.5", "--dt", "0.001", "--params", "truth.yaml",
            "--init", "theta=2.5", "--noise", "0.001", "--out", "log.csv")
        run("calibrate", "pendulum", "log.csv", "--free", "J,b", "--out", "calib.json")
        run("simulate", "pendulum", "--duration", "0.3", "--dt", "0.001", "--params", "truth.yaml",
            "--init", "theta=1.0", "--noise", "0.001", "--out", "rig.csv")
        run("smooth", "pendulum", "--params", "calib.json", "--lag", "0.05", "--input", "rig.csv",
            "--output", "states.csv", "--quiet")
        run("sweep", "pendulum", "log.csv", "rig.csv", "--out", "sweep.csv")
        print("loaded", sorted(n for n in {blocked!r} if sys.modules.get(n) is not None))
    """)
    (tmp_path / "truth.yaml").write_text("J: 0.002\nb: 0.004\n")
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    for command in ("simulate", "calibrate", "smooth"):
        assert f"exit {command} 0" in lines, (command, done.stdout[-2000:], done.stderr[-3000:])
    assert "exit sweep 2" in lines
    assert "mbfg: error: mbfg sweep needs Dask: pip install 'mbfg[sweep]'" in done.stderr
    assert "loaded []" in lines
    assert (tmp_path / "calib.json").stat().st_size > 0
    assert len((tmp_path / "states.csv").read_text().splitlines()) > 100
