"""The shared Jacobian battery every factor type goes through.

For each registered :class:`mbfg.adapter.FactorType` the battery builds the real
``gtsam.CustomFactor`` (``ft.make``) at several random instances from
``ft.example(rng)`` and, for ``Rot3``/``Pose3`` variables, also at points at and
near the identity. At each point it checks that

* the Jacobian blocks GTSAM gets from ``factor.linearize(values)`` equal central
  differences of ``factor.unwhitenedError`` taken through GTSAM's own
  ``Values.retract`` on one variable and one tangent direction at a time, and
* the error-only path (``unwhitenedError``, callback with ``H is None``), the
  full path (the residual inside the linearization, ``b = -error`` for a unit
  noise model) and the pure ``ft.error`` give the same residual.

The battery is parametrized by the names in ``REGISTRY`` after importing every
module of ``mbfg.factors``, so a new factor type is checked without editing this
file. Factor types whose names start with ``test_`` are test-only types defined
by other test modules (e.g. ``test_adapter.py``), which run
:func:`check_factor_type` on them directly.
"""

from __future__ import annotations

import importlib
import pkgutil

import gtsam
import numpy as np
import pytest

import mbfg.factors
from mbfg.adapter import REGISTRY, FactorType, VarKind

__all__ = ["check_factor_type"]

# Central-difference step in tangent coordinates and the tolerance relative to
# the Jacobian's scale. With a 1e-6 step, the truncation error is O(1e-12 f''')
# and the round-off O(1e-16 |r| / 1e-6) = O(1e-10 |r|): 1e-6 leaves a wide
# margin for honest Jacobians and catches any wrong term.
FD_STEP = 1e-6
JAC_RTOL = 1e-6
# The three residual paths run different compiled programs; they agree to round-off.
RESIDUAL_RTOL = 1e-12

# Every module of mbfg.factors, including any not (yet) re-exported by its __init__.
for _module in pkgutil.iter_modules(mbfg.factors.__path__):
    importlib.import_module(f"mbfg.factors.{_module.name}")

#: The factor types the registry battery runs over (test-only types excluded).
PRODUCT_FACTOR_TYPES = sorted(name for name in REGISTRY if not name.startswith("test_"))


# ---------------------------------------------------------------------------------
# Building GTSAM values and factors
# ---------------------------------------------------------------------------------


def _to_gtsam(kind: VarKind, x: np.ndarray):
    x = np.asarray(x, dtype=float)
    if kind is VarKind.VECTOR:
        return np.ascontiguousarray(x)
    if kind is VarKind.POINT2:
        return gtsam.Point2(*x)
    if kind is VarKind.POINT3:
        return gtsam.Point3(*x)
    if kind is VarKind.ROT2:
        return gtsam.Rot2.fromCosSin(x[0, 0], x[1, 0])
    if kind is VarKind.POSE2:
        return gtsam.Pose2(x[0, 2], x[1, 2], np.arctan2(x[1, 0], x[0, 0]))
    if kind is VarKind.ROT3:
        return gtsam.Rot3(x)
    return gtsam.Pose3(x)


#: Kinds whose tangent is ``x + xi``: no exponential map, no branch near the identity to check.
_FLAT = (VarKind.VECTOR, VarKind.POINT2, VarKind.POINT3)


def _values(kinds, keys, variables) -> gtsam.Values:
    values = gtsam.Values()
    for kind, key, x in zip(kinds, keys, variables):
        values.insert(key, _to_gtsam(kind, x))
    return values


def _retract_one(values: gtsam.Values, keys, dims, key: int, delta: np.ndarray) -> gtsam.Values:
    """``values`` with only variable ``key`` moved by ``delta``, through GTSAM's ``Values.retract``."""
    tangent = gtsam.VectorValues()
    for k, d in zip(keys, dims):
        tangent.insert(k, delta if k == key else np.zeros(d))
    return values.retract(tangent)


def _near_identity_points(kind: VarKind, rng: np.random.Generator) -> list[tuple[str, np.ndarray]]:
    """Identity, a rotation inside the small-angle branch of so3_exp, and a small one outside it."""
    points = []
    for label, scale in (("identity", 0.0), ("1e-9 from identity", 1e-9), ("1e-3 from identity", 1e-3)):
        omega = scale * rng.standard_normal(3)
        if kind is VarKind.ROT2:
            points.append((label, gtsam.Rot2(omega[0]).matrix()))
        elif kind is VarKind.POSE2:
            points.append((label, gtsam.Pose2.Expmap(omega).matrix()))
        elif kind is VarKind.ROT3:
            points.append((label, gtsam.Rot3.Expmap(omega).matrix()))
        else:
            xi = np.concatenate([omega, scale * rng.standard_normal(3)])
            points.append((label, gtsam.Pose3.Expmap(xi).matrix()))
    return points


def _points(ft: FactorType, rng: np.random.Generator, n_examples: int):
    """(label, variables, constants) triples: random examples, and the first one's near-identity variants
    (what they check is the branch of the rotation's exponential near zero, the same at every example)."""
    for i in range(n_examples):
        variables, constants = ft.example(rng)
        yield f"example {i}", tuple(variables), tuple(constants)
        for pos, kind in enumerate(ft.kinds):
            if kind in _FLAT or i > 0:
                continue
            for label, x in _near_identity_points(kind, rng):
                if ft.piecewise and label != "1e-3 from identity":
                    continue  # exactly symmetric: on a kink of the complementarity
                moved = list(variables)
                moved[pos] = x
                yield f"example {i}, variable {pos} ({kind.value}) at {label}", tuple(moved), tuple(constants)


# ---------------------------------------------------------------------------------
# The battery
# ---------------------------------------------------------------------------------


def check_factor_type(
    ft: FactorType,
    rng: np.random.Generator,
    n_examples: int = 4,
    step: float = FD_STEP,
    rtol: float = JAC_RTOL,
) -> None:
    """Check ``ft``'s GTSAM factor: JAX Jacobians vs central differences, and residual paths.

    Raises AssertionError naming the instance, variable and worst entry on failure.
    """
    assert ft.example is not None, f"factor type {ft.name!r} has no example(rng)"
    keys = [gtsam.symbol("x", i) for i in range(len(ft.kinds))]

    for label, variables, constants in _points(ft, rng, n_examples):
        where = f"{ft.name}, {label}"
        r_pure = np.asarray(ft.error(*variables, *constants))
        assert r_pure.ndim == 1, f"{where}: residual has shape {r_pure.shape}, expected (m,)"
        m = r_pure.shape[0]
        factor = ft.make(keys, gtsam.noiseModel.Unit.Create(m), *constants)
        values = _values(ft.kinds, keys, variables)
        dims = [kind.tangent_dim(x) for kind, x in zip(ft.kinds, variables)]

        # Residual: error-only path == full path == pure JAX.
        r_error_only = factor.unwhitenedError(values)
        linear = factor.linearize(values)
        assert list(linear.keys()) == keys, f"{where}: linearized keys {list(linear.keys())} != {keys}"
        A, b = linear.jacobian()  # unit noise: A = H, b = -error
        assert A.shape == (m, sum(dims)), f"{where}: Jacobian shape {A.shape}, expected {(m, sum(dims))}"
        r_full = -b
        scale_r = max(1.0, float(np.max(np.abs(r_pure), initial=0.0)))
        for name, r in (("error-only path", r_error_only), ("linearization", r_full)):
            np.testing.assert_allclose(
                r, r_pure, rtol=RESIDUAL_RTOL, atol=RESIDUAL_RTOL * scale_r,
                err_msg=f"{where}: residual from the {name} != ft.error",
            )
        assert np.all(np.isfinite(A)), f"{where}: non-finite Jacobian entries\n{A}"

        # Jacobian blocks vs central differences through GTSAM's retract.
        numeric = np.zeros_like(A)
        col = 0
        for key, dim in zip(keys, dims):
            for j in range(dim):
                e = np.zeros(dim)
                e[j] = step
                r_plus = factor.unwhitenedError(_retract_one(values, keys, dims, key, e))
                r_minus = factor.unwhitenedError(_retract_one(values, keys, dims, key, -e))
                numeric[:, col] = (r_plus - r_minus) / (2.0 * step)
                col += 1

        # Relative to the Jacobian's scale, plus the round-off floor of the differences
        # themselves (100 ulp of the residual divided by the step, ~2e-8 |r|).
        scale_J = max(float(np.max(np.abs(numeric))), float(np.max(np.abs(A))))
        tol = rtol * scale_J + 100 * np.finfo(float).eps * scale_r / step
        err = np.abs(A - numeric)
        if err.max() > tol:
            row, c = np.unravel_index(np.argmax(err), err.shape)
            var = int(np.searchsorted(np.cumsum(dims), c, side="right"))
            raise AssertionError(
                f"{where}: Jacobian block of variable {var} ({ft.kinds[var].value}) differs from "
                f"central differences by {err.max():.3e} > {tol:.1e} (Jacobian scale {scale_J:.3e}) at "
                f"row {row}, tangent column {c - sum(dims[:var])}: JAX {A[row, c]:.12g}, "
                f"numeric {numeric[row, c]:.12g}"
            )


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
