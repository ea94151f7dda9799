"""Start-up of the command line: first run (empty caches) against second run (caches warm).

A new user's first minutes are spent waiting for JAX to trace and compile the model's programs.
mbfg keeps both on disk (JAX's persistent compilation cache and mbfg's traced programs,
``mbfg._programs``), so only the first run of a command should pay. This runs, each in a fresh
process and with a cache folder of its own (``MBFG_CACHE_DIR``, empty at the start):

1. ``mbfg simulate pendulum`` (2 s at 1 ms, the log the others read; not timed);
2. ``mbfg calibrate pendulum LOG --free J,b`` twice: the time to its first LM progress line on
   stderr (``[calibrate pendulum] 1/...``) and to its exit;
3. ``mbfg smooth pendulum --params CALIB.json --input LOG`` twice: the time to its first estimate
   line on stdout (the line after the CSV header) and to its exit;
4. ``mbfg calibrate furuta-viscous`` on a 1 s log (two bodies, a motor, the tilt: a larger
   program to trace than the pendulum's), twice, the same times.

Printed: first and second run of each, in seconds (to that line, to the first stderr line of any kind, to
exit), and the load average. Asserts nothing.

    python benchmarks/startup.py            # about 3 min on 2 cores
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import _record


def load() -> str:
    return "load average " + ", ".join(f"{x:.2f}" for x in os.getloadavg())


def mbfg(*args: str) -> list[str]:
    return [sys.executable, "-m", "mbfg", *args]


def timed(command: list[str], env: dict[str, str], first: Callable[[str, str], bool]
          ) -> tuple[float, float, float]:
    """(seconds to the first output line for which ``first(stream, line)`` holds, seconds to the first line on
    stderr of any kind (the user's first sign of life: a "compiling ..." or progress line), seconds to exit)."""
    start = time.perf_counter()
    proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen: list[float] = []
    stderr_seen: list[float] = []

    def watch(stream, name: str) -> None:
        for line in stream:
            if name == "stderr" and not stderr_seen:
                stderr_seen.append(time.perf_counter() - start)
            if not seen and first(name, line):
                seen.append(time.perf_counter() - start)

    threads = [threading.Thread(target=watch, args=(proc.stdout, "stdout")),
               threading.Thread(target=watch, args=(proc.stderr, "stderr"))]
    for t in threads:
        t.start()
    code = proc.wait()
    for t in threads:
        t.join()
    total = time.perf_counter() - start
    if code != 0:
        raise SystemExit(f"{' '.join(command)} exited with {code}")
    return (seen[0] if seen else float("nan")), (stderr_seen[0] if stderr_seen else float("nan")), total


def lm_line(label: str) -> Callable[[], Callable[[str, str], bool]]:
    """A test for the first LM progress line of ``label`` on stderr."""
    return lambda: lambda stream, line: stream == "stderr" and line.startswith(f"[{label}] 1/")


def first_estimate() -> Callable[[str, str], bool]:
    """A test for ``mbfg smooth``'s first estimate: its second stdout line (the first is the CSV header)."""
    count = [0]

    def test(stream: str, line: str) -> bool:
        if stream != "stdout":
            return False
        count[0] += 1
        return count[0] == 2

    return test


def main() -> None:
    print(f"# start-up of mbfg commands, first run (empty caches) and second run; {load()}")
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("JAX_COMPILATION_CACHE", "MBFG_CACHE"))}
        env["MBFG_CACHE_DIR"] = str(work / "cache")
        env["JAX_PLATFORMS"] = env.get("JAX_PLATFORMS", "cpu")
        log, calib = str(work / "log.csv"), str(work / "calib.json")
        subprocess.run(mbfg("simulate", "pendulum", "--duration", "2", "--dt", "0.001", "--init", "theta=2.5",
                            "--noise", "0.001", "--out", log), env=env, check=True, capture_output=True)
        furuta_log = str(work / "furuta.csv")
        subprocess.run(mbfg("simulate", "furuta-viscous", "--duration", "1", "--dt", "0.001", "--init",
                            "alpha=0.3", "--noise", "0.001", "--out", furuta_log), env=env, check=True,
                       capture_output=True)
        cases = [
            ("mbfg calibrate pendulum (first LM progress line)",
             mbfg("calibrate", "pendulum", log, "--free", "J,b", "--out", calib), lm_line("calibrate pendulum")),
            ("mbfg smooth pendulum (first estimate line)",
             mbfg("smooth", "pendulum", "--params", calib, "--input", log), first_estimate),
            ("mbfg calibrate furuta-viscous (first LM progress line)",
             mbfg("calibrate", "furuta-viscous", furuta_log, "--free", "K,J_Az,J_Bx,b_1,b_2"),
             lm_line("calibrate furuta-viscous")),
        ]
        print(f"{'command':<56} {'run':>6} {'to first line s':>16} {'to first stderr s':>18} {'to exit s':>10}")
        rows = []
        for name, command, make_first in cases:
            for run in ("first", "second"):
                to_line, to_stderr, total = timed(command, env, make_first())
                print(f"{name:<56} {run:>6} {to_line:>16.2f} {to_stderr:>18.2f} {total:>10.2f}", flush=True)
                rows.append({"command": name, "run": run, "to_first_line_s": to_line,
                             "to_first_stderr_s": to_stderr, "to_exit_s": total})
    print(f"# {load()}")
    _record.write(__file__, rows)


if __name__ == "__main__":
    main()
