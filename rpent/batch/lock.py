"""One runner per results root: an exclusive ``flock`` on ``<root>/.batch.lock``.

The kernel drops the lock when the holder dies (even by SIGKILL), so a crashed runner never
blocks a resume; a second live runner is refused with the holder's pid, host and start time.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import time
from pathlib import Path

__all__ = ["RootLock", "RootLockedError", "lock_holder"]


class RootLockedError(RuntimeError):
    """Another runner holds the results root (the message names it and the fix)."""


class RootLock:
    """Exclusive lock of a results root (a context manager).

    Args:
        path: the lock file (``<root>/.batch.lock``; its directory must exist).
    Raises:
        RootLockedError: from ``acquire``/``__enter__`` when another process holds it.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._fd: int | None = None

    def acquire(self) -> "RootLock":
        """Take the lock without waiting, and write our pid/host/start time into the file."""
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            try:
                holder = json.loads(os.pread(fd, 4096, 0).decode("utf-8") or "{}")
            except ValueError:
                holder = {}
            os.close(fd)
            who = (f"pid {holder.get('pid')} on {holder.get('host')} since {holder.get('started')}"
                   if holder else "another process")
            raise RootLockedError(f"results root {self.path.parent} is in use by another rpent-batch ({who}); "
                                  "wait for it to finish or choose another --results-root") from None
        info = json.dumps({"pid": os.getpid(), "host": socket.gethostname(),
                           "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}).encode()
        os.ftruncate(fd, 0)
        os.pwrite(fd, info, 0)
        self._fd = fd
        return self

    def release(self) -> None:
        """Drop the lock (idempotent)."""
        if self._fd is not None:
            try:
                os.ftruncate(self._fd, 0)
                fcntl.flock(self._fd, fcntl.LOCK_UN)
            finally:
                os.close(self._fd)
                self._fd = None

    def __enter__(self) -> "RootLock":
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


def lock_holder(path: str | Path) -> dict | None:
    """The ``{"pid", "host", "started"}`` of the runner that holds the lock, read without taking
    it (so a runner starting now is never refused because of a reader); None when the file is
    empty or names a process of this host that no longer exists."""
    try:
        holder = json.loads(Path(path).read_text(encoding="utf-8") or "null")
    except (OSError, ValueError):
        return None
    if not isinstance(holder, dict):
        return None
    if holder.get("host") == socket.gethostname():
        try:
            os.kill(int(holder.get("pid", 0)), 0)
        except (ProcessLookupError, ValueError):
            return None
        except PermissionError:
            pass
    return holder
