"""A long-running worker's memory: a sweep of 200 calibrations in one process stays flat.

A sweep worker (:mod:`mbfg.sweep`) calibrates one model with new parameter values task after task
(``model.with_parameters``: the same structure, other values). Whatever the process keeps from a task
must be keyed by the model's structure (:func:`mbfg._programs.structure_fingerprint`), so that the
first tasks fill the caches and the later ones only reuse them; nothing may outlive the task that
made it (a factor group whose GTSAM factors call back into it is the case to watch: the reference
from a ``gtsam.CustomFactor``'s C++ callback to Python is invisible to Python's garbage collector).
"""

from __future__ import annotations

import gc
import os
import sys

import numpy as np
import pytest

from mbfg import spook
from mbfg._programs import _LOADED
from mbfg.adapter import FactorGroup
from mbfg.calibration import calibrate
from mbfg.calibration_options import CalibrationOptions, calibration_lm
from mbfg.factors import _rigid
from mbfg.logs import Log
from mbfg.models import pendulum
from mbfg.spook import simulate, unwrap_angles

#: Tasks run before the first measurement (the caches fill, JAX compiles) and in all.
WARM_TASKS, TASKS = 20, 200
#: The bound on the growth of the resident set over the 180 tasks after the warm-up [MiB]. Each task builds
#: and drops a 21-sample problem (about 40 factors); kept, one task's problem costs about 100 kB of the
#: resident set (the factor groups that outlived their task grew it by 18 MiB over these tasks), so 180 kept
#: problems could not hide under 8 MiB. What remains when nothing is kept (the heap's fragmentation, JAX's
#: dispatch caches settling) measured 1.7 MiB over the 180 tasks.
RSS_GROWTH_MB = 8.0


def _rss_mb() -> float:
    """The process's resident set [MiB] now (not its peak: ``getrusage``'s maximum never falls)."""
    with open("/proc/self/statm") as file:
        return int(file.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _mappings() -> int:
    """The process's memory mappings now. Each program XLA:CPU compiles holds about three (code, read-only
    data, data) while JAX keeps it; at Linux's vm.max_map_count (65,530 by default) the next compile dies in
    XLA, so a long-running worker must stop compiling new programs once warm."""
    with open("/proc/self/maps") as file:
        return sum(1 for _ in file)


def _kept() -> dict[str, int]:
    """What the process keeps across tasks: the cached program types, selected types, simulator scans and
    loaded programs, and the factor groups alive (a task's groups must die with its problem)."""
    gc.collect()
    return {
        "program types": len(_rigid._PROGRAM_TYPES),
        "selected types": len(_rigid._SELECTED),
        "simulator scans": len(spook._COMPILED),
        "loaded programs": len(_LOADED),
        "live factor groups": sum(isinstance(o, FactorGroup) for o in gc.get_objects()),
    }


#: The bound on the growth of the memory mappings over the 180 tasks after the warm-up: one program compiled
#: per task would add about 540.
MAPPINGS_GROWTH = 100


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads the resident set from /proc")
def test_200_with_parameters_calibrations_in_one_process_keep_memory_flat() -> None:
    model = pendulum()
    traj = simulate(model, 0.02, 1e-3, initial=model.initial_state({"theta": 1.0}))
    rng = np.random.default_rng(0)
    y = unwrap_angles(model, traj.observations) + 1e-3 * rng.standard_normal(traj.observations.shape)
    u = np.zeros((len(traj.t), 0))
    log = Log(traj.t, y, u, model.observations, model.controls, "synthetic")
    J, b = model.parameters["J"].default, model.parameters["b"].default

    def task(i: int) -> None:
        # Each task its own copy with other values, as a sweep worker gets them; a short solve (2 iterations).
        copy = model.with_parameters({"J": J * (1.0 + 0.2 * np.sin(i)), "b": b * (1.0 + 0.2 * np.cos(i))})
        result = calibrate(copy, log, free=["J", "b"], lm=calibration_lm(copy, max_iterations=2),
                           options=CalibrationOptions(covariance=False))
        assert np.isfinite(result.cost)

    for i in range(WARM_TASKS):
        task(i)
    kept_warm, rss_warm, maps_warm = _kept(), _rss_mb(), _mappings()
    for i in range(WARM_TASKS, TASKS):
        task(i)
    kept_end, rss_end, maps_end = _kept(), _rss_mb(), _mappings()
    print(f"\nafter {WARM_TASKS} tasks: {kept_warm}, RSS {rss_warm:.1f} MiB; after {TASKS}: {kept_end}, "
          f"RSS {rss_end:.1f} MiB; memory mappings {maps_warm} -> {maps_end}")
    assert kept_end == kept_warm, f"cached entries grew from task {WARM_TASKS} to {TASKS}"
    assert rss_end - rss_warm < RSS_GROWTH_MB, (
        f"resident set grew {rss_end - rss_warm:.1f} MiB from task {WARM_TASKS} to {TASKS}")
    assert maps_end - maps_warm < MAPPINGS_GROWTH, (
        f"memory mappings grew from {maps_warm} to {maps_end} from task {WARM_TASKS} to {TASKS}")


def test_control_factor_types_of_50_with_parameters_copies_are_one_cached_entry() -> None:
    """The control factor types are cached by the model's structure: 50 copies with other values (a sweep's
    tasks) get the first copy's type, whose programs take the parameter values as a constant."""
    from mbfg.factors.control import step_type
    from mbfg.testing import motor_link

    model = motor_link()
    before = len(step_type.cache)  # type: ignore[attr-defined]  (structure_cache's table)
    first = step_type(model.with_parameters({"m": 0.5}))
    copies = [step_type(model.with_parameters({"m": 0.5 + 0.01 * i, "b": 1e-3 * (1 + i)})) for i in range(50)]
    assert all(ft is first for ft in copies)
    assert len(step_type.cache) <= before + 1  # type: ignore[attr-defined]


def test_bounded_cache_drops_the_least_recently_used_entry() -> None:
    from mbfg._programs import BoundedCache

    cache: BoundedCache[str, int] = BoundedCache(2)
    cache["a"], cache["b"] = 1, 2
    assert cache["a"] == 1  # read: "b" is now the least recently used
    cache["c"] = 3
    assert list(cache) == ["a", "c"] and cache.get("b") is None
