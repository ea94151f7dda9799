"""A griffe extension for the API pages: the reStructuredText roles of mbfg's docstrings as inline code.

Docstrings name other objects as ``:func:`mbfg.spook.simulate``` or ``:class:`~mbfg.rigid.RigidModel```
(Sphinx roles, which read well in ``help()``). Markdown has no roles, so mkdocstrings would print them as
written; this extension rewrites each one as inline code (the last component where the name starts with
``~``), on every object griffe loads. Nothing is linked: a link to an object no page renders would fail
the strict build.
"""

from __future__ import annotations

import re
from typing import Any

from griffe import Extension, Object

_ROLE = re.compile(r":(?:py:)?(?:func|class|meth|mod|data|attr|exc|obj|const|ref):`(~?)([^`]+)`")


def _code(match: re.Match[str]) -> str:
    short, name = match.groups()
    return f"`{name.rsplit('.', 1)[-1] if short else name}`"


def plain_roles(text: str) -> str:
    """``text`` with every role written as inline code, and reStructuredText's ``::`` before an indented
    literal block (which Markdown shows as code by its indentation alone) as one colon."""
    return re.sub(r"(\S)::\n\n", r"\1:\n\n", re.sub(r"^::\n\n", "\n", _ROLE.sub(_code, text), flags=re.M))


class PlainRoles(Extension):
    def on_object(self, *, obj: Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = plain_roles(obj.docstring.value)
