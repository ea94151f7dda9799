"""mkdocs hook: the command-line reference, generated from ``mbfg``'s own argparse parsers at build time.

A page that holds the line ``<!-- mbfg-cli -->`` gets, in its place, one section per subcommand: its
one-line summary and its ``--help`` text exactly as ``mbfg COMMAND --help`` prints it. The text comes from
:func:`mbfg.cli.build_parser`, so the reference cannot drift from the command line.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

MARKER = "<!-- mbfg-cli -->"
#: The width the help text is wrapped at (argparse reads $COLUMNS); fixed, so the page does not depend on
#: the terminal that built it.
WIDTH = "80"


@contextmanager
def _columns(width: str) -> Iterator[None]:
    """$COLUMNS set to ``width`` inside the block, restored after."""
    before = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = width
    try:
        yield
    finally:
        if before is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = before


def _subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, str, argparse.ArgumentParser]]:
    """(name, one-line help, parser) of every subcommand, in the order ``mbfg --help`` lists them."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            summaries = {choice.dest: choice.help or "" for choice in action._choices_actions}
            return [(name, summaries.get(name, ""), sub) for name, sub in action.choices.items()]
    raise RuntimeError("mbfg's parser has no subcommands")


def cli_reference() -> str:
    """The generated Markdown: a table of the subcommands, then each one's ``--help``."""
    from mbfg.cli import build_parser

    with _columns(WIDTH):
        parser = build_parser()
        commands = _subcommands(parser)
        parts = ["| command | what it does |", "|---|---|"]
        parts += [f"| [`mbfg {name}`](#mbfg-{name}) | {summary} |" for name, summary, _ in commands]
        parts += ["", "## `mbfg`", "", "```text", parser.format_help().rstrip(), "```", ""]
        for name, summary, sub in commands:
            parts += [f"## `mbfg {name}` {{#mbfg-{name}}}", "", summary[:1].upper() + summary[1:] + ".", "",
                      "```text", sub.format_help().rstrip(), "```", ""]
    return "\n".join(parts)


def on_page_markdown(markdown: str, page: Any, **kwargs: Any) -> str:
    if MARKER not in markdown:
        return markdown
    return markdown.replace(MARKER, cli_reference())
