"""The chain smoother of the stream (mbfg.graphs.stream.chain): fixed-lag smoothing by square-root
information elimination along the chain of states.

On a linear-Gaussian chain, fixed-lag smoothing with marginalization is exact: the window's estimates
are the batch least-squares solution of every factor so far, restricted to the window. That is checked
against a dense least-squares solve, for both elimination paths (one compiled scan for the regular
updates, the NumPy loop for the others). On a quantized pendulum stream the chain gives iSAM2's
estimates and standard deviations to round-off.
"""

from __future__ import annotations

import math

import gtsam
import numpy as np
import pytest

from mbfg import keys
from mbfg.errors import ModelError
from mbfg.graphs.stream import StreamEstimator
from mbfg.graphs.stream.chain import ChainError, ChainWindow, eliminate_regular
from mbfg.graphs.stream.growth import GraphGrowth
from mbfg.lie import pose3_retract_np
from mbfg.logs import quantize
from mbfg.models import furuta, pendulum
from mbfg.spook import simulate, unwrap_angles
from mbfg.trees import SOFT

DIM = 3  # a state: one Vector3


def _linear_chain(n_states: int, seed: int = 0) -> tuple[list[tuple[int, np.ndarray, float]],
                                                             list[tuple[int, np.ndarray, np.ndarray]]]:
    """A random linear-Gaussian chain: per state a measurement (k, z, sigma), per step a between
    measurement (k, z, sigmas) of x_{k+1} - x_k."""
    rng = np.random.default_rng(seed)
    unary = [(k, rng.normal(size=DIM), float(rng.uniform(0.5, 2.0))) for k in range(n_states)]
    binary = [(k, rng.normal(size=DIM), rng.uniform(0.01, 0.1, DIM)) for k in range(n_states - 1)]
    return unary, binary


def _unary_factor(k: int, z: np.ndarray, sigma: float) -> gtsam.NonlinearFactor:
    return gtsam.PriorFactorVector(keys.V(k), z, gtsam.noiseModel.Isotropic.Sigma(DIM, sigma))


def _binary_factor(k: int, z: np.ndarray, sigmas: np.ndarray) -> gtsam.NonlinearFactor:
    return gtsam.BetweenFactorVector(keys.V(k), keys.V(k + 1), z, gtsam.noiseModel.Diagonal.Sigmas(sigmas))


def _batch(unary, binary, n_states: int) -> np.ndarray:
    """The least-squares solution (n_states, DIM) of every factor, by a dense solve."""
    rows, rhs = [], []
    for k, z, sigma in unary:
        A = np.zeros((DIM, n_states * DIM))
        A[:, k * DIM : (k + 1) * DIM] = np.eye(DIM) / sigma
        rows.append(A)
        rhs.append(z / sigma)
    for k, z, sigmas in binary:
        A = np.zeros((DIM, n_states * DIM))
        A[:, k * DIM : (k + 1) * DIM] = -np.eye(DIM) / sigmas[:, None]
        A[:, (k + 1) * DIM : (k + 2) * DIM] = np.eye(DIM) / sigmas[:, None]
        rows.append(A)
        rhs.append(z / sigmas)
    x, *_ = np.linalg.lstsq(np.vstack(rows), np.concatenate(rhs), rcond=None)
    return x.reshape(n_states, DIM)


@pytest.mark.parametrize("threshold", [10.0, 1e-12])
@pytest.mark.parametrize("per_update", [1, 3])
def test_fixed_lag_smoothing_of_a_linear_chain_is_the_batch_least_squares_solution(per_update, threshold) -> None:
    """Fed one or three states per update (GTSAM factors, each its own block: the NumPy elimination; the
    compiled scan has its own test below). After every update, each window state equals the dense batch
    solution of all factors so far. With a threshold of 1e-12 every update relinearizes its new states and
    moves the frontier's point to its estimate (its square-root information and the conditional before it
    moved with it): on a linear chain the solution must not change."""
    n_states, lag = 13, 4.0
    unary, binary = _linear_chain(n_states)
    window = ChainWindow(lag, velocity_threshold=threshold)
    start = 0
    for stop in [1, *range(1 + per_update, n_states + 1, per_update)]:
        values, factors, stamps = gtsam.Values(), [], {}
        for k in range(start, stop):
            values.insert(keys.V(k), np.zeros(DIM))  # a linearization point far from the solution
            stamps[keys.V(k)] = float(k)
            factors.append(_unary_factor(*unary[k]))
            if k > 0:
                factors.append(_binary_factor(*binary[k - 1]))
        window.update(factors, values, stamps)
        expected = _batch(unary[:stop], binary[: stop - 1], stop)
        in_window = [k for k in range(stop) if k >= stop - 1 - lag]
        for k in in_window:
            np.testing.assert_allclose(window.calculateEstimateVector(keys.V(k)), expected[k], atol=1e-10)
        start = stop


def test_a_factor_skipping_a_state_or_an_undetermined_state_is_refused() -> None:
    window = ChainWindow(10.0)
    values = gtsam.Values()
    for k in range(3):
        values.insert(keys.V(k), np.zeros(DIM))
    stamps = {keys.V(k): float(k) for k in range(3)}
    skipping = [_unary_factor(k, np.zeros(DIM), 1.0) for k in range(3)]
    skipping.append(gtsam.BetweenFactorVector(keys.V(0), keys.V(2), np.zeros(DIM),
                                              gtsam.noiseModel.Isotropic.Sigma(DIM, 1.0)))
    with pytest.raises(ChainError, match=r"states \[0, 2\]"):
        window.update(skipping, values, stamps)
    window = ChainWindow(10.0)
    # x_0 -> x_1 is missing: x_1 and x_2 are known only relative to each other.
    undetermined = [_unary_factor(0, np.zeros(DIM), 1.0), _binary_factor(1, np.zeros(DIM), np.ones(DIM))]
    with pytest.raises(ChainError, match="undetermined"):
        window.update(undetermined, values, stamps)


H, PPR, LAG = 1e-3, 2048, 0.05


@pytest.fixture(scope="module")
def pendulum_log():
    """A quantized pendulum stream at the estimation compliance (mbfg.trees.SOFT). At the built-in models' rigid
    joints iSAM2 meets an indeterminate system within the first samples (its elimination of rows 1e10 heavier
    than the readings), so the comparisons with it are made where both run."""
    model = pendulum().with_parameters(dict(zip(("eps_lin", "eps_rot"), SOFT)))
    traj = simulate(model, 0.4, H, initial=model.initial_state({"theta": 2.0}))
    return model, traj.t, quantize(unwrap_angles(model, traj.observations), PPR)


@pytest.mark.parametrize("update_every", [1, 5])
def test_chain_smoother_gives_isam2s_estimates_to_round_off(pendulum_log, update_every) -> None:
    """The same factors, the same linearization points: the chain and iSAM2 (QR) agree to round-off,
    filtered and smoothed, on every sample of a quantized pendulum stream."""
    model, t, y = pendulum_log
    out = {}
    for smoother in ("chain", "incremental"):
        est = StreamEstimator(model, lag=LAG, h=H, period=H, ppr=PPR, smoother=smoother, update_every=update_every)
        filtered, smoothed = {}, {}
        for ti, yi in zip(t, y):
            step = est.push(ti, yi)
            filtered.update((e.k, e) for e in step.added)
            smoothed.update((e.k, e) for e in step.smoothed_added)
        out[smoother] = (filtered, smoothed)
        assert est.status.solver_failures == 0
        # The chain's regular updates take the fused program (graphs/stream/fused.py).
        assert (est._fused is not None) == (smoother == "chain")
    for a, b in zip(out["chain"], out["incremental"]):
        assert a.keys() == b.keys() and len(a) > 0.8 * (t[-1] - LAG) / H
        for k in a:
            np.testing.assert_allclose(a[k].coordinates, b[k].coordinates, rtol=0, atol=1e-10)
            np.testing.assert_allclose(a[k].rates, b[k].rates, rtol=0, atol=1e-8)
    step = 2 * math.pi / PPR
    assert max(abs(e.coordinates[0] - yi[0]) for e, yi in zip(out["chain"][0].values(), y)) < 3 * step


def test_the_chain_smoother_refuses_online_refinement_by_name() -> None:
    model = pendulum()
    with pytest.raises(ModelError, match="smoother 'chain'"):
        StreamEstimator(model, h=H, smoother="chain", refine=["b"])
    assert StreamEstimator(model, h=H, update_every=5, refine=["b"]).smoother_kind == "incremental"  # the fallback
    assert StreamEstimator(model, h=H, update_every=5, covariance=True).smoother_kind == "chain"
    assert StreamEstimator(model, h=H).smoother_kind == "chain"  # one sample per update too


@pytest.mark.parametrize("update_every", [1, 5])
def test_chain_standard_deviations_are_isam2s_marginals(pendulum_log, update_every) -> None:
    """covariance=True: the chain's marginal covariances (backward through the conditionals) give the
    standard deviations of iSAM2's jointMarginalCovariance, filtered and smoothed, on every sample."""
    model, t, y = pendulum_log
    out = {}
    for smoother in ("chain", "incremental"):
        est = StreamEstimator(model, lag=LAG, h=H, period=H, ppr=PPR, smoother=smoother, update_every=update_every,
                              covariance=True)
        stds = {}
        for ti, yi in zip(t[:150], y[:150]):
            step = est.push(ti, yi)
            for kind, estimates in (("filtered", step.added), ("smoothed", step.smoothed_added)):
                stds.update(((kind, e.k), (e.coordinate_std, e.rate_std)) for e in estimates)
        out[smoother] = stds
    assert out["chain"].keys() == out["incremental"].keys() and len(out["chain"]) > 150
    for key, (q_std, qd_std) in out["chain"].items():
        np.testing.assert_allclose(q_std, out["incremental"][key][0], rtol=1e-6, err_msg=str(key))
        np.testing.assert_allclose(qd_std, out["incremental"][key][1], rtol=1e-6, err_msg=str(key))


def test_the_compiled_elimination_scan_is_the_dense_least_squares_solution() -> None:
    """The scan's conditionals and frontier, back-substituted, solve the whole stacked system: a prior
    [R_0 | d_0] on x_0, binary rows on (x_i, x_i+1), unary rows on x_i+1."""
    rng = np.random.default_rng(3)
    n, L, m_u = 4, 5, 2
    R_0 = np.triu(rng.normal(size=(n, n))) + 3 * np.eye(n)
    carried = np.hstack([R_0, rng.normal(size=(n, 1))])
    A, b = rng.normal(size=(L, n, 2 * n)), rng.normal(size=(L, n))
    A_u, b_u = rng.normal(size=(L, m_u, n)), rng.normal(size=(L, m_u))
    G, a, _, R_f, ok = (np.asarray(x) for x in eliminate_regular(carried, A, b, A_u, b_u))
    assert ok.all()
    deltas = [np.linalg.solve(R_f[:, :n], R_f[:, n])]
    for i in range(L - 1, -1, -1):
        deltas.insert(0, a[i] - G[i] @ deltas[0])
    rows, rhs = [np.hstack([R_0, np.zeros((n, L * n))])], [carried[:, n]]
    for i in range(L):
        row = np.zeros((n, (L + 1) * n))
        row[:, i * n : (i + 2) * n] = A[i]
        unary = np.zeros((m_u, (L + 1) * n))
        unary[:, (i + 1) * n : (i + 2) * n] = A_u[i]
        rows += [row, unary]
        rhs += [b[i], b_u[i]]
    expected, *_ = np.linalg.lstsq(np.vstack(rows), np.concatenate(rhs), rcond=None)
    np.testing.assert_allclose(np.concatenate(deltas), expected, rtol=0, atol=1e-10)


def test_a_stream_config_is_checked_when_made_and_equals_the_keyword_settings() -> None:
    """StreamConfig holds the estimator's settings, frozen and checked; keywords override its fields, and a
    variant keeps the smoother left to its default open (update_every 5: chain; with refine: iSAM2)."""
    import dataclasses

    from mbfg.graphs.stream import StreamConfig

    with pytest.raises(ModelError, match="update_every"):
        StreamConfig(h=H, update_every=0)
    with pytest.raises(ModelError, match="lag"):
        StreamConfig(h=H, lag=-1.0)
    config = StreamConfig(h=H, lag=LAG, ppr=PPR, update_every=5)
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.lag = 1.0  # type: ignore[misc]
    model = pendulum()
    by_config, by_keywords = StreamEstimator(model, config), StreamEstimator(model, h=H, lag=LAG, ppr=PPR,
                                                                             update_every=5)
    for name in ("h", "period", "lag", "m", "update_every", "smoother_kind", "jump", "sigma_impulse"):
        assert getattr(by_config, name) == getattr(by_keywords, name), name
    np.testing.assert_array_equal(by_config.sigma_observation, by_keywords.sigma_observation)
    assert by_config.smoother_kind == "chain"
    assert StreamEstimator(model, config, refine=["b"]).smoother_kind == "incremental"
    assert StreamEstimator(model, config, lag=0.2).m == 200
    with pytest.raises(TypeError, match="lagg"):
        StreamEstimator(model, config, lagg=0.2)


@pytest.mark.parametrize("threshold", [None, 1e-5])
def test_the_fused_update_of_a_driven_two_body_stream_is_the_factor_by_factor_update(monkeypatch, threshold) -> None:
    """The Furuta pendulum (two bodies, a motor voltage) at 5 samples per update: the one-program update
    (Spook prediction, impulse and observation linearization, elimination) and the factor groups' update
    through the chain's general path give the same filtered and smoothed estimates to round-off; with the
    default relinearization thresholds (one pass per update) and with tiny ones (the new states
    relinearized at their solution and the frontier moved with them, up to four passes). At the estimation
    compliance (mbfg.trees.SOFT), where they agree to 1e-10 with the frontier moving too (threshold 1e-5); at the
    default rigid joints, whose rows are 1e10 heavier than the readings, they differed by 3.5e-8 rad."""
    model = furuta(dry=False).with_parameters(dict(zip(("eps_lin", "eps_rot"), SOFT)))
    n = 150
    u = 0.5 * np.sign(np.sin(2 * np.pi * 3.0 * np.arange(n) * H))[:, None]
    traj = simulate(model, n * H, H, initial=model.initial_state({"alpha": 0.5}), controls=u)
    y = quantize(unwrap_angles(model, traj.observations), PPR)
    u = np.vstack([u, u[-1:]])
    out = {}
    for fused in (True, False):
        if not fused:
            monkeypatch.setattr(GraphGrowth, "_extend_regular", GraphGrowth._extend_factors)
        settings = {} if threshold is None else {"relinearize_threshold": threshold}
        est = StreamEstimator(model, lag=LAG, h=H, period=H, ppr=PPR, smoother="chain", update_every=5, **settings)
        filtered, smoothed = {}, {}
        for ti, yi, ui in zip(traj.t, y, u):
            step = est.push(ti, yi, ui)
            filtered.update((e.k, e) for e in step.added)
            smoothed.update((e.k, e) for e in step.smoothed_added)
        assert est.status.solver_failures == 0 and (est._fused is not None) == fused
        out[fused] = (filtered, smoothed)
    for a, b in zip(out[True], out[False]):
        assert a.keys() == b.keys() and len(a) > 0.5 * n
        for k in a:
            np.testing.assert_allclose(a[k].coordinates, b[k].coordinates, rtol=0, atol=1e-10)
            np.testing.assert_allclose(a[k].rates, b[k].rates, rtol=0, atol=1e-8)


def test_the_vectorized_pose_retraction_is_gtsams() -> None:
    """The chain reads its states out with lie.pose3_retract_np: GTSAM's Pose3.retract (the exponential
    map) to round-off, for ordinary, small (Taylor branch) and zero rotations."""
    rng = np.random.default_rng(3)
    xi = rng.normal(size=(60, 6)) * np.repeat([1.0, 1e-5, 1e-9], 20)[:, None]
    xi[:5, :3] = 0.0
    poses = [gtsam.Pose3(gtsam.Rot3.Expmap(rng.normal(size=3)), rng.normal(size=3)) for _ in xi]
    out = pose3_retract_np(np.array([p.matrix() for p in poses]), xi)
    expected = np.array([p.retract(x).matrix() for p, x in zip(poses, xi)])
    np.testing.assert_allclose(out, expected, rtol=0, atol=1e-14)


def test_a_rigid_states_keys_are_gtsam_symbols_of_its_poses_then_its_velocity() -> None:
    """keys.rigid_state builds the stream's keys by the symbol layout's arithmetic: the same keys as
    keys.X / keys.V (GTSAM's LabeledSymbol), for large step indices and several bodies."""
    for k in (0, 1, 99, 10**9):
        for nb in (1, 2, 7):
            assert keys.rigid_state(k, nb) == [keys.X(k, i) for i in range(nb)] + [keys.V(k)]
    with pytest.raises(ValueError, match="time-step index"):
        keys.rigid_state(-1, 2)
