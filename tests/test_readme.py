"""Every code block of the README runs as written, in order, from an empty folder.

The blocks are taken from README.md itself, so the README cannot drift from the product (the runner is
tests/markdown_examples.py). Three blocks are not examples of the product but its installation, test and
documentation commands; they are named below and must stay exactly as written (CI runs the first two and
builds the documentation). The README stays one screen: at most 8,000 characters.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
import yaml
from markdown_examples import code_blocks, run_blocks

README = Path(__file__).resolve().parents[1] / "README.md"

#: Blocks that install, test or serve the repository itself (run by CI, not here).
NOT_RUN = {
    "pip install .",
    "pip install '.[test]' && pytest",
    "pip install '.[docs]' && mkdocs serve",
}

#: The README's size limit [characters]: what it says fits in one read; the rest is the documentation's.
MAX_CHARACTERS = 8000


def test_readme_is_at_most_8000_characters() -> None:
    size = len(README.read_text())
    assert size <= MAX_CHARACTERS, f"README.md has {size} characters; move the detail into docs/"


def test_readme_blocks_are_bash_or_python_and_only_the_install_test_and_docs_commands_are_not_run() -> None:
    blocks = code_blocks(README)
    assert {language for language, _ in blocks} <= {"bash", "python"}, blocks
    skipped = {code for _, code in blocks if code in NOT_RUN}
    assert skipped == NOT_RUN  # all three still in the README, written as CI runs them
    shell = "\n".join(code for language, code in blocks if language == "bash" and code not in NOT_RUN)
    # The main job on built-in data: a log simulated, calibrated, and a second one smoothed in a pipe.
    for command in ("mbfg simulate pendulum ", "mbfg calibrate pendulum ", "| mbfg smooth pendulum "):
        assert command in shell, command
    python = "\n".join(code for language, code in blocks if language == "python")
    assert "calibrate(" in python  # the calibration in Python


@pytest.mark.slow
def test_every_readme_example_runs_as_written_in_order_from_an_empty_folder(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    namespace = run_blocks(README, tmp_path, NOT_RUN, "__readme__")

    # The shell calibration estimates what it claims to: the recording's parameters, from the built-in start.
    truth = yaml.safe_load((tmp_path / "truth.yaml").read_text())
    calibration = json.loads((tmp_path / "calib.json").read_text())
    for name, value in truth.items():
        estimate = calibration["parameters"][name]
        assert abs(estimate["value"] - value) < 0.01 * value, (name, estimate, value)
    # So does the Python one, from the same start (its "rig" has the same values).
    values = namespace["result"].values  # type: ignore[attr-defined]
    for name, value in truth.items():
        assert abs(values[name] - value) < 0.01 * value, (name, values[name], value)
    # The smoothed states answer every line of the stream and follow the recording that was streamed.
    with open(tmp_path / "states.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    with open(tmp_path / "rig.csv", newline="") as f:
        recorded = list(csv.DictReader(f))
    assert len(rows) == len(recorded) == 2001
    error = np.array([float(r["theta"]) - float(s["theta"]) for r, s in zip(rows, recorded)])
    assert np.sqrt(np.mean(error[100:] ** 2)) < 3e-3  # the recording's noise is 1e-3 rad
