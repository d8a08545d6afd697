"""Where a task memory lives and how it is laid out (RPent reference §6.2).

A memory *root* (``--memory-dir``, default :func:`default_memory_dir`) holds one corpus per
robot, ``<root>/<robot>/``; a run reads only its own robot's corpus. A corpus::

    MEMORY.md                      index: one line per leaf, "- [title](path) — applies_when"
    manifest.json                  sha256 of every corpus file (checked before use)
    global/<id>.md                 cross-task leaves (scope: global)
    task-family/<id>.md            per-task write-ups (scope: suite)
    task-specific/<cell>.json      audit + recipe pairs of solved cells
    task-specific/<cell>_recipe.jsonl
    flash/<cell>_plan.json, flash/<cell>_anchors.json
    _internal/inbox/<cell>/        drafts of exploration runs (and wip/notes.md)
    _internal/merged/<cell>/       drafts after a merge
    _internal/conflicts/           drafts whose prose disagreed with an existing leaf
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["KIND_PREFIXES", "MEMORY_DIR_ENV", "default_memory_dir", "corpus_dir", "TIERS", "INDEX", "MANIFEST", "INTERNAL"]

MEMORY_DIR_ENV = "RPENT_MEMORY_DIR"
#: Leaf tiers in reading order (reference §11: the newer tier names).
TIERS = ("global", "task-family", "task-specific")
INDEX = "MEMORY.md"
MANIFEST = "manifest.json"
INTERNAL = "_internal"
#: Draft file-name prefixes of global-leaf kinds (stripped to get the bare id).
KIND_PREFIXES = ("primitive_", "perception_", "strategy_", "failure_", "infra_")


def default_memory_dir() -> Path:
    """``$RPENT_MEMORY_DIR``, else ``./memory`` (next to ``./logs``, as upstream's ``memory/``)."""
    return Path(os.environ.get(MEMORY_DIR_ENV) or "memory")


def corpus_dir(root: str | Path | None, robot: str = "libero") -> Path:
    """``<root>/<robot>`` (root None: :func:`default_memory_dir`)."""
    return Path(root if root is not None else default_memory_dir()) / robot
