"""Filesystem path checks shared by every layer (imports nothing of rpent)."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["file_blocker"]


def file_blocker(path: str | os.PathLike) -> Path | None:
    """The nearest of ``path`` and its ancestors that exists, when it is not a directory: the file
    that keeps ``path`` from being (or becoming) a directory (``FILE`` itself or ``FILE/sub``);
    None when that nearest existing one is a directory or nothing exists. Checked as given: a
    relative path's ancestors end at ``.``."""
    p = Path(path)
    for q in (p, *p.parents):
        if q.exists():
            return None if q.is_dir() else q
    return None
