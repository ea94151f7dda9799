"""Planar mechanisms in natural coordinates (Blanco-Claraco et al. (2021), sections 2 and 6, Appendix III).

The generalized coordinates ``q`` are the x and y of every free point, in the
order the points are given, followed by one angle per relative-angle coordinate.
Fixed points are constants, not coordinates. Each rigid body is described by
its points; its body frame has its origin at the first point and its x axis
towards the second. Units are SI: metres, kilograms, radians, newtons.

Constraints Phi(q) = 0 (Appendix III):

* constant distance between two points of a body (eq. 43),
  ``(xj - xi)^2 + (yj - yi)^2 - L^2``; a body of p points contributes the
  2p - 3 distances that make it rigid (first-to-second, then each further
  point to the first and the second), none redundant;
* absolute orientation of a segment i -> j for a relative-angle coordinate
  theta: ``xj - xi - L cos(theta)`` when ``|sin(theta)| > 1/sqrt(2)``, else
  ``yj - yi - L sin(theta)``.

The mass matrix is constant in natural coordinates. For a material point at
body-frame coordinates (xi, eta) the position is linear in the two basic
points, r = (1 - xi/L) r_i + (xi/L) r_j + (eta/L) Rot90 (r_j - r_i); integrating
r^T r dm gives blocks that depend only on the mass m, the centre of gravity
(a, b) and the inertia I0 about the first point:

    M_ii = (m - 2 m a / L + I0 / L^2) I2
    M_jj = (I0 / L^2) I2
    M_ij = (m a / L - I0 / L^2) I2 + (m b / L) Rot90

Gravity's generalized force is Q_g = m A(a, b)^T g with the same linear map A.

Redundant constraints (a parallelogram with a third parallel crank, a loop
closed twice) leave Phi_q rank-deficient at every configuration. The degrees
of freedom are therefore n minus the numerical rank of Phi_q at q0 (singular
values below ``mbfg.redundancy.RANK_RTOL`` of the largest count as zero), not n minus the
number of rows. For such a mechanism the augmented system (5) is singular in
the multipliers only: qddot stays unique, lambda does not, and the solves
below switch to a pseudo-inverse that drops exactly the mechanism's number of
redundant directions (minimum-norm lambda), not those under a threshold: off
the constraint manifold (a solver's iterate) the redundant rows are only
nearly dependent, and inverting their tiny singular value would turn that
inconsistency into an acceleration error.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from mbfg._jax import jax, jnp
from mbfg.errors import ModelError
from mbfg.redundancy import dependent_rows, numerical_rank, pinv_drop, singular_pose_rank


@dataclass(frozen=True)
class Point:
    """A point of the mechanism [m]; ``fixed`` points are not coordinates."""

    x: float
    y: float
    fixed: bool = False


@dataclass(frozen=True)
class Body:
    """A rigid planar body.

    Args:
        points: indices of its points (two or more); the body frame has its
            origin at the first and its x axis towards the second.
        mass: [kg], > 0.
        I0: moment of inertia about the first point [kg m^2], > 0.
        cog: centre of gravity (a, b) in the body frame [m].
        length: distance between the first two points [m]; ``None`` takes it
            from the points' initial positions.
    """

    points: tuple[int, ...]
    mass: float
    I0: float
    cog: tuple[float, float] = (0.0, 0.0)
    length: float | None = None


@dataclass(frozen=True)
class RelativeAngle:
    """Absolute angle [rad] of the segment from point ``i`` to point ``j``, added to q."""

    i: int
    j: int


_NO_ROWS = np.zeros(0, dtype=np.int32)  # numpy, not jnp: no JAX work at import


class MechanismArrays(NamedTuple):
    """The mechanism as JAX arrays: the constant every planar residual takes.

    Point k has coordinates ``(base_x[k] + qe[idx_x[k]], base_y[k] + qe[idx_y[k]])``
    with ``qe = [q, 0]``: fixed points index the appended zero.

    ``redundant_rows`` lists rows of Phi that depend on the others at q0. Only its
    length is used by the solves, as a static (shape) switch: empty keeps the
    regular LU solves, non-empty selects the rank-tolerant pseudo-inverse ones
    (:func:`pinv_drop`, dropping that many singular directions).
    """

    base_x: jnp.ndarray  # (P,) [m]
    base_y: jnp.ndarray  # (P,) [m]
    idx_x: jnp.ndarray  # (P,) int
    idx_y: jnp.ndarray  # (P,) int
    dist_i: jnp.ndarray  # (K,) int, point indices of distance constraints
    dist_j: jnp.ndarray  # (K,) int
    dist_L: jnp.ndarray  # (K,) [m]
    angle_i: jnp.ndarray  # (R,) int, segment start point of each relative angle
    angle_j: jnp.ndarray  # (R,) int
    angle_q: jnp.ndarray  # (R,) int, index of theta in q
    angle_L: jnp.ndarray  # (R,) [m]
    redundant_rows: jnp.ndarray | np.ndarray = _NO_ROWS  # (m - rank,) int, rows of Phi


def is_redundant(mech: MechanismArrays) -> bool:
    """Whether Phi_q has dependent rows (a static property: decided by an array's shape)."""
    return mech.redundant_rows.shape[0] > 0


# --------------------------------------------------------------------------------------
# Pure JAX kinematics and dynamics on MechanismArrays
# --------------------------------------------------------------------------------------


def point_xy(mech: MechanismArrays, q: jnp.ndarray) -> tuple[jnp.ndarray, jnp.ndarray]:
    """x (P,) and y (P,) of every point [m] at coordinates q (n,)."""
    qe = jnp.concatenate([q, jnp.zeros(1, q.dtype)])
    return mech.base_x + qe[mech.idx_x], mech.base_y + qe[mech.idx_y]


def phi(mech: MechanismArrays, q: jnp.ndarray) -> jnp.ndarray:
    """Constraint vector Phi(q), shape (m,): distances [m^2], then angles [m]."""
    x, y = point_xy(mech, q)
    dx = x[mech.dist_j] - x[mech.dist_i]
    dy = y[mech.dist_j] - y[mech.dist_i]
    distance = dx**2 + dy**2 - mech.dist_L**2
    theta = q[mech.angle_q]
    ax = x[mech.angle_j] - x[mech.angle_i] - mech.angle_L * jnp.cos(theta)
    ay = y[mech.angle_j] - y[mech.angle_i] - mech.angle_L * jnp.sin(theta)
    # Appendix III: switch equations where the other one loses sensitivity to theta.
    angle = jnp.where(jnp.abs(jnp.sin(theta)) > 1.0 / math.sqrt(2.0), ax, ay)
    return jnp.concatenate([distance, angle])


def phi_q(mech: MechanismArrays, q: jnp.ndarray) -> jnp.ndarray:
    """Constraint Jacobian Phi_q(q), shape (m, n)."""
    return jax.jacfwd(lambda q_: phi(mech, q_))(q)


def phi_q_dot_times_qdot(mech: MechanismArrays, q: jnp.ndarray, qdot: jnp.ndarray) -> jnp.ndarray:
    """(d Phi_q / dt) qdot = Phi_qq[qdot, qdot], shape (m,) (Blanco-Claraco et al. (2021) eq. 42)."""

    def phi_dot(q_: jnp.ndarray) -> jnp.ndarray:
        return jax.jvp(lambda s: phi(mech, s), (q_,), (qdot,))[1]

    return jax.jvp(phi_dot, (q,), (qdot,))[1]


def qddot_dependent(
    mech: MechanismArrays, M: jnp.ndarray, Q: jnp.ndarray, q: jnp.ndarray, qdot: jnp.ndarray
) -> jnp.ndarray:
    """Dependent-coordinate accelerations of Blanco-Claraco et al. (2021) eq. (6), shape (n,).

    Solved through the augmented system (5), [M Phi_q^T; Phi_q 0][qddot; lambda]
    = [Q; c] with c = -Phi_q_dot qdot (eq. 3, time-independent constraints): eq. (6)
    is its block inverse, and (5) stays regular when M is singular (a
    relative-angle coordinate carries no mass).

    With redundant constraints (5) is singular, in lambda only: the right-hand
    side is consistent (c lies in the range of Phi_q, the rows being dependent
    identically), so the pseudo-inverse that drops those null directions returns
    the exact, unique qddot and the minimum-norm lambda.

    Shapes: M (n, n) [kg or kg m^2], Q (n,) [N or N m], q, qdot (n,).
    """
    n = q.shape[0]
    J = phi_q(mech, q)
    c = -phi_q_dot_times_qdot(mech, q, qdot)
    m = J.shape[0]
    kkt = jnp.block([[M, J.T], [J, jnp.zeros((m, m))]])
    rhs = jnp.concatenate([Q, c])
    if not is_redundant(mech):
        return jnp.linalg.solve(kkt, rhs)[:n]
    # (5) has one null direction [0; lambda] per redundant row (Phi_q^T lambda = 0).
    return (pinv_drop(kkt, mech.redundant_rows.shape[0]) @ rhs)[:n]


def velocity_maps(
    mech: MechanismArrays, q: jnp.ndarray, indep: jnp.ndarray
) -> tuple[jnp.ndarray, jnp.ndarray]:
    """S (n, m) and R (n, d) of Blanco-Claraco et al. (2021) eq. (11): [Phi_q; B]^-1 = [S R].

    ``indep`` (d,) are the indices of the independent coordinates z in q, so
    B selects them (eq. 9). With redundant constraints [Phi_q; B] is (m + d, n)
    with m + d > n and full column rank: its pseudo-inverse is then the exact
    inverse on consistent right-hand sides ([0; zdot] and [c; 0] with c in the
    range of Phi_q), which is all eq. (11) applies it to.
    """
    n = q.shape[0]
    B = jnp.eye(n)[indep]
    A = jnp.concatenate([phi_q(mech, q), B], axis=0)
    inv = jnp.linalg.inv(A) if not is_redundant(mech) else pinv_drop(A, 0)
    m = A.shape[0] - indep.shape[0]
    return inv[:, :m], inv[:, m:]


def zddot_independent(
    mech: MechanismArrays,
    M: jnp.ndarray,
    Q: jnp.ndarray,
    q: jnp.ndarray,
    qdot: jnp.ndarray,
    indep: jnp.ndarray,
) -> jnp.ndarray:
    """Independent-coordinate accelerations of Blanco-Claraco et al. (2021) eq. (15), shape (d,).

    zddot = Mbar^-1 Qbar with Mbar = R^T M R and Qbar = R^T (Q - M S c).
    """
    S, R = velocity_maps(mech, q, indep)
    c = -phi_q_dot_times_qdot(mech, q, qdot)
    M_bar = R.T @ M @ R
    Q_bar = R.T @ (Q - M @ (S @ c))
    return jnp.linalg.solve(M_bar, Q_bar)


def best_independent_coordinates(null: np.ndarray) -> np.ndarray:
    """Indices (dof,) of the coordinates whose selection rows B best complete Phi_q
    to a regular matrix, from an orthonormal null-space basis (n, dof) of Phi_q
    (QR with column pivoting on its transpose)."""
    import scipy.linalg  # here, not at import: half a second of every command's start-up, planar or not

    _, _, piv = scipy.linalg.qr(null.T, pivoting=True)
    return np.sort(piv[: null.shape[1]]).astype(np.int32)


# --------------------------------------------------------------------------------------
# The mechanism
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PlanarMechanism:
    """A planar mechanism in natural coordinates (+ relative angles).

    Build it in code from :class:`Point`, :class:`Body` and
    :class:`RelativeAngle`, or load an MBSE YAML file with
    :func:`mbfg.load_mbse_yaml`. Bad input raises :class:`mbfg.ModelError`
    naming the entry.
    """

    points: tuple[Point, ...]
    bodies: tuple[Body, ...]
    relative_angles: tuple[RelativeAngle, ...] = ()
    name: str = "mechanism"
    arrays: MechanismArrays = field(init=False, repr=False)
    coordinate_names: tuple[str, ...] = field(init=False)
    q0: np.ndarray = field(init=False, repr=False)
    mass_matrix: np.ndarray = field(init=False, repr=False)

    def __init__(
        self,
        points: Sequence[Point],
        bodies: Sequence[Body],
        relative_angles: Sequence[RelativeAngle] = (),
        name: str = "mechanism",
    ) -> None:
        set_ = object.__setattr__
        set_(self, "points", tuple(points))
        set_(self, "bodies", tuple(bodies))
        set_(self, "relative_angles", tuple(relative_angles))
        set_(self, "name", name)
        self._validate()
        self._assemble()

    def __repr__(self) -> str:
        """One line: name, coordinates, constraints, degrees of freedom (not the arrays)."""
        constraints = f"{self.m} constraint{'' if self.m == 1 else 's'}"
        if self.redundant_rows:
            constraints += f" (rank {self.rank}: {len(self.redundant_rows)} redundant)"
        return (f"PlanarMechanism({self.name!r}: {self.n} coordinates [{', '.join(self.coordinate_names)}], "
                f"{constraints}, {self.dof} dof)")

    # -- sizes and names -------------------------------------------------------------
    @property
    def n(self) -> int:
        """Number of generalized coordinates."""
        return len(self.coordinate_names)

    @property
    def m(self) -> int:
        """Number of scalar constraints: rows of Phi, redundant ones included."""
        return int(self.arrays.dist_L.shape[0] + self.arrays.angle_L.shape[0])

    @property
    def redundant_rows(self) -> tuple[int, ...]:
        """Rows of Phi (0-based) that depend on the others at q0 (one such choice); () if none."""
        return tuple(int(i) for i in np.asarray(self.arrays.redundant_rows))

    @property
    def rank(self) -> int:
        """Numerical rank of Phi_q at q0 (relative tolerance :data:`mbfg.redundancy.RANK_RTOL`)."""
        return self.m - len(self.redundant_rows)

    @property
    def dof(self) -> int:
        """Degrees of freedom: n minus the rank of Phi_q at q0 (n - m when no row is redundant)."""
        return self.n - self.rank

    def null_space(self, q: np.ndarray | None = None) -> np.ndarray:
        """Orthonormal basis (n, dof) of the null space of Phi_q at q (default q0).

        The right singular vectors of the ``dof`` smallest singular values: the
        dimension is the mechanism's, not a threshold's guess at q.
        """
        J = self.phi_q(self.q0 if q is None else q)
        _, _, vt = np.linalg.svd(J, full_matrices=True)
        return vt[self.n - self.dof :].T

    def coordinate_index(self, name_or_index: str | int) -> int:
        """Index into q of a coordinate given by name (``'x1'``) or 0-based index."""
        if isinstance(name_or_index, (int, np.integer)) or str(name_or_index).lstrip("-").isdigit():
            i = int(name_or_index)
            if not 0 <= i < self.n:
                raise ModelError(
                    f"coordinate index {i} is out of range: {self.name} has {self.n} "
                    f"coordinates {list(self.coordinate_names)}"
                )
            return i
        try:
            return self.coordinate_names.index(str(name_or_index))
        except ValueError:
            raise ModelError(
                f"unknown coordinate {name_or_index!r}: {self.name} has {list(self.coordinate_names)}"
            ) from None

    # -- physics ---------------------------------------------------------------------
    def gravity_forces(self, g: float = 9.81) -> np.ndarray:
        """Generalized gravity forces Q_g (n,) [N] for gravity g [m/s^2] along -y; ModelError for a g that is not
        finite or beyond :data:`mbfg.limits.MAX_GRAVITY` (1e300 overflowed the solvers' linear systems)."""
        from mbfg.limits import MAX_GRAVITY

        if not (isinstance(g, (int, float, np.integer, np.floating)) and abs(float(g)) <= MAX_GRAVITY):
            raise ModelError(f"g: expected a gravity [m/s^2] of magnitude at most {MAX_GRAVITY:g} (1,000 g), got {g!r}")
        Q = np.zeros(self.n + 1)  # last slot collects fixed-point rows
        for body in self.bodies:
            A_cog = self._body_map(body)  # (2, 4) maps [ri, rj] -> r_cog
            f = body.mass * A_cog.T @ np.array([0.0, -g])
            Q[self._body_idx(body)] += f
        return Q[:-1]

    def kinetic_energy(self, qdot: np.ndarray) -> float:
        """1/2 qdot^T M qdot [J]."""
        return float(0.5 * qdot @ self.mass_matrix @ qdot)

    def potential_energy(self, q: np.ndarray, g: float = 9.81) -> float:
        """Gravity potential [J] (zero at q = 0); Q_g is constant so V = -Q_g . q."""
        return float(-self.gravity_forces(g) @ q)

    def phi(self, q: np.ndarray) -> np.ndarray:
        """Constraint vector Phi(q), shape (m,)."""
        return np.asarray(_phi_jit(self.arrays, jnp.asarray(q, dtype=float)))

    def phi_q(self, q: np.ndarray) -> np.ndarray:
        """Constraint Jacobian (m, n)."""
        return np.asarray(_phi_q_jit(self.arrays, jnp.asarray(q, dtype=float)))

    def qddot(self, q: np.ndarray, qdot: np.ndarray, Q: np.ndarray) -> np.ndarray:
        """Accelerations (n,) of Blanco-Claraco et al. (2021) eq. (6) for generalized forces Q (n,)."""
        return np.asarray(
            _qddot_jit(self.arrays, jnp.asarray(self.mass_matrix), jnp.asarray(Q), jnp.asarray(q), jnp.asarray(qdot))
        )

    def solve_position(
        self,
        q_guess: np.ndarray,
        fixed: Sequence[int] | np.ndarray = (),
        tol: float = 1e-12,
        max_iterations: int = 50,
    ) -> np.ndarray:
        """Solve the position problem Phi(q) = 0 keeping ``q[fixed]`` at their guessed values.

        Gauss-Newton from ``q_guess`` (minimum-norm steps on the other coordinates).
        Raises ModelError when it does not converge (e.g. an unassemblable configuration).
        """
        q = np.array(q_guess, dtype=float)
        free = np.setdiff1d(np.arange(self.n), np.asarray(fixed, dtype=int))
        for _ in range(max_iterations):
            r = self.phi(q)
            if np.max(np.abs(r), initial=0.0) < tol:
                return q
            J = self.phi_q(q)[:, free]
            q[free] -= np.linalg.lstsq(J, r, rcond=None)[0]
        raise ModelError(
            f"{self.name}: the position problem did not converge from q = {q_guess} "
            f"(|Phi| = {np.max(np.abs(self.phi(q))):.3g}); is the configuration assemblable?"
        )

    def solve_velocity(
        self, q: np.ndarray, qdot_guess: np.ndarray, fixed: Sequence[int] | np.ndarray = ()
    ) -> np.ndarray:
        """Velocities satisfying Phi_q qdot = 0 with ``qdot[fixed]`` kept (minimum-norm change)."""
        qdot = np.array(qdot_guess, dtype=float)
        free = np.setdiff1d(np.arange(self.n), np.asarray(fixed, dtype=int))
        J = self.phi_q(q)
        qdot[free] -= np.linalg.lstsq(J[:, free], J @ qdot, rcond=None)[0]
        return qdot

    def solve_acceleration(
        self, q: np.ndarray, qdot: np.ndarray, qddot_guess: np.ndarray, fixed: Sequence[int] | np.ndarray = ()
    ) -> np.ndarray:
        """Accelerations satisfying Phi_q qddot = -Phi_q_dot qdot (eq. 3) with ``qddot[fixed]`` kept."""
        qddot = np.array(qddot_guess, dtype=float)
        free = np.setdiff1d(np.arange(self.n), np.asarray(fixed, dtype=int))
        J = self.phi_q(q)
        c = -np.asarray(_phi_q_dot_jit(self.arrays, jnp.asarray(q, dtype=float), jnp.asarray(qdot, dtype=float)))
        qddot[free] -= np.linalg.lstsq(J[:, free], J @ qddot - c, rcond=None)[0]
        return qddot

    def independent_coordinates(self, q: np.ndarray | None = None) -> np.ndarray:
        """A well-conditioned choice of dof independent coordinates at q (default q0), indices (dof,)."""
        return best_independent_coordinates(self.null_space(q))

    # -- construction ----------------------------------------------------------------
    def _validate(self) -> None:
        n_points = len(self.points)
        if n_points == 0:
            raise ModelError(f"{self.name}: 'points' is empty; a mechanism needs at least two points")
        for k, point in enumerate(self.points):
            for axis in ("x", "y"):
                value = getattr(point, axis)
                if not np.isfinite(value):
                    raise ModelError(f"{self.name}: point {k} has non-finite {axis} = {value}")
        if not self.bodies:
            raise ModelError(f"{self.name}: 'planar_bodies' is empty; a mechanism needs a body")
        for b, body in enumerate(self.bodies):
            where = f"{self.name}: planar_bodies[{b}]"
            if len(body.points) < 2:
                raise ModelError(f"{where} has {len(body.points)} point(s); a body needs at least two")
            if len(set(body.points)) != len(body.points):
                raise ModelError(f"{where} lists a point twice: {list(body.points)}")
            for p in body.points:
                if not (isinstance(p, (int, np.integer)) and 0 <= p < n_points):
                    raise ModelError(f"{where} names point {p!r}, but points are numbered 0..{n_points - 1}")
            if not (np.isfinite(body.mass) and body.mass > 0):
                raise ModelError(f"{where}: mass must be > 0 kg, got {body.mass}")
            if not (np.isfinite(body.I0) and body.I0 > 0):
                raise ModelError(f"{where}: I0 must be > 0 kg m^2, got {body.I0}")
            if body.length is not None and not (np.isfinite(body.length) and body.length > 0):
                raise ModelError(f"{where}: length must be > 0 m, got {body.length}")
            if self._distance(body.points[0], body.points[1]) == 0 and body.length is None:
                raise ModelError(f"{where}: its first two points coincide; the body frame is undefined")
        for r, rel in enumerate(self.relative_angles):
            for p in (rel.i, rel.j):
                if not (isinstance(p, (int, np.integer)) and 0 <= p < n_points):
                    raise ModelError(
                        f"{self.name}: relative_coordinates[{r}] names point {p!r}, "
                        f"but points are numbered 0..{n_points - 1}"
                    )
            if rel.i == rel.j:
                raise ModelError(f"{self.name}: relative_coordinates[{r}] uses point {rel.i} twice")

    def _distance(self, i: int, j: int) -> float:
        pi, pj = self.points[i], self.points[j]
        return math.hypot(pj.x - pi.x, pj.y - pi.y)

    def _assemble(self) -> None:
        set_ = object.__setattr__
        names: list[str] = []
        idx_x, idx_y, q0 = [], [], []
        for point in self.points:
            if point.fixed:
                idx_x.append(-1)
                idx_y.append(-1)
                continue
            k = len(names) // 2 + 1
            idx_x.append(len(names))
            names.append(f"x{k}")
            idx_y.append(len(names))
            names.append(f"y{k}")
            q0 += [point.x, point.y]
        angle_q = []
        for r, rel in enumerate(self.relative_angles):
            angle_q.append(len(names))
            names.append(f"theta{r + 1}")
            pi, pj = self.points[rel.i], self.points[rel.j]
            q0.append(math.atan2(pj.y - pi.y, pj.x - pi.x))
        n = len(names)
        # Fixed points index the zero appended to q.
        idx_x = [n if i < 0 else i for i in idx_x]
        idx_y = [n if i < 0 else i for i in idx_y]

        dist_i, dist_j, dist_L = [], [], []
        for body in self.bodies:
            pts = body.points
            L01 = body.length if body.length is not None else self._distance(pts[0], pts[1])
            pairs = [(pts[0], pts[1], L01)]
            for p in pts[2:]:
                pairs += [(pts[0], p, self._distance(pts[0], p)), (pts[1], p, self._distance(pts[1], p))]
            for i, j, L in pairs:
                dist_i.append(i)
                dist_j.append(j)
                dist_L.append(L)
        angle_L = [self._distance(rel.i, rel.j) for rel in self.relative_angles]

        ints = lambda v: jnp.asarray(np.asarray(v, dtype=np.int32).reshape(-1))  # noqa: E731
        floats = lambda v: jnp.asarray(np.asarray(v, dtype=float).reshape(-1))  # noqa: E731
        arrays = MechanismArrays(
            base_x=floats([0.0 if not p.fixed else p.x for p in self.points]),
            base_y=floats([0.0 if not p.fixed else p.y for p in self.points]),
            idx_x=ints(idx_x),
            idx_y=ints(idx_y),
            dist_i=ints(dist_i),
            dist_j=ints(dist_j),
            dist_L=floats(dist_L),
            angle_i=ints([r.i for r in self.relative_angles]),
            angle_j=ints([r.j for r in self.relative_angles]),
            angle_q=ints(angle_q),
            angle_L=floats(angle_L),
        )
        set_(self, "coordinate_names", tuple(names))
        set_(self, "arrays", arrays)
        set_(self, "q0", np.asarray(q0, dtype=float))
        # Redundancy is read off Phi_q at the initial configuration (the points as given).
        J0 = self.phi_q(self.q0)
        rank = numerical_rank(J0)
        if rank >= n and self.m > n:
            raise ModelError(
                f"{self.name}: {self.m} constraints of rank {rank} for {n} coordinates; the mechanism is locked"
            )
        if rank < self.m:
            # A rank drop at q0 alone is a singular pose, not redundancy: the solves would then drop
            # a direction that is genuine everywhere else.
            step = 1e-3 * max(self._body_length(body) for body in self.bodies)
            nearby = singular_pose_rank(self.phi_q, self.solve_position, self.q0, rank, step)
            if nearby > rank:
                raise ModelError(
                    f"{self.name}: the initial configuration (the points as given) is a singular pose: Phi_q has "
                    f"rank {rank} there but {nearby} at an assembled configuration {step:.3g} m away, so its "
                    "degrees of freedom are ill-defined there; draw the mechanism away from the singular pose"
                )
        set_(self, "arrays", arrays._replace(redundant_rows=dependent_rows(J0, rank)))

        M = np.zeros((n + 1, n + 1))
        for body in self.bodies:
            idx = self._body_idx(body)
            M[np.ix_(idx, idx)] += self._body_mass_matrix(body)
        set_(self, "mass_matrix", M[:n, :n])

    def _body_length(self, body: Body) -> float:
        return body.length if body.length is not None else self._distance(body.points[0], body.points[1])

    def _body_idx(self, body: Body) -> np.ndarray:
        """Indices in [q, dummy] of [xi, yi, xj, yj] of the body's first two points."""
        i, j = body.points[0], body.points[1]
        ax, ay = np.asarray(self.arrays.idx_x), np.asarray(self.arrays.idx_y)
        return np.array([ax[i], ay[i], ax[j], ay[j]])

    def _body_map(self, body: Body) -> np.ndarray:
        """A (2, 4): the centre of gravity as a linear map of [xi, yi, xj, yj]."""
        L = self._body_length(body)
        a, b = body.cog
        rot90 = np.array([[0.0, -1.0], [1.0, 0.0]])
        I2 = np.eye(2)
        return np.hstack([(1 - a / L) * I2 - (b / L) * rot90, (a / L) * I2 + (b / L) * rot90])

    def _body_mass_matrix(self, body: Body) -> np.ndarray:
        """Constant (4, 4) mass matrix of a body on [xi, yi, xj, yj] (module docstring)."""
        L = self._body_length(body)
        m, I0 = body.mass, body.I0
        a, b = body.cog
        rot90 = np.array([[0.0, -1.0], [1.0, 0.0]])
        I2 = np.eye(2)
        Mii = (m - 2 * m * a / L + I0 / L**2) * I2
        Mjj = (I0 / L**2) * I2
        Mij = (m * a / L - I0 / L**2) * I2 + (m * b / L) * rot90
        return np.block([[Mii, Mij], [Mij.T, Mjj]])


_phi_jit = jax.jit(phi)
_phi_q_jit = jax.jit(phi_q)
_qddot_jit = jax.jit(qddot_dependent)
_phi_q_dot_jit = jax.jit(phi_q_dot_times_qdot)
