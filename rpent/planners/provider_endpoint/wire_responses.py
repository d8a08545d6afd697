"""OpenAI Responses API wire format (``POST /v1/responses``) for the local endpoint.

Follows the public Responses API reference: the ``response`` object with ``output``
items (``reasoning``, ``message`` with ``output_text``, ``function_call``), the error
body ``{"error": {"message", "type", "code", "param"}}`` and the SSE stream the codex
CLI consumes: ``response.created``, ``response.in_progress``, per item
``response.output_item.added`` … (``response.reasoning_summary_text.delta``,
``response.output_text.delta``, ``response.function_call_arguments.delta`` and their
``.done``) … ``response.output_item.done``, then ``response.completed`` carrying the
full response with ``usage``. Every event has a ``sequence_number``.
"""

from __future__ import annotations

import json
import time
from typing import Any

from rpent.planners.provider_endpoint.script import Fault, SeenToolResult, Turn
from rpent.planners.provider_endpoint.wire_common import new_id, resolved_calls

__all__ = ["error_body", "namespace_map", "offered_tool_names", "parse", "reply_events", "reply_response"]

_ERROR_TYPES = {400: "invalid_request_error", 401: "invalid_api_key", 403: "permission_denied",
                404: "not_found", 429: "rate_limit_exceeded", 500: "server_error", 503: "server_error"}


def offered_tool_names(tools: list[Any]) -> list[str]:
    """Function names offered in ``tools``; namespaced groups yield ``<ns>__<name>``."""
    names = []
    for t in tools or []:
        if not isinstance(t, dict):
            continue
        if isinstance(t.get("tools"), list):
            prefix = t.get("name") or t.get("namespace") or ""
            for sub in offered_tool_names(t["tools"]):
                names.append(f"{prefix}__{sub}" if prefix and not sub.startswith(prefix) else sub)
        elif t.get("name"):
            names.append(t["name"])
    return names


def namespace_map(tools: list[Any]) -> dict[str, tuple[str, str]]:
    """Qualified name -> (namespace, function name) for tools offered inside
    ``{"type": "namespace", "name": ns, "tools": [...]}`` groups (the codex CLI offers
    MCP tools this way: namespace ``mcp__rpent``, function ``move_to``)."""
    out: dict[str, tuple[str, str]] = {}
    for t in tools or []:
        if isinstance(t, dict) and isinstance(t.get("tools"), list) and t.get("name"):
            for sub in t["tools"]:
                if isinstance(sub, dict) and sub.get("name"):
                    out[f"{t['name']}__{sub['name']}"] = (t["name"], sub["name"])
    return out


def _count_images(obj: Any) -> tuple[int, int]:
    count = size = 0
    if isinstance(obj, dict):
        if obj.get("type") in ("input_image", "image_url"):
            count += 1
            url = obj.get("image_url")
            if isinstance(url, dict):
                url = url.get("url")
            size += len(str(url or obj.get("file_id") or ""))
        for v in obj.values():
            c, s = _count_images(v)
            count, size = count + c, size + s
    elif isinstance(obj, list):
        for v in obj:
            c, s = _count_images(v)
            count, size = count + c, size + s
    return count, size


def _output_text(output: Any) -> str:
    if isinstance(output, str):
        return output
    parts = []
    for part in output or []:
        if isinstance(part, dict) and part.get("type") in ("input_text", "output_text", "text"):
            parts.append(part.get("text", ""))
    return "\n".join(parts)


def parse(body: dict[str, Any]) -> dict[str, Any]:
    """Extract tool names, last-turn tool results, image counts and user text from a request."""
    items = body.get("input")
    if isinstance(items, str):
        items = [{"type": "message", "role": "user", "content": items}]
    items = items or []
    last_assistant = -1
    for i, item in enumerate(items):
        if item.get("type") in ("function_call", "reasoning", "custom_tool_call") or (
                item.get("role") == "assistant"):
            last_assistant = i
    tail = items[last_assistant + 1:]
    results, texts = [], []
    for item in tail:
        if item.get("type") in ("function_call_output", "custom_tool_call_output"):
            out = item.get("output")
            images, _ = _count_images(out)
            results.append(SeenToolResult(call_id=item.get("call_id", ""), text=_output_text(out),
                                          image_count=images))
        elif item.get("role") == "user":
            texts.append(_output_text(item.get("content")))
    images, image_bytes = _count_images(items)
    return {"tool_names": offered_tool_names(body.get("tools") or []), "tool_results": results,
            "image_count": images, "image_bytes": image_bytes, "last_user_text": "\n".join(texts)}


def _items(turn: Turn, offered: list[str], namespaces: dict[str, tuple[str, str]]) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    if turn.thinking:
        items.append({"type": "reasoning", "id": new_id("rs_"),
                      "summary": [{"type": "summary_text", "text": turn.thinking}]})
    if turn.text:
        items.append({"type": "message", "id": new_id("msg_"), "status": "completed", "role": "assistant",
                      "content": [{"type": "output_text", "text": turn.text, "annotations": []}]})
    for call in resolved_calls(turn, offered, "call_"):
        item = {"type": "function_call", "id": new_id("fc_"), "call_id": call.id, "name": call.name,
                "arguments": json.dumps(call.args), "status": "completed"}
        if call.name in namespaces:
            item["namespace"], item["name"] = namespaces[call.name]
        items.append(item)
    return items


def _usage(u: dict[str, int]) -> dict[str, Any]:
    total_in = u["input_tokens"] + u["cache_read_tokens"] + u["cache_write_tokens"]
    return {"input_tokens": total_in, "input_tokens_details": {"cached_tokens": u["cache_read_tokens"]},
            "output_tokens": u["output_tokens"], "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": total_in + u["output_tokens"]}


def reply_response(turn: Turn, model: str, offered: list[str], usage: dict[str, int],
                   namespaces: dict[str, tuple[str, str]] | None = None) -> dict[str, Any]:
    """The non-streaming ``response`` object for ``turn``; calls to namespaced tools carry
    ``namespace`` and the bare function ``name``."""
    return {"id": new_id("resp_"), "object": "response", "created_at": int(time.time()), "status": "completed",
            "model": model, "output": _items(turn, offered, namespaces or {}), "usage": _usage(usage),
            "parallel_tool_calls": True, "tool_choice": "auto", "tools": [], "error": None,
            "incomplete_details": None, "instructions": None, "metadata": {}, "temperature": 1.0,
            "top_p": 1.0, "text": {"format": {"type": "text"}}}


def reply_events(turn: Turn, model: str, offered: list[str], usage: dict[str, int],
                 namespaces: dict[str, tuple[str, str]] | None = None) -> list[tuple[str, dict[str, Any]]]:
    """The SSE events (name, data) for ``turn``, ending with ``response.completed``."""
    final = reply_response(turn, model, offered, usage, namespaces)
    pending = dict(final, status="in_progress", output=[], usage=None)
    events: list[tuple[str, dict[str, Any]]] = [
        ("response.created", {"type": "response.created", "response": pending}),
        ("response.in_progress", {"type": "response.in_progress", "response": pending}),
    ]
    for idx, item in enumerate(final["output"]):
        kind = item["type"]
        if kind == "reasoning":
            events.append(("response.output_item.added", {"type": "response.output_item.added", "output_index": idx,
                                                          "item": dict(item, summary=[])}))
            text = item["summary"][0]["text"]
            common = {"item_id": item["id"], "output_index": idx, "summary_index": 0}
            events.append(("response.reasoning_summary_part.added", dict(
                common, type="response.reasoning_summary_part.added", part={"type": "summary_text", "text": ""})))
            events.append(("response.reasoning_summary_text.delta", dict(
                common, type="response.reasoning_summary_text.delta", delta=text)))
            events.append(("response.reasoning_summary_text.done", dict(
                common, type="response.reasoning_summary_text.done", text=text)))
            events.append(("response.reasoning_summary_part.done", dict(
                common, type="response.reasoning_summary_part.done", part={"type": "summary_text", "text": text})))
        elif kind == "message":
            text = item["content"][0]["text"]
            events.append(("response.output_item.added", {"type": "response.output_item.added", "output_index": idx,
                                                          "item": dict(item, status="in_progress", content=[])}))
            common = {"item_id": item["id"], "output_index": idx, "content_index": 0}
            events.append(("response.content_part.added", dict(
                common, type="response.content_part.added",
                part={"type": "output_text", "text": "", "annotations": []})))
            half = len(text) // 2
            for piece in (text[:half], text[half:]):
                if piece:
                    events.append(("response.output_text.delta", dict(
                        common, type="response.output_text.delta", delta=piece, logprobs=[])))
            events.append(("response.output_text.done", dict(common, type="response.output_text.done",
                                                             text=text, logprobs=[])))
            events.append(("response.content_part.done", dict(common, type="response.content_part.done",
                                                              part=item["content"][0])))
        else:
            events.append(("response.output_item.added", {"type": "response.output_item.added", "output_index": idx,
                                                          "item": dict(item, arguments="", status="in_progress")}))
            common = {"item_id": item["id"], "output_index": idx}
            events.append(("response.function_call_arguments.delta", dict(
                common, type="response.function_call_arguments.delta", delta=item["arguments"])))
            events.append(("response.function_call_arguments.done", dict(
                common, type="response.function_call_arguments.done", arguments=item["arguments"],
                name=item["name"])))
        events.append(("response.output_item.done", {"type": "response.output_item.done", "output_index": idx,
                                                     "item": item}))
    events.append(("response.completed", {"type": "response.completed", "response": final}))
    for seq, (_, data) in enumerate(events):
        data["sequence_number"] = seq
    return events


def error_body(fault: Fault) -> dict[str, Any]:
    """The OpenAI error body for ``fault`` (shared by Responses and Chat Completions)."""
    kind = fault.error_type or _ERROR_TYPES.get(fault.status, "server_error" if fault.status >= 500 else "invalid_request_error")
    return {"error": {"message": fault.message or f"scripted {fault.status} error", "type": kind,
                      "param": None, "code": kind}}
