"""JAX set-up shared by every module: float64 everywhere, and (when asked) a persistent compilation cache.

**float64.** Residuals of stiff constraints are compared at the 1e-10 level, where float32 is useless, so
``import mbfg`` turns on JAX's ``jax_enable_x64`` for the process. If JAX was imported before mbfg (a
user's own JAX code may already hold float32 arrays), it says so with an :class:`X64Warning`; set
``JAX_ENABLE_X64=1`` (or ``jax.config.update("jax_enable_x64", True)``) before importing mbfg to turn it on
yourself. ``JAX_ENABLE_X64=0`` in the environment is refused at import with an :class:`~mbfg.MbfgError`:
mbfg cannot compute in float32.

**The compilation cache.** Compiling the residuals of a model takes seconds to tens of seconds; JAX's
persistent compilation cache keeps the compiled programs on disk, so a second run of the same command,
or a sweep's next calibration of the same model, loads them instead. ``import mbfg`` does not set it:
the ``mbfg`` command line and the sweep's workers turn it on, and a notebook or program does by calling
:func:`enable_compilation_cache`. The folder is, in this order: the argument, JAX's own setting
(``JAX_COMPILATION_CACHE_DIR``) if set, ``MBFG_CACHE_DIR`` if set, else ``$XDG_CACHE_HOME/mbfg/jax``
(``~/.cache/mbfg/jax``). ``MBFG_CACHE_DIR=off`` keeps the cache off. A folder that cannot be created
leaves the cache off, without an error. Every program is cached, however quick its compile (JAX's
default keeps only those over 1 s; ``JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS`` overrides).
"""

from __future__ import annotations

import os
import sys
import warnings
from importlib.metadata import PackageNotFoundError, version
from typing import TypeAlias

from mbfg.errors import MbfgError


class X64Warning(UserWarning):
    """``import mbfg`` turned on JAX's float64 in a process that had imported JAX before it."""


_JAX_BEFORE = "jax" in sys.modules
if os.environ.get("JAX_ENABLE_X64", "").strip().lower() in ("0", "false", "no", "off"):
    raise MbfgError("JAX_ENABLE_X64 is set to a false value: mbfg computes in float64 only (stiff constraints are "
                    "resolved at the 1e-10 level); unset JAX_ENABLE_X64 or set it to 1")

#: jaxlib releases whose XLA:CPU compiles dot products and reductions into "YNN fusions" (XNNPACK's slinky
#: runtime) that fault on a worker thread or compute wrong numbers (jax issues 39103, 39257, 40412: a vmapped
#: matrix-vector product followed by a sum returns a wrong last row; a multiply-reduce segfaults). The fault
#: comes on XLA's thread pool while a program runs asynchronously, so Python's traceback shows whatever the
#: main thread does then (compiling or serializing the next program). mbfg's vmapped Jacobians are full of
#: such dot products. On these releases the fusion is turned off, XLA's flag for it set empty, as jaxlib
#: 0.10.1 compiled them.
_YNN_FAULTY = ("0.10.2", "0.11.0")
_NO_YNN = "--xla_cpu_experimental_ynn_fusion_type="


def _jaxlib_version() -> str:
    try:
        return version("jaxlib")
    except PackageNotFoundError:
        return ""


def _without_ynn_fusion() -> bool:
    """Turn XLA:CPU's YNN fusion off on the faulty jaxlib releases (unless XLA_FLAGS already sets it); True if
    this process runs with it off because of us. XLA reads XLA_FLAGS when it creates the CPU backend."""
    flags = os.environ.get("XLA_FLAGS", "")
    if _jaxlib_version() not in _YNN_FAULTY or "xla_cpu_experimental_ynn_fusion_type" in flags:
        return False
    os.environ["XLA_FLAGS"] = f"{flags} {_NO_YNN}".strip()
    return True


_YNN_OFF = _without_ynn_fusion()

import jax  # noqa: E402
import numpy as np  # noqa: E402

if _YNN_OFF:
    from jax._src import xla_bridge

    if xla_bridge.backends_are_initialized():
        warnings.warn(f"jaxlib {_jaxlib_version()} computes some dot products wrongly or crashes in them on the CPU "
                      f"(XLA's YNN fusion), and JAX's backend was started before mbfg was imported, so mbfg could "
                      f"not turn that fusion off: import mbfg first, or set XLA_FLAGS={_NO_YNN}, or install "
                      f"another jaxlib", RuntimeWarning, stacklevel=2)

if not jax.config.jax_enable_x64:  # type: ignore[attr-defined]  # options: untyped attributes
    jax.config.update("jax_enable_x64", True)
    if _JAX_BEFORE:
        warnings.warn("import mbfg turned on jax_enable_x64 for this process (mbfg computes in float64); set "
                      "JAX_ENABLE_X64=1 before importing JAX to choose it yourself", X64Warning, stacklevel=2)

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


def enable_compilation_cache(folder: str | os.PathLike[str] | None = None) -> str | None:
    """Turn on JAX's persistent compilation cache for this process (see the module's docstring for the folder).

    Args:
        folder: the cache folder; None: JAX's own setting, else ``MBFG_CACHE_DIR``, else the user's cache folder.

    Returns:
        The folder in use, or None when the cache stays off (``MBFG_CACHE_DIR=off``, or a folder that cannot be
        created).
    """
    if folder is None and jax.config.jax_compilation_cache_dir:  # type: ignore[attr-defined]  # options: untyped
        return cache_dir()
    chosen = os.fspath(folder) if folder is not None else os.environ.get("MBFG_CACHE_DIR")
    if chosen is not None and chosen.strip().lower() in ("off", "0", "none", ""):
        return None
    if chosen is None:
        chosen = user_cache_dir()
    try:
        os.makedirs(chosen, exist_ok=True)
    except OSError:
        return None
    jax.config.update("jax_compilation_cache_dir", chosen)
    if "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS" not in os.environ:
        # Cache every program, not only those that took over JAX's default 1 s to compile: a process
        # that builds a model compiles a few hundred small ones (eager operations on constants while
        # tracing, the error functions), about 2 s in all, paid again on every run otherwise.
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    return chosen


__all__ = ["Array", "X64Warning", "cache_dir", "enable_compilation_cache", "jax", "jnp", "user_cache_dir"]
