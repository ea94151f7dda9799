"""Every code block of the README runs as written, in order, from an empty folder.

The blocks are taken from README.md itself, so the README cannot drift from the product: shell blocks run
in bash (``set -euo pipefail``) with this environment's ``mbfg`` and ``python`` first on PATH, Python blocks
run one after another in one namespace (a later block may use an earlier one's names, as a reader's session
does). Two blocks are not examples of the product but of its installation and test commands; they are named
below and must stay exactly as written (CI runs them). The one block that never ends by itself, ``tail -f``
into ``mbfg smooth``, is ended the way its text says: by Ctrl-C (SIGINT to its process group) once every
line of the log has been answered.
"""

from __future__ import annotations

import csv
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import yaml

README = Path(__file__).resolve().parents[1] / "README.md"

#: Blocks that install or test the repository itself (run by CI, not here).
NOT_RUN = {
    "pip install .",
    "pip install '.[test]' && pytest",
}

_FENCE = re.compile(r"^( *)```(\w*)\n(.*?)^\1```", re.S | re.M)


def readme_blocks() -> list[tuple[str, str]]:
    """(language, code) of every fenced block with a language, in order; the code dedented."""
    blocks = []
    for match in _FENCE.finditer(README.read_text()):
        indent, language, body = match.groups()
        if not language:
            continue  # a synopsis or a layout listing, not code
        lines = [line[len(indent):] if line.startswith(indent) else line for line in body.splitlines()]
        blocks.append((language, "\n".join(lines).strip()))
    return blocks


def test_readme_blocks_are_bash_or_python_and_only_the_install_and_test_commands_are_not_run() -> None:
    blocks = readme_blocks()
    assert {language for language, _ in blocks} <= {"bash", "python"}, blocks
    skipped = {code for _, code in blocks if code in NOT_RUN}
    assert skipped == NOT_RUN  # both still in the README, written as CI runs them
    shell = "\n".join(code for language, code in blocks if language == "bash" and code not in NOT_RUN)
    for command in ("forward", "inverse", "simulate", "calibrate", "crossval", "smooth", "sweep", "control"):
        assert f"mbfg {command} " in shell, command  # every subcommand has a runnable example


def _environment() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    env["MPLBACKEND"] = "Agg"
    return env


def _run(code: str, cwd: Path, env: dict[str, str]) -> None:
    done = subprocess.run(["bash", "-c", "set -euo pipefail\n" + code], cwd=cwd, env=env, capture_output=True,
                          text=True)
    assert done.returncode == 0, f"{code}\n{done.stderr}"


def _run_until_ctrl_c(block: str, cwd: Path, env: dict[str, str]) -> str:
    """Run a block ending in a ``tail -f`` pipe into ``mbfg smooth``: the lines before it as usual, then the
    pipe, and Ctrl-C once its output has one line per input line."""
    before, code = block.rsplit("\n", 1) if "\n" in block else ("", block)
    if before:
        _run(before, cwd, env)
    source = cwd / re.search(r"tail -n \+1 -f (\S+)", code).group(1)
    target = cwd / re.search(r"> (\S+)", code).group(1)
    lines = len(source.read_text().splitlines())
    proc = subprocess.Popen(["bash", "-c", code], cwd=cwd, env=env, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)  # its own process group, as a terminal's foreground job
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and proc.poll() is None:
        if target.exists() and len(target.read_text().splitlines()) >= lines:
            break
        time.sleep(0.2)
    assert proc.poll() is None, f"the pipe ended by itself: {proc.stderr.read()}"
    os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C
    _, err = proc.communicate(timeout=60)
    assert "interrupted" in err and f"{lines - 1} samples" in err, err  # the summary, on Ctrl-C
    return err


def test_every_readme_example_runs_as_written_in_order_from_an_empty_folder(tmp_path, monkeypatch) -> None:
    env = _environment()
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": "__readme__"}
    for language, code in readme_blocks():
        if code in NOT_RUN:
            continue
        if language == "python":
            exec(compile(code, "README.md", "exec"), namespace)
        elif "tail -n +1 -f" in code:
            _run_until_ctrl_c(code, tmp_path, env)
        else:
            _run(code, tmp_path, env)
        for out in re.findall(r"--out ([\w.]+)", code):
            assert (tmp_path / out).stat().st_size > 0, f"{code}: {out} not written"

    # The calibration example estimates what it claims to: the recording's parameters, from the built-in start.
    truth = yaml.safe_load((tmp_path / "truth.yaml").read_text())
    calibration = json.loads((tmp_path / "calib.json").read_text())
    for name, value in truth.items():
        estimate = calibration["parameters"][name]
        assert abs(estimate["value"] - value) < 0.01 * value, (name, estimate, value)
    # The smoothed states follow the recording that was streamed.
    with open(tmp_path / "states.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    with open(tmp_path / "rig.csv", newline="") as f:
        recorded = list(csv.DictReader(f))
    assert len(rows) == len(recorded)
    error = np.array([float(r["theta"]) - float(s["theta"]) for r, s in zip(rows, recorded)])
    assert np.sqrt(np.mean(error[100:] ** 2)) < 3e-3  # the recording's noise is 1e-3 rad
