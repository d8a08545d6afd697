"""OpenAI Responses API adapter (official ``openai`` SDK, stateless requests).

Conversion (public Responses API reference):

* system prompt -> ``instructions``; the conversation is resent as ``input`` items
  each request (``store=False``), so any Responses-compatible server works;
* assistant text -> ``message`` items (``output_text``), tool calls ->
  ``function_call`` items, reasoning -> the provider's ``reasoning`` item replayed
  verbatim (with ``include=["reasoning.encrypted_content"]`` when reasoning is on);
* tool results -> ``function_call_output`` items carrying the JSON text; their images
  follow in one ``user`` message (``input_text`` naming the call + ``input_image``
  data URLs), because text-only ``output`` is what every compatible server accepts;
* ``--reasoning-effort`` -> ``reasoning: {"effort": …}``; unset -> not sent.
"""

from __future__ import annotations

import json
from typing import Any

from rpent.planners.api.provider import ModelReply, ToolDef
from rpent.planners.content import b64
from rpent.planners.api.openai_client import OpenAIClientBase

__all__ = ["OpenAIResponsesAdapter", "to_responses_input"]


def _images_message(pending: list[tuple[str, str, dict[str, Any]]]) -> dict[str, Any]:
    parts: list[dict[str, Any]] = []
    for call_id, name, img in pending:
        parts.append({"type": "input_text", "text": f"Image '{img.get('label', '')}' returned by tool call "
                                                    f"{call_id} ({name}):"})
        parts.append({"type": "input_image", "image_url": f"data:image/png;base64,{b64(img['png'])}",
                      "detail": "auto"})
    return {"role": "user", "content": parts}


def to_responses_input(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Neutral messages -> Responses ``input`` items (see the module docstring)."""
    items: list[dict[str, Any]] = []
    pending: list[tuple[str, str, dict[str, Any]]] = []
    for msg in messages:
        if msg["role"] != "tool" and pending:
            items.append(_images_message(pending))
            pending = []
        if msg["role"] == "user":
            parts: list[dict[str, Any]] = []
            for b in msg["content"]:
                if b["type"] == "text" and b["text"]:
                    parts.append({"type": "input_text", "text": b["text"]})
                elif b["type"] == "image":
                    parts.append({"type": "input_image", "image_url": f"data:image/png;base64,{b64(b['png'])}",
                                  "detail": "auto"})
            items.append({"role": "user", "content": parts})
        elif msg["role"] == "assistant":
            for b in msg["content"]:
                if b["type"] == "thinking" and b.get("provider_item"):
                    items.append(b["provider_item"])
                elif b["type"] == "text" and b["text"]:
                    items.append({"type": "message", "role": "assistant",
                                  "content": [{"type": "output_text", "text": b["text"]}]})
                elif b["type"] == "tool_use":
                    items.append({"type": "function_call", "call_id": b["id"], "name": b["name"],
                                  "arguments": b.get("raw_arguments") or json.dumps(b.get("input") or {})})
        else:
            text = "\n".join(b["text"] for b in msg["content"] if b["type"] == "text")
            items.append({"type": "function_call_output", "call_id": msg["tool_call_id"], "output": text})
            pending.extend((msg["tool_call_id"], msg.get("name", ""), b) for b in msg["content"]
                           if b["type"] == "image")
    if pending:
        items.append(_images_message(pending))
    return items


class OpenAIResponsesAdapter(OpenAIClientBase):
    """``openai:<id>``: Responses API via ``openai.OpenAI`` (SDK retries off)."""

    provider = "openai"

    def params(self) -> dict[str, Any]:
        """``max_output_tokens`` and ``reasoning`` as sent."""
        return {"max_output_tokens": self.max_tokens,
                "reasoning": {"effort": self.reasoning_effort} if self.reasoning_effort else None}

    def build(self, system: str, messages: list[dict[str, Any]], tools: list[ToolDef]) -> dict[str, Any]:
        """The keyword arguments of ``responses.create`` (exposed for tests)."""
        req: dict[str, Any] = {
            "model": self.model, "instructions": system, "input": to_responses_input(messages),
            "tools": [{"type": "function", "name": t.name, "description": t.description,
                       "parameters": t.input_schema, "strict": False} for t in tools],
            "max_output_tokens": self.max_tokens, "store": False,
        }
        if self.reasoning_effort:
            req["reasoning"] = {"effort": self.reasoning_effort}
            if self.reasoning_effort != "none":
                req["include"] = ["reasoning.encrypted_content"]
        return req

    def send(self, system: str, messages: list[dict[str, Any]], tools: list[ToolDef], *,
             timeout_s: float) -> ModelReply:
        """Send one request and return the reply in neutral form."""
        resp = self.client.responses.create(**self.build(system, messages, tools), timeout=timeout_s)
        content: list[dict[str, Any]] = []
        for item in resp.output or []:
            kind = getattr(item, "type", "")
            if kind == "reasoning":
                texts = [s.text for s in (item.summary or [])] + [c.text for c in (getattr(item, "content", None) or [])]
                content.append({"type": "thinking", "thinking": "\n".join(t for t in texts if t),
                                "provider_item": item.model_dump(mode="json", exclude_none=True)})
            elif kind == "message":
                for part in item.content or []:
                    if getattr(part, "type", "") == "output_text":
                        content.append({"type": "text", "text": part.text})
                    elif getattr(part, "type", "") == "refusal":
                        content.append({"type": "text", "text": f"[refusal] {part.refusal}"})
            elif kind == "function_call":
                try:
                    args = json.loads(item.arguments or "{}")
                except ValueError:
                    args = None
                entry = {"type": "tool_use", "id": item.call_id, "name": item.name,
                         "input": args if isinstance(args, dict) else {}}
                if not isinstance(args, dict):
                    entry["input_error"] = f"tool arguments are not a JSON object: {item.arguments!r}"
                    entry["raw_arguments"] = item.arguments
                content.append(entry)
        u = resp.usage
        cached = (getattr(getattr(u, "input_tokens_details", None), "cached_tokens", 0) or 0) if u else 0
        usage = {"input_tokens": max(0, (u.input_tokens if u else 0) - cached),
                 "output_tokens": u.output_tokens if u else 0, "cache_read_tokens": cached, "cache_write_tokens": 0}
        stop = "tool_use" if any(b["type"] == "tool_use" for b in content) else (resp.status or "completed")
        return ModelReply(content=content, stop_reason=stop, usage=usage,
                          raw=resp.model_dump(mode="json", exclude_none=True))
