"""Spook inverse-dynamics impulse factor (Marklund et al. (2025) eqs. 3.6-3.7, multipliers from 2.30-2.31).

Variables: x_k, x_{k+1} (nb Pose3 + a velocity Vector each, see :mod:`._rigid`)
and the free parameters; constants: the fixed parameters, the control u_k and
the time-step h. Residual (12 nb,): [Delta p_u; Delta p_q] [N s, N m s], see
:func:`mbfg.residuals.impulse`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gtsam
import numpy as np

from mbfg import residuals
from mbfg._jax import jnp
from mbfg.adapter import FactorType
from mbfg.registry import register

from ._rigid import (
    Structure,
    Variables,
    example_model,
    example_step,
    fixed_values,
    perturbed,
    selected_type,
    state_values,
    variables_for,
)


def impulse_type(variables: Variables) -> FactorType:
    """The impulse FactorType of a model and free-parameter set. Its compiled programs are its model
    structure's (:func:`impulse_program_type`), shared by every free set and parameter value."""
    return selected_type("spook_impulse", variables, 2, _impulse, impulse_program_type)


def _impulse(model: Any, states: list, p: dict[str, Any], constants: tuple) -> Any:
    """The impulse residual from the states x_k, x_{k+1}, every parameter's value and (u_k, h)."""
    (x0, x1), (u, h) = states, constants
    return residuals.impulse(model, x0, x1, u, p, h)


def impulse_program_type(structure: Structure, residual: Any) -> FactorType:
    """The impulse factor type of a model structure with every parameter a variable (:class:`._rigid.Structure`):
    variables x_k, x_{k+1}, theta (n_s,)[, R_tilt]; constants the parameter values, u_k and h."""
    model = structure.model
    kinds = structure.state_kinds * 2 + structure.parameter_kinds
    # Differentiated in five passes (the poses of x_k, v_k, the poses of x_{k+1}, v_{k+1}, the
    # parameters): x_{k+1} enters only through q_{k+1} boxminus q_k and v_{k+1} only through the
    # multipliers, so their passes are cheap. About 3x less work than one joint pass, for about the
    # same compile time (``python benchmarks/impulse_cost.py``).
    nb = model.nb
    n_p = len(structure.parameter_kinds)
    groups: tuple[tuple[int, ...], ...] = (tuple(range(nb)), (nb,), tuple(range(nb + 1, 2 * nb + 1)), (2 * nb + 1,))
    groups += (tuple(range(2 * nb + 2, 2 * nb + 2 + n_p)),)
    return FactorType(f"spook_impulse[{model.name}; every parameter]", residual, kinds,
                      piecewise=model.layout.n_B > 0, jacobian_groups=groups)


def impulse_keys(variables: Variables, k: int) -> list[int]:
    """Keys of the impulse factor between steps k and k+1."""
    from mbfg import keys

    nb = variables.model.nb
    state = lambda j: [keys.X(j, i) for i in range(nb)] + [keys.V(j)]  # noqa: E731
    return state(k) + state(k + 1) + keys.parameter_keys(variables)


def impulse_factor(
    variables: Variables, k: int, u: Sequence[float] | np.ndarray, h: float, noise: gtsam.noiseModel.Base,
    fixed: dict[str, Any] | None = None,
) -> gtsam.CustomFactor:
    """The impulse factor between steps k and k+1 with control u_k [model units] and time-step h [s]."""
    fixed = fixed_values(variables.model) if fixed is None else fixed
    return impulse_type(variables).make(impulse_keys(variables, k), noise, fixed, np.asarray(u, float), float(h))


def _example(name: str, free: tuple[str, ...]):
    def example(rng: np.random.Generator):
        model = example_model(name)
        variables = variables_for(model, free)
        x0, x1, u = example_step(rng, model)
        params = []
        if variables.free:
            params.append(np.array([model.parameters[n].default for n in variables.free]))
        if variables.tilt_free:
            from scipy.spatial.transform import Rotation

            params.append(Rotation.from_rotvec(0.05 * rng.standard_normal(3)).as_matrix())
        return (*state_values(model, x0), *state_values(model, x1), *params), (fixed_values(model), u, 1e-3)

    return example


# Registered for the shared Jacobian battery: a frictional Furuta pendulum with all 13 parameters free,
# the Stribeck pendulum, the particle on the ground, the linear stage (a slider with a motor, viscous and
# load-independent Coulomb friction, an applied offset) and the DFKI double pendulum (two hinges with
# load-independent Coulomb torques, geared rotors). A copy carries the example: the cached type that user
# code gets stays as built.
for _name, _free in (
    ("furuta-viscous", ("K", "J_Az", "J_Bx", "b_1", "b_2", "tilt")),
    ("furuta", ("K", "J_Ax", "J_Ay", "J_Az", "J_Bx", "J_By", "b_1", "b_2", "mu_r1", "mu_r2", "tilt")),
    ("pendulum-stribeck", ("J", "b", "mu_r", "dmu_r", "omega_s")),
    ("particle", ("mu",)),
    ("linear-stage", ("M", "F_v", "F_c", "F_0")),
    ("dfki-double-pendulum", ("J1", "J2", "b1", "b2", "tau_c1", "tau_c2")),
):
    register(impulse_type(variables_for(example_model(_name), _free)).with_example(_example(_name, _free)))


def _sphere_example(rng: np.random.Generator):
    """The sliding sphere of :func:`._examples.sphere_on_incline` 1e-4 m into its plane, moving downhill,
    and a perturbed Spook step from there; R and mu free."""
    from mbfg.spook import step

    from ._examples import sphere_on_incline

    model = sphere_on_incline()
    n = np.array([np.sin(0.5), 0.0, np.cos(0.5)])
    downhill = np.array([np.cos(0.5), 0.0, -np.sin(0.5)])
    x0 = model.initial_state()
    x0 = x0._replace(r=jnp.asarray((0.1 - 1e-4) * n)[None, :],
                     v=jnp.asarray(rng.uniform(0.5, 1.0) * downhill)[None, :])
    x1, _ = step(model, x0, jnp.zeros(0), model.parameters.arrays(), 1e-3)
    params = (np.array([model.parameters["R"].default, model.parameters["mu"].default]),)
    x0, x1 = perturbed(rng, x0, 1e-3), perturbed(rng, x1, 1e-3)
    return (*state_values(model, x0), *state_values(model, x1), *params), (fixed_values(model), np.zeros(0), 1e-3)


def _register_sphere() -> None:
    from ._examples import sphere_on_incline

    register(impulse_type(variables_for(sphere_on_incline(), ("R", "mu"))).with_example(_sphere_example))


_register_sphere()
