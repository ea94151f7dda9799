"""Activations that reach a target velocity or a target constraint force (the control note), for rigid-body models.

The control note writes one implicit-Euler step of the constrained dynamics with activations ``a`` and
solves it by Newton's method. For our 3D rigid-body models (:mod:`mbfg.rigid`) one Newton
iteration from ``(qdot^t, lambda = 0)`` with the forces and the constraint Jacobian frozen at
x_k *is* the Spook step (Marklund et al. (2025) eq. 2.28), so the step here is exactly the one
:func:`mbfg.spook.step` takes. In the note's abstract form (our multipliers are impulses,
``lambda_ours = tau lambda_seed``, and our f is the applied force, ``f_ours = -f_seed``)::

    [ H   G^T ] [ qdot^{t+tau} ]   [ h(a) ]          H = M + tau D + rotor inertias
    [ G   -E  ] [ -lambda      ] = [ g    ]

- G, E, g: the *holonomic* joint rows of :meth:`RigidModel.rows` (A, Sigma_A, -a); E, the
  regularization of the joints (compliance and damping, Marklund et al. (2025) eq. 2.10), is the note's
  compliance block.
- H: the mass matrix plus the rows that are forces rather than constraints, eliminated
  exactly: a viscous drag row (Sigma = 1/(h c)) adds ``tau D = h c Gbar^T Gbar`` (the note's
  tau D), a motor row (Sigma = 1/J_s, Marklund et al. (2025) F.3) adds the rotor inertia ``J_s Gbar^T Gbar``.
- h(a) = M qdot^t + tau f + (motor and drag terms): the motor torque ``gain * a`` enters here,
  so ``dh/da = -tau A`` with the note's ``A = df/da``. The model's controls (the Furuta motor
  voltage, the double pendulum's joint torques) are its activations.

The Schur complement ``S = E + G H^-1 G^T`` gives the multipliers and, differentiated, the
sensitivities (the control note, "Abstract view and discrete derivatives")::

    S dlambda/da = dg/da - G H^-1 dh/da,      H dqdot/da = dh/da + G^T dlambda/da

(dg/da = 0 for our models: the controls act through force rows, as in the note). A target
velocity ``L = 1/2 |qdot* - P qdot|^2`` or a target constraint force
``L = 1/2 |tau lambda* - tau P_lambda lambda|^2`` (lambda* in N) has the gradient dL/da by the
direct method (:func:`gradient_direct`, n_a solves with H) or the adjoint method
(:func:`gradient_adjoint`, one adjoint solve per cost). Where a constraint prevents a velocity,
P dqdot/da vanishes with E (the note's "null variation"): the controller does not chase it.

Models with dry friction or contacts (complementarity rows) are refused by
:func:`check_controllable`, naming the joint or contact: their step is only piecewise smooth.
Everything here is pure JAX; :mod:`mbfg.factors.control` wraps it into GTSAM factors and
:mod:`mbfg.graphs.control` builds the one-step and horizon problems.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from mbfg import quaternion as quat
from mbfg._jax import jax, jnp
from mbfg._programs import structure_cache
from mbfg.errors import ModelError
from mbfg.rigid import Hinge, Prismatic, RigidModel, State

#: Components of a body velocity a target may name, ``BODY.vx`` ... ``BODY.wz``; v in the world
#: [m/s], omega in the body frame [rad/s] (the model's generalized velocity, Marklund et al. (2025) eq. 2.2).
BODY_RATES = ("vx", "vy", "vz", "wx", "wy", "wz")
#: Components of a joint reaction a target may name: ``JOINT.fx``, ``.fy``, ``.fz`` [N], world axes,
#: the force the joint exerts on its child body (the body of its frame ``b``).
FORCE_COMPONENTS = ("fx", "fy", "fz")


# --------------------------------------------------------------------------- structure


@dataclass(frozen=True)
class _Partition:
    """Static row bookkeeping: which rows of A are constraints (G) and which are forces (drag, motors)."""

    holonomic: np.ndarray  # indices into A of the G rows, in A order
    force: np.ndarray  # indices into A of the drag and motor rows
    joint_rows: dict[str, int]  # joint name -> index of its first row in G
    hinge_angle: dict[str, int]  # hinge name -> index of its angle among the position functions


def check_controllable(model: RigidModel) -> None:
    """Raise ModelError unless ``model`` has controls and no complementarity rows.

    A hinge with dry friction or a contact makes the step piecewise smooth (an LCP, Marklund et al. (2025)
    eq. 2.24): the note's derivatives do not hold across its kinks. The message names the joint
    or contact and the model's smooth twin (``model.without_dry_friction()``).
    """
    if not model.controls:
        raise ModelError(f"{model.name}: the model has no controls (no hinge motor), so nothing to activate")
    for block in model.layout.blocks:
        if block[0] in ("dry_joint", "coulomb"):
            raise ModelError(
                f"{model.name}: joint {block[1].name!r} has dry friction (complementarity rows); control "
                "needs equality-constrained dynamics: use model.without_dry_friction() "
                "(for the built-in furuta: furuta-viscous)"
            )
        if block[0] == "contact":
            raise ModelError(
                f"{model.name}: contact {block[1].name!r} is a complementarity (unilateral) row; control "
                "supports equality-constrained models only"
            )


@structure_cache()
def _partition(model: RigidModel) -> _Partition:
    check_controllable(model)
    holonomic: list[int] = []
    force: list[int] = []
    joint_rows: dict[str, int] = {}
    hinge_angle: dict[str, int] = {}
    for block in model.layout.blocks:
        kind = block[0]
        if kind == "holonomic":
            _, joint, pos, i0 = block
            joint_rows[joint.name] = len(holonomic)
            holonomic.extend(range(i0, i0 + pos.stop - pos.start))
            if isinstance(joint, (Hinge, Prismatic)):
                hinge_angle[joint.name] = pos.stop  # the coordinate follows the joint's 5 rows (RigidModel layout)
        elif kind in ("viscous", "motor"):
            force.append(block[3])
    return _Partition(np.array(holonomic, dtype=int), np.array(force, dtype=int), joint_rows, hinge_angle)


class StepSystem(NamedTuple):
    """The control note's step system at x_k (see the module docstring); n = 6 nb, m constraint rows, n_a activations.

    H: (n, n) [kg, kg m^2]; G: (m, n); E: (m,) the compliance block; g: (m,) [m/s, rad/s];
    h: (n,) right-hand side at the activations a [N s, N m s]; dh: (n, n_a) = dh/da = -tau A;
    dg: (m, n_a) = dg/da (zero for our models).
    """

    H: jnp.ndarray
    G: jnp.ndarray
    E: jnp.ndarray
    g: jnp.ndarray
    h: jnp.ndarray
    dh: jnp.ndarray
    dg: jnp.ndarray


def step_system(model: RigidModel, state: State, a: jnp.ndarray, p: Mapping[str, Any], h: float) -> StepSystem:
    """The step system of ``model`` at x_k = ``state`` with activations ``a`` (n_a,), step ``h`` [s]."""
    return _system(model, state, a, p, h, derivatives=True)


def _system(model: RigidModel, state: State, a: jnp.ndarray, p: Mapping[str, Any], h: float,
            derivatives: bool) -> StepSystem:
    """:func:`step_system`; without ``derivatives`` dh and dg are left empty (n, 0), (m, 0) (cheaper residuals)."""
    part = _partition(model)
    M = model.mass_diagonal(p)
    vel = state.velocity()
    hol, force = part.holonomic, part.force
    rows = model.rows(state, a, p, h)
    F, F_inv = rows.A[force], rows.Sigma_A_inv[force]
    H = jnp.diag(M) + F.T @ (F_inv[:, None] * F)

    def rhs(r) -> tuple[jnp.ndarray, jnp.ndarray]:
        # A force row r: A_r v+ + Sigma_r lam_r + a_r = 0, lam_r = -Sigma_r^-1 (a_r + A_r v+): its
        # v+ part went into H, its a_r part (the motor's h gain u) into the right-hand side.
        return M * vel + h * model.forces(state, p) - F.T @ (F_inv * r.a[force]), -r.a[hol]

    h_a, g = rhs(rows)
    if derivatives:
        # The rows are affine in the controls: the JVPs of the a-vector alone (rows.A does not depend on u).
        _, linear = jax.linearize(lambda u: rhs(model.rows(state, u, p, h)), a)
        dh, dg = jax.vmap(linear, out_axes=1)(jnp.eye(a.shape[0]))
    else:
        dh, dg = jnp.zeros((H.shape[0], 0)), jnp.zeros((hol.shape[0], 0))
    return StepSystem(H, rows.A[hol], rows.Sigma_A[hol], g, h_a, dh, dg)


class _Factors(NamedTuple):
    cH: Any  # Cholesky factor of H
    HiGt: jnp.ndarray  # H^-1 G^T (n, m)
    cS: Any  # Cholesky factor of S = E + G H^-1 G^T


def _factor(H: jnp.ndarray, G: jnp.ndarray, E: jnp.ndarray) -> _Factors:
    cH = jax.scipy.linalg.cho_factor(H)
    HiGt = jax.scipy.linalg.cho_solve(cH, G.T)
    S = jnp.diag(E) + G @ HiGt
    return _Factors(cH, HiGt, jax.scipy.linalg.cho_factor(S))


def _solver(H: jnp.ndarray, G: jnp.ndarray, E: jnp.ndarray) -> Callable[[jnp.ndarray, jnp.ndarray],
                                                                         tuple[jnp.ndarray, jnp.ndarray]]:
    """(h, g) -> (qdot, lambda) of ``H qdot - G^T lambda = h``, ``G qdot + E lambda = g``, factored once."""
    f = _factor(H, G, E)

    def solve(h: jnp.ndarray, g: jnp.ndarray) -> tuple[jnp.ndarray, jnp.ndarray]:
        Hih = jax.scipy.linalg.cho_solve(f.cH, h)
        lam = jax.scipy.linalg.cho_solve(f.cS, g - G @ Hih)
        return Hih + f.HiGt @ lam, lam

    return solve


@jax.custom_jvp
def _solve_system(H: jnp.ndarray, G: jnp.ndarray, E: jnp.ndarray, h: jnp.ndarray,
                  g: jnp.ndarray) -> tuple[jnp.ndarray, jnp.ndarray]:
    return _solver(H, G, E)(h, g)


@_solve_system.defjvp
def _solve_system_jvp(primals: tuple, tangents: tuple) -> tuple[tuple, tuple]:
    # Implicit differentiation: the tangents solve the same system, so its factors serve every
    # tangent (a forward-mode Jacobian of n tangents is one solve with n right-hand sides, not n
    # differentiated Cholesky factorizations).
    H, G, E, h, g = primals
    dH, dG, dE, dh, dg = tangents
    solve = _solver(H, G, E)
    v, lam = solve(h, g)
    # d(H v - G^T lam) = dh and d(G v + E lam) = dg, moved to the right-hand side.
    return (v, lam), solve(dh - dH @ v + dG.T @ lam, dg - dG @ v - dE * lam)


def solve_step(sys: StepSystem) -> tuple[jnp.ndarray, jnp.ndarray]:
    """(qdot^{t+tau} (n,), lambda (m,) [impulses N s, N m s]) of the step system, by the Schur complement.

    ``[H G^T; G -E] [qdot; -lambda] = [h; g]``; its derivatives by implicit differentiation (the same factors).
    """
    return _solve_system(sys.H, sys.G, sys.E, sys.h, sys.g)


def step(model: RigidModel, state: State, a: jnp.ndarray, p: Mapping[str, Any], h: float) -> tuple[State, jnp.ndarray]:
    """One controlled step x_k -> x_{k+1} with activations ``a``: (x_{k+1}, lambda (m,) [impulses]).

    The same step as :func:`mbfg.spook.step` with ``u = a`` (tested), computed in the control note's form.
    """
    v, lam = solve_step(_system(model, state, a, p, h, derivatives=False))
    v = v.reshape(-1, 6)
    e = jax.vmap(quat.boxplus)(state.e, h * v[:, 3:])
    return State(state.r + h * v[:, :3], e, v[:, :3], v[:, 3:]), lam


def sensitivities(sys: StepSystem) -> tuple[jnp.ndarray, jnp.ndarray]:
    """(dqdot/da (n, n_a), dlambda/da (m, n_a) [impulse per unit activation]) by the direct method.

    ``S dlambda/da = dg/da - G H^-1 dh/da``, ``H dqdot/da = dh/da + G^T dlambda/da`` (the control note);
    n_a solves with H.
    """
    f = _factor(sys.H, sys.G, sys.E)
    HiB = jax.scipy.linalg.cho_solve(f.cH, sys.dh)
    dlam = jax.scipy.linalg.cho_solve(f.cS, sys.dg - sys.G @ HiB)
    return HiB + f.HiGt @ dlam, dlam


# --------------------------------------------------------------------------- objectives


class Objective(NamedTuple):
    """The control note's costs: ``1/2 |qdot* - P qdot|^2 + 1/2 |tau lambda* - tau P_lambda lambda|^2``.

    P: (k_v, n) velocity projection; qdot_star: (k_v,) target [rad/s, m/s];
    P_lambda: (k_f, m) constraint-row projection; lambda_star: (k_f,) target force [N].
    Either part may have zero rows.
    """

    P: jnp.ndarray
    qdot_star: jnp.ndarray
    P_lambda: jnp.ndarray
    lambda_star: jnp.ndarray


def _residuals(obj: Objective, v: jnp.ndarray, lam: jnp.ndarray, h: float) -> tuple[jnp.ndarray, jnp.ndarray]:
    """(qdot* - P qdot, tau lambda* - tau P_lambda lambda_seed); our lam is the impulse tau lambda_seed."""
    return obj.qdot_star - obj.P @ v, h * obj.lambda_star - obj.P_lambda @ lam


def objective(model: RigidModel, state: State, a: jnp.ndarray, p: Mapping[str, Any], h: float,
              obj: Objective) -> jnp.ndarray:
    """L(a) of ``obj`` after one step from ``state`` with activations ``a``."""
    v, lam = solve_step(_system(model, state, a, p, h, derivatives=False))
    r_v, r_f = _residuals(obj, v, lam, h)
    return 0.5 * (r_v @ r_v + r_f @ r_f)


def gradient_direct(model: RigidModel, state: State, a: jnp.ndarray, p: Mapping[str, Any], h: float,
                    obj: Objective) -> tuple[jnp.ndarray, jnp.ndarray]:
    """(L, dL/da (n_a,)) by the direct method: dqdot/da and dlambda/da first (n_a solves), then
    ``dL/da = -(qdot* - P qdot)^T P dqdot/da - tau^2 (lambda* - P_lambda lambda)^T P_lambda dlambda/da``."""
    sys = step_system(model, state, a, p, h)
    v, lam = solve_step(sys)
    dv, dlam = sensitivities(sys)
    r_v, r_f = _residuals(obj, v, lam, h)
    return 0.5 * (r_v @ r_v + r_f @ r_f), -(r_v @ obj.P) @ dv - (r_f @ obj.P_lambda) @ dlam


def gradient_adjoint(model: RigidModel, state: State, a: jnp.ndarray, p: Mapping[str, Any], h: float,
                     obj: Objective) -> tuple[jnp.ndarray, jnp.ndarray]:
    """(L, dL/da (n_a,)) by the adjoint method: one adjoint solve for the cost, whatever n_a.

    With w_v = dL/dqdot and w_l = dL/dlambda: y = H^-1 w_v, z = S^-1 (G y + w_l),
    mu = y - H^-1 G^T z, then ``dL/da = mu^T dh/da + z^T dg/da`` (the transpose of the direct
    method's solves, through the same Schur complement E + G H^-1 G^T).
    """
    sys = step_system(model, state, a, p, h)
    f = _factor(sys.H, sys.G, sys.E)
    Hih = jax.scipy.linalg.cho_solve(f.cH, sys.h)
    lam = jax.scipy.linalg.cho_solve(f.cS, sys.g - sys.G @ Hih)
    v = Hih + f.HiGt @ lam
    r_v, r_f = _residuals(obj, v, lam, h)
    w_v, w_l = -obj.P.T @ r_v, -obj.P_lambda.T @ r_f
    y = jax.scipy.linalg.cho_solve(f.cH, w_v)
    z = jax.scipy.linalg.cho_solve(f.cS, sys.G @ y + w_l)
    mu = y - f.HiGt @ z
    return 0.5 * (r_v @ r_v + r_f @ r_f), mu @ sys.dh + z @ sys.dg


# --------------------------------------------------------------------------- what a target names


def rate_names(model: RigidModel) -> list[str]:
    """Every rate a velocity target may name: hinge names (their angle rate [rad/s]) and ``BODY.vx`` ... ``BODY.wz``."""
    part = _partition(model)
    return [*part.hinge_angle, *(f"{b.name}.{c}" for b in model.bodies for c in BODY_RATES)]


def force_names(model: RigidModel) -> list[str]:
    """Every reaction a force target may name: ``JOINT.fx``, ``JOINT.fy``, ``JOINT.fz`` [N] per joint."""
    return [f"{j}.{c}" for j in _partition(model).joint_rows for c in FORCE_COMPONENTS]


def _hinge_of_body(model: RigidModel, name: str) -> str | None:
    """The hinge that attaches body ``name`` (its frame ``b``), if exactly one does."""
    hinges = [j.name for j in model.hinges if j.b.body == name]
    return hinges[0] if len(hinges) == 1 else None


def resolve_rate_name(model: RigidModel, name: str) -> str:
    """A rate name as :func:`rate_names` spells it; a body name stands for the rate of the hinge that attaches it.

    Raises ModelError naming the known names.
    """
    known = rate_names(model)
    if name in known:
        return name
    if name in model.body_index:
        hinge = _hinge_of_body(model, name)
        if hinge is not None:
            return hinge
    raise ModelError(f"{model.name}: unknown rate {name!r}; expected a hinge name "
                     f"({', '.join(_partition(model).hinge_angle) or 'none'}), a body attached by one hinge, "
                     f"or BODY.vx/vy/vz/wx/wy/wz")


def rate_function(model: RigidModel, names: Sequence[str]) -> Callable[[State, Mapping[str, Any]], jnp.ndarray]:
    """``rates(state, p) -> (k,)``: the named rates of a state, pure JAX (hinge rates [rad/s] as
    d angle(q boxplus t v)/dt at t = 0; body components read from the velocity)."""
    part = _partition(model)
    names = [resolve_rate_name(model, n) for n in names]
    angles = [part.hinge_angle.get(n) for n in names]

    def rates(state: State, p: Mapping[str, Any]) -> jnp.ndarray:
        vel = state.velocity()
        out = []
        if any(i is not None for i in angles):
            lifted = model._lifted_positions(state, p)
            _, Jv = jax.jvp(lifted, (jnp.zeros_like(vel),), (vel,))
        for n, i in zip(names, angles):
            if i is not None:
                out.append(Jv[i])
            else:
                body, _, comp = n.rpartition(".")
                out.append(vel[6 * model.body_index[body] + BODY_RATES.index(comp)])
        return jnp.stack(out) if out else jnp.zeros(0)

    return rates


def velocity_projection(model: RigidModel, names: Sequence[str], state: State, p: Mapping[str, Any]) -> jnp.ndarray:
    """P (k, n): the named rates of :func:`rate_function` as rows acting on the velocity, at ``state``."""
    rates = rate_function(model, names)
    return jax.jacfwd(lambda v: rates(state.with_velocity(v), p))(state.velocity())


def force_projection(model: RigidModel, names: Sequence[str]) -> np.ndarray:
    """P_lambda (k, m): picks the named reaction components (``JOINT.fx`` ...) from the constraint multipliers.

    A joint's first three rows are ``o_b - o_a`` in world axes (Marklund et al. (2025) F.1), so their
    multipliers are the force on the child body along x, y, z.
    """
    part = _partition(model)
    P = np.zeros((len(names), len(part.holonomic)))
    for i, name in enumerate(names):
        joint, _, comp = name.rpartition(".")
        if joint not in part.joint_rows or comp not in FORCE_COMPONENTS:
            raise ModelError(f"{model.name}: unknown reaction {name!r}; expected JOINT.fx, JOINT.fy or JOINT.fz "
                             f"with JOINT one of {', '.join(part.joint_rows) or 'none'}")
        P[i, part.joint_rows[joint] + FORCE_COMPONENTS.index(comp)] = 1.0
    return P


def constraint_multipliers(model: RigidModel, x0: State, v1: jnp.ndarray, p: Mapping[str, Any], h: float
                           ) -> jnp.ndarray:
    """The constraint impulses lambda (m,) [N s, N m s] of a step from x0 that ends at velocity v1 (6 nb,):
    ``E^-1 (g - G v1)``, the regularized constraints of Marklund et al. (2025) eq. 2.30 (holonomic rows only).

    The holonomic rows do not depend on the activations (the controls act through motor rows).
    """
    rows = model.rows(x0, jnp.zeros(len(model.controls)), p, h)
    hol = _partition(model).holonomic
    return (-rows.a[hol] - rows.A[hol] @ v1) / rows.Sigma_A[hol]


def constraint_rows(model: RigidModel) -> np.ndarray:
    """Indices into :meth:`RigidModel.rows`' A (and :class:`mbfg.spook.StepInfo`'s lam_A) of the G rows."""
    return _partition(model).holonomic.copy()


__all__ = [
    "BODY_RATES", "FORCE_COMPONENTS", "Objective", "StepSystem", "check_controllable", "constraint_multipliers", "constraint_rows",
    "force_names", "force_projection", "gradient_adjoint", "gradient_direct", "objective", "rate_function",
    "rate_names", "resolve_rate_name", "sensitivities", "solve_step", "step", "step_system", "velocity_projection",
]
