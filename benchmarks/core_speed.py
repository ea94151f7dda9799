"""A 7-DOF arm stepped by mbfg and by MuJoCo's JAX engine (MJX) on the same URDF, MuJoCo's C step as the floor.

Run from anywhere (needs the benchmark extra: ``pip install 'mbfg[bench]'``, i.e. ``mujoco`` and ``mujoco-mjx``)::

    python benchmarks/core_speed.py                  # 1 s at h = 1 ms; writes benchmarks/results/core_speed.json
    python benchmarks/core_speed.py --seconds 0.2 --out /tmp/speed.json

The arm is ``datasets/panda.urdf`` (the Franka Emika Panda's kinematics with the full inertia tensors
identified by Gaz et al. 2019; no joint friction), its seven joints driven by torques
``u_k,i = g_i(q_0) + 0.01 effort_i sin(2 pi (0.5 + 0.25 i) t_k)`` (joint i = 0..6; effort 87 N m on joints
0-3, 12 N m on 4-6; g(q_0) the gravity torques at q_0 from MuJoCo's ``qfrc_bias`` at rest), from the
"ready" pose q_0 = (0, -pi/4, 0, -3 pi/4, 0, pi/2, pi/4) rad at rest, under gravity 9.81 m/s^2 along -z:
the arm sways about q_0 (a falling arm is chaotic, and two engines' trajectories part within a second).

Each engine runs in a fresh process (no compiled program in memory; mbfg's persistent program cache
and JAX's compilation cache off), in float64 for both JAX engines:

- ``mbfg``: ``mbfg.spook.simulate`` (the Spook stepper of Marklund, Servin, Larson 2025 in maximal
  coordinates: 7 bodies, 5 holonomic rows and 1 motor row per joint, at the built-in joint
  compliance ``mbfg.trees.RIGID``, rigid at the step's scale). ``first_s`` is its first call (trace, compile, run);
  ``us_per_step`` the best of 3 warm calls divided by the steps, host copies of the trajectory included;
  ``cpu_us_per_step`` the same in the process's CPU time (all its threads), which a loaded machine
  disturbs less than the wall time (every engine has both).
- ``mjx``: ``mujoco.MjModel.from_xml_path`` of the same URDF, ``mjx.put_model``, a ``jax.lax.scan`` of
  ``mjx.step`` with the torques as ``qfrc_applied``; ``first_s`` is its first call (trace, compile, run),
  ``us_per_step`` the best of 3 warm calls; ``kinematics_us_per_step`` the same for ``mjx.kinematics`` alone.
- ``mujoco_c``: ``mujoco.mj_step`` in a Python loop (``us_per_step``) and ``mujoco.rollout`` (the C loop
  without Python, ``rollout_us_per_step``), the floor.

What differs between the engines (as close as each allows): MuJoCo and MJX integrate the
generalized coordinates with the semi-implicit ``Euler`` integrator at the same h; mbfg steps maximal
coordinates with compliant, damped joint rows (Spook) and its motors carry a shaft inertia of
1e-6 kg m^2 (MuJoCo: no armature); MuJoCo's joint limits and contacts are switched off (mbfg does not
enforce URDF limits; the arm has no geometry). ``agreement`` is the largest joint-angle difference
[rad] between mbfg's and MuJoCo's trajectories over the run: the same motion, not the same numbers.

Asserts nothing; the figures are wall times on a possibly shared machine (the load average is stored).
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

ROOT = Path(__file__).resolve().parents[1]
URDF = ROOT / "datasets" / "panda.urdf"
JOINTS = [f"panda_joint{i}" for i in range(1, 8)]
READY = np.array([0.0, -np.pi / 4, 0.0, -3 * np.pi / 4, 0.0, np.pi / 2, np.pi / 4])  # [rad]
H = 1e-3  # [s]
WARM_RUNS = 3


EFFORT = np.array([87.0, 87.0, 87.0, 87.0, 12.0, 12.0, 12.0])  # [N m], the URDF's effort limits


def torques(steps: int) -> np.ndarray:
    """(steps, 7) joint torques [N m]: u_k,i = g_i(q_0) + 0.01 effort_i sin(2 pi (0.5 + 0.25 i) t_k)."""
    import mujoco

    m = _mujoco_model()
    d = mujoco.MjData(m)
    d.qpos[:] = READY
    mujoco.mj_forward(m, d)
    t = np.arange(steps)[:, None] * H
    return d.qfrc_bias[None, :] + 0.01 * EFFORT * np.sin(2 * np.pi * (0.5 + 0.25 * np.arange(7))[None, :] * t)


def run_mbfg(steps: int) -> dict:
    from mbfg import _programs  # noqa: F401  (sets float64)
    from mbfg._jax import jax
    from mbfg._programs import jaxpr_equation_count
    from mbfg.spook import simulate, step
    from mbfg.trees import RIGID
    from mbfg.urdf import load_urdf

    model = load_urdf(URDF, motors=JOINTS)
    x0 = model.initial_state(dict(zip(JOINTS, READY)))
    u = torques(steps)
    rigid = dict(zip(("eps_lin", "eps_rot", "tau"), RIGID))
    first = simulate(model, steps * H, H, initial=x0, controls=u, parameters=rigid, chunk=steps)
    warm, cpu = [], []
    for _ in range(WARM_RUNS):
        start = time.process_time()
        warm.append(simulate(model, steps * H, H, initial=x0, controls=u, parameters=rigid, chunk=steps).wall_s)
        cpu.append(time.process_time() - start)
    p = model.parameters.arrays_with(rigid, "parameters")
    step_eqs = jaxpr_equation_count(jax.make_jaxpr(lambda x, u: step(model, x, u, p, H)[0])(x0, u[0]).jaxpr)
    q = np.unwrap(first.observations, axis=0)[1:]  # after each step, as the others
    return {"first_s": first.wall_s, "compile_s": first.compile_s, "us_per_step": 1e6 * min(warm) / steps,
            "cpu_us_per_step": 1e6 * min(cpu) / steps,
            "step_equations": step_eqs, "q": q.tolist(), "jax": jax.__version__,
            "device": str(jax.devices()[0])}


def _mujoco_model():
    import mujoco

    m = mujoco.MjModel.from_xml_path(str(URDF))
    m.opt.timestep = H
    m.opt.integrator = mujoco.mjtIntegrator.mjINT_EULER
    m.opt.gravity[:] = (0.0, 0.0, -9.81)
    m.jnt_limited[:] = 0  # mbfg notes URDF limits but does not enforce them
    m.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_CONTACT | mujoco.mjtDisableBit.mjDSBL_LIMIT
    assert m.nq == m.nv == 7 and m.nu == 0, (m.nq, m.nv, m.nu)
    return m


def run_mjx(steps: int) -> dict:
    import jax

    jax.config.update("jax_enable_x64", True)  # float64, as mbfg
    import jax.numpy as jnp
    import mujoco
    from mujoco import mjx

    m = _mujoco_model()
    mx = mjx.put_model(m)
    d = mujoco.MjData(m)
    d.qpos[:] = READY
    dx0 = mjx.put_data(m, d)
    u = jnp.asarray(torques(steps))

    @jax.jit
    def rollout(dx, u):
        def body(dx, u_k):
            dx = mjx.step(mx, dx.replace(qfrc_applied=u_k))
            return dx, dx.qpos

        return jax.lax.scan(body, dx, u)

    start = time.perf_counter()
    _, q = rollout(dx0, u)
    q = np.asarray(jax.block_until_ready(q))
    first = time.perf_counter() - start
    warm, cpu = [], []
    for _ in range(WARM_RUNS):
        start, start_cpu = time.perf_counter(), time.process_time()
        jax.block_until_ready(rollout(dx0, u))
        warm.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    # Where MJX's step spends its time: its forward kinematics alone, scanned the same way.
    kinematics = jax.jit(lambda dx: jax.lax.scan(lambda d, _: (mjx.kinematics(mx, d), None), dx, None,
                                                 length=steps)[0])
    jax.block_until_ready(kinematics(dx0))
    kinematics_s = []
    for _ in range(WARM_RUNS):
        start = time.perf_counter()
        jax.block_until_ready(kinematics(dx0))
        kinematics_s.append(time.perf_counter() - start)
    return {"first_s": first, "us_per_step": 1e6 * min(warm) / steps, "cpu_us_per_step": 1e6 * min(cpu) / steps,
            "kinematics_us_per_step": 1e6 * min(kinematics_s) / steps, "q": q.tolist(),
            "dtype": str(q.dtype), "mujoco": mujoco.__version__, "jax": jax.__version__,
            "device": str(jax.devices()[0])}


def run_mujoco_c(steps: int) -> dict:
    import mujoco

    m = _mujoco_model()
    d = mujoco.MjData(m)
    u = torques(steps)

    def loop() -> tuple[float, float, np.ndarray]:
        mujoco.mj_resetData(m, d)
        d.qpos[:] = READY
        q = np.empty((steps, 7))
        start, start_cpu = time.perf_counter(), time.process_time()
        for k in range(steps):
            d.qfrc_applied[:] = u[k]
            mujoco.mj_step(m, d)
            q[k] = d.qpos
        return time.perf_counter() - start, time.process_time() - start_cpu, q

    runs = [loop() for _ in range(WARM_RUNS)]
    wall, q = min((r[0], r[2]) for r in runs)[0], runs[0][2]
    figures = {"us_per_step": 1e6 * wall / steps, "cpu_us_per_step": 1e6 * min(r[1] for r in runs) / steps,
               "q": q.tolist(), "mujoco": mujoco.__version__}
    try:
        from mujoco import rollout
    except ImportError:  # older MuJoCo: no rollout module
        return figures
    # rollout's control is d.ctrl; the URDF has no actuators, so the torques go in as applied forces
    mujoco.mj_resetData(m, d)
    d.qpos[:] = READY
    state0 = np.empty(mujoco.mj_stateSize(m, mujoco.mjtState.mjSTATE_FULLPHYSICS))
    mujoco.mj_getState(m, d, state0, mujoco.mjtState.mjSTATE_FULLPHYSICS)
    spec = mujoco.mjtState.mjSTATE_QFRC_APPLIED
    walls = []
    for _ in range(WARM_RUNS):
        start = time.perf_counter()
        rollout.rollout(m, d, state0[None], control=u[None], control_spec=spec)
        walls.append(time.perf_counter() - start)
    figures["rollout_us_per_step"] = 1e6 * min(walls) / steps
    return figures


ENGINES = {"mbfg": run_mbfg, "mjx": run_mjx, "mujoco_c": run_mujoco_c}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=1.0, help="simulated time [s] at h = 1 ms")
    parser.add_argument("--engines", default=",".join(ENGINES), help="comma separated: " + ", ".join(ENGINES))
    parser.add_argument("--out", default=None, help="JSON file for the record (default benchmarks/results/)")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # internal: one engine in this process, print JSON
    args = parser.parse_args()
    steps = int(round(args.seconds / H))
    if args.one:
        print(json.dumps(ENGINES[args.one](steps)))
        return
    env = dict(os.environ, MBFG_CACHE_DIR="off")  # fresh caches: nothing compiled is read from disk
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    load = os.getloadavg()
    print(f"# core_speed: {platform.node()}, {os.cpu_count()} CPUs, load average {', '.join(f'{x:.2f}' for x in load)}")
    results = {}
    for name in args.engines.split(","):
        out = subprocess.run([sys.executable, __file__, "--one", name, "--seconds", str(args.seconds)], env=env,
                             check=True, capture_output=True, text=True)
        results[name] = json.loads(out.stdout.strip().splitlines()[-1])
    q = {name: np.asarray(r.pop("q")) for name, r in results.items()}
    agreement = {f"{a} - {b}": float(np.max(np.abs(q[a] - q[b])))
                 for a, b in (("mbfg", "mujoco_c"), ("mjx", "mujoco_c"), ("mbfg", "mjx")) if a in q and b in q}
    print(f"{'engine':>9} {'first call s':>13} {'us/step':>9} {'CPU us/step':>12}")
    for name, r in results.items():
        first = f"{r['first_s']:>13.2f}" if "first_s" in r else f"{'-':>13}"
        print(f"{name:>9} {first} {r['us_per_step']:>9.1f} {r['cpu_us_per_step']:>12.1f}")
    if "rollout_us_per_step" in results.get("mujoco_c", {}):
        print(f"{'rollout':>9} {'-':>13} {results['mujoco_c']['rollout_us_per_step']:>9.1f}")
    for pair, diff in agreement.items():
        print(f"# max |q| difference {pair}: {diff:.3g} rad")
    if "mbfg" in results and "mjx" in results:
        print(f"# mbfg / mjx per step: {results['mbfg']['us_per_step'] / results['mjx']['us_per_step']:.2f}")
    rows = {name: {"engine": name, **r, **({"max_q_difference_from_mujoco_c_rad": agreement[f"{name} - mujoco_c"]}
                                          if f"{name} - mujoco_c" in agreement else {})}
            for name, r in results.items()}
    ours = [rows[name] for name in rows if name == "mbfg"]
    peers = [rows[name] for name in rows if name != "mbfg"]
    _record.write(__file__, ours, out=args.out,
                  peer={"name": f"MJX and MuJoCo's C step on the same URDF, same run ({steps} steps of {H:g} s)",
                        "figures": peers} if peers else None)


if __name__ == "__main__":
    main()
