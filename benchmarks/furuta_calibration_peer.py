"""The 13-parameter Furuta calibration of ``furuta_calibration.py``, this checkout beside another one, in one run.

::

    git worktree add ../mbfg-peer 8d5da5e      # the version to compare with (a source checkout)
    python benchmarks/furuta_calibration_peer.py --peer ../mbfg-peer
    python benchmarks/furuta_calibration_peer.py --peer ../mbfg-peer --quick   # 2 s log

For each checkout, in turn: ``furuta_calibration.py --priors J_Ax,J_Ay --strides '' --skip-scipy`` (its own copy of
the benchmark, from its own source) twice in a fresh process each, sharing one program cache that is empty before
the first run (``MBFG_CACHE_DIR``, a new temporary folder per checkout): the first run traces and compiles every
program ("empty cache"), the second loads them ("warm"). Each run's figures are read from its printed lines: LM
iterations, whether it converged, LM wall [s], ``calibrate()`` wall [s] (build, LM and covariance), the median
linearization and solve per iteration [s], the final cost per step and each parameter's value. Writes this
checkout's rows beside the peer's as one record (``benchmarks/_record.py``) to ``--out`` (default
``benchmarks/results/furuta_calibration.json``). Asserts nothing; times are wall times on a possibly shared machine.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import _record

HERE = Path(__file__).resolve().parents[1]

_LM = re.compile(r"LM: (\d+) iterations \((converged|NOT converged)\), LM wall ([\d.]+) s; calibrate\(\) wall ([\d.]+) s")
_MEDIANS = re.compile(r"linearize ([\d.na]+) s first \(JIT compile\), median ([\d.na]+) s after; "
                      r"solve ([\d.na]+) s first, median ([\d.na]+) s after")
_COST = re.compile(r"final cost ([\d.e+-]+) per step")
_PARAM = re.compile(r"^(\S+)\s+([-\d.e+]+)\s+([-\d.e+]+)\s+([-\d.e+]+)\s+([-\d.e+na]+)\s+([-\d.e+na]+)\s*$")


def commit(root: Path) -> str:
    out = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True).stdout.strip()
    return out.stdout.strip() + (" (with uncommitted changes)" if dirty else "")


def parse(text: str) -> dict[str, Any]:
    """The figures of one run of furuta_calibration.py from its standard output."""
    lm, medians, cost = _LM.search(text), _MEDIANS.search(text), _COST.search(text)
    if lm is None or medians is None or cost is None:
        raise RuntimeError("furuta_calibration.py printed no LM summary:\n" + text[-3000:])
    values: dict[str, float] = {}
    table = text[text.index("(mbfg-truth)/std"):].splitlines()[1:]
    for line in table:
        m = _PARAM.match(line)
        if m is None:
            break
        values[m.group(1)] = float(m.group(4))
    return {
        "lm_iterations": int(lm.group(1)), "converged": lm.group(2) == "converged",
        "lm_wall_s": float(lm.group(3)), "calibrate_wall_s": float(lm.group(4)),
        "first_linearize_s": float(medians.group(1)), "median_linearize_s": float(medians.group(2)),
        "first_solve_s": float(medians.group(3)), "median_solve_s": float(medians.group(4)),
        "cost_per_step": float(cost.group(1)), "parameters": values,
    }


def run_checkout(root: Path, extra: list[str]) -> dict[str, Any]:
    """The benchmark of ``root`` from an empty program cache, then warm; the figures of both runs."""
    cache = tempfile.mkdtemp(prefix="mbfg-furuta-cache-")
    env = {k: v for k, v in os.environ.items() if k not in ("JAX_COMPILATION_CACHE_DIR", "PYTHONPATH")}
    env |= {"MBFG_CACHE_DIR": cache, "PYTHONPATH": str(root)}  # the checkout's own source, not the installed one
    command = [sys.executable, str(root / "benchmarks" / "furuta_calibration.py"), "--priors", "J_Ax,J_Ay",
               "--strides", "", "--skip-scipy", *extra]
    out: dict[str, Any] = {"checkout": str(root), "commit": commit(root), "command": " ".join(command[1:])}
    for phase in ("empty_cache", "warm"):
        load = os.getloadavg()[0]
        done = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True)
        print(f"## {root} ({phase}), load average {load:.2f} at the start\n{done.stdout}", flush=True)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(command)} failed:\n{done.stderr[-3000:]}")
        out[phase] = parse(done.stdout) | {"load_average_at_start": load}
    return out


def rows(run: dict[str, Any]) -> list[dict[str, Any]]:
    """The record's rows of one checkout: one per phase (empty cache, warm)."""
    return [{"phase": phase.replace("_", " "), "commit": run["commit"][:7], **run[phase]}
            for phase in ("empty_cache", "warm")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--peer", type=Path, required=True, help="a source checkout of the version to compare with")
    parser.add_argument("--quick", action="store_true", help="2 s logs instead of 10 s")
    parser.add_argument("--out", type=Path, default=HERE / "benchmarks" / "results" / "furuta_calibration.json")
    args = parser.parse_args()
    extra = ["--quick"] if args.quick else []
    peer = run_checkout(args.peer.resolve(), extra)
    this = run_checkout(HERE, extra)
    for name, run in (("peer", peer), ("this", this)):
        for phase in ("empty_cache", "warm"):
            r = run[phase]
            print(f"{name:<5} {run['commit'][:7]} {phase:<12} LM {r['lm_iterations']:>2} it "
                  f"{'converged' if r['converged'] else 'NOT converged'}, LM wall {r['lm_wall_s']:6.1f} s, "
                  f"calibrate() {r['calibrate_wall_s']:6.1f} s, cost {r['cost_per_step']:.6g}")
    _record.write(__file__, rows(this), peer={"name": f"{peer['commit'][:7]}, the peer checkout", "figures": rows(peer)},
                  out=args.out)


if __name__ == "__main__":
    main()
