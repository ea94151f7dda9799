"""A regular stream update as one compiled program: Spook prediction, linearization and elimination.

A regular update of the chain smoother (:mod:`mbfg.graphs.stream.chain`) adds ``N`` states after
the frontier (the newest state), with one impulse factor (3.6-3.7) between each pair of consecutive
states and one observation factor (3.5) on each new state, and no gap; and the user's own factor kinds
(:class:`~mbfg.graphs.stream.sensors.StreamFactors`, any number, each on the new state or between it and
the one before; a row where the sample carries its readings), stacked beside them. Taken step by step it is four
JAX calls, the Spook prediction of the new states, the vmapped impulse and observation
linearizations and the elimination scan, with NumPy and GTSAM round trips between them (states to
``gtsam.Pose3`` and back, rows moved into the chain's column layout). A stream of a few samples per
update is bound by those fixed costs, not by arithmetic (``python benchmarks/stream.py --only
timing``), so here they are one program: the same prediction (:func:`mbfg.spook.step`), the same
vmapped linearizations (:meth:`mbfg.adapter.FactorType._vmapped`, whitened by the noise sigmas),
the same elimination (:func:`~mbfg.graphs.stream.chain.eliminate_regular`). The chain keeps the
linearization points, the conditionals and the back-substitution
(:meth:`~mbfg.graphs.stream.chain.ChainWindow.update_regular`); ``tests/test_stream_chain.py``
checks that both ways give the same estimates. The traced program is kept on disk
(:class:`mbfg._programs.PersistentJit`), so a stream's start in a new process does not trace it again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from mbfg import keys
from mbfg import quaternion as quat
from mbfg._jax import jax, jnp
from mbfg._programs import BoundedCache, PersistentJit, mbfg_source_digest, structure_fingerprint
from mbfg.adapter import FactorType
from mbfg.errors import MbfgError
from mbfg.factors._rigid import Variables
from mbfg.factors.impulse import impulse_type
from mbfg.factors.observation import observation_type
from mbfg.graphs.stream.scan import eliminate_regular
from mbfg.graphs.stream.sensors import SensorKind
from mbfg.lie import so3_exp
from mbfg.rigid import State
from mbfg.spook import step


@dataclass(frozen=True)
class FusedKind:
    """A user factor kind in the program (:class:`~mbfg.graphs.stream.sensors.SensorKind`'s part that shapes it):
    its factor type, ``span`` (1: on the new state; 2: between the state before and the new one), ``layout``
    ((state offset 0 / -1, role: body i's pose, or nb for the velocity) per variable) and ``axes`` (per
    constant: 0 per sample, None shared)."""

    ft: FactorType
    span: int
    layout: tuple[tuple[int, int], ...]
    axes: tuple[int | None, ...]


def fused_kind(kind: SensorKind) -> FusedKind:
    """The :class:`FusedKind` of a user factor kind of the stream."""
    if kind.on_parameters:
        raise MbfgError(f"the fused stream update takes factors on states only; {kind.name!r} is on keys.P()")
    axes = tuple(0 if j in kind.readings else None for j in range(len(kind.spec.constants)))
    return FusedKind(kind.ft, kind.span, kind.layout, axes)


#: The programs by (structure fingerprint, free scalars, tilt free, the user's kinds): one per model structure
#: and set of the user's factor kinds, whatever the parameter values, however many model instances a process
#: builds; the most recently used.
_PROGRAMS: BoundedCache[tuple[Any, ...], Callable[..., tuple[np.ndarray, ...]]] = BoundedCache(16)


def regular_update_program(variables: Variables, kinds: tuple[FusedKind, ...] = ()
                           ) -> Callable[..., tuple[np.ndarray, ...]]:
    """The jitted program of one regular update of the stream of ``variables.model`` (no free parameters;
    one per model structure, as its factor types' programs: the parameter values are arguments), with the
    user's factor ``kinds`` (any number, on one state or between consecutive ones) beside the impulse and
    observation factors.

    The program's arguments (nb bodies, n = 12 nb the state's tangent dimension, N new states):
        T_front (nb, 4, 4), v_front (6 nb,): the frontier's linearization point (poses T_world_body
            [m], velocity [m/s, rad/s] per body [v, omega]);
        T_est, v_est: the frontier's estimate, where the prediction starts;
        T_given (N, nb, 4, 4), v_given (N, 6 nb), use_given (bool): linearize at these instead of the
            prediction (a relinearization pass);
        carried (n, n + 1): the frontier's square-root information [R | d], zero rows below its rank;
        us (N, n_u): the control of each impulse factor (u_k of x_k -> x_k+1);
        ys (N, n_obs), mask (N, n_obs): the readings [rad, m] (0 where missing) and 1 / 0 per reading;
        fixed: the parameter values (:func:`mbfg.factors._rigid.fixed_values`), h: the time-step [s];
        binary_order (2 n,), unary_order (n,): the tangent component of an impulse factor's variables
            (on [x_k | x_k+1]) and of an observation factor's (on x_k) in each of the chain's columns;
        binary_sigmas (12 nb,), unary_sigmas (n_obs,): the noise sigmas that whiten the rows;
        user: per kind of ``kinds``, (constants (the per-sample ones (N, ...)), given (N,) 1 / 0: the sample
            has the kind's row, sigmas (m,), target (tangent dims,): the chain's column of each tangent
            component of the kind's variables on [x_k-1 | x_k] (span 2) or x_k (span 1)).
    Returns (NumPy arrays, from the program's one output):
        T_new (N, nb, 4, 4), v_new (N, 6 nb): the new states' linearization points; and
        :func:`~mbfg.graphs.stream.chain.eliminate_regular`'s G, a, R, R_f, ok.
    """
    if keys.parameter_keys(variables):
        raise MbfgError("the fused stream update takes fixed parameters only (the chain does not refine)")
    key = (structure_fingerprint(variables.model), variables.free, variables.tilt_free, kinds)
    program = _PROGRAMS.get(key)
    if program is None:
        program = _PROGRAMS[key] = _regular_update_program(variables, kinds)
    return program


def _regular_update_program(variables: Variables, kinds: tuple[FusedKind, ...]
                            ) -> Callable[..., tuple[np.ndarray, ...]]:
    model = variables.model
    nb = model.nb
    binary, unary = impulse_type(variables), observation_type(variables)
    linearize_binary = binary._vmapped((None, 0, None))[1]
    linearize_unary = unary._vmapped((None, 0, 0))[1]
    linearize_user = [kind.ft.vmapped_programs(kind.axes)[1] for kind in kinds]

    def user_variables(kind: FusedKind, state_prev: tuple, state_new: tuple) -> tuple:
        return tuple((state_new if offset == 0 else state_prev)[role] for offset, role in kind.layout)

    def predict(T_est: jnp.ndarray, v_est: jnp.ndarray, us: jnp.ndarray, fixed: Any, h: jnp.ndarray
                ) -> tuple[jnp.ndarray, jnp.ndarray]:
        """The new states from the frontier's estimate: poses (N, nb, 4, 4) and velocities (N, 6 nb). As
        :meth:`~mbfg.graphs.stream.growth.GraphGrowth._predict`: one state at constant velocity (the
        Spook position update, q + h v, the rotation by Exp(h omega)), several by Spook steps."""
        V = v_est.reshape(nb, 6)
        if us.shape[0] == 1:
            R_new = jnp.einsum("bij,bjk->bik", T_est[:, :3, :3], jax.vmap(so3_exp)(V[:, 3:] * h))
            top = jnp.concatenate([R_new, (T_est[:, :3, 3] + V[:, :3] * h)[..., None]], axis=2)
            return jnp.concatenate([top, T_est[:, 3:]], axis=1)[None], v_est[None]
        x = State(T_est[:, :3, 3], jax.vmap(quat.from_matrix_jax)(T_est[:, :3, :3]), V[:, :3], V[:, 3:])

        def body(x: State, u: jnp.ndarray) -> tuple[State, State]:
            x_next, _ = step(model, x, u, fixed, h)
            return x_next, x_next

        _, xs = jax.lax.scan(body, x, us)
        N = us.shape[0]
        R_world_body = jax.vmap(jax.vmap(quat.to_matrix))(xs.e)
        top = jnp.concatenate([R_world_body, xs.r[..., None]], axis=3)
        bottom = jnp.broadcast_to(jnp.array([0.0, 0.0, 0.0, 1.0]), (N, nb, 1, 4))
        return jnp.concatenate([top, bottom], axis=2), jnp.concatenate([xs.v, xs.w], axis=2).reshape(N, 6 * nb)

    def rows(out: jnp.ndarray, sigmas: jnp.ndarray, order: jnp.ndarray) -> tuple[jnp.ndarray, ...]:
        """[r | H] (N, m, 1 + dims) as whitened rows A (N, m, dims) in the chain's column order and b (N, m)."""
        out = out / sigmas[None, :, None]
        return out[:, :, 1:][:, :, order], -out[:, :, 0]

    def user_rows(out: jnp.ndarray, given: jnp.ndarray, sigmas: jnp.ndarray, target: jnp.ndarray, width: int
                  ) -> tuple[jnp.ndarray, jnp.ndarray]:
        """[r | H] (N, m, 1 + dims) of a user kind as whitened rows A (N, m, width) scattered into the chain's
        columns ``target`` and b (N, m); zero rows where the sample has none (``where``: a residual at the
        zero constants of a missing reading may not be finite)."""
        out = out / sigmas[None, :, None]
        A = jnp.zeros(out.shape[:2] + (width,), out.dtype).at[:, :, target].set(out[:, :, 1:])
        keep = given[:, None, None] > 0.5
        return jnp.where(keep, A, 0.0), jnp.where(keep[:, :, 0], -out[:, :, 0], 0.0)

    def run(T_front, v_front, T_est, v_est, T_given, v_given, use_given, carried, us, ys, mask, fixed, h,
            binary_order, unary_order, binary_sigmas, unary_sigmas, user):
        T_pred, v_pred = predict(T_est, v_est, us, fixed, h)
        T_new = jnp.where(use_given, T_given, T_pred)
        v_new = jnp.where(use_given, v_given, v_pred)
        T_prev = jnp.concatenate([T_front[None], T_new[:-1]])
        v_prev = jnp.concatenate([v_front[None], v_new[:-1]])
        state_prev = (*(T_prev[:, i] for i in range(nb)), v_prev)
        state_new = (*(T_new[:, i] for i in range(nb)), v_new)
        A, b = rows(linearize_binary((*state_prev, *state_new), (fixed, us, h)), binary_sigmas, binary_order)
        A_u, b_u = rows(linearize_unary(state_new, (fixed, ys, mask)), unary_sigmas, unary_order)
        n = A_u.shape[2]
        binaries, unaries = [(A, b)], [(A_u, b_u)]
        for kind, linearize, (constants, given, sigmas, target) in zip(kinds, linearize_user, user):
            out = linearize(user_variables(kind, state_prev, state_new), constants)
            (binaries if kind.span == 2 else unaries).append(user_rows(out, given, sigmas, target, kind.span * n))
        # Every kind's rows of a state stacked: the same least squares, one QR per state.
        A, b = (jnp.concatenate(part, axis=1) for part in zip(*binaries))
        A_u, b_u = (jnp.concatenate(part, axis=1) for part in zip(*unaries))
        outputs = (T_new, v_new, *eliminate_regular(carried, A, b, A_u, b_u))
        # One array out: each output array is a device-to-host conversion of its own on the way back.
        return jnp.concatenate([jnp.ravel(x).astype(T_new.dtype) for x in outputs])

    def describe(T_front, v_front, T_est, v_est, T_given, v_given, use_given, carried, us, ys, mask, fixed, h,
                 *rest) -> str | None:
        """What the program computes, for :class:`~mbfg._programs.PersistentJit`: the fingerprints of the
        two residuals (as their own programs are found) and of the code around them. Tracing the whole
        program takes seconds at every start of a stream; this takes none (or two residual traces)."""
        state = (*(T_given[:, i] for i in range(nb)), v_given)
        parts = [binary._describe("linearize", (None, 0, None))((*state, *state), (fixed, us, h)),
                 unary._describe("linearize", (None, 0, 0))(state, (fixed, ys, mask))]
        user = rest[-1]
        for kind, (constants, *_) in zip(kinds, user):
            described = kind.ft._describe("linearize", kind.axes)(user_variables(kind, state, state), constants)
            parts.append(None if described is None else f"user {kind.span} {kind.layout}: {described}")
        if None in parts:
            return None
        # The code around the residuals (the prediction, the elimination, this glue): all of mbfg's source.
        return f"stream regular update; {'; '.join(parts)}; code {mbfg_source_digest()}"  # type: ignore[arg-type]

    program = PersistentJit(run, describe)

    def call(T_front, v_front, T_est, v_est, T_given, v_given, *rest) -> tuple[np.ndarray, ...]:
        """The program, its one output array split into T_new, v_new, G, a, R, R_f, ok (NumPy views)."""
        N, n = T_given.shape[0], rest[1].shape[0]  # rest: use_given, carried, ...
        shapes = (T_given.shape, v_given.shape, (N, n, n), (N, n), (N, n, n), (n, n + 1), (N + 1,))
        flat = np.asarray(program(T_front, v_front, T_est, v_est, T_given, v_given, *rest))
        out, start = [], 0
        for shape in shapes:
            size = int(np.prod(shape))
            out.append(flat[start : start + size].reshape(shape))
            start += size
        out[-1] = out[-1] > 0.5  # ok: the booleans, carried as 0.0 / 1.0
        return tuple(out)

    return call
