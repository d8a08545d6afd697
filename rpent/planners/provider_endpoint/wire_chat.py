"""OpenAI Chat Completions wire format (``POST /v1/chat/completions``) for the local
endpoint, as served by OpenAI-compatible servers (vLLM, llama.cpp, GLM …).

Non-streaming: a ``chat.completion`` with one choice whose message carries ``content``,
``tool_calls`` (``{"id", "type": "function", "function": {"name", "arguments"}}``) and,
for thinking, ``reasoning_content`` (the vLLM/DeepSeek convention). Streaming:
``chat.completion.chunk`` objects as ``data:`` lines, tool-call deltas indexed by
position, a final chunk with ``finish_reason``, a usage chunk when
``stream_options.include_usage`` is set, then ``data: [DONE]``.
"""

from __future__ import annotations

import json
import time
from typing import Any

from rpent.planners.provider_endpoint.script import SeenToolResult, Turn
from rpent.planners.provider_endpoint.wire_common import new_id, resolved_calls

__all__ = ["parse", "reply_chunks", "reply_completion"]


def _count_images(obj: Any) -> tuple[int, int]:
    count = size = 0
    if isinstance(obj, dict):
        if obj.get("type") in ("image_url", "input_image"):
            count += 1
            url = obj.get("image_url")
            size += len(str(url.get("url") if isinstance(url, dict) else url or ""))
        for v in obj.values():
            c, s = _count_images(v)
            count, size = count + c, size + s
    elif isinstance(obj, list):
        for v in obj:
            c, s = _count_images(v)
            count, size = count + c, size + s
    return count, size


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(p.get("text", "") for p in content or [] if isinstance(p, dict) and p.get("type") == "text")


def parse(body: dict[str, Any]) -> dict[str, Any]:
    """Extract tool names, last-turn tool results, image counts and user text from a request."""
    messages = body.get("messages") or []
    last_assistant = max((i for i, m in enumerate(messages) if m.get("role") == "assistant"), default=-1)
    results, texts = [], []
    for m in messages[last_assistant + 1:]:
        if m.get("role") == "tool":
            results.append(SeenToolResult(call_id=m.get("tool_call_id", ""), text=_text_of(m.get("content"))))
        elif m.get("role") == "user":
            texts.append(_text_of(m.get("content")))
    names = [(t.get("function") or {}).get("name", "") for t in body.get("tools") or [] if isinstance(t, dict)]
    images, image_bytes = _count_images(messages)
    return {"tool_names": names, "tool_results": results, "image_count": images,
            "image_bytes": image_bytes, "last_user_text": "\n".join(texts)}


def _usage(u: dict[str, int]) -> dict[str, Any]:
    prompt = u["input_tokens"] + u["cache_read_tokens"] + u["cache_write_tokens"]
    return {"prompt_tokens": prompt, "completion_tokens": u["output_tokens"],
            "total_tokens": prompt + u["output_tokens"],
            "prompt_tokens_details": {"cached_tokens": u["cache_read_tokens"]}}


def reply_completion(turn: Turn, model: str, offered: list[str], usage: dict[str, int]) -> dict[str, Any]:
    """The non-streaming ``chat.completion`` object for ``turn``."""
    calls = resolved_calls(turn, offered, "call_")
    message: dict[str, Any] = {"role": "assistant", "content": turn.text}
    if turn.thinking:
        message["reasoning_content"] = turn.thinking
    if calls:
        message["tool_calls"] = [{"id": c.id, "type": "function",
                                  "function": {"name": c.name, "arguments": json.dumps(c.args)}} for c in calls]
    return {"id": new_id("chatcmpl-"), "object": "chat.completion", "created": int(time.time()), "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop",
                         "logprobs": None}],
            "usage": _usage(usage)}


def reply_chunks(turn: Turn, model: str, offered: list[str], usage: dict[str, int],
                 include_usage: bool) -> list[dict[str, Any]]:
    """The ``chat.completion.chunk`` objects for ``turn`` (the caller appends ``[DONE]``)."""
    full = reply_completion(turn, model, offered, usage)
    base = {"id": full["id"], "object": "chat.completion.chunk", "created": full["created"], "model": model}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return dict(base, choices=[{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}])

    msg = full["choices"][0]["message"]
    chunks = [chunk({"role": "assistant", "content": ""})]
    if msg.get("reasoning_content"):
        chunks.append(chunk({"reasoning_content": msg["reasoning_content"]}))
    text = msg.get("content") or ""
    half = len(text) // 2
    for piece in (text[:half], text[half:]):
        if piece:
            chunks.append(chunk({"content": piece}))
    for i, call in enumerate(msg.get("tool_calls") or []):
        chunks.append(chunk({"tool_calls": [{"index": i, "id": call["id"], "type": "function",
                                             "function": {"name": call["function"]["name"], "arguments": ""}}]}))
        args = call["function"]["arguments"]
        half = len(args) // 2
        for piece in (args[:half], args[half:]):
            if piece:
                chunks.append(chunk({"tool_calls": [{"index": i, "function": {"arguments": piece}}]}))
    chunks.append(chunk({}, full["choices"][0]["finish_reason"]))
    if include_usage:
        chunks.append(dict(base, choices=[], usage=full["usage"]))
    return chunks
