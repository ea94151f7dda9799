"""mkdocs hook: a tree of links laid out like the installed ``mbfg`` package, for mkdocstrings to read.

factors/, graphs/ and datasets/ are top-level folders of the repository installed as mbfg.factors,
mbfg.graphs and mbfg.datasets (pyproject's [tool.setuptools.package-dir]). mkdocstrings reads the source
statically and knows no such mapping, so this hook lays out build/docs-api/mbfg/ from that table (as
.ci/typecheck does for mypy) when mkdocs loads it, before any page is rendered; mkdocs.yml points
mkdocstrings' ``paths`` there.
"""

from __future__ import annotations

import shutil
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TREE = REPO / "build" / "docs-api"


def link_tree(dest: Path) -> None:
    """Links under ``dest`` laid out like the installed package (parents first: mbfg/ before mbfg/graphs/)."""
    mapping = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    if dest.exists():
        shutil.rmtree(dest)
    for package, folder in sorted(mapping.items(), key=lambda item: item[0].count(".")):
        target = dest.joinpath(*package.split("."))
        source = REPO / folder
        if target.is_symlink() and target.resolve() == source.resolve():
            continue  # linked whole with its parent folder
        target.mkdir(parents=True)
        for entry in source.iterdir():
            if entry.name != "__pycache__" and not entry.name.startswith("."):
                (target / entry.name).symlink_to(entry)


link_tree(TREE)
