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

if _TYPE_CHECKING:
    from mbfg.graphs.stream import StreamConfig, StreamEstimator

try:  # the version lives in pyproject.toml alone
    __version__ = _version("mbfg")
except _PackageNotFoundError:  # a source tree that was never installed
    __version__ = "0+unknown"

__all__ = [
    "BUILTIN_MODELS",
    "POSE3",
    "REGISTRY",
    "ROT3",
    "VECTOR",
    "Body",
    "DataError",
    "DeclarationError",
    "FactorType",
    "Key",
    "LimitError",
    "MbfgError",
    "ModelError",
    "PlanarMechanism",
    "Point",
    "Point2Var",
    "Point3Var",
    "Pose2Var",
    "Pose3Var",
    "RelativeAngle",
    "Rot2Var",
    "Rot3Var",
    "VarKind",
    "VectorVar",
    "X64Warning",
    "enable_compilation_cache",
    "factor_type",
    "load_mbse_yaml",
    "log_to_stderr",
    "noise_model",
    "Parameter",
    "ParameterSet",
    "RigidModel",
    "State",
    "StreamConfig",
    "StreamEstimator",
    "Trajectory",
    "double_pendulum",
    "furuta",
    "hinged_tree",
    "linear_stage",
    "load_model",
    "load_urdf",
    "particle",
    "particles",
    "pendulum",
    "register",
    "simulate",
]


def __getattr__(name: str) -> "type[StreamEstimator] | type[StreamConfig]":
    # Imported lazily: `import mbfg` stays light.
    if name in ("StreamEstimator", "StreamConfig"):
        from mbfg.graphs import stream

        return getattr(stream, name)
    raise AttributeError(f"module 'mbfg' has no attribute {name!r}")
