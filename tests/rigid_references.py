"""Independent minimal-coordinate references for 3D rigid-body mechanisms.

Nothing here imports ``mbfg``.  Each mechanism is described by its joint
angles; the equations of motion were derived by hand from Lagrange's
equations

    d/dt dT/dq' - dT/dq + dV/dq = Q,        T = 1/2 q'^T M(q) q',

which, with M depending on q, read

    M q'' + (dM/dt) q' - 1/2 d(q'^T M q')/dq = Q - dV/dq.

``Q`` collects viscous joint friction and applied joint torques.  The
energies (``*_energy``) are NOT built from these mass matrices: they use the
world positions and rotation matrices of ``*_positions`` and obtain the
velocities by complex-step differentiation along the motion,

    v = Im p(q + i h q') / h,   Rdot = Im R(q + i h q') / h,   h = 1e-30,

(exact to round-off since p, R are analytic in q), then
T = sum 1/2 m |v|^2 + 1/2 w_b^T J w_b with w_b = vee(R^T Rdot).  The tests
use that to check the mass matrices, the Coriolis terms and gravity.

Conventions
-----------
World frame z up.  Gravity acceleration vector ``g_vec`` (3,), default
(0, 0, -9.81) m/s^2, arbitrary direction allowed; potential
V = -sum_i m_i g_vec . p_i (zero at the world origin).  Rotation matrices are
R_world_body.  Inertias are principal inertias about each body's centre of
mass (CoM), in the body frame.  SI units, angles in rad.  States are
y = (angles..., rates...).

1. Pendulum  (``pendulum_*``), p = {m, J, d, b}
   Hinge about world y through the origin, R = Ry(th), CoM at
   Ry(th)(0, 0, -d) = (-d sin th, 0, -d cos th).  J = inertia about the
   body's own y axis through the CoM.
       (J + m d^2) th'' = m g_vec . dp/dth - b th',
       dp/dth = (-d cos th, 0, d sin th)
   (for g_vec = (0, 0, -g): -m g d sin th - b th').

2. Double pendulum  (``double_pendulum_*``), p = {m1, m2, l1, r1, r2, J1, J2,
   b1, b2}; optional tau(t) -> (tau1, tau2).
   Both hinge axes along world y.  q1 absolute angle of link 1, q2 angle of
   link 2 relative to link 1.  p1 = Ry(q1)(0,0,-r1), hinge 2 at
   Ry(q1)(0,0,-l1), p2 = hinge2 + Ry(q1+q2)(0,0,-r2).  With I_i = J_i + m_i r_i^2,
   h = m2 l1 r2 sin q2:
       M = [[I1 + I2 + m2 l1^2 + 2 m2 l1 r2 cos q2, I2 + m2 l1 r2 cos q2],
            [I2 + m2 l1 r2 cos q2,                   I2                 ]]
       C = (-h (2 q1' q2' + q2'^2),  h q1'^2)
       M q'' + C = m1 g.dp1/dq + m2 g.dp2/dq + (tau1 - b1 q1', tau2 - b2 q2')
   tau2 acts between the links (+tau2 on link 2, -tau2 on link 1), whose
   virtual work is tau2 dq2; likewise b2 acts on the relative rate.

3. Furuta pendulum  (``furuta_*``), p = {m_A, m_B, r_A, L_A, r_B, J_Ax, J_Ay,
   J_Az, J_Bx, J_By, J_Bz, K, J_s, b_1, b_2}; optional u(t) [V].
   R_A = Rz(th); p_A = R_A (r_A, 0, 0); hinge 2 at R_A (L_A, 0, 0), axis A's x.
   R_B = Rz(th) Rx(al); p_B = R_A (L_A, 0, 0) + R_B (0, 0, -r_B)
       = Rz(th) (L_A, r_B sin al, -r_B cos al).
   Angular velocities in body frames: w_A = (0, 0, th'),
   w_B = Rx(al)^T (0, 0, th') + (al', 0, 0) = (al', th' sin al, th' cos al).
   Velocity of B's CoM in A's frame:
       (-r_B sin al th', L_A th' + r_B cos al al', r_B sin al al').
   Kinetic energy (incl. motor shaft 1/2 J_s th'^2) gives, with s = sin al,
   c = cos al:
       M00 = J_s + J_Az + m_A r_A^2 + m_B L_A^2
             + (m_B r_B^2 + J_By) s^2 + J_Bz c^2
       M01 = M10 = m_B L_A r_B c
       M11 = J_Bx + m_B r_B^2
   (J_Ax, J_Ay do not enter: A only turns about its own z axis.)
   With D = m_B r_B^2 + J_By - J_Bz:
       C0 = 2 D s c th' al' - m_B L_A r_B s al'^2
       C1 = -D s c th'^2
   Generalised forces: Q = (K u - b_1 th', -b_2 al') plus gravity
   m_A g.dp_A/dq + m_B g.dp_B/dq with
       dp_A/dth = Rz(th)(0, r_A, 0)            dp_A/dal = 0
       dp_B/dth = Rz(th)(-r_B s, L_A, 0)       dp_B/dal = Rz(th)(0, r_B c, r_B s)
   (for g_vec = (0, 0, -g): -dV/dal = -m_B g r_B s, -dV/dth = 0).

Integration: ``simulate_reference`` (scipy DOP853, rtol = atol = 1e-12) and
``simulate_reference_zoh`` (piecewise-constant controls, one solve per hold
interval so no step straddles a control jump).
"""

from __future__ import annotations

import numpy as np
from scipy.integrate import solve_ivp

G_DEFAULT = np.array([0.0, 0.0, -9.81])

RTOL = 1e-12
ATOL = 1e-12
MAX_STEP = 0.02

_CSTEP = 1e-30  # complex-step size for velocities in the energy functions


# --------------------------------------------------------------------------
# Elementary rotations (work for complex angles, used by the complex step)
# --------------------------------------------------------------------------

def Rx(a):
    c, s = np.cos(a), np.sin(a)
    return np.array([[1.0, 0.0, 0.0], [0.0, c, -s], [0.0, s, c]], dtype=np.result_type(a, float))


def Ry(a):
    c, s = np.cos(a), np.sin(a)
    return np.array([[c, 0.0, s], [0.0, 1.0, 0.0], [-s, 0.0, c]], dtype=np.result_type(a, float))


def Rz(a):
    c, s = np.cos(a), np.sin(a)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]], dtype=np.result_type(a, float))


def _g(g_vec):
    return G_DEFAULT.copy() if g_vec is None else np.asarray(g_vec, dtype=float).reshape(3)


def _vee(S):
    return np.array([S[2, 1] - S[1, 2], S[0, 2] - S[2, 0], S[1, 0] - S[0, 1]]) / 2.0


def _rigid_energy(positions_fn, y, p, g_vec, masses, inertias, extra_kinetic=0.0):
    """Total energy from world CoM positions and rotations (complex step)."""
    y = np.asarray(y, dtype=float)
    n = y.size // 2
    q, qd = y[:n], y[n:]
    g = _g(g_vec)
    out = positions_fn(np.concatenate([q, qd]), p)
    outc = positions_fn(np.concatenate([q + 1j * _CSTEP * qd, qd]), p)
    nb = len(masses)
    pos, rots = out[:nb], out[nb:]
    vel = [np.imag(x) / _CSTEP for x in outc[:nb]]
    rdot = [np.imag(x) / _CSTEP for x in outc[nb:]]
    T = float(extra_kinetic)
    V = 0.0
    for m, J, x, v, Rm, Rd in zip(masses, inertias, pos, vel, rots, rdot):
        w_body = _vee(Rm.T @ Rd)
        T += 0.5 * m * float(v @ v) + 0.5 * float(w_body @ (np.diag(J) @ w_body))
        V -= m * float(g @ x)
    return T + V


# --------------------------------------------------------------------------
# 1. Pendulum
# --------------------------------------------------------------------------

def pendulum_positions(y, p):
    """(p_com, R) of the pendulum body for state y = (theta, theta_dot)."""
    th = y[0]
    R = Ry(th)
    return R @ np.array([0.0, 0.0, -p["d"]]), R


def pendulum_ode(t, y, p, g_vec=None):
    g = _g(g_vec)
    th, thd = y
    m, J, d, b = p["m"], p["J"], p["d"], p["b"]
    dp = np.array([-d * np.cos(th), 0.0, d * np.sin(th)])
    thdd = (m * (g @ dp) - b * thd) / (J + m * d * d)
    return np.array([thd, thdd])


def pendulum_energy(y, p, g_vec=None):
    return _rigid_energy(pendulum_positions, y, p, g_vec,
                         [p["m"]], [(0.0, p["J"], 0.0)])


# --------------------------------------------------------------------------
# 2. Double pendulum
# --------------------------------------------------------------------------

def double_pendulum_positions(y, p):
    """(p_1, p_2, R_1, R_2) world CoM positions and rotations of the links."""
    q1, q2 = y[0], y[1]
    R1 = Ry(q1)
    R2 = Ry(q1 + q2)
    p1 = R1 @ np.array([0.0, 0.0, -p["r1"]])
    hinge2 = R1 @ np.array([0.0, 0.0, -p["l1"]])
    p2 = hinge2 + R2 @ np.array([0.0, 0.0, -p["r2"]])
    return p1, p2, R1, R2


def double_pendulum_hinge2(y, p):
    return Ry(y[0]) @ np.array([0.0, 0.0, -p["l1"]])


def double_pendulum_mass_matrix(q, p):
    m2, l1, r2 = p["m2"], p["l1"], p["r2"]
    I1 = p["J1"] + p["m1"] * p["r1"] ** 2
    I2 = p["J2"] + m2 * r2 ** 2
    c2 = np.cos(q[1])
    M01 = I2 + m2 * l1 * r2 * c2
    return np.array([[I1 + I2 + m2 * l1 ** 2 + 2.0 * m2 * l1 * r2 * c2, M01],
                     [M01, I2]])


def double_pendulum_ode(t, y, p, g_vec=None, tau=None):
    g = _g(g_vec)
    q1, q2, q1d, q2d = y
    m1, m2, l1, r1, r2 = p["m1"], p["m2"], p["l1"], p["r1"], p["r2"]
    M = double_pendulum_mass_matrix((q1, q2), p)
    h = m2 * l1 * r2 * np.sin(q2)
    C = np.array([-h * (2.0 * q1d * q2d + q2d * q2d), h * q1d * q1d])
    c1, s1 = np.cos(q1), np.sin(q1)
    c12, s12 = np.cos(q1 + q2), np.sin(q1 + q2)
    # d/dq of Ry(a)(0,0,-r) = (-r sin a, 0, -r cos a)  ->  -r (cos a, 0, -sin a)
    e1 = np.array([c1, 0.0, -s1])
    e12 = np.array([c12, 0.0, -s12])
    dp1_dq1 = -r1 * e1
    dp2_dq1 = -l1 * e1 - r2 * e12
    dp2_dq2 = -r2 * e12
    Qg = np.array([m1 * (g @ dp1_dq1) + m2 * (g @ dp2_dq1), m2 * (g @ dp2_dq2)])
    tq = np.zeros(2) if tau is None else np.asarray(tau(t), dtype=float).reshape(2)
    Q = Qg + tq - np.array([p["b1"] * q1d, p["b2"] * q2d])
    qdd = np.linalg.solve(M, Q - C)
    return np.array([q1d, q2d, qdd[0], qdd[1]])


def double_pendulum_energy(y, p, g_vec=None):
    return _rigid_energy(double_pendulum_positions, y, p, g_vec,
                         [p["m1"], p["m2"]],
                         [(0.0, p["J1"], 0.0), (0.0, p["J2"], 0.0)])


# --------------------------------------------------------------------------
# 3. Furuta pendulum
# --------------------------------------------------------------------------

def furuta_positions(y, p):
    """(p_A, p_B, R_A, R_B): world CoM positions and rotations of arm and pendulum."""
    th, al = y[0], y[1]
    RA = Rz(th)
    RB = RA @ Rx(al)
    pA = RA @ np.array([p["r_A"], 0.0, 0.0])
    pB = RA @ np.array([p["L_A"], 0.0, 0.0]) + RB @ np.array([0.0, 0.0, -p["r_B"]])
    return pA, pB, RA, RB


def furuta_hinge2(y, p):
    return Rz(y[0]) @ np.array([p["L_A"], 0.0, 0.0])


def furuta_mass_matrix(q, p):
    al = q[1]
    s, c = np.sin(al), np.cos(al)
    mB, LA, rB = p["m_B"], p["L_A"], p["r_B"]
    M00 = (p["J_s"] + p["J_Az"] + p["m_A"] * p["r_A"] ** 2 + mB * LA ** 2
           + (mB * rB ** 2 + p["J_By"]) * s * s + p["J_Bz"] * c * c)
    M01 = mB * LA * rB * c
    M11 = p["J_Bx"] + mB * rB ** 2
    return np.array([[M00, M01], [M01, M11]])


def furuta_ode(t, y, p, g_vec=None, u=None):
    g = _g(g_vec)
    th, al, thd, ald = y
    s, c = np.sin(al), np.cos(al)
    mA, mB, rA, LA, rB = p["m_A"], p["m_B"], p["r_A"], p["L_A"], p["r_B"]
    M = furuta_mass_matrix((th, al), p)
    D = mB * rB ** 2 + p["J_By"] - p["J_Bz"]
    C = np.array([2.0 * D * s * c * thd * ald - mB * LA * rB * s * ald * ald,
                  -D * s * c * thd * thd])
    RA = Rz(th)
    dpA_dth = RA @ np.array([0.0, rA, 0.0])
    dpB_dth = RA @ np.array([-rB * s, LA, 0.0])
    dpB_dal = RA @ np.array([0.0, rB * c, rB * s])
    Qg = np.array([mA * (g @ dpA_dth) + mB * (g @ dpB_dth), mB * (g @ dpB_dal)])
    uu = 0.0 if u is None else float(np.asarray(u(t), dtype=float).reshape(()))
    Q = Qg + np.array([p["K"] * uu - p["b_1"] * thd, -p["b_2"] * ald])
    qdd = np.linalg.solve(M, Q - C)
    return np.array([thd, ald, qdd[0], qdd[1]])


def furuta_energy(y, p, g_vec=None):
    return _rigid_energy(furuta_positions, y, p, g_vec,
                         [p["m_A"], p["m_B"]],
                         [(p["J_Ax"], p["J_Ay"], p["J_Az"]),
                          (p["J_Bx"], p["J_By"], p["J_Bz"])],
                         extra_kinetic=0.5 * p["J_s"] * float(y[2]) ** 2)


# --------------------------------------------------------------------------
# Integration
# --------------------------------------------------------------------------

def simulate_reference(ode, y0, t_eval, *args, rtol=RTOL, atol=ATOL, max_step=MAX_STEP):
    """Integrate ``ode(t, y, *args)`` from y0 at t_eval[0]; states at t_eval.

    Returns an array of shape (len(t_eval), len(y0)).
    """
    t_eval = np.asarray(t_eval, dtype=float)
    y0 = np.asarray(y0, dtype=float)
    if t_eval.size == 1 or t_eval[-1] == t_eval[0]:
        return np.tile(y0, (t_eval.size, 1))
    sol = solve_ivp(ode, (t_eval[0], t_eval[-1]), y0, method="DOP853", t_eval=t_eval,
                    args=args, rtol=rtol, atol=atol, max_step=max_step)
    if not sol.success:
        raise RuntimeError(f"reference integration failed: {sol.message}")
    return sol.y.T


def simulate_reference_zoh(ode_fn, y0, t_grid, controls, p, g_vec=None, *,
                           rtol=RTOL, atol=ATOL, max_step=MAX_STEP):
    """Zero-order-hold controls: controls[k] is held on [t_grid[k], t_grid[k+1]).

    ``ode_fn(t, y, p, g_vec, ctrl)`` with ctrl a callable of t (``furuta_ode``
    with scalar u_k, ``double_pendulum_ode`` with (tau1_k, tau2_k)).  Each hold
    interval is a separate solve, so the integrator never steps across a jump.
    ``controls`` has len(t_grid) - 1 entries (a trailing extra entry, i.e.
    len(t_grid), is accepted and ignored).  Returns states at t_grid, shape
    (len(t_grid), len(y0)).
    """
    t_grid = np.asarray(t_grid, dtype=float)
    controls = np.asarray(controls, dtype=float)
    n_int = t_grid.size - 1
    if controls.shape[0] not in (n_int, n_int + 1):
        raise ValueError("controls must have len(t_grid) - 1 (or len(t_grid)) entries")
    y = np.asarray(y0, dtype=float).copy()
    out = np.empty((t_grid.size, y.size))
    out[0] = y
    for k in range(n_int):
        ck = controls[k].copy() if controls.ndim > 1 else float(controls[k])
        sol = solve_ivp(ode_fn, (t_grid[k], t_grid[k + 1]), y, method="DOP853",
                        args=(p, g_vec, (lambda t, ck=ck: ck)),
                        rtol=rtol, atol=atol, max_step=max_step)
        if not sol.success:
            raise RuntimeError(f"reference integration failed: {sol.message}")
        y = sol.y[:, -1]
        out[k + 1] = y
    return out
