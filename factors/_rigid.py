"""How rigid-body states and parameters appear as GTSAM variables (shared by the rigid-body factors).

A state x_k of an nb-body :class:`~mbfg.rigid.RigidModel` is nb ``Pose3``
variables (``keys.X(k, i)``: R_world_body and the CoM position) and one
``Vector`` of the generalized velocity (6 nb,) (``keys.V(k)``: per body
[v world, omega body]). The free scalar parameters are one ``Vector``
(``keys.P()``) in the order of ``free``; a free tilt is a ``Rot3``
(``keys.T()``). Fixed parameters are constants of the factor.

The compiled programs do not see that split (:mod:`mbfg.selected`): each factor type's program type is
built once per model *structure* (:func:`program_type`, keyed by :func:`mbfg._programs.structure_fingerprint`)
and takes every scalar parameter as one Vector (n_s,) and the tilt as a Rot3 (:class:`Structure`); a free
set is a :class:`ParameterSelection` over it. A new free set, new parameter values, another model
instance of the same structure or a new weight run the programs already compiled.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from mbfg import quaternion as quat
from mbfg._jax import jax, jnp
from mbfg._programs import BoundedCache, structure_fingerprint
from mbfg.adapter import POSE3, ROT3, VECTOR, FactorType, VarKind
from mbfg.errors import ModelError
from mbfg.parameters import ROTATION
from mbfg.rigid import RigidModel, State
from mbfg.selected import SelectedType, select


def state_of(xs: Sequence[jnp.ndarray]) -> State:
    """State from nb pose matrices (4, 4) and the velocity vector (6 nb,), as a residual receives a state."""
    poses, vel = jnp.stack(xs[:-1]), xs[-1]
    e = jax.vmap(quat.from_matrix_jax)(poses[:, :3, :3])
    vel = vel.reshape(-1, 6)
    return State(poses[:, :3, 3], e, vel[:, :3], vel[:, 3:])


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
        return state_of(xs)

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
    return Variables(model, tuple(scalars), tilt_free)


def state_values(model: RigidModel, state: State) -> list[np.ndarray]:
    """The GTSAM variable values of a state: nb pose matrices (4, 4) and the velocity (6 nb,)."""
    poses, velocities = trajectory_values(model, [state])
    return [*poses[0], velocities[0]]


def trajectory_values(model: RigidModel, states: Sequence[State]) -> tuple[np.ndarray, np.ndarray]:
    """The GTSAM variable values of n states at once: pose matrices (n, nb, 4, 4) and velocities (n, 6 nb)."""
    e = np.asarray([np.asarray(x.e, dtype=float) for x in states]).reshape(len(states), model.nb, 4)
    poses = np.zeros((len(states), model.nb, 4, 4))
    poses[:, :, :3, :3] = quat.to_matrix_np(e)
    poses[:, :, :3, 3] = np.asarray([np.asarray(x.r, dtype=float) for x in states]).reshape(len(states), model.nb, 3)
    poses[:, :, 3, 3] = 1.0
    # State.velocity() in NumPy: its jnp.concatenate would run eagerly per state while setting up a log.
    v = np.asarray([np.asarray(x.v, dtype=float) for x in states]).reshape(len(states), model.nb, 3)
    w = np.asarray([np.asarray(x.w, dtype=float) for x in states]).reshape(len(states), model.nb, 3)
    return poses, np.concatenate([v, w], axis=2).reshape(len(states), -1)


def fixed_values(model: RigidModel) -> dict[str, np.ndarray]:
    """All parameter values as NumPy arrays (the constants the factors start from)."""
    return {k: np.asarray(v, dtype=float) for k, v in model.parameters.numpy_values().items()}


@dataclass(frozen=True, eq=False)
class Structure:
    """The variables of a model's program types: the states, every scalar parameter as one Vector (n_s,)
    in the model's order (``scalars``), and the tilt as a Rot3 where the model has one.

    Args:
        model: a model of this structure (the programs read its structure, never its parameter values).
        key: :func:`mbfg._programs.structure_fingerprint` of the model.
    """

    model: RigidModel
    key: str

    @property
    def __fingerprint__(self) -> str:
        """What :func:`mbfg._programs.closure_fingerprint` pickles for a structure: its fingerprint."""
        return self.key

    @functools.cached_property
    def scalars(self) -> tuple[str, ...]:
        """The scalar parameters' names, in the model's order: the entries of the program's Vector."""
        return tuple(n for n, p in self.model.parameters.items() if p.kind != ROTATION)

    @property
    def state_kinds(self) -> tuple[VarKind, ...]:
        return (POSE3,) * self.model.nb + (VECTOR,)

    @property
    def parameter_kinds(self) -> tuple[VarKind, ...]:
        return (VECTOR,) + ((ROT3,) if self.model.tilt is not None else ())

    def split(self, args: Sequence[Any], n_states: int) -> tuple[list[State], dict[str, Any], tuple]:
        """(states, every parameter's value, the constants after ``fixed``) from a program residual's
        arguments ``(*n_states states, theta (n_s,)[, R_tilt (3, 3)], fixed, *constants)``: the values are
        ``fixed`` with every scalar from theta and the tilt from R_tilt."""
        per_state = self.model.nb + 1
        states = [state_of(args[i * per_state : (i + 1) * per_state]) for i in range(n_states)]
        start = n_states * per_state
        theta = args[start]
        p = dict(args[start + len(self.parameter_kinds)])
        p.update({name: theta[j] for j, name in enumerate(self.scalars)})
        if self.model.tilt is not None:
            p[self.model.tilt] = args[start + 1]
        return states, p, tuple(args[start + len(self.parameter_kinds) + 1 :])


#: Program types by (factor kind, structure fingerprint): one per structure, however many model instances,
#: free sets or parameter values a process builds; the most recently used (a worker that meets structure
#: after structure keeps a bounded number of compiled programs).
_PROGRAM_TYPES: BoundedCache[tuple[str, str], FactorType] = BoundedCache(64)
#: Selected types by (factor kind, structure fingerprint, free scalars, tilt free), as bounded.
_SELECTED: BoundedCache[tuple[str, str, tuple[str, ...], bool], SelectedType] = BoundedCache(128)


#: ``evaluate(model, states, parameters, constants) -> (m,)``: a residual of :mod:`mbfg.residuals` on a
#: structure's states, every parameter's value (a dict) and the constants after ``fixed``.
Evaluate = Callable[[RigidModel, list[State], dict[str, Any], tuple], jnp.ndarray]


def program_type(kind: str, model: RigidModel, n_states: int, evaluate: Evaluate,
                 build: Callable[[Structure, Callable[..., jnp.ndarray]], FactorType]) -> FactorType:
    """The program type ``kind`` of ``model``'s structure: ``build(structure, residual)`` the first time it is
    asked for, with ``residual(*n_states states, theta[, R_tilt], fixed, *constants)`` = ``evaluate``."""
    key = (kind, structure_fingerprint(model))
    if key not in _PROGRAM_TYPES:
        structure = Structure(model, key[1])

        def residual(*args: Any) -> jnp.ndarray:
            states, p, constants = structure.split(args, n_states)
            return evaluate(structure.model, states, p, constants)

        _PROGRAM_TYPES[key] = build(structure, residual)
    return _PROGRAM_TYPES[key]


def selected_type(kind: str, variables: Variables, n_states: int, evaluate: Evaluate,
                  build: Callable[[Structure, Callable[..., jnp.ndarray]], FactorType]) -> SelectedType:
    """The factor type ``kind`` over ``n_states`` states and ``variables``' parameters, running the programs of
    its structure's program type (:func:`program_type`)."""
    program = program_type(kind, variables.model, n_states, evaluate, build)
    structure_key = structure_fingerprint(variables.model)
    key = (kind, structure_key, variables.free, variables.tilt_free)
    if key not in _SELECTED:
        structure = Structure(variables.model, structure_key)
        selection = ParameterSelection(variables.model, variables.free, variables.tilt_free, n_states)
        kinds = variables.state_kinds * n_states + variables.parameter_kinds
        n = len(kinds)

        def residual(*args: Any) -> jnp.ndarray:  # the program's, at the expanded variables
            xs, cs = args[:n], args[n:]
            states, p, constants = structure.split((*selection.expand(xs, cs, jnp), *cs), n_states)
            return evaluate(structure.model, states, p, constants)

        name = f"{kind}[{variables.model.name}; free={','.join(variables.free)}{'; tilt' if variables.tilt_free else ''}]"
        _SELECTED[key] = select(name, program, selection, kinds, residual)
    return _SELECTED[key]


class ParameterSelection:
    """A free set over a program type's parameters (:class:`mbfg.selected.Selection`): the factor's variables
    are ``n_states`` states, the free scalars (n_free,) in the order of ``free`` and the tilt if it is free;
    the program's are the same states, every scalar (n_s,) (the free ones from the variable, the others
    from the constant ``fixed``, the factor's first constant) and the tilt (from ``fixed`` when held)."""

    def __init__(self, model: RigidModel, free: tuple[str, ...], tilt_free: bool, n_states: int) -> None:
        scalars = [n for n, p in model.parameters.items() if p.kind != ROTATION]
        self.scalars, self.tilt, self.tilt_free = tuple(scalars), model.tilt, tilt_free
        self.n_free, self.n_state_vars = len(free), n_states * (model.nb + 1)
        self.index = np.array([scalars.index(n) for n in free], dtype=int)  # free scalar j -> entry of theta
        self.mask = np.zeros(len(scalars), dtype=bool)
        self.mask[self.index] = True
        self.position = np.zeros(len(scalars), dtype=int)  # entry of theta -> free scalar (0 where held)
        self.position[self.index] = np.arange(len(free))

    def expand(self, xs: tuple, cs: tuple, xp: Any) -> tuple:
        states, rest, fixed = xs[: self.n_state_vars], xs[self.n_state_vars :], cs[0]
        batch = tuple(np.shape(xs[0])[:-2])  # a pose (..., 4, 4)
        base = xp.stack([xp.asarray(fixed[n], dtype=float) for n in self.scalars])
        if self.n_free:
            theta = xp.where(self.mask, xp.take(rest[0], self.position, axis=-1), base)
        else:
            theta = xp.broadcast_to(base, batch + base.shape)
        out = (*states, theta)
        if self.tilt is not None:
            R = rest[-1] if self.tilt_free else xp.broadcast_to(xp.asarray(fixed[self.tilt], dtype=float),
                                                                  batch + (3, 3))
            out += (R,)
        return out

    def columns(self, program_xs: tuple) -> np.ndarray:
        dims = [x.shape[-1] if x.ndim == 1 else (6 if x.shape == (4, 4) else 3) for x in program_xs]
        starts = np.cumsum([1, *dims])
        state_cols = np.arange(starts[self.n_state_vars])  # r and the states' blocks, as they are
        theta_cols = starts[self.n_state_vars] + self.index
        tilt_cols = (np.arange(starts[-2], starts[-1]) if self.tilt is not None and self.tilt_free
                     else np.zeros(0, dtype=int))
        return np.concatenate([state_cols, theta_cols, tilt_cols]).astype(int)

    def describe(self) -> str:
        return f"scalars {self.index.tolist()} of {len(self.scalars)}; tilt {'free' if self.tilt_free else 'held'}"
