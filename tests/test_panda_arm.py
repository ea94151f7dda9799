"""The 7-DOF Panda arm of ``datasets/panda.urdf`` (Gaz et al. 2019 inertials) loaded by mbfg.urdf, against an
independent serial-chain computation from the URDF text: forward kinematics with the joint origins' rpy,
the joint-space mass matrix M(q) = sum_k m_k Jv_k^T Jv_k + Jw_k^T R_k I_k R_k^T Jw_k with the full (non-diagonal)
inertia tensors as written, and the gravity torques dV/dq."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from mbfg import spook
from mbfg.trees import RIGID
from mbfg.urdf import load_urdf

URDF = Path(__file__).resolve().parents[1] / "datasets" / "panda.urdf"
JOINTS = [f"panda_joint{i}" for i in range(1, 8)]
G = 9.81  # [m/s^2], the URDF models' default g
Q0 = np.array([0.3, -0.6, 0.4, -2.0, 0.5, 1.4, -0.7])  # [rad], a pose with every link off its symmetry
QDOT = np.array([0.4, -0.3, 0.5, 0.6, -0.8, 0.7, 1.1])  # [rad/s]


def _chain(q: np.ndarray) -> list[tuple[np.ndarray, np.ndarray, float, np.ndarray, np.ndarray]]:
    """Per link k: (joint origin o_k (3,), joint axis z_k (3,), mass, CoM c_k (3,), inertia about the CoM in the
    world (3, 3)), all in the world, read from the URDF text with nothing of mbfg."""
    root = ET.parse(URDF).getroot()
    links = {link.get("name"): link for link in root.findall("link")}
    T = np.eye(4)
    out = []
    for joint, angle in zip(root.findall("joint"), q):
        origin = joint.find("origin")
        local = np.eye(4)
        local[:3, :3] = Rotation.from_euler("xyz", [float(x) for x in origin.get("rpy").split()]).as_matrix()
        local[:3, 3] = [float(x) for x in origin.get("xyz").split()]
        T = T @ local  # the joint frame; URDF axis z
        o, z = T[:3, 3].copy(), T[:3, 2].copy()
        turn = np.eye(4)
        turn[:3, :3] = Rotation.from_rotvec(angle * np.array([0.0, 0.0, 1.0])).as_matrix()
        T = T @ turn  # the child link frame
        inertial = links[joint.find("child").get("link")].find("inertial")
        c_local = np.array([float(x) for x in inertial.find("origin").get("xyz").split()])
        i = {k: float(v) for k, v in inertial.find("inertia").attrib.items()}
        I_local = np.array([[i["ixx"], i["ixy"], i["ixz"]], [i["ixy"], i["iyy"], i["iyz"]],
                            [i["ixz"], i["iyz"], i["izz"]]])
        R = T[:3, :3]
        out.append((o, z, float(inertial.find("mass").get("value")), T[:3, :3] @ c_local + T[:3, 3],
                    R @ I_local @ R.T))
    return out


def _mass_matrix_and_gravity(q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """M(q) (7, 7) [kg m^2] and the gravity torques dV/dq (7,) [N m], V = sum_k m_k g z_k."""
    chain = _chain(q)
    M, tau = np.zeros((7, 7)), np.zeros(7)
    for k, (_, _, m, c, I) in enumerate(chain):
        Jv, Jw = np.zeros((3, 7)), np.zeros((3, 7))
        for i in range(k + 1):
            o, z = chain[i][0], chain[i][1]
            Jv[:, i], Jw[:, i] = np.cross(z, c - o), z
        M += m * Jv.T @ Jv + Jw.T @ I @ Jw
        tau += m * G * Jv[2]
    return M, tau


@pytest.fixture(scope="module")
def arm():
    return load_urdf(URDF, motors=JOINTS)


def test_panda_loads_with_seven_hinges_and_torque_motors(arm):
    assert arm.observations == tuple(JOINTS)
    assert arm.controls == tuple(f"u_{j}" for j in JOINTS)
    assert arm.nb == 7
    masses = [arm.parameters[f"m_panda_link{i}"].default for i in range(1, 8)]
    np.testing.assert_allclose(sum(masses), sum(m for _, _, m, _, _ in _chain(Q0)), rtol=1e-12)


def test_kinetic_energy_equals_half_qdot_M_qdot_with_full_inertia_tensors(arm):
    # Places the bodies (frames, CoMs, principal axes of the non-diagonal tensors) and their velocities
    # from the joint rates: 0.5 v^T M_body v must be the joint-space 0.5 qdot^T M(q) qdot.
    x = arm.initial_state(dict(zip(JOINTS, Q0)), dict(zip(JOINTS, QDOT)), numpy=True)
    M_body = np.asarray(arm.mass_diagonal(arm.parameters.arrays()))
    v = np.asarray(x.velocity())
    M, _ = _mass_matrix_and_gravity(Q0)
    np.testing.assert_allclose(0.5 * v @ (M_body * v), 0.5 * QDOT @ M @ QDOT, rtol=1e-10)
    np.testing.assert_allclose(x.r, [c for _, _, _, c, _ in _chain(Q0)], atol=1e-12)


def test_gravity_torques_hold_the_arm_still_and_without_them_it_falls(arm):
    # u = dV/dq (computed here, not by mbfg) balances gravity: with joints rigid at the step's scale
    # (mbfg.trees.RIGID) the arm stays where it is over 0.2 s; with u = 0 it falls by tenths of a radian.
    _, tau = _mass_matrix_and_gravity(Q0)
    rigid = dict(zip(("eps_lin", "eps_rot", "tau"), RIGID))
    x0 = arm.initial_state(dict(zip(JOINTS, Q0)))
    steps = 200

    def run(u: np.ndarray) -> np.ndarray:
        return spook.simulate(arm, steps * 1e-3, 1e-3, initial=x0, controls=u, parameters=rigid,
                              chunk=steps).observations

    held, free = run(np.tile(tau, (steps, 1))), run(np.zeros((steps, 7)))
    assert np.max(np.abs(held - Q0)) < 1e-5
    assert np.max(np.abs(free[-1] - Q0)) > 0.1


def test_reference_mass_matrix_and_gravity_match_mujoco():
    # The reference above against a peer on the same file: MuJoCo's own URDF import (mj_fullM, qfrc_bias at rest).
    mujoco = pytest.importorskip("mujoco")
    m = mujoco.MjModel.from_xml_path(str(URDF))
    m.opt.gravity[:] = (0.0, 0.0, -G)
    d = mujoco.MjData(m)
    d.qpos[:] = Q0
    mujoco.mj_forward(m, d)
    M = np.zeros((7, 7))
    if hasattr(d, "qM"):  # MuJoCo before 3.5: mj_fullM(m, dst, qM)
        mujoco.mj_fullM(m, M, d.qM)
    else:
        mujoco.mj_fullM(m, d, M)
    M_ref, tau_ref = _mass_matrix_and_gravity(Q0)
    np.testing.assert_allclose(M, M_ref, rtol=0, atol=1e-12)
    np.testing.assert_allclose(d.qfrc_bias, tau_ref, rtol=0, atol=1e-12)


@pytest.mark.parametrize("name,placement", [("panda", "dense"), ("panda", "scatter"), ("particle", "dense"),
                                            ("linear-stage", "dense")])
def test_position_jacobian_equals_central_differences_along_boxplus(name, placement, arm, monkeypatch):
    # J_pos (12 local lanes per part, mbfg.rigid.kinematics.positions_and_jacobian, its lanes placed by the
    # constant 0/1 product or, for large models, by a scatter) against central differences of the position
    # functions at q boxplus (+-eps e_i): hinges, a slider, a contact.
    from mbfg import load_model
    from mbfg.rigid import kinematics

    if placement == "scatter":
        monkeypatch.setattr(kinematics, "DENSE_PLACEMENT_MAX", 0)
    from mbfg import quaternion as quat
    from mbfg._jax import jax, jnp

    model = arm if name == "panda" else load_model(name)
    rng = np.random.default_rng(3)
    x = model.initial_state({j.name: 0.4 for j in model.axial})
    x = x._replace(r=x.r + 0.01 * rng.normal(size=np.shape(x.r)))
    p = model.parameters.arrays()
    f, J = (np.asarray(a) for a in model.position_jacobian(x, p))

    def positions(delta: np.ndarray) -> np.ndarray:
        d = jnp.asarray(delta.reshape(-1, 6))
        e = jax.vmap(quat.boxplus)(jnp.asarray(x.e), d[:, 3:])
        return np.asarray(model.position_functions(jnp.asarray(x.r) + d[:, :3], jax.vmap(quat.to_matrix)(e), p))

    eps = 1e-6
    columns = [(positions(eps * e) - positions(-eps * e)) / (2 * eps) for e in np.eye(6 * model.nb)]
    np.testing.assert_allclose(f, positions(np.zeros(6 * model.nb)), rtol=0, atol=1e-14)
    np.testing.assert_allclose(J, np.stack(columns, axis=1), rtol=0, atol=1e-8)
