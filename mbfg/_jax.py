"""JAX set-up shared by every module: float64 everywhere, and a persistent compilation cache.

Compiling the residuals of a model takes seconds to tens of seconds (the 13-parameter Furuta
impulse factor about 15 s on 2 cores); JAX's persistent compilation cache keeps the compiled
programs on disk, so a second run of the same command, or a sweep's next calibration of the
same model, loads them instead. The cache folder is, in this order: ``JAX_COMPILATION_CACHE_DIR``
(JAX's own setting) if set, ``MBFG_CACHE_DIR`` if set, else ``$XDG_CACHE_HOME/mbfg/jax``
(``~/.cache/mbfg/jax``). ``MBFG_CACHE_DIR=off`` turns the cache off. A folder that cannot be
created leaves the cache off, without an error. Every program is cached, however quick its compile
(JAX's default keeps only those over 1 s; ``JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS`` overrides).
"""

from __future__ import annotations

import os
from typing import TypeAlias

import jax
import numpy as np

# Residuals of stiff constraints are compared at the 1e-10 level: float32 is useless.
jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402

#: A JAX or a NumPy array: states and arrays built outside traced code are NumPy's, those inside JAX's.
Array: TypeAlias = jax.Array | np.ndarray


def cache_dir() -> str | None:
    """The persistent compilation cache folder in use (None: off)."""
    return jax.config.jax_compilation_cache_dir or None  # type: ignore[attr-defined]  # options: untyped attributes


def user_cache_dir() -> str:
    """``$XDG_CACHE_HOME/mbfg/jax`` (``~/.cache/mbfg/jax``): the cache folder when none is set."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "mbfg", "jax")


def _configure_cache() -> None:
    if jax.config.jax_compilation_cache_dir:  # type: ignore[attr-defined]  # the user's JAX_COMPILATION_CACHE_DIR
        return
    chosen = os.environ.get("MBFG_CACHE_DIR")
    if chosen is not None and chosen.strip().lower() in ("off", "0", "none", ""):
        return
    if chosen is None:
        chosen = user_cache_dir()
    try:
        os.makedirs(chosen, exist_ok=True)
    except OSError:
        return
    jax.config.update("jax_compilation_cache_dir", chosen)
    if "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS" not in os.environ:
        # Cache every program, not only those that took over JAX's default 1 s to compile: a process
        # that builds a model compiles a few hundred small ones (eager operations on constants while
        # tracing, the error functions), about 2 s in all, paid again on every run otherwise.
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)


_configure_cache()

__all__ = ["Array", "cache_dir", "jax", "jnp", "user_cache_dir"]
