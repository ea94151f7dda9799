"""mbfg: multibody estimation problems as GTSAM factor graphs with JAX residuals."""

from mbfg import _jax  # noqa: F401  (float64 before anything touches JAX)
from mbfg.adapter import POSE3, REGISTRY, ROT3, VECTOR, FactorType, VarKind, noise_model
from mbfg.errors import DataError, MbfgError, ModelError
from mbfg.mbse_yaml import load_mbse_yaml
from mbfg.models import BUILTIN as BUILTIN_MODELS
from mbfg.models import double_pendulum, furuta, hinged_tree, load_model, particle, pendulum
from mbfg.parameters import Parameter, ParameterSet
from mbfg.planar import Body, PlanarMechanism, Point, RelativeAngle
from mbfg.rigid import RigidModel, State
from mbfg.spook import Trajectory, simulate

__version__ = "0.1.0"

__all__ = [
    "BUILTIN_MODELS",
    "POSE3",
    "REGISTRY",
    "ROT3",
    "VECTOR",
    "Body",
    "DataError",
    "FactorType",
    "MbfgError",
    "ModelError",
    "PlanarMechanism",
    "Point",
    "RelativeAngle",
    "VarKind",
    "load_mbse_yaml",
    "noise_model",
    "Parameter",
    "ParameterSet",
    "RigidModel",
    "State",
    "StreamEstimator",
    "Trajectory",
    "double_pendulum",
    "furuta",
    "hinged_tree",
    "load_model",
    "particle",
    "pendulum",
    "simulate",
]


def __getattr__(name: str):
    # mbfg.graphs is installed inside the package from the top-level graphs/ folder; importing it
    # lazily keeps `import mbfg` light and working from a source checkout's root, where ./mbfg
    # (without graphs/) comes first on sys.path, as in `python -m mbfg` there.
    if name == "StreamEstimator":
        from mbfg.graphs.stream import StreamEstimator

        return StreamEstimator
    raise AttributeError(f"module 'mbfg' has no attribute {name!r}")
