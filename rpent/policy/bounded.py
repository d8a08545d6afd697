"""What a code-policy cell's record keeps: every part a cell controls is cut to a fixed size,
so a cell that prints, raises or loops without end still leaves a small ``cell_NNN.json``
(under 1 MB) and cannot grow the parent process (see :mod:`rpent.policy.runner`).
"""

from __future__ import annotations

import json
from typing import Any

from rpent.policy.frames import to_wire

#: Characters of stdout (and of stderr) kept per cell; the rest is counted, not stored.
MAX_STREAM_CHARS = 200_000
#: Characters of a call's arguments kept in the record (as JSON); longer ones are replaced by a note.
MAX_ARGS_CHARS = 4_000
#: Characters kept of a cell exception's message and of its traceback, and of a trailing value's repr.
MAX_EXCEPTION_CHARS = 20_000
#: Longest string kept in a robot call's result summary.
MAX_SUMMARY_STR = 2_000
#: Characters of a call's result kept in the record (as JSON); beyond it only its top-level
#: scalars are kept (a result that echoes large arguments cannot grow the record or the parent).
MAX_RESULT_CHARS = 20_000


def cut(text: Any, limit: int) -> str:
    """``str(text)``, cut to ``limit`` characters with a note of how many were dropped."""
    text = str(text)
    return text if len(text) <= limit else text[:limit] + f"...[{len(text) - limit} chars cut]"


def cap_exception(exc: Any) -> dict[str, str] | None:
    """A worker-reported exception with its fields cut to :data:`MAX_EXCEPTION_CHARS`."""
    if not isinstance(exc, dict):
        return None
    return {"type": cut(exc.get("type", ""), 200), "message": cut(exc.get("message", ""), MAX_EXCEPTION_CHARS),
            "traceback": cut(exc.get("traceback", ""), MAX_EXCEPTION_CHARS)}


def _over(value: Any, limit: int) -> bool:
    """True when ``value`` surely takes more than ``limit`` characters as JSON: an estimate
    (two characters per item for separators, strings and bytes at their length) that stops as
    soon as it passes ``limit``, so a huge value costs no more than a small one."""
    budget = limit
    stack = [value]
    while stack:
        v = stack.pop()
        budget -= 2
        if isinstance(v, dict):
            budget -= sum(len(str(k)) for k in v) if len(v) < budget else budget + 1
            stack.extend(v.values())
        elif isinstance(v, (list, tuple)):
            stack.extend(v if len(v) < budget else v[:budget + 1])
        elif isinstance(v, (str, bytes, bytearray)):
            budget -= min(len(v), MAX_SUMMARY_STR)
        else:
            budget -= 4
        if budget < 0:
            return True
    return False


def record_args(args: dict) -> dict:
    """A call's arguments as recorded: summarised, or a note when over :data:`MAX_ARGS_CHARS`."""
    if _over(args, 4 * MAX_ARGS_CHARS):
        return {"_cut": f"arguments of more than {4 * MAX_ARGS_CHARS} characters (as JSON) not recorded; "
                        f"over {MAX_ARGS_CHARS}"}
    summary = summarise(args)
    size = len(json.dumps(summary, default=repr))
    if size > MAX_ARGS_CHARS:
        return {"_cut": f"arguments of {size} characters (as JSON) not recorded; over {MAX_ARGS_CHARS}"}
    return summary


def record_result(result: dict) -> dict:
    """A call's result as recorded: :func:`summarise`, or, when that is over
    :data:`MAX_RESULT_CHARS` as JSON, its top-level scalar fields plus a ``_cut`` note."""
    if not _over(result, 4 * MAX_RESULT_CHARS):
        summary = summarise(result)
        size = len(json.dumps(summary, default=repr))
        if size <= MAX_RESULT_CHARS:
            return summary
    kept = {str(k): summarise(v) for k, v in result.items() if v is None or isinstance(v, (bool, int, float, str))}
    kept["_cut"] = f"a result over {MAX_RESULT_CHARS} characters (as JSON) cut to its top-level scalars"
    return kept


def summarise(value: Any) -> Any:
    """A tool result or argument as recorded: ``_images`` replaced by their labels, strings
    over :data:`MAX_SUMMARY_STR` cut, bytes by their length, the rest as wire values."""
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if k == "_images" and isinstance(v, list):
                out["_image_labels"] = [str(i.get("label", "")) if isinstance(i, dict) else "" for i in v]
            else:
                out[str(k)] = summarise(v)
        return out
    if isinstance(value, (list, tuple)):
        return [summarise(v) for v in value]
    if isinstance(value, str) and len(value) > MAX_SUMMARY_STR:
        return value[:MAX_SUMMARY_STR] + f"...[{len(value) - MAX_SUMMARY_STR} chars cut]"
    if isinstance(value, (bytes, bytearray)):
        return f"<{len(value)} bytes>"
    return to_wire(value, lenient=True)


class TextSink:
    """Keeps the first ``limit`` characters written to it and counts the rest (``dropped``)."""

    def __init__(self, limit: int):
        self.limit = limit
        self.parts: list[str] = []
        self.size = 0
        self.dropped = 0

    def add(self, text: str) -> None:
        room = self.limit - self.size
        if room <= 0:
            self.dropped += len(text)
            return
        self.parts.append(text[:room])
        self.size += min(room, len(text))
        self.dropped += max(0, len(text) - room)

    def text(self) -> str:
        return "".join(self.parts)
