"""The wheel maps factors/, graphs/ and datasets/ into the mbfg namespace.

factors/, graphs/ and datasets/ are top-level folders of the repository, but
must install as ``mbfg.factors``, ``mbfg.graphs`` and ``mbfg.datasets``: a
top-level ``datasets`` would shadow the popular package of that name. This test
builds the wheel from a copy of the source tree, installs it (without
dependencies) into a fresh venv, and imports it from outside the repository.
numpy, jax, gtsam, ... come from the test interpreter's site-packages, appended
*after* the fresh venv's own through a .pth file, so the fresh venv's mbfg wins
and the editable install of the test interpreter plays no part.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# Source folder -> where it must land in the installed package.
NAMESPACE = {"mbfg": "mbfg", "factors": "mbfg/factors", "graphs": "mbfg/graphs", "datasets": "mbfg/datasets"}
NETWORK_ERRORS = (
    "No matching distribution",
    "Could not find a version",
    "NewConnectionError",
    "Temporary failure in name resolution",
    "Network is unreachable",
)


def _run(cmd, timeout=120, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kwargs)


def _build_wheel(src: Path, outdir: Path) -> Path:
    """``python -m build --wheel``: without isolation if the build requirements are
    installed here (offline), else isolated (fetches setuptools and wheel)."""
    if _run([sys.executable, "-m", "build", "--version"]).returncode != 0:
        pytest.skip("the 'build' package is not installed in the test interpreter")
    cmd = [sys.executable, "-m", "build", "--wheel", "--outdir", str(outdir), str(src)]
    done = _run([*cmd, "--no-isolation"])
    if done.returncode != 0 and "Unmet dependencies" in done.stdout + done.stderr:
        done = _run(cmd)
        if done.returncode != 0 and any(e in done.stdout + done.stderr for e in NETWORK_ERRORS):
            pytest.skip(
                "the build requirements of pyproject.toml are not installed in the test "
                "interpreter and PyPI cannot be reached for an isolated build"
            )
    assert done.returncode == 0, f"building the wheel failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    wheels = list(outdir.glob("mbfg-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("wheel")
    # Build from a copy: the build writes mbfg.egg-info/ and build/ next to the sources.
    src = tmp / "src"
    shutil.copytree(
        REPO,
        src,
        ignore=shutil.ignore_patterns(
            ".git", "*.egg-info", "build", "dist", "__pycache__", ".pytest_cache", ".venv", ".ipynb_checkpoints",
            ".mypy_cache", ".ruff_cache",
        ),
    )
    return _build_wheel(src, tmp / "dist")


@pytest.fixture(scope="module")
def fresh_venv(wheel, tmp_path_factory) -> Path:
    """A new venv with only the wheel installed; the test interpreter's site-packages appended."""
    venv = tmp_path_factory.mktemp("venv") / "venv"
    done = _run([sys.executable, "-m", "venv", str(venv)])
    if done.returncode != 0:
        pytest.skip(f"cannot create a venv here: {done.stderr.strip()[-500:]}")
    python = venv / "bin" / "python"
    done = _run([str(python), "-m", "pip", "install", "--no-deps", "--no-index", "--no-compile", str(wheel)])
    assert done.returncode == 0, f"pip install of the wheel failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
    purelib = Path(_run([str(python), "-I", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip())
    outer = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (purelib / "zz_test_interpreter_site_packages.pth").write_text("\n".join(sorted(outer)) + "\n")
    return venv


@pytest.fixture(scope="module")
def probe(fresh_venv, tmp_path_factory) -> dict:
    """Import the installed package in the fresh venv, from a folder outside the
    repository, and report where things came from."""
    venv, cwd = fresh_venv, tmp_path_factory.mktemp("elsewhere")
    script = textwrap.dedent(
        """
        import importlib, json, sys
        import numpy as np
        import gtsam
        import mbfg, mbfg.factors, mbfg.graphs, mbfg.datasets
        from mbfg.factors import prior_factor

        factor = prior_factor(1, np.array([1.0, 2.0]), 0.5)
        values = gtsam.Values()
        values.insert(1, np.array([1.5, 1.0]))
        out = {
            "files": {name: sys.modules[name].__file__
                      for name in ("mbfg", "mbfg.factors", "mbfg.graphs", "mbfg.datasets")},
            "error": factor.unwhitenedError(values).tolist(),
            "registry": sorted(mbfg.REGISTRY),
            "top_level": {},
        }
        for name in ("factors", "graphs", "datasets"):
            try:
                module = importlib.import_module(name)
            except ModuleNotFoundError:
                out["top_level"][name] = None
            else:
                out["top_level"][name] = getattr(module, "__file__", None) or str(list(module.__path__))
        print(json.dumps(out))
        """
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env["JAX_PLATFORMS"] = "cpu"
    done = _run([str(venv / "bin" / "python"), "-I", "-c", script], cwd=cwd, env=env)
    assert done.returncode == 0, f"importing the installed wheel failed:\n{done.stderr[-3000:]}"
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_wheel_holds_only_the_mbfg_namespace(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    top = {name.split("/")[0] for name in names}
    dist_info = {t for t in top if t.startswith("mbfg-") and t.endswith(".dist-info")}
    assert len(dist_info) == 1 and top - dist_info == {"mbfg"}, f"top-level entries in the wheel: {sorted(top)}"
    for package in ("mbfg", "mbfg/factors", "mbfg/graphs", "mbfg/datasets"):
        assert f"{package}/__init__.py" in names
    assert "mbfg/py.typed" in names


def test_wheel_holds_every_module_of_the_source_folders(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    missing = []
    for folder, target in NAMESPACE.items():
        for path in sorted((REPO / folder).rglob("*")):
            if "__pycache__" in path.parts or not path.is_file():
                continue
            if path.suffix == ".py" or (folder == "datasets" and path.suffix in (".yaml", ".yml")):
                wanted = f"{target}/{path.relative_to(REPO / folder).as_posix()}"
                if wanted not in names:
                    missing.append(f"{path.relative_to(REPO)} -> {wanted}")
    assert not missing, "source files missing from the wheel (a subpackage not listed in pyproject?):\n" + "\n".join(missing)


def test_installed_wheel_imports_mbfg_factors_graphs_datasets_from_outside_the_repo(fresh_venv, probe):
    out = probe
    for name, file in out["files"].items():
        path = Path(file).resolve()
        assert path.is_relative_to(fresh_venv.resolve()), f"{name} imported from {path}, not from the fresh venv"
        assert not path.is_relative_to(REPO), f"{name} imported from the repository: {path}"
    assert out["error"] == pytest.approx([0.5, -1.0])
    assert "prior" in out["registry"] and "trapezoidal_integrator" in out["registry"]


def test_installed_wheel_adds_no_top_level_factors_graphs_or_datasets(fresh_venv, probe):
    outer = [Path(p) for p in {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}]
    for name, where in probe["top_level"].items():
        if where is None:
            continue  # `import name` fails: nothing shadowed
        # Importable only where another installed distribution of the test interpreter
        # provides it (e.g. Hugging Face's `datasets`), never from the fresh venv or the repo.
        provided_elsewhere = any((p / name).exists() or (p / f"{name}.py").exists() for p in outer)
        assert provided_elsewhere, f"`import {name}` succeeds in the fresh venv: {where}"
        assert fresh_venv.resolve().as_posix() not in where, f"the wheel installed a top-level {name!r}: {where}"
        assert REPO.as_posix() not in where, f"top-level {name!r} resolves into the repository: {where}"


def test_a_process_started_in_the_checkout_root_imports_the_subpackages_from_it(fresh_venv):
    """`python -m mbfg` or a Dask worker started in the repository's root finds ./mbfg before the
    installed package; mbfg.graphs and mbfg.factors must then resolve to the checkout's folders."""
    script = "import mbfg.graphs.joint, mbfg.factors.impulse, mbfg.datasets; print(mbfg.graphs.__file__)"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env["JAX_PLATFORMS"] = "cpu"
    done = _run([str(fresh_venv / "bin" / "python"), "-c", script], cwd=REPO, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert Path(done.stdout.strip().splitlines()[-1]).resolve() == (REPO / "graphs" / "__init__.py").resolve()
