"""The scripted model behind the local provider endpoint.

A *script* decides what the fake model answers to each request the endpoint
receives. It is either a list of turns (replayed in order, one per model request)
or any callable ``responder(request: ReceivedRequest) -> Turn`` that looks at what
the client sent (tool results, images, operator text) and answers from that.

JSON script file format (``--script conv.json``)::

    {
      "turns": [
        {"thinking": "plan", "text": "Looking first.",
         "tool_calls": [{"name": "view_env_state", "args": {}}]},
        {"fault": {"status": 429, "retry_after_s": 1}},
        {"fault": {"status": 500, "message": "upstream hiccup"}},
        {"delay_s": 0.5, "tool_calls": [{"name": "finish",
                                          "args": {"status": "success", "summary": "done"}}]}
      ],
      "reject_images": false,
      "when_exhausted": {"text": "Scripted conversation finished."}
    }

A recorded planner transcript (``PlannerResult.messages``, or a run record's
``transcript_<tag>.json`` holding them under ``"messages"``) is accepted as well:
each run of consecutive ``{"role": "assistant", "content": [...]}`` entries becomes
one turn (text, thinking and ``tool_use`` blocks), so a recorded conversation can be
replayed against a new toolkit build or another planner backend.

Tool names in a script are written bare (``move_to``); the endpoint maps them onto
whatever the client offered (``mcp__rpent__move_to`` for the Claude Code and Codex
CLIs), see :func:`resolve_tool_name`.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "Fault",
    "ReceivedRequest",
    "Responder",
    "Script",
    "ScriptError",
    "SeenToolResult",
    "ToolCall",
    "Turn",
    "load_script",
    "resolve_tool_name",
    "turn_from_dict",
]


class ScriptError(ValueError):
    """A script file or turn dict is malformed; the message names the field and the fix."""


@dataclass(frozen=True)
class ToolCall:
    """One tool call the scripted model makes.

    Attributes:
        name: tool name, bare (``move_to``) or fully qualified (``mcp__rpent__move_to``).
        args: JSON-able arguments dict sent as the tool input.
        id: call id to use on the wire; generated (``toolu_…`` / ``call_…``) when None.
    """

    name: str
    args: dict[str, Any] = field(default_factory=dict)
    id: str | None = None


@dataclass(frozen=True)
class Fault:
    """An HTTP error the endpoint answers instead of a model reply.

    Attributes:
        status: HTTP status (429 rate limit, 500/529 server errors, 400 bad request, 401 auth).
        message: error message placed in the provider's error body.
        retry_after_s: seconds sent in the ``retry-after`` header (429/5xx), or None.
        error_type: provider error ``type``; derived from ``status`` when None.
    """

    status: int
    message: str = ""
    retry_after_s: float | None = None
    error_type: str | None = None


@dataclass(frozen=True)
class Turn:
    """One scripted model reply.

    Attributes:
        text: assistant text, or None.
        thinking: reasoning text (Anthropic ``thinking`` block, Responses ``reasoning``
            item, Chat ``reasoning_content``), or None.
        tool_calls: tool calls, in order.
        fault: answer with this HTTP error instead (the other fields are ignored).
        delay_s: seconds to wait before answering (s), to exercise client timeouts.
        usage: token counts to report instead of the estimate
            (``input_tokens``, ``output_tokens``, ``cache_read_tokens``, ``cache_write_tokens``).
    """

    text: str | None = None
    thinking: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    fault: Fault | None = None
    delay_s: float = 0.0
    usage: dict[str, int] | None = None


@dataclass(frozen=True)
class SeenToolResult:
    """A tool result the client sent back, as the endpoint parsed it.

    Attributes:
        call_id: the tool call id it answers.
        text: the result's text content, joined.
        is_error: the client flagged it as an error (Anthropic ``is_error``; MCP ``isError``
            surfaces here only through the text for OpenAI wires).
        image_count: image blocks inside the result (Anthropic only; OpenAI wires send
            images as separate user content, counted in ``ReceivedRequest.image_count``).
    """

    call_id: str
    text: str
    is_error: bool = False
    image_count: int = 0

    def json(self) -> Any:
        """The result text parsed as JSON (the rpent planners send JSON text), else None."""
        try:
            return json.loads(self.text)
        except (TypeError, ValueError):
            return None


@dataclass
class ReceivedRequest:
    """A model request as the endpoint received it (one per HTTP request).

    Attributes:
        index: 0-based arrival order.
        api: ``"anthropic"`` (Messages), ``"responses"`` (OpenAI Responses) or ``"chat"``
            (Chat Completions); ``"count_tokens"`` for Anthropic token counting.
        path: request path without the query string.
        query: raw query string (``beta=true`` from the Claude Code CLI).
        headers: request headers (lower-case names; ``authorization``/``x-api-key`` redacted).
        body: parsed JSON body.
        model: ``body["model"]``.
        stream: the client asked for SSE.
        tool_names: names of the tools the client offered.
        tool_results: tool results in the *last* user turn of the request.
        image_count: image blocks anywhere in the request.
        image_bytes: base64 characters of image data anywhere in the request.
        last_user_text: text of the last user turn (operator lines arrive here).
        status: HTTP status the endpoint answered with (set after answering).
        turn_index: index of the scripted turn used (None for side requests/faults by policy).
    """

    index: int
    api: str
    path: str
    query: str
    headers: dict[str, str]
    body: dict[str, Any]
    model: str
    stream: bool
    tool_names: list[str]
    tool_results: list[SeenToolResult]
    image_count: int
    image_bytes: int
    last_user_text: str
    status: int | None = None
    turn_index: int | None = None

    @property
    def has_images(self) -> bool:
        """True when the request carries at least one image block."""
        return self.image_count > 0


Responder = Callable[[ReceivedRequest], Turn]


def resolve_tool_name(name: str, offered: list[str]) -> str:
    """Map a scripted tool name onto the name the client offered.

    Exact matches win; otherwise a tool whose name ends with ``__<name>`` (MCP-qualified
    names such as ``mcp__rpent__move_to``) is used. Unknown names pass through unchanged,
    so a script can deliberately call a tool the client did not offer.
    """
    if name in offered:
        return name
    for candidate in offered:
        if candidate.endswith("__" + name):
            return candidate
    return name


def _require(cond: bool, msg: str) -> None:
    if not cond:
        raise ScriptError(msg)


def turn_from_dict(d: dict[str, Any], where: str = "turn") -> Turn:
    """Build a :class:`Turn` from its JSON form (see the module docstring).

    Raises:
        ScriptError: unknown keys or wrong types, with the offending field named.
    """
    _require(isinstance(d, dict), f"{where}: expected an object, got {type(d).__name__}")
    allowed = {"text", "thinking", "tool_calls", "fault", "delay_s", "usage"}
    unknown = set(d) - allowed
    _require(not unknown, f"{where}: unknown keys {sorted(unknown)}; allowed: {sorted(allowed)}")
    calls = []
    for i, c in enumerate(d.get("tool_calls") or []):
        _require(isinstance(c, dict) and isinstance(c.get("name"), str),
                 f"{where}.tool_calls[{i}]: needs a string 'name' (and optional 'args' object)")
        args = c.get("args", c.get("input", {}))
        _require(isinstance(args, dict), f"{where}.tool_calls[{i}].args must be an object")
        calls.append(ToolCall(name=c["name"], args=args, id=c.get("id")))
    fault = None
    if d.get("fault") is not None:
        f = d["fault"]
        _require(isinstance(f, dict) and isinstance(f.get("status"), int),
                 f"{where}.fault: needs an integer 'status' (e.g. 429)")
        fault = Fault(status=f["status"], message=str(f.get("message", "")),
                      retry_after_s=f.get("retry_after_s"), error_type=f.get("error_type"))
    delay = d.get("delay_s", 0.0)
    _require(isinstance(delay, (int, float)) and delay >= 0, f"{where}.delay_s must be a number >= 0")
    return Turn(text=d.get("text"), thinking=d.get("thinking"), tool_calls=tuple(calls),
                fault=fault, delay_s=float(delay), usage=d.get("usage"))


def _turn_from_transcript_entry(entry: dict[str, Any]) -> Turn:
    texts, thinking, calls = [], [], []
    content = entry.get("content")
    if isinstance(content, str):
        texts.append(content)
        content = []
    for block in content or []:
        kind = block.get("type")
        if kind == "text":
            texts.append(block.get("text", ""))
        elif kind == "thinking":
            thinking.append(block.get("thinking", ""))
        elif kind == "tool_use":
            name = block.get("name", "")
            calls.append(ToolCall(name=name.split("__")[-1] if name.startswith("mcp__") else name,
                                  args=block.get("input") or {}))
    return Turn(text="\n".join(texts) or None, thinking="\n".join(thinking) or None,
                tool_calls=tuple(calls))


class Script:
    """A list of turns replayed in order, one per model request (thread-safe).

    Args:
        turns: the replies, in order.
        reject_images: answer 400 ``image input is not supported`` to any request that
            carries an image (a text-only model), without consuming a turn.
        when_exhausted: reply once the turns are used up (default: a closing text with no
            tool calls, which ends a tool-calling loop).
        side_replies: answer requests that offer no tools (title/summary side requests
            some CLIs make) with a short text without consuming a turn.
        loop: start over at the first turn once the turns are used up (``when_exhausted``
            is then never sent), so one endpoint serves one conversation after another
            (e.g. repeated ``rpent-check-llm`` probes); without it, restart the endpoint for
            each conversation.
    """

    def __init__(self, turns: list[Turn], *, reject_images: bool = False,
                 when_exhausted: Turn | None = None, side_replies: bool = True, loop: bool = False) -> None:
        self.loop = loop
        self.turns = list(turns)
        self.reject_images = reject_images
        self.when_exhausted = when_exhausted or Turn(text="Scripted conversation finished.")
        self.side_replies = side_replies
        self._next = 0
        self._lock = threading.Lock()

    @property
    def position(self) -> int:
        """Number of turns consumed so far."""
        return self._next

    def __call__(self, request: ReceivedRequest) -> Turn:
        """Return the reply for ``request``; sets ``request.turn_index``."""
        if self.reject_images and request.has_images:
            return Turn(fault=Fault(400, "image input is not supported by this model"))
        if self.side_replies and not request.tool_names:
            return Turn(text="ok")
        with self._lock:
            if self._next >= len(self.turns) and self.loop and self.turns:
                self._next = 0
            if self._next >= len(self.turns):
                return self.when_exhausted
            request.turn_index = self._next
            self._next += 1
            return self.turns[request.turn_index]

    @classmethod
    def from_obj(cls, obj: Any) -> "Script":
        """Build a script from parsed JSON: a script object, a transcript list, or a
        record with ``"messages"``.

        Raises:
            ScriptError: the object is none of these.
        """
        if isinstance(obj, dict) and "turns" in obj:
            _require(isinstance(obj["turns"], list), "'turns' must be a list of turn objects")
            turns = [turn_from_dict(t, f"turns[{i}]") for i, t in enumerate(obj["turns"])]
            exhausted = obj.get("when_exhausted")
            return cls(turns, reject_images=bool(obj.get("reject_images", False)),
                       when_exhausted=turn_from_dict(exhausted, "when_exhausted") if exhausted else None,
                       side_replies=bool(obj.get("side_replies", True)), loop=bool(obj.get("loop", False)))
        messages = obj.get("messages") if isinstance(obj, dict) else obj
        if isinstance(messages, list) and all(isinstance(m, dict) and "role" in m for m in messages):
            groups: list[list[dict[str, Any]]] = []  # consecutive assistant entries are one model turn
            prev_assistant = False
            for m in messages:
                if m.get("role") == "assistant":
                    if prev_assistant:
                        groups[-1].append(m)
                    else:
                        groups.append([m])
                prev_assistant = m.get("role") == "assistant"
            turns = [_turn_from_transcript_entry({"role": "assistant", "content": [
                b for m in g for b in (m.get("content") if isinstance(m.get("content"), list)
                                       else [{"type": "text", "text": str(m.get("content") or "")}])]})
                for g in groups]
            _require(bool(turns), "the transcript holds no assistant entries to replay")
            return cls(turns)
        raise ScriptError("expected a script object with 'turns', a transcript list of "
                          "{'role': ...} entries, or a record with a 'messages' list")


def load_script(path: str | Path) -> Script:
    """Read a script or recorded transcript from a JSON file.

    Raises:
        ScriptError: the file is missing, not JSON, or not a script/transcript.
    """
    p = Path(path)
    try:
        obj = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ScriptError(f"script file not found: {p}") from None
    except json.JSONDecodeError as exc:
        raise ScriptError(f"script file {p} is not valid JSON: {exc}") from None
    except UnicodeDecodeError as exc:
        raise ScriptError(f"script file {p} is not UTF-8 text ({exc.reason} at byte {exc.start}); save it as UTF-8 "
                          "JSON") from None
    except IsADirectoryError:
        raise ScriptError(f"script file {p} is a directory; pass the JSON file") from None
    return Script.from_obj(obj)
