"""Spook stepping with many complementarity rows: a 12-link chain with dry friction, Coulomb friction or contacts.

Run from anywhere::

    python benchmarks/lcp_rows.py                        # 12 links, 0.2 s at h = 1 ms, cases dry, coulomb, contact
    git worktree add ../mbfg-peer main                   # a version to compare with (a source checkout)
    python benchmarks/lcp_rows.py --peer ../mbfg-peer    # its figures beside this checkout's, in the same run
    python benchmarks/lcp_rows.py --peer EXPORT --peer-name "main 75e8e93"   # a peer that is no git checkout

The chains are those of ``benchmarks/core_size.py`` (URDF chains of hinged links, torque motors, viscous damping):

- ``dry``: load-dependent dry friction on every hinge (Marklund, Servin, Larson 2025, App. F.4): each hinge's
  rows become complementarity rows, 13 per hinge (156 for 12 links);
- ``coulomb``: a load-independent Coulomb bound on every hinge (a friction group of 3 rows per hinge);
- ``contact``: a sphere contact at every link's tip, above a floor 10 m below (6 rows per contact).

Each case runs ``mbfg.spook.simulate`` from the chain's bent pose under u = 0.2 N m on every joint, in a fresh
process: ``first_s`` its first call (trace, compile, run), ``ms_per_step`` the best of 3 warm calls per step (wall
time), ``cpu_ms_per_step`` the same in the process's CPU time (all threads; a loaded machine disturbs it less).
``lcp_ok`` says every step's LCP solve ended with a solution; ``final_angles`` are the joint angles at the end
[rad], so that the run can print how far this checkout's trajectory is from the peer's (the same physics: round-off
only, amplified by the chain's chaotic motion over the run).

``--peer CHECKOUT`` runs the same cases with another source checkout's ``mbfg`` (its directory first on
``PYTHONPATH``), in the same run. The record goes to ``--out`` (default ``benchmarks/results/lcp_rows.json``).
Asserts nothing; the load average is printed and stored.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import _record
import numpy as np

CASES = ("dry", "coulomb", "contact")
WARM_RUNS = 3


def measure(n: int, case: str, seconds: float, h: float) -> dict:
    """The figures of one case (run in its own process: see :func:`run_all`)."""
    from core_size import chain_model

    from mbfg.spook import simulate

    model = chain_model(n, case)
    x0 = model.initial_state({f"j{i}": 0.1 * (i + 1) for i in range(n)})
    steps = int(round(seconds / h))
    controls = np.full((steps, n), 0.2)
    first = simulate(model, seconds, h, initial=x0, controls=controls)
    walls, cpus = [], []
    for _ in range(WARM_RUNS):
        cpu = time.process_time()
        run = simulate(model, seconds, h, initial=x0, controls=controls)
        cpus.append(time.process_time() - cpu)
        walls.append(run.wall_s)
    return {"links": n, "complementarity_rows": model.layout.n_B, "first_s": first.wall_s,
            "ms_per_step": 1e3 * min(walls) / steps, "cpu_ms_per_step": 1e3 * min(cpus) / steps,
            "lcp_ok": bool(np.all(run.info.lcp_ok)), "final_angles": [float(a) for a in run.observations[-1]]}


def run_all(n: int, cases: list[str], seconds: float, h: float, checkout: Path | None = None) -> dict:
    """case -> figures, each in a fresh process; with ``checkout``, with that checkout's mbfg."""
    env = dict(os.environ)
    if checkout is not None:
        env["PYTHONPATH"] = str(checkout)  # the checkout's own source first, before the installed one
    table = {}
    for case in cases:
        command = [sys.executable, __file__, "--one", case, "--links", str(n), "--seconds", str(seconds),
                   "--h", str(h)]
        out = subprocess.run(command, capture_output=True, text=True, env=env)
        if out.returncode:
            raise SystemExit(f"{case}: the measurement failed\n{out.stderr[-3000:]}")
        table[case] = json.loads(out.stdout.strip().splitlines()[-1])
    return table


def show(name: str, table: dict) -> None:
    print(f"## {name}")
    print(f"{'case':>8} {'B rows':>6} {'first s':>8} {'ms/step':>8} {'cpu ms/step':>12} {'lcp ok':>7}")
    for case, r in table.items():
        print(f"{case:>8} {r['complementarity_rows']:>6} {r['first_s']:>8.2f} {r['ms_per_step']:>8.3f} "
              f"{r['cpu_ms_per_step']:>12.3f} {str(r['lcp_ok']):>7}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--links", type=int, default=12, help="chain length")
    parser.add_argument("--cases", default=",".join(CASES), help=f"some of {', '.join(CASES)}")
    parser.add_argument("--seconds", type=float, default=0.2, help="simulated time per call [s]")
    parser.add_argument("--h", type=float, default=1e-3, help="time-step [s]")
    parser.add_argument("--out", default=str(Path(__file__).resolve().parent / "results" / "lcp_rows.json"),
                        help="JSON file for the figures")
    parser.add_argument("--peer", type=Path, help="a source checkout of another version, measured in the same run")
    parser.add_argument("--peer-name", help="what the peer is (default: its git commit)")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # internal: measure one case, print JSON
    args = parser.parse_args()
    if args.one is not None:
        print(json.dumps(measure(args.links, args.one, args.seconds, args.h)))
        return
    cases = args.cases.split(",")
    unknown = [c for c in cases if c not in CASES]
    if unknown:
        raise SystemExit(f"--cases: unknown case(s) {', '.join(unknown)}; expected some of {', '.join(CASES)}")
    print(f"# lcp_rows: {platform.node()}, python {platform.python_version()}, {args.links} links, "
          f"load average {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    peer = None
    if args.peer is not None:
        checkout = args.peer.resolve()
        commit = subprocess.run(["git", "-C", str(checkout), "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True).stdout.strip() or checkout.name
        commit = args.peer_name or commit
        peer_table = run_all(args.links, cases, args.seconds, args.h, checkout)
        show(f"peer: {commit}", peer_table)
        peer = {"name": f"{commit}, the peer checkout", "figures": peer_table}
    table = run_all(args.links, cases, args.seconds, args.h)
    show("this checkout", table)
    if peer is not None:
        for case in cases:
            ours, theirs = table[case], peer["figures"][case]
            gap = float(np.max(np.abs(np.subtract(ours["final_angles"], theirs["final_angles"]))))
            ours["final_angle_gap_to_peer_rad"] = gap
            print(f"{case:>8}: speed-up {theirs['ms_per_step'] / ours['ms_per_step']:.1f}x (wall), "
                  f"{theirs['cpu_ms_per_step'] / ours['cpu_ms_per_step']:.1f}x (CPU); final angles differ by "
                  f"{gap:.2e} rad")
    print(f"# load average {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    _record.write(__file__, table, out=args.out, peer=peer)


if __name__ == "__main__":
    main()
