"""How long ``mbfg models`` takes to load and describe a URDF chain of N links (issue: model loading must be
linear in the size of the model, a 10,000-link chain in seconds).

Writes N-link serial chains of revolute joints (alternating y and x axes, 0.1 m links of 1 kg) to a temporary
folder and times ``mbfg models CHAIN.urdf`` in a fresh process for each N (Python's start-up and the imports
included, as a user sees it), then prints the time per link and writes the figures as JSON.

    python benchmarks/urdf_load.py                       # N = 1000, 2000, 10000
    python benchmarks/urdf_load.py --links 1000 4000 --json urdf_load.json
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path


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


def time_models(path: Path) -> float:
    """Wall seconds of ``mbfg models PATH`` in a fresh process; raises if the command fails."""
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "mbfg", "models", str(path)], capture_output=True, text=True)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"mbfg models {path} failed ({done.returncode}): {done.stderr.strip()[-500:]}")
    return wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--links", type=int, nargs="+", default=[1000, 2000, 10000], metavar="N")
    parser.add_argument("--json", default="urdf_load.json", metavar="FILE", help="where the figures go")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        empty = Path(folder) / "one.urdf"
        empty.write_text(chain_urdf(1))
        base = time_models(empty)  # start-up and imports: the floor every N pays
        print(f"{'links':>7} {'wall [s]':>9} {'minus 1-link [s]':>17} {'ms per link':>12}")
        print(f"{1:>7} {base:9.2f}")
        for n in args.links:
            path = Path(folder) / f"chain{n}.urdf"
            path.write_text(chain_urdf(n))
            wall = time_models(path)
            per_link = (wall - base) / n * 1e3
            rows.append({"links": n, "wall_s": round(wall, 3), "wall_minus_one_link_s": round(wall - base, 3),
                         "ms_per_link": round(per_link, 4)})
            print(f"{n:>7} {wall:9.2f} {wall - base:17.2f} {per_link:12.3f}")
    with open(args.json, "w", encoding="utf-8") as fh:
        json.dump({"command": "mbfg models CHAIN.urdf", "one_link_wall_s": round(base, 3), "chains": rows}, fh,
                  indent=2)
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
