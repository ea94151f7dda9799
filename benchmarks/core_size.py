"""The size of the rigid-body core's traced programs against the number of joints.

Run from anywhere::

    python benchmarks/core_size.py                       # chains of 1, 2, 4, 7, 12 links
    python benchmarks/core_size.py --links 1,12 --out /tmp/size.json
    python benchmarks/core_size.py --links 1,7 --simulate 1 --out /tmp/sim.json   # and simulate's speed
    git worktree add ../mbfg-peer HEAD~3                 # a version to compare with (a source checkout)
    python benchmarks/core_size.py --peer ../mbfg-peer   # its figures beside this checkout's, in the same run

For URDF chains of n hinged links (written by this script: revolute joints about y, 0.3 m apart,
a viscous ``<dynamics damping>`` and a torque motor on every joint), each with the rows of one case
(``--cases``, all by default):

- ``motor``: the chain as it is (holonomic, viscous drag and motor rows: equality rows only);
- ``coulomb``: and a ``<dynamics friction>`` on every joint (a load-independent Coulomb bound: a friction
  group of complementarity rows per joint);
- ``dry``: and load-dependent dry friction ``dry = 0.01 m`` on every hinge (Marklund, Servin, Larson 2025,
  App. F.4: the joint's rows become complementarity rows, with its friction group);
- ``contact``: and a sphere contact at every link's tip, above a floor 10 m below (gap row and four
  friction rows per contact),

the traced program of
``mbfg.residuals.impulse`` (Marklund, Servin, Larson 2025, eqs. 3.6-3.7) with its forward Jacobian
(``jax.jacfwd`` in the two states x_k, x_{k+1}) is measured by

- ``equations``: the jaxpr equations of ``jax.make_jaxpr(jacfwd(impulse))``, nested ones counted
  (the bodies of pjit, custom_jvp, scan, cond ... added to the equation that holds them);
- ``residual eq.``: the same count for the residual alone;
- ``trace s`` and ``compile s``: wall time of ``jax.jit(...).lower`` and of ``.compile()`` of
  that Jacobian, with JAX's persistent compilation cache off (``MBFG_CACHE_DIR=off``, set here
  before JAX is imported), in a fresh process per chain so that no in-memory cache helps.

``--peer CHECKOUT`` runs the same measurements with another source checkout's ``mbfg`` (its directory put
first on ``PYTHONPATH``) and records them as the peer, from the same run.

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


CASES = ("motor", "coulomb", "dry", "contact")


def chain_urdf(n: int, friction: float = 0.0) -> str:
    """A URDF chain of n links hanging from a fixed base: revolute joints about y, 1 kg links with full
    (diagonal) inertia tensors, CoM halfway along each 0.3 m link, viscous damping 0.05 N m s/rad, and a
    Coulomb friction torque ``friction`` [N m] when it is not 0."""
    dry = f' friction="{friction}"' if friction else ""
    links = ['<link name="base"/>']
    joints = []
    for i in range(n):
        links.append(f'<link name="l{i}"><inertial><origin xyz="0 0 {LINK_LENGTH / 2}"/><mass value="1.0"/>'
                     '<inertia ixx="0.01" ixy="0" ixz="0" iyy="0.011" iyz="0" izz="0.002"/></inertial></link>')
        parent = "base" if i == 0 else f"l{i - 1}"
        z = 0.0 if i == 0 else LINK_LENGTH
        joints.append(f'<joint name="j{i}" type="revolute"><parent link="{parent}"/><child link="l{i}"/>'
                      f'<origin xyz="0 0 {z}"/><axis xyz="0 1 0"/><dynamics damping="0.05"{dry}/>'
                      '<limit effort="10" velocity="5" lower="-3" upper="3"/></joint>')
    return f'<robot name="chain{n}">' + "".join(links) + "".join(joints) + "</robot>"


def chain_model(n: int, case: str):
    """The chain of n links with the rows of ``case`` (module docstring)."""
    from dataclasses import replace

    from mbfg.parts import Contact
    from mbfg.urdf import urdf_from_string

    path = f"chain{n}.urdf"
    model = urdf_from_string(chain_urdf(n, 0.1 if case == "coulomb" else 0.0), motors=[f"j{i}" for i in range(n)],
                             source=path)
    if case == "dry":
        model = model._copy(joints=[replace(j, dry=0.01) for j in model.joints])
    elif case == "contact":
        tips = [Contact(f"tip{i}", f"l{i}", point=(0.0, 0.0, LINK_LENGTH / 2), origin=(0.0, 0.0, -10.0), mu=0.5,
                        radius=0.02) for i in range(n)]
        model = model._copy(contacts=tips)
    elif case not in ("motor", "coulomb"):
        raise SystemExit(f"--cases: unknown case {case!r}; expected some of {', '.join(CASES)}")
    return model


def measure(n: int, case: str = "motor", simulate_s: float = 0.0) -> dict:
    """The figures of one chain (run in its own process: see :func:`main`)."""
    from mbfg import residuals
    from mbfg._jax import jax, jnp
    from mbfg._programs import jaxpr_equation_count

    model = chain_model(n, case)
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
    figures = {"links": n, "complementarity_rows": model.layout.n_B, "equations": equations, "residual_equations": residual_equations,
               "trace_s": trace_s, "compile_s": compile_s, "parameters": len(p)}
    if simulate_s:
        from mbfg.spook import simulate

        steps = int(round(simulate_s / h))
        controls = np.full((steps, n), 0.2)
        first = simulate(model, simulate_s, h, initial=x0, controls=controls)  # compiles the chunk
        warm = min(simulate(model, simulate_s, h, initial=x0, controls=controls).wall_s for _ in range(3))
        figures.update(simulate_first_s=first.wall_s, simulate_us_per_step=1e6 * warm / steps)
    return figures


def run_all(sizes: list[int], cases: list[str], simulate_s: float, checkout: Path | None = None) -> dict:
    """case -> rows, each chain measured in a fresh process; with ``checkout``, with that checkout's mbfg."""
    env = dict(os.environ)
    if checkout is not None:
        env["PYTHONPATH"] = str(checkout)  # the checkout's own source first, before the installed one
    table: dict[str, list[dict]] = {}
    for case in cases:
        for n in sizes:
            command = [sys.executable, __file__, "--one", str(n), "--cases", case, "--simulate", str(simulate_s)]
            out = subprocess.run(command, capture_output=True, text=True, env=env)
            if out.returncode:
                raise SystemExit(f"{case}, {n} links: the measurement failed\n{out.stderr[-3000:]}")
            table.setdefault(case, []).append(json.loads(out.stdout.strip().splitlines()[-1]))
    return table


def show(name: str, table: dict, simulate: bool) -> None:
    sim = " simulate first s  us/step" if simulate else ""
    print(f"## {name}")
    print(f"{'case':>8} {'links':>5} {'B rows':>6} {'equations':>10} {'/ first':>8} {'residual eq.':>13} {'trace s':>8} "
          f"{'compile s':>10}{sim}")
    for case, rows in table.items():
        base = rows[0]["equations"]
        for r in rows:
            sim = f" {r['simulate_first_s']:>16.2f} {r['simulate_us_per_step']:>8.1f}" if simulate else ""
            print(f"{case:>8} {r['links']:>5} {r['complementarity_rows']:>6} {r['equations']:>10} "
                  f"{r['equations'] / base:>8.2f} {r['residual_equations']:>13} {r['trace_s']:>8.2f} "
                  f"{r['compile_s']:>10.2f}{sim}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--links", default="1,2,4,7,12", help="chain lengths, comma separated")
    parser.add_argument("--cases", default=",".join(CASES), help=f"rows of the chain, some of {', '.join(CASES)}")
    parser.add_argument("--out", default=str(Path(__file__).resolve().parent / "results" / "core_size.json"),
                        help="JSON file for the figures")
    parser.add_argument("--simulate", type=float, default=0.0, metavar="T",
                        help="also time mbfg.spook.simulate of T seconds at h = 1 ms: its first call (trace and "
                             "compile) and its best warm time per step of 3 calls")
    parser.add_argument("--peer", type=Path, help="a source checkout of another version, measured in the same run")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)  # internal: measure one chain, print JSON
    args = parser.parse_args()
    if args.one is not None:
        print(json.dumps(measure(args.one, args.cases, args.simulate)))
        return
    sizes = [int(s) for s in args.links.split(",")]
    cases = args.cases.split(",")
    print(f"# core_size: {platform.node()}, python {platform.python_version()}, "
          f"load average {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    peer = None
    if args.peer is not None:
        checkout = args.peer.resolve()
        commit = subprocess.run(["git", "-C", str(checkout), "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True).stdout.strip() or checkout.name
        peer_table = run_all(sizes, cases, args.simulate, checkout)
        show(f"peer: {commit}", peer_table, bool(args.simulate))
        peer = {"name": f"{commit}, the peer checkout", "figures": peer_table}
    table = run_all(sizes, cases, args.simulate)
    show("this checkout", table, bool(args.simulate))
    print(f"# load average {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    _record.write(__file__, table, out=args.out, peer=peer)


if __name__ == "__main__":
    main()
