"""The shared Jacobian battery (:func:`mbfg.testing.check_factor_type`) over every registered factor type.

The battery is parametrized by the names in ``REGISTRY`` after importing every module of ``mbfg.factors``
(their factor types that need no model, registered next to their declarations) and :mod:`mbfg.testing`
(the types built per model, registered on its example models), so a new factor type is checked without
editing this file; a factor type of ``mbfg.factors`` left unregistered, or a per-model builder with no
example in :mod:`mbfg.testing`, fails here. Factor types whose names start with ``test_`` are test-only
types defined by other test modules (e.g. ``test_adapter.py``), which run :func:`check_factor_type` on
them directly.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import subprocess
import sys
import textwrap
from types import ModuleType

import numpy as np
import pytest

import mbfg.arm_identification  # noqa: F401  (its factor types, registered at import)
import mbfg.factors
import mbfg.testing
from mbfg.adapter import REGISTRY, FactorType
from mbfg.testing import check_factor_type

__all__ = ["PRODUCT_FACTOR_TYPES", "check_factor_type"]

# Every module of mbfg.factors, including any not (yet) re-exported by its __init__.
FACTOR_MODULES: list[ModuleType] = [importlib.import_module(f"mbfg.factors.{m.name}")
                                    for m in pkgutil.iter_modules(mbfg.factors.__path__)]

#: The factor types the registry battery runs over (test-only types excluded).
PRODUCT_FACTOR_TYPES = sorted(name for name in REGISTRY if not name.startswith("test_"))


# ---------------------------------------------------------------------------------
# Tests over the registry
# ---------------------------------------------------------------------------------


def test_the_registry_holds_the_factor_types_of_mbfg_factors():
    assert PRODUCT_FACTOR_TYPES, "importing mbfg.factors registered no factor type"
    for name in ("prior", "euler_integrator", "trapezoidal_integrator", "soft_equality"):
        assert name in PRODUCT_FACTOR_TYPES


@pytest.mark.parametrize("name", PRODUCT_FACTOR_TYPES)
def test_every_registered_factor_type_passes_the_battery(name):
    ft = REGISTRY[name]
    seed = int.from_bytes(name.encode(), "little") % 2**32
    check_factor_type(ft, np.random.default_rng(seed))


# ---------------------------------------------------------------------------------
# Coverage: every factor type of mbfg.factors has an example
# ---------------------------------------------------------------------------------


def _declared_here(obj: object, module: ModuleType) -> bool:
    return getattr(obj, "__module__", None) == module.__name__


def test_every_factor_type_declared_in_mbfg_factors_is_registered_with_an_example():
    """A module-level factor type of ``mbfg.factors`` (one that needs no model) is the registry's entry of
    its name: registering it is what gives the battery its example."""
    declared = {f"{module.__name__}.{attr}": value for module in FACTOR_MODULES
                for attr, value in vars(module).items()
                if isinstance(value, FactorType) and _declared_here(value.residual, module)}
    assert {"prior", "euler_integrator", "control_activation_rate"} <= {ft.name for ft in declared.values()}
    unregistered = [where for where, ft in declared.items() if REGISTRY.get(ft.name) is not ft]
    assert not unregistered, f"factor types without a registered example (mbfg.registry.register): {unregistered}"


def _per_model_builders() -> dict[str, object]:
    """The public functions of the public modules of ``mbfg.factors`` that return a factor type: the builders
    of the types made per model (and free set). A ``*_program_type`` is left out: the battery checks it
    through the types built over it (a selected type runs its program type's compiled programs)."""
    found = {}
    for module in FACTOR_MODULES:
        if module.__name__.rpartition(".")[2].startswith("_"):
            continue
        for attr, value in vars(module).items():
            if attr.startswith("_") or attr.endswith("_program_type") or not callable(value) \
                    or not _declared_here(value, module) or inspect.isclass(value):
                continue
            returns = inspect.signature(value).return_annotation
            if returns in ("FactorType", "SelectedType", FactorType) or \
                    isinstance(returns, type) and issubclass(returns, FactorType):
                found[f"{module.__name__}.{attr}"] = value
    return found


def test_every_per_model_factor_type_builder_has_an_example_in_mbfg_testing():
    builders = _per_model_builders()
    assert {"mbfg.factors.impulse.impulse_type", "mbfg.factors.control.step_type"} <= set(builders)
    missing = [where for where, builder in builders.items() if builder not in mbfg.testing.EXAMPLE_BUILDERS]
    assert not missing, f"per-model factor type builders with no example registered in mbfg.testing: {missing}"


_COUNT_MODELS = textwrap.dedent("""
    import importlib, json, pkgutil, sys

    built = []

    def profile(frame, event, arg):  # every model constructed, however it is reached
        if event == "call" and frame.f_code.co_qualname in ("RigidModel.__init__", "PlanarMechanism.__init__"):
            built.append(frame.f_code.co_qualname)

    def per_model():
        from mbfg.registry import REGISTRY
        return sorted(name for name in REGISTRY if "[" in name)

    sys.setprofile(profile)
    import mbfg, mbfg.factors
    for m in pkgutil.iter_modules(mbfg.factors.__path__):
        importlib.import_module("mbfg.factors." + m.name)
    import mbfg.calibration, mbfg.graphs.joint, mbfg.graphs.control
    sys.setprofile(None)
    before = {"built": len(built), "per_model": per_model()}
    sys.setprofile(profile)
    import mbfg.testing
    sys.setprofile(None)
    print(json.dumps({"before": before, "after": {"built": len(built), "per_model": per_model()}}))
""")


def test_importing_mbfg_and_its_factor_modules_builds_no_model_until_mbfg_testing():
    """In a fresh process: importing mbfg, every factor module and the calibration constructs no model and
    registers no per-model type; importing mbfg.testing does both (so the count can see a model built)."""
    import json

    out = subprocess.run([sys.executable, "-c", _COUNT_MODELS], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    counts = json.loads(out.stdout.strip().splitlines()[-1])
    assert counts["before"] == {"built": 0, "per_model": []}
    assert counts["after"]["built"] > 0
    assert any(name.startswith("spook_impulse[furuta") for name in counts["after"]["per_model"])
