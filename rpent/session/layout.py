"""Where a session keeps its files, and how sessions are found.

Session directory (the TUI's ``--output-dir``; TaskRuns record under ``tasks/``)::

    session.json   the session's options (written once by the launcher; the session process reads it)
    token          random secret, 0600: clients prove they may attach by sending it
    session.sock   the Unix socket clients attach to, 0600
    state.json     the session process's state: pid, status, clients, TaskRuns (rewritten atomically)
    session.log    the session process's log (stdout and stderr of the detached process)
    services/      shared services' logs      tasks/NNNN_<suite>_t<task>_s<seed>/   TaskRun records

Registry: every running session leaves ``<registry>/<name>.json`` (``{"session_dir": ...}``) so that
``rpent-tui --attach`` and ``--list`` find it from any directory; ``<registry>`` is
``$RPENT_SESSIONS_DIR``, else ``$XDG_STATE_HOME/rpent/sessions``, else ``~/.local/state/rpent/sessions``.
"""

from __future__ import annotations

import json
import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["SessionPaths", "SessionInfo", "SessionNotFound", "registry_dir", "list_sessions", "resolve_session",
           "pid_alive", "write_json_atomic", "SOCKET_PATH_MAX"]

#: Longest Unix socket path Linux accepts (``sun_path`` is 108 bytes including the terminating NUL).
SOCKET_PATH_MAX = 107


class SessionNotFound(LookupError):
    """No session matches (the message lists the running ones and how to start one)."""


def write_json_atomic(path: Path, data: Any, mode: int = 0o644) -> None:
    """Write ``data`` as JSON to ``path`` atomically (temporary file + rename); never a half file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(data, fh, indent=2, ensure_ascii=False, default=str)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def pid_alive(pid: int | None) -> bool:
    """True when process ``pid`` exists and is not a zombie (from ``/proc``)."""
    if not pid:
        return False
    try:
        with open(f"/proc/{int(pid)}/stat", encoding="utf-8") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError, ValueError):
        return False


@dataclass(frozen=True)
class SessionPaths:
    """The files of the session in ``root`` (see module docstring)."""

    root: Path

    @property
    def config(self) -> Path:
        return self.root / "session.json"

    @property
    def token(self) -> Path:
        return self.root / "token"

    @property
    def socket(self) -> Path:
        return self.root / "session.sock"

    @property
    def state(self) -> Path:
        return self.root / "state.json"

    @property
    def log(self) -> Path:
        return self.root / "session.log"

    @property
    def name(self) -> str:
        return self.root.name

    def check_socket_path(self) -> None:
        """Raise ValueError when the socket path is too long for a Unix socket (the fix: a shorter dir)."""
        if len(os.fsencode(str(self.socket))) > SOCKET_PATH_MAX:
            raise ValueError(f"session directory {self.root} is too deep for a Unix socket path "
                             f"({len(str(self.socket))} > {SOCKET_PATH_MAX} bytes); choose a shorter --output-dir")

    def make_token(self) -> str:
        """Create the token file (0600, never overwritten) and return the token."""
        self.root.mkdir(parents=True, exist_ok=True)
        token = secrets.token_hex(32)
        fd = os.open(self.token, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(token + "\n")
        return token

    def read_state(self) -> dict[str, Any] | None:
        """``state.json`` as a dict, or None when missing or unreadable."""
        try:
            data = json.loads(self.state.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    def running(self) -> bool:
        """True when the state file names a live session process that is serving or starting."""
        state = self.read_state()
        return bool(state and state.get("status") in ("starting", "serving") and pid_alive(state.get("pid")))


def registry_dir() -> Path:
    """The directory of the registry of running sessions (see module docstring)."""
    if os.environ.get("RPENT_SESSIONS_DIR"):
        return Path(os.environ["RPENT_SESSIONS_DIR"])
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(base) / "rpent" / "sessions"


@dataclass(frozen=True)
class SessionInfo:
    """One registered session: name, directory, pid, status (``serving``, ``stopped``, ``dead`` ...),
    start time (s since the epoch), TaskRun count and attached clients (from its state file)."""

    name: str
    paths: SessionPaths
    pid: int | None
    status: str
    started_at: float | None
    runs: int
    clients: int

    def line(self) -> str:
        """One row of ``rpent-tui --list``."""
        import time

        started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.started_at)) if self.started_at else "-"
        return (f"{self.name:<28} {self.status:<9} pid {self.pid or '-':<8} started {started}  "
                f"TaskRuns {self.runs}  clients {self.clients}  {self.paths.root}")


def _info(name: str, root: Path) -> SessionInfo:
    paths = SessionPaths(root)
    state = paths.read_state() or {}
    status = str(state.get("status", "unknown"))
    if status in ("starting", "serving", "stopping") and not pid_alive(state.get("pid")):
        status = "dead"
    return SessionInfo(name=name, paths=paths, pid=state.get("pid"), status=status, started_at=state.get("started_at"),
                       runs=len(state.get("runs") or []), clients=int(state.get("clients") or 0))


def register(paths: SessionPaths) -> Path:
    """Add the session to the registry (``<name>.json``, a new name if taken by another directory)."""
    reg = registry_dir()
    reg.mkdir(parents=True, exist_ok=True)
    name, n = paths.name, 1
    while True:
        entry = reg / f"{name}.json"
        try:
            other = json.loads(entry.read_text(encoding="utf-8")).get("session_dir")
        except (OSError, ValueError, AttributeError):
            other = None
        if other is None or Path(other) == paths.root.resolve() or not SessionPaths(Path(other)).running():
            write_json_atomic(entry, {"session_dir": str(paths.root.resolve())})
            return entry
        n += 1
        name = f"{paths.name}-{n}"


def unregister(paths: SessionPaths) -> None:
    """Remove the registry entries that point at this session directory."""
    reg = registry_dir()
    for entry in reg.glob("*.json") if reg.is_dir() else ():
        try:
            if Path(json.loads(entry.read_text(encoding="utf-8")).get("session_dir", "")) == paths.root.resolve():
                entry.unlink(missing_ok=True)
        except (OSError, ValueError, AttributeError):
            continue


def list_sessions(include_stopped: bool = False) -> list[SessionInfo]:
    """Registered sessions, newest first (stale entries of stopped or dead sessions only with
    ``include_stopped``)."""
    reg = registry_dir()
    out = []
    for entry in sorted(reg.glob("*.json")) if reg.is_dir() else ():
        try:
            root = Path(json.loads(entry.read_text(encoding="utf-8"))["session_dir"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        info = _info(entry.stem, root)
        if include_stopped or info.status in ("starting", "serving"):
            out.append(info)
    return sorted(out, key=lambda i: i.started_at or 0.0, reverse=True)


def resolve_session(name_or_dir: str | None) -> SessionPaths:
    """The session named ``name_or_dir`` (a registry name or a session directory); with None, the
    only running session.

    Raises:
        SessionNotFound: no such running session, or several and none named (the message lists them).
    """
    running = list_sessions()
    listing = "\n".join("  " + s.line() for s in running) or "  (none)"
    if name_or_dir is None:
        if len(running) == 1:
            return running[0].paths
        if not running:
            raise SessionNotFound("no running session to attach to; start one with rpent-tui [flags] "
                                  "(or rpent --dashboard)")
        raise SessionNotFound(f"{len(running)} sessions are running; name one: rpent-tui --attach NAME\n{listing}")
    candidate = Path(name_or_dir)
    if (candidate / "session.json").is_file() or (candidate / "state.json").is_file():
        paths = SessionPaths(candidate.resolve())
    else:
        match = [s for s in running if s.name == name_or_dir]
        if not match:
            raise SessionNotFound(f"no running session named {name_or_dir!r}; running sessions:\n{listing}")
        paths = match[0].paths
    if not paths.running():
        raise SessionNotFound(f"the session in {paths.root} is not running (see {paths.log}); "
                              "start a new one with rpent-tui [flags]")
    return paths
