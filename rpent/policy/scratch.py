"""The scratch directory as the parent sees it when no tmpfs bounds it: its size, and emptying it."""

from __future__ import annotations

import os
import shutil
from pathlib import Path


def empty_dir(root: Path) -> None:
    """Remove everything beneath ``root`` (not ``root`` itself); best effort."""
    try:
        entries = list(os.scandir(root))
    except OSError:
        return
    for entry in entries:
        try:
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path, ignore_errors=True)
            else:
                os.unlink(entry.path)
        except OSError:
            pass


def disk_usage(root: Path, stop_above: int) -> int:
    """Bytes allocated beneath ``root`` (``st_blocks`` x 512, not following links), counting
    stops once over ``stop_above``; 0 when ``root`` is unreadable."""
    total = 0
    stack = [str(root)]
    while stack and total <= stop_above:
        try:
            entries = list(os.scandir(stack.pop()))
        except OSError:
            continue
        for entry in entries:
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            total += st.st_blocks * 512
            if entry.is_dir(follow_symlinks=False):
                stack.append(entry.path)
    return total
