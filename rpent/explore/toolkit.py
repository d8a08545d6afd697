"""The exploration toolkit: the LIBERO toolkit plus ``reset`` and ``write_memory_draft``, and a
``finish`` that is refused while the cell is unsolved and attempts remain (RPent reference §6.3).

* ``reset(reason, changed_lever)``: archives the failed attempt as
  ``<explore dir>/attempts/attempt_<N>_failed.json`` (its tool calls, the final state, the
  reason and the lever to change next), restores the scene from the init state and starts
  attempt N+1. Refused (``"reset refused"``) once the session's attempts are used up
  (``attempts_per_session`` 0 = unlimited).
* ``write_memory_draft(name, content)``: writes a draft leaf ``<name>.md`` into the memory inbox
  ``<corpus>/_internal/inbox/<cell>/`` (nothing else of the corpus is writable), or appends to
  ``wip/notes.md`` with ``name="wip/notes"``.
* ``finish``: refused while the environment is not solved and attempts are left.
"""

from __future__ import annotations

import json
import logging
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated

from pydantic import Field

from rpent.recording.atomic import write_bytes_atomic
from rpent.robots.libero.toolkit import LiberoToolkit
from rpent.toolkit.registry import tool

__all__ = ["ExploreState", "ExploreToolkit", "explore_toolkit_class"]

log = logging.getLogger("rpent.run")

_DRAFT_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]*$")


@dataclass
class ExploreState:
    """Shared by every session of one exploration.

    Attributes:
        root: the exploration directory (``attempts/``, ``sessions/``).
        inbox: ``<corpus>/_internal/inbox/<cell>/``.
        attempts_per_session: resets allowed per session (0 = unlimited).
        archived: attempt archives written so far (all sessions), in order.
        session: current session number (1-based); attempt: current attempt in it (1-based).
        on_change: called (no arguments) after an attempt is archived; the loop rewrites
            ``explore.json`` there. An exception it raises is logged, never returned to the planner.
    """

    root: Path
    inbox: Path
    attempts_per_session: int
    archived: list[str] = field(default_factory=list)
    session: int = 1
    attempt: int = 1
    calls: list[dict] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    on_change: Callable[[], None] | None = None

    def attempts_left(self) -> bool:
        """More resets allowed in this session."""
        return self.attempts_per_session == 0 or self.attempt < self.attempts_per_session


class ExploreToolkit(LiberoToolkit):
    """:class:`LiberoToolkit` for exploration; built by :func:`explore_toolkit_class`."""

    explore: ExploreState

    def after_call(self, name, kwargs, call_id, result):  # noqa: D102
        super().after_call(name, kwargs, call_id, result)
        if name not in ("reset", "write_memory_draft"):
            self.explore.calls.append({"tool": name, "args": kwargs,
                                       "error": result.get("error") if isinstance(result, dict) else None})

    @tool(readonly=True)
    def finish(self, status: Annotated[str, Field(min_length=1, description="your assessment: success, failure, stuck or unsupported")],
               summary: Annotated[str, Field(description="what was done and why you stop")] = "") -> dict:
        """End the exploration of this cell. Refused while the environment is not solved and
        attempts remain: call reset(reason, changed_lever) and try again instead."""
        if not self.solved() and self.explore.attempts_left():
            return {"error": "finish refused: the cell is not solved and attempts remain; archive this attempt "
                             "with reset(reason, changed_lever) and try a changed approach"}
        return super().finish(status, summary)

    @tool()
    def reset(self, reason: Annotated[str, Field(min_length=1, description="why this attempt failed")],
              changed_lever: Annotated[str, Field(description="what the next attempt changes versus this one")] = "") -> dict:
        """Archive the current (failed) attempt, restore the scene from its init state and start the
        next attempt. Refused once this session's attempts are used up."""
        ex = self.explore
        if not ex.attempts_left():
            return {"error": f"reset refused: the {ex.attempts_per_session} attempt(s) of this session are used up"}
        with ex.lock:
            n = len(ex.archived) + 1
            path = ex.root / "attempts" / f"attempt_{n}_failed.json"
            path.parent.mkdir(parents=True, exist_ok=True)
            doc = {"attempt": n, "session": ex.session, "attempt_in_session": ex.attempt, "reason": reason,
                   f"changed_lever_vs_attempt{n}": changed_lever, "final_state": self.current_state(),
                   "success": self.solved(), "calls": ex.calls}
            write_bytes_atomic(path, (json.dumps(doc, indent=1, default=str) + "\n").encode("utf-8"))
            ex.archived.append(path.relative_to(ex.root).as_posix())
            ex.calls = []
            ex.attempt += 1
        if ex.on_change is not None:
            try:
                ex.on_change()
            except Exception:  # noqa: BLE001 - a progress file must not break the attempt
                log.exception("writing the exploration progress failed")
        self.reset_episode()
        return {"status": "reset", "archived": ex.archived[-1], "attempt": ex.attempt,
                "attempts_per_session": ex.attempts_per_session}

    @tool(readonly=True)
    def write_memory_draft(self, name: Annotated[str, Field(description="draft id (slug), or 'wip/notes' to append notes")],
                           content: Annotated[str, Field(min_length=1, description="leaf Markdown with YAML frontmatter, or notes text")]) -> dict:
        """Write a draft memory leaf into this cell's memory inbox (merged after a solved
        exploration), or append working notes with name='wip/notes'."""
        inbox = self.explore.inbox
        if name == "wip/notes":
            path = inbox / "wip" / "notes.md"
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "a", encoding="utf-8") as f:
                f.write(content.rstrip() + "\n")
            return {"status": "appended", "path": "wip/notes.md"}
        if not _DRAFT_NAME.match(name):
            raise ValueError(f"draft name {name!r} must be a slug (a-z, 0-9, '-', '_'); drafts live only in the inbox")
        path = inbox / f"{name}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        write_bytes_atomic(path, content.encode("utf-8"))
        return {"status": "written", "path": f"{name}.md"}


def explore_toolkit_class(state: ExploreState) -> type:
    """A :class:`ExploreToolkit` subclass bound to ``state`` (the run layer builds it like
    :class:`LiberoToolkit`)."""
    return type("BoundExploreToolkit", (ExploreToolkit,), {"explore": state})
