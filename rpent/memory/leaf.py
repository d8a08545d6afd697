"""Memory leaves: Markdown with YAML frontmatter (RPent reference §6.2 "Leaf format").

A leaf file ``<tier>/<id>.md``::

    ---
    scope: global                 # global | suite
    kind: perception              # global leaves: primitive | perception | strategy | failure | infra
    title: Oracle masks of tall objects
    applies_when: segment returns a tall object
    confidence: single-shot       # single-shot | probable | verified
    evidence:
      cells: [object_t0_s0]       # non-empty: the cells (recipe tags) that support it
      attempts: 1
    ---
    Prose ...

Suite leaves (``scope: suite``) carry ``suite``, ``regime``, ``task_id`` and
``task_language`` instead of ``kind`` (``title``/``applies_when`` optional: the index then
uses the task language). The id is the file's bare slug: lower-case letters, digits, ``-`` and
``_``, without the draft prefixes ``new_``/``suite_``/``<kind>_`` and without ``_draft``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

__all__ = ["Leaf", "LeafError", "parse_leaf", "render_leaf", "SCOPES", "KINDS", "CONFIDENCES", "confidence_for"]

SCOPES = ("global", "suite")
KINDS = ("primitive", "perception", "strategy", "failure", "infra")
CONFIDENCES = ("single-shot", "probable", "verified")
_SLUG = re.compile(r"^[a-z0-9][a-z0-9_-]*$")
_FRONT = re.compile(r"\A---\s*\n(.*?)\n---\s*\n?(.*)\Z", re.S)


class LeafError(ValueError):
    """A leaf breaks the format; the message names the file and the rule."""


def read_leaf_file(path: Path) -> str:
    """The text of the leaf file ``path`` (UTF-8).

    Raises:
        LeafError: the file is not UTF-8 text, is a directory or cannot be read (one line naming the
            file and the fix).
    """
    try:
        return Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise LeafError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start}); "
                        "save the leaf as UTF-8 Markdown or remove it") from None
    except IsADirectoryError:
        raise LeafError(f"{path}: is a directory, not a leaf file; rename or remove it") from None
    except OSError as exc:
        raise LeafError(f"{path}: cannot be read ({exc.strerror or exc}); fix its permissions or remove it") from None


@dataclass
class Leaf:
    """One parsed leaf.

    Attributes:
        id: the bare slug (file stem).
        path: where it was read from (None for a leaf built in memory).
        meta: the frontmatter (dict; ``evidence`` is ``{"cells": [str], "attempts": int}``).
        body: the Markdown prose after the frontmatter (stripped).
    """

    id: str
    meta: dict[str, Any]
    body: str
    path: Path | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def scope(self) -> str:
        return str(self.meta.get("scope"))

    @property
    def cells(self) -> list[str]:
        return [str(c) for c in (self.meta.get("evidence") or {}).get("cells") or []]

    @property
    def attempts(self) -> int:
        return int((self.meta.get("evidence") or {}).get("attempts") or 0)

    def title(self) -> str:
        """Index title: ``title``, else the task language, else the id."""
        return str(self.meta.get("title") or self.meta.get("task_language") or self.id)

    def applies_when(self) -> str:
        """Index condition: ``applies_when``, else ``suite <suite> task <task_id>``."""
        if self.meta.get("applies_when"):
            return str(self.meta["applies_when"])
        return f"suite {self.meta.get('suite')} task {self.meta.get('task_id')}"


def _check(leaf_id: str, meta: dict, where: str) -> None:
    if not _SLUG.match(leaf_id):
        raise LeafError(f"{where}: id {leaf_id!r} is not a slug (lower-case letters, digits, '-', '_')")
    kind = meta.get("kind")
    bad_prefix = [p for p in ("new_", "suite_") + tuple(f"{k}_" for k in KINDS) if leaf_id.startswith(p)]
    if bad_prefix or leaf_id.endswith("_draft"):
        raise LeafError(f"{where}: id {leaf_id!r} must be the bare slug (no {'/'.join(bad_prefix) or '_draft'} "
                        "prefix/suffix); rename the file")
    scope = meta.get("scope")
    if scope not in SCOPES:
        raise LeafError(f"{where}: scope must be one of {', '.join(SCOPES)}, got {scope!r}")
    if scope == "global":
        if kind not in KINDS:
            raise LeafError(f"{where}: a global leaf needs kind in {', '.join(KINDS)}, got {kind!r}")
        for key in ("title", "applies_when"):
            if not str(meta.get(key) or "").strip():
                raise LeafError(f"{where}: a global leaf needs a non-empty {key}")
    else:
        for key in ("suite", "regime", "task_id", "task_language"):
            if meta.get(key) in (None, ""):
                raise LeafError(f"{where}: a suite leaf needs {key}")
    if meta.get("confidence") not in CONFIDENCES:
        raise LeafError(f"{where}: confidence must be one of {', '.join(CONFIDENCES)}, got {meta.get('confidence')!r}")
    ev = meta.get("evidence")
    if not isinstance(ev, dict) or not isinstance(ev.get("cells"), list) or not ev["cells"]:
        raise LeafError(f"{where}: evidence.cells must be a non-empty list of cells")
    if not all(isinstance(c, str) and c for c in ev["cells"]):
        raise LeafError(f"{where}: evidence.cells must hold cell tags (strings)")
    attempts = ev.get("attempts", 0)
    if not isinstance(attempts, int) or attempts < 0:
        raise LeafError(f"{where}: evidence.attempts must be an integer >= 0")


def parse_leaf(text: str, leaf_id: str, path: Path | None = None) -> Leaf:
    """Parse and validate a leaf.

    Args:
        text: the file content (UTF-8 text).
        leaf_id: its id (the file stem).
        path: for messages.
    Raises:
        LeafError: no frontmatter, bad YAML, or a rule of the module docstring is broken.
    """
    where = str(path or leaf_id)
    m = _FRONT.match(text)
    if not m:
        raise LeafError(f"{where}: no YAML frontmatter (the file must start with '---' and close it with '---')")
    try:
        meta = yaml.safe_load(m.group(1))
    except yaml.YAMLError as exc:
        raise LeafError(f"{where}: frontmatter is not valid YAML ({str(exc).splitlines()[0]})") from None
    if not isinstance(meta, dict):
        raise LeafError(f"{where}: frontmatter must be a mapping")
    _check(leaf_id, meta, where)
    return Leaf(id=leaf_id, meta=meta, body=m.group(2).strip(), path=path)


def render_leaf(leaf: Leaf) -> str:
    """The file text of a leaf (frontmatter in a stable key order, then the prose)."""
    front = yaml.safe_dump(leaf.meta, sort_keys=False, allow_unicode=True, default_flow_style=None).strip()
    return f"---\n{front}\n---\n{leaf.body.strip()}\n"


def confidence_for(cells: list[str]) -> str:
    """The evidence rule of reference §6.2: ``verified`` at >= 3 cells over >= 2 tasks,
    ``probable`` at >= 2 cells, else ``single-shot``. A cell's task is its tag without
    the ``_s<seed>`` suffix (``object_t0_s3`` -> ``object_t0``)."""
    uniq = sorted(set(cells))
    tasks = {re.sub(r"_s\d+$", "", c) for c in uniq}
    if len(uniq) >= 3 and len(tasks) >= 2:
        return "verified"
    if len(uniq) >= 2:
        return "probable"
    return "single-shot"
