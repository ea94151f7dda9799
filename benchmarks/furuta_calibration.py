"""13-parameter Furuta calibration: mbfg's bounded LM against scipy.optimize.least_squares (issue text below).

Run from anywhere::

    python benchmarks/furuta_calibration.py            # 10 s swing-up log at h = 1 ms, then h = 2 and 5 ms
    python benchmarks/furuta_calibration.py --quick    # 2 s log
    python benchmarks/furuta_calibration.py --skip-scipy

"For the 13-parameter Furuta calibration on a 10 s synthetic swing-up log at
h = 1 ms (and at the h that gives the best cross-validation), report: LM
iterations, wall time, time per iteration split into linearization and linear
solve, and peak memory; and, in the same run, the same problem solved by
scipy.optimize.least_squares (method 'trf', with the sparse Jacobian from the
same JAX residuals) as the peer a user would otherwise pick: the wall-time
ratio and the final costs."

1. Data: the built-in ``furuta()`` (dry friction in both hinges) with a small
   gravity tilt (rotation vector (0.02, -0.015, 0) rad) is simulated with Spook
   at dt from rest, hanging (alpha = 0), driven by an open-loop square wave
   u = 0.4 V sign(sin(2 pi f0 t)) at the pendulum's small-angle frequency
   f0 = sqrt(m_B g r_B / (J_Bx + m_B r_B^2)) / (2 pi) (1.70 Hz): the swing grows
   to |alpha| > 2 rad within about 1.2 s. Both angles are quantized to
   4096 counts/rev (``mbfg.logs.quantize``) and logged at every step.
   A second log (0.35 V at 0.9 f0, released at alpha = 0.3 rad) is the
   cross-validation log.
2. mbfg: ``calibrate`` of the 13 parameters (K, J_Ax, J_Ay, J_Az, J_Bx, J_By,
   b_1, b_2, mu_r1, mu_r2 and the 3-dof tilt) from a start 20 % off the truth
   (each scalar times 1 +- 0.2, random signs, seed 1; tilt identity), state
   error weight W, at most 20 LM iterations.
3. scipy: the same objective as one residual vector for
   ``least_squares(method="trf", x_scale="jac")`` with the Jacobian assembled
   into a ``scipy.sparse.csr_matrix`` from ``jax.jacfwd`` of the per-step
   residuals of ``mbfg.residuals`` (vmapped over the steps), weighted exactly
   as the GTSAM graph. Variables: per step, increments of the initial guess
   (world CoM translation, body-frame rotation vector applied on the right,
   velocity), the scalar parameters themselves (boxed by their bounds) and a
   rotation-vector increment of the tilt. The increments are relative to the
   initial guess, which is fine for a benchmark (far from it, a rotation-vector
   chart is worse than GTSAM's re-centred retraction).
4. The calibration again at h = 2 dt and 5 dt (log stride 2 and 5), and the
   cross-validation score (state estimation on the second log with the
   identified parameters fixed, cost per time-step) of each h.

Costs are the objective sum |dy|^2 + W sum |dp|^2 (plus priors) divided by the
number of time-steps, the convention of ``CalibrationResult.cost``. Peak memory
is the process's ``ru_maxrss`` (a high-water mark over the whole process, so a
later phase shows only if it goes higher). Times are wall times on a possibly
shared machine: the header and the last line print the load average. Asserts
nothing.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import sys
import time

import _record
import numpy as np
from scipy import optimize, sparse
from scipy.spatial.transform import Rotation

from mbfg import keys, lie, residuals
from mbfg import quaternion as quat
from mbfg._jax import enable_compilation_cache, jax, jnp
from mbfg.calibration import calibrate
from mbfg.calibration_options import calibration_lm
from mbfg.factors._rigid import fixed_values
from mbfg.factors.prior import tilt_yaw_prior_residual
from mbfg.lm_config import LMConfig
from mbfg.logs import Log, quantize
from mbfg.models import furuta
from mbfg.rigid import State
from mbfg.spook import simulate, unwrap_angles

FREE = ["K", "J_Ax", "J_Ay", "J_Az", "J_Bx", "J_By", "b_1", "b_2", "mu_r1", "mu_r2", "tilt"]
TILT_ROTVEC = np.array([0.02, -0.015, 0.0])
PPR = 4096
YAW_SIGMA = 1e-3  # graphs/joint.py: the tilt yaw prior
#: Priors (sigma = 100 % of the start value) for the arm inertias that the data barely excite,
#: used only when the calibration without them fails (see the README).
FALLBACK_PRIORS = ("J_Ax", "J_Ay")


def load() -> str:
    return "load average " + ", ".join(f"{x:.2f}" for x in os.getloadavg())


def max_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux: KiB


def rss_mb() -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return float(line.split()[1]) / 1024.0
    return float("nan")


# ----------------------------------------------------------------------------- data


def truth_model():
    return furuta(dry=True).with_parameters({"tilt": Rotation.from_rotvec(TILT_ROTVEC).as_matrix()})


def natural_frequency(model) -> float:
    p = model.parameters.numpy_values()
    mgr = p["m_B"] * p["g"] * p["r_B"]
    return float(np.sqrt(mgr / (p["J_Bx"] + p["m_B"] * p["r_B"] ** 2)) / (2 * np.pi))


def swing_log(model, duration: float, dt: float, volts: float, freq: float, alpha0: float, source: str):
    """A log of ``model`` driven by volts * sign(sin(2 pi freq t)) from rest at alpha0; (log, max |alpha|)."""
    n = int(round(duration / dt))
    t = np.arange(n) * dt
    u = (volts * np.sign(np.sin(2 * np.pi * freq * t)))[:, None]
    traj = simulate(model, duration, dt, initial=model.initial_state({"alpha": alpha0}), controls=u)
    obs = unwrap_angles(model, traj.observations)
    y = quantize(obs, PPR)
    log = Log(traj.t, y, np.vstack([u, u[-1:]]), model.observations, model.controls, source)
    return log, float(np.abs(obs[:, list(model.observations).index("alpha")]).max())


def start_model(truth, rng: np.random.Generator):
    scalars = [n for n in FREE if n != "tilt"]
    signs = rng.choice([-1.0, 1.0], size=len(scalars))
    values = {n: truth.parameters[n].default * (1.0 + 0.2 * s) for n, s in zip(scalars, signs)}
    return truth.with_parameters(values | {"tilt": np.eye(3)})


# ----------------------------------------------------------------------------- scipy peer


class ScipyProblem:
    """The joint problem of a built mbfg ``JointProblem`` as one residual vector for least_squares.

    x = [z_0 .. z_{n-1} (12 nb each: per body [dr world, dtheta body]; then dv (6 nb)),
         chi (the free scalars, absolute), psi (tilt rotation-vector increment, 3)].
    Rows: initial state (12 nb), impulses (n-1 blocks of 12 nb), observations (n blocks),
    the tilt yaw prior (1), parameter priors. Weights as in graphs/joint.py.
    """

    def __init__(self, problem, priors: dict[str, float]):
        self.problem = problem
        model = problem.model
        variables = problem.variables
        assert variables.tilt_free and variables.free, "the benchmark frees the scalars and the tilt"
        self.nb = nb = model.nb
        self.n = n = problem.n
        self.dz = dz = 12 * nb
        self.n_chi = n_chi = len(variables.free)
        self.n_theta = n_theta = n_chi + 3
        self.h = h = problem.h
        states = problem.states(problem.initial)
        self.r0 = np.asarray(states.r)
        self.e0 = np.asarray(states.e)
        self.vel0 = np.concatenate([np.asarray(states.v), np.asarray(states.w)], axis=2).reshape(n, 6 * nb)
        self.chi0 = problem.initial.atVector(keys.P())
        self.R0 = problem.initial.atRot3(keys.T()).matrix()
        self.fixed = {k: jnp.asarray(v) for k, v in fixed_values(model).items()}
        self.u = jnp.asarray(problem.u)
        mask = np.isfinite(problem.y)
        self.y = jnp.asarray(np.nan_to_num(problem.y))
        self.mask = jnp.asarray(mask.astype(float))
        sw = float(np.sqrt(problem.weight))
        self.prior_idx = np.array([variables.free.index(k) for k in priors], dtype=int)
        self.prior_sigma = np.array([priors[k] for k in priors], dtype=float)
        self.prior_mean = self.chi0[self.prior_idx]
        lo = np.array([model.parameters[k].lower for k in variables.free])
        hi = np.array([model.parameters[k].upper for k in variables.free])
        self.n_x = n * dz + n_theta
        self.lower = np.concatenate([np.full(n * dz, -np.inf), lo, np.full(3, -np.inf)])
        self.upper = np.concatenate([np.full(n * dz, np.inf), hi, np.full(3, np.inf)])
        self.x0 = np.concatenate([np.zeros(n * dz), self.chi0, np.zeros(3)])
        n_obs = problem.y.shape[1]

        def state(z, r0, e0, vel0):
            dq = z[: 6 * nb].reshape(nb, 6)
            e = jax.vmap(quat.boxplus)(e0, dq[:, 3:])
            vel = (vel0 + z[6 * nb :]).reshape(nb, 6)
            return State(r0 + dq[:, :3], e, vel[:, :3], vel[:, 3:])

        R0 = jnp.asarray(self.R0)

        def params(theta, fixed):
            R = lie.rot3_retract(R0, theta[n_chi:])
            return variables.parameters([theta[:n_chi], R], fixed)

        def r_init(z, theta, r0, e0, vel0, fixed):
            return sw * residuals.initial_state(model, state(z, r0, e0, vel0), params(theta, fixed), h)

        def r_imp(z0, z1, theta, r0a, e0a, v0a, r0b, e0b, v0b, u, fixed):
            x0, x1 = state(z0, r0a, e0a, v0a), state(z1, r0b, e0b, v0b)
            return sw * residuals.impulse(model, x0, x1, u, params(theta, fixed), h)

        def r_obs(z, theta, r0, e0, vel0, y, m, fixed):
            return residuals.observation(model, state(z, r0, e0, vel0), params(theta, fixed), y, m)

        def r_yaw(theta):
            return tilt_yaw_prior_residual(lie.rot3_retract(R0, theta[n_chi:]), R0) / YAW_SIGMA

        imp_axes = (0, 0, None, 0, 0, 0, 0, 0, 0, 0, None)
        obs_axes = (0, None, 0, 0, 0, 0, 0, None)

        def split(x):
            return x[: n * dz].reshape(n, dz), x[n * dz :]

        def fun(x, r0, e0, vel0, u, y, m, fixed):
            z, theta = split(x)
            parts = [
                r_init(z[0], theta, r0[0], e0[0], vel0[0], fixed),
                jax.vmap(r_imp, imp_axes)(z[:-1], z[1:], theta, r0[:-1], e0[:-1], vel0[:-1], r0[1:], e0[1:],
                                          vel0[1:], u[:-1], fixed).reshape(-1),
                jax.vmap(r_obs, obs_axes)(z, theta, r0, e0, vel0, y, m, fixed).reshape(-1),
                r_yaw(theta),
            ]
            return jnp.concatenate(parts)

        def jac(x, r0, e0, vel0, u, y, m, fixed):
            z, theta = split(x)
            J0 = jax.jacfwd(r_init, argnums=(0, 1))(z[0], theta, r0[0], e0[0], vel0[0], fixed)
            Ji = jax.vmap(jax.jacfwd(r_imp, argnums=(0, 1, 2)), imp_axes)(
                z[:-1], z[1:], theta, r0[:-1], e0[:-1], vel0[:-1], r0[1:], e0[1:], vel0[1:], u[:-1], fixed)
            Jo = jax.vmap(jax.jacfwd(r_obs, argnums=(0, 1)), obs_axes)(z, theta, r0, e0, vel0, y, m, fixed)
            Jy = jax.jacfwd(r_yaw)(theta)[:, n_chi:]
            return jnp.concatenate([
                jnp.concatenate(J0, axis=1).reshape(-1),
                jnp.concatenate(Ji, axis=2).reshape(-1),
                jnp.concatenate(Jo, axis=2).reshape(-1),
                Jy.reshape(-1),
            ])

        self._args = (jnp.asarray(self.r0), jnp.asarray(self.e0), jnp.asarray(self.vel0), self.u, self.y, self.mask,
                      self.fixed)
        x0 = jnp.asarray(self.x0)
        t0 = time.perf_counter()
        self._fun = jax.jit(fun).lower(x0, *self._args).compile()
        self._jac = jax.jit(jac).lower(x0, *self._args).compile()
        self.compile_s = time.perf_counter() - t0

        # CSR structure (every row of a block has the same columns).
        theta_cols = n * dz + np.arange(n_theta)
        rows_cols: list[np.ndarray] = []  # one (rows, cols-per-row) array per block
        cols_init = np.concatenate([np.arange(dz), theta_cols])
        rows_cols.append(np.broadcast_to(cols_init, (dz, cols_init.size)))
        k = np.arange(n - 1)[:, None]
        cols_imp = np.concatenate([k * dz + np.arange(dz), (k + 1) * dz + np.arange(dz),
                                   np.broadcast_to(theta_cols, (n - 1, n_theta))], axis=1)
        rows_cols.append(np.repeat(cols_imp, dz, axis=0))
        k = np.arange(n)[:, None]
        cols_obs = np.concatenate([k * dz + np.arange(dz), np.broadcast_to(theta_cols, (n, n_theta))], axis=1)
        rows_cols.append(np.repeat(cols_obs, n_obs, axis=0))
        self.n_smooth_rows = dz * n + n_obs * n + 1
        indices = [c.reshape(-1) for c in rows_cols] + [theta_cols[n_chi:]]
        counts = [np.full(c.shape[0], c.shape[1]) for c in rows_cols] + [np.array([3])]
        for i in self.prior_idx:
            indices.append(np.array([n * dz + i]))
            counts.append(np.array([1]))
        self.indices = np.concatenate(indices).astype(np.int32 if self.n_x < 2**31 else np.int64)
        self.indptr = np.concatenate([[0], np.cumsum(np.concatenate(counts))])
        self.n_rows = len(self.indptr) - 1
        self.nfev = self.njev = 0
        self.trace: list[tuple[float, float]] = []  # (wall s, cost) per residual evaluation
        self.t_start = time.perf_counter()

    def residual(self, x: np.ndarray) -> np.ndarray:
        r = np.asarray(self._fun(jnp.asarray(x), *self._args))
        if self.prior_idx.size:
            r = np.concatenate([r, (x[self.n * self.dz + self.prior_idx] - self.prior_mean) / self.prior_sigma])
        self.nfev += 1
        self.trace.append((time.perf_counter() - self.t_start, float(r @ r) / self.n))
        print(f"[scipy] evaluation {self.nfev}  cost={self.trace[-1][1]:.6g}  t={self.trace[-1][0]:.1f}s",
              file=sys.stderr, flush=True)
        return r

    def jacobian(self, x: np.ndarray) -> sparse.csr_matrix:
        data = np.asarray(self._jac(jnp.asarray(x), *self._args))
        if self.prior_idx.size:
            data = np.concatenate([data, 1.0 / self.prior_sigma])
        self.njev += 1
        return sparse.csr_matrix((data, self.indices, self.indptr), shape=(self.n_rows, self.n_x))

    def increments_of(self, values) -> np.ndarray:
        """x of a gtsam.Values of the mbfg problem (to evaluate this objective at mbfg's solution)."""
        states = self.problem.states(values)
        r = np.asarray(states.r) - self.r0
        dtheta = np.asarray(jax.jit(jax.vmap(jax.vmap(quat.boxminus)))(jnp.asarray(states.e), jnp.asarray(self.e0)))
        vel = np.concatenate([np.asarray(states.v), np.asarray(states.w)], axis=2).reshape(self.n, -1) - self.vel0
        z = np.concatenate([np.concatenate([r, dtheta], axis=2).reshape(self.n, -1), vel], axis=1)
        chi = values.atVector(keys.P())
        psi = Rotation.from_matrix(self.R0.T @ values.atRot3(keys.T()).matrix()).as_rotvec()
        return np.concatenate([z.reshape(-1), chi, psi])

    def parameters_of(self, x: np.ndarray) -> dict[str, float]:
        chi = x[self.n * self.dz : self.n * self.dz + self.n_chi]
        out = dict(zip(self.problem.variables.free, (float(c) for c in chi)))
        R = self.R0 @ Rotation.from_rotvec(x[-3:]).as_matrix()
        for ax, v in zip("xyz", Rotation.from_matrix(R).as_rotvec()):
            out[f"tilt[{ax}]"] = float(v)
        return out


# ----------------------------------------------------------------------------- reporting


def truth_values(truth) -> dict[str, float]:
    p = truth.parameters.numpy_values()
    out = {n: float(p[n]) for n in FREE if n != "tilt"}
    out.update({f"tilt[{ax}]": float(v) for ax, v in zip("xyz", Rotation.from_matrix(p["tilt"]).as_rotvec())})
    return out


def lm_summary(result) -> dict[str, float]:
    hist = result.history[1:]
    lin = np.array([h["linearize_s"] for h in hist])
    sol = np.array([h["solve_s"] for h in hist])
    return dict(
        iterations=result.iterations, converged=result.converged,
        lm_wall=result.history[-1]["wall_s"] if hist else 0.0,
        lin_first=float(lin[0]) if lin.size else float("nan"),
        lin_med=float(np.median(lin[1:])) if lin.size > 1 else float("nan"),
        solve_first=float(sol[0]) if sol.size else float("nan"),
        solve_med=float(np.median(sol[1:])) if sol.size > 1 else float("nan"),
        lin_total=float(lin.sum()), solve_total=float(sol.sum()),
    )


def start_priors(start, names) -> dict[str, float]:
    """Priors at the start values of ``names``, sigma = 100 % of each (rough CAD knowledge)."""
    return {k: abs(start.parameters[k].default) for k in names}


def run_calibration(start, log, h: float, weight: float, max_iterations: int, priors: dict[str, float] | None,
                    damping_update: str = "tenfold"):
    """calibrate() of the 13 parameters; (result, wall s, ru_maxrss before, after [MB])."""
    before = max_rss_mb()
    t0 = time.perf_counter()
    result = calibrate(start, log, free=FREE, h=h, weight=weight, priors=priors,
                       lm=calibration_lm(start, max_iterations=max_iterations,
                                         damping_update=damping_update))  # progress: mbfg.progress records
    return result, time.perf_counter() - t0, before, max_rss_mb()


def diagnose_step(start, log, dt: float, weight: float, iterations: int, priors: dict[str, float] | None,
                  truth_p: dict[str, float]) -> None:
    """Why a Levenberg-Marquardt step is rejected: the undamped step at the iterate after ``iterations``.

    Prints the step's parameter part against the truth, the cost along ``t`` times the step
    beside what the linearization predicts, and the largest state step per body and axis
    (rotation [rad], body frame). Diagnostic only; nothing else of the benchmark runs.
    """
    from mbfg.graphs.joint import build_joint_problem
    from mbfg.lm_systems import OrdinarySystem
    from mbfg.solvers import bounded_levenberg_marquardt

    problem = build_joint_problem(start, log, h=dt, free=FREE, weight=weight, priors=priors)
    lm = bounded_levenberg_marquardt(problem.graph, problem.initial, problem.bounds, label="diagnose",
                                     config=LMConfig(max_iterations=iterations, relative_tol=0.0))
    values, graph, n = lm.values, problem.graph, problem.n
    system = OrdinarySystem(graph, values, problem.bounds)  # the LM's own step, box solved exactly
    linear, diag = system.linearize(values)
    delta, _ = system.step(linear, diag, 1e-12, values)  # undamped but for round-off
    chi = values.atVector(keys.P())
    print(f"\n## the undamped step after {iterations} LM iterations (cost {2 * graph.error(values) / n:.6g} per step)")
    print(f"{'parameter':<10} {'truth':>11} {'now':>11} {'now + step':>11}")
    for i, name in enumerate(problem.variables.free):
        print(f"{name:<10} {truth_p[name]:>11.4g} {chi[i]:>11.4g} {chi[i] + delta.at(keys.P())[i]:>11.4g}")
    for t in (0.01, 0.1, 1.0):
        step = delta.scale(t)
        trial = values.retract(step)
        for key, (lo, hi) in problem.bounds.items():
            trial.update(key, np.clip(trial.atVector(key), lo, hi))
        print(f"t = {t:<5g} cost {2 * graph.error(trial) / n:.4g} per step; the linearization predicts "
              f"{2 * linear.error(step) / n:.4g}")
    for i, body in enumerate(start.bodies):
        rot = np.array([delta.at(keys.X(k, i))[:3] for k in range(n)])  # Pose3 tangent: rotation first
        k_max = np.abs(rot).argmax(axis=0)
        print(f"body {body.name}: largest rotation step about its x, y, z axes "
              + ", ".join(f"{abs(rot[k, a]):.3g} rad (state {k})" for a, k in enumerate(k_max)))


def main() -> None:
    # As a program would: the compiled programs on disk (MBFG_CACHE_DIR, else the user's cache folder), so a
    # second run of the same command is the warm one (benchmarks/furuta_calibration_peer.py).
    enable_compilation_cache()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=10.0, help="log length [s] (default 10)")
    parser.add_argument("--dt", type=float, default=1e-3, help="log period = finest h [s] (default 1e-3)")
    parser.add_argument("--quick", action="store_true", help="2 s logs (smoke test)")
    parser.add_argument("--skip-scipy", action="store_true", help="no scipy.optimize.least_squares peer")
    parser.add_argument("--weight", type=float, default=1e6, help="state error weight W (default 1e6)")
    parser.add_argument("--max-iterations", type=int, default=20, help="LM iterations at most (default 20)")
    parser.add_argument("--damping-update", choices=("tenfold", "nielsen"), default="tenfold",
                        help="mbfg's LM damping rule (default tenfold; see mbfg.solvers)")
    parser.add_argument("--max-nfev", type=int, default=50, help="least_squares max_nfev (default 50)")
    parser.add_argument("--lsmr-maxiter", type=int, default=500,
                        help="LSMR iterations per trf step (default 500; 0: scipy's default min(rows, columns))")
    parser.add_argument("--strides", default="2,5", help="coarser h as multiples of dt (default 2,5; '' for none)")
    parser.add_argument("--diagnose-step", type=int, default=0, metavar="K",
                        help="only print why the undamped LM step after K iterations is rejected (default: off)")
    parser.add_argument("--priors", default="",
                        help="parameters to give a prior at their start value, sigma = 100 %% of it, as a user "
                             "with rough CAD values would (e.g. J_Ax,J_Ay; default none)")
    args = parser.parse_args()
    names = [k.strip() for k in args.priors.split(",") if k.strip()]
    unknown = [k for k in names if k not in FREE or k == "tilt"]
    if unknown:
        parser.error(f"--priors {args.priors}: not a free scalar parameter: {', '.join(unknown)}")
    duration = 2.0 if args.quick else args.duration
    dt, W = args.dt, args.weight
    strides = [int(s) for s in args.strides.split(",") if s.strip()]
    print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} cores, {load()}; "
          f"jax {jax.__version__}; XLA_FLAGS={os.environ.get('XLA_FLAGS', '')!r}")
    print(f"# furuta (dry friction), {duration:g} s logs at dt = {dt:g} s, W = {W:g}, 13 free parameters, "
          f"at most {args.max_iterations} LM iterations, damping update {args.damping_update}")

    truth = truth_model()
    f0 = natural_frequency(truth)
    log, amax = swing_log(truth, duration, dt, 0.4, f0, 0.0, "swing-up")
    val, vmax = swing_log(truth, duration, dt, 0.35, 0.9 * f0, 0.3, "validation")
    print(f"# logs: swing-up 0.4 V at f0 = {f0:.3f} Hz from alpha = 0, max |alpha| {amax:.2f} rad; "
          f"validation 0.35 V at {0.9 * f0:.3f} Hz from alpha = 0.3, max |alpha| {vmax:.2f} rad; "
          f"{PPR} counts/rev")
    start = start_model(truth, np.random.default_rng(1))
    truth_p = truth_values(truth)
    start_p = truth_values(start)

    # ---- 1. mbfg at h = dt
    rss0 = max_rss_mb()
    priors: dict[str, float] | None = start_priors(start, names) or None
    if priors:
        print("# priors at the start value, sigma = 100 %: " + ", ".join(f"{k} {v:.3g}" for k, v in priors.items()))
    if args.diagnose_step > 0:
        diagnose_step(start, log, dt, W, args.diagnose_step, priors, truth_p)
        return
    try:
        result, wall, _, rss1 = run_calibration(start, log, dt, W, args.max_iterations, priors,
                                                   args.damping_update)
    except RuntimeError as exc:
        first = str(exc).strip().splitlines()
        print(f"\n!! calibrate (13 free, priors {priors}) raised RuntimeError: {' '.join(first[:2])}")
        priors = start_priors(start, FALLBACK_PRIORS)
        print("!! retrying with priors at the start value, sigma = 100 %: "
              + ", ".join(f"{k} {v:.3g}" for k, v in priors.items()))
        result, wall, _, rss1 = run_calibration(start, log, dt, W, args.max_iterations, priors,
                                                   args.damping_update)
    s = lm_summary(result)
    print(f"\n## mbfg calibrate at h = {dt:g} s: {result.problem.n} steps, "
          f"{result.problem.graph.size()} factors")
    print(f"{'iter':>4} {'cost':>12} {'lambda':>9} {'wall s':>8} {'linearize s':>12} {'solve s':>8}")
    for h in result.history:
        print(f"{h['iteration']:>4d} {2 * h['cost'] / result.problem.n:>12.6g} {h['lam']:>9.1e} {h['wall_s']:>8.1f} "
              f"{h['linearize_s']:>12.2f} {h['solve_s']:>8.2f}")
    print(f"LM: {s['iterations']} iterations ({'converged' if s['converged'] else 'NOT converged'}), "
          f"LM wall {s['lm_wall']:.1f} s; calibrate() wall {wall:.1f} s (build + LM + covariance); "
          f"per iteration: linearize {s['lin_first']:.2f} s first (JIT compile), median {s['lin_med']:.2f} s after; "
          f"solve {s['solve_first']:.2f} s first, median {s['solve_med']:.2f} s after")
    print(f"memory: ru_maxrss {rss0:.0f} MB before, {rss1:.0f} MB after (+{rss1 - rss0:.0f} MB); "
          f"final cost {result.cost:.6g} per step (observation {result.cost_observation:.4g}, "
          f"impulse {result.cost_impulse:.4g})")
    est = {p.name: p for p in result.parameters}
    figures: dict[str, list[dict]] = {"calibration": [{
        "h_s": dt, "steps": result.problem.n, "iterations": s["iterations"], "converged": s["converged"],
        "wall_s": s["lm_wall"], "calibrate_wall_s": wall, "linearize_first_s": s["lin_first"],
        "linearize_median_s": s["lin_med"], "solve_first_s": s["solve_first"], "solve_median_s": s["solve_med"],
        "final_cost": result.cost, "maxrss_mb": rss1}]}
    figures["parameters"] = [{"parameter": name, "truth": tv, "start": start_p[name], "mbfg": est[name].value,
                              "std": est[name].std} for name, tv in truth_p.items()]
    peer = None
    print(f"\n{'parameter':<10} {'truth':>11} {'start':>11} {'mbfg':>11} {'std':>10} {'(mbfg-truth)/std':>17}")
    for name, tv in truth_p.items():
        p = est[name]
        print(f"{name:<10} {tv:>11.4g} {start_p[name]:>11.4g} {p.value:>11.4g} {p.std:>10.3g} "
              f"{(p.value - tv) / p.std if p.std > 0 else float('nan'):>17.2f}")

    # ---- 2. scipy peer on the same problem
    if not args.skip_scipy:
        tr_options = {"maxiter": args.lsmr_maxiter} if args.lsmr_maxiter > 0 else {}
        print(f"\n## scipy.optimize.least_squares(method='trf', x_scale='jac', max_nfev={args.max_nfev}, "
              f"ftol=xtol=gtol=1e-8, tr_options={tr_options}), sparse Jacobian from jax.jacfwd")
        rss_a = max_rss_mb()
        t0 = time.perf_counter()
        sp = ScipyProblem(result.problem, priors or {})
        setup = time.perf_counter() - t0
        # The objective checked against GTSAM's at the start and at mbfg's solution.
        r_start = sp.residual(sp.x0)
        r_mbfg = sp.residual(sp.increments_of(result.solution))
        print(f"setup {setup:.1f} s (JIT compile {sp.compile_s:.1f} s); {sp.n_rows} residuals, {sp.n_x} variables; "
              f"cost check: start {r_start @ r_start / sp.n:.6g} (GTSAM "
              f"{2 * result.problem.graph.error(result.problem.initial) / sp.n:.6g}), at mbfg's solution "
              f"{r_mbfg @ r_mbfg / sp.n:.6g} (GTSAM {result.cost:.6g})")
        sp.nfev = sp.njev = 0
        sp.trace.clear()
        sp.t_start = t0 = time.perf_counter()
        ls = optimize.least_squares(sp.residual, sp.x0, jac=sp.jacobian, bounds=(sp.lower, sp.upper), method="trf",
                                    x_scale="jac", max_nfev=args.max_nfev, ftol=1e-8, xtol=1e-8, gtol=1e-8,
                                    tr_options=tr_options)
        sp_wall = time.perf_counter() - t0
        rss_b = max_rss_mb()
        sp_cost = 2 * ls.cost / sp.n
        trace = sp.trace
        shown = trace if len(trace) <= 12 else trace[:6] + trace[-6:]
        print("evaluations (wall s, cost): " + ", ".join(f"({w:.0f}, {c:.4g})" for w, c in shown))
        print(f"scipy: status {ls.status} ({ls.message}), nfev {ls.nfev}, njev {ls.njev}, wall {sp_wall:.1f} s "
              f"(+ {sp.compile_s:.1f} s compile), final cost {sp_cost:.6g} per step; "
              f"ru_maxrss {rss_a:.0f} -> {rss_b:.0f} MB")
        sp_p = sp.parameters_of(ls.x)
        print(f"\n{'parameter':<10} {'truth':>11} {'mbfg':>11} {'scipy':>11} {'(scipy-truth)/std_mbfg':>23}")
        for name, tv in truth_p.items():
            p = est[name]
            print(f"{name:<10} {tv:>11.4g} {p.value:>11.4g} {sp_p[name]:>11.4g} "
                  f"{(sp_p[name] - tv) / p.std if p.std > 0 else float('nan'):>23.2f}")
        for row in figures["parameters"]:
            row["scipy"] = sp_p[row["parameter"]]
        peer = {"name": "scipy.optimize.least_squares (trf) on the same problem",
                "figures": [{"case": "calibration", "wall_s": sp_wall, "compile_s": sp.compile_s, "nfev": ls.nfev,
                             "njev": ls.njev, "status": ls.status, "final_cost": sp_cost, "maxrss_mb": rss_b}]}
        print(f"\nwall(scipy) / wall(mbfg LM) = {sp_wall:.1f} / {s['lm_wall']:.1f} = {sp_wall / s['lm_wall']:.2f} "
              f"(with scipy's compile: {(sp_wall + sp.compile_s) / s['lm_wall']:.2f}); "
              f"final cost mbfg {result.cost:.6g}, scipy {sp_cost:.6g}")
        del sp

    # ---- 3. coarser h and cross-validation
    print("\n## h and cross-validation on the validation log")
    results = {1: (result, s)}
    for stride in strides:
        r, _, _, _ = run_calibration(start, log, stride * dt, W, args.max_iterations, priors,
                                       args.damping_update)
        results[stride] = (r, lm_summary(r))
    print(f"{'h ms':>5} {'steps':>6} {'iter':>4} {'conv':>4} {'LM wall s':>9} {'lin s/it':>9} {'solve s/it':>10} "
          f"{'cost':>11} {'max|err|/std':>12} {'CV score':>11} {'CV wall s':>9}")
    scores = {}
    for stride, (r, summ) in results.items():
        t0 = time.perf_counter()
        scores[stride] = r.cross_validate(val)
        cv_wall = time.perf_counter() - t0
        errs = [abs(p.value - truth_p[p.name]) / p.std for p in r.parameters if p.std > 0]
        conv = "yes" if summ["converged"] else "no"
        print(f"{stride * dt * 1e3:>5.0f} {r.problem.n:>6d} {summ['iterations']:>4d} {conv:>4} {summ['lm_wall']:>9.1f} "
              f"{summ['lin_med']:>9.2f} {summ['solve_med']:>10.2f} {r.cost:>11.5g} "
              f"{max(errs) if errs else float('nan'):>12.2f} {scores[stride]:>11.5g} {cv_wall:>9.1f}")
        figures.setdefault("h and cross-validation", []).append({
            "h_s": stride * dt, "steps": r.problem.n, "iterations": summ["iterations"], "converged": summ["converged"],
            "wall_s": summ["lm_wall"], "linearize_median_s": summ["lin_med"], "solve_median_s": summ["solve_med"],
            "final_cost": r.cost, "max_error_per_std": max(errs) if errs else None, "crossval_score": scores[stride],
            "crossval_wall_s": cv_wall})
    best = min(scores, key=scores.get)
    print(f"best cross-validation: h = {best * dt * 1e3:g} ms")
    print(f"\n# peak ru_maxrss {max_rss_mb():.0f} MB (now {rss_mb():.0f} MB); {load()}")
    _record.write(__file__, figures, peer=peer)


if __name__ == "__main__":
    main()
