"""Every notebook in notebooks/ runs without error, and is committed without outputs.

A notebook that ran is also written, with its outputs, to build/executed-notebooks/ (ignored by git): the
documentation's Tutorials pages show that copy, figures included, when its code is the committed notebook's
(docs/hooks/notebooks.py), so the site gets the figures of the suite's run without executing anything itself.

The notebooks are executed with nbclient in a kernel that runs *this*
interpreter (``sys.executable``), from a kernelspec written to a temporary
directory put first on ``JUPYTER_PATH``: no kernel needs to be registered
beforehand, and a ``python3`` kernel registered elsewhere on the machine (for
another environment) cannot be picked up by mistake.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import ipykernel  # noqa: F401  (the kernel the notebooks run in; part of the test extra)
import nbclient
import nbformat
import pytest

NOTEBOOK_DIR = Path(__file__).resolve().parents[1] / "notebooks"
#: Where a notebook that ran is written with its outputs, for the documentation site.
EXECUTED_DIR = Path(__file__).resolve().parents[1] / "build" / "executed-notebooks"
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("*.ipynb"))
KERNEL_NAME = "mbfg-test-python"
#: Seconds a single cell may run (JAX compilation on a slow 2-core CI machine included).
CELL_TIMEOUT = 600


@pytest.fixture
def kernel_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A kernelspec for the current interpreter, visible only to this test."""
    spec_dir = tmp_path / "jupyter" / "kernels" / KERNEL_NAME
    spec_dir.mkdir(parents=True)
    spec = {
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": f"Python ({sys.executable})",
        "language": "python",
    }
    (spec_dir / "kernel.json").write_text(json.dumps(spec))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    # Headless plotting in the kernel, whatever the notebook selects: Jupyter's inline backend, which draws each
    # cell's figures as PNG outputs of the cell (the documentation shows them) and closes them.
    monkeypatch.setenv("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    return KERNEL_NAME


def _ids(paths: list[Path]) -> list[str]:
    return [p.name for p in paths]


def test_notebooks_found() -> None:
    assert NOTEBOOKS, f"no notebooks in {NOTEBOOK_DIR}"


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_notebook_runs(path: Path, kernel_name: str) -> None:
    """Execute every cell in order, with the notebook's folder as working directory."""
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        nb,
        timeout=CELL_TIMEOUT,
        kernel_name=kernel_name,
        resources={"metadata": {"path": str(path.parent)}},
    )
    try:
        client.execute()
    except nbclient.exceptions.CellExecutionError as exc:
        pytest.fail(f"{path.name}: a cell raised:\n{exc}")
    EXECUTED_DIR.mkdir(parents=True, exist_ok=True)
    partial = EXECUTED_DIR / f".{path.name}.{os.getpid()}.part"  # whole or not at all: the site may read it
    nbformat.write(nb, partial)
    os.replace(partial, EXECUTED_DIR / path.name)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_notebook_outputs_stripped(path: Path) -> None:
    """Committed notebooks carry no outputs and no execution counts."""
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    dirty = [
        i
        for i, cell in enumerate(nb.cells)
        if cell.cell_type == "code" and (cell.get("outputs") or cell.get("execution_count") is not None)
    ]
    assert not dirty, (
        f"{path.name}: code cells {dirty} have outputs or execution counts; strip them, e.g. "
        f"`jupyter nbconvert --clear-output --inplace {path.relative_to(NOTEBOOK_DIR.parent)}`"
    )
