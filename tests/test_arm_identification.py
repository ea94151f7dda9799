"""Identification of an arm's inertia and friction (mbfg.arm_identification) on a spatial three-joint arm with full
inertia tensors and noiseless torques: the base parameters are recovered by least squares and by the LM over
log-Cholesky coordinates, and every LM iterate is a physically consistent arm (its pseudo-inertias, rebuilt here
from the iterate's standard parameters, positive definite)."""

from __future__ import annotations

import numpy as np
import pytest

from mbfg.arm_identification import (
    consistent_identification,
    extended_base_parameters,
    least_squares_identification,
    stacked_regressor,
)
from mbfg.errors import MbfgError
from mbfg.excitation import ExcitationOptions, random_trajectory
from mbfg.inverse_dynamics import inverse_dynamics
from mbfg.joint_friction import FrictionModel, friction_torques
from mbfg.kinematic_tree import tree_from_string
from mbfg.lm_config import LMConfig
from mbfg.pseudo_inertia import log_cholesky_from_standard, standard_from_log_cholesky

#: A spatial 3R arm: a vertical joint, then two horizontal ones; full inertia tensors, centres of mass off the axes.
ARM = """<robot name="arm3">
  <link name="base"/>
  <link name="link1"><inertial><origin xyz="0.01 0.02 0.1"/><mass value="2.0"/>
    <inertia ixx="0.02" ixy="0.001" ixz="0.002" iyy="0.025" iyz="0.003" izz="0.01"/></inertial></link>
  <link name="link2"><inertial><origin xyz="0.15 0.01 -0.02"/><mass value="1.2"/>
    <inertia ixx="0.004" ixy="0.0005" ixz="0.0003" iyy="0.012" iyz="0.0002" izz="0.011"/></inertial></link>
  <link name="link3"><inertial><origin xyz="0.1 -0.01 0.01"/><mass value="0.6"/>
    <inertia ixx="0.002" ixy="-0.0002" ixz="0.0001" iyy="0.005" iyz="0.0003" izz="0.004"/></inertial></link>
  <joint name="j1" type="revolute"><parent link="base"/><child link="link1"/><axis xyz="0 0 1"/>
    <limit lower="-3" upper="3" effort="50" velocity="2"/></joint>
  <joint name="j2" type="revolute"><parent link="link1"/><child link="link2"/><origin xyz="0 0 0.3"/>
    <axis xyz="0 1 0"/><limit lower="-2" upper="2" effort="50" velocity="2"/></joint>
  <joint name="j3" type="revolute"><parent link="link2"/><child link="link3"/><origin xyz="0.3 0 0"/>
    <axis xyz="0 1 0"/><limit lower="-2" upper="2" effort="50" velocity="2"/></joint>
</robot>
"""
MODEL = FrictionModel(coulomb_width=0.05)
FRICTION = np.array([[0.2, 0.5, 0.1, 0.05], [0.15, 0.4, -0.05, 0.03], [0.1, 0.3, 0.02, 0.02]])


@pytest.fixture(scope="module")
def log():
    tree = tree_from_string(ARM)
    traj = random_trajectory(tree, ExcitationOptions(duration=4.0, harmonics=3, fill=0.8, seed=2))
    q, qd, qdd = traj.evaluate(np.arange(400) * 0.01)
    tau = inverse_dynamics(tree, q, qd, qdd) + friction_torques(FRICTION, qd, qdd, MODEL)
    W = stacked_regressor(tree, q, qd, qdd, MODEL)
    base = extended_base_parameters(tree, MODEL)
    truth = base.values(np.concatenate([tree.pi.ravel(), FRICTION.ravel()]))
    return tree, W, tau, base, truth


def _pseudo_inertia_eigenvalues(pi: np.ndarray) -> np.ndarray:
    """Smallest eigenvalue (n,) of J = [[0.5 tr(I) 1 - I, h], [h^T, m]], built here from pi (n, 10)."""
    out = []
    for m, hx, hy, hz, xx, xy, yy, xz, yz, zz in pi:
        I = np.array([[xx, xy, xz], [xy, yy, yz], [xz, yz, zz]])
        J = np.zeros((4, 4))
        J[:3, :3] = 0.5 * np.trace(I) * np.eye(3) - I
        J[:3, 3] = J[3, :3] = (hx, hy, hz)
        J[3, 3] = m
        out.append(np.linalg.eigvalsh(J)[0])
    return np.array(out)


def test_rotor_inertia_about_the_vertical_first_axis_merges_with_the_first_links_izz(log):
    """Joint 1 turns about the base's z: its reflected rotor inertia and link 1's I_zz reach only tau_1, both
    through qdd_1, so only their sum is a base parameter; the rotors of the other joints are their own."""
    _, _, _, base, _ = log
    (merged,) = [e for e in base.expressions if "Ia_j1" in e]
    assert "Izz_link1" in merged
    assert "Ia_j3" in base.expressions
    assert any("Ia_j1" in u and "Izz_link1" in u for u in base.unidentifiable)


def test_least_squares_on_noiseless_torques_recovers_the_base_parameters(log):
    tree, W, tau, base, truth = log
    result = least_squares_identification(tree, W, tau, base, MODEL)
    np.testing.assert_allclose(result.values, truth, rtol=1e-8, atol=1e-10)


def test_every_lm_iterate_is_physically_consistent_and_noiseless_data_recovers_the_base_parameters(log):
    tree, W, tau, base, truth = log
    rng = np.random.default_rng(0)
    theta0 = log_cholesky_from_standard(tree.pi) + rng.normal(0.0, 1.0, (3, 10)) * np.array(
        [0.2, 0.3, 0.3, 0.3, 0.02, 0.02, 0.02, 0.03, 0.03, 0.03])
    pi0 = np.asarray(standard_from_log_cholesky(theta0))
    iterates = []
    result = consistent_identification(tree, W, tau, pi0, np.full((3, 4), 0.01), MODEL,
                                       LMConfig(max_iterations=200, damping_update="nielsen", absolute_tol=1e-16), base=base, sigma=1e-4,
                                       on_iteration=lambda row, pi, phi: iterates.append((pi, phi)))
    assert len(iterates) == result.lm.iterations >= 2
    for pi, phi in iterates:
        assert np.all(_pseudo_inertia_eigenvalues(pi) > 0.0)
        assert np.all(phi[:, [0, 1, 3]] >= 0.0)
    assert result.lm.converged, result.lm.message
    np.testing.assert_allclose(result.base_values, truth, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(result.phi[:, :3], FRICTION[:, :3], rtol=1e-9)


def test_an_inconsistent_start_or_friction_outside_its_bounds_is_refused_by_name(log):
    tree, W, tau, base, _ = log
    bad = tree.pi.copy()
    bad[1, 0] = -1.0
    with pytest.raises(MbfgError, match="link2: its pseudo-inertia is not positive definite"):
        consistent_identification(tree, W, tau, bad, np.zeros((3, 4)), MODEL)
    phi0 = np.zeros((3, 4))
    phi0[2, 1] = -0.1
    with pytest.raises(MbfgError, match="Fc_j3 = -0.1 is outside its bounds"):
        consistent_identification(tree, W, tau, tree.pi, phi0, MODEL)
    flat = log_cholesky_from_standard(tree.pi)
    flat[2, 2] = np.log(1e-5)  # link 3's mass spread 0.01 mm: below min_spread
    with pytest.raises(MbfgError, match="link3: its mass spreads 1e-05 m along d2"):
        consistent_identification(tree, W, tau, np.asarray(standard_from_log_cholesky(flat)), np.zeros((3, 4)), MODEL,
                                  min_spread=1e-4)
    with pytest.raises(MbfgError, match="tau: expected 1200 torques"):
        least_squares_identification(tree, W, tau[:-1], base, MODEL)
    with pytest.raises(MbfgError, match="W: 24 torques for 25 base parameters"):
        least_squares_identification(tree, W[:8], tau[:8], base, MODEL)


def test_a_model_without_friction_parameters_recovers_the_inertial_base_parameters_by_both_methods():
    """FrictionModel(terms=(), rotor=False): no friction column and no friction variable in the LM."""
    tree = tree_from_string(ARM)
    model = FrictionModel(terms=(), rotor=False)
    traj = random_trajectory(tree, ExcitationOptions(duration=4.0, harmonics=3, fill=0.8, seed=2))
    q, qd, qdd = traj.evaluate(np.arange(400) * 0.01)
    tau = inverse_dynamics(tree, q, qd, qdd)
    W = stacked_regressor(tree, q, qd, qdd, model)
    assert W.shape == (400, 3, 30)
    base = extended_base_parameters(tree, model)
    truth = base.values(tree.pi.ravel())
    np.testing.assert_allclose(least_squares_identification(tree, W, tau, base, model).values, truth, rtol=1e-8,
                               atol=1e-10)
    theta0 = log_cholesky_from_standard(tree.pi) + 0.05
    result = consistent_identification(tree, W, tau, np.asarray(standard_from_log_cholesky(theta0)), np.zeros((3, 0)),
                                       model, LMConfig(max_iterations=200, damping_update="nielsen",
                                                       absolute_tol=1e-16), base=base, sigma=1e-4)
    assert result.lm.converged, result.lm.message
    assert result.phi.shape == (3, 0)
    np.testing.assert_allclose(result.base_values, truth, rtol=1e-8, atol=1e-11)
