"""How long ``mbfg models`` takes to load and describe a URDF chain of N links (issue: model loading must be
linear in the size of the model, a 10,000-link chain in seconds).

Writes N-link serial chains of revolute joints (alternating y and x axes, 0.1 m links of 1 kg) to a temporary
folder and runs ``mbfg models CHAIN.urdf`` in a fresh process for each N: the time of the command after the
imports (parse, build, validate, describe) and the process's wall time (start-up and imports included, as a user
sees it), the fastest of --repeat runs. Prints the time per link and writes the figures as a JSON record
(``benchmarks/results/urdf_load.json``).

    python benchmarks/urdf_load.py                       # N = 1000, 2000, 10000
    python benchmarks/urdf_load.py --links 1000 4000 --repeat 5 --json /tmp/urdf_load.json
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _record


def chain_urdf(n: int) -> str:
    """A fixed-base serial chain of ``n`` moving links, each 0.1 m long, 1 kg, revolute about y or x."""
    parts = ['<?xml version="1.0"?>', f'<robot name="chain{n}">', '  <link name="base"/>']
    for i in range(1, n + 1):
        parent = "base" if i == 1 else f"l{i - 1}"
        axis = "0 1 0" if i % 2 else "1 0 0"
        parts += [
            f'  <link name="l{i}"><inertial><origin xyz="0 0 -0.05"/><mass value="1"/>'
            '<inertia ixx="0.001" ixy="0" ixz="0" iyy="0.001" iyz="0" izz="0.0005"/></inertial></link>',
            f'  <joint name="j{i}" type="revolute"><parent link="{parent}"/><child link="l{i}"/>'
            f'<origin xyz="0 0 {-0.1 if i > 1 else 0}"/><axis xyz="{axis}"/>'
            '<limit lower="-3" upper="3" effort="10" velocity="10"/></joint>',
        ]
    parts.append("</robot>")
    return "\n".join(parts) + "\n"


_TIMER = """
import contextlib, io, sys, time
from mbfg.cli import main
out = io.StringIO()
start = time.perf_counter()
with contextlib.redirect_stdout(out):
    code = main(["models", sys.argv[1]])
print(code, time.perf_counter() - start, len(out.getvalue().splitlines()))
"""


def time_models(path: Path) -> tuple[float, float]:
    """(seconds of ``mbfg models PATH`` in its process after the imports, wall seconds of the whole process) in a
    fresh process; raises if the command fails."""
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", _TIMER, str(path)], capture_output=True, text=True)
    wall = time.perf_counter() - start
    fields = done.stdout.split()
    if done.returncode != 0 or not fields or fields[0] != "0":
        raise SystemExit(f"mbfg models {path} failed: {done.stderr.strip()[-500:]}")
    return float(fields[1]), wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--links", type=int, nargs="+", default=[1000, 2000, 10000], metavar="N")
    parser.add_argument("--repeat", type=int, default=3, metavar="R", help="runs per N; the fastest is kept "
                        "(a shared machine only ever slows a run down)")
    parser.add_argument("--json", default=None, metavar="FILE",
                        help="where the record goes (default benchmarks/results/urdf_load.json)")
    args = parser.parse_args()
    rows = []
    print(f"{'links':>7} {'load+describe [s]':>18} {'ms per link':>12} {'process wall [s]':>17}")
    with tempfile.TemporaryDirectory() as folder:
        for n in args.links:
            path = Path(folder) / f"chain{n}.urdf"
            path.write_text(chain_urdf(n))
            runs = [time_models(path) for _ in range(args.repeat)]
            load, wall = min(r[0] for r in runs), min(r[1] for r in runs)
            rows.append({"links": n, "load_s": round(load, 3), "ms_per_link": round(load / n * 1e3, 4),
                         "process_wall_s": round(wall, 3), "runs": args.repeat})
            print(f"{n:>7} {load:18.2f} {load / n * 1e3:12.3f} {wall:17.2f}")
    if len(rows) > 1:
        first, last = rows[0], rows[-1]
        print(f"time per link at {last['links']} links / at {first['links']}: "
              f"{last['ms_per_link'] / first['ms_per_link']:.2f} (1 for linear, {last['links'] / first['links']:g} "
              f"for quadratic)")
    _record.write(__file__, rows, out=args.json)


if __name__ == "__main__":
    main()
