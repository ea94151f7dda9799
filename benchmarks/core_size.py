"""The size of the rigid-body core's traced programs against the number of joints.

Run from anywhere::

    python benchmarks/core_size.py                       # chains of 1, 2, 4, 7, 12 links
    python benchmarks/core_size.py --links 1,12 --out /tmp/size.json
    python benchmarks/core_size.py --links 1,7 --simulate 1 --out /tmp/sim.json   # and simulate's speed

For URDF chains of n hinged links (written by this script: revolute joints about y, 0.3 m apart,
a viscous ``<dynamics damping>`` and a torque motor on every joint), the traced program of
``mbfg.residuals.impulse`` (Marklund, Servin, Larson 2025, eqs. 3.6-3.7) with its forward Jacobian
(``jax.jacfwd`` in the two states x_k, x_{k+1}) is measured by

- ``equations``: the jaxpr equations of ``jax.make_jaxpr(jacfwd(impulse))``, nested ones counted
  (the bodies of pjit, custom_jvp, scan, cond ... added to the equation that holds them);
- ``residual eq.``: the same count for the residual alone;
- ``trace s`` and ``compile s``: wall time of ``jax.jit(...).lower`` and of ``.compile()`` of
  that Jacobian, with JAX's persistent compilation cache off (``MBFG_CACHE_DIR=off``, set here
  before JAX is imported), in a fresh process per chain so that no in-memory cache helps.

The figures are written as a JSON record (``--out``, default ``benchmarks/results/core_size.json``) and
printed as a table. Asserts nothing; the header prints the load average (the times are wall
times on a possibly shared machine; the equation counts do not depend on it).
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

os.environ["MBFG_CACHE_DIR"] = "off"  # before mbfg imports JAX: compile times from scratch
os.environ.pop("JAX_COMPILATION_CACHE_DIR", None)

LINK_LENGTH = 0.3  # [m]


def chain_urdf(n: int) -> str:
    """A URDF chain of n links hanging from a fixed base: revolute joints about y, 1 kg links with full
    (diagonal) inertia tensors, CoM halfway along each 0.3 m link, viscous damping 0.05 N m s/rad."""
    links = ['<link name="base"/>']
    joints = []
    for i in range(n):
        links.append(f'<link name="l{i}"><inertial><origin xyz="0 0 {LINK_LENGTH / 2}"/><mass value="1.0"/>'
                     '<inertia ixx="0.01" ixy="0" ixz="0" iyy="0.011" iyz="0" izz="0.002"/></inertial></link>')
        parent = "base" if i == 0 else f"l{i - 1}"
        z = 0.0 if i == 0 else LINK_LENGTH
        joints.append(f'<joint name="j{i}" type="revolute"><parent link="{parent}"/><child link="l{i}"/>'
                      f'<origin xyz="0 0 {z}"/><axis xyz="0 1 0"/><dynamics damping="0.05"/>'
                      '<limit effort="10" velocity="5" lower="-3" upper="3"/></joint>')
    return f'<robot name="chain{n}">' + "".join(links) + "".join(joints) + "</robot>"


def measure(n: int, simulate_s: float = 0.0) -> dict:
    """The figures of one chain (run in its own process: see :func:`main`)."""
    from mbfg import residuals
    from mbfg._jax import jax, jnp
    from mbfg._programs import jaxpr_equation_count
    from mbfg.urdf import urdf_from_string

    path = f"chain{n}.urdf"
    model = urdf_from_string(chain_urdf(n), motors=[f"j{i}" for i in range(n)], source=path)
    x0 = model.initial_state({f"j{i}": 0.1 * (i + 1) for i in range(n)})
    x1 = model.initial_state({f"j{i}": 0.1 * (i + 1) + 1e-4 for i in range(n)},
                             {f"j{i}": 0.1 for i in range(n)})
    p = model.parameters.arrays()
    u = jnp.full(len(model.controls), 0.2)
    h = 1e-3

    def residual(a, b, p):
        return residuals.impulse(model, a, b, u, p, h)

    jac = jax.jacfwd(residual, argnums=(0, 1))
    start = time.perf_counter()  # the first trace of this function: nothing traced is cached yet
    lowered = jax.jit(jac).lower(x0, x1, p)
    trace_s = time.perf_counter() - start
    equations = jaxpr_equation_count(jax.make_jaxpr(jac)(x0, x1, p).jaxpr)
    residual_equations = jaxpr_equation_count(jax.make_jaxpr(residual)(x0, x1, p).jaxpr)
    start = time.perf_counter()
    compiled = lowered.compile()
    compile_s = time.perf_counter() - start
    jax.block_until_ready(compiled(x0, x1, p))
    figures = {"links": n, "equations": equations, "residual_equations": residual_equations,
               "trace_s": trace_s, "compile_s": compile_s, "parameters": len(p)}
    if simulate_s:
        from mbfg.spook import simulate

        steps = int(round(simulate_s / h))
        controls = np.full((steps, n), 0.2)
        first = simulate(model, simulate_s, h, initial=x0, controls=controls)  # compiles the chunk
        warm = min(simulate(model, simulate_s, h, initial=x0, controls=controls).wall_s for _ in range(3))
        figures.update(simulate_first_s=first.wall_s, simulate_us_per_step=1e6 * warm / steps)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--links", default="1,2,4,7,12", help="chain lengths, comma separated")
    parser.add_argument("--out", default=str(Path(__file__).resolve().parent / "results" / "core_size.json"),
                        help="JSON file for the figures")
    parser.add_argument("--simulate", type=float, default=0.0, metavar="T",
                        help="also time mbfg.spook.simulate of T seconds at h = 1 ms: its first call (trace and "
                             "compile) and its best warm time per step of 3 calls")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)  # internal: measure one chain, print JSON
    args = parser.parse_args()
    if args.one is not None:
        print(json.dumps(measure(args.one, args.simulate)))
        return
    sizes = [int(s) for s in args.links.split(",")]
    print(f"# core_size: {platform.node()}, python {platform.python_version()}, "
          f"load average {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    rows = []
    for n in sizes:
        command = [sys.executable, __file__, "--one", str(n), "--simulate", str(args.simulate)]
        out = subprocess.run(command, check=True, capture_output=True, text=True)
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
    base = rows[0]["equations"]
    sim = " simulate first s  us/step" if args.simulate else ""
    print(f"{'links':>5} {'equations':>10} {'/ first':>8} {'residual eq.':>13} {'trace s':>8} {'compile s':>10}{sim}")
    for r in rows:
        sim = f" {r['simulate_first_s']:>16.2f} {r['simulate_us_per_step']:>8.1f}" if args.simulate else ""
        print(f"{r['links']:>5} {r['equations']:>10} {r['equations'] / base:>8.2f} {r['residual_equations']:>13} "
              f"{r['trace_s']:>8.2f} {r['compile_s']:>10.2f}{sim}")
    print(f"# load average {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    _record.write(__file__, rows, out=args.out)


if __name__ == "__main__":
    main()
