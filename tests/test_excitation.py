"""The exciting trajectory (mbfg.excitation): the Fourier series of Swevers et al. 1997 in closed form against
finite differences, its period, its amplitude bounds, and the optimized condition number against the random
start's, with the limits checked on a fine grid by inverse dynamics."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from mbfg.errors import MbfgError
from mbfg.excitation import ExcitationOptions, FourierTrajectory, excite, random_trajectory, sample_times
from mbfg.inverse_dynamics import inverse_dynamics, regressor
from mbfg.kinematic_tree import load_tree

PANDA = Path(__file__).resolve().parents[1] / "datasets" / "panda.urdf"


def _trajectory(frequency: float = 0.3, harmonics: int = 4, n: int = 3, seed: int = 1) -> FourierTrajectory:
    rng = np.random.default_rng(seed)
    return FourierTrajectory(rng.normal(size=n), rng.normal(size=(n, harmonics)), rng.normal(size=(n, harmonics)),
                             frequency)


def test_fourier_rates_and_accelerations_are_the_derivatives_of_the_angles() -> None:
    traj = _trajectory()
    t = np.linspace(0.0, 7.0, 57)
    h = 1e-4
    q, qd, qdd = traj.evaluate(t)
    qp, qdp, _ = traj.evaluate(t + h)
    qm, qdm, _ = traj.evaluate(t - h)
    # central differences: error h^2 / 6 times the third derivative (rates of order 1-10 here)
    np.testing.assert_allclose(qd, (qp - qm) / (2 * h), rtol=0, atol=1e-6)
    np.testing.assert_allclose(qdd, (qdp - qdm) / (2 * h), rtol=0, atol=1e-5)
    np.testing.assert_allclose(qdd, (qp - 2 * q + qm) / h**2, rtol=0, atol=1e-4)


def test_fourier_trajectory_repeats_after_one_over_f() -> None:
    traj = _trajectory(frequency=0.3)
    t = np.linspace(0.0, 3.0, 31)
    for now, later in zip(traj.evaluate(t), traj.evaluate(t + 1.0 / 0.3), strict=True):
        np.testing.assert_allclose(later, now, rtol=0, atol=1e-12)
    # and not sooner: half a period moves the first harmonic
    assert np.abs(traj.evaluate(t + 0.5 / 0.3)[0] - traj.evaluate(t)[0]).max() > 1e-2


def test_swevers_amplitude_bounds_hold_at_every_time_and_are_reached_when_phases_align() -> None:
    traj = _trajectory()
    q, qd, _ = traj.evaluate(np.linspace(0.0, traj.period, 20001))
    angle, rate = traj.bounds()
    assert np.all(np.abs(q - traj.q0).max(axis=0) <= angle)
    assert np.all(np.abs(qd).max(axis=0) <= rate)
    # one harmonic: the bound is the amplitude, reached
    one = FourierTrajectory(np.zeros(1), np.array([[0.3]]), np.array([[0.4]]), 0.5)
    q1, qd1, _ = one.evaluate(np.linspace(0.0, 2.0, 40001))
    a1, r1 = one.bounds()
    np.testing.assert_allclose(np.abs(q1).max(), a1[0], rtol=1e-6)
    np.testing.assert_allclose(np.abs(qd1).max(), r1[0], rtol=1e-6)


def test_optimized_condition_number_is_below_the_random_starts_within_the_limits() -> None:
    tree = load_tree(PANDA)
    options = ExcitationOptions(duration=5.0, harmonics=2, samples=60, max_iterations=10, seed=2)
    result = excite(tree, options)
    assert result.condition < result.random_condition

    # the reported condition numbers, recomputed with numpy from the regressor of mbfg.inverse_dynamics
    from mbfg.base_parameters import BaseParameterOptions, inertial_base_parameters

    columns = inertial_base_parameters(tree, BaseParameterOptions(seed=options.seed)).independent
    for traj, reported in ((result.trajectory, result.condition), (result.random, result.random_condition)):
        Y = regressor(tree, *traj.evaluate(sample_times(options))).reshape(-1, 10 * tree.n)
        np.testing.assert_allclose(np.linalg.cond(Y[:, columns]), reported, rtol=1e-6)
    np.testing.assert_allclose(result.random.a, random_trajectory(tree, options).a)

    # the limits on a grid 40 times finer than the samples, torques by inverse dynamics
    t = np.linspace(0.0, options.duration, 2401)
    q, qd, qdd = result.trajectory.evaluate(t)
    tau = inverse_dynamics(tree, q, qd, qdd)
    lim = [tree.limits[j] for j in tree.joints]
    assert np.all(q >= [d["lower"] for d in lim]) and np.all(q <= [d["upper"] for d in lim])
    assert np.all(np.abs(qd) <= [d["velocity"] for d in lim])
    assert np.all(np.abs(tau) <= [d["effort"] for d in lim])


@pytest.mark.parametrize("field, value, match", [
    ("harmonics", 0, "harmonics: expected a whole number >= 1"),
    ("duration", -1.0, "duration: expected a finite number > 0"),
    ("base_frequency", 0.0, "base_frequency: expected a finite number > 0"),
    ("samples", 1, "samples: expected a whole number >= 2"),
    ("torque_margin", 1.5, r"torque_margin: expected a number in \(0, 1\]"),
])
def test_bad_excitation_options_are_named(field: str, value: float, match: str) -> None:
    kwargs = {"duration": 10.0, "harmonics": 3, field: value}
    with pytest.raises(MbfgError, match=match):
        ExcitationOptions(**kwargs)  # type: ignore[arg-type]
