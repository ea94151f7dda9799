"""The package's layout: small modules, one job each, and no private name shared across modules (issue 59).

The package's folders are those of pyproject's ``[tool.setuptools.package-dir]`` (mbfg/, factors/, graphs/,
graphs/stream/, datasets/), so a folder added there is scanned too.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: The most lines a module of the package may have.
MAX_LINES = 600


def package_folders(root: Path = REPO) -> list[Path]:
    """The folders of the installed package's modules, from pyproject.toml's package-dir table."""
    table = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    return sorted({root / folder for folder in table["tool"]["setuptools"]["package-dir"].values()})


def line_counts(folders: list[Path], root: Path = REPO) -> dict[str, int]:
    """Path relative to ``root`` -> number of lines (as ``wc -l`` counts a file that ends with a newline), for
    every .py file under ``folders``."""
    counts = {}
    for folder in folders:
        for path in folder.rglob("*.py"):
            if "__pycache__" not in path.parts:
                counts[path.relative_to(root).as_posix()] = len(path.read_text(encoding="utf-8").splitlines())
    return counts


def over_limit(counts: dict[str, int], limit: int = MAX_LINES) -> list[str]:
    """'path: N lines' for each file longer than ``limit``, longest first."""
    return [f"{path}: {n} lines" for path, n in sorted(counts.items(), key=lambda item: -item[1]) if n > limit]


def test_no_module_over_600_lines() -> None:
    counts = line_counts(package_folders())
    # The scan sees the package (a scan of nothing would pass): a module of each folder.
    for module in ("mbfg/adapter.py", "factors/impulse.py", "graphs/joint.py", "graphs/stream/estimator.py",
                   "datasets/rigs.py"):
        assert module in counts, f"{module} not found among the package's modules"
    too_long = over_limit(counts)
    assert not too_long, (f"modules over {MAX_LINES} lines (split them along their seams, one job each): "
                          + "; ".join(too_long))


def test_the_line_count_check_names_a_module_of_601_lines_and_passes_one_of_600(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.setuptools.package-dir]\n"pkg" = "pkg"\n"pkg.sub" = "pkg/sub"\n')
    (tmp_path / "pkg" / "sub").mkdir(parents=True)
    (tmp_path / "pkg" / "ok.py").write_text("x = 1\n" * 600)
    (tmp_path / "pkg" / "sub" / "long.py").write_text("x = 1\n" * 601)
    (tmp_path / "pkg" / "notes.txt").write_text("x\n" * 1000)  # not a module
    counts = line_counts(package_folders(tmp_path), tmp_path)
    assert counts == {"pkg/ok.py": 600, "pkg/sub/long.py": 601}
    assert over_limit(counts) == ["pkg/sub/long.py: 601 lines"]


def private_imports(folders: list[Path], root: Path = REPO) -> list[str]:
    """'path: from MODULE import _name' for each underscored name (not a dunder, not a module) imported from
    another module of the package."""
    import ast

    found = []
    for folder in folders:
        for path in sorted(folder.rglob("*.py")):
            if "__pycache__" in path.parts:
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.ImportFrom):
                    module = "." * node.level + (node.module or "")
                    for alias in node.names:
                        name = alias.name
                        # `from mbfg import _jax`: a private module of the package, imported as a module.
                        if name.startswith("_") and not name.startswith("__") and \
                                not (root / "mbfg" / f"{name}.py").exists():
                            found.append(f"{path.relative_to(root).as_posix()}: from {module} import {name}")
    return found


def test_no_private_name_is_imported_across_modules() -> None:
    found = private_imports(package_folders())
    assert not found, ("a name shared across modules is part of the module's interface: drop its underscore; "
                       + "; ".join(found))


def test_the_private_import_check_names_an_underscored_name_and_passes_a_module(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.setuptools.package-dir]\n"mbfg" = "mbfg"\n')
    (tmp_path / "mbfg").mkdir()
    (tmp_path / "mbfg" / "_jax.py").write_text("x = 1\n")
    (tmp_path / "mbfg" / "a.py").write_text("def _helper():\n    pass\n")
    (tmp_path / "mbfg" / "b.py").write_text("from mbfg import _jax\nfrom mbfg.a import _helper\nfrom mbfg import __doc__\n")
    assert private_imports(package_folders(tmp_path), tmp_path) == ["mbfg/b.py: from mbfg.a import _helper"]
