"""Toolkit calls made by an agent CLI through MCP (claude_code and codex planners).

The SDK planners do not run the loop themselves: the bundled CLI decides when to call
a tool and reaches the toolkit through MCP. :class:`ToolBridge` is the one place such
calls go through. It serialises calls (one tool at a time, like the api planner),
strips the ``mcp__rpent__`` prefix, records the transcript entries and stats, emits
``tool_call``/``tool_result`` events, converts results to MCP content (JSON text +
base64 PNG images, ``isError`` when the result has ``"error"``) and notices an
accepted ``finish``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from rpent.planners.base import Finish, PlannerStats, Toolkit
from rpent.planners.content import b64, fit_images, image_ref, jsonable_result, to_tool_content, transcript_blocks
from rpent.planners.events import EventEmitter

__all__ = ["MCP_PREFIX", "MCP_SERVER_NAME", "ToolBridge", "strip_mcp_prefix"]

MCP_SERVER_NAME = "rpent"
MCP_PREFIX = f"mcp__{MCP_SERVER_NAME}__"
"""Tools of the MCP server ``rpent`` appear to the model as ``mcp__rpent__<tool>``."""


def strip_mcp_prefix(name: str) -> str:
    """``mcp__rpent__move_to`` -> ``move_to``; other names unchanged."""
    return name[len(MCP_PREFIX):] if name.startswith(MCP_PREFIX) else name


class ToolBridge:
    """Executes toolkit calls on behalf of an MCP client and records them.

    Args:
        toolkit: the toolkit.
        emit: event emitter of the run.
        stats: stats object of the run (``tool_calls`` is incremented here).
        transcript: transcript list of the run (``role: tool`` entries appended here).
        stop_check: returns a reason while the run must not start new tools (operator
            stop, timeout); such calls get an error result without touching the toolkit.
        image_budget: base64 bytes the images of one result may take together (larger ones are
            downscaled, :func:`rpent.planners.content.fit_images`); None: no limit.
        steering: the run's steering. A plain interrupt (Esc, ``/interrupt``) cancels the running
            tool through ``toolkit.cancel()`` (the planner's interrupt listener); the bridge then
            clears the toolkit's cancel flag so that the agent's next tool runs, as the api planner
            does. An interrupt that came while no tool ran had nothing to cancel and is cleared
            before the next tool starts. A stop (``/quit``) is never cleared.
    """

    def __init__(self, toolkit: Toolkit, emit: EventEmitter, stats: PlannerStats,
                 transcript: list[dict[str, Any]], stop_check: Callable[[], str | None] | None = None,
                 image_budget: int | None = None, steering: Any = None) -> None:
        self.image_budget = image_budget
        self.steering = steering
        self._interrupts_seen = steering.interrupt_count if steering is not None else 0
        self.toolkit = toolkit
        self.emit = emit
        self.stats = stats
        self.transcript = transcript
        self.finish: Finish | None = None
        self.finish_event = threading.Event()
        self.stop_check = stop_check
        self.on_end: Callable[[], None] | None = None
        """Called (in the tool's worker thread) after a call that accepted a finish or during
        which a stop was requested, before the result goes back to the CLI — the codex
        planner interrupts its turn here so no further model request is made."""
        self.active = threading.Event()
        self._lock = threading.Lock()
        self._n = 0
        self._expected: dict[str, list[str]] = {}
        self._expected_cond = threading.Condition()
        self._ud_lock = threading.Lock()
        self._undelivered: dict[str, str] = {}
        self._done: set[str] = set()

    def undelivered(self, call_id: str | None, name: str, reason: str) -> None:
        """Record that the result of call ``call_id`` never reached the agent (its MCP client went
        away during the tool). The action itself completes (motions are never abandoned); once it
        has, the transcript entry gets ``"delivered": false`` and ``"undelivered_reason"``, the
        toolkit's record is marked (``toolkit.note_undelivered(call_id, reason)``, e.g. the LIBERO
        ``states.json`` step) and an ``error`` event says so. Never blocks on a running tool."""
        if call_id is None:
            return
        with self._ud_lock:
            if call_id in self._undelivered:
                return
            self._undelivered[call_id] = reason
            done = call_id in self._done
        if done:
            self._mark_undelivered(call_id, name)

    def _mark_undelivered(self, call_id: str, name: str) -> None:
        reason = self._undelivered[call_id]
        entry = next((m for m in reversed(self.transcript)
                      if m.get("role") == "tool" and m.get("tool_call_id") == call_id), None)
        if entry is not None:
            entry["delivered"] = False
            entry["undelivered_reason"] = reason
        note = getattr(self.toolkit, "note_undelivered", None)
        if callable(note):
            try:
                note(call_id, reason)
            except Exception:  # the transcript has it; never fail the caller
                pass
        self.emit("error", error=f"result of {strip_mcp_prefix(name)} ({call_id}) was not delivered: {reason}")

    def expect(self, name: str, call_id: str) -> None:
        """Announce the model's id for an upcoming call of ``name`` (seen in the CLI's
        message stream), so the transcript and events use the model's call id."""
        with self._expected_cond:
            self._expected.setdefault(strip_mcp_prefix(name), []).append(call_id)
            self._expected_cond.notify_all()

    def _take_expected(self, name: str, wait_s: float = 0.5) -> str | None:
        end = time.monotonic() + wait_s
        with self._expected_cond:
            while not self._expected.get(name):
                left = end - time.monotonic()
                if left <= 0:
                    return None
                self._expected_cond.wait(left)
            return self._expected[name].pop(0)

    def _settle_interrupts(self, stopping: str | None, since: int | None = None) -> int:
        """Clear the toolkit's cancel flag left by plain interrupts counted after ``since`` (default:
        the last settled count), unless the run is stopping; returns the current interrupt count."""
        if self.steering is None:
            return 0
        count = self.steering.interrupt_count
        if count != (self._interrupts_seen if since is None else since) and not stopping \
                and not self.steering.stop_requested:
            self.toolkit.clear_cancel()
        self._interrupts_seen = count
        return count

    def call(self, name: str, args: dict[str, Any] | None, call_id: str | None = None,
             on_call_id: Callable[[str], None] | None = None) -> tuple[list[dict[str, Any]], bool]:
        """Run one tool (blocking; call from a worker thread).

        Args:
            on_call_id: told the call's id before the toolkit runs (the transport needs it to
                report an undelivered result, :meth:`undelivered`).
        Returns:
            ``(mcp_content, is_error)``: MCP content dicts — ``{"type": "text", "text"}`` and
            ``{"type": "image", "data": <base64>, "mimeType": "image/png"}`` — and the error flag.
        """
        tool = strip_mcp_prefix(name)
        args = dict(args or {})
        call_id = call_id or self._take_expected(tool)
        with self._lock:
            self._n += 1
            call_id = call_id or f"mcp_{self._n:04d}"
            if on_call_id is not None:
                on_call_id(call_id)
            self.emit("tool_call", name=tool, args=args, call_id=call_id)
            start = time.monotonic()
            blocked = self.stop_check() if self.stop_check is not None else None
            seq0 = self._settle_interrupts(blocked)
            if blocked:
                raw = {"error": f"not executed: {blocked}", "code": "tool_cancelled", "interrupted": True}
            else:
                self.active.set()
                try:
                    raw = self.toolkit.execute(tool, args, call_id)
                except Exception as exc:  # contract says never raises; keep the CLI session alive anyway
                    raw = {"error": f"toolkit raised {type(exc).__name__}: {exc}"}
                finally:
                    self.active.clear()
                self._settle_interrupts(self.stop_check() if self.stop_check is not None else None, seq0)
            elapsed = time.monotonic() - start
            if not isinstance(raw, dict):
                raw = {"error": f"toolkit returned {type(raw).__name__}, expected dict"}
            if not blocked:
                self.stats.tool_calls += 1
            content = to_tool_content(raw)
            if self.image_budget is not None:
                content = fit_images(content, self.image_budget)
            self.transcript.append({"role": "tool", "tool_call_id": call_id, "name": tool,
                                    "content": transcript_blocks(content.blocks), "is_error": content.is_error})
            self.emit("tool_result", call_id=call_id, name=tool, result=jsonable_result(raw),
                      is_error=content.is_error,
                      images=[{"label": b["label"], "png": b["png"], "ref": image_ref(b["label"], b["png"])["ref"]}
                              for b in content.images], elapsed_s=elapsed)
            with self._ud_lock:
                self._done.add(call_id)
                late = call_id in self._undelivered
            if late:
                self._mark_undelivered(call_id, tool)
            if content.finish is not None and self.finish is None:
                self.finish = Finish(*content.finish)
                self.finish_event.set()
            ending = self.finish is not None or (self.stop_check is not None and self.stop_check())
            if ending and self.on_end is not None:
                try:
                    self.on_end()
                except Exception:  # the planner also polls for the end; never fail the call
                    pass
        mcp: list[dict[str, Any]] = []
        for b in content.blocks:
            if b["type"] == "text":
                mcp.append({"type": "text", "text": b["text"]})
            else:
                mcp.append({"type": "image", "data": b64(b["png"]), "mimeType": "image/png"})
        return mcp, content.is_error
