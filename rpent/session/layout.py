"""Where a session keeps its files, and how sessions are found.

Session directory (the TUI's ``--output-dir``; TaskRuns record under ``tasks/``)::

    session.json   the session's options (written once by the launcher; the session process reads it)
    token          random secret, 0600: clients prove they may attach by sending it
    session.sock   the Unix socket clients attach to, 0600
    state.json     the session process's state: pid, status, clients, TaskRuns (rewritten atomically)
    session.log    the session process's log (stdout and stderr of the detached process)
    services/      shared services' logs      tasks/NNNN_<suite>_t<task>_s<seed>/   TaskRun records

Registry: every running session leaves ``<registry>/<owner>/<name>.json`` (``{"session_dir", "owner",
"uid", "home", "host", "started_at"}``) so that ``rpent-tui --attach`` and ``--list`` find it from any
directory. ``<registry>`` is ``$RPENT_SESSIONS_DIR``, else ``$XDG_STATE_HOME/rpent/sessions``, else
``~/.local/state/rpent/sessions`` (so it is per ``$HOME``); ``<owner>`` is the person who started
the session (:func:`session_owner`: ``$RPENT_USER``, else ``$SUDO_USER``, else the login name), so
that several people sharing one account (root on a lab machine) each see their own sessions. A bare
``--attach`` and a session name resolve among the caller's own sessions only; another owner's
session is reached by its exact name ``OWNER/NAME`` (or its directory), never by a name that only
happens to match.
"""

from __future__ import annotations

import json
import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["SessionPaths", "SessionInfo", "SessionNotFound", "registry_dir", "list_sessions", "resolve_session",
           "pid_alive", "write_json_atomic", "SOCKET_PATH_MAX", "session_owner"]

#: Longest Unix socket path Linux accepts (``sun_path`` is 108 bytes including the terminating NUL).
SOCKET_PATH_MAX = 107
#: What a session writes into its directory (:class:`SessionPaths`, ``tasks/``, ``services/``).
SESSION_ENTRIES = ("session.json", "token", "session.sock", "state.json", "session.log", "tasks", "services")


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
    """The directory of the registry of running sessions, every owner's (see module docstring)."""
    if os.environ.get("RPENT_SESSIONS_DIR"):
        return Path(os.environ["RPENT_SESSIONS_DIR"])
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(base) / "rpent" / "sessions"


def session_owner() -> str:
    """Who starts or asks for sessions: ``$RPENT_USER`` (set it per person on a shared account), else
    ``$SUDO_USER`` (the person behind sudo), else ``$LOGNAME``/``$USER``, else the account's name.
    Only letters, digits, ``.``, ``_`` and ``-`` are kept (it names a registry folder)."""
    import getpass
    import re

    name = os.environ.get("RPENT_USER") or os.environ.get("SUDO_USER") or ""
    if not name:
        try:
            name = getpass.getuser()
        except (KeyError, OSError):
            name = f"uid{os.getuid()}"
    return re.sub(r"[^A-Za-z0-9._-]", "_", name) or f"uid{os.getuid()}"


@dataclass(frozen=True)
class SessionInfo:
    """One registered session: name, directory, pid, status (``serving``, ``stopped``, ``dead`` ...),
    start time (s since the epoch), TaskRun count, attached clients (from its state file) and the owner
    who started it (``session_owner`` of the starting process)."""

    name: str
    paths: SessionPaths
    pid: int | None
    status: str
    started_at: float | None
    runs: int
    clients: int
    owner: str = "?"

    @property
    def full_name(self) -> str:
        """``OWNER/NAME``: the exact name that reaches this session from any owner."""
        return f"{self.owner}/{self.name}"

    def line(self) -> str:
        """One row of ``rpent-tui --list``: name, owner, status, pid, start time, TaskRuns, clients, directory."""
        import time

        started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.started_at)) if self.started_at else "-"
        return (f"{self.name:<24} owner {self.owner:<10} {self.status:<9} pid {self.pid or '-':<8} started {started}  "
                f"TaskRuns {self.runs}  clients {self.clients}  {self.paths.root}")


def _info(name: str, root: Path, owner: str = "?", started_at: float | None = None) -> SessionInfo:
    paths = SessionPaths(root)
    state = paths.read_state() or {}
    status = str(state.get("status", "unknown"))
    if status in ("starting", "serving", "stopping") and not pid_alive(state.get("pid")):
        status = "dead"
    return SessionInfo(name=name, paths=paths, pid=state.get("pid"), status=status,
                       started_at=state.get("started_at") or started_at,
                       runs=len(state.get("runs") or []), clients=int(state.get("clients") or 0), owner=owner)


def _entry(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("session_dir"), str) else None


def register(paths: SessionPaths) -> Path:
    """Add the session to its owner's registry (``<registry>/<owner>/<name>.json``; a new name
    ``<name>-2`` ... if a running session of the same owner has the name)."""
    import socket
    import time

    owner = session_owner()
    reg = registry_dir() / owner
    reg.mkdir(parents=True, exist_ok=True)
    name, n = paths.name, 1
    while True:
        entry = reg / f"{name}.json"
        other = (_entry(entry) or {}).get("session_dir")
        if other is None or Path(other) == paths.root.resolve() or not SessionPaths(Path(other)).running():
            write_json_atomic(entry, {"session_dir": str(paths.root.resolve()), "owner": owner, "uid": os.getuid(),
                                      "home": os.path.expanduser("~"), "host": socket.gethostname(),
                                      "started_at": time.time()})
            return entry
        n += 1
        name = f"{paths.name}-{n}"


def _entries() -> list[Path]:
    """Every registry entry: ``<registry>/<owner>/*.json``."""
    reg = registry_dir()
    return sorted(reg.glob("*/*.json")) if reg.is_dir() else []


def unregister(paths: SessionPaths) -> None:
    """Remove the registry entries that point at this session directory."""
    for entry in _entries():
        data = _entry(entry)
        if data is not None and Path(data["session_dir"]) == paths.root.resolve():
            entry.unlink(missing_ok=True)


def list_sessions(include_stopped: bool = False, everyone: bool = False) -> list[SessionInfo]:
    """Registered sessions of the caller (``session_owner``; every owner's with ``everyone``), newest
    first; stale entries of stopped or dead sessions only with ``include_stopped``."""
    me = session_owner()
    out = []
    for entry in _entries():
        data = _entry(entry)
        owner = entry.parent.name
        if data is None or (not everyone and owner != me):
            continue
        info = _info(entry.stem, Path(data["session_dir"]), owner, data.get("started_at"))
        if include_stopped or info.status in ("starting", "serving"):
            out.append(info)
    return sorted(out, key=lambda i: i.started_at or 0.0, reverse=True)


def resolve_session(name_or_dir: str | None, *, purpose: str = "attach") -> SessionPaths:
    """The session named ``name_or_dir``: a session directory, ``OWNER/NAME`` (any owner's), or a
    ``NAME`` among the caller's own sessions; with None, the caller's only running session.
    ``purpose`` (``attach``, ``stop``) words the messages.

    Raises:
        SessionNotFound: no such running session; several of the caller's and none named; or a name
            that is only another owner's session (the message gives its exact ``OWNER/NAME``).
    """
    mine = list_sessions()
    listing = "\n".join("  " + s.line() for s in mine) or "  (none of yours)"
    if name_or_dir is None:
        if len(mine) == 1:
            return mine[0].paths
        if not mine:
            raise SessionNotFound(f"you ({session_owner()}) have no running session to {purpose}; start one with "
                                  "rpent-tui [flags] (or rpent --dashboard); rpent-tui --list --all shows everyone's")
        raise SessionNotFound(f"{len(mine)} of your sessions are running; name one: rpent-tui --{purpose} NAME\n{listing}")
    candidate = Path(name_or_dir)
    if (candidate / "session.json").is_file() or (candidate / "state.json").is_file():
        paths = SessionPaths(candidate.resolve())
    elif "/" in name_or_dir and name_or_dir.count("/") == 1 and not name_or_dir.startswith(("/", ".")):
        everyone = list_sessions(everyone=True)
        match = [s for s in everyone if s.full_name == name_or_dir]
        if not match:
            raise SessionNotFound(f"no running session {name_or_dir!r}; rpent-tui --list --all shows everyone's")
        paths = match[0].paths
    else:
        match = [s for s in mine if s.name == name_or_dir]
        if not match:
            others = [s for s in list_sessions(everyone=True) if s.name == name_or_dir]
            if others:
                who = ", ".join(f"{s.full_name} (started {s.line().split(' started ')[1][:19]})" for s in others)
                raise SessionNotFound(f"you ({session_owner()}) have no session named {name_or_dir!r}; it is "
                                      f"another person's: {who}. To {purpose} it anyway, give its exact name: "
                                      f"rpent-tui --{purpose} {others[0].full_name}")
            raise SessionNotFound(f"no running session of yours named {name_or_dir!r}; your running sessions:\n{listing}")
        paths = match[0].paths
    if not paths.running():
        raise SessionNotFound(f"the session in {paths.root} is not running (see {paths.log}); "
                              "start a new one with rpent-tui [flags]")
    return paths
