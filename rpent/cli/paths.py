"""Path checks shared by the command-line entry points (bad input refused before any work)."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

__all__ = ["check_output_dir"]


def check_output_dir(path: str | os.PathLike, flag: str) -> None:
    """Refuse an output directory that cannot be created, before any work starts: ``path`` or one
    of its ancestors is a file (e.g. ``FILE/sub``), a symbolic link to nothing or a link loop, or
    the nearest existing ancestor takes no new directory (``/proc/x``, a read-only mount: probed by
    making and removing one empty directory there).

    Raises:
        ValueError: naming the blocking path and the fix.
    """
    p = Path(path).absolute()
    for candidate in (p, *p.parents):
        if candidate.is_symlink() and not candidate.exists():
            raise ValueError(f"{flag} {path}: {candidate} is a symbolic link to nothing (or a link loop); "
                             "choose a new directory")
        if not candidate.exists():
            continue
        if not candidate.is_dir():
            if candidate == p:
                raise ValueError(f"{flag} {path} is a file, not a directory; choose a new directory")
            raise ValueError(f"{flag} {path} cannot be a directory ({candidate} is a file); "
                             "choose a new directory")
        if candidate != p:
            probe = candidate / f".rpent-probe-{uuid.uuid4().hex[:8]}"
            try:
                probe.mkdir()
                probe.rmdir()
            except OSError as exc:
                raise ValueError(f"{flag} {path} cannot be created in {candidate} ({exc.strerror or exc}); "
                                 "choose a directory you can write to") from None
        return
