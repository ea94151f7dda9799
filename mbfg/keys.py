"""Which symbol letter means what.

Every GTSAM key in mbfg is built here, one letter per role, with the time-step
index as the symbol index. Timestamps live in their own map (see the graph
builders); keys are never derived from float times.

mbfg's keys live in their own range, so that a user's own ``gtsam.symbol('x', j)``
(``gtsam.symbol_shorthand.X(j)``) never names one of mbfg's variables: they are
GTSAM ``LabeledSymbol`` keys with the label ``'m'`` (GTSAM's multi-robot layout: the
letter in the top 8 bits, the label in the next 8, the index in the low 48), where
a plain ``gtsam.Symbol`` has a zero label byte for every index below 2**48.
``gtsam.LabeledSymbol(ord('q'), ord('m'), 17).key() == Q(17)``; :func:`describe`
names a key in words.

The functions of one letter return a :class:`mbfg.adapter.Key` of the variable's
type (``Q(k)`` a ``VectorKey``, ``X(k, i)`` a ``Pose3Key``, ``T()`` a ``Rot3Key``): an
``int`` that GTSAM takes as it is and that :meth:`mbfg.adapter.FactorType.make`
checks against the residual's variable kinds. They are annotated ``int`` (which they
are), so that lists of them and of plain ints mix without casts. :func:`rigid_state`
returns plain ints (the stream's hot path: arithmetic only, nothing to check); ``S``
and ``B`` too (keys of linear systems, never a factor type's variable).

=======  ===============================================  ======
letter   role                                             type
=======  ===============================================  ======
``q``    dependent coordinates q_k                        Vector
``v``    dependent velocities qdot_k (rigid bodies: the   Vector
         generalized velocity [v, omega] of all bodies)
``x``    pose of rigid body i at step k                   Pose3
``a``    dependent accelerations qddot_k                  Vector
``z``    independent coordinates z_k                      Vector
``w``    independent velocities zdot_k                    Vector
``u``    independent accelerations zddot_k                Vector
``f``    generalized forces Q_k                           Vector
``p``    free scalar parameters (one Vector)              Vector
``t``    gravity tilt                                     Rot3
``c``    activations (controls) of a control problem      Vector
``s``    state block k: state k's variables stacked, in   (linear
         the batch solver's linear systems only           only)
``b``    parameter block: P and T stacked, likewise       (linear
                                                          only)
=======  ===============================================  ======
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import gtsam

from mbfg.adapter import Pose3Key, Rot3Key, VectorKey
from mbfg.errors import MbfgError

if TYPE_CHECKING:
    from mbfg.factors._rigid import Variables

_LETTERS = {
    "q": "dependent coordinates",
    "v": "dependent velocities",
    "x": "rigid body pose",
    "a": "dependent accelerations",
    "z": "independent coordinates",
    "w": "independent velocities",
    "u": "independent accelerations",
    "f": "generalized forces",
    "p": "parameters",
    "t": "gravity tilt",
    "c": "activations",
    "s": "state block",
    "b": "parameter block",
}


#: gtsam.LabeledSymbol's layout: the letter in the top 8 bits of the 64-bit key, the label in the next 8,
#: the index in the low 48.
_INDEX_BITS = 48
#: The label byte of every mbfg key.
LABEL = "m"


_MAX_INDEX = 1 << _INDEX_BITS
_HIGH = {letter: (ord(letter) << 56) | (ord(LABEL) << _INDEX_BITS) for letter in _LETTERS}


def _symbol(letter: str, k: int) -> int:
    """``gtsam.LabeledSymbol(letter, 'm', k).key()`` by the layout's arithmetic: as fast as a call into GTSAM,
    which leaves room for the typed key's construction (keys are built per sample)."""
    if not 0 <= k < _MAX_INDEX:
        raise MbfgError(f"time-step index must be >= 0, got {k}" if k < 0 else f"symbol index {k} out of range")
    return _HIGH[letter] | k


def Q(k: int) -> VectorKey:
    """Key of the dependent coordinates q at step k."""
    return VectorKey(_symbol("q", k))


def V(k: int) -> VectorKey:
    """Key of the dependent velocities qdot at step k."""
    return VectorKey(_symbol("v", k))


def A(k: int) -> VectorKey:
    """Key of the dependent accelerations qddot at step k."""
    return VectorKey(_symbol("a", k))


def Z(k: int) -> VectorKey:
    """Key of the independent coordinates z at step k."""
    return VectorKey(_symbol("z", k))


def ZD(k: int) -> VectorKey:
    """Key of the independent velocities zdot at step k."""
    return VectorKey(_symbol("w", k))


def ZDD(k: int) -> VectorKey:
    """Key of the independent accelerations zddot at step k."""
    return VectorKey(_symbol("u", k))


def F(k: int) -> VectorKey:
    """Key of the generalized forces Q at step k."""
    return VectorKey(_symbol("f", k))


#: Body poses X(k, i) use the symbol index k * BODY_STRIDE + i: at most this many bodies (and 2.8e10 steps).
BODY_STRIDE = 10_000


def X(k: int, i: int) -> Pose3Key:
    """Key of the pose (Pose3) of rigid body i at step k."""
    if not 0 <= i < BODY_STRIDE:
        raise MbfgError(f"body index must be in [0, {BODY_STRIDE}), got {i}")
    if k < 0:
        raise MbfgError(f"time-step index must be >= 0, got {k}")
    return Pose3Key(_symbol("x", k * BODY_STRIDE + i))


def rigid_state(k: int, nb: int) -> list[int]:
    """Keys of rigid-body state k: the poses X(k, 0) .. X(k, nb - 1), then the velocity V(k); the same keys
    as those calls, by the symbol layout's arithmetic (the stream asks for them several times per sample)."""
    if k < 0:
        raise MbfgError(f"time-step index must be >= 0, got {k}")
    if not 0 < nb <= BODY_STRIDE:
        raise MbfgError(f"number of bodies must be in [1, {BODY_STRIDE}], got {nb}")
    x = _HIGH["x"] | (k * BODY_STRIDE)
    return [x + i for i in range(nb)] + [_HIGH["v"] | k]


def parameter_keys(variables: Variables) -> list[int]:
    """Keys of the free parameters of a rigid-body variable layout: [P()] if scalars are free, [T()] if the tilt is."""
    return ([P()] if variables.free else []) + ([T()] if variables.tilt_free else [])


def P(k: int = 0) -> VectorKey:
    """Key of the free scalar parameters (one Vector)."""
    return VectorKey(_symbol("p", k))


def T(k: int = 0) -> Rot3Key:
    """Key of the gravity tilt (a Rot3)."""
    return Rot3Key(_symbol("t", k))


def C(k: int) -> VectorKey:
    """Key of the activations (the model's controls) of a control problem; C(0) holds a plan a_0 .. a_{N-1}
    stacked step after step (:mod:`mbfg.graphs.control`)."""
    return VectorKey(_symbol("c", k))


def S(k: int) -> int:
    """Key of state block k in the linear systems of the vectorized batch solver (:mod:`mbfg.vectorized`)."""
    return _symbol("s", k)


def B() -> int:
    """Key of the parameter block (P and T stacked) in the vectorized batch solver's linear systems."""
    return _symbol("b", 0)


def name(key: int) -> str:
    """Short name of a key: ``'q17'``, ``'x3,2'`` (body 2's pose at step 3) for mbfg's keys; GTSAM's own
    formatting (``'l4'``, or the integer) for any other key."""
    sym = gtsam.LabeledSymbol(key)
    if chr(sym.label()) != LABEL or chr(sym.chr()) not in _LETTERS:
        return str(gtsam.DefaultKeyFormatter(key))
    letter = chr(sym.chr())
    if letter == "x":
        k, i = divmod(sym.index(), BODY_STRIDE)
        return f"x{k},{i}"
    return f"{letter}{sym.index()}"


def describe(key: int) -> str:
    """Human-readable name of a key, e.g. ``'q17 (dependent coordinates)'``."""
    short = name(key)
    sym = gtsam.LabeledSymbol(key)
    if chr(sym.label()) != LABEL or chr(sym.chr()) not in _LETTERS:
        return f"{short} (not an mbfg key)"
    letter = chr(sym.chr())
    if letter == "x":
        k, i = divmod(sym.index(), BODY_STRIDE)
        return f"{short} (rigid body {i} pose at step {k})"
    return f"{short} ({_LETTERS[letter]})"
