"""The prismatic drive (slider with viscous, Coulomb and load-dependent dry friction, motor) against closed forms.

References: the closed-form motion of a mass under a constant force with viscous and Coulomb
friction (and with load-dependent friction mu m g), a piecewise (stick / slip) solution of
``m_e x'' = F(t) - F_v x' - F_c sign(x') + F_0`` integrated by scipy with events, and a
calibration from a noisy, quantized synthetic log of the built-in ``linear-stage``.

Spook is first order in h: the errors must halve with h. Every simulation of a model uses the
same chunk of steps (``CHUNK``) so that each model's scan is compiled once for the whole file.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.integrate import solve_ivp
from scipy.optimize import brentq

from mbfg.calibration import calibrate
from mbfg.models import AXIS_FRAMES, linear_stage
from mbfg.parameters import Parameter, ParameterSet
from mbfg.rigid import WORLD, AppliedForce, Body, Frame, Prismatic, RigidModel
from mbfg.spook import simulate

#: Steps per compiled scan: divides every step count below (500 ... 3000), so each model compiles once.
CHUNK = 500
#: The stage of the issue: M = 5 kg, F_v = 20 N s/m, F_c = 8 N, F_0 = 1.5 N (K_F = 150 N/A, J_r = 1.18 kg).
TRUTH = {"M": 5.0, "F_v": 20.0, "F_c": 8.0, "F_0": 1.5}
#: |v| below this [m/s] is "stuck": the creep while sticking is ~1e-8 m/s (friction_compliance 1e-6 times
#: an impulse of a few N times h), while one step after breakaway the speed is already ~1e-5 m/s.
STUCK_SPEED = 1e-6


@pytest.fixture(scope="module")
def stage() -> RigidModel:
    """One linear-stage instance for the file (simulate compiles once per model and chunk)."""
    return linear_stage()


@pytest.fixture(scope="module")
def stage_parameters(stage: RigidModel) -> dict[str, float]:
    return stage.parameters.numpy_values() | TRUTH


def _run(model: RigidModel, duration: float, h: float, current=None, parameters=None):
    n = int(round(duration / h))
    controls = None if current is None else np.asarray(current, dtype=float).reshape(n, 1)
    return simulate(model, duration, h, controls=controls, parameters=parameters, chunk=CHUNK)


def _axis_speed(traj) -> np.ndarray:
    return np.asarray(traj.states.v)[:, 0, 0]


def _runs(mask: np.ndarray, t: np.ndarray) -> list[tuple[float, float]]:
    """(first, last) time of each run of True in ``mask``."""
    edges = np.diff(np.r_[0, mask.astype(int), 0])
    starts, ends = np.nonzero(edges == 1)[0], np.nonzero(edges == -1)[0] - 1
    return [(float(t[a]), float(t[b])) for a, b in zip(starts, ends)]


# ----------------------------------------------------------------- constant force (linear-stage)


def test_constant_force_above_breakaway_follows_closed_form_first_order_in_h(stage, stage_parameters) -> None:
    """From rest, F = K_F i with F + F_0 > F_c: m_e v' = F - F_c + F_0 - F_v v, m_e = M + J_r, so
    v(t) = v_inf (1 - exp(-t / T)), v_inf = (F - F_c + F_0) / F_v, T = m_e / F_v, and
    x(t) = v_inf (t - T (1 - exp(-t / T))).

    Spook is backward Euler in v (the drag row is implicit) and x_{k+1} = x_k + h v_{k+1}; to first order
    in h its error is x_k - x(t_k) = (h v_inf / 2) (t / T) exp(-t / T), largest at t = T: h v_inf / (2 e).
    """
    p = stage_parameters
    current = 0.2  # [A]: F = 30 N
    m_e, F = p["M"] + p["J_r"], p["K_F"] * current
    v_inf, T = (F - p["F_c"] + p["F_0"]) / p["F_v"], m_e / p["F_v"]
    errors = []
    for h in (2e-3, 1e-3, 5e-4):
        traj = _run(stage, 1.0, h, np.full(int(round(1.0 / h)), current), p)
        t, x = traj.t, traj.observations[:, 0]
        x_cf = v_inf * (t - T * (1.0 - np.exp(-t / T)))
        err = float(np.abs(x - x_cf).max())
        bound = h * v_inf / (2.0 * np.e)  # the leading-order error above
        assert err < 1.05 * bound, f"h = {h}: max |x - x_cf| = {err:.3e} m above 1.05 h v_inf / (2 e) = {bound:.3e} m"
        assert err > 0.9 * bound, f"h = {h}: max |x - x_cf| = {err:.3e} m: not the first-order error {bound:.3e} m"
        errors.append(err)
    ratios = [errors[i] / errors[i + 1] for i in range(2)]
    print(f"\nconstant force: max |x - x_cf| = {', '.join(f'{e:.3e}' for e in errors)} m, ratios {ratios}")
    for r in ratios:
        assert 1.8 <= r <= 2.2, f"error ratio {r:.3f} for halved h: not first order ({errors})"


@pytest.mark.parametrize("current", [0.03, -0.06])
def test_constant_force_below_breakaway_stays_stuck(stage, stage_parameters, current: float) -> None:
    """|K_F i + F_0| < F_c (6 N and -7.5 N against 8 N): the Coulomb force balances it, x'' = 0 and x stays 0,
    up to the creep of friction_compliance (about 1e-8 m over 1 s here)."""
    p = stage_parameters
    assert abs(p["K_F"] * current + p["F_0"]) < p["F_c"]
    traj = _run(stage, 1.0, 1e-3, np.full(1000, current), p)
    x, v = traj.observations[:, 0], _axis_speed(traj)
    print(f"\nbelow breakaway, F + F_0 = {p['K_F'] * current + p['F_0']:+.2f} N: max |x| = {np.abs(x).max():.3e} m")
    assert np.abs(x).max() < 1e-6
    assert np.abs(v).max() < STUCK_SPEED


# ----------------------------------------------------------------- sinusoidal force, stick-slip


def _stick_slip_reference(force, m_e: float, F_v: float, F_c: float, t_end: float):
    """The piecewise solution of m_e v' = force(t) - F_v v - F_c sign(v) from rest at x = 0.

    force(t) is F(t) + F_0. Slip: integrate (rtol 1e-10) until v = 0 (an event); then stick while
    |force(t)| <= F_c, the breakaway time by root finding on |force(t)| - F_c; then slip in the sense
    of force(t). Returns (segments, stick intervals): ("stick", t0, t1, x) or ("slip", t0, t1, dense output).
    """
    t, x, v = 0.0, 0.0, 0.0
    segments: list[tuple] = []
    sticks: list[tuple[float, float]] = []
    while t < t_end:
        if v == 0.0:
            if abs(force(t)) <= F_c:
                grid = np.linspace(t, t_end, int(np.ceil((t_end - t) / 1e-3)) + 2)
                above = np.nonzero(np.abs(force(grid)) > F_c)[0]
                t_b = t_end if len(above) == 0 else brentq(lambda s: abs(force(s)) - F_c, grid[above[0] - 1],
                                                          grid[above[0]], xtol=1e-14)
                sticks.append((t, t_b))
                segments.append(("stick", t, t_b, x))
                t = t_b
                if t >= t_end:
                    break
            sense = float(np.sign(force(t)))
        else:
            sense = float(np.sign(v))

        def rhs(s, y, sense=sense):
            return [y[1], (force(s) - F_v * y[1] - F_c * sense) / m_e]

        def stopped(s, y):
            return y[1]

        stopped.terminal, stopped.direction = True, -sense
        sol = solve_ivp(rhs, (t, t_end), [x, v], method="DOP853", events=stopped, rtol=1e-10, atol=1e-12,
                        dense_output=True)
        assert sol.success, sol.message
        segments.append(("slip", t, float(sol.t[-1]), sol.sol))
        t, x = float(sol.t[-1]), float(sol.y[0, -1])
        v = 0.0 if sol.status == 1 else float(sol.y[1, -1])
    return segments, sticks


def _evaluate(segments, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    x, v = np.full(len(t), np.nan), np.full(len(t), np.nan)
    for kind, t0, t1, data in segments:
        sel = (t >= t0) & (t <= t1)
        if kind == "stick":
            x[sel], v[sel] = data, 0.0
        else:
            x[sel], v[sel] = data(t[sel])
    return x, v


def test_sinusoidal_force_stick_slip_matches_piecewise_reference(stage, stage_parameters) -> None:
    """F(t) = 12 N sin(2 pi 1.5 Hz t) (i = F / K_F, held over each step): slip while v != 0,
    m_e v' = F(t) - F_v v - F_c sign(v) + F_0; at each reversal v reaches 0 while |F + F_0| <= F_c = 8 N, so the
    carriage sticks until |F(t) + F_0| = F_c, then slips in the sense of F + F_0 (5 stick intervals, 60-100 ms).

    Spook's x(t) converges to the piecewise solution at first order in h, and its stick intervals
    (|v| ~ 0 in its states) are the reference's within a few steps.
    """
    p = stage_parameters
    amplitude, freq, t_end = 12.0, 1.5, 1.5  # [N], [Hz], [s]
    m_e = p["M"] + p["J_r"]

    def current(t):
        return amplitude / p["K_F"] * np.sin(2 * np.pi * freq * t)

    segments, sticks = _stick_slip_reference(lambda t: p["K_F"] * current(t) + p["F_0"], m_e, p["F_v"], p["F_c"],
                                             t_end)
    assert len(sticks) >= 5 and min(b - a for a, b in sticks) > 0.05, f"not a visible stick-slip: {sticks}"
    errors = {}
    for h in (1e-3, 5e-4):
        n = int(round(t_end / h))
        traj = _run(stage, t_end, h, current(np.arange(n) * h), p)  # u_k = i(t_k), as a rig logs it
        x_ref, v_ref = _evaluate(segments, traj.t)
        assert np.all(np.isfinite(x_ref))
        err = float(np.abs(traj.observations[:, 0] - x_ref).max())
        # First order: the error is below one step's travel at the top speed.
        assert err < h * np.abs(v_ref).max(), f"h = {h}: max |x - x_ref| = {err:.3e} m"
        errors[h] = err
        found = _runs(np.abs(_axis_speed(traj)) < STUCK_SPEED, traj.t)
        assert len(found) == len(sticks), f"h = {h}: Spook sticks on {found}, the reference on {sticks}"
        offsets = [max(abs(a - ra), abs(b - rb)) for (a, b), (ra, rb) in zip(found, sticks)]
        print(f"\nstick-slip h = {h}: max |x - x_ref| = {err:.3e} m; stick intervals off by at most "
              f"{max(offsets) / h:.2f} steps")
        for (a, b), (ra, rb) in zip(found, sticks):
            assert abs(a - ra) <= 3 * h and abs(b - rb) <= 3 * h, (
                f"h = {h}: Spook sticks on [{a:.4f}, {b:.4f}] s, the reference on [{ra:.4f}, {rb:.4f}] s")
    ratio = errors[1e-3] / errors[5e-4]
    print(f"stick-slip error ratio {ratio:.3f}")
    assert 1.6 <= ratio <= 2.4, f"error ratio {ratio:.3f} for halved h: not first order ({errors})"


# ----------------------------------------------------------------- load-dependent dry friction (mu)


@pytest.fixture(scope="module")
def dry_slider() -> RigidModel:
    """A 2 kg block on a horizontal slider along world x, dry friction mu = 0.3 (load-dependent), pushed by F."""
    params = ParameterSet([
        Parameter("m", 2.0, "kg", 1e-6),
        Parameter("mu", 0.3, "", 0.0),
        Parameter("F", 10.0, "N"),
        Parameter("g", 9.81, "m/s^2", 0.0),
    ])
    axis = AXIS_FRAMES["x"]  # the frames' z axis (the slide) along world x
    slide = Prismatic("s", Frame(WORLD, (0.0, 0.0, 0.0), axis), Frame("block", (0.0, 0.0, 0.0), axis),
                      eps_lin=1e-8, eps_rot=1e-8, dry="mu")
    return RigidModel("dry-slider", [Body("block", "m", (0.01, 0.01, 0.01))], [slide],
                      applied=[AppliedForce("block", ("F", 0.0, 0.0))], parameters=params)


def _dry_rows(model: RigidModel) -> tuple[list[int], list[int], list[int]]:
    """Indices in lam_B of the slider's translational and rotational normal rows (+g and -g of each)
    and of its two tangential (friction) rows."""
    (i0,) = [block[4] for block in model.layout.blocks if block[0] == "dry_joint"]
    translational = [i0, i0 + 1, i0 + 5, i0 + 6]  # rows 0, 1 of +g (2 translational of 5), then of -g
    rotational = [i0 + 2, i0 + 3, i0 + 4, i0 + 7, i0 + 8, i0 + 9]
    return translational, rotational, [i0 + 10, i0 + 11]


def test_load_dependent_dry_friction_slides_at_closed_form_acceleration(dry_slider) -> None:
    """F > mu m g: m x'' = F - mu N with N = m g (the load on the translational rows), so
    x(t) = a t^2 / 2, a = (F - mu m g) / m. Spook's x_k = h sum v_i = a t^2 / 2 + a h t / 2: error a h / 2
    at t = 1 s, first order in h. The friction impulse is mu times the normal impulse while sliding.
    """
    p = dry_slider.parameters.numpy_values()
    m, mu, g, F = p["m"], p["mu"], p["g"], p["F"]
    assert F > mu * m * g
    a = (F - mu * m * g) / m
    translational, rotational, tangents = _dry_rows(dry_slider)
    errors = []
    for h in (2e-3, 1e-3, 5e-4):
        traj = _run(dry_slider, 1.0, h, parameters=p)
        t, x, v = traj.t, traj.observations[:, 0], _axis_speed(traj)
        err = float(np.abs(x - a * t**2 / 2).max())
        assert err < 1.05 * a * h / 2, f"h = {h}: max |x - a t^2/2| = {err:.3e} m, first-order bound {a * h / 2:.3e}"
        errors.append(err)
        half = len(t) // 2
        np.testing.assert_allclose((v[-1] - v[half]) / (t[-1] - t[half]), a, rtol=1e-5)
        lam = np.asarray(traj.info.lam_B)
        normal = lam[:, translational].sum(axis=1) + lam[:, rotational].sum(axis=1) / 1.0  # mu / (1 m) on rotations
        friction = lam[:, tangents[0]] - lam[:, tangents[1]]  # along the slide [N s]
        # The load: m g h on the translational rows once the compliant rows have settled (a few tau).
        settled = t[1:] > 0.05
        np.testing.assert_allclose(lam[settled][:, translational].sum(axis=1), m * g * h, rtol=1e-3)
        assert np.abs(lam[:, rotational]).max() < 1e-9 * m * g * h + 1e-15  # CoM on the axis: no moment
        assert np.all(np.abs(friction) <= mu * normal * (1 + 1e-6) + 1e-15), "friction above mu N"
        np.testing.assert_allclose(friction, -mu * normal, rtol=1e-6)  # sliding forward: the full bound, backward
    ratios = [errors[i] / errors[i + 1] for i in range(2)]
    print(f"\ndry friction: max |x - a t^2/2| = {', '.join(f'{e:.3e}' for e in errors)} m, ratios {ratios}")
    for r in ratios:
        assert 1.8 <= r <= 2.2, f"error ratio {r:.3f} for halved h: not first order ({errors})"


@pytest.mark.parametrize("force", [4.0, -5.5])
def test_load_dependent_dry_friction_sticks_below_mu_m_g(dry_slider, force: float) -> None:
    """|F| < mu m g = 5.886 N: friction balances F (|friction| = |F| <= mu N), x'' = 0, the block stays."""
    p = dry_slider.parameters.numpy_values() | {"F": force}
    h = 1e-3
    traj = _run(dry_slider, 1.0, h, parameters=p)
    translational, rotational, tangents = _dry_rows(dry_slider)
    lam = np.asarray(traj.info.lam_B)
    normal = lam[:, translational].sum(axis=1) + lam[:, rotational].sum(axis=1)
    friction = lam[:, tangents[0]] - lam[:, tangents[1]]
    assert np.abs(traj.observations[:, 0]).max() < 1e-6
    assert np.abs(_axis_speed(traj)).max() < STUCK_SPEED
    np.testing.assert_allclose(friction[1:], -force * h, rtol=1e-5)
    assert np.all(np.abs(friction) <= p["mu"] * normal * (1 + 1e-6))


# ----------------------------------------------------------------- calibration


def test_calibration_from_quantized_encoder_log_recovers_mass_and_friction(stage, stage_parameters) -> None:
    """linear-stage, (M + J_r) x'' = K_F i - F_v x' - F_c sign(x') + F_0, simulated at h = 1 ms over 2 s with
    i = 0.4 sin(2 pi 0.7 t) + 0.1 sign(sin(2 pi 2.1 t)) [A], read with 5 um noise by a 1 um linear encoder.

    Calibrated from M = 4, F_v = 15, F_c = 6, F_0 = 0: M, F_v, F_c, F_0 within 2 % (F_0: or 0.05 N), each with a
    finite positive std that covers its error (|error| < 5 std + 1 ppm of the value).
    """
    h, duration = 1e-3, 2.0
    t = np.arange(int(round(duration / h))) * h
    current = 0.4 * np.sin(2 * np.pi * 0.7 * t) + 0.1 * np.sign(np.sin(2 * np.pi * 2.1 * t))
    traj = _run(stage, duration, h, current, stage_parameters)
    log = traj.to_log(noise=5e-6, seed=3, resolution=1e-6)
    counts = log.y[:, 0] / 1e-6
    np.testing.assert_allclose(counts, np.round(counts), atol=1e-6)  # whole encoder counts
    start = stage.with_parameters({"M": 4.0, "F_v": 15.0, "F_c": 6.0, "F_0": 0.0})
    # weight = w of sum |Delta y|^2 + w sum |Delta p|^2. The default 1e6 is scaled for angles in radians with
    # milliradian noise; the balance it strikes scales with the observation variance, so with 5 um noise on
    # metres the same balance is w ~ 1e6 (5e-6 / 1e-3)^2 = 25. At 1e6 the solve over-trusts the impulse
    # residuals (the readings barely count against them) and the LM creeps instead of converging (tried with
    # seed 3: 20 iterations, the cost still falling ~1 % per undamped step, not converged, M, F_v and F_c off by
    # 6-11 std); at 1e2 it converges in 9 iterations.
    result = calibrate(start, log, free=["M", "F_v", "F_c", "F_0"], weight=1e2)
    est = {q.name: q for q in result.parameters}
    print("\ncalibration: " + ", ".join(f"{n} = {q.value:.7g} +- {q.std:.2g}" for n, q in est.items())
          + f"; {result.iterations} iterations, converged {result.converged}, {result.wall_s:.1f} s")
    assert result.converged, f"not converged in {result.iterations} iterations"
    for name, truth in TRUTH.items():
        q = est[name]
        error = q.value - truth
        tolerance = max(0.02 * abs(truth), 0.05) if name == "F_0" else 0.02 * abs(truth)
        assert abs(error) <= tolerance, f"{name} = {q.value:.6g}, truth {truth}: off by {error:.3g}"
        assert np.isfinite(q.std) and q.std > 0, f"{name}: std {q.std}"
        # The log comes from the same discrete model at the same h, so the error is the noise's alone and the
        # std must cover it. The LM stops ~0.3 std short of the optimum (relative_tol 1e-3; measured against a
        # 1e-9 run), well inside 5 std. The floor, 1 ppm of the value (5 mg of a 5 kg carriage), only keeps a
        # std that is itself at the ppm level (M's is 2 ppm) from failing on round-off.
        assert abs(error) < 5 * q.std + 1e-6 * abs(truth), f"{name}: error {error:.3g} vs std {q.std:.3g}"


# ----------------------------------------------------------------- Stribeck on a Coulomb force


@pytest.fixture(scope="module")
def stribeck_slider() -> RigidModel:
    """A 0.5 kg block on a horizontal slider along world x with viscous F_v, Coulomb F_c and Stribeck's term
    ``dF exp(-(v / v_s)^2)`` on it (Marklund et al. (2025) eq. 4.1), pushed by a constant F."""
    params = ParameterSet([
        Parameter("m", 0.5, "kg", 1e-6),
        Parameter("F_v", 10.0, "N s/m", 0.0),
        Parameter("F_c", 3.0, "N", 0.0),
        Parameter("dF", 2.0, "N"),
        Parameter("v_s", 0.2, "m/s", 1e-6),
        Parameter("F", 6.0, "N"),
        Parameter("g", 9.81, "m/s^2", 0.0),
    ])
    axis = AXIS_FRAMES["x"]
    slide = Prismatic("s", Frame(WORLD, (0.0, 0.0, 0.0), axis), Frame("block", (0.0, 0.0, 0.0), axis),
                      eps_lin=1e-8, eps_rot=1e-8, viscous="F_v", coulomb="F_c", stribeck=("dF", "v_s"))
    return RigidModel("stribeck-slider", [Body("block", "m", (0.001, 0.001, 0.001))], [slide],
                      applied=[AppliedForce("block", ("F", 0.0, 0.0))], parameters=params)


@pytest.mark.parametrize("force, moves", [(4.5, False), (6.0, True)])
def test_stribeck_breakaway_needs_the_static_force_and_sliding_settles_on_eq_4_1(stribeck_slider, force,
                                                                                moves) -> None:
    """At rest the friction can hold F_c + dF (5 N): a 4.5 N push above the sliding friction F_c does not move
    the block. A 6 N push does, and the block settles at the speed where eq. 4.1's friction balances it,
    ``F = F_v v + F_c + dF exp(-(v / v_s)^2)``, found by root finding."""
    p = stribeck_slider.parameters.numpy_values() | {"F": force}
    traj = _run(stribeck_slider, 1.5, 1e-3, parameters=p)
    v = _axis_speed(traj)
    if not moves:
        assert np.abs(v).max() < STUCK_SPEED and abs(traj.observations[-1, 0]) < 1e-6
        return
    balance = lambda s: force - p["F_v"] * s - p["F_c"] - p["dF"] * np.exp(-((s / p["v_s"]) ** 2))  # noqa: E731
    # balance decreases in s (F_v = 10 exceeds the Stribeck term's largest slope, 8.6 N s/m): one root, with
    # the Stribeck term 0.4 N there.
    v_end = brentq(balance, 0.0, (force - p["F_c"]) / p["F_v"])
    # The time constant there, m / (F_v - the Stribeck term's slope) = 0.1 s: 1.5 s is 15 of them.
    assert v[-1] == pytest.approx(v_end, rel=1e-3)
