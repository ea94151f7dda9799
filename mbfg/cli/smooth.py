"""``mbfg smooth``: fixed-lag smoothing of a log read line by line (stdin or a file), as it arrives.

::

    some_reader | mbfg smooth MODEL --params CALIB.json [--lag S] [--ppr N [--counts [--wrap M]]]
                              [--dt H] [--period P] [--std] [--smoother chain|incremental|batch]
                              [--columns t,NAMES...] [--max-gap S] [--max-fault-rate PERCENT]
                              [--input FILE|-] [--output FILE|-] [--quiet] | plotter

Input: the standard log format (:mod:`mbfg.logs`): a header line naming ``t``,
the model's observations and its controls (a header with other columns is refused unless ``--columns``
names them: they are then ignored), then one sample per line (or no header, with ``--columns``). Unlike ``read_log``, a
bad line (wrong cells, bytes that are not UTF-8) does not stop the command: it
is a fault of the stream, handled and counted (:mod:`mbfg.graphs.stream`).
Output: one CSV line per input data line, flushed at once, so the command can
sit in a pipe (to a file, --output, the lines go to a temporary file beside it,
renamed to the file's name when the input ends or on Ctrl-C: a failed or killed
run leaves the old file as it was). The JAX functions are compiled before the first line is read;
Ctrl-C ends a live pipe with the fault summary, the output flushed. A calibration whose parameters its log
did not fit is named in warnings; a stream whose solver restarts or jumps exceed ``--max-fault-rate`` of its
samples says so and exits with status 1.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import gc
import io
import math
import os
import select
import sys
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, BinaryIO, TextIO

from mbfg.cli.args import Subparsers, counts_per_revolution, nonnegative_float, positive_float, whole_number
from mbfg.cli.common import check_output, eprint, model_input, rigid_model, start_clock, wall_seconds
from mbfg.errors import DataError, ModelError

if TYPE_CHECKING:
    from mbfg.graphs.stream import Estimate
    from mbfg.rigid import RigidModel

DESCRIPTION = """\
Estimate the states of a 3D rigid-body model from a live log, sample by
sample: a fixed-lag smoother over the impulse and observation factors
of 'mbfg calibrate', with the parameters of a calibration (--params, the JSON
of 'mbfg calibrate --out'; its h and its estimate of the impulse noise, which
weights the dynamics, are used too; --weight W weights them as the calibration
did instead).

Input (--input, default standard input): the standard log format, read line
by line as it arrives: a header 't,<observations...>,<controls...>' (a
header with other columns is refused, unless --columns names them all: the
others are then ignored), then one sample per line; or, with --columns naming
them, samples without a header line. Readings are angles [rad]
(or CoM coordinates [m]); --ppr N says the encoders have N counts per
revolution (their quantization noise, step^2/12, is then the observation
noise); with --counts the hinge readings are raw counts, and with --wrap M a
counter that wraps around after M counts is unwrapped. Bad samples never
stop the command, and each is counted: an empty cell is a missing reading
(flag missing); a gap in the times up to --max-gap is bridged by the model's
dynamics; a time further than that from the last one, forward or back, is a
leap, dropped, unless 5 samples in a row go on from it (then the window
restarts there, flag restart); a non-finite or non-numeric reading is dropped
(a warning the first time); a duplicate or out-of-order time is dropped; a
reading far from the prediction is left out (a jump); a line with the wrong
number of cells or bytes that are not UTF-8 is skipped (malformed). A summary
of these faults goes to stderr at the end, and on Ctrl-C.

Trust: a calibration whose parameters ended on a bound, were not excited by
its log or form a combination the log did not determine (the flags of
'mbfg calibrate'), or whose solve did not converge, is named in a warning on
stderr before the stream starts: the stream uses such values as fitted, and
its dynamics may leave the readings. Solver restarts and jumps (readings
left out) are the signs that they did: where either is more than
--max-fault-rate percent of the samples (default 1 %), the summary says so,
naming the rates, and the command exits with status 1 once the stream has
ended (after it wrote every line).

Output (--output, default standard output): a header, then one line per
input data line, flushed at once:
  t, every observation (filtered estimate of the newest state: hinge angles
  [rad] next to the encoder's turn count, CoM coordinates [m]), d<name> for
  their rates [rad/s, m/s], with --std std_<name> and std_d<name>; then
  t_smoothed and the same columns with the suffix _smoothed for the state one
  lag back; then flags ('|'-separated: gap, nonfinite, duplicate, out_of_order,
  off_grid, jump, resync, malformed, solver_failure, missing, leap, restart,
  waiting, between, pending; pending also marks a fault line that repeats the
  estimates while samples wait for an update).
Cells are empty while there is no estimate yet (before the first complete
sample, and for the smoothed columns until one lag has passed, also after a
restart of the window). Times are the step index times h, rounded to the
decimals of the sample period.
"""

EPILOG = """\
examples:
  mbfg simulate pendulum --duration 2 --dt 0.001 --init theta=2.5 --ppr 2048 --out log.csv
  mbfg calibrate pendulum log.csv --free J,b --out calib.json
  mbfg smooth pendulum --params calib.json --lag 0.05 --input log.csv --output estimates.csv
  tail -n +1 -f rig.csv | mbfg smooth furuta-viscous --params calib.json --ppr 2048 --std
  tail -f rig.csv | mbfg smooth furuta-viscous --params calib.json --columns t,theta,alpha,u
"""


def add_parser(sub: Subparsers) -> None:
    """Register ``smooth`` on the ``mbfg`` subcommand parsers ``sub``."""
    p = sub.add_parser(
        "smooth",
        help="fixed-lag smoothing of a live log (stdin or a file), one output line per input line",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("model", metavar="MODEL", help="built-in model name (see 'mbfg models') or path of a model file")
    p.add_argument("--params", required=True, metavar="CALIB.json",
                   help="calibration result (the JSON of 'mbfg calibrate --out'): parameters, h, noise estimates")
    p.add_argument("--lag", type=positive_float, default=0.1, metavar="S",
                   help="smoother lag [s]: the smoothed estimate is of the state S back (default: %(default)s)")
    p.add_argument("--ppr", type=counts_per_revolution, default=None, metavar="N",
                   help="encoders of N counts per revolution: their quantization is the observation noise "
                        "(default: the calibration's noise estimate)")
    p.add_argument("--counts", action="store_true",
                   help="hinge readings are raw encoder counts, not radians (needs --ppr)")
    p.add_argument("--wrap", type=counts_per_revolution, default=None, metavar="COUNTS",
                   help="the encoder counter wraps around after COUNTS counts, e.g. 65536 (needs --counts)")
    p.add_argument("--dt", type=positive_float, default=None, metavar="H",
                   help="model time-step [s] (default: the calibration's h)")
    p.add_argument("--period", type=positive_float, default=None, metavar="P",
                   help="sample period of the input [s] (default: the calibration log's, as its JSON says; "
                        "else the time-step)")
    p.add_argument("--weight", type=positive_float, default=None, metavar="W",
                   help="state error weight: impulse noise sigma_y / sqrt(W) instead of the calibration's "
                        "estimate of it")
    p.add_argument("--std", action="store_true", help="add marginal standard deviations (slower)")
    samples = whole_number(1, "a whole number of samples", "at least 1 sample")
    p.add_argument("--update-every", type=samples, default=1, metavar="N",
                   help="update the smoother once every N state-time samples, all N at once: faster, the "
                        "estimates N - 1 samples later (the lines in between repeat the last ones, flag "
                        "'pending'; default: %(default)s)")
    p.add_argument("--smoother", choices=("chain", "incremental", "batch"), default=None,
                   help="chain: square-root information smoothing along the chain of states (the default, the "
                        "faster); incremental: iSAM2; batch: Levenberg-Marquardt over the whole window at every "
                        "sample (slow)")
    p.add_argument("--columns", type=_column_names, default=None, metavar="t,NAMES...",
                   help="the input's columns, for a stream without a header line (a header line, if one comes, "
                        "must name the same)")
    p.add_argument("--max-gap", type=positive_float, default=0.25, metavar="S",
                   help="longest gap in the times bridged by the dynamics [s]; a time further than this from the "
                        "last is dropped as a leap (default: %(default)s)")
    p.add_argument("--max-fault-rate", type=nonnegative_float, default=1.0, metavar="PERCENT",
                   help="exit with status 1 at the end when the solver restarts, or the jumps (readings left "
                        "out), are more than PERCENT %% of the samples: the estimates left the readings "
                        "(default: %(default)s)")
    p.add_argument("--input", default="-", metavar="FILE", help="input log ('-', the default: standard input)")
    p.add_argument("--output", default="-", metavar="FILE", help="output CSV ('-', the default: standard output)")
    p.add_argument("--quiet", action="store_true", help="no progress lines (the warnings and summary still go to stderr)")
    p.set_defaults(handler=run)


def _column_names(text: str) -> list[str]:
    names = [c.strip() for c in text.split(",")]
    if not all(names):
        raise argparse.ArgumentTypeError(f"expected comma-separated column names, got {text!r}")
    return names


def _format(x: float | None) -> str:
    return "" if x is None or not math.isfinite(x) else repr(float(x))


def _header(model: RigidModel, std: bool) -> list[str]:
    names = list(model.observations)
    cols = names + [f"d{n}" for n in names]
    if std:
        cols += [f"std_{n}" for n in names] + [f"std_d{n}" for n in names]
    return ["t", *cols, "t_smoothed", *[f"{c}_smoothed" for c in cols], "flags"]


def _cells(estimate: Estimate | None, n: int, std: bool) -> list[str]:
    width = 2 * n * (2 if std else 1)
    if estimate is None:
        return [""] * width
    out = [_format(v) for v in estimate.coordinates] + [_format(v) for v in estimate.rates]
    if std:
        for arr in (estimate.coordinate_std, estimate.rate_std):
            out += [_format(v) for v in arr] if arr is not None else [""] * n
    return out


def _open_input(path: str) -> BinaryIO | TextIO:
    """The input as bytes (each line decoded on its own, so that a line that is not UTF-8 is one malformed
    sample, on standard input as from a file); a text stream without a byte buffer as it is."""
    if path == "-":
        return getattr(sys.stdin, "buffer", sys.stdin)
    try:
        return open(path, "rb")
    except FileNotFoundError:
        raise DataError(f"--input {path}: log file not found") from None
    except IsADirectoryError:
        raise DataError(f"--input {path}: is a folder; expected a CSV log file") from None
    except OSError as exc:
        raise DataError(f"--input {path}: cannot read ({exc.strerror or exc})") from None


def _open_output(path: str, stack: contextlib.ExitStack) -> TextIO:
    """The output stream: standard output, or a temporary file beside ``path`` that :func:`_close_output` renames
    to ``path`` once the run ends (:mod:`mbfg.atomic`: a failed or killed run leaves the old file)."""
    from mbfg.atomic import replacing

    if path == "-":
        return sys.stdout
    try:
        return stack.enter_context(replacing(path))
    except OSError as exc:
        raise DataError(f"--output {path}: cannot write ({exc.strerror or exc})") from None


def _write_error(path: str, exc: OSError) -> DataError:
    """A failed write of the output (a full disk, /dev/full) as the one error the command reports."""
    from mbfg.atomic import is_special

    if path == "-" or is_special(path):
        return DataError(f"{'standard output' if path == '-' else '--output ' + path}: cannot write "
                         f"({exc.strerror or exc})")
    return DataError(f"--output {path}: cannot write ({exc.strerror or exc}); {path} is as it was")


def _close_output(out: TextIO | None, stack: contextlib.ExitStack, complete: bool, path: str) -> None:
    """End the output: flushed (standard output), or the file renamed to ``path`` when ``complete`` (the input
    read to its end, or Ctrl-C), else removed. DataError when the last write or the rename fails."""
    if out is None:
        return
    if out is sys.stdout:
        with contextlib.suppress(OSError, ValueError):
            out.flush()
        return
    if not complete:
        stack.__exit__(RuntimeError, RuntimeError("the run failed"), None)  # the temporary file removed
        return
    try:
        stack.close()
    except OSError as exc:
        raise _write_error(path, exc) from None


def _columns(where: str, header: list[str], model: RigidModel) -> tuple[int, list[int], list[int]]:
    """The indices of t, the observations and the controls in ``header``; DataError starting with ``where``
    (the input and its header's line, or --columns) for a name given twice or one the model needs missing."""
    index: dict[str, int] = {}
    for i, name in enumerate(header):
        if name in index:
            raise DataError(f"{where}: column {name!r} appears twice in the header")
        index[name] = i
    wanted = [("t", "time")] + [(n, "observation") for n in model.observations] + \
             [(n, "control") for n in model.controls]
    for name, kind in wanted:
        if name not in index:
            raise DataError(
                f"{where}: no {kind} column {name!r} in the header (model {model.name!r} needs "
                f"{', '.join(n for n, _ in wanted)}); the header has {', '.join(header) or '(nothing)'}"
            )
    return index["t"], [index[n] for n in model.observations], [index[n] for n in model.controls]


def _number(cell: str) -> float:
    """A float from a cell (nan/inf allowed: the stream counts them); ValueError for anything else."""
    if "_" in cell:
        raise ValueError(cell)
    return float(cell)


def _decode(raw: bytes | str, first: bool) -> str | None:
    """A line as text; None for bytes that are not UTF-8 (a malformed sample). The first line may start
    with a byte-order mark."""
    if isinstance(raw, str):
        return raw
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return text.removeprefix("\ufeff") if first else text


def _lines(inp: BinaryIO | TextIO) -> Iterator[bytes | str]:
    """The input's lines as they arrive. From a file descriptor, read with select() and a timeout, so that a
    Ctrl-C is acted on at once even while the pipe is idle ('tail -f' with nothing new) and the signal was
    delivered to another thread (JAX's); other streams (a test's in-memory stdin) line by line."""
    try:
        fd = inp.fileno()
    except (AttributeError, OSError, ValueError):
        yield from inp
        return
    rest = b""
    while True:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if not ready:
            continue
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            break
        *whole, rest = (rest + chunk).split(b"\n")
        for line in whole:
            yield line + b"\n"
    if rest:
        yield rest


def _is_header(cells: list[str]) -> bool:
    """A line of names, not numbers (a header line)."""
    for cell in cells:
        try:
            _number(cell.strip())
        except ValueError:
            if cell.strip():
                return True
    return False


def _csv_cells(text: str | None) -> list[str] | None:
    """The cells of a decoded line; None for a line that is not UTF-8 or not CSV."""
    if text is None:
        return None
    try:
        return next(csv.reader(io.StringIO(text)))
    except (csv.Error, StopIteration):
        return None


def _empty(source: str) -> DataError:
    return DataError(f"{source}: the log is empty; expected a header line 't,<observations...>,<controls...>' "
                     "(or --columns naming them)")


def _first_line(source: str, lineno: int, cells: list[str] | None, columns: list[str] | None,
                model: RigidModel) -> list[str] | None:
    """The names on the input's first non-blank line (at ``lineno``), checked: against the model, or with
    ``columns`` (--columns) against those. None when, with ``columns``, the line is a sample, not a header."""
    if columns is not None:
        if cells is None or not _is_header(cells):
            return None
        names = [c.strip() for c in cells]
        if names != columns:
            raise DataError(f"{source}, line {lineno}: the header names {', '.join(names)}, but --columns said "
                            f"{', '.join(columns)}")
        return names
    if cells is None:
        raise DataError(f"{source}, line {lineno}: not a CSV header (not UTF-8 text, or not CSV)")
    names = [c.strip() for c in cells]
    _columns(f"{source}, line {lineno}", names, model)
    wanted = {"t", *model.observations, *model.controls}
    extra = [name for name in names if name not in wanted]
    if extra:
        raise DataError(f"{source}, line {lineno}: column(s) {', '.join(extra)} are not columns of {model.name!r}, "
                        f"which reads {', '.join(['t', *model.observations, *model.controls])}: a log of another "
                        f"model? Use the model the log is of, or name the input's columns with --columns "
                        f"(e.g. --columns {','.join(names)}: the model's are read, the others ignored)")
    return names


def _check_file_header(path: str, columns: list[str] | None, model: RigidModel) -> None:
    """For an input that is a regular file, the checks of its first line (:func:`_first_line`) made before
    the compile, so that a wrong or empty file fails at once, not after seconds of compiling. A pipe is
    left alone: its first line may come much later (the command compiles while it waits)."""
    with open(path, "rb") as fh:
        for lineno, raw in enumerate(fh, 1):
            text = _decode(raw, lineno == 1)
            if text is not None and not text.strip():
                continue
            _first_line(path, lineno, _csv_cells(text), columns, model)
            return
    if columns is None:
        raise _empty(path)


def _check_sizes(args: argparse.Namespace) -> None:
    """--update-every, --lag and --max-gap against the stream's limits (:mod:`mbfg.limits`), named as options,
    before the calibration's model is built and compiled (the estimator checks the same under its arguments'
    names)."""
    from mbfg.cli.common import calibration_settings
    from mbfg.limits import MAX_STEPS, MAX_UPDATE_EVERY, check_count, check_window

    check_count("--update-every", args.update_every, MAX_UPDATE_EVERY, "each update compiles a scan of that many "
                "steps; the lines between updates wait for it")
    settings = calibration_settings(args.params)
    h = args.dt if args.dt is not None else settings.get("h")
    if h is not None:
        check_window(args.lag, h, "--lag", "--dt" if args.dt is not None else "the calibration's h =")
    period = args.period if args.period is not None else h
    if period is not None and not args.max_gap / period <= MAX_STEPS:
        raise ModelError(f"--max-gap {args.max_gap:g} s is {args.max_gap / period:.3g} sample periods of "
                         f"{period:g} s; at most {MAX_STEPS:.0e} (a bridged gap is stepped through by the model)")


def run(args: argparse.Namespace) -> int:
    """The ``smooth`` subcommand (see :data:`DESCRIPTION`)."""
    from mbfg.graphs.stream import StreamEstimator

    start_clock(args)
    # A missing folder, or the output being an input, is reported before the compile.
    check_output(args.output, "CSV", "--output",
                 inputs=[model_input(args.model), ("--params", args.params), ("--input", args.input)])
    model = rigid_model(args.model)
    if args.counts and args.ppr is None:
        raise ModelError("--counts needs --ppr N, the encoder's counts per revolution")
    if args.wrap is not None and not args.counts:
        raise ModelError("--wrap needs --counts (only a raw counter wraps around)")
    _check_sizes(args)
    estimator = StreamEstimator.from_calibration(
        model, args.params, lag=args.lag, ppr=args.ppr, counts=args.counts, counter_modulus=args.wrap, h=args.dt,
        weight=args.weight, max_gap=args.max_gap,
        period=args.period, covariance=args.std, smoother=args.smoother, update_every=args.update_every,
        on_warning=lambda message: eprint(f"mbfg smooth: warning: {message}"),
    )
    source = "standard input" if args.input == "-" else args.input
    columns: list[str] | None = getattr(args, "columns", None)
    if columns is not None:
        _columns("--columns", columns, model)
    inp = _open_input(args.input)
    if args.input != "-" and os.path.isfile(args.input):
        _check_file_header(args.input, columns, model)
    out: TextIO | None = None  # opened by output(), once the input's header is checked
    outputs = contextlib.ExitStack()  # holds the output file until it is complete
    complete = False
    n = len(model.observations)
    # Compile before the first sample: in a live pipe, seconds of compiling would build a backlog.
    if not args.quiet:
        eprint(f"mbfg smooth: compiling the {model.name} stream (JAX) before reading {source} ...")
    warm = estimator.warm_up()
    if not args.quiet:
        eprint(f"mbfg smooth: compiled in {warm:.1f} s")
    start = time.perf_counter()
    last_report = start
    lines = 0
    interrupted = False
    own_process = getattr(args, "own_process", False)
    header: list[str] | None = None

    def begin(names: list[str], where: str) -> tuple[int, list[int], list[int]]:
        if not args.quiet:
            eprint(f"mbfg smooth: {model.name}, lag {estimator.lag:g} s ({estimator.m} steps of "
                    f"{estimator.h:g} s), reading {source}")
        return _columns(where, names, model)

    def output() -> TextIO:
        """The output, opened (and its header written) at the first use: after the input's header is checked,
        so that an empty input or a wrong header fails without an empty file left behind or an old one
        truncated."""
        nonlocal out
        if out is None:
            out = _open_output(args.output, outputs)
            try:
                out.write(",".join(_header(model, args.std)) + "\n")
                out.flush()
            except BrokenPipeError:
                raise
            except OSError as exc:
                raise _write_error(args.output, exc) from None
        return out

    may_have_header = columns is not None  # with --columns the stream may still start with a header line
    lineno = 0  # the input's line number (blank lines included), for the messages
    try:
        if columns is not None:
            header = columns
            i_t, i_y, i_u = begin(header, "--columns")
        first = True
        for raw in _lines(inp):
            lineno += 1
            text = _decode(raw, first)
            first = False
            if text is not None and not text.strip():
                continue
            cells = _csv_cells(text)
            if header is None or may_have_header:
                # The first line: the header (or, with --columns, the same header again, skipped, or a sample).
                may_have_header = False
                names = _first_line(source, lineno, cells, columns, model)
                if names is not None:
                    if header is None:
                        header = names
                        i_t, i_y, i_u = begin(header, f"{source}, line {lineno}")
                    output()
                    continue
            assert header is not None  # _first_line returns None (a sample) only with --columns, the header then
            lines += 1
            t_text = cells[i_t].strip() if cells is not None and len(cells) == len(header) else ""
            try:
                if cells is None or len(cells) != len(header):
                    raise ValueError("cells")
                t = _number(t_text)
                y = [None if not cells[i].strip() else _number(cells[i].strip()) for i in i_y]
                u = [_number(cells[i].strip()) for i in i_u] if i_u else None
            except ValueError:
                # A malformed line is a fault of the stream; the estimator counts it.
                t = math.nan
                shown = repr(raw.strip()[:40]) if text is None else repr(text.strip()[:40])
                what = "not UTF-8" if text is None else "not a sample"
                step = estimator.report_malformed(t, f"line {lineno} of {source} ({what}: {shown})")
            else:
                step = estimator.push(t, y, u)
                if own_process and estimator.status.updates >= 2:
                    # The first update that grows the window has compiled every factor type: keep the
                    # full collections off JAX's objects from now on (graphs/stream/__init__.py, "Long streams").
                    gc.collect()
                    gc.freeze()
                    own_process = False
            row = [t_text if t_text else _format(t), *_cells(step.filtered, n, args.std),
                   _format(step.smoothed.t) if step.smoothed is not None else "",
                   *_cells(step.smoothed, n, args.std), "|".join(step.flags)]
            dest = output()
            try:
                dest.write(",".join(row) + "\n")
                dest.flush()
            except BrokenPipeError:
                raise
            except OSError as exc:  # a full disk, /dev/full
                raise _write_error(args.output, exc) from None
            now = time.perf_counter()
            if not args.quiet and now - last_report > 5.0:
                last_report = now
                eprint(f"[smooth {model.name}] {lines} samples, {now - start:.1f} s wall")
        if header is None:
            raise _empty(source)
        output()  # a header and no samples: the output's header, as for any log
        complete = True
    except KeyboardInterrupt:
        # Ctrl-C ends a live pipe ('tail -n +1 -f log.csv | mbfg smooth ...'): what was estimated is
        # written and flushed, and the summary follows.
        interrupted = complete = True
    finally:
        estimator.flush()  # the samples still waiting for an update (--update-every), for the summary
        try:
            _close_output(out, outputs, complete, args.output)
        finally:
            if inp is not sys.stdin and inp is not getattr(sys.stdin, "buffer", None):
                inp.close()
    wall = time.perf_counter() - start
    st = estimator.status
    rate = f", {lines / wall:.0f} samples per wall second" if wall > 0 else ""
    limit = args.max_fault_rate / 100.0
    over = st.over_rate(limit)
    if over:
        eprint(f"mbfg smooth: error: the stream's estimates left the readings: {st.rate_summary(limit)}; "
                "check the calibration (the warnings above name parameters its log did not fit) and the model")
    eprint(f"mbfg smooth: {'interrupted; ' if interrupted else ''}{st.summary()}; {st.rate_summary(limit)}; "
            f"{wall_seconds(args):.1f} s wall in all (compile {warm:.1f} s; reading and estimating {wall:.1f} s{rate})")
    if interrupted:
        return 130
    return 1 if over else 0
