"""What ``import mbfg`` does to the process (docs/reference/environment.md): float64 on, as documented,
with a warning only where JAX was imported first; JAX_ENABLE_X64=0 refused; the compilation cache only
when asked (the command line, or mbfg.enable_compilation_cache)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _python(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items()
             if k not in ("JAX_ENABLE_X64", "JAX_COMPILATION_CACHE_DIR", "MBFG_CACHE_DIR")}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=300,
                          env={**clean, **env})


def test_import_mbfg_turns_on_float64_and_leaves_the_compilation_cache_alone() -> None:
    run = _python("import mbfg, jax; print(jax.config.jax_enable_x64, jax.config.jax_compilation_cache_dir)")
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["True", "None"]
    assert "X64Warning" not in run.stderr


def test_jax_imported_first_gets_float64_with_an_x64_warning() -> None:
    run = _python("import jax; import mbfg; print(jax.config.jax_enable_x64)")
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "True"
    assert "X64Warning" in run.stderr and "JAX_ENABLE_X64=1" in run.stderr
    chosen = _python("import jax; import mbfg; print(jax.config.jax_enable_x64)", JAX_ENABLE_X64="1")
    assert chosen.stdout.strip() == "True" and "X64Warning" not in chosen.stderr


def test_float32_asked_for_in_the_environment_is_refused_by_name() -> None:
    run = _python("import mbfg", JAX_ENABLE_X64="0")
    assert run.returncode != 0
    assert "MbfgError" in run.stderr and "JAX_ENABLE_X64" in run.stderr and "float64" in run.stderr


def test_enable_compilation_cache_takes_the_folder_asked_for_or_stays_off(tmp_path: Path) -> None:
    folder = tmp_path / "cache"
    code = ("import mbfg, jax; print(mbfg.enable_compilation_cache({arg})); "
            "print(jax.config.jax_compilation_cache_dir)")
    run = _python(code.format(arg=repr(str(folder))))
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == [str(folder), str(folder)] and folder.is_dir()
    off = _python(code.format(arg=""), MBFG_CACHE_DIR="off")
    assert off.stdout.split() == ["None", "None"]
    by_env = _python(code.format(arg=""), MBFG_CACHE_DIR=str(tmp_path / "env"))
    assert by_env.stdout.split() == [str(tmp_path / "env")] * 2


def test_the_public_api_resolves_and_import_mbfg_stays_light() -> None:
    """Every name in mbfg.__all__ is there (the estimation API loads on first use); `import mbfg` itself does not
    load SciPy, pandas or the graph builders."""
    code = ("import sys, mbfg\n"
            "heavy = sorted(m for m in ('scipy', 'pandas', 'mbfg.graphs.joint', 'mbfg.calibration') if m in sys.modules)\n"
            "missing = [n for n in mbfg.__all__ if getattr(mbfg, n, None) is None]\n"
            "print(heavy, missing, callable(mbfg.calibrate), mbfg.StreamEstimator.__name__)\n")
    run = _python(code)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "[] [] True StreamEstimator"
