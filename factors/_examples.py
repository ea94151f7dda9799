"""Random valid inputs for the shared Jacobian test battery."""

from __future__ import annotations

import functools

import numpy as np

from mbfg.parameters import ParameterSet
from mbfg.planar import Body, PlanarMechanism, Point, RelativeAngle
from mbfg.rigid import Body as Body3D
from mbfg.rigid import Contact, RigidModel, parameter


@functools.cache
def fourbar_with_crank_angle() -> PlanarMechanism:
    """The seed-003 four-bar (L = 1, 2, sqrt(13) m; m = 1, 2, 4 kg) plus its crank angle."""
    points = [Point(0, 0, fixed=True), Point(1, 0), Point(1, 2), Point(4, 0, fixed=True)]
    bodies = [
        Body((0, 1), mass=1.0, I0=1.0 / 3.0, cog=(0.5, 0.0)),
        Body((1, 2), mass=2.0, I0=2.0 * 4.0 / 3.0, cog=(1.0, 0.0)),
        Body((2, 3), mass=4.0, I0=4.0 * 13.0 / 3.0, cog=(np.sqrt(13) / 2, 0.0)),
    ]
    return PlanarMechanism(points, bodies, [RelativeAngle(0, 1)], name="fourbar-with-crank-angle")


def mechanism_state(rng: np.random.Generator) -> tuple[PlanarMechanism, np.ndarray, np.ndarray, np.ndarray]:
    """A mechanism and random (q, qdot, qddot) near its assembly (not on the manifold)."""
    mech = fourbar_with_crank_angle()
    q = mech.q0 + 0.1 * rng.standard_normal(mech.n)
    return mech, q, rng.standard_normal(mech.n), rng.standard_normal(mech.n)


def vectors(rng: np.random.Generator, count: int, dim: int = 4) -> tuple[np.ndarray, ...]:
    return tuple(rng.standard_normal(dim) for _ in range(count))


@functools.cache
def sphere_on_incline() -> RigidModel:
    """A solid sphere (2 kg, radius R = 0.1 m) touching a plane through the origin tilted 0.5 rad about y,
    with Coulomb friction mu = 0.3 < tan(0.5), so it slides: a contact that is not a point on the ground,
    with its radius a parameter."""
    n = (np.sin(0.5), 0.0, np.cos(0.5))
    params = ParameterSet([parameter("R", 0.1, "m", 0.0), parameter("mu", 0.3, "", 0.0, 1.0),
                           parameter("g", 9.81, "m/s^2", 0.0)])
    J = 0.4 * 2.0 * 0.1**2
    return RigidModel("sphere-incline", [Body3D("ball", 2.0, (J, J, J), position=tuple(0.1 * np.asarray(n)))],
                      contacts=[Contact("plane", "ball", normal=n, mu="mu", radius="R", eps=1e-8, tau=0.01)],
                      parameters=params)
