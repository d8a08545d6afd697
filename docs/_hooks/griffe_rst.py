"""Griffe extension: rpent's docstrings use reStructuredText roles and literal-block markers
(``:func:`name```, ``Example::``); the reference pages render them as Markdown code spans and a
plain colon."""

from __future__ import annotations

import re

import griffe

ROLE = re.compile(r":(?:py:)?(?:func|class|meth|mod|attr|data|exc|obj|const):`(~?)([^`]+)`")
LITERAL = re.compile(r"(\S)::$", re.MULTILINE)


def _role(match: re.Match) -> str:
    tilde, target = match.groups()
    return f"`{target.rsplit('.', 1)[-1] if tilde else target}`"


class RstRoles(griffe.Extension):
    """Rewrite every docstring as it is loaded."""

    def on_instance(self, *, obj, **kwargs) -> None:  # noqa: D102
        if obj.docstring is not None:
            obj.docstring.value = LITERAL.sub(r"\1:", ROLE.sub(_role, obj.docstring.value))
