"""The code blocks of a Markdown page (the README, a documentation page), run as a reader runs them.

Shell blocks run in bash (``set -euo pipefail``) with this environment's ``mbfg`` and ``python`` first on
PATH; Python blocks run one after another in one namespace (a later block may use an earlier one's names,
as a reader's session does). Blocks in another language (``text``: a listing, an output, a command to
install) or without one are not run.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

_FENCE = re.compile(r"^( *)```(\w*)\n(.*?)^\1```", re.S | re.M)


def code_blocks(page: Path) -> list[tuple[str, str]]:
    """(language, code) of every fenced block of ``page`` with a language, in order; the code dedented."""
    blocks = []
    for match in _FENCE.finditer(page.read_text()):
        indent, language, body = match.groups()
        if not language:
            continue
        lines = [line[len(indent):] if line.startswith(indent) else line for line in body.splitlines()]
        blocks.append((language, "\n".join(lines).strip()))
    return blocks


def environment() -> dict[str, str]:
    """This environment, with its ``mbfg`` and ``python`` first on PATH and headless figures."""
    env = dict(os.environ)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    env["MPLBACKEND"] = "Agg"
    return env


def run_shell(code: str, cwd: Path, env: dict[str, str]) -> None:
    """Run a shell block; its failure is the test's, with the block and its stderr."""
    done = subprocess.run(["bash", "-c", "set -euo pipefail\n" + code], cwd=cwd, env=env, capture_output=True,
                          text=True)
    assert done.returncode == 0, f"{code}\n{done.stderr}"


def run_blocks(page: Path, cwd: Path, not_run: set[str], name: str) -> dict[str, object]:
    """Run every block of ``page`` but those in ``not_run``, in order, in ``cwd`` (the caller's working
    folder too); every ``--out FILE`` a block names must then be a non-empty file. Returns the Python
    blocks' namespace (``__name__`` is ``name``)."""
    env = environment()
    namespace: dict[str, object] = {"__name__": name}
    for language, code in code_blocks(page):
        if code in not_run or language not in ("bash", "python"):
            continue
        if language == "python":
            exec(compile(code, str(page.name), "exec"), namespace)
        else:
            run_shell(code, cwd, env)
        for out in re.findall(r"--out ([\w.]+)", code):
            assert (cwd / out).stat().st_size > 0, f"{code}: {out} not written"
    return namespace
