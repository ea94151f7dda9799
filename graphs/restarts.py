"""Second solves of a joint problem from the solution of a first one: restarted from a free simulation at
another state error weight (contacts at large noise), or with the model's own stiff joints from a solve
with softer ones (stiff joints)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from mbfg.errors import ModelError
from mbfg.graphs.joint import JointProblem, build_joint_problem
from mbfg.rigid import RigidModel
from mbfg.solvers import LMResult

if TYPE_CHECKING:
    from mbfg.spook import Trajectory

#: The LM's initial damping for a solve restarted from a free simulation (the calibration's is
#: :data:`mbfg.solvers.LAMBDA_INITIAL`, 1e-5). Its states satisfy the dynamics, so the Gauss-Newton model holds
#: far: from such a start Berard and Trinkle's (2008) particle takes steps with gain ratios of 1, which Marquardt's damping by the
#: diagonal of J^T J (dominated by the heavily weighted impulse rows) only shortens; each accepted step divides
#: the damping by ten, so from 1e-5 the steps lengthen only after several iterations. A step that fails still
#: raises it. ``python benchmarks/particles.py --restart-weight 1e3`` shows the iterations it saves.
RESTART_LAMBDA_INITIAL = 1e-9


def joint_compliances(model: RigidModel) -> list[str]:
    """Names of the model parameters that are joint compliances (a joint's ``eps_lin``, ``eps_rot`` or
    ``eps`` given by parameter name); a compliance given as a number is not a parameter."""
    names: list[str] = []
    for joint in model.joints:
        for attr in ("eps_lin", "eps_rot", "eps"):
            name = getattr(joint, attr, None)
            if isinstance(name, str) and name in model.parameters and name not in names:
                names.append(name)
    return names


def restart_from_simulation(problem: JointProblem, solution: LMResult, weight: float, *,
                            priors: Mapping[str, float] | None = None) -> JointProblem:
    """The same problem at the state error weight ``weight``, started from a free simulation.

    The model, with the parameters of ``solution``, is simulated with Spook from the estimated initial
    state x_0 of ``solution`` under the log's controls, over the problem's own state times; those states
    and parameters are the new start. Dynamics-consistent states, unlike states that follow the readings,
    are in no contact or friction mode that the noise chose: with contacts (Berard and Trinkle's (2008) particle, noise of
    5e-2 m and more) a solve at a large w started from the readings stops in such modes (a local minimum),
    and restarted this way it reaches the minimum it reaches from the truth (``benchmarks/particles.py
    --restart-weight 1e3``). A free simulation drifts from a long or chaotic log, so this is a start for short
    recordings with contacts, not a general one: on a smooth 1 s pendulum log, a first solve at w = 1e2 (J
    biased by a few percent) restarted at 1e6 starts from a drifted trajectory, and the LM stops there after
    one step of small gain, on its relative tolerance, short of the minimum the direct solve at 1e6 finds.

    Args:
        problem, solution: a solved joint problem and its LM result.
        weight: the state error weight w of the new problem (usually larger: the dynamics trusted).
        priors: parameter priors, as for :func:`build_joint_problem`.
    """
    return restarts_from_simulations(problem, solution, weight, priors=priors)[0]


#: How many of the searched parameter vectors (:func:`restarts_from_simulations`) start a restart of their own.
SEARCH_STARTS = 2


def restarts_from_simulations(problem: JointProblem, solution: LMResult, weight: float, *,
                              priors: Mapping[str, float] | None = None, search: int = 0) -> list[JointProblem]:
    """:func:`restart_from_simulation`'s problem, then, with ``search`` > 0, :data:`SEARCH_STARTS` more: of
    ``search`` parameter vectors spread over the free scalar parameters' boxes (:func:`box_samples`), each
    simulated the same way, the ones whose simulations are closest to the readings (:func:`simulation_error`),
    closest first. The caller solves each and keeps the lowest cost.

    A multi-start for contacts at large noise: where the first solve's parameters put a contact in the wrong
    mode (Berard and Trinkle's (2008) particle at 5e-1 m of noise: a first mu above the push over m g, where the free
    simulation sticks and mu has no gradient), the restart from them ends in that mode, and one from a
    sampled mu that slides does not (``python benchmarks/particles.py --restart-weight 1e3 --draws 50
    --restart-search 10``).
    """
    first = _parameters(problem, solution)
    runs = []
    for i, start in enumerate([first, *box_samples(problem, first, search)]):
        traj = problem.free_simulation(solution.values, problem.model.with_parameters(start))
        runs.append((i, simulation_error(problem, traj), start, traj))
    chosen = runs[:1] + sorted(runs[1:], key=lambda run: run[1])[:SEARCH_STARTS]
    out = []
    for _, _, start, traj in chosen:
        again = _again(problem, problem.model, weight, start, [traj.state(k) for k in range(problem.n)], priors)
        again.restarted_from = solution
        out.append(again)
    return out


def box_samples(problem: JointProblem, first: Mapping[str, Any], count: int, seed: int = 0) -> list[dict[str, Any]]:
    """``count`` parameter vectors spread over the boxes of the problem's free scalar parameters: a Latin
    hypercube (each parameter's box cut into ``count`` equal slices, one sample in each, the slices paired at
    random; ``seed`` fixes it). Other parameters (the tilt) keep their values in ``first``.

    Raises:
        ModelError: a free scalar parameter whose box is not finite (named).
    """
    if count <= 0:
        return []
    names = list(problem.variables.free)
    params = problem.model.parameters
    unbounded = params.unbounded(names)
    if unbounded:
        name = unbounded[0]
        raise ModelError(f"restart search: parameter {name!r} has the box [{params[name].lower}, "
                         f"{params[name].upper}]; a search needs finite bounds on every free parameter")
    rng = np.random.default_rng(seed)
    samples = [dict(first) for _ in range(count)]
    for name in names:
        lo, hi = float(params[name].lower), float(params[name].upper)
        fractions = (rng.permutation(count) + rng.uniform(size=count)) / count
        for sample, fraction in zip(samples, fractions):
            sample[name] = lo + fraction * (hi - lo)
    return samples


def simulation_error(problem: JointProblem, traj: Trajectory) -> float:
    """Sum over the readings at the state times of (simulated - read)^2
    (:meth:`~mbfg.graphs.joint.JointProblem.simulation_residuals`); inf where the simulation is not finite."""
    error = float(np.sum(problem.simulation_residuals(traj)[np.isfinite(problem.y)] ** 2))
    return error if np.isfinite(error) else float("inf")


def _parameters(problem: JointProblem, solution: LMResult) -> dict[str, float]:
    """The values of the problem's variable parameters in ``solution``."""
    found = problem.parameter_values(solution.values)
    return {name: found[name] for name in problem.variables.names}


def _again(problem: JointProblem, model: RigidModel, weight: float, start: Mapping[str, float], states: list,
           priors: Mapping[str, float] | None) -> JointProblem:
    """``problem``'s log and variables for ``model`` at ``weight``, started from ``start`` and ``states``."""
    again = build_joint_problem(model, problem.state_log(), free=problem.variables.names, weight=weight,
                                priors=priors, initial_parameters=start, states=states, quiet=True,
                                factors=problem.user_factors)
    again.stride = problem.stride  # built on the state times: the log's own period is h / the first one's stride
    return again


def softened(model: RigidModel, factor: float) -> RigidModel:
    """``model`` with every joint compliance parameter (:func:`joint_compliances`) ``factor`` times its value.

    Raises:
        ModelError: the model has no joint compliance parameter.
    """
    names = joint_compliances(model)
    if not names:
        raise ModelError(f"soft_start: {model.name} has no joint compliance parameter (eps_lin, eps_rot, eps) "
                         "to soften")
    values = model.parameters.numpy_values()
    return model.with_parameters({name: factor * float(values[name]) for name in names})


#: :func:`soft_start_factors`'s ``soft_start=AUTO``: soften the joints by themselves where they are stiff.
AUTO = "auto"
#: The compliance ratio of one stage of an automatic soft start: from the solution of joints this many times
#: softer the stiffer solve converges (100: about ten iterations for the double pendulum, ``python
#: benchmarks/stiff_joints.py --eps 1e-8 --soft-start 100``; a jump of 1000 does not converge in 20).
SOFT_START_STEP = 100.0


def soft_start_factors(model: RigidModel, soft_start: float | str | None) -> list[float]:
    """The softening factors of a calibration's solves before the one with ``model``'s own joints, softest first.

    ``None``: none. A number F: ``[F]``, one solve with every joint compliance F times softer. :data:`AUTO`: the
    factor that brings the stiffest joint compliance (its ratio to :data:`mbfg.trees.SOFT`, the compliance at
    which a solve from the readings converges: ``eps_lin`` and a ball's ``eps`` against 1e-5 m/N, ``eps_rot``
    against 1e-3 rad/(N m)) to that compliance, then every :data:`SOFT_START_STEP`-th of it down to the model's
    own: a model with joints at :data:`mbfg.trees.RIGID` (1e5 times stiffer) solves at 1e5, 1e3 and 10 times
    its compliance first. ``[]`` where the model's joints are at least as soft as :data:`~mbfg.trees.SOFT` or
    it has no joint compliance parameter.
    """
    from mbfg.trees import SOFT

    if soft_start is None:
        return []
    if not isinstance(soft_start, str):
        return [float(soft_start)]
    targets = {"eps_lin": SOFT[0], "eps_rot": SOFT[1], "eps": SOFT[0]}
    values = model.parameters.numpy_values()
    ratio = 1.0
    for joint in model.joints:
        for attr, target in targets.items():
            name = getattr(joint, attr, None)
            if isinstance(name, str) and name in model.parameters and float(values[name]) > 0:
                ratio = max(ratio, target / float(values[name]))
    factors = []
    # 1 + 1e-9: a ratio of 1e5 computed from rounded compliances may come out a hair above its power of 100
    while ratio > 1.0 + 1e-9:
        factors.append(ratio)
        ratio /= SOFT_START_STEP
    return factors


def weighed_by_noise(problem: JointProblem, solution: LMResult, sigma_y: float, *,
                     priors: Mapping[str, float] | None = None) -> JointProblem:
    """``problem`` again from ``solution``'s states and parameters, its objective in the readings' units: the readings
    at sigma ``sigma_y`` (estimated at ``solution``, 3.22), the impulses at ``sigma_y / sqrt(w)``, the ``priors``'
    sigmas times ``sigma_y``, instead of 1, 1/sqrt(w) and the sigmas. The same objective times 1/sigma_y^2, with the
    same minimum, except for the user's own factors (:mod:`mbfg.graphs.user_factors`): their noise models are in their
    residuals' units, and now weigh against the readings at their stated sigmas."""
    sigmas = (sigma_y, sigma_y / float(np.sqrt(problem.weight)))
    scaled = {name: sigma * sigma_y for name, sigma in (priors or {}).items()}
    again = build_joint_problem(problem.model, problem.state_log(), free=problem.variables.names,
                                weight=problem.weight, sigmas=sigmas, priors=scaled, initial_parameters=_parameters(problem, solution),
                                states=problem.state_list(solution.values), quiet=True, factors=problem.user_factors)
    again.stride = problem.stride
    return again


def stiffen(problem: JointProblem, solution: LMResult, model: RigidModel, *,
            priors: Mapping[str, float] | None = None) -> JointProblem:
    """The problem of ``model``, the model of ``problem`` with its own (stiffer) joint compliances, started
    from the states and parameters of ``solution``, a solve of ``problem`` with softer joints.

    Stiff joints (eps_lin of 1e-8 m/N and less) remove the compliance bias, but a solve started from the
    readings' states does not converge there (Marklund et al. (2025), abstract: "very stiff constraints may cause
    difficulties in solving the optimization problem"; section 4.9): the constraint forces of those states are
    far from any consistent with the dynamics, and the LM follows a narrow curved valley. The solution with
    joints 100 times softer has states whose constraint forces the stiff joints nearly share; from them the
    stiff solve converges in about ten iterations (``python benchmarks/stiff_joints.py --eps 1e-8
    --soft-start 100``). Started from the softer parameters alone, it does not.
    """
    again = _again(problem, model, problem.weight, _parameters(problem, solution),
                   problem.state_list(solution.values), priors)
    again.softened_from = solution
    return again
