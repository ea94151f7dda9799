"""mkdocs hook: the notebooks of ``notebooks/`` (at the repository root) as the pages ``tutorials/NAME.ipynb``.

They stay where the test suite executes them: this hook links each one under build/docs-tutorials/tutorials/
and adds it to the site's files before mkdocs-jupyter (a plugin, priority 0) turns the ``.ipynb`` files into
pages. The site does not execute them; the test suite does (tests/test_notebooks.py), and writes each one
that ran, with its outputs, to build/executed-notebooks/. A page shows that copy, figures included, when its
cells are the committed notebook's (the same sources in the same order), else the notebook as committed,
without outputs: a stale run never shows the outputs of other code. So `pytest` and then `mkdocs build`
(``.ci/run``'s order) give a site with the suite's figures, at no cost to the build.
"""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path
from typing import Any

from mkdocs.plugins import event_priority
from mkdocs.structure.files import File, Files

REPO = Path(__file__).resolve().parents[2]
NOTEBOOKS = REPO / "notebooks"
LINKS = REPO / "build" / "docs-tutorials"
#: tests/test_notebooks.py's executed copies.
EXECUTED = REPO / "build" / "executed-notebooks"
log = logging.getLogger("mkdocs.hooks.notebooks")


def _cells(path: Path) -> list[tuple[str, str]] | None:
    """(cell type, source) of every cell of a notebook; None when it cannot be read."""
    try:
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        return [(c["cell_type"], "".join(c["source"]) if isinstance(c["source"], list) else c["source"])
                for c in cells]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def page_source(notebook: Path) -> Path:
    """The file a tutorial page shows: the executed copy of ``notebook`` when its cells are the committed ones,
    else ``notebook`` itself."""
    executed = EXECUTED / notebook.name
    if executed.is_file() and _cells(executed) == _cells(notebook):
        return executed
    if executed.is_file():
        log.info("%s: the executed copy in %s is of other code; shown without outputs", notebook.name, EXECUTED)
    return notebook


@event_priority(100)  # before mkdocs-jupyter's on_files
def on_files(files: Files, config: Any, **kwargs: Any) -> Files:
    if LINKS.exists():
        shutil.rmtree(LINKS)
    (LINKS / "tutorials").mkdir(parents=True)
    for path in sorted(NOTEBOOKS.glob("*.ipynb")):
        (LINKS / "tutorials" / path.name).symlink_to(page_source(path))
        files.append(File(f"tutorials/{path.name}", src_dir=str(LINKS), dest_dir=config["site_dir"],
                          use_directory_urls=config["use_directory_urls"]))
    return files
