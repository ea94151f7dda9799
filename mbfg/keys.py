"""Which symbol letter means what.

Every GTSAM key in mbfg is built here, one letter per role, with the time-step
index as the symbol index. Timestamps live in their own map (see the graph
builders); keys are never derived from float times.

=======  ===============================================  ======
letter   role                                             type
=======  ===============================================  ======
``q``    dependent coordinates q_k                        Vector
``v``    dependent velocities qdot_k                      Vector
``a``    dependent accelerations qddot_k                  Vector
``z``    independent coordinates z_k                      Vector
``w``    independent velocities zdot_k                    Vector
``u``    independent accelerations zddot_k                Vector
``f``    generalized forces Q_k                           Vector
``p``    free scalar parameters (one Vector)              Vector
``t``    gravity tilt                                     Rot3
=======  ===============================================  ======
"""

from __future__ import annotations

import gtsam

_LETTERS = {
    "q": "dependent coordinates",
    "v": "dependent velocities",
    "a": "dependent accelerations",
    "z": "independent coordinates",
    "w": "independent velocities",
    "u": "independent accelerations",
    "f": "generalized forces",
    "p": "parameters",
    "t": "gravity tilt",
}


def _key(letter: str, k: int) -> int:
    if k < 0:
        raise ValueError(f"time-step index must be >= 0, got {k}")
    return gtsam.symbol(letter, k)


def Q(k: int) -> int:
    """Key of the dependent coordinates q at step k."""
    return _key("q", k)


def V(k: int) -> int:
    """Key of the dependent velocities qdot at step k."""
    return _key("v", k)


def A(k: int) -> int:
    """Key of the dependent accelerations qddot at step k."""
    return _key("a", k)


def Z(k: int) -> int:
    """Key of the independent coordinates z at step k."""
    return _key("z", k)


def ZD(k: int) -> int:
    """Key of the independent velocities zdot at step k."""
    return _key("w", k)


def ZDD(k: int) -> int:
    """Key of the independent accelerations zddot at step k."""
    return _key("u", k)


def F(k: int) -> int:
    """Key of the generalized forces Q at step k."""
    return _key("f", k)


def P(k: int = 0) -> int:
    """Key of the free scalar parameters (one Vector)."""
    return _key("p", k)


def T(k: int = 0) -> int:
    """Key of the gravity tilt (a Rot3)."""
    return _key("t", k)


def describe(key: int) -> str:
    """Human-readable name of a key, e.g. ``'q17 (dependent coordinates)'``."""
    sym = gtsam.Symbol(key)
    letter = chr(sym.chr())
    return f"{letter}{sym.index()} ({_LETTERS.get(letter, 'unknown role')})"
