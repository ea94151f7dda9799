"""JAX's persistent compilation cache as mbfg sets it up (mbfg._jax): on by default, overridable, can be off."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SCRIPT = """
import mbfg._jax as j
from mbfg._jax import jax, jnp
print(j.cache_dir())
jax.jit(lambda x: jnp.sin(x) * 2.0)(jnp.arange(3.0)).block_until_ready()
"""


def _run(env_changes: dict[str, str | None]) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JAX_COMPILATION_CACHE", "MBFG_CACHE"))}
    env["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"
    env.update({k: v for k, v in env_changes.items() if v is not None})
    out = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip().splitlines()[0]


def test_cache_defaults_to_the_users_cache_folder_and_stores_compiled_programs(tmp_path: Path):
    assert _run({"XDG_CACHE_HOME": str(tmp_path)}) == str(tmp_path / "mbfg" / "jax")
    assert any((tmp_path / "mbfg" / "jax").iterdir())  # a compiled program was written


def test_mbfg_cache_dir_overrides_and_off_disables(tmp_path: Path):
    assert _run({"MBFG_CACHE_DIR": str(tmp_path / "c")}) == str(tmp_path / "c")
    assert _run({"MBFG_CACHE_DIR": "off", "XDG_CACHE_HOME": str(tmp_path / "x")}) == "None"
    assert not (tmp_path / "x").exists()
    # JAX's own setting wins over ours.
    assert _run({"JAX_COMPILATION_CACHE_DIR": str(tmp_path / "j"), "MBFG_CACHE_DIR": str(tmp_path / "c2")}) \
        == str(tmp_path / "j")
