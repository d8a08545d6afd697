"""Path checks shared by the command-line entry points (bad input refused before any work)."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["check_output_dir"]


def check_output_dir(path: str | os.PathLike, flag: str) -> None:
    """Refuse an output directory that cannot be created: ``path`` or one of its ancestors exists
    and is not a directory (e.g. ``FILE/sub``).

    Raises:
        ValueError: naming the blocking path and the fix.
    """
    p = Path(path).absolute()
    for candidate in (p, *p.parents):
        if candidate.exists():
            if not candidate.is_dir():
                if candidate == p:
                    raise ValueError(f"{flag} {path} is a file, not a directory; choose a new directory")
                raise ValueError(f"{flag} {path} cannot be a directory ({candidate} is a file); "
                                 "choose a new directory")
            return
