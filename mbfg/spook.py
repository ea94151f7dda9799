"""The Spook stepper (Marklund et al. (2025) sections 2.3-2.5) for :class:`~mbfg.rigid.RigidModel`.

One step from x_k = (q_k, v_k) with control u_k:

1. rows of the constraint system at x_k (eqs. 2.8-2.11, 2.17-2.19, 2.24-2.25; see
   :meth:`RigidModel.rows`), with p = -(M v_k + h (f + f_g));
2. the Schur complement (2.27) for the multipliers; equality rows only: a
   Cholesky solve; with complementarity rows, the block-LDL^T reduction of
   Appendix A: eliminate lam_A, solve the remaining LCP for lam_B exactly with
   Lemke's algorithm (:mod:`mbfg.lcp`), back-substitute lam_A;
3. the velocity update (2.28) ``M v_{k+1} = M v_k + A^T lam_A + B^T lam_B + h (f + f_g)``
   and the configuration update (2.12, 2.16) ``q_{k+1} = q_k boxplus h v_{k+1}``.

Everything is pure JAX: :func:`step` is differentiable in the state, the
control and the parameters; derivatives through the LCP use the implicit rule
of Marklund et al. (2025) App. D.1 (in :mod:`mbfg.lcp`). :func:`simulate` runs steps with
a loop compiled once per model and chunk of steps (any duration reuses it, running only its own steps).
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from mbfg import plots
from mbfg import quaternion as quat
from mbfg._jax import Array, jax, jnp
from mbfg._programs import BoundedCache, PersistentJit, closure_fingerprint, structure_fingerprint
from mbfg.angles import unwrap_angles  # shared with mbfg.plots; importable from here as before
from mbfg.errors import ModelError
from mbfg.lcp import solve_lcp
from mbfg.logs import Log, add_noise, quantize, quantize_linear
from mbfg.progress import Progress
from mbfg.rigid import RigidModel, State

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure


class StepInfo(NamedTuple):
    """Multipliers of one step: lam_A (nA,), lam_B (nB,) [impulses], the slack w_B (nB,),
    and whether the LCP solve terminated properly (``lcp_ok``)."""

    lam_A: Array
    lam_B: Array
    w_B: Array
    lcp_ok: Array


def _cholesky_solve_columns(L: jnp.ndarray, R: jnp.ndarray) -> jnp.ndarray:
    """X (n, m) with ``L L^T X = R`` for a lower Cholesky factor L (n, n), by substitution in JAX loops.

    Not ``cho_solve``: with many right-hand sides (the nB + 1 columns of the Schur reduction) XLA:CPU hands
    the triangular solves to LAPACK's multithreaded ``trsm``, whose threads wait for one another on a busy
    machine: 10-30 ms for a (24, 157) solve that the loops do in 0.1 ms. The loops' cost is n row updates of
    O(n m) each; only the entries of L are read above (below) the diagonal, as ``cho_solve`` reads them.
    """
    n = L.shape[0]
    idx = jnp.arange(n)

    def forward(i, Y):  # L Y = R
        return Y.at[i].set((R[i] - jnp.where(idx < i, L[i], 0.0) @ Y) / L[i, i])

    Y = jax.lax.fori_loop(0, n, forward, jnp.zeros_like(R))

    def backward(k, X):  # L^T X = Y
        i = n - 1 - k
        return X.at[i].set((Y[i] - jnp.where(idx > i, L[:, i], 0.0) @ X) / L[i, i])

    return jax.lax.fori_loop(0, n, backward, jnp.zeros_like(Y))


def step(
    model: RigidModel, state: State, u: jnp.ndarray, p: Mapping[str, Any], h: float | jnp.ndarray
) -> tuple[State, StepInfo]:
    """One Spook step x_k -> x_{k+1}.

    Args:
        model: the multibody model (static structure).
        state: x_k.
        u: controls u_k (n_controls,), in ``model.controls`` order.
        p: parameter values (``model.parameters.arrays()`` or a modified copy).
        h: time-step [s].
    """
    M = model.mass_diagonal(p)
    Minv = 1.0 / M
    vel = state.velocity()
    p_k = -(M * vel + h * model.forces(state, p, M))
    rows = model.rows(state, u, p, h)
    A, B = rows.A, rows.B
    nA, nB = A.shape[0], B.shape[0]
    AMinv, BMinv = A * Minv, B * Minv
    lam_A, lam_B, w_B, ok = jnp.zeros(nA), jnp.zeros(nB), jnp.zeros(nB), jnp.array(True)
    if nA:
        S_AA = AMinv @ A.T + jnp.diag(rows.Sigma_A)
        r_A = rows.a - AMinv @ p_k
        chol = jax.scipy.linalg.cho_factor(S_AA, lower=True)
    if nB:
        assert rows.Sigma_B is not None  # rows() fills it; only position_rows() leaves it None
        S_BB = BMinv @ B.T + rows.Sigma_B
        r_B = rows.b - BMinv @ p_k
        if nA:
            S_BA = BMinv @ A.T
            # Block LDL^T (App. A): eliminating lam_A leaves a pure LCP in lam_B.
            X = _cholesky_solve_columns(chol[0], jnp.concatenate([S_BA.T, r_A[:, None]], axis=1))
            lcp = solve_lcp(S_BB - S_BA @ X[:, :nB], r_B - S_BA @ X[:, nB])
            lam_B = lcp.z
            lam_A = -(X[:, nB] + X[:, :nB] @ lam_B)
            w_B = S_BA @ lam_A + S_BB @ lam_B + r_B
        else:
            lcp = solve_lcp(S_BB, r_B)
            lam_B, w_B = lcp.z, lcp.w
        ok = lcp.ok
    elif nA:
        lam_A = -jax.scipy.linalg.cho_solve(chol, r_A)
    v_next = Minv * (A.T @ lam_A + B.T @ lam_B - p_k)  # (2.28)
    v_next = v_next.reshape(-1, 6)
    r_next = state.r + h * v_next[:, :3]  # (2.12)
    e_next = jax.vmap(quat.boxplus)(state.e, h * v_next[:, 3:])  # (2.13), (2.16)
    return State(r_next, e_next, v_next[:, :3], v_next[:, 3:]), StepInfo(lam_A, lam_B, w_B, ok)


@dataclass
class Trajectory:
    """A simulated trajectory.

    t: (n+1,) times [s]; states: :class:`State` with a leading axis n+1;
    observations: (n+1, n_obs) h(x_k); controls: (n, n_controls) u_k;
    info: :class:`StepInfo` with a leading axis n (step k -> k+1);
    wall_s: wall time of the stepping [s]; compile_s: of which JIT compile [s].
    """

    model: RigidModel
    t: np.ndarray
    states: State
    observations: np.ndarray
    controls: np.ndarray
    info: StepInfo
    wall_s: float
    compile_s: float

    def state(self, k: int) -> State:
        """The state at step k."""
        return State(*(np.asarray(x[k]) for x in self.states))

    def to_dataframe(self) -> pd.DataFrame:
        """pandas DataFrame: ``t``, the observations (unwrapped hinge angles), the controls (u_k held on [t_k, t_k+1))."""
        import pandas as pd

        obs = unwrap_angles(self.model, self.observations)
        frame = pd.DataFrame({"t": self.t})
        for i, name in enumerate(self.model.observations):
            frame[name] = obs[:, i]
        for i, name in enumerate(self.model.controls):
            frame[name] = np.append(self.controls[:, i], self.controls[-1, i] if len(self.controls) else 0.0)
        return frame

    def to_log(self, *, noise: float = 0.0, ppr: int | None = None, seed: int = 0, source: str = "simulation",
               resolution: float | None = None) -> Log:
        """The trajectory as a :class:`~mbfg.logs.Log`, as a rig would record it.

        Observations are the unwrapped hinge angles (multi-turn encoders) plus
        Gaussian noise of standard deviation ``noise`` [rad or m] (generator seeded
        with ``seed``), then quantized to ``ppr`` counts per revolution if given (every
        column), and the slider displacements to a linear encoder of ``resolution``
        metres per count if given; the last control is held on the final row.

        Raises:
            ModelError: a negative or non-finite ``noise``, a ``ppr`` that is not a whole number >= 1, a
                ``resolution`` that is not a positive number; the message names the argument.
        """
        if isinstance(noise, bool) or not isinstance(noise, (int, float, np.integer, np.floating)) \
                or not (np.isfinite(noise) and noise >= 0):
            raise ModelError(f"noise: expected a standard deviation >= 0 [rad or m], got {noise!r}")
        if ppr is not None and (isinstance(ppr, bool) or not isinstance(ppr, (int, np.integer)) or ppr < 1):
            raise ModelError(f"ppr: expected a whole number of counts per revolution >= 1 (or None), got {ppr!r}")
        if resolution is not None and (isinstance(resolution, bool) or not isinstance(resolution, (int, float, np.floating))
                                       or not (np.isfinite(resolution) and resolution > 0)):
            raise ModelError(f"resolution: expected metres per count > 0 (or None), got {resolution!r}")
        y = unwrap_angles(self.model, self.observations)
        if noise:
            y = add_noise(y, noise, np.random.default_rng(seed))
        if ppr is not None:
            y = quantize(y, ppr)
        if resolution is not None:
            sliders = {j.name for j in self.model.axial} - {j.name for j in self.model.hinges}
            columns = [i for i, name in enumerate(self.model.observations) if name in sliders]
            y[:, columns] = quantize_linear(y[:, columns], resolution)
        n_u = len(self.model.controls)
        u = np.vstack([self.controls, self.controls[-1:]]) if len(self.controls) else np.zeros((len(self.t), n_u))
        return Log(np.asarray(self.t, dtype=float), y, u, self.model.observations, self.model.controls, source)

    def plot(self, path: str | os.PathLike[str] | None = None) -> Figure:
        """A figure of the trajectory (:func:`mbfg.plots.trajectory_figure`): one panel per observation
        ((n+1,) over ``t`` [s]; hinge angles unwrapped as in :meth:`to_dataframe` [rad], CoM coordinates [m]),
        then one per control (u_k held on [t_k, t_k+1)).

        Returns the matplotlib Figure; also written to ``path`` if given (format from the extension).
        Needs matplotlib (``pip install 'mbfg[plot]'``; else :class:`~mbfg.errors.MbfgError`).
        """
        return plots.trajectory_figure(self, path)


#: The compiled chunks by (structure fingerprint, chunk shape, parameters' tree), the most recently used.
_COMPILED: BoundedCache[tuple, Any] = BoundedCache(32)


def _seconds(name: str, value: Any) -> float:
    """``value`` as a finite float; ModelError naming the argument ``name`` otherwise."""
    number = None
    if isinstance(value, (bool, np.bool_)):
        number = None  # True is an int to Python, never a time
    elif isinstance(value, (int, float, np.integer, np.floating)):
        number = float(value)
    elif getattr(value, "shape", None) == () and np.asarray(value).dtype.kind in "iuf":  # a 0-d NumPy/JAX array
        number = float(np.asarray(value))
    if number is None or not np.isfinite(number):
        raise ModelError(f"{name}: expected a finite number of seconds, got {value!r}")
    return number


def _first_joint(model: RigidModel) -> str:
    joints = [j.name for j in model.axial]
    return joints[0] if joints else "joint"


def _check_state_shape(model: RigidModel, state: State) -> None:
    """ModelError naming the field of ``initial`` whose shape is not (bodies, 3) or (bodies, 4) for ``e``."""
    for name, width in (("r", 3), ("e", 4), ("v", 3), ("w", 3)):
        shape = np.shape(getattr(state, name))
        if shape != (model.nb, width):
            raise ModelError(f"initial: field {name} has shape {shape}; {model.name} has {model.nb} "
                             f"{'body' if model.nb == 1 else 'bodies'}, so expected ({model.nb}, {width})")


def compiled_scan(model: RigidModel, x: State, controls: Array, p: Mapping[str, Any], h: Array):
    """The steps of one chunk, compiled ahead of time once per model and chunk shape.

    The compiled function takes the number of steps to run (at most the chunk's length) as an argument: the
    last chunk of a simulation runs only its own steps (a loop of that many trips writing into the chunk's
    output arrays), not the padding, whatever the duration. Returns (compiled function, compile time [s];
    0 when it was cached).
    """
    # The parameters are an argument: another instance of the same structure (with_parameters) runs this program.
    key = (structure_fingerprint(model), controls.shape, jax.tree_util.tree_structure(p))
    if key in _COMPILED:
        return _COMPILED[key][1], 0.0

    def run(state: State, controls: jnp.ndarray, p: Mapping[str, Any], h: jnp.ndarray, count: jnp.ndarray
            ) -> tuple[jnp.ndarray, ...]:
        def one(x: State, u: jnp.ndarray) -> tuple[State, jnp.ndarray, StepInfo]:
            x_next, info = step(model, x, u, p, h)
            return x_next, model.observe(x_next, p), info

        # Output arrays of the chunk's length; steps from ``count`` on leave their zeros (dropped by the caller).
        shapes = jax.eval_shape(one, state, controls[0])
        buffers = jax.tree_util.tree_map(lambda s: jnp.zeros((controls.shape[0], *s.shape), s.dtype), shapes)

        def body(k: jnp.ndarray, carry: tuple) -> tuple:
            x, out = carry
            result = one(x, controls[k])
            out = jax.tree_util.tree_map(lambda buffer, value: jax.lax.dynamic_update_index_in_dim(buffer, value, k, 0),
                                         out, result)
            return result[0], out

        last, (xs, obs, info) = jax.lax.fori_loop(0, count, body, (state, buffers))
        return (*last, *xs, obs, *info)  # plain arrays: a traced program kept on disk returns no NamedTuples

    def describe(*args: Any) -> str | None:
        # The loop is named by mbfg's source and the model it closes over: a new process loads its
        # traced program from disk instead of tracing the step again (about a second).
        identity = closure_fingerprint(run)
        return None if identity is None else f"spook chunk; {identity}"

    start = time.perf_counter()
    flat = PersistentJit(run, describe).compile(x, controls, p, h, jnp.asarray(controls.shape[0], dtype=jnp.int32))

    def compiled(state: State, controls: jnp.ndarray, p: Mapping[str, Any], h: jnp.ndarray, count: int | None = None):
        """(x_last, (states, observations, StepInfo)) of the first ``count`` steps (default: all) from ``state``
        with ``controls`` (the outputs have the chunk's length; entries from ``count`` on are zeros)."""
        count = controls.shape[0] if count is None else count
        out = flat(state, controls, p, h, jnp.asarray(count, dtype=jnp.int32))
        return State(*out[:4]), (State(*out[4:8]), out[8], StepInfo(*out[9:]))

    _COMPILED[key] = (model, compiled)
    return compiled, time.perf_counter() - start


def simulate(
    model: RigidModel,
    duration: float,
    h: float,
    *,
    initial: State | None = None,
    controls: np.ndarray | None = None,
    parameters: Mapping[str, Any] | None = None,
    quiet: bool = True,
    chunk: int = 1000,
) -> Trajectory:
    """Simulate ``model`` with Spook for ``duration`` seconds at time-step ``h``.

    Args:
        model: the model.
        duration: simulated time [s]; n = round(duration / h) steps.
        h: time-step [s].
        initial: x_0 (default ``model.initial_state()``: all joint angles zero, at rest).
        controls: (n, n_controls) u_k, held constant over [t_k, t_k+1); default zeros.
        parameters: parameter values by name, replacing the model's for the names given (the others keep
            the model's values): ``{"J": 0.002}``.
        quiet: no progress records (:mod:`mbfg.progress`).
        chunk: steps per compiled chunk (progress is reported between chunks). A simulation of any duration
            runs chunks of this length (the last one padded, its extra steps not run), so it reuses the program
            compiled for this model and chunk.

    Raises:
        ModelError: an argument of the wrong type or shape, a bad time-step or duration, controls that are not
            finite, an unknown parameter name or a value outside its bounds, a malformed initial state, or a
            simulation that diverges; the message names the argument.
        LimitError: more steps than :data:`mbfg.limits.MAX_STEPS`, or a trajectory beyond the memory budget.
    """
    from mbfg.limits import check_steps, simulation_bytes, steps_of

    if not isinstance(model, RigidModel):
        raise ModelError(f"model: expected a RigidModel (e.g. mbfg.pendulum() or mbfg.load_model('pendulum')), "
                         f"got {type(model).__name__}")
    h = _seconds("h", h)
    duration = _seconds("duration", duration)
    if not h > 0:
        raise ModelError(f"h: the time-step must be a positive number of seconds, got {h}")
    if not duration >= h:
        raise ModelError(f"duration: must be at least one time-step (h = {h} s), got {duration}")
    if isinstance(chunk, bool) or not isinstance(chunk, (int, np.integer)) or chunk < 1:
        raise ModelError(f"chunk: expected a whole number of steps >= 1, got {chunk!r}")
    nu = len(model.controls)
    # Before any allocation: the trajectory keeps states, observations and controls of every step.
    n_steps = steps_of(duration, h)
    check_steps(n_steps, simulation_bytes(len(model.bodies), len(model.observations), nu), "the simulation",
                "duration, h")
    n = int(round(n_steps))
    if controls is None:
        controls = np.zeros((n, nu))
    try:
        controls = np.asarray(controls, dtype=float)
    except (TypeError, ValueError):
        raise ModelError(f"controls: expected an array of numbers of shape ({n}, {nu}), got "
                         f"{type(controls).__name__} {controls!r:.80}") from None
    # One column may come as a flat (n,) array; anything else must already have the shape (no reshaping that
    # would silently reinterpret the rows).
    if nu == 1 and controls.ndim == 1:
        controls = controls[:, None]
    if nu == 0 and controls.size == 0:
        controls = np.zeros((n, 0))
    if controls.shape != (n, nu):
        raise ModelError(f"controls: expected shape ({n}, {nu}) (steps, {list(model.controls)}), got {controls.shape}")
    if not np.all(np.isfinite(controls)):
        row, col = (int(i) for i in np.argwhere(~np.isfinite(controls))[0])
        raise ModelError(f"controls: row {row} ({model.controls[col]}) is not finite ({controls[row, col]})")
    if initial is not None and not isinstance(initial, State):
        raise ModelError(f"initial: expected a State, e.g. model.initial_state({{'{_first_joint(model)}': 1.0}}), "
                         f"got {type(initial).__name__} {initial!r:.80}")
    x0 = model.initial_state() if initial is None else initial
    _check_state_shape(model, x0)
    model.check_state(x0)
    p = model.parameters.arrays_with(parameters, "parameters")  # the names given replace the model's values
    model.check_configuration(x0, p)
    # Every call runs chunks of ``chunk`` steps, the last one padded with zero controls and told how many of its
    # steps to run: one compiled program per model and chunk, whatever the duration, and no padded step run.
    chunk = int(chunk)
    n_chunks = -(-n // chunk)
    padded = np.zeros((n_chunks * chunk, nu))
    padded[:n] = controls
    progress = Progress(f"simulate {model.name}", n_chunks, quiet=quiet)
    start = time.perf_counter()
    x = State(*(jnp.asarray(a) for a in x0))
    out_states, out_obs, out_info = [], [], []
    h_arr = jnp.asarray(h, dtype=float)
    run, compile_s = compiled_scan(model, x, jnp.asarray(padded[:chunk]), p, h_arr)
    for c in range(n_chunks):
        x, (xs, obs, info) = run(x, jnp.asarray(padded[c * chunk : (c + 1) * chunk]), p, h_arr,
                                 min(chunk, n - c * chunk))
        xs = jax.tree_util.tree_map(np.asarray, xs)
        out_states.append(xs)
        out_obs.append(np.asarray(obs))
        out_info.append(jax.tree_util.tree_map(np.asarray, info))
        progress.update(c + 1, sim_s=min((c + 1) * chunk, n) * h)
    wall = time.perf_counter() - start
    states = State(*(np.concatenate([np.asarray(a)[None], *[s[i] for s in out_states]])[: n + 1]
                     for i, a in enumerate(x0)))
    obs0 = np.asarray(model.observe(State(*(jnp.asarray(a) for a in x0)), p))[None]
    observations = np.concatenate([obs0, *out_obs])[: n + 1]
    info = StepInfo(*(np.concatenate([i[k] for i in out_info])[:n] for k in range(4)))
    if not np.all(info.lcp_ok):
        bad = int(np.argmin(info.lcp_ok))
        raise ModelError(f"{model.name}: the complementarity (LCP) solve failed at step {bad} (t = {bad * h:.6g} s)")
    finite = np.isfinite(observations).all(axis=1)
    for field in states:  # a velocity can overflow while the observed angles stay finite
        finite &= np.isfinite(np.asarray(field)).reshape(len(field), -1).all(axis=1)
    if not np.all(finite):
        bad = int(np.argmin(finite))
        raise ModelError(f"{model.name}: the simulation diverged (non-finite state) at step {bad} "
                         f"(t = {bad * h:.6g} s); try a smaller h, or check the parameters and controls")
    return Trajectory(model, np.arange(n + 1) * h, states, observations, controls, info, wall, compile_s)
