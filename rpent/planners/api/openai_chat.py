"""OpenAI-compatible Chat Completions adapter (``openai-chat:<id>``: vLLM, llama.cpp,
GLM, … through the official ``openai`` SDK).

Conversion (public Chat Completions reference):

* system prompt -> a ``system`` message;
* assistant -> ``{"role": "assistant", "content", "tool_calls": [{"id", "type":
  "function", "function": {"name", "arguments"}}]}``;
* tool results -> ``{"role": "tool", "tool_call_id", "content": <JSON text>}``; their
  images follow in one ``user`` message of ``text`` + ``image_url`` (data URL) parts,
  since tool messages are text-only on most servers;
* thinking arrives as ``reasoning_content`` (vLLM/DeepSeek convention) and is recorded,
  not replayed; ``--reasoning-effort`` -> ``reasoning_effort``;
* ``max_tokens`` (the field every compatible server accepts).
"""

from __future__ import annotations

import json
from typing import Any

from rpent.planners.api.provider import ModelReply, ToolDef
from rpent.planners.content import b64
from rpent.planners.api.openai_client import OpenAIClientBase

__all__ = ["OpenAIChatAdapter", "to_chat_messages"]


def _images_message(pending: list[tuple[str, str, dict[str, Any]]]) -> dict[str, Any]:
    parts: list[dict[str, Any]] = []
    for call_id, name, img in pending:
        parts.append({"type": "text", "text": f"Image '{img.get('label', '')}' returned by tool call {call_id} ({name}):"})
        parts.append({"type": "image_url", "image_url": {"url": f"data:image/png;base64,{b64(img['png'])}"}})
    return {"role": "user", "content": parts}


def to_chat_messages(system: str, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Neutral messages -> Chat Completions ``messages`` (see the module docstring)."""
    out: list[dict[str, Any]] = [{"role": "system", "content": system}]
    pending: list[tuple[str, str, dict[str, Any]]] = []
    for msg in messages:
        if msg["role"] != "tool" and pending:
            out.append(_images_message(pending))
            pending = []
        if msg["role"] == "user":
            parts: list[dict[str, Any]] = []
            for b in msg["content"]:
                if b["type"] == "text" and b["text"]:
                    parts.append({"type": "text", "text": b["text"]})
                elif b["type"] == "image":
                    parts.append({"type": "image_url", "image_url": {"url": f"data:image/png;base64,{b64(b['png'])}"}})
            only_text = all(p["type"] == "text" for p in parts)
            out.append({"role": "user", "content": "\n".join(p["text"] for p in parts) if only_text else parts})
        elif msg["role"] == "assistant":
            text = "\n".join(b["text"] for b in msg["content"] if b["type"] == "text" and b["text"])
            entry: dict[str, Any] = {"role": "assistant", "content": text or None}
            calls = [{"id": b["id"], "type": "function",
                      "function": {"name": b["name"],
                                   "arguments": b.get("raw_arguments") or json.dumps(b.get("input") or {})}}
                     for b in msg["content"] if b["type"] == "tool_use"]
            if calls:
                entry["tool_calls"] = calls
            out.append(entry)
        else:
            text = "\n".join(b["text"] for b in msg["content"] if b["type"] == "text")
            out.append({"role": "tool", "tool_call_id": msg["tool_call_id"], "content": text})
            pending.extend((msg["tool_call_id"], msg.get("name", ""), b) for b in msg["content"]
                           if b["type"] == "image")
    if pending:
        out.append(_images_message(pending))
    return out


class OpenAIChatAdapter(OpenAIClientBase):
    """``openai-chat:<id>``: Chat Completions via ``openai.OpenAI`` (SDK retries off)."""

    provider = "openai-chat"

    def params(self) -> dict[str, Any]:
        """``max_tokens`` and ``reasoning_effort`` as sent."""
        return {"max_tokens": self.max_tokens, "reasoning_effort": self.reasoning_effort}

    def build(self, system: str, messages: list[dict[str, Any]], tools: list[ToolDef]) -> dict[str, Any]:
        """The keyword arguments of ``chat.completions.create`` (exposed for tests)."""
        req: dict[str, Any] = {
            "model": self.model, "messages": to_chat_messages(system, messages), "max_tokens": self.max_tokens,
            "tools": [{"type": "function", "function": {"name": t.name, "description": t.description,
                                                        "parameters": t.input_schema}} for t in tools],
        }
        if self.reasoning_effort:
            req["reasoning_effort"] = self.reasoning_effort
        return req

    def send(self, system: str, messages: list[dict[str, Any]], tools: list[ToolDef], *,
             timeout_s: float) -> ModelReply:
        """Send one request and return the reply in neutral form."""
        resp = self.client.chat.completions.create(**self.build(system, messages, tools), timeout=timeout_s)
        if not resp.choices:
            raise ValueError("chat completion has no choices")
        choice = resp.choices[0]
        msg = choice.message
        content: list[dict[str, Any]] = []
        reasoning = getattr(msg, "reasoning_content", None) or (msg.model_extra or {}).get("reasoning_content")
        if reasoning:
            content.append({"type": "thinking", "thinking": str(reasoning)})
        if msg.content:
            content.append({"type": "text", "text": msg.content})
        for call in msg.tool_calls or []:
            fn = call.function
            try:
                args = json.loads(fn.arguments or "{}")
            except ValueError:
                args = None
            entry = {"type": "tool_use", "id": call.id, "name": fn.name, "input": args if isinstance(args, dict) else {}}
            if not isinstance(args, dict):
                entry["input_error"] = f"tool arguments are not a JSON object: {fn.arguments!r}"
                entry["raw_arguments"] = fn.arguments
            content.append(entry)
        u = resp.usage
        cached = (getattr(getattr(u, "prompt_tokens_details", None), "cached_tokens", 0) or 0) if u else 0
        usage = {"input_tokens": max(0, (u.prompt_tokens if u else 0) - cached),
                 "output_tokens": u.completion_tokens if u else 0, "cache_read_tokens": cached,
                 "cache_write_tokens": 0}
        return ModelReply(content=content, stop_reason=choice.finish_reason or "", usage=usage,
                          raw=resp.model_dump(mode="json", exclude_none=True))
