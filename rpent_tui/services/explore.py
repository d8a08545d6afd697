"""Read-only view of exploration directories (``rpent --explore``; no Textual).

An exploration directory (``rpent.explore.loop``, RPent reference §6.3) holds:

* ``explore.json`` — ``{"cell", "suite", "task", "seed", "planner", "status": "running" |
  "finished", "sessions_max", "attempts_per_session", "current": {"session", "attempt"} | null,
  "sessions": [{"session", "output_dir", "attempts", "state", "environment_success"?, "error"?,
  "stop_reason"?, "finish"?}], "attempts_archived": [rel paths], "solved", "merged", "error",
  "memory_inbox"}``, rewritten atomically while the exploration runs (older explorations wrote
  it only at the end, without ``status``);
* ``sessions/session_NNN/`` — each session's run record (``states.json``, transcript, ...);
* ``attempts/attempt_<N>_failed.json`` — ``{"attempt", "session", "attempt_in_session",
  "reason", "changed_lever_vs_attempt<N>", "final_state", "success", "calls"}``.

The readers tolerate a running exploration (files appearing, a session without ``states.json``
yet) and never write. A malformed JSON file raises :class:`RecordError` naming it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from rpent.recording.run_readers import RecordError, read_json

__all__ = ["AttemptRow", "Exploration", "ExploreSummary", "RecordError", "SessionRow", "is_explore_dir",
           "list_explorations", "read_exploration"]

_SESSION_RE = re.compile(r"^session_(\d+)$")
_ATTEMPT_RE = re.compile(r"^attempt_(\d+)_failed\.json$")
#: How deep below the logs directory explorations are looked for (a dashboard session nests
#: runs two levels down: ``<session>/tasks/NNNN_.../``).
MAX_DEPTH = 3


def is_explore_dir(path: Path) -> bool:
    """``explore.json`` or a ``sessions/session_001`` directory is present."""
    return (path / "explore.json").is_file() or (path / "sessions" / "session_001").is_dir()


@dataclass
class ExploreSummary:
    """One exploration found under the logs directory (list row)."""

    path: Path
    cell: str
    status: str  # running | finished | unknown
    sessions: int
    attempts_archived: int
    solved: bool | None
    date: datetime | None


@dataclass
class SessionRow:
    """One session: its run record's progress and outcome.

    Attributes:
        env_steps: env steps of the session's last recorded step (None before its first step).
        tool_steps: recorded steps (motion tool calls) so far.
        outcome: ``running`` | ``solved`` | ``not solved`` | ``error`` | ``timeout`` | ``interrupted``.
    """

    session: int
    output_dir: Path
    attempts: int
    state: str
    env_steps: int | None
    tool_steps: int
    outcome: str
    error: str | None = None
    finish: dict | None = None


@dataclass
class AttemptRow:
    """One archived (failed) attempt."""

    attempt: int
    session: int | None
    attempt_in_session: int | None
    reason: str
    changed_lever: str
    tool_calls: int
    path: Path


@dataclass
class Exploration:
    """Everything the Explore screen shows about one exploration directory."""

    path: Path
    cell: str
    status: str
    sessions_max: int | None
    attempts_per_session: int | None
    current: dict | None
    solved: bool | None
    merged: dict | None
    error: str | None
    memory_inbox: str | None
    sessions: list[SessionRow] = field(default_factory=list)
    attempts: list[AttemptRow] = field(default_factory=list)
    inbox_files: list[str] = field(default_factory=list)


def _mtime(path: Path) -> datetime | None:
    try:
        return datetime.fromtimestamp(path.stat().st_mtime)
    except OSError:
        return None


def list_explorations(root: str | Path, max_depth: int = MAX_DEPTH) -> list[ExploreSummary]:
    """Explorations under ``root`` (itself included), newest first.

    Raises nothing for a missing root (empty list); an unreadable ``explore.json`` lists the
    exploration with status ``unknown``.
    """
    root = Path(root)
    found: list[Path] = []

    def walk(d: Path, depth: int) -> None:
        if is_explore_dir(d):
            found.append(d)
            return
        if depth >= max_depth:
            return
        try:
            children = sorted(p for p in d.iterdir() if p.is_dir() and not p.name.startswith("."))
        except OSError:
            return
        for c in children:
            walk(c, depth + 1)

    if root.is_dir():
        walk(root, 0)
    out = []
    for d in found:
        try:
            doc = read_json(d / "explore.json") or {}
        except RecordError:
            doc = {}
        sessions = sorted(p for p in (d / "sessions").glob("session_*") if p.is_dir())
        attempts = list((d / "attempts").glob("attempt_*_failed.json"))
        status = doc.get("status") or ("finished" if doc else "unknown")
        out.append(ExploreSummary(path=d, cell=str(doc.get("cell") or d.name), status=status,
                                  sessions=max(len(sessions), len(doc.get("sessions") or [])),
                                  attempts_archived=len(attempts), solved=doc.get("solved") if doc else None,
                                  date=_mtime(d / "explore.json") or _mtime(d)))
    out.sort(key=lambda e: e.date or datetime.min, reverse=True)
    return out


def _session_progress(out_dir: Path) -> tuple[int | None, int, bool | None]:
    """(env steps, recorded tool steps, success) from a session's ``states.json``."""
    states = read_json(out_dir / "states.json")
    steps = (states or {}).get("steps") or []
    if not steps:
        return None, 0, None
    last = steps[-1]
    return last.get("env_steps"), len(steps) - 1, bool(last.get("success"))


def read_exploration(path: str | Path) -> Exploration:
    """Read one exploration directory (see the module docstring).

    Raises:
        RecordError: ``explore.json``, a session's ``states.json`` or an attempt file is not JSON.
        FileNotFoundError: ``path`` is not an exploration directory.
    """
    d = Path(path)
    if not is_explore_dir(d):
        raise FileNotFoundError(f"{d} is not an exploration directory (no explore.json, no sessions/session_001/)")
    doc = read_json(d / "explore.json") or {}
    by_number = {int(s.get("session", 0)): s for s in doc.get("sessions") or [] if isinstance(s, dict)}
    on_disk = {int(m.group(1)): p for p in (d / "sessions").glob("session_*")
               if p.is_dir() and (m := _SESSION_RE.match(p.name))}
    status = doc.get("status") or ("finished" if doc else "running")
    current = doc.get("current") if isinstance(doc.get("current"), dict) else None
    sessions = []
    for k in sorted(set(by_number) | set(on_disk)):
        rec = by_number.get(k, {})
        out_dir = on_disk.get(k) or Path(str(rec.get("output_dir") or d / "sessions" / f"session_{k:03d}"))
        env_steps, tool_steps, success = _session_progress(out_dir)
        state = rec.get("state") or ("finished" if "environment_success" in rec else
                                     "running" if status != "finished" else "finished")
        if state == "running":
            outcome = "running"
        elif rec.get("environment_success") or (not rec and success):
            outcome = "solved"
        elif rec.get("stop_reason") in ("timeout", "interrupted"):
            outcome = rec["stop_reason"]
        elif rec.get("error"):
            outcome = "error"
        else:
            outcome = "not solved"
        attempts = rec.get("attempts")
        if current and current.get("session") == k:
            attempts = current.get("attempt", attempts)
        sessions.append(SessionRow(session=k, output_dir=out_dir, attempts=int(attempts or 1), state=state,
                                   env_steps=env_steps, tool_steps=tool_steps, outcome=outcome,
                                   error=rec.get("error"), finish=rec.get("finish")))
    attempts_rows = []
    files = sorted(((int(m.group(1)), p) for p in (d / "attempts").glob("attempt_*_failed.json")
                    if (m := _ATTEMPT_RE.match(p.name))))
    for n, p in files:
        a: dict[str, Any] = read_json(p) or {}
        lever = next((str(v) for k, v in a.items() if k.startswith("changed_lever_vs_attempt")), "")
        attempts_rows.append(AttemptRow(attempt=int(a.get("attempt", n)), session=a.get("session"),
                                        attempt_in_session=a.get("attempt_in_session"),
                                        reason=str(a.get("reason") or ""), changed_lever=lever,
                                        tool_calls=len(a.get("calls") or []), path=p))
    inbox = doc.get("memory_inbox")
    inbox_files: list[str] = []
    if inbox and Path(inbox).is_dir():
        inbox_files = sorted(p.relative_to(inbox).as_posix() for p in Path(inbox).rglob("*") if p.is_file())
    return Exploration(path=d, cell=str(doc.get("cell") or d.name), status=status,
                       sessions_max=doc.get("sessions_max"), attempts_per_session=doc.get("attempts_per_session"),
                       current=current, solved=doc.get("solved"), merged=doc.get("merged"), error=doc.get("error"),
                       memory_inbox=inbox, sessions=sessions, attempts=attempts_rows, inbox_files=inbox_files)
