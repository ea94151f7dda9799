"""The banded path of the LM's linear solve (mbfg.banded) on a linear stage's joint problem: the same step as the
general path's GTSAM elimination of the same system, and as scipy's bounded least squares on the dense system."""

from __future__ import annotations

import gtsam
import numpy as np
import pytest
from scipy.optimize import lsq_linear

from mbfg.banded import BandedLinear, FlatStep
from mbfg.graphs.joint import build_joint_problem
from mbfg.lm_systems import BlockedSystem, step_box
from mbfg.models import linear_stage
from mbfg.solvers import bounded_levenberg_marquardt
from mbfg.spook import simulate

TRUTH = {"M": 5.0, "F_v": 20.0, "F_c": 8.0, "F_0": 1.5}
H = 1e-3


@pytest.fixture(scope="module")
def stage_problem():
    """The joint problem of a 60-sample stage log, started 20 % off."""
    model = linear_stage()
    n = 60
    t = np.arange(n) * H
    current = 0.4 * np.sin(2 * np.pi * 7 * t)[:, None] + 0.1
    log = simulate(model.with_parameters(TRUTH), n * H, H, controls=current).to_log(noise=1e-6, seed=1)
    start = model.with_parameters({k: 0.8 * v for k, v in TRUTH.items()})
    return build_joint_problem(start, log, weight=1e2)


@pytest.fixture(scope="module")
def stage_states_problem(stage_problem):
    """The same log's state estimation: every parameter fixed, no bounded columns (the band alone)."""
    return build_joint_problem(stage_problem.model, stage_problem.state_log(), free=[], weight=1e2)


def _dense(linear: BandedLinear, total: int) -> tuple[np.ndarray, np.ndarray]:
    """(J, r) of the banded path's arrays as dense matrices over the flat block columns."""
    rows_J, rows_r = [], []
    for r, A, columns, _ in linear.arrays.groups:
        for k in range(r.shape[0]):
            J = np.zeros((r.shape[1], total))
            for a, cols in zip(A, columns):
                J[:, cols[k]] += a[k]
            rows_J.append(J)
            rows_r.append(r[k])
    for _, A, r, cols in linear.arrays.others:
        J = np.zeros((A.shape[0], total))
        J[:, cols] += A
        rows_J.append(J)
        rows_r.append(r)
    return np.vstack(rows_J), np.concatenate(rows_r)


def test_the_one_axis_chain_takes_the_banded_path(stage_problem):
    system = BlockedSystem(stage_problem.vectorized, stage_problem.initial, stage_problem.bounds)
    assert system.band is not None
    assert system.band.bandwidth == 23  # state k's 12 columns with state k+1's: 2 * 12 - 1 below the diagonal
    linear, _ = system.linearize(stage_problem.initial)
    assert isinstance(linear, BandedLinear)
    general = BlockedSystem(stage_problem.vectorized, stage_problem.initial, stage_problem.bounds, banded=False)
    assert general.band is None


def test_banded_system_is_the_general_systems_cost_and_gradient(stage_problem):
    """0.5 |J x + r|^2 and J^T r of the arrays equal GTSAM's GaussianFactorGraph error and gradient of the same
    linearization (the general path's)."""
    system = BlockedSystem(stage_problem.vectorized, stage_problem.initial, stage_problem.bounds)
    linear, _ = system.linearize(stage_problem.initial)
    gaussian = stage_problem.vectorized.gaussian(linear.arrays)
    blocks = stage_problem.vectorized.blocks
    x = np.random.default_rng(0).standard_normal(blocks.total) * 1e-4
    step = gtsam.VectorValues()
    for block, size in blocks.size.items():
        step.insert(block, x[blocks.start[block] : blocks.start[block] + size])
    assert linear.error(FlatStep(x)) == pytest.approx(gaussian.error(step), rel=1e-12)
    np.testing.assert_allclose(linear.gradient(), blocks.flat(gaussian.gradientAtZero()), rtol=1e-12,
                               atol=1e-12 * np.abs(linear.gradient()).max())


@pytest.mark.parametrize("states_only", [False, True], ids=["calibration", "state-estimation"])
@pytest.mark.parametrize("lam", [1e-5, 1e-2])
def test_banded_step_equals_the_general_paths_elimination(stage_problem, stage_states_problem, lam, states_only):
    """The banded Cholesky with the parameters' Schur complement (without parameters: the band alone) against
    GTSAM's sparse elimination of the same damped system (the general path, Cholesky and QR): the same step to
    round-off."""
    problem = stage_states_problem if states_only else stage_problem
    values, bounds = problem.initial, problem.bounds
    banded = BlockedSystem(problem.vectorized, values, bounds)
    general = BlockedSystem(problem.vectorized, values, bounds, banded=False)
    assert banded.band is not None and banded.band.n_tail == (0 if states_only else 4)
    linear, diag = banded.linearize(values)
    _, fast = banded.step(linear, diag, lam, values)
    gaussian = problem.vectorized.gaussian(linear.arrays)
    blocks = problem.vectorized.blocks
    _, cholesky = general.step(gaussian, diag, lam, values)
    _, qr = general._solve(general._damped(gaussian, diag, lam), values, cholesky=False)
    for reference in (cholesky, qr):
        ref = blocks.flat(reference)
        np.testing.assert_allclose(fast.x, ref, rtol=0, atol=1e-8 * np.abs(ref).max())
    # the decrease both predict
    assert linear.error(banded.zeros) - linear.error(fast) == pytest.approx(
        gaussian.error(general.zeros) - gaussian.error(cholesky), rel=1e-8)


def test_banded_step_with_an_active_bound_equals_scipys_bounded_least_squares(stage_problem):
    """The damped step min 0.5 |J x + r|^2 + 0.5 x^T Lambda x with the parameters' step boxed so that the mass's
    bound holds it: scipy's bounded least squares (BVLS) on the dense stacked system [J; sqrt(Lambda)]."""
    values = stage_problem.initial
    key = next(iter(stage_problem.bounds))
    chi = values.atVector(key)
    lo, hi = stage_problem.bounds[key]
    bounds = {key: (np.where(np.arange(chi.size) == 0, chi - 1e-3, lo), hi)}  # M may fall by 1 g at most
    system = BlockedSystem(stage_problem.vectorized, values, bounds)
    lam = 1e-3
    linear, diag = system.linearize(values)
    _, fast = system.step(linear, diag, lam, values)
    total = stage_problem.vectorized.blocks.total
    J, r = _dense(linear, total)
    A = np.vstack([J, np.diag(np.sqrt(system.damping(diag, lam)))])
    b = -np.concatenate([r, np.zeros(total)])
    box_lo, box_hi = np.full(total, -np.inf), np.full(total, np.inf)
    step_lo, step_hi = step_box(bounds, system.bounded_columns, system.n_small, values)
    columns = system.flat_columns[key]
    box_lo[columns], box_hi[columns] = step_lo, step_hi
    reference = lsq_linear(A, b, bounds=(box_lo, box_hi), method="bvls", tol=1e-14).x
    assert fast.x[columns[0]] == pytest.approx(-1e-3, rel=1e-12)  # on the bound (the free step lowers M by 3.9 kg)
    assert reference[columns[0]] == pytest.approx(-1e-3, rel=1e-9)
    np.testing.assert_allclose(fast.x, reference, rtol=0, atol=1e-7 * np.abs(reference).max())


def test_lm_on_the_banded_path_reaches_the_general_paths_solution(stage_problem, monkeypatch):
    """Five LM iterations on either path: the same parameters to round-off of the steps."""
    import mbfg.solvers
    from mbfg import keys
    from mbfg.lm_config import LMConfig

    def run() -> np.ndarray:
        solved = bounded_levenberg_marquardt(stage_problem.vectorized, stage_problem.initial, stage_problem.bounds,
                                             LMConfig(max_iterations=5), quiet=True)
        return solved.values.atVector(keys.P())

    banded = run()
    monkeypatch.setattr(mbfg.solvers, "BlockedSystem", lambda *args: BlockedSystem(*args, banded=False))
    np.testing.assert_allclose(banded, run(), rtol=1e-8)


def test_a_band_lost_to_round_off_takes_the_general_paths_qr(stage_problem, monkeypatch):
    """Where LAPACK's banded Cholesky finds the damped band indefinite, the step is the general path's QR of the
    same system (its flat twin evaluates as the GTSAM step does)."""
    import mbfg.banded

    def indefinite(*args, **kwargs):
        raise np.linalg.LinAlgError("1-th leading minor not positive definite")

    values, bounds = stage_problem.initial, stage_problem.bounds
    banded = BlockedSystem(stage_problem.vectorized, values, bounds)
    general = BlockedSystem(stage_problem.vectorized, values, bounds, banded=False)
    linear, diag = banded.linearize(values)
    monkeypatch.setattr(mbfg.banded, "cholesky_banded", indefinite)
    _, fallback = banded.step(linear, diag, 1e-5, values)
    gaussian = stage_problem.vectorized.gaussian(linear.arrays)
    _, qr = general._solve(general._damped(gaussian, diag, 1e-5), values, cholesky=False)
    np.testing.assert_array_equal(fallback.x, stage_problem.vectorized.blocks.flat(qr))
    assert linear.error(fallback) == pytest.approx(gaussian.error(qr), rel=1e-12)
