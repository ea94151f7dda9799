"""JAX's persistent compilation cache as mbfg sets it up (mbfg._jax.enable_compilation_cache, which the command line
and a notebook call): in the user's cache folder by default, overridable, can be off."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np

SCRIPT = """
import mbfg._jax as j
from mbfg._jax import jax, jnp
j.enable_compilation_cache()
print(j.cache_dir())
jax.jit(lambda x: jnp.sin(x) * 2.0)(jnp.arange(3.0)).block_until_ready()
"""


def _environment_without_cache_settings() -> dict[str, str]:
    """This process's environment less the cache folders the test session set (tests/conftest.py)."""
    return {k: v for k, v in os.environ.items()
            if not k.startswith(("JAX_COMPILATION_CACHE", "JAX_PERSISTENT_CACHE", "MBFG_CACHE"))}


def _run(env_changes: dict[str, str | None]) -> str:
    env = _environment_without_cache_settings()
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


# -- traced programs on disk (mbfg._programs) -------------------------------------------------

PROGRAM_SCRIPT = """
import sys
import numpy as np
from mbfg._jax import enable_compilation_cache, jax, jnp
from mbfg.adapter import FactorType, VarKind

enable_compilation_cache()

scale = float(sys.argv[1])

def residual(R, v, c):
    return jnp.concatenate([scale * (R @ v), jnp.sin(v) * c])

ft = FactorType("program_cache_probe", residual, (VarKind.ROT3, VarKind.VECTOR))
rng = np.random.default_rng(0)
R = np.linalg.qr(rng.standard_normal((3, 3)))[0]
R *= np.sign(np.linalg.det(R))
xs = (np.stack([R] * 4), rng.standard_normal((4, 3)))
_, linearize = ft._vmapped((None,))
out = np.asarray(linearize(xs, (2.0,)))
reference = np.asarray(linearize.jitted(xs, (2.0,)))  # traced here, never from disk
print(float(np.abs(out - reference).max()))
"""


def _programs(folder: Path) -> set[str]:
    return {p.name for p in (folder / "mbfg-programs").glob("*.exported")}


def _run_probe(cache: Path, scale: str) -> float:
    env = _environment_without_cache_settings()
    env["MBFG_CACHE_DIR"] = str(cache)
    out = subprocess.run([sys.executable, "-c", PROGRAM_SCRIPT, scale], env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    return float(out.stdout.strip().splitlines()[-1])


def test_a_traced_program_is_kept_and_a_second_process_loads_the_same_results(tmp_path: Path):
    assert _run_probe(tmp_path, "1.5") == 0.0
    kept = _programs(tmp_path)
    assert len(kept) == 1
    stamp = {p: (tmp_path / "mbfg-programs" / p).stat().st_mtime_ns for p in kept}
    assert _run_probe(tmp_path, "1.5") == 0.0  # loaded from disk: same numbers as a fresh trace
    assert _programs(tmp_path) == kept
    assert {p: (tmp_path / "mbfg-programs" / p).stat().st_mtime_ns for p in kept} == stamp  # not rewritten


def test_a_changed_residual_gets_its_own_program(tmp_path: Path):
    # The closed-over constant differs: the jaxpr's text is the same, its constants' values are not.
    _run_probe(tmp_path, "1.5")
    assert _run_probe(tmp_path, "2.5") == 0.0
    assert len(_programs(tmp_path)) == 2


def test_a_residual_with_a_custom_derivative_rule_is_not_kept():
    from mbfg import _programs
    from mbfg._jax import jax, jnp

    @jax.custom_jvp
    def f(x):
        return jnp.sin(x)

    f.defjvp(lambda primals, tangents: (f(primals[0]), jnp.cos(primals[0]) * tangents[0]))
    assert _programs.jaxpr_fingerprint(f, jnp.ones(3)) is None
    assert _programs.jaxpr_fingerprint(jnp.sin, jnp.ones(3)) is not None


# -- naming an mbfg residual's program without tracing it (mbfg._programs.closure_fingerprint) ---------


def test_an_mbfg_residual_is_named_by_mbfg_source_and_the_values_it_closes_over():
    from mbfg import _programs
    from mbfg.factors._rigid import Variables
    from mbfg.factors.impulse import impulse_type
    from mbfg.models import pendulum

    def name(model) -> str | None:
        return _programs.closure_fingerprint(impulse_type(Variables(model, ("J",), False)).residual)

    same = name(pendulum())
    assert same is not None and name(pendulum()) == same  # the same model built again: the same program
    assert name(pendulum("dry")) != same
    assert name(pendulum("viscous").with_parameters({"d": 0.2})) == same  # parameter values: arguments



def test_a_model_sent_through_pickle_as_to_a_dask_worker_names_the_same_program():
    """A sweep's workers receive the model pickled: the copy holds equal values as separate objects (one
    string shared by many fields becomes many), and must still find the programs stored for the original."""
    import pickle

    from mbfg import _programs
    from mbfg.factors._rigid import Variables
    from mbfg.factors.impulse import impulse_type
    from mbfg.factors.observation import observation_type
    from mbfg.models import double_pendulum, furuta

    for model, free in ((furuta(dry=False), ("K",)), (double_pendulum(), ("J1",))):
        copy = pickle.loads(pickle.dumps(model))
        for make in (impulse_type, observation_type):
            original = _programs.closure_fingerprint(make(Variables(model, free, False)).residual)
            sent = _programs.closure_fingerprint(make(Variables(copy, free, False)).residual)
            assert original is not None and sent == original, (model.name, make.__name__)

def test_parameter_values_are_arguments_of_the_residuals_so_other_values_share_their_programs():
    """What closure_fingerprint assumes (it leaves parameter values out): the jaxpr of each model-built
    residual, with its constants' values, is the same for a model with every scalar parameter changed."""
    from mbfg import _programs
    from mbfg.factors._rigid import Variables, fixed_values, state_values
    from mbfg.factors.impulse import impulse_type
    from mbfg.factors.observation import observation_type
    from mbfg.models import furuta

    model = furuta(dry=False)
    changed = model.with_parameters({p.name: 1.3 * p.default for p in model.parameters.values()
                                     if p.kind == "scalar" and p.default != 0})
    x = model.initial_state({"alpha": 0.3}, numpy=True)
    free = ("K", "J_Az")

    def prints(m):
        variables = Variables(m, free, False)
        ps = (np.array([m.parameters[n].default for n in free]),)
        impulse = impulse_type(variables).residual
        observe = observation_type(variables).residual
        states = (*state_values(m, x), *state_values(m, x))
        return (_programs.jaxpr_fingerprint(impulse, *states, *ps, fixed_values(m), np.zeros(1), 1e-3),
                _programs.jaxpr_fingerprint(observe, *state_values(m, x), *ps, fixed_values(m), np.zeros(2), np.ones(2)),
                _programs.closure_fingerprint(impulse), _programs.closure_fingerprint(observe))

    assert prints(model) == prints(changed)


def test_a_residual_that_reaches_code_outside_mbfg_is_traced_instead():
    from mbfg import _programs
    from mbfg._jax import jnp
    from mbfg.factors.impulse import impulse_type

    def users_own(x):
        return jnp.sin(x)

    assert _programs.closure_fingerprint(users_own) is None  # not mbfg's: its source is not covered
    wrapper = impulse_type  # an mbfg function ...
    assert _programs.closure_fingerprint(wrapper) is not None

    def closes_over(x):  # ... but a closure holding a user's function is declined
        return users_own(x)

    closes_over.__module__ = "mbfg.probe"
    assert _programs.closure_fingerprint(closes_over) is None


def test_the_source_digest_changes_with_any_source_file(tmp_path: Path):
    from mbfg import _programs

    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "a.py").write_text("X = 1\n")
    first = _programs.source_digest([str(tmp_path)])
    assert _programs.source_digest([str(tmp_path)]) == first
    (tmp_path / "pkg" / "a.py").write_text("X = 2\n")
    assert _programs.source_digest([str(tmp_path)]) != first
    (tmp_path / "pkg" / "a.py").write_text("X = 1\n")
    (tmp_path / "pkg" / "b.py").write_text("")
    assert _programs.source_digest([str(tmp_path)]) != first


MBFG_PROGRAM_SCRIPT = """
import numpy as np
import mbfg.adapter as adapter
from mbfg._jax import enable_compilation_cache
from mbfg.factors.integrators import EULER

enable_compilation_cache()

def no_tracing(*args):
    raise AssertionError("traced to fingerprint")

adapter.jaxpr_fingerprint = no_tracing
rng = np.random.default_rng(1)
xs = tuple(rng.standard_normal((5, 4)) for _ in range(3))
_, linearize = EULER._vmapped((None,))
out = np.asarray(linearize(xs, (0.01,)))
print(float(np.abs(out - np.asarray(linearize.jitted(xs, (0.01,)))).max()))
"""


def test_an_mbfg_factors_program_is_kept_and_loaded_without_tracing_its_residual(tmp_path: Path):
    env = _environment_without_cache_settings()
    env["MBFG_CACHE_DIR"] = str(tmp_path)
    for _ in range(2):
        out = subprocess.run([sys.executable, "-c", MBFG_PROGRAM_SCRIPT], env=env, capture_output=True, text=True,
                             timeout=120)
        assert out.returncode == 0, out.stderr
        assert float(out.stdout.strip().splitlines()[-1]) == 0.0
        assert len(_programs(tmp_path)) == 1


PIECEWISE_SCRIPT = """
import sys
import numpy as np
from mbfg._jax import enable_compilation_cache, jax, jnp
from mbfg.adapter import FactorType, VarKind

enable_compilation_cache()

def residual(v, c):
    return jnp.maximum(v, 0.0) * c  # a kink at zero, as a complementarity residual's

ft = FactorType("piecewise_cache_probe", residual, (VarKind.VECTOR,), piecewise=sys.argv[1] == "piecewise")
xs = (np.random.default_rng(0).standard_normal((4, 3)),)
_, linearize = ft._vmapped((None,))
print(float(np.asarray(linearize(xs, (2.0,))).sum()))
print(float(np.asarray(ft.linearize(xs[0][0], 2.0)[1][0]).sum()))
"""


def test_a_piecewise_types_programs_are_stored_as_a_smooth_types(tmp_path: Path):
    """A complementarity (piecewise) residual's traced programs are kept on disk and its compiles cached by
    JAX, as a smooth residual's: a second process of the 13-parameter dry Furuta calibration then skips
    seconds of tracing (``python benchmarks/furuta_calibration.py`` prints the first linearization apart)."""
    env = _environment_without_cache_settings()
    written = {}
    for kind in ("piecewise", "smooth"):
        env["MBFG_CACHE_DIR"] = str(tmp_path / kind)
        out = subprocess.run([sys.executable, "-c", PIECEWISE_SCRIPT, kind], env=env, capture_output=True,
                             text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        names = [p.name for p in (tmp_path / kind).iterdir()]
        written[kind] = (sorted(n for n in names if n.startswith(("jit_linearize", "jit_call", "jit_error"))),
                         len(_programs(tmp_path / kind)))
    for kind in ("piecewise", "smooth"):
        assert len(written[kind][0]) == 2 and written[kind][1] == 2, kind  # vmapped and single linearization


SIMULATE_SCRIPT = """
import numpy as np
from mbfg._jax import enable_compilation_cache
from mbfg.models import pendulum
from mbfg.spook import simulate

enable_compilation_cache()

model = pendulum()
traj = simulate(model, 0.05, 1e-3, initial=model.initial_state({"theta": 1.0}))
print(repr(float(traj.observations[-1, 0])), repr(float(np.asarray(traj.states.w)[-1, 0, 1])))
"""


def test_the_spook_scan_is_kept_and_a_second_process_simulates_the_same_trajectory_from_disk(tmp_path: Path):
    env = _environment_without_cache_settings()
    env["MBFG_CACHE_DIR"] = str(tmp_path)
    outputs = []
    for _ in range(2):
        out = subprocess.run([sys.executable, "-c", SIMULATE_SCRIPT], env=env, capture_output=True, text=True,
                             timeout=300)
        assert out.returncode == 0, out.stderr
        outputs.append(out.stdout.strip().splitlines()[-1])
        assert len(_programs(tmp_path)) == 1
    assert outputs[0] == outputs[1]  # bit for bit: the loaded program is the traced one
