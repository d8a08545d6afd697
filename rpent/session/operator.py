"""The TUI's ``Operator``: one pending operator request at a time, answered from the UI.

Implements the run layer's ``Operator`` protocol (docs/interfaces.md "Run layer"):
``ask(request_kind, prompt, choices, frames) -> (answer, notes)``, blocking, called from the
toolkit's worker thread. The UI sees the request through ``on_request`` and answers it with
``reply(request_id, answer, notes)``. Rules follow the upstream Dashboard operator
(upstream RPent's Dashboard): at most one pending request; a reply must name the
pending id and one of its choices ("expired or already answered operator request",
"invalid operator response"); a second concurrent ask is refused ("another operator confirmation
is pending"); the waiting thread checks for cancellation every 0.1 s.

Every request and reply is appended as one JSON line to ``log_path`` (when given), so nothing the
operator said is lost even if the run crashes afterwards.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rpent.toolkit.answers import ANSWER_KEYS  # one key per answer (s success, f failure, c continue, a abort, d done)

__all__ = [
    "OperatorRequest",
    "OperatorReply",
    "OperatorReplyError",
    "OperatorBusyError",
    "TuiOperator",
    "VERDICT_CHOICES",
    "RESET_CHOICES",
    "ANSWER_KEYS",
]

#: Choices of a verdict request, and of a scene reset (docs/interfaces.md "Run layer").
VERDICT_CHOICES = ("success", "failure", "continue", "abort")
RESET_CHOICES = ("done", "abort")

#: How often (s) a waiting ``ask`` checks for cancellation (upstream Dashboard: 0.1 s).
POLL_S = 0.1


class OperatorReplyError(ValueError):
    """A reply that names no pending request, or an answer that is not one of the request's choices."""


class OperatorBusyError(RuntimeError):
    """``ask`` was called while another request is still pending."""


@dataclass(frozen=True)
class OperatorRequest:
    """A question waiting for the operator.

    Attributes:
        id: unique id within this operator (``op-0001`` ...).
        kind: ``"verdict"`` or ``"scene_reset"`` (any other kind gets the verdict choices).
        prompt: the tool's question, shown verbatim.
        choices: allowed answers, e.g. ``("success", "failure", "continue", "abort")``.
        frames: camera frames at the time of the request, label -> PNG bytes (``main``, ``wrist``).
        created_at: wall-clock time (s since the epoch).
    """

    id: str
    kind: str
    prompt: str
    choices: tuple[str, ...]
    frames: Mapping[str, bytes] = field(default_factory=dict)
    created_at: float = 0.0


@dataclass(frozen=True)
class OperatorReply:
    """The operator's answer to request ``id`` (``answer`` is one of its choices)."""

    id: str
    answer: str
    notes: str = ""


def _frames_dict(frames: Any) -> dict[str, bytes]:
    """Normalise the ``frames`` argument (dict label->png, list of {label, png}, or None)."""
    if not frames:
        return {}
    if isinstance(frames, Mapping):
        return {str(k): v for k, v in frames.items() if isinstance(v, (bytes, bytearray))}
    out: dict[str, bytes] = {}
    for item in frames:
        if isinstance(item, Mapping) and isinstance(item.get("png"), (bytes, bytearray)):
            out[str(item.get("label", f"frame{len(out)}"))] = bytes(item["png"])
    return out


class TuiOperator:
    """Operator answered from the terminal UI.

    Args:
        on_request: called (from the asking thread) with the new ``OperatorRequest``; must be
            thread-safe, e.g. a ``Batcher.put`` or ``widget.post_message``.
        on_resolved: called with ``(request, reply)`` once the request is answered or cancelled.
        log_path: JSON-lines file receiving every request and reply (appended, flushed per line).
    """

    def __init__(self, on_request: Callable[[OperatorRequest], None] | None = None,
                 on_resolved: Callable[[OperatorRequest, OperatorReply], None] | None = None,
                 log_path: str | Path | None = None) -> None:
        self._on_request = on_request
        self._on_resolved = on_resolved
        self.log_path = Path(log_path) if log_path is not None else None
        self._lock = threading.Lock()
        self._pending: OperatorRequest | None = None
        self._reply: OperatorReply | None = None
        self._answered = threading.Event()
        self._cancelled = threading.Event()
        self._ids = itertools.count(1)

    @property
    def pending(self) -> OperatorRequest | None:
        """The request waiting for an answer, or None."""
        return self._pending

    def _log(self, record: dict[str, Any]) -> None:
        if self.log_path is None:
            return
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(record, ensure_ascii=False) + "\n")
            fh.flush()

    # -- the Operator protocol ---------------------------------------------------------------
    def ask(self, request_kind: str, prompt: str, choices: Sequence[str] | None = None,
            frames: Any = None) -> tuple[str, str]:
        """Block until the operator answers; return ``(answer, notes)``.

        Args:
            request_kind: ``"verdict"`` or ``"scene_reset"``.
            prompt: the question shown to the operator.
            choices: allowed answers; default by kind (``VERDICT_CHOICES`` / ``RESET_CHOICES``).
            frames: current camera frames (dict label->PNG bytes, or list of {label, png}).

        Returns ``("abort", "<reason>")`` when ``cancel()`` is called while waiting.

        Raises:
            OperatorBusyError: "another operator confirmation is pending".
            ValueError: an empty choice list.
        """
        if choices is None:
            choices = RESET_CHOICES if request_kind == "scene_reset" else VERDICT_CHOICES
        choices = tuple(str(c) for c in choices)
        if not choices:
            raise ValueError("an operator request needs at least one choice (e.g. success|failure|continue|abort)")
        with self._lock:
            if self._pending is not None:
                raise OperatorBusyError("another operator confirmation is pending")
            if self._cancelled.is_set():
                return "abort", "cancelled: the task run ended"
            request = OperatorRequest(id=f"op-{next(self._ids):04d}", kind=request_kind, prompt=prompt,
                                      choices=choices, frames=_frames_dict(frames), created_at=time.time())
            self._pending = request
            self._reply = None
            self._answered.clear()
        self._log({"event": "request", "id": request.id, "kind": request.kind, "prompt": prompt,
                   "choices": list(choices), "frames": sorted(request.frames), "time": request.created_at})
        if self._on_request is not None:
            self._on_request(request)
        while not self._answered.wait(POLL_S):
            if self._cancelled.is_set():
                self._resolve(request, OperatorReply(request.id, "abort", "cancelled: the task run ended"),
                              source="cancel")
                break
        reply = self._reply
        assert reply is not None
        return reply.answer, reply.notes

    # -- the UI side -------------------------------------------------------------------------
    def reply(self, request_id: str, answer: str, notes: str = "") -> OperatorReply:
        """Answer the pending request. Call from any thread (the UI).

        Raises:
            OperatorReplyError: "expired or already answered operator request" when ``request_id`` is
                not the pending request; "invalid operator response" when ``answer`` is not one of
                its choices (the message lists them).
        """
        with self._lock:
            request = self._pending
            if request is None or request.id != request_id:
                raise OperatorReplyError(f"expired or already answered operator request: {request_id!r}")
            if answer not in request.choices:
                raise OperatorReplyError(
                    f"invalid operator response {answer!r}; choose one of: {', '.join(request.choices)}")
        reply = OperatorReply(request_id, answer, notes.strip())
        self._resolve(request, reply, source="operator")
        return reply

    def _resolve(self, request: OperatorRequest, reply: OperatorReply, source: str) -> None:
        with self._lock:
            if self._pending is not request:
                return
            self._reply = reply
            self._pending = None
            self._answered.set()
        self._log({"event": "reply", "id": reply.id, "answer": reply.answer, "notes": reply.notes,
                   "source": source, "time": time.time()})
        if self._on_resolved is not None:
            self._on_resolved(request, reply)

    def cancel(self) -> None:
        """Release a waiting ``ask`` with ``abort`` (within 0.1 s) and refuse later requests."""
        self._cancelled.set()
