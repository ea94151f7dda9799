"""The options of :func:`mbfg.calibration.calibrate` beside its problem: the LM's (:class:`~mbfg.lm_config.LMConfig`,
with :func:`calibration_lm`'s defaults) and the workflow's (:class:`CalibrationOptions`: how the solve starts, what
it tries again, what it computes after).

Both are frozen; one field is changed with ``dataclasses.replace``. A bad field is refused when the object is made,
naming it (:class:`~mbfg.errors.ModelError`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from mbfg.calibration_arguments import positive, whole
from mbfg.errors import ModelError
from mbfg.lm_config import LMConfig

if TYPE_CHECKING:
    from mbfg.rigid import RigidModel

#: The LM stops once an iteration lowers the cost by less than this fraction of it (:func:`calibration_lm`). With
#: dry friction the cost keeps creeping down by about 0.05 % per iteration once the parameters the data determine
#: have settled (the steps cross friction kinks, gain ratio ~0.06); 1e-3 stops there.
RELATIVE_TOL = 1e-3


def calibration_lm(model: RigidModel, **changes: Any) -> LMConfig:
    """:func:`~mbfg.calibration.calibrate`'s LM options for ``model`` where it is given none: at most 20
    iterations, ``relative_tol`` :data:`RELATIVE_TOL`, and halvings of a rejected step
    (:attr:`LMConfig.backtracking <mbfg.lm_config.LMConfig.backtracking>`)
    :data:`~mbfg.graphs.joint.CONTACT_BACKTRACKING` for a model with contacts, 0 (the plain LM) for others.

    With contacts the impulse residuals steepen a hundredfold where a contact engages. On Berard and Trinkle's
    (2008) particle over 50 noise draws backtracking takes median 15 and 27 iterations at 5e-3 and 5e-2 m of noise
    instead of 36 and 44, and leaves 3 draws of 50 in another minimum at 5e-1 instead of 13 (``python
    benchmarks/particles.py --restart-weight 1e3 --draws 50 --backtracking 8`` against ``--backtracking 0``). Not the
    default without contacts: on the two real rigs' recordings (``python benchmarks/real_rigs.py --backtracking 8``)
    it reaches lower costs but is still creeping down after 30 iterations, where the plain LM stops on its tolerance
    (QUBE) or creeps as well (DFKI). ``changes``: fields that differ from these, e.g.
    ``calibration_lm(model, max_iterations=50)`` (``dataclasses.replace`` of the default)."""
    from mbfg.graphs.joint import default_backtracking

    default = LMConfig(max_iterations=20, relative_tol=RELATIVE_TOL, backtracking=default_backtracking(model, None))
    return replace(default, **changes)


@dataclass(frozen=True)
class CalibrationOptions:
    """How :func:`~mbfg.calibration.calibrate` runs, beside its problem and its LM's options.

    Attributes:
        smooth_start: LM iterations of the states-only initialization of a model with dry friction
            (:func:`~mbfg.graphs.joint.smooth_initial_states`, with the calibration's damping rule); None: the default
            :data:`~mbfg.graphs.joint.SMOOTH_START_ITERATIONS`; 0 skips it.
        soft_start: a factor > 1: first solve with every joint compliance that many times softer, then the
            model's own from that solution's states and parameters (:func:`~mbfg.graphs.restarts.stiffen`). For stiff
            joints (eps_lin of 1e-8 m/N and less), where a solve from the readings does not converge; 100 converges
            there in about ten iterations after the softer solve's. The iterations reported are both solves'. None:
            no softer solve.
        restart_weight: a state error weight w (the units of :func:`mbfg.roles.weight_unit`): after the LM, solve
            again at this w from a free simulation of the identified model
            (:func:`~mbfg.graphs.restarts.restart_from_simulation`); the result is the second solve's, its iterations
            both solves'. For contacts at large noise: a first solve at a small w (the readings hold the states),
            restarted at a large w (the dynamics trusted). The second solve starts from the damping
            :data:`~mbfg.graphs.restarts.RESTART_LAMBDA_INITIAL`: its dynamics-consistent start is where the
            Gauss-Newton model holds. None: no restart. Not with ``soft_start`` (each starts a second solve).
        restart_search: with ``restart_weight``, also free-simulate this many parameter vectors spread over the free
            parameters' boxes (which must be finite) and restart from the two whose simulations are closest to the
            readings too; the lowest cost of the three restarted solves is the result
            (:func:`~mbfg.graphs.restarts.restarts_from_simulations`; the iterations count all of them). For contacts
            at large noise, where the first solve can leave a contact in the wrong mode. 0: no search.
        bias: also estimate each parameter's bias from the discrete model
            (:func:`~mbfg.calibration.discretization_bias`: two more calibrations, from this one's result, at 2h and
            at a tenth of the joint compliances, each with this one's problem and options, ``soft_start`` included).
        covariance: compute the parameters' standard deviations (one extra factorization).
    """

    smooth_start: int | None = None
    soft_start: float | None = None
    restart_weight: float | None = None
    restart_search: int = 0
    bias: bool = False
    covariance: bool = True

    def __post_init__(self) -> None:
        if self.smooth_start is not None:
            whole("CalibrationOptions.smooth_start", self.smooth_start, 0)
        if self.restart_weight is not None:
            positive("CalibrationOptions.restart_weight", self.restart_weight,
                     "a positive state error weight (or None: no restart)")
        if self.soft_start is not None and not positive("CalibrationOptions.soft_start", self.soft_start,
                                                        "a factor > 1 (or None: none)") > 1:
            raise ModelError(f"CalibrationOptions.soft_start: expected a factor > 1 (or None: none), "
                             f"got {self.soft_start!r}")
        if self.soft_start is not None and self.restart_weight is not None:
            raise ModelError("CalibrationOptions.soft_start and restart_weight: give one of them; each starts a "
                             "second solve")
        if whole("CalibrationOptions.restart_search", self.restart_search, 0) and self.restart_weight is None:
            raise ModelError("CalibrationOptions.restart_search: a search picks the starts of a restart; give "
                             "restart_weight too")
        for name in ("bias", "covariance"):
            if not isinstance(getattr(self, name), bool):
                raise ModelError(f"CalibrationOptions.{name}: expected True or False, got {getattr(self, name)!r}")


__all__ = ["RELATIVE_TOL", "CalibrationOptions", "calibration_lm"]
