"""Resource limits checked before any work: run lengths, stream windows and horizons against what the machine's
memory and a sane wall time allow, so that no call allocates terabytes or runs for years.

Each check takes the names of the arguments it checks (``duration`` and ``h`` in the API, ``--duration`` and
``--dt`` on the command line) and raises a :class:`LimitError` that names them, the size asked for and the
limit. The estimates are of the arrays a run keeps (float64 values per step or per window state); the limits
are generous for any rig (a 1 kHz log of a day is 8.6e7 steps) and far below what would exhaust a machine.
"""

from __future__ import annotations

import math
import os

from mbfg.errors import LimitError

__all__ = ["MAX_COORDINATE", "MAX_GRAVITY", "MAX_HORIZON", "MAX_PARAMETER", "MAX_STEPS", "MAX_TIME", "MAX_UPDATE_EVERY", "MAX_WINDOW", "check_count", "check_steps", "check_window",
           "memory_budget", "simulation_bytes", "steps_of"]

#: Most steps of one run (simulate, control, forward dynamics): a day at 1 kHz is 8.64e7. At the stepper's
#: 1e4-1e5 steps per wall second beyond it a run takes hours to days.
MAX_STEPS = 10**8
#: Most states in a stream's window (lag / h): 100 s at 1 kHz. The window's dense blocks grow with it.
MAX_WINDOW = 10**5
#: Most samples per stream update (update_every): each update compiles a scan of that many steps, and the
#: warm-up traces 3 N + 2 of them (1e6 took 14.7 GB and minutes before the first sample).
MAX_UPDATE_EVERY = 10**4
#: Most steps of a receding horizon: each solve is a least squares over every step of it.
MAX_HORIZON = 10**4


#: Largest coordinate an input may give [rad or m]: ``--init``, a URDF origin, a trajectory value. A float64 near
#: 1e6 still resolves 1.2e-10 (finer than any encoder); far beyond it the coordinate swallows the motion
#: (``--init theta=1e308`` wrote a log frozen at 1e308, as 1e308 + sin(...) == 1e308). 1e6 rad is 159,000 turns
#: of a multi-turn encoder, 1e6 m no rig's travel.
MAX_COORDINATE = 1e6
#: Largest time a log may give [s]: 31,700 years, so a Unix clock (1.7e9 s) passes; a time of 1e308 made the
#: sample period NaN or 0 and the estimation blame the wrong row.
MAX_TIME = 1e12
#: Largest gravity [m/s^2] a planar mechanism takes: 1,000 g, beyond any rig or centrifuge test; 1e300 overflowed
#: the solver's linear system to inf and NaN.
MAX_GRAVITY = 1e4
#: Largest magnitude of a scalar parameter value (SI units): the solver squares values and their products, and
#: J = 1e308 made the noise sigmas NaN. No mass, inertia, friction, gain or stiffness of a rig comes near it.
MAX_PARAMETER = 1e12


def memory_budget() -> int:
    """Bytes a run may hold in arrays: half the machine's physical memory (8 GiB where it cannot be read)."""
    try:
        total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        total = 16 * 2**30
    return int(total) // 2


def _bytes(n: float) -> str:
    for unit, size in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n:.0f} B"


def steps_of(duration: float, h: float, duration_name: str = "duration", h_name: str = "h") -> float:
    """``duration / h``, the steps of a run, as a float (no int of 1e308 / 0.1: an OverflowError), with
    :func:`check_steps`' limit on it. ``duration`` and ``h`` must be finite and positive (checked before)."""
    n = duration / h
    if not math.isfinite(n) or n > MAX_STEPS:
        raise LimitError(f"{duration_name} {duration:g} s at {h_name} {h:g} s is {n:.3g} steps; at most "
                         f"{MAX_STEPS:.0e} steps in one run (a day at 1 kHz is 8.64e7): give a shorter "
                         f"{duration_name} or a larger {h_name}")
    return n


def simulation_bytes(n_bodies: int, n_observations: int, n_controls: int) -> int:
    """Bytes per step a simulation keeps: states (13 floats per body), observations and controls, each on the
    device and as a NumPy copy."""
    return 8 * (2 * 13 * n_bodies + 2 * n_observations + 2 * n_controls + 4)


def check_steps(n_steps: float, bytes_per_step: float, what: str, names: str) -> None:
    """``n_steps`` steps that keep ``bytes_per_step`` bytes each fit in :func:`memory_budget`; else LimitError
    saying ``what`` needs how much, and which arguments (``names``) to change."""
    need = float(n_steps) * float(bytes_per_step)
    budget = memory_budget()
    if not need <= budget:
        raise LimitError(f"{names}: {what} of {n_steps:.3g} steps would keep {_bytes(need)} of arrays, more than "
                         f"the {_bytes(budget)} this run may use (half the machine's memory); shorten the run")


def check_window(lag: float, h: float, lag_name: str = "lag", h_name: str = "h") -> None:
    """A stream window of ``lag / h`` states is at most :data:`MAX_WINDOW`; else LimitError naming both."""
    n = lag / h
    if not n <= MAX_WINDOW:
        raise LimitError(f"{lag_name} {lag:g} s at {h_name} {h:g} s is a window of {n:.3g} states; at most "
                         f"{MAX_WINDOW:.0e} (the smoother keeps every state of the window): give a shorter "
                         f"{lag_name}")


def check_count(name: str, value: float, limit: int, why: str) -> None:
    """``value`` (of argument ``name``) is at most ``limit``; else LimitError with ``why`` the limit is there."""
    if not value <= limit:
        raise LimitError(f"{name} {value:g}: at most {limit:g} ({why})")
