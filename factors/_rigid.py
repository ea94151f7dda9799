"""How rigid-body states and parameters appear as GTSAM variables (shared by the rigid-body factors).

A state x_k of an nb-body :class:`~mbfg.rigid.RigidModel` is nb ``Pose3``
variables (``keys.X(k, i)``: R_world_body and the CoM position) and one
``Vector`` of the generalized velocity (6 nb,) (``keys.V(k)``: per body
[v world, omega body]). The free scalar parameters are one ``Vector``
(``keys.P()``) in the order of ``free``; a free tilt is a ``Rot3``
(``keys.T()``). Fixed parameters are constants of the factor.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np

from mbfg import quaternion as quat
from mbfg._jax import jax, jnp
from mbfg.adapter import POSE3, ROT3, VECTOR, VarKind
from mbfg.errors import ModelError
from mbfg.parameters import ROTATION
from mbfg.rigid import RigidModel, State


@dataclass(frozen=True, eq=False)
class Variables:
    """The variable layout of a model with a given set of free parameters.

    Args:
        model: the rigid-body model.
        free: names of the free scalar parameters (order of the P vector).
        tilt_free: the model's tilt rotation is a Rot3 variable.
    """

    model: RigidModel
    free: tuple[str, ...]
    tilt_free: bool

    @property
    def tilt(self) -> str:
        """The name of the model's tilt parameter, the Rot3 variable when ``tilt_free``."""
        if self.model.tilt is None:
            raise ModelError(f"{self.model.name}: the model has no tilt parameter")
        return self.model.tilt

    @property
    def names(self) -> list[str]:
        """The free scalar parameters' names, then the tilt's when it is free: the ``free`` argument that
        builds these variables again (:func:`mbfg.graphs.joint.build_joint_problem`)."""
        return list(self.free) + ([self.tilt] if self.tilt_free else [])

    @property
    def state_kinds(self) -> tuple[VarKind, ...]:
        return (POSE3,) * self.model.nb + (VECTOR,)

    @property
    def parameter_kinds(self) -> tuple[VarKind, ...]:
        return ((VECTOR,) if self.free else ()) + ((ROT3,) if self.tilt_free else ())

    def state(self, xs: Sequence[jnp.ndarray]) -> State:
        """State from nb pose matrices (4, 4) and the velocity vector (6 nb,)."""
        poses, vel = jnp.stack(xs[:-1]), xs[-1]
        e = jax.vmap(quat.from_matrix_jax)(poses[:, :3, :3])
        vel = vel.reshape(-1, 6)
        return State(poses[:, :3, 3], e, vel[:, :3], vel[:, 3:])

    def parameters(self, ps: Sequence[jnp.ndarray], fixed: Mapping[str, Any]) -> dict[str, Any]:
        """Parameter values: the fixed ones overridden by the free variables."""
        p = dict(fixed)
        i = 0
        if self.free:
            chi = ps[0]
            p.update({name: chi[j] for j, name in enumerate(self.free)})
            i = 1
        if self.tilt_free:
            p[self.tilt] = ps[i]
        return p

    def split(self, args: Sequence[Any], n_states: int) -> tuple[list[State], list[jnp.ndarray], tuple]:
        """(states, parameter variables, constants) from a residual's arguments."""
        per_state = self.model.nb + 1
        states = [self.state(args[i * per_state : (i + 1) * per_state]) for i in range(n_states)]
        n_p = len(self.parameter_kinds)
        start = n_states * per_state
        return states, list(args[start : start + n_p]), tuple(args[start + n_p :])


@functools.cache
def _variables(model: RigidModel, free: tuple[str, ...], tilt_free: bool) -> Variables:
    return Variables(model, free, tilt_free)


def variables_for(model: RigidModel, free: Sequence[str] | None = None) -> Variables:
    """The :class:`Variables` of ``model`` with ``free`` (default: the model's free parameters) free.

    A rotation parameter in ``free`` (the tilt) becomes the Rot3 variable; unknown
    names raise ModelError.
    """
    names = tuple(model.parameters.free if free is None else free)
    scalars, tilt_free = [], False
    for name in names:
        par = model.parameters[name]
        if par.kind == ROTATION:
            if name != model.tilt:
                raise ModelError(f"{model.name}: rotation parameter {name!r} is not the model's tilt")
            tilt_free = True
        else:
            scalars.append(name)
    return _variables(model, tuple(scalars), tilt_free)


def state_values(model: RigidModel, state: State) -> list[np.ndarray]:
    """The GTSAM variable values of a state: nb pose matrices (4, 4) and the velocity (6 nb,)."""
    R = quat.to_matrix_np(np.asarray(state.e))
    r = np.asarray(state.r, dtype=float)
    out: list[np.ndarray] = []
    for i in range(model.nb):
        T = np.eye(4)
        T[:3, :3] = R[i]
        T[:3, 3] = r[i]
        out.append(T)
    # State.velocity() in NumPy: its jnp.concatenate would run eagerly per state while setting up a log.
    out.append(np.concatenate([np.asarray(state.v, dtype=float), np.asarray(state.w, dtype=float)], axis=1).reshape(-1))
    return out


def fixed_values(model: RigidModel) -> dict[str, np.ndarray]:
    """All parameter values as NumPy arrays (the constants the factors start from)."""
    return {k: np.asarray(v, dtype=float) for k, v in model.parameters.numpy_values().items()}


@functools.cache
def example_model(name: str) -> RigidModel:
    """A built-in model for the Jacobian battery's examples (one instance per process)."""
    from mbfg.models import BUILTIN

    return BUILTIN[name]()


def example_step(rng: np.random.Generator, model: RigidModel, h: float = 1e-3) -> tuple[State, State, np.ndarray]:
    """A random state x_k, a perturbed Spook step x_{k+1} from it, and the control u_k.

    Moving (so dry friction slides) and off the Spook solution by a little, as
    during an optimization.
    """
    from mbfg.spook import step

    coords = {j.name: rng.uniform(-1.0, 1.0) for j in model.axial}
    rates = {j.name: rng.uniform(1.0, 3.0) * rng.choice([-1.0, 1.0]) for j in model.axial}
    for b in model.bodies:
        if not any(j.b.body == b.name for j in model.joints):  # a free body, e.g. the particle
            rates.update({f"{b.name}.x": rng.uniform(0.5, 1.0)})
    x0 = model.initial_state(coords, rates)
    if not model.axial:  # touch the ground: the contact and its friction are active
        x0 = x0._replace(r=cast(jax.Array, x0.r).at[:, 2].set(-1e-4))  # initial_state's are JAX arrays
    u = rng.uniform(-1.0, 1.0, size=len(model.controls))
    x1, _ = step(model, x0, jnp.asarray(u), model.parameters.arrays(), h)

    # 1e-3 off: far enough from the kinks of the complementarity for central differences.
    return perturbed(rng, x0, 1e-3), perturbed(rng, x1, 1e-3), u


def perturbed(rng: np.random.Generator, x: State, scale: float) -> State:
    """``x`` moved off by Gaussian noise of ``scale`` in every coordinate (rotations by boxplus)."""
    e = jax.vmap(quat.boxplus)(x.e, jnp.asarray(scale * rng.standard_normal(x.w.shape)))
    return State(x.r + scale * rng.standard_normal(x.r.shape), e,
                 x.v + scale * rng.standard_normal(x.v.shape), x.w + scale * rng.standard_normal(x.w.shape))
