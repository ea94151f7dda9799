"""Joints rigid at the time-step's scale (:data:`mbfg.trees.RIGID`): the Spook stepper (Marklund, Servin, Larson
2025) at that compliance converges to rigid-body references at first order in h, with no plateau from the joints'
give, for a 3-link URDF arm and the built-in double pendulum and Furuta pendulum; at the models' default compliance
(:data:`mbfg.trees.SOFT`, the one estimation converges at) the arm's error plateaus near 0.01 rad.

The references are minimal-coordinate ODEs integrated by scipy's DOP853 at rtol 1e-10 and share no code with
mbfg: the arm's is written here (Lagrange's equations in the links' absolute angles), the double pendulum's
and the Furuta pendulum's are ``tests/rigid_references.py``'s (hand-derived, checked there against energy
conservation and Lagrange's equations of a position-based energy).
"""

from __future__ import annotations

import numpy as np
from scipy.integrate import solve_ivp

from mbfg.models import double_pendulum, furuta
from mbfg.spook import simulate
from mbfg.trees import RIGID, SOFT
from mbfg.urdf import urdf_from_string

try:  # tests/ on sys.path (pytest's default import of this file)
    import rigid_references as R
except ImportError:  # tests/ imported as a package
    from tests import rigid_references as R

G = 9.81
DURATION = 1.0
EVERY = 0.01  # compared every 10 ms [s]

# The arm: three links hanging along -z at zero angles, hinges about y, each link's CoM on its axis.
MASS = np.array([1.0, 0.8, 0.5])  # [kg]
LENGTH = np.array([0.4, 0.3, 0.25])  # joint to next joint [m]
COM = np.array([0.2, 0.15, 0.12])  # joint to CoM [m]
J_Y = np.array([0.015, 0.008, 0.003])  # inertia about the CoM's y axis [kg m^2]
DAMPING = np.array([0.01, 0.01, 0.005])  # viscous drag of each joint on its relative rate [N m s/rad]
Q0 = np.array([1.2, -0.6, 0.9])  # released from rest at these relative angles [rad]


def arm_urdf() -> str:
    """The arm as a URDF: base (the world), links l1-l3 on continuous joints q1-q3 about y."""
    parts = ['<robot name="arm3"><link name="base"/>']
    parent, below = "base", 0.0
    for i in range(3):
        parts.append(f'<link name="l{i + 1}"><inertial><origin xyz="0 0 {-COM[i]}"/><mass value="{MASS[i]}"/>'
                     f'<inertia ixx="{J_Y[i]}" iyy="{J_Y[i]}" izz="{J_Y[i] / 4}" ixy="0" ixz="0" iyz="0"/>'
                     f'</inertial></link>')
        parts.append(f'<joint name="q{i + 1}" type="continuous"><parent link="{parent}"/><child link="l{i + 1}"/>'
                     f'<origin xyz="0 0 {below}"/><axis xyz="0 1 0"/><dynamics damping="{DAMPING[i]}"/></joint>')
        parent, below = f"l{i + 1}", -LENGTH[i]
    return "".join(parts) + "</robot>"


def arm_reference(t: np.ndarray) -> np.ndarray:
    """(len(t), 3) relative joint angles of the rigid arm from Lagrange's equations in the absolute angles
    phi_k = q_1 + ... + q_k. CoM i sits at sum_{k<i} l_k e(phi_k) + r_i e(phi_i), e(phi) = (-sin phi, 0, -cos phi),
    so with c_ik = l_k (k < i), r_i (k = i), 0 (k > i) and L_kj = sum_i m_i c_ik c_ij:

        sum_j (L_kj cos(phi_k - phi_j) + J_k delta_kj) phi_j'' + sum_j L_kj sin(phi_k - phi_j) phi_j'^2
            = -g sin(phi_k) sum_i m_i c_ik + Q_k - Q_{k+1},

    Q_k = -b_k q_k' the drag on joint k (acting on its relative rate; its virtual work Q_k (dphi_k - dphi_{k-1})).
    """
    n = len(MASS)
    c = np.array([[LENGTH[k] if k < i else COM[i] if k == i else 0.0 for k in range(n)] for i in range(n)])
    L = np.einsum("i,ik,ij->kj", MASS, c, c)
    weight = G * MASS @ c

    def ode(_t: float, y: np.ndarray) -> np.ndarray:
        phi, w = y[:n], y[n:]
        d = phi[:, None] - phi[None, :]
        Q = -DAMPING * np.diff(w, prepend=0.0)
        rhs = Q - np.append(Q[1:], 0.0) - weight * np.sin(phi) - (L * np.sin(d)) @ w**2
        return np.concatenate([w, np.linalg.solve(L * np.cos(d) + np.diag(J_Y), rhs)])

    sol = solve_ivp(ode, (t[0], t[-1]), np.concatenate([np.cumsum(Q0), np.zeros(n)]), method="DOP853",
                    t_eval=t, rtol=1e-10, atol=1e-12)
    assert sol.success, sol.message
    return np.diff(sol.y[:n].T, axis=1, prepend=0.0)


def max_error(model, initial, reference: np.ndarray, h: float) -> float:
    """Largest |angle - reference| [rad] over the observations every 10 ms of a Spook simulation at step h."""
    traj = simulate(model, DURATION, h, initial=initial)
    return float(np.abs(traj.observations[:: int(round(EVERY / h))] - reference).max())


def errors_at_1_and_0_5_ms(model, initial, reference):
    return [max_error(model, initial, reference, h) for h in (1e-3, 5e-4)]


T = np.linspace(0.0, DURATION, int(round(DURATION / EVERY)) + 1)


def rigid(model):
    """``model`` with the joints' compliance of :data:`RIGID`."""
    return model.with_parameters(dict(zip(("eps_lin", "eps_rot", "tau"), RIGID)))


def test_rigid_compliance_is_far_below_the_estimation_one():
    assert RIGID[0] < SOFT[0] * 1e-4 and RIGID[1] < SOFT[1] * 1e-4


def test_urdf_arm_converges_at_first_order_in_h_to_the_rigid_lagrangian_reference():
    """Error ratio from h = 1 ms to 0.5 ms >= 1.6 (first order: 2); at the default compliance
    (eps_lin 1e-5 m/N, eps_rot 1e-3 rad/(N m)) the joints' give sets a plateau near 0.01 rad instead."""
    model = rigid(urdf_from_string(arm_urdf()))
    initial = model.initial_state(dict(zip(("q1", "q2", "q3"), Q0)))
    reference = arm_reference(T)
    assert np.ptp(reference, axis=0).min() > 0.5  # every joint swings
    coarse, fine = errors_at_1_and_0_5_ms(model, initial, reference)
    print(f"\narm, rigid compliance: {coarse:.3g} rad at h = 1 ms, {fine:.3g} at 0.5 ms, ratio {coarse / fine:.3f}")
    assert coarse / fine >= 1.6, (coarse, fine)
    assert fine < 5e-3
    soft = model.with_parameters(dict(zip(("eps_lin", "eps_rot"), SOFT)))
    coarse_soft, fine_soft = errors_at_1_and_0_5_ms(soft, initial, reference)
    print(f"arm, eps_lin 1e-5, eps_rot 1e-3: {coarse_soft:.3g} rad, {fine_soft:.3g}, ratio "
          f"{coarse_soft / fine_soft:.3f}")
    assert coarse_soft / fine_soft < 1.2 and fine_soft > 2 * fine  # the plateau rigid joints remove


def test_double_pendulum_converges_at_first_order_in_h_to_the_rigid_reference():
    model = rigid(double_pendulum())
    p = model.parameters.numpy_values()
    reference = R.simulate_reference(R.double_pendulum_ode, [1.2, -0.8, 0.0, 0.0], T, p, np.array([0, 0, -p["g"]]),
                                     rtol=1e-10)[:, :2]
    coarse, fine = errors_at_1_and_0_5_ms(model, model.initial_state({"q1": 1.2, "q2": -0.8}), reference)
    print(f"\ndouble pendulum: {coarse:.3g} rad at h = 1 ms, {fine:.3g} at 0.5 ms, ratio {coarse / fine:.3f}")
    assert coarse / fine >= 1.6, (coarse, fine)


def test_furuta_converges_at_first_order_in_h_to_the_rigid_reference():
    """The viscous Furuta pendulum (motor off, its shaft inertia in the reference), arm and pendulum swinging."""
    model = rigid(furuta(dry=False))
    p = model.parameters.numpy_values()
    reference = R.simulate_reference(R.furuta_ode, [0.3, 2.5, 0.0, 0.0], T, p, np.array([0, 0, -p["g"]]),
                                     rtol=1e-10)[:, :2]
    assert np.ptp(reference[:, 0]) > 0.1 and np.ptp(reference[:, 1]) > 1.0
    coarse, fine = errors_at_1_and_0_5_ms(model, model.initial_state({"theta": 0.3, "alpha": 2.5}), reference)
    print(f"\nFuruta: {coarse:.3g} rad at h = 1 ms, {fine:.3g} at 0.5 ms, ratio {coarse / fine:.3f}")
    assert coarse / fine >= 1.6, (coarse, fine)
