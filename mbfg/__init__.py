"""mbfg: multibody estimation problems as GTSAM factor graphs with JAX residuals."""

import os as _os
from importlib.metadata import PackageNotFoundError as _PackageNotFoundError
from importlib.metadata import version as _version
from typing import TYPE_CHECKING as _TYPE_CHECKING

# factors/, graphs/ and datasets/ sit beside mbfg/ in a source checkout and are installed inside
# the package (pyproject's package-dir). A process started in the checkout's root (`python -m mbfg`,
# a Dask worker) finds ./mbfg before the installed package; its subpackages then come from the
# checkout's folders too, instead of failing with "No module named 'mbfg.graphs'".
_here, _root = _os.path.dirname(__file__), _os.path.dirname(_os.path.dirname(__file__))
if not _os.path.isdir(_os.path.join(_here, "graphs")) and all(
    _os.path.isfile(_os.path.join(_root, *parts)) for parts in (("graphs", "__init__.py"), ("pyproject.toml",))
):
    __path__.append(_root)  # noqa: F821

from mbfg import _jax  # noqa: F401  (float64 before anything touches JAX)
from mbfg._jax import X64Warning, enable_compilation_cache
from mbfg.adapter import POSE3, REGISTRY, ROT3, VECTOR, FactorType, Key, VarKind, noise_model
from mbfg.errors import DataError, DeclarationError, LimitError, MbfgError, ModelError
from mbfg.factor_type import Point2Var, Point3Var, Pose2Var, Pose3Var, Rot2Var, Rot3Var, VectorVar, factor_type
from mbfg.mbse_yaml import load_mbse_yaml
from mbfg.models import BUILTIN as BUILTIN_MODELS
from mbfg.models import (
    double_pendulum,
    furuta,
    hinged_tree,
    linear_stage,
    load_model,
    particle,
    particles,
    pendulum,
)
from mbfg.parameters import Parameter, ParameterSet
from mbfg.planar import Body, PlanarMechanism, Point, RelativeAngle
from mbfg.progress import log_to_stderr
from mbfg.registry import register
from mbfg.rigid import RigidModel, State
from mbfg.spook import Trajectory, simulate
from mbfg.urdf import load_urdf

if _TYPE_CHECKING:  # the names __getattr__ loads, for type checkers
    from mbfg.calibration import CalibrationResult, calibrate
    from mbfg.calibration_options import CalibrationOptions, calibration_lm
    from mbfg.graphs.forward import simulate_forward
    from mbfg.graphs.inverse import solve_inverse_dynamics
    from mbfg.graphs.joint import cross_validation, cross_validation_score, estimate_states
    from mbfg.graphs.stream import StreamConfig, StreamEstimator
    from mbfg.graphs.user_factors import UserFactors
    from mbfg.lm_config import LMConfig
    from mbfg.logs import Log, read_log
    from mbfg.noise_weight import estimate_weight
    from mbfg.solvers import LMResult, bounded_levenberg_marquardt

#: Names loaded on first use (PEP 562), by their module: `import mbfg` stays light (no SciPy, pandas or the
#: graph builders until a calibration or a stream asks for them).
_LAZY = {
    "calibrate": "mbfg.calibration",
    "CalibrationResult": "mbfg.calibration",
    "CalibrationOptions": "mbfg.calibration_options",
    "calibration_lm": "mbfg.calibration_options",
    "LMConfig": "mbfg.lm_config",
    "cross_validation": "mbfg.graphs.joint",
    "cross_validation_score": "mbfg.graphs.joint",
    "estimate_states": "mbfg.graphs.joint",
    "estimate_weight": "mbfg.noise_weight",
    "simulate_forward": "mbfg.graphs.forward",
    "solve_inverse_dynamics": "mbfg.graphs.inverse",
    "StreamConfig": "mbfg.graphs.stream",
    "StreamEstimator": "mbfg.graphs.stream",
    "Log": "mbfg.logs",
    "read_log": "mbfg.logs",
    "LMResult": "mbfg.solvers",
    "UserFactors": "mbfg.graphs.user_factors",
    "bounded_levenberg_marquardt": "mbfg.solvers",
}

try:  # the version lives in pyproject.toml alone
    __version__ = _version("mbfg")
except _PackageNotFoundError:  # a source tree that was never installed
    __version__ = "0+unknown"

__all__ = [
    "BUILTIN_MODELS",
    "Body",
    "CalibrationOptions",
    "CalibrationResult",
    "DataError",
    "DeclarationError",
    "FactorType",
    "Key",
    "LMConfig",
    "LMResult",
    "LimitError",
    "Log",
    "MbfgError",
    "ModelError",
    "POSE3",
    "Parameter",
    "ParameterSet",
    "PlanarMechanism",
    "Point",
    "Point2Var",
    "Point3Var",
    "Pose2Var",
    "Pose3Var",
    "REGISTRY",
    "ROT3",
    "RelativeAngle",
    "RigidModel",
    "Rot2Var",
    "Rot3Var",
    "State",
    "UserFactors",
    "StreamConfig",
    "StreamEstimator",
    "Trajectory",
    "VECTOR",
    "VarKind",
    "VectorVar",
    "X64Warning",
    "bounded_levenberg_marquardt",
    "calibrate",
    "calibration_lm",
    "cross_validation",
    "cross_validation_score",
    "double_pendulum",
    "enable_compilation_cache",
    "estimate_states",
    "estimate_weight",
    "factor_type",
    "furuta",
    "hinged_tree",
    "linear_stage",
    "load_mbse_yaml",
    "load_model",
    "load_urdf",
    "log_to_stderr",
    "noise_model",
    "particle",
    "particles",
    "pendulum",
    "read_log",
    "register",
    "simulate",
    "simulate_forward",
    "solve_inverse_dynamics",
]


def __getattr__(name: str) -> object:
    if name not in _LAZY:
        raise AttributeError(f"module 'mbfg' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(_LAZY[name]), name)
    globals()[name] = value  # found directly from now on
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
