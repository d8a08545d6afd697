"""The export's hidden build directory: creation, stale leftovers, and interruption by signal.

An export builds its output in a hidden sibling ``.<name>.partial-<8 hex>`` and renames it to
``<name>`` when complete (so ``<name>`` either does not exist or is whole). The build directory
holds an owner file (``.rpent-export-owner``: ``{"pid", "host", "started_at"}``), removed just
before the rename. A build directory whose owner process no longer runs on this host (killed
with ``kill -9``, machine crash) or that has no owner file is stale: :func:`remove_stale_partials`
deletes it and returns what it removed (path and size) so the caller can say so.

SIGTERM (and SIGINT, Ctrl-C) during an export raise :class:`ExportInterrupted` (a
``KeyboardInterrupt``) in the main thread while :func:`signals_as_interrupt` is active, so the
export's cleanup (``finally``/``except BaseException``) removes the build directory before the
process exits.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import os
import secrets
import shutil
import signal
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

OWNER_FILE = ".rpent-export-owner"
"""Name of the owner file inside a build directory (removed before the final rename)."""


class ExportInterrupted(KeyboardInterrupt):
    """The export received SIGTERM or SIGINT; its build directory was (or is being) removed.

    Attributes:
        signum: the signal number (``signal.SIGTERM`` = 15, ``signal.SIGINT`` = 2).
    """

    def __init__(self, signum: int):
        super().__init__(f"interrupted by {signal.Signals(signum).name}")
        self.signum = signum


def partial_glob(output_dir: Path) -> str:
    """The glob pattern (relative to ``output_dir.parent``) of ``output_dir``'s build directories."""
    return f".{output_dir.name}.partial-*"


def tree_bytes(path: Path) -> int:
    """Total size in bytes of the regular files under ``path`` (symlinks not followed; 0 if missing)."""
    total = 0
    for dirpath, _dirs, files in os.walk(path, followlinks=False):
        for f in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(dirpath, f)).st_size
    return total


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def owner_of(build_dir: Path) -> dict | None:
    """The parsed owner file of ``build_dir`` (None when missing or unreadable)."""
    try:
        data = json.loads((build_dir / OWNER_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def is_stale(build_dir: Path) -> bool:
    """Whether ``build_dir`` belongs to no running export on this host.

    Stale: no readable owner file, or its ``pid`` runs no more on this host. A build directory
    owned by another host is never called stale (its process cannot be checked from here).
    """
    owner = owner_of(build_dir)
    if owner is None or not isinstance(owner.get("pid"), int):
        return True
    if owner.get("host") != socket.gethostname():
        return False
    return owner["pid"] != os.getpid() and not _pid_alive(owner["pid"])


def find_partials(output_dir: Path) -> list[Path]:
    """Every build directory of ``output_dir`` (stale or not), sorted."""
    parent = output_dir.parent
    if not parent.is_dir():
        return []
    return sorted(p for p in parent.glob(partial_glob(output_dir)) if p.is_dir() and not p.is_symlink())


def remove_stale_partials(output_dir: Path) -> tuple[list[dict], list[dict]]:
    """Delete the stale build directories of ``output_dir``.

    Returns:
        ``(removed, live)``: ``removed`` = ``[{"path": str, "bytes": int}]`` deleted now; ``live`` =
        ``[{"path", "bytes", "pid", "host"}]`` of build directories another running export owns
        (left alone).

    Raises:
        OSError: a stale directory could not be removed (the message names it).
    """
    removed, live = [], []
    for p in find_partials(output_dir):
        size = tree_bytes(p)
        if is_stale(p):
            shutil.rmtree(p)
            removed.append({"path": str(p), "bytes": size})
        else:
            owner = owner_of(p) or {}
            live.append({"path": str(p), "bytes": size, "pid": owner.get("pid"), "host": owner.get("host")})
    return removed, live


def make_build_dir(output_dir: Path) -> Path:
    """Create a new build directory for ``output_dir`` with this process's owner file.

    Raises:
        OSError: it cannot be created.
    """
    output_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = output_dir.parent / f".{output_dir.name}.partial-{secrets.token_hex(4)}"
    tmp.mkdir()
    owner = {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "started_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }
    (tmp / OWNER_FILE).write_text(json.dumps(owner), encoding="utf-8")
    return tmp


def human_bytes(n: int) -> str:
    """``n`` bytes as a short human string (``"19.3 MB"``; decimal units)."""
    for unit in ("B", "kB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} GB"


@contextlib.contextmanager
def signals_as_interrupt() -> Iterator[None]:
    """Turn SIGTERM and SIGINT into :class:`ExportInterrupted` inside the block (main thread only).

    Outside the main thread (where Python cannot install handlers) it does nothing. The previous
    handlers are restored on exit.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def _raise(signum, _frame):
        raise ExportInterrupted(signum)

    previous = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    for s in previous:
        signal.signal(s, _raise)
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
