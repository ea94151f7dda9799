"""``mbfg identify``: a URDF robot's base inertial parameters and joint friction from a log of its joint angles and
torques, written back as a calibrated URDF.

::

    mbfg identify ROBOT.urdf LOG.csv [--torques TAU.csv] --out CALIBRATED.urdf [--json RESULT.json]
                  [--friction viscous,coulomb,offset] [--method consistent|ls]
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from mbfg.cli.args import Subparsers, finite_float, iteration_count, nonnegative_float, positive_float
from mbfg.cli.common import check_output, check_outputs, eprint, json_safe, start_clock, wall_seconds, write_json

if TYPE_CHECKING:
    import numpy as np

    from mbfg.kinematic_tree import KinematicTree
    from mbfg.logs import Log

DESCRIPTION = """\
Identification of a fixed-base URDF robot from a recording of its joint
angles and joint torques: the base parameters (the combinations of the links'
inertial parameters and the joints' friction that joint torques determine;
Gautier 1990) with their standard deviations, the directions no torque sees,
named, and a calibrated URDF.

LOG is a CSV log: a column t [s] on a uniform grid, one column per moving joint
named as the URDF's joint, its angle [rad] (or position [m]), and the joint
torques [N m or N] in columns tau_<joint> (as 'mbfg torques' writes them) or
u_<joint> (as 'mbfg excite --out-controls' and 'mbfg simulate' write them),
unless --torques gives them in a file of their own (t, the same times, and the
torque columns). A missing joint, a column that names no joint, a time off the
uniform grid or a torque file with other times is refused, naming it.

Rates and accelerations: each joint's angles are fitted by a cubic smoothing
spline (as 'mbfg torques'; penalty by generalized cross-validation unless
--smoothing), differentiated; or, with --cutoff F, low-passed by a zero-phase
Butterworth filter of order 4 at F Hz and differenced (the method of most
identification papers; F a few times the highest frequency of the motion, e.g.
5 Hz for 'mbfg excite --duration 10 --harmonics 3'). Cross-validation leaves
more noise in the accelerations, and noise in the regressor biases the
estimate (errors in variables): prefer --cutoff where the motion's band is
known. --trim S seconds at each end are left out, where the spline's natural
ends or the filter's start-up bias the accelerations (default 0.1 s with the
spline, 5 / F with the filter).

Model, per joint i: tau_i = Y_i(q, qd, qdd) pi + F_v qd_i + F_c s(qd_i) + F_o
(+ I_a qdd_i with --rotor): pi the ten standard parameters of each link, s the
sign (or tanh(qd / W) with --coulomb-width W); --friction names the friction
terms kept (viscous, coulomb, offset; 'none': no friction).

--method ls: least squares of the base columns of the regressor (the method of
most identification papers); standard deviations sigma^2 (W_b^T W_b)^-1 with
sigma from the residual, which assume independent torque errors. The
calibrated URDF holds the URDF's parameters moved by the least change that gives
the estimate; where that is no mass distribution (a link's pseudo-inertia not
positive definite) or has negative friction, no URDF is written (exit status 1).
--method consistent (default): a Levenberg-Marquardt from the URDF's parameters
over the log-Cholesky coordinates of each link's pseudo-inertia (Rucker and
Wensing 2022), with F_v, F_c, I_a >= 0: every iterate is a physical arm; its
base parameters equal the least squares' where those are physical. The
directions no torque sees keep the URDF's values in both.

Standard output: the base parameters (value, standard deviation, expression),
the unidentifiable directions, the fit's torque RMS per joint and the solver's
status. --out: the calibrated URDF (inertials of the moving links; the joints'
<dynamics damping="F_v" friction="F_c"/>, an excluded term written 0). --json:
all of it, with the offsets and rotor inertias URDF has no field for. Exit
status 1 when the solve did not converge or failed (the reason is printed) or
no URDF could be written, 2 on bad input.
"""

EPILOG = """\
examples:
  mbfg identify panda.urdf log.csv --out panda_calibrated.urdf --json result.json
  mbfg identify panda.urdf ref.csv --torques measured.csv --method ls --out panda_ls.urdf
  mbfg identify panda.urdf log.csv --friction viscous,coulomb --rotor --out calibrated.urdf

references:
  M. Gautier: Numerical calculation of the base inertial parameters of robots,
  IEEE International Conference on Robotics and Automation, 1990
  C. Rucker, P. M. Wensing: Smooth parameterization of rigid-body inertia,
  IEEE Robotics and Automation Letters, 2022
"""

#: The CLI's names of the friction terms (:data:`mbfg.joint_friction.TERMS`).
FRICTION_TERMS = ("viscous", "coulomb", "offset")
METHODS = ("consistent", "ls")


def _friction_terms(text: str) -> tuple[str, ...]:
    if text.strip() == "none":
        return ()
    terms = [t.strip() for t in text.split(",")]
    for term in terms:
        if term not in FRICTION_TERMS:
            raise argparse.ArgumentTypeError(f"{term!r} is not a friction term; expected some of "
                                             f"{','.join(FRICTION_TERMS)}, or none")
    if len(set(terms)) != len(terms):
        raise argparse.ArgumentTypeError(f"a term is given twice in {text!r}")
    return tuple(terms)


def add_parser(sub: Subparsers) -> None:
    """Register ``identify`` on the ``mbfg`` subcommand parsers ``sub``."""
    cmd = sub.add_parser(
        "identify",
        help="base inertial parameters and joint friction of a URDF robot from joint angles and torques",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    cmd.add_argument("robot", metavar="ROBOT.urdf", help="the robot's URDF file (fixed base): the start")
    cmd.add_argument("log", metavar="LOG.csv", help="log: t, one angle column per moving joint (and the torques)")
    cmd.add_argument("--torques", default=None, metavar="TAU.csv",
                     help="the joint torques: t and tau_<joint> or u_<joint> columns (default: in LOG)")
    cmd.add_argument("--out", required=True, metavar="CALIBRATED.urdf", help="the calibrated URDF")
    cmd.add_argument("--json", default=None, metavar="RESULT.json", help="the result as JSON")
    cmd.add_argument("--method", choices=METHODS, default="consistent",
                     help="consistent (default): LM over physically consistent parameters; ls: least squares")
    cmd.add_argument("--friction", type=_friction_terms, default=FRICTION_TERMS, metavar="TERMS",
                     help="friction terms per joint, comma-separated: viscous, coulomb, offset (default: all "
                     "three), or none")
    cmd.add_argument("--coulomb-width", type=nonnegative_float, default=0.0, metavar="W",
                     help="Coulomb friction as tanh(qd / W) [rad/s] (default 0: sign(qd))")
    cmd.add_argument("--rotor", action="store_true", help="a reflected rotor inertia I_a per joint")
    cmd.add_argument("--smoothing", type=finite_float, default=None, metavar="LAM",
                     help="the smoothing spline's penalty (>= 0; default: generalized cross-validation per joint)")
    cmd.add_argument("--cutoff", type=positive_float, default=None, metavar="F",
                     help="rates and accelerations by a Butterworth low-pass at F Hz and differences (default: the "
                     "smoothing spline)")
    cmd.add_argument("--trim", type=nonnegative_float, default=None, metavar="S",
                     help="seconds left out at each end of the log (default 0.1 with the spline, 5 / F with "
                     "--cutoff F)")
    cmd.add_argument("--max-iterations", type=iteration_count, default=200, metavar="N",
                     help="of the LM (default 200)")
    cmd.add_argument("--quiet", action="store_true", help="no summary line on stderr")
    cmd.set_defaults(handler=run)


def _header(path: str, what: str) -> list[str]:
    """The column names of the CSV file ``path`` (``what`` names it in messages)."""
    import csv

    from mbfg.errors import DataError

    try:
        with open(path, newline="", encoding="utf-8-sig") as fh:
            header = next(csv.reader(fh), None)
    except FileNotFoundError:
        raise DataError(f"{what} {path}: file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(f"{what} {path}: cannot read it ({exc})") from None
    if not header:
        raise DataError(f"{what} {path}: empty; expected a CSV header (t, ...)")
    return [c.strip() for c in header]


def torque_columns(tree: KinematicTree, columns: list[str], what: str, angles: bool) -> list[str]:
    """The torque column of each joint of ``tree`` (n,) among ``columns``: ``tau_<joint>`` or ``u_<joint>`` (the
    joint's name as :func:`mbfg.urdf.identifier` writes a control). Refuses, naming it, a column that names no
    joint (or, ``angles`` False, an angle column: a torque file holds only t and torques), a joint given twice or
    not at all, and (``angles``) a joint's missing angle column."""
    from mbfg.errors import DataError
    from mbfg.urdf import identifier

    by_name = {f"tau_{j}": j for j in tree.joints} | {f"u_{identifier(j)}": j for j in tree.joints}
    found: dict[str, list[str]] = {j: [] for j in tree.joints}
    joints = ", ".join(tree.joints)
    for column in columns:
        if column == "t" or (angles and column in tree.joints):
            continue
        if column in by_name:
            found[by_name[column]].append(column)
        elif column.startswith(("tau_", "u_")):
            raise DataError(f"{what}: column {column!r} names no joint of {tree.name} (its joints: {joints})")
        else:
            expected = "t, one angle column per joint and" if angles else "t and"
            raise DataError(f"{what}: column {column!r} is none of {expected} the joint torques tau_<joint> or "
                            f"u_<joint> of {tree.name} (its joints: {joints})")
    if angles:
        for joint in tree.joints:
            if joint not in columns:
                raise DataError(f"{what}: no column {joint!r}: expected the angle of every joint of {tree.name} "
                                f"({joints})")
    for joint, given in found.items():
        if len(given) > 1:
            raise DataError(f"{what}: joint {joint}'s torque is in two columns ({', '.join(given)}); expected one")
    return [given[0] if given else "" for given in found.values()]


def _uniform(log: Log, what: str) -> float:
    """The sample period [s] of a log on a uniform grid; DataError naming the first row off it."""
    import numpy as np

    from mbfg.errors import DataError
    from mbfg.logs import grid_period, time_grid

    if len(log.t) < 3:
        raise DataError(f"{what}: {len(log.t)} rows; expected a recording of many samples")
    grid = time_grid(log.t)
    if not grid.regular:
        dt = np.diff(log.t)
        i = int(np.argmax(np.abs(dt - np.median(dt))))
        raise DataError(f"{what}: times are not uniform: t[{i + 1}] - t[{i}] = {dt[i]:.6g} s, the median step is "
                        f"{np.median(dt):.6g} s; expected a uniform grid (resample the log first)")
    return grid_period(log)


def read_recording(tree: KinematicTree, log_path: str, torques_path: str | None) -> tuple[Log, np.ndarray, float]:
    """The log's angles (a :class:`~mbfg.logs.Log` of the joints), its torques (T, n) [N m or N] and its sample
    period [s], checked as the command's description says."""
    import numpy as np

    from mbfg.errors import DataError
    from mbfg.logs import read_log

    columns = _header(log_path, "LOG.csv")
    in_log = torque_columns(tree, columns, f"LOG.csv {log_path}", angles=True)
    if torques_path is None:
        missing = [j for j, c in zip(tree.joints, in_log, strict=True) if not c]
        if missing:
            raise DataError(f"LOG.csv {log_path}: no torque column for joint {missing[0]} (tau_{missing[0]} or "
                            f"u_{missing[0]}); expected one per joint, or the torques in a file of their own "
                            f"(--torques)")
        log = read_log(log_path, tree.joints, in_log)
        period = _uniform(log, f"LOG.csv {log_path}")
        return log, log.u, period
    given = [c for c in in_log if c]
    if given:
        raise DataError(f"LOG.csv {log_path}: has torque columns ({', '.join(given)}) and --torques {torques_path} "
                        f"gives them too; expected them in one place")
    log = read_log(log_path, tree.joints)
    period = _uniform(log, f"LOG.csv {log_path}")
    in_file = torque_columns(tree, _header(torques_path, "--torques"), f"--torques {torques_path}", angles=False)
    missing = [j for j, c in zip(tree.joints, in_file, strict=True) if not c]
    if missing:
        raise DataError(f"--torques {torques_path}: no torque column for joint {missing[0]} (tau_{missing[0]} or "
                        f"u_{missing[0]}); expected one per joint")
    tau = read_log(torques_path, (), in_file)
    if len(tau.t) != len(log.t) or not np.allclose(tau.t, log.t, rtol=0.0, atol=1e-6 * period):
        rows = min(len(tau.t), len(log.t))
        off = np.flatnonzero(~np.isclose(tau.t[:rows], log.t[:rows], rtol=0.0, atol=1e-6 * period))
        where = (f"row {off[0]}: t = {tau.t[off[0]]!r} s, the log's {log.t[off[0]]!r} s" if off.size
                 else f"{len(tau.t)} rows, the log {len(log.t)}")
        raise DataError(f"--torques {torques_path}: expected the times of LOG.csv {log_path}, got other ones ({where})")
    return log, tau.u, period


def run(args: argparse.Namespace) -> int:
    """The ``identify`` subcommand (see :data:`DESCRIPTION`)."""
    import numpy as np

    from mbfg.arm_identification import (
        MAX_CONDITION,
        consistent_identification,
        extended_base_parameters,
        friction_bounds,
        least_squares_identification,
        parameter_names,
        stacked_regressor,
        standard_from_base,
    )
    from mbfg.errors import DataError
    from mbfg.joint_derivatives import DerivativeOptions, joint_derivatives
    from mbfg.joint_friction import FrictionModel
    from mbfg.kinematic_tree import load_tree
    from mbfg.lm_config import LMConfig
    from mbfg.pseudo_inertia import is_physically_consistent
    from mbfg.urdf_writer import calibrated_urdf

    start_clock(args)
    inputs = [("ROBOT.urdf", args.robot), ("LOG.csv", args.log), ("--torques", args.torques)]
    check_output(args.out, "URDF", "--out", inputs)
    if args.json is not None:
        check_output(args.json, "JSON", "--json", inputs)
    check_outputs([("--out", args.out), ("--json", args.json)])
    if args.smoothing is not None and args.smoothing < 0.0:
        raise DataError(f"--smoothing {args.smoothing:g}: expected a number >= 0")
    if args.smoothing is not None and args.cutoff is not None:
        raise DataError("--smoothing and --cutoff: expected one of them (the spline's penalty or the filter's cutoff)")
    trim = args.trim if args.trim is not None else (0.1 if args.cutoff is None else 5.0 / args.cutoff)
    if args.coulomb_width > 0.0 and "coulomb" not in args.friction:
        raise DataError(f"--coulomb-width {args.coulomb_width:g}: the friction terms ({','.join(args.friction) or 'none'}) "
                        f"have no Coulomb friction to shape")
    with open(args.robot, encoding="utf-8") as fh:
        urdf_text = fh.read()
    tree = load_tree(args.robot)
    model = FrictionModel(coulomb_width=args.coulomb_width, rotor=args.rotor, terms=args.friction)
    log, tau, period = read_recording(tree, args.log, args.torques)
    if args.cutoff is not None and args.cutoff >= 0.5 / period:
        raise DataError(f"--cutoff {args.cutoff:g}: expected a frequency below the log's Nyquist frequency "
                        f"{0.5 / period:g} Hz (sample period {period:g} s)")
    q, qd, qdd = joint_derivatives(log.t, log.y, tree.joints, DerivativeOptions(args.smoothing, args.cutoff))
    keep = (log.t >= log.t[0] + trim - 1e-9 * period) & (log.t <= log.t[-1] - trim + 1e-9 * period)
    base = extended_base_parameters(tree, model)
    rows = int(np.count_nonzero(keep)) * tree.n
    if rows <= base.rank:
        raise DataError(f"LOG.csv {args.log}: {int(np.count_nonzero(keep))} samples after --trim {trim:g} s at "
                        f"each end, {rows} torques for {base.rank} base parameters; expected more torques (a longer "
                        f"log or a shorter --trim)")
    W = stacked_regressor(tree, q[keep], qd[keep], qdd[keep], model)
    tau = tau[keep]
    names = parameter_names(tree, model)
    ls = least_squares_identification(tree, W, tau, base, model)
    x0 = np.concatenate([tree.pi.ravel(), np.zeros(tree.n * model.size)])
    status, message, iterations = "converged", "least squares: solved directly", 1
    unwritable = ""  # why the estimate cannot be written as a URDF
    if not ls.condition <= MAX_CONDITION:
        status = "failed"
        message = (f"the log does not excite every base parameter (condition number of the scaled base regressor "
                   f"{ls.condition:.3g} > {MAX_CONDITION:g}): a longer or more exciting trajectory (mbfg excite)")
    if args.method == "ls":
        x, values, std, sigma = standard_from_base(base, ls.values, x0), ls.values, ls.std, ls.sigma
        pi, phi = x[:10 * tree.n].reshape(tree.n, 10), x[10 * tree.n:].reshape(tree.n, model.size)
        bad = np.flatnonzero(~is_physically_consistent(pi))
        lower, _ = friction_bounds(tree.n, model)
        negative = np.flatnonzero(phi.ravel() < lower)
        if bad.size:
            unwritable = (f"the least-squares estimate is no mass distribution (link {tree.links[bad[0]]}: its "
                          f"pseudo-inertia is not positive definite); --method consistent keeps every link physical")
        elif negative.size:
            k = int(negative[0])
            unwritable = (f"the least-squares estimate has {names[10 * tree.n + k]} = {phi.ravel()[k]:.4g} < 0; "
                          f"--method consistent keeps friction >= 0")
    else:
        phi0 = np.zeros((tree.n, model.size))
        fit = consistent_identification(tree, W, tau, tree.pi, phi0, model,
                                        LMConfig(max_iterations=args.max_iterations, damping_update="nielsen"),
                                        base=base, sigma=max(ls.sigma, 1e-12))
        pi, phi = fit.pi, fit.phi
        x = np.concatenate([pi.ravel(), phi.ravel()])
        assert fit.base_values is not None and fit.base_std is not None  # filled in: base was given
        values, std, sigma = fit.base_values, fit.base_std, fit.sigma
        if status != "failed":
            status, message, iterations = fit.lm.status, fit.lm.message, fit.lm.iterations
    residual = (W.reshape(-1, len(names)) @ x).reshape(tau.shape) - tau
    rms = np.sqrt(np.mean(residual**2, axis=0))

    written = []
    friction = _urdf_friction(model, phi)
    if status == "failed":
        unwritable = "the solve failed"
    if not unwritable:  # a failed solve's parameters are no calibration (a not converged one's are its last)
        from mbfg.atomic import replacing

        try:
            with replacing(args.out) as fh:
                fh.write(calibrated_urdf(urdf_text, tree, pi, friction))
        except OSError as exc:
            raise DataError(f"--out {args.out}: cannot write the URDF ({exc.strerror or exc})") from None
        written.append(args.out)
    derivatives = {"cutoff_Hz": args.cutoff} if args.cutoff is not None else {"smoothing": args.smoothing}
    doc = {"robot": tree.name, "urdf": args.robot, "log": args.log, "torques": args.torques, "method": args.method,
           "friction_model": {"terms": list(model.terms), "coulomb_width": model.coulomb_width, "rotor": model.rotor},
           "samples": int(np.count_nonzero(keep)), "trim_s": trim, "derivatives": derivatives,
           "sample_period_s": period,
           "status": status, "message": message, "iterations": iterations, "sigma_Nm": sigma,
           "condition": ls.condition,
           "base_parameters": [{"expression": e, "value": v, "std": s} for e, v, s in
                               zip(base.expressions, values, std, strict=True)],
           "unidentifiable": list(base.unidentifiable),
           "torque_rms": dict(zip(tree.joints, rms, strict=True)),
           "parameters": dict(zip(names, x, strict=True)),
           "urdf_written": not unwritable, "urdf_not_written_because": unwritable or None}
    if args.json is not None:
        write_json(json_safe(doc), args.json, "--json")
        written.append(args.json)
    _report(tree, base, values, std, rms, status, message, iterations, args.method, sigma)
    if unwritable:
        print(f"no URDF written: {unwritable}")
    if not args.quiet:
        eprint(f"mbfg identify: {tree.name}, {tree.n} joints, {int(np.count_nonzero(keep))} samples of {args.log}, "
               f"{base.rank} base parameters; wrote {', '.join(written) or 'nothing'}; wall in all "
               f"{wall_seconds(args):.1f} s")
    return 0 if status == "converged" and not unwritable else 1


def _urdf_friction(model: Any, phi: np.ndarray) -> np.ndarray | None:
    """(n, 2) [F_v, F_c] for the URDF's ``<dynamics>``, a term the model leaves out as 0; None without either."""
    import numpy as np

    if not {"Fv", "Fc"} & set(model.names):
        return None
    return np.stack([phi[:, model.names.index(name)] if name in model.names else np.zeros(len(phi))
                     for name in ("Fv", "Fc")], axis=1)


def _report(tree: KinematicTree, base: Any, values: np.ndarray, std: np.ndarray, rms: np.ndarray, status: str,
            message: str, iterations: int, method: str, sigma: float) -> None:
    from mbfg.solvers import status_words

    print(f"base parameters of {tree.name} ({base.rank}; {'least squares' if method == 'ls' else 'consistent LM'}), "
          f"value and standard deviation [SI units]:")
    width = len(str(base.rank))
    for k, (expression, value, s) in enumerate(zip(base.expressions, values, std, strict=True), start=1):
        print(f"  {k:>{width}}  {value:+.6e}  {s:.2e}  {expression}")
    print(f"unidentifiable directions ({len(base.unidentifiable)}; kept at the URDF's values):")
    for direction in base.unidentifiable:
        print(f"  {direction}")
    print("torque RMS of the fit [N m]: " + ", ".join(f"{j} {r:.4g}" for j, r in zip(tree.joints, rms, strict=True))
          + f" (residual standard deviation {sigma:.4g})")
    outcome = status_words(status, message)
    print(f"solver: {outcome}" + (f", {message}" if status == "converged" and message else "")
          + (f", {iterations} iterations" if method == "consistent" else ""))
