"""Anthropic Messages API wire format (``POST /v1/messages``) for the local endpoint.

Follows the public Messages API reference: the reply object
(``{"type": "message", "content": [...], "stop_reason", "usage"}``), the error body
(``{"type": "error", "error": {"type", "message"}}``) and the SSE event sequence
``message_start``, ``content_block_start`` / ``content_block_delta`` (``thinking_delta``,
``signature_delta``, ``text_delta``, ``input_json_delta``) / ``content_block_stop``,
``message_delta`` (stop reason + output usage), ``message_stop``.
"""

from __future__ import annotations

import json
from typing import Any

from rpent.planners.provider_endpoint.script import Fault, SeenToolResult, Turn
from rpent.planners.provider_endpoint.wire_common import new_id, resolved_calls

__all__ = ["ERROR_TYPES", "error_body", "parse", "reply_events", "reply_message"]

ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
               404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error",
               500: "api_error", 529: "overloaded_error"}


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts = []
    for block in content or []:
        if isinstance(block, dict) and block.get("type") == "text":
            parts.append(block.get("text", ""))
    return "\n".join(parts)


def _count_images(obj: Any) -> tuple[int, int]:
    """(image blocks, base64 chars) anywhere inside ``obj``."""
    count = size = 0
    if isinstance(obj, dict):
        if obj.get("type") == "image":
            count += 1
            size += len(str((obj.get("source") or {}).get("data", "")))
        for v in obj.values():
            c, s = _count_images(v)
            count, size = count + c, size + s
    elif isinstance(obj, list):
        for v in obj:
            c, s = _count_images(v)
            count, size = count + c, size + s
    return count, size


def parse(body: dict[str, Any]) -> dict[str, Any]:
    """Extract tool names, last-turn tool results, image counts and user text from a request."""
    tool_names = [t.get("name", "") for t in body.get("tools") or [] if isinstance(t, dict)]
    messages = body.get("messages") or []
    results: list[SeenToolResult] = []
    text = ""
    if messages and messages[-1].get("role") == "user":
        content = messages[-1].get("content")
        text = _text_of(content)
        if isinstance(content, list):
            for block in content:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    images, _ = _count_images(block.get("content"))
                    results.append(SeenToolResult(call_id=block.get("tool_use_id", ""),
                                                  text=_text_of(block.get("content")),
                                                  is_error=bool(block.get("is_error", False)),
                                                  image_count=images))
    images, image_bytes = _count_images(messages)
    return {"tool_names": tool_names, "tool_results": results, "image_count": images,
            "image_bytes": image_bytes, "last_user_text": text}


def cacheable_prefix(body: dict[str, Any]) -> dict[str, Any] | None:
    """The system + tools prefix when the request marks anything with ``cache_control``."""
    if "cache_control" not in json.dumps(body):
        return None
    return {"system": body.get("system"), "tools": body.get("tools")}


def _blocks(turn: Turn, offered: list[str]) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if turn.thinking:
        blocks.append({"type": "thinking", "thinking": turn.thinking, "signature": new_id("sig_")})
    if turn.text:
        blocks.append({"type": "text", "text": turn.text})
    for call in resolved_calls(turn, offered, "toolu_"):
        blocks.append({"type": "tool_use", "id": call.id, "name": call.name, "input": call.args})
    return blocks


def _usage(u: dict[str, int]) -> dict[str, Any]:
    return {"input_tokens": u["input_tokens"], "output_tokens": u["output_tokens"],
            "cache_read_input_tokens": u["cache_read_tokens"],
            "cache_creation_input_tokens": u["cache_write_tokens"]}


def reply_message(turn: Turn, model: str, offered: list[str], usage: dict[str, int]) -> dict[str, Any]:
    """The non-streaming reply object for ``turn``."""
    blocks = _blocks(turn, offered)
    stop = "tool_use" if any(b["type"] == "tool_use" for b in blocks) else "end_turn"
    return {"id": new_id("msg_"), "type": "message", "role": "assistant", "model": model,
            "content": blocks, "stop_reason": stop, "stop_sequence": None, "usage": _usage(usage)}


def reply_events(turn: Turn, model: str, offered: list[str], usage: dict[str, int]) -> list[tuple[str, dict[str, Any]]]:
    """The SSE events (name, data) for ``turn``, in the order the Messages API sends them."""
    msg = reply_message(turn, model, offered, usage)
    start_usage = dict(msg["usage"], output_tokens=1)
    events: list[tuple[str, dict[str, Any]]] = [
        ("message_start", {"type": "message_start", "message": dict(msg, content=[], stop_reason=None,
                                                                    usage=start_usage)}),
    ]
    for i, block in enumerate(msg["content"]):
        if block["type"] == "thinking":
            events.append(("content_block_start", {"type": "content_block_start", "index": i,
                                                   "content_block": {"type": "thinking", "thinking": "", "signature": ""}}))
            events.append(("content_block_delta", {"type": "content_block_delta", "index": i,
                                                   "delta": {"type": "thinking_delta", "thinking": block["thinking"]}}))
            events.append(("content_block_delta", {"type": "content_block_delta", "index": i,
                                                   "delta": {"type": "signature_delta", "signature": block["signature"]}}))
        elif block["type"] == "text":
            events.append(("content_block_start", {"type": "content_block_start", "index": i,
                                                   "content_block": {"type": "text", "text": ""}}))
            text = block["text"]
            half = len(text) // 2
            for piece in (text[:half], text[half:]):
                if piece:
                    events.append(("content_block_delta", {"type": "content_block_delta", "index": i,
                                                           "delta": {"type": "text_delta", "text": piece}}))
        else:
            events.append(("content_block_start", {"type": "content_block_start", "index": i,
                                                   "content_block": {"type": "tool_use", "id": block["id"],
                                                                     "name": block["name"], "input": {}}}))
            raw = json.dumps(block["input"])
            half = len(raw) // 2
            for piece in (raw[:half], raw[half:]):
                if piece:
                    events.append(("content_block_delta", {"type": "content_block_delta", "index": i,
                                                           "delta": {"type": "input_json_delta", "partial_json": piece}}))
        events.append(("content_block_stop", {"type": "content_block_stop", "index": i}))
    events.append(("message_delta", {"type": "message_delta",
                                     "delta": {"stop_reason": msg["stop_reason"], "stop_sequence": None},
                                     "usage": msg["usage"]}))
    events.append(("message_stop", {"type": "message_stop"}))
    return events


def error_body(fault: Fault) -> dict[str, Any]:
    """The Messages API error body for ``fault``."""
    kind = fault.error_type or ERROR_TYPES.get(fault.status, "api_error" if fault.status >= 500 else "invalid_request_error")
    return {"type": "error", "error": {"type": kind, "message": fault.message or f"scripted {fault.status} error"}}
