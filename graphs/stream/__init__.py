"""Fixed-lag smoothing of a live encoder stream (the factors of :mod:`mbfg.graphs.joint`, added step by step).

:class:`StreamEstimator` takes samples one at a time, ``push(t, readings,
controls)``, and returns per sample the *filtered* estimate of the newest
state and the *smoothed* estimate of the state one lag back. Underneath, the
graph of :func:`mbfg.graphs.joint.build_joint_problem` is grown one time-step
at a time in a fixed-lag smoother: our own square-root information smoother
along the chain of states (:mod:`mbfg.graphs.stream.chain`: an update's
prediction, linearization and elimination in one compiled program,
:mod:`mbfg.graphs.stream.fused`, no GTSAM callbacks; iSAM2's estimates to
round-off), with online refinement iSAM2 (``smoother="incremental"``, our
window over GTSAM's ``ISAM2``), on request
GTSAM's ``IncrementalFixedLagSmoother`` or ``BatchFixedLagSmoother``
(Levenberg-Marquardt over the window):

- the first state x_0 gets the initial-state factor (3.14-3.15), its
  observation (3.5) and a weak prior on its velocity (the observations fix
  the configuration; the velocity along the joints is unknown until a second
  state arrives and would leave the first linear system singular);
- each new state x_{k+1} gets the impulse factor (3.6-3.7) from x_k with the
  control u_k and, when any reading is valid, its observation factor;
- states stamped more than ``lag`` before the newest are marginalized: the
  window holds ``m + 1`` states, ``m = round(lag / h)``, and the *smoothed*
  estimate is that of the oldest one, x_{k-m};
- the user's own factors (``factors=``, :class:`StreamFactors`: a gyroscope on a link, say) on each
  new state, or between it and the one before, with the readings given per sample
  (``push(..., sensors={name: value})``);
- with ``update_every = N > 1`` the states of N samples enter in one update
  (predicted by the model's Spook steps, their factors linearized in one
  vmapped call per type) and the window holds ``m + N`` states.

Weights, as in the calibration (Marklund et al. (2025) section 4.4): the objective is
``sum |Delta y_k|^2 / sigma_y^2 + sum |Delta p_k|^2 / sigma_p^2``, and the
covariances are in the units of the readings. ``sigma_y`` defaults to the
encoder's quantization noise ``step / sqrt(12)`` (step = 2 pi / ppr), else the
calibration's estimated observation noise. ``sigma_p`` is, in this order: the
``sigma_impulse`` given; ``sigma_y / sqrt(w)`` for a state error weight w given
(then the minimizer is that of ``mbfg calibrate`` / ``mbfg crossval`` with the
same w); with :meth:`StreamEstimator.from_calibration`, the calibration's
estimate of the impulse noise (Marklund et al. (2025) eq. 3.23: what the model left
unexplained on the calibration log); else ``sigma_y / sqrt(w)`` at the model's
own weight (:attr:`~mbfg.rigid.RigidModel.weight`, as calibration). On a real
rig the estimate is what makes the dynamics smooth the rates: on the QUBE-Servo
log a weight-derived sigma_p five times the estimate left the pendulum rate as
rough as finite differences of the encoder angle (``benchmarks/stream.py --only
qube`` prints both).

Time: samples are placed on the grid ``t_0 + j * period`` (t_0: the first
complete sample); states live every ``stride = h / period`` samples, and as in
the batch graph only the readings at state times enter observation factors
(the control of a state-time sample is held over the step). Keys come from the
state index k (:mod:`mbfg.keys`), the smoother's timestamps are ``k * h``.

Faults (never raised; counted in :attr:`StreamEstimator.status`, flagged on the
returned step):

- a gap (samples missing) up to ``max_gap``: the missing states are bridged
  by impulse factors alone (the dynamics), with the last control held, their
  values predicted by the model's Spook steps; the new sample's jump gate is
  judged against that prediction. The turn of its readings is theirs
  wherever they carry it (absolute counts, angles from a source that counts
  turns or has not wrapped), after a bridged gap as after a restart: an
  extrapolation a turn off would leave the estimate a turn off the readings
  for good. Only a counter that wraps and angles within one turn that have
  wrapped before take the turn nearest the prediction (a restart: nearest
  the last reading), with a warning where that decided it narrowly;
- a leap (a time more than ``max_gap`` from the last one, forward or back):
  the sample is dropped; after ``resync`` samples in a row on the new clock
  the window restarts there (its smoothed estimate empty until a lag has
  passed), so a bad time never makes thousands of states;
- a missing reading (None, an empty cell): left out of its observation
  factor, counted;
- a non-finite reading: that reading is dropped (a warning the first time);
  a non-finite control is replaced by the last one; a non-finite time drops the sample;
- a duplicate or out-of-order timestamp (on or before the last sample's grid
  slot): the sample is dropped;
- a jump: a reading further than ``jump`` from the filtered prediction is left
  out of its observation factor; after ``resync`` such readings in a row on a
  channel the readings are believed again (a real jump, e.g. a slipped
  encoder): the smoother restarts from them, its velocity carried over;
- a failed solve (an exception from GTSAM or the chain): the smoother restarts
  at the next complete sample, its velocity prior centred on the last
  estimate; a restart that fails before it adds a state restarts again without
  it (the readings decide), so a diverged estimate is not carried from restart
  to restart.

Trust: solver restarts and jumps are the signs that the estimate has left the
readings (a model or calibration that does not fit them);
:meth:`StreamStatus.rates` gives them per sample, and ``mbfg smooth`` exits
with status 1 where one exceeds ``--max-fault-rate``.
:meth:`StreamEstimator.from_calibration` warns by name on parameters the
calibration's log did not fit (on a bound, not excited, not determined).

Long streams: once JAX and GTSAM are loaded a process holds about half a
million objects, and each of Python's full garbage collections walks them all:
a stall of many samples at 1 kHz (``benchmarks/stream.py`` counts them). A streaming
process should call ``gc.freeze()`` once the first update that grows the window
has run (every factor type is then compiled), as ``mbfg smooth`` does when run
as a program; later collections then walk only what the stream made.
"""

from mbfg.graphs.stream.config import DEFAULT_RELINEARIZE_THRESHOLD, StreamConfig, read_calibration
from mbfg.graphs.stream.estimator import StreamEstimator
from mbfg.graphs.stream.readout import Readout, hinge_angles, joint_coordinates, wrap_angles  # noqa: F401 - private ones for tests
from mbfg.graphs.stream.results import (
    DEFAULT_SIGMA,
    VELOCITY_PRIOR_SIGMA,
    Estimate,
    StreamReplay,
    StreamStatus,
    StreamStep,
    StreamWarning,
)
from mbfg.graphs.stream.sensors import READING, StreamFactors
from mbfg.graphs.stream.window import ISAM2Window  # noqa: F401 - for tests

__all__ = [
    "DEFAULT_RELINEARIZE_THRESHOLD",
    "DEFAULT_SIGMA",
    "READING",
    "VELOCITY_PRIOR_SIGMA",
    "Estimate",
    "StreamConfig",
    "StreamEstimator",
    "StreamFactors",
    "StreamReplay",
    "StreamStatus",
    "StreamStep",
    "StreamWarning",
    "joint_coordinates",
    "read_calibration",
]
