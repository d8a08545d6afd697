"""Process-group helpers (POSIX) used to leave no orphans behind a server or a supervisor."""

from __future__ import annotations

import os
import signal


def killpg_quiet(pgid: int, sig: int) -> None:
    """``os.killpg(pgid, sig)``, ignoring a group that no longer exists or is not ours."""
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def group_alive(pgid: int, exclude_pid: int | None = None) -> bool:
    """True while process group ``pgid`` has a live (non-zombie) member other than ``exclude_pid``.

    Zombies are skipped (Linux ``/proc`` scan): an orphaned grandchild's zombie may never be
    reaped in a container whose PID 1 does not reap, and it cannot run any more. Without
    ``/proc`` the answer is whether ``killpg(pgid, 0)`` succeeds.
    """
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        entries = os.listdir("/proc")
    except OSError:
        return True
    for entry in entries:
        if not entry.isdigit() or (exclude_pid is not None and int(entry) == exclude_pid):
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 2 and int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):
            return True
    return False


__all__ = ["killpg_quiet", "group_alive", "signal"]
