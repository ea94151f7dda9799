"""The documentation's examples and promises, checked without running anything long.

- Every example line of ``mbfg --help`` and of each ``mbfg COMMAND --help`` epilog parses with the command's own
  parser, and names only what its built-in model or mechanism has (parameters, joints, log columns, targets):
  what ``run`` would check first, before any file is read or anything compiled. A pipe (``tail -f log.csv |
  mbfg smooth ...``) is checked by its ``mbfg`` part; redirections are dropped.
- The Getting started page runs as written, in order, from an empty folder, and finds what it says it finds.
- The README and the pages cite the papers by author and year, and the version is the one in pyproject.toml.

The site itself is built by ``mkdocs build --strict`` in ``.ci/run`` (the ``docs`` extra), not here.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import re
import shlex
import subprocess
import sys
import tomllib
from importlib.metadata import version
from pathlib import Path

import pytest
from markdown_examples import code_blocks, run_blocks

from mbfg.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


# ---------------------------------------------------------------------------------
# The --help examples
# ---------------------------------------------------------------------------------


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    raise AssertionError("mbfg's parser has no subcommands")


def help_examples(epilog: str) -> list[str]:
    """The example command lines of an epilog: the indented lines after its ``examples`` line (whose text may run
    on over unindented lines) up to the next blank line, backslash continuations joined."""
    examples: list[str] = []
    inside = started = False
    for line in epilog.splitlines():
        if not inside:
            inside = line.startswith("examples")
            continue
        if not line.strip():
            if started:
                break
            continue
        if not line.startswith("  "):
            if started:
                break
            continue  # the examples line's text, run on
        started = True
        text = line.strip()
        if examples and examples[-1].endswith("\\"):
            examples[-1] = examples[-1][:-1].rstrip() + " " + text
        else:
            examples.append(text)
    return examples


def mbfg_commands(example: str) -> list[list[str]]:
    """The ``mbfg`` commands of an example line (each part of a pipe that starts with mbfg), without
    redirections, as argument lists after ``mbfg``."""
    commands = []
    part: list[str] = []
    for token in [*shlex.split(example), "|"]:
        if token == "|":
            if part and part[0] == "mbfg":
                commands.append(part[1:])
            part = []
        else:
            part.append(token)
    for args in commands:
        while ">" in args:  # '--out - > chain.csv': the shell's redirection, not an argument
            i = args.index(">")
            del args[i : i + 2]
    return commands


def _all_examples() -> list[tuple[str, str]]:
    """(which help, example line) of the main help and of every subcommand's."""
    parser = build_parser()
    found = [("mbfg", line) for line in help_examples(parser.epilog or "")]
    for name, sub in _subparsers(parser).items():
        found += [(f"mbfg {name}", line) for line in help_examples(sub.epilog or "")]
    return found


def test_every_command_has_examples_of_itself_in_its_help() -> None:
    parser = build_parser()
    examples = _all_examples()
    main = {commands[0][0] for where, line in examples if where == "mbfg" for commands in [mbfg_commands(line)]}
    assert main == set(_subparsers(parser)), main  # 'mbfg --help': one example per command
    for name in _subparsers(parser):
        own = [line for where, line in examples if where == f"mbfg {name}"
               if any(args[:1] == [name] for args in mbfg_commands(line))]
        assert own, f"'mbfg {name} --help' has no example of 'mbfg {name}'"


def _is_builtin_name(name: str) -> bool:
    """A built-in model or mechanism name, not a path (which the examples do not ship)."""
    return "/" not in name and not re.search(r"\.(ya?ml|urdf|json)$", name)


def _names(text: str) -> list[str]:
    """The names of 'A=1,B=2' or 'A,B'."""
    return [item.partition("=")[0].strip() for item in text.split(",")]


def check_names(args: argparse.Namespace) -> None:
    """What the command's ``run`` checks against its model or mechanism before reading any file; an MbfgError
    (or an AssertionError) names what is wrong."""
    from mbfg.cli import control as control_cli
    from mbfg.cli import smooth as smooth_cli
    from mbfg.cli.common import parse_free
    from mbfg.datasets import builtin_mechanisms
    from mbfg.models import BUILTIN, load_model

    mechanisms = getattr(args, "mechanism", None)
    for name in mechanisms if isinstance(mechanisms, list) else [mechanisms] if mechanisms else []:
        if _is_builtin_name(name):
            assert name in builtin_mechanisms(), f"no built-in mechanism {name!r}"
    models = getattr(args, "model", None)
    names = models if isinstance(models, list) else [models] if models else []
    for name in names:
        if _is_builtin_name(name):
            assert name in BUILTIN, f"no built-in model {name!r}; built-in: {', '.join(BUILTIN)}"
    if len(names) != 1 or not _is_builtin_name(names[0]):
        return  # no model, or a model file the example does not ship
    model = load_model(names[0])
    if getattr(args, "free", None):
        parse_free(model, args.free)
    for option in ("prior", "hold"):
        text = getattr(args, option, None)
        if isinstance(text, str):
            unknown = [n for n in _names(text) if n not in model.parameters]
            assert not unknown, f"--{option} {text}: {model.name} has no parameter {unknown}"
    joints = [j.name for j in model.joints]
    for name, *_ in getattr(args, "init", None) or []:
        assert name in joints, f"--init {name}: {model.name} has no joint {name!r}; joints: {joints}"
    if getattr(args, "columns", None) is not None:
        smooth_cli._columns("--columns", args.columns, model)
    if getattr(args, "target", None):
        from mbfg import control

        reactions = set(control.force_names(model))
        for name, _ in args.target:
            if name not in reactions:
                control.resolve_rate_name(model, name)
    if getattr(args, "bounds", None) and args.command == "control":
        control_cli._bounds(model, args.bounds)


@pytest.mark.parametrize("where, example", _all_examples(), ids=lambda x: x if x.startswith("mbfg") else None)
def test_every_help_example_parses_and_names_what_its_model_has(where: str, example: str) -> None:
    commands = mbfg_commands(example)
    assert commands, f"{where} --help: {example!r} runs no mbfg command"
    for argv in commands:
        parser = build_parser()
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            try:
                args = parser.parse_args(argv)
            except SystemExit:
                pytest.fail(f"{where} --help: {example!r} does not parse: {err.getvalue().strip()}")
        check_names(args)


def test_the_example_check_fails_on_a_column_the_model_lacks() -> None:
    """The check can fail: the control of furuta-viscous is u, so a stream that names tau is refused."""
    from mbfg.errors import MbfgError

    args = build_parser().parse_args(
        mbfg_commands("tail -f rig.csv | mbfg smooth furuta-viscous --params calib.json --columns t,theta,alpha,tau")[0])
    with pytest.raises(MbfgError, match="no control column 'u'"):
        check_names(args)
    args = build_parser().parse_args(["calibrate", "pendulum", "log.csv", "--free", "J,mass"])
    with pytest.raises(MbfgError, match="no parameter 'mass'"):
        check_names(args)


def test_help_examples_are_read_from_the_epilog_as_written() -> None:
    epilog = ("examples, one per command (a header that\nruns on):\n  mbfg models\n"
              "  mbfg simulate furuta --noise 1e-3 \\\n      --out furuta.csv\n\nA file:\n  t,u\n")
    assert help_examples(epilog) == ["mbfg models", "mbfg simulate furuta --noise 1e-3 --out furuta.csv"]
    assert mbfg_commands("mbfg forward x.yaml --out - > q.csv") == [["forward", "x.yaml", "--out", "-"]]
    assert mbfg_commands("tail -n +1 -f a.csv | mbfg smooth p --std") == [["smooth", "p", "--std"]]


# ---------------------------------------------------------------------------------
# Getting started, as a new user runs it
# ---------------------------------------------------------------------------------


@pytest.mark.slow
def test_getting_started_runs_as_written_in_order_from_an_empty_folder(tmp_path, monkeypatch) -> None:
    page = DOCS / "getting-started.md"
    languages = [language for language, _ in code_blocks(page)]
    assert languages.count("python") >= 3 and languages.count("bash") >= 2, languages
    monkeypatch.chdir(tmp_path)
    namespace = run_blocks(page, tmp_path, set(), "__getting_started__")

    # The calibration finds the rig's values it says it finds, within 1 %.
    rig = {"J": 0.002, "b": 0.004}
    values = namespace["result"].values  # type: ignore[attr-defined]
    for name, value in rig.items():
        assert abs(values[name] - value) < 0.01 * value, (name, values[name], value)
    # So does the command line's, which wrote the last calib.json (from its own recording, log.csv).
    saved = json.loads((tmp_path / "calib.json").read_text())
    for name, value in rig.items():
        assert abs(saved["parameters"][name]["value"] - value) < 0.01 * value, (name, saved["parameters"][name])
    assert (tmp_path / "fit.png").stat().st_size > 0
    # The stream answered every line of the 2 s recording, with the columns the page describes.
    lines = (tmp_path / "states.csv").read_text().splitlines()
    assert len(lines) == 1 + 2001
    assert lines[0].split(",") == ["t", "theta", "dtheta", "t_smoothed", "theta_smoothed", "dtheta_smoothed",
                                   "flags"]


# ---------------------------------------------------------------------------------
# What every page promises
# ---------------------------------------------------------------------------------


def _pages() -> list[Path]:
    return [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted(DOCS.rglob("*.md"))]


def test_readme_and_pages_cite_the_papers_by_author_and_year() -> None:
    for page in _pages():
        text = page.read_text()
        assert not re.search(r"seed \d", text, re.I), f"{page.relative_to(ROOT)} names a paper by its file"
    bibliography = (DOCS / "reference" / "bibliography.md").read_text()
    for citation in ("Marklund, Servin, Larson 2025", "Blanco-Claraco, Leanza, Reina 2021", "Berard, Trinkle 2008"):
        assert citation in bibliography


def test_every_page_is_in_the_navigation() -> None:
    import yaml

    class Loader(yaml.SafeLoader):
        """mkdocs.yml as data: its mkdocs tags (``!relative``) read as nothing."""

    Loader.add_multi_constructor("!", lambda loader, suffix, node: None)
    config = yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=Loader)

    def entries(nav: object) -> list[str]:
        if isinstance(nav, str):
            return [nav]
        if isinstance(nav, list):
            return [e for item in nav for e in entries(item)]
        if isinstance(nav, dict):
            return [e for value in nav.values() for e in entries(value)]
        return []

    listed = set(entries(config["nav"]))
    pages = {str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md")}
    notebooks = {f"tutorials/{p.name}" for p in (ROOT / "notebooks").glob("*.ipynb")}
    assert pages | notebooks == listed, (pages | notebooks) ^ listed


def test_the_version_is_pyprojects_in_the_metadata_the_package_and_the_citation() -> None:
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    import mbfg

    assert version("mbfg") == declared
    assert mbfg.__version__ == declared
    done = subprocess.run([sys.executable, "-m", "mbfg", "--version"], capture_output=True, text=True, cwd=ROOT)
    assert done.stdout.strip() == f"mbfg {declared}", done
    assert re.search(rf"^version: {re.escape(declared)}$", (ROOT / "CITATION.cff").read_text(), re.M)
    assert f"## {declared}" in (ROOT / "CHANGELOG.md").read_text()


# ---------------------------------------------------------------------------------
# The Python examples of the pages that need no data and no cluster
# ---------------------------------------------------------------------------------


def test_the_spook_pages_example_simulates_the_furuta_pendulum(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    namespace = run_blocks(DOCS / "concepts" / "spook.md", tmp_path, set(), "__docs__")
    frame = namespace["trajectory"].to_dataframe()  # type: ignore[attr-defined]
    assert list(frame.columns) == ["t", "theta", "alpha", "u"] and len(frame) == 1001


def test_the_custom_factor_pages_calibration_with_a_gtsam_prior_converges_to_the_rig(tmp_path, monkeypatch) -> None:
    from mbfg import keys

    monkeypatch.chdir(tmp_path)
    # The page's first example declares 'encoder_gain_offset' as tests/test_factor_declaration.py runs it
    # (module name __readme__), so that both runs in one process are the same declaration.
    namespace = run_blocks(DOCS / "how-to" / "custom-factor.md", tmp_path, set(), "__readme__")
    lm = namespace["lm"]
    assert lm.converged  # type: ignore[attr-defined]
    J, b = lm.values.atVector(keys.P())  # type: ignore[attr-defined]
    assert abs(J - 0.002) < 0.01 * 0.002 and abs(b - 0.004) < 0.01 * 0.004, (J, b)


def test_the_planar_pages_examples_keep_the_mechanisms_on_their_constraints(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    namespace = run_blocks(DOCS / "how-to" / "planar.md", tmp_path, set(), "__docs__")
    frame = namespace["result"].to_dataframe()  # type: ignore[attr-defined]  # the inverse dynamics' result
    assert list(frame.columns) == ["t", "Q_theta1"] and len(frame) > 10
    out = capsys.readouterr().out
    phi = float(re.search(r"max \|Phi\(q\)\|: (\S+)", out).group(1))
    assert phi < 1e-6, out  # the forward simulation stays on |Phi(q)| = 0 (a 1 m bar: 1e-6 m)
