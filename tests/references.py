"""Independent physics reference solutions for the MBSE test mechanisms.

Nothing here uses natural coordinates or imports ``mbfg``.  Every mechanism is
described by one minimal coordinate (an angle), its kinetic energy is written
from the rigid-body formula

    T = sum_links  1/2 m |v_cog|^2 + 1/2 I_cog omega_link^2

and the equation of motion follows from Lagrange's equations.  For a
one-degree-of-freedom system with T = 1/2 M(theta) theta'^2 and potential
V(theta), Lagrange gives

    M(theta) theta'' + 1/2 M'(theta) theta'^2 + dV/dtheta = tau,

where ``tau`` is a torque applied on the coordinate theta (positive in the
direction of increasing theta).  All position derivatives with respect to theta
are computed analytically (first and second order velocity/acceleration
analysis of the loop closure), so M'(theta) is exact to round-off.

Units: SI throughout -- metres, kilograms, seconds, radians, newtons, N m.
Gravity acts along -y with magnitude ``g`` [m/s^2].

Data files (from MBDS/multibody-state-estimation, see
``../shared/data/mbse/README.md``) are resolved relative to this file:
``Path(__file__).resolve().parents[1] / '..' / 'shared' / 'data' / 'mbse'``.

Contents
--------
Four-bar linkage (``fourbars1.yaml``):
    fourbar_points, fourbar_kinematics, fourbar_terms, fourbar_mass,
    fourbar_potential, fourbar_energy, fourbar_acceleration,
    fourbar_forward, fourbar_inverse_torque,
    crank_trajectory, load_crank_trajectory, load_adams_torque
Simple pendulum (``pendulum1.yaml``):
    pendulum_forward, pendulum_energy

Sign convention for the Adams comparison (checked by
``tests/test_references.py``): the closed-form crank torque ``tau`` of
:func:`fourbar_inverse_torque` (the torque the motor must apply to the crank,
positive counter-clockwise, i.e. in the direction of increasing theta) equals
MINUS the torque column of ``InverseDynamics_4bars_MSC.tab``.  At t = 0 the
crank is horizontal, at rest, with angular acceleration 4.8 rad/s^2; the
required driving torque is M(0)*4.8 + dV/dtheta(0) = 4.5556*4.8 + 4.5*9.81
= +66.01 N m, while Adams lists -66.003 N m (presumably Adams reports the
reaction torque of the motion on its motor, opposite to the driving torque).
With that sign the RMS difference over the 10 s record is 0.0099 % of the
peak |torque| (66.0 N m), max 0.013 %.

Free gravity swing from rest at theta = 0 (for users of the reference): the
crank swings clockwise to theta_min = -3.754333 rad (-215.107 deg, where
V(theta) = V(0)) and back, periodic with period 2.0673 s at g = 9.81
(2.0684 s at g = 9.8; theta_min does not depend on g).  It therefore crosses
-90 deg, -120 deg and -180 deg (an atan2 crank angle would wrap there) but
never +90 deg.  At theta = -120 deg crank and coupler are collinear
(folded): P2 = (0.5, sqrt(3)/2) is the rocker's dead point, where dP2/dtheta
= 0.  This is not a singularity of the crank coordinate nor of the
natural-coordinate constraint Jacobian (whose smallest singular value stays
>= 1.315); coupler and rocker never come close to collinear (|sin| of their
angle >= 0.832).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
from scipy.integrate import solve_ivp

# --------------------------------------------------------------------------
# Data location
# --------------------------------------------------------------------------

#: Directory with the MBSE reference data (YAML mechanisms, Adams output).
MBSE_DATA_DIR = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "mbse"

# --------------------------------------------------------------------------
# Four-bar linkage parameters (fourbars1.yaml)
# --------------------------------------------------------------------------

#: Fixed pivot of the crank, A = (0, 0) [m].
FB_A = np.array([0.0, 0.0])
#: Fixed pivot of the rocker, D = (4, 0) [m] ("B" / xb in the YAML).
FB_D = np.array([4.0, 0.0])
#: Crank length A-P1 [m].
FB_L1 = 1.0
#: Coupler length P1-P2 [m].
FB_L2 = 2.0
#: Rocker length P2-D [m] ("auto" in the YAML: |(1,2)-(4,0)| = sqrt(13)).
FB_L3 = float(np.sqrt(13.0))
#: Link masses [kg]: crank, coupler, rocker.
FB_M1, FB_M2, FB_M3 = 1.0, 2.0, 4.0
#: Inertias about the centre of gravity [kg m^2] of uniform bars: m L^2 / 12
#: (equivalently I0 = m L^2 / 3 about the first point, as in the YAML).
FB_I1 = FB_M1 * FB_L1**2 / 12.0
FB_I2 = FB_M2 * FB_L2**2 / 12.0
FB_I3 = FB_M3 * FB_L3**2 / 12.0

#: Default gravity [m/s^2], along -y.
G_DEFAULT = 9.81


def _cross(a_x, a_y, b_x, b_y):
    """z component of the planar cross product a x b."""
    return a_x * b_y - a_y * b_x


def fourbar_points(theta):
    """Positions of the two moving points for crank angle ``theta``.

    Loop closure by circle intersection: P1 = A + L1 (cos theta, sin theta);
    P2 is the intersection of the circle of radius L2 about P1 with the circle
    of radius L3 about D, on the left of the direction P1 -> D (the "upper"
    assembly branch, P2 = (1, 2) at theta = 0).  For this Grashof crank-rocker
    (1 + 4 < 2 + sqrt(13)) the distance |D - P1| stays in [3, 5], strictly
    inside (|L2 - L3|, L2 + L3) = (1.61, 5.61), so the branch never degenerates
    and this single formula is continuous (smooth, 2 pi periodic) for all theta.

    Parameters
    ----------
    theta : float or array_like, shape (...)
        Crank angle [rad], the absolute angle of segment A -> P1 measured from
        +x, counter-clockwise positive.

    Returns
    -------
    x1, y1, x2, y2 : ndarray, each of shape (...)
        Coordinates [m] of P1 (crank tip) and P2 (coupler-rocker joint).
    """
    theta = np.asarray(theta, dtype=float)
    x1 = FB_A[0] + FB_L1 * np.cos(theta)
    y1 = FB_A[1] + FB_L1 * np.sin(theta)
    dx = FB_D[0] - x1
    dy = FB_D[1] - y1
    d2 = dx * dx + dy * dy
    d = np.sqrt(d2)
    ux, uy = dx / d, dy / d
    a = (FB_L2**2 - FB_L3**2 + d2) / (2.0 * d)
    h = np.sqrt(FB_L2**2 - a * a)
    # left normal of u is (-uy, ux)
    x2 = x1 + a * ux - h * uy
    y2 = y1 + a * uy + h * ux
    return x1, y1, x2, y2


def fourbar_kinematics(theta):
    """Positions and their first two derivatives with respect to theta.

    Velocity analysis differentiates the two loop-closure equations
    (P2-P1).(P2-P1) = L2^2 and (P2-D).(P2-D) = L3^2 once and twice with
    respect to theta and solves the resulting 2x2 linear systems for P2' and
    P2'' (P1' = (-sin, cos), P1'' = -(cos, sin) times L1).

    Parameters
    ----------
    theta : float or array_like, shape (...)
        Crank angle [rad].

    Returns
    -------
    dict of ndarray, each of shape (..., 2)
        ``p1, p2``      positions [m];
        ``dp1, dp2``    d/dtheta of the positions [m/rad];
        ``ddp1, ddp2``  d^2/dtheta^2 of the positions [m/rad^2].
    """
    theta = np.asarray(theta, dtype=float)
    x1, y1, x2, y2 = fourbar_points(theta)
    c, s = np.cos(theta), np.sin(theta)
    p1 = np.stack([x1, y1], axis=-1)
    p2 = np.stack([x2, y2], axis=-1)
    dp1 = FB_L1 * np.stack([-s, c], axis=-1)
    ddp1 = -FB_L1 * np.stack([c, s], axis=-1)

    r = p2 - p1          # coupler vector
    w = p2 - FB_D        # rocker vector (from D)
    # Linear system  [r; w] v = b  solved by Cramer's rule (vectorized).
    det = _cross(r[..., 0], r[..., 1], w[..., 0], w[..., 1])

    def solve(b0, b1):
        vx = (b0 * w[..., 1] - b1 * r[..., 1]) / det
        vy = (r[..., 0] * b1 - w[..., 0] * b0) / det
        return np.stack([vx, vy], axis=-1)

    # first order: r.(dp2 - dp1) = 0 ; w.dp2 = 0
    dp2 = solve(np.sum(r * dp1, axis=-1), np.zeros_like(det))
    # second order: r.(ddp2 - ddp1) + |dp2 - dp1|^2 = 0 ; w.ddp2 + |dp2|^2 = 0
    dr = dp2 - dp1
    ddp2 = solve(np.sum(r * ddp1, axis=-1) - np.sum(dr * dr, axis=-1),
                 -np.sum(dp2 * dp2, axis=-1))
    return dict(p1=p1, p2=p2, dp1=dp1, dp2=dp2, ddp1=ddp1, ddp2=ddp2)


def _fourbar_links(k):
    """Per-link (mass, I_cog, length, cog, dcog, ddcog, r, dr, ddr) from kinematics.

    ``r`` is the link vector from its first to its second point; the link's
    absolute angle phi satisfies phi' = (r x r') / L^2 and
    phi'' = (r x r'') / L^2 (|r| = L is constant).
    """
    zero = np.zeros_like(k["p1"])
    A = np.broadcast_to(FB_A, k["p1"].shape)
    D = np.broadcast_to(FB_D, k["p1"].shape)
    links = [
        # crank A -> P1
        (FB_M1, FB_I1, FB_L1, A, zero, zero, k["p1"], k["dp1"], k["ddp1"]),
        # coupler P1 -> P2
        (FB_M2, FB_I2, FB_L2, k["p1"], k["dp1"], k["ddp1"], k["p2"], k["dp2"], k["ddp2"]),
        # rocker P2 -> D
        (FB_M3, FB_I3, FB_L3, k["p2"], k["dp2"], k["ddp2"], D, zero, zero),
    ]
    out = []
    for m, I, L, a, da, dda, b, db, ddb in links:
        cog, dcog, ddcog = 0.5 * (a + b), 0.5 * (da + db), 0.5 * (dda + ddb)
        r, dr, ddr = b - a, db - da, ddb - dda
        out.append((m, I, L, cog, dcog, ddcog, r, dr, ddr))
    return out


def fourbar_terms(theta, g=G_DEFAULT):
    """All terms of the Lagrangian equation at once (one kinematic analysis).

    Parameters
    ----------
    theta : float or array_like, shape (...)
        Crank angle [rad].
    g : float
        Gravity [m/s^2] along -y.

    Returns
    -------
    M, dM, V, dV : ndarray, each of shape (...)
        Generalized inertia M(theta) [kg m^2], dM/dtheta [kg m^2/rad],
        potential V(theta) = g sum m y_cog [J] and dV/dtheta [N m].
        M = sum_links m |dcog/dtheta|^2 + I_cog (dphi/dtheta)^2, so the kinetic
        energy is T = 1/2 M omega^2.
    """
    k = fourbar_kinematics(theta)
    M = dM = V = dV = 0.0
    for m, I, L, cog, dcog, ddcog, r, dr, ddr in _fourbar_links(k):
        dphi = _cross(r[..., 0], r[..., 1], dr[..., 0], dr[..., 1]) / L**2
        ddphi = _cross(r[..., 0], r[..., 1], ddr[..., 0], ddr[..., 1]) / L**2
        M = M + m * np.sum(dcog * dcog, axis=-1) + I * dphi**2
        dM = dM + 2.0 * m * np.sum(dcog * ddcog, axis=-1) + 2.0 * I * dphi * ddphi
        V = V + g * m * cog[..., 1]
        dV = dV + g * m * dcog[..., 1]
    return np.asarray(M), np.asarray(dM), np.asarray(V), np.asarray(dV)


def _fourbar_terms_scalar(theta: float, g: float):
    """Scalar, pure-Python version of :func:`fourbar_terms` (same formulas).

    Used inside the ODE right-hand side, where NumPy's per-call overhead on
    scalars dominates; ``tests/test_references.py`` checks it against the
    vectorized version.  Returns the floats (M, dM, V, dV).
    """
    c, s = math.cos(theta), math.sin(theta)
    x1, y1 = FB_L1 * c, FB_L1 * s
    dx1, dy1 = -FB_L1 * s, FB_L1 * c
    ddx1, ddy1 = -x1, -y1
    # P2 by circle intersection (upper branch), as in fourbar_points
    ex, ey = FB_D[0] - x1, FB_D[1] - y1
    d2 = ex * ex + ey * ey
    d = math.sqrt(d2)
    ux, uy = ex / d, ey / d
    a = (FB_L2**2 - FB_L3**2 + d2) / (2.0 * d)
    h = math.sqrt(FB_L2**2 - a * a)
    x2, y2 = x1 + a * ux - h * uy, y1 + a * uy + h * ux
    rx, ry = x2 - x1, y2 - y1
    wx, wy = x2 - FB_D[0], y2 - FB_D[1]
    det = rx * wy - ry * wx
    b0 = rx * dx1 + ry * dy1
    dx2, dy2 = b0 * wy / det, -wx * b0 / det
    drx, dry = dx2 - dx1, dy2 - dy1
    b0 = rx * ddx1 + ry * ddy1 - (drx * drx + dry * dry)
    b1 = -(dx2 * dx2 + dy2 * dy2)
    ddx2, ddy2 = (b0 * wy - b1 * ry) / det, (rx * b1 - wx * b0) / det
    ddrx, ddry = ddx2 - ddx1, ddy2 - ddy1
    # crank A -> P1 (A fixed at the origin)
    dphi1 = (x1 * dy1 - y1 * dx1) / FB_L1**2
    ddphi1 = (x1 * ddy1 - y1 * ddx1) / FB_L1**2
    # coupler P1 -> P2
    dphi2 = (rx * dry - ry * drx) / FB_L2**2
    ddphi2 = (rx * ddry - ry * ddrx) / FB_L2**2
    # rocker P2 -> D: link vector D - P2 = -w, derivatives -dP2, -ddP2
    dphi3 = (wx * dy2 - wy * dx2) / FB_L3**2
    ddphi3 = (wx * ddy2 - wy * ddx2) / FB_L3**2
    # centres of gravity (mid-link) and their derivatives
    c1 = (0.5 * dx1, 0.5 * dy1, 0.5 * ddx1, 0.5 * ddy1, 0.5 * y1)
    c2 = (0.5 * (dx1 + dx2), 0.5 * (dy1 + dy2), 0.5 * (ddx1 + ddx2),
          0.5 * (ddy1 + ddy2), 0.5 * (y1 + y2))
    c3 = (0.5 * dx2, 0.5 * dy2, 0.5 * ddx2, 0.5 * ddy2, 0.5 * (y2 + FB_D[1]))
    M = dM = V = dV = 0.0
    for m, I, (cx, cy, ccx, ccy, yc), dp, ddp in (
            (FB_M1, FB_I1, c1, dphi1, ddphi1),
            (FB_M2, FB_I2, c2, dphi2, ddphi2),
            (FB_M3, FB_I3, c3, dphi3, ddphi3)):
        M += m * (cx * cx + cy * cy) + I * dp * dp
        dM += 2.0 * m * (cx * ccx + cy * ccy) + 2.0 * I * dp * ddp
        V += g * m * yc
        dV += g * m * cy
    return M, dM, V, dV


def fourbar_mass(theta):
    """Generalized mass M(theta) [kg m^2] and dM/dtheta [kg m^2/rad].

    ``theta`` [rad], shape (...); both results have shape (...).  See
    :func:`fourbar_terms`.
    """
    M, dM, _, _ = fourbar_terms(theta)
    return M, dM


def fourbar_potential(theta, g=G_DEFAULT):
    """Gravitational potential V(theta) [J] and dV/dtheta [N m].

    V = g sum_links m y_cog (zero level y = 0, gravity along -y); dV/dtheta is
    the static torque needed to hold the linkage.  ``theta`` [rad], shape (...);
    both results have shape (...).
    """
    _, _, V, dV = fourbar_terms(theta, g)
    return V, dV


def fourbar_energy(theta, omega, g=G_DEFAULT):
    """Total mechanical energy E = 1/2 M(theta) omega^2 + V(theta) [J].

    ``theta`` [rad] and ``omega`` [rad/s] broadcast together; result has their
    broadcast shape.
    """
    M, _, V, _ = fourbar_terms(theta, g)
    return 0.5 * M * np.asarray(omega) ** 2 + V


def fourbar_acceleration(theta, omega, g=G_DEFAULT, tau=0.0):
    """Crank angular acceleration [rad/s^2] from Lagrange's equation.

    theta'' = (tau - 1/2 M' omega^2 - dV/dtheta) / M.
    ``tau`` [N m] is the torque applied to the crank (positive along +theta).
    """
    M, dM, _, dV = fourbar_terms(theta, g)
    return (tau - 0.5 * dM * np.asarray(omega) ** 2 - dV) / M


def fourbar_forward(
    t_eval,
    g: float = G_DEFAULT,
    theta0: float = 0.0,
    omega0: float = 0.0,
    rtol: float = 1e-10,
    atol: float = 1e-12,
    torque: Callable[[float], float] | None = None,
) -> dict:
    """Forward dynamics of the four-bar linkage in the crank angle.

    Integrates M(theta) theta'' + 1/2 M'(theta) theta'^2 = -dV/dtheta + tau(t)
    with ``scipy.integrate.solve_ivp`` (DOP853) from t_eval[0].

    Parameters
    ----------
    t_eval : array_like, shape (n,)
        Increasing output times [s]; integration starts at ``t_eval[0]``.
    g : float
        Gravity [m/s^2] along -y.
    theta0, omega0 : float
        Initial crank angle [rad] and angular velocity [rad/s] at t_eval[0].
        theta0 = 0 gives P1 = (1, 0), P2 = (1, 2).
    rtol, atol : float
        Integrator tolerances.
    torque : callable t -> float, optional
        Applied crank torque [N m] as a function of time (positive along
        +theta).  None means a free (gravity-only) motion.

    Returns
    -------
    dict of ndarray, each of shape (n,)
        ``t`` [s], ``theta`` [rad], ``omega`` [rad/s], ``alpha`` [rad/s^2],
        ``x1, y1, x2, y2`` [m] (points P1, P2), ``vx1, vy1, vx2, vy2`` [m/s],
        ``energy`` [J] (kinetic + potential; includes work of ``torque`` only
        implicitly, i.e. it is conserved only when torque is None).
    """
    t_eval = np.asarray(t_eval, dtype=float)

    def rhs(t, y):
        tau = 0.0 if torque is None else float(torque(t))
        M, dM, _, dV = _fourbar_terms_scalar(float(y[0]), g)
        return [y[1], (tau - 0.5 * dM * y[1] * y[1] - dV) / M]

    sol = solve_ivp(rhs, (t_eval[0], t_eval[-1]), [theta0, omega0], method="DOP853",
                    t_eval=t_eval, rtol=rtol, atol=atol)
    if not sol.success:
        raise RuntimeError(f"fourbar_forward integration failed: {sol.message}")
    theta, omega = sol.y
    tau = np.zeros_like(theta) if torque is None else np.array([float(torque(t)) for t in sol.t])
    k = fourbar_kinematics(theta)
    return dict(
        t=sol.t,
        theta=theta,
        omega=omega,
        alpha=fourbar_acceleration(theta, omega, g, tau),
        x1=k["p1"][:, 0], y1=k["p1"][:, 1], x2=k["p2"][:, 0], y2=k["p2"][:, 1],
        vx1=k["dp1"][:, 0] * omega, vy1=k["dp1"][:, 1] * omega,
        vx2=k["dp2"][:, 0] * omega, vy2=k["dp2"][:, 1] * omega,
        energy=fourbar_energy(theta, omega, g),
    )


def fourbar_inverse_torque(theta, omega, alpha, g=G_DEFAULT):
    """Crank torque needed for a prescribed crank motion (closed form).

    tau = M(theta) alpha + 1/2 M'(theta) omega^2 + dV/dtheta.

    This is the driving torque applied TO the crank, positive along +theta
    (counter-clockwise).  It equals MINUS the torque column of the MSC Adams
    file ``InverseDynamics_4bars_MSC.tab`` (see module docstring).

    Parameters
    ----------
    theta, omega, alpha : array_like, broadcastable shapes
        Crank angle [rad], angular velocity [rad/s], acceleration [rad/s^2].
    g : float
        Gravity [m/s^2].

    Returns
    -------
    tau : ndarray, broadcast shape of the inputs
        Torque [N m].
    """
    M, dM, _, dV = fourbar_terms(theta, g)
    omega = np.asarray(omega, dtype=float)
    return M * np.asarray(alpha, dtype=float) + 0.5 * dM * omega**2 + dV


def crank_trajectory(t):
    """Prescribed crank trajectory theta = 1.2 (1 - cos 2t) used by MBSE/Adams.

    Parameters
    ----------
    t : float or array_like, shape (...)
        Time [s].

    Returns
    -------
    theta, omega, alpha : ndarray, each of shape (...)
        Angle [rad], angular velocity [rad/s] = 2.4 sin 2t, and angular
        acceleration [rad/s^2] = 4.8 cos 2t.
    """
    t = np.asarray(t, dtype=float)
    return 1.2 * (1.0 - np.cos(2.0 * t)), 2.4 * np.sin(2.0 * t), 4.8 * np.cos(2.0 * t)


def load_crank_trajectory(path: Path | str | None = None) -> dict:
    """Read ``fourbars1-with-rel-angle-trajectory.txt``.

    Returns dict with ``t`` [s] and ``theta`` [rad], arrays of shape (n,)
    (n = 2000, t = 0 .. 9.995 s every 5 ms).
    """
    path = Path(path) if path is not None else MBSE_DATA_DIR / "fourbars1-with-rel-angle-trajectory.txt"
    data = np.loadtxt(path, comments="%", ndmin=2)
    return dict(t=data[:, 0], theta=data[:, 1])


def load_adams_torque(path: Path | str | None = None) -> dict:
    """Read the MSC Adams inverse dynamics result ``InverseDynamics_4bars_MSC.tab``.

    Returns dict of arrays of shape (n,) (n = 2000, every 5 ms):
    ``t`` [s], ``torque`` [N m] (the file's column as is: MINUS the driving
    torque of :func:`fourbar_inverse_torque`), ``angle_deg`` [deg] (crank
    angle) and ``theta`` [rad] (the same in radians).
    """
    path = Path(path) if path is not None else MBSE_DATA_DIR / "InverseDynamics_4bars_MSC.tab"
    data = np.loadtxt(path, comments="%", ndmin=2)
    return dict(t=data[:, 0], torque=data[:, 1], angle_deg=data[:, 2],
                theta=np.deg2rad(data[:, 2]))


# --------------------------------------------------------------------------
# Simple pendulum (pendulum1.yaml)
# --------------------------------------------------------------------------

#: Pendulum bar length [m], mass [kg], inertia about the pivot [kg m^2].
PEND_L = 2.0
PEND_M = 5.0
PEND_I0 = PEND_M * PEND_L**2 / 3.0
#: Initial angle of the bar from +x [rad] (tip at (2 cos 45deg, 2 sin 45deg)).
PEND_PHI0 = np.deg2rad(45.0)


def pendulum_energy(phi, omega, g=G_DEFAULT):
    """Energy [J] of the pendulum: 1/2 I0 omega^2 + m g (L/2) sin(phi).

    ``phi`` [rad] is the bar angle from +x (counter-clockwise), ``omega`` its
    rate [rad/s]; shapes broadcast.
    """
    return 0.5 * PEND_I0 * np.asarray(omega) ** 2 + PEND_M * g * 0.5 * PEND_L * np.sin(phi)


def pendulum_forward(t_eval, g: float = G_DEFAULT, phi0: float = PEND_PHI0,
                     omega0: float = 0.0, rtol: float = 1e-10, atol: float = 1e-12) -> dict:
    """Forward dynamics of the uniform-bar pendulum of ``pendulum1.yaml``.

    Pivot fixed at the origin, bar length 2 m, mass 5 kg, I0 = m L^2/3 about
    the pivot, gravity along -y.  Equation: I0 phi'' = -m g (L/2) cos(phi),
    integrated with DOP853 from t_eval[0].

    Parameters
    ----------
    t_eval : array_like, shape (n,)
        Increasing output times [s].
    g : float
        Gravity [m/s^2].
    phi0, omega0 : float
        Initial angle from +x [rad] (default 45 deg) and rate [rad/s].

    Returns
    -------
    dict of ndarray, each of shape (n,)
        ``t`` [s], ``phi`` [rad], ``omega`` [rad/s], ``x1, y1`` tip position
        [m], ``vx1, vy1`` tip velocity [m/s], ``energy`` [J].
    """
    t_eval = np.asarray(t_eval, dtype=float)
    k = PEND_M * g * 0.5 * PEND_L / PEND_I0

    def rhs(t, y):
        return [y[1], -k * np.cos(y[0])]

    sol = solve_ivp(rhs, (t_eval[0], t_eval[-1]), [phi0, omega0], method="DOP853",
                    t_eval=t_eval, rtol=rtol, atol=atol)
    if not sol.success:
        raise RuntimeError(f"pendulum_forward integration failed: {sol.message}")
    phi, omega = sol.y
    return dict(
        t=sol.t, phi=phi, omega=omega,
        x1=PEND_L * np.cos(phi), y1=PEND_L * np.sin(phi),
        vx1=-PEND_L * np.sin(phi) * omega, vy1=PEND_L * np.cos(phi) * omega,
        energy=pendulum_energy(phi, omega, g),
    )
