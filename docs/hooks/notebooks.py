"""mkdocs hook: the notebooks of ``notebooks/`` (at the repository root) as the pages ``tutorials/NAME.ipynb``.

They stay where the test suite executes them: this hook links each one under build/docs-tutorials/tutorials/
and adds it to the site's files before mkdocs-jupyter (a plugin, priority 0) turns the ``.ipynb`` files into
pages. They are rendered as committed, without outputs: the site does not execute them (the test suite
does, tests/test_notebooks.py).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from mkdocs.plugins import event_priority
from mkdocs.structure.files import File, Files

REPO = Path(__file__).resolve().parents[2]
NOTEBOOKS = REPO / "notebooks"
LINKS = REPO / "build" / "docs-tutorials"


@event_priority(100)  # before mkdocs-jupyter's on_files
def on_files(files: Files, config: Any, **kwargs: Any) -> Files:
    if LINKS.exists():
        shutil.rmtree(LINKS)
    (LINKS / "tutorials").mkdir(parents=True)
    for path in sorted(NOTEBOOKS.glob("*.ipynb")):
        (LINKS / "tutorials" / path.name).symlink_to(path)
        files.append(File(f"tutorials/{path.name}", src_dir=str(LINKS), dest_dir=config["site_dir"],
                          use_directory_urls=config["use_directory_urls"]))
    return files
