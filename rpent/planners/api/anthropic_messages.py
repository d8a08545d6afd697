"""Anthropic Messages API adapter (official ``anthropic`` SDK, streaming request).

Conversion (public Messages API reference):

* consecutive ``tool``/``user`` messages merge into one ``user`` message; tool results
  become ``tool_result`` blocks (text + base64 PNG ``image`` blocks, ``is_error``),
  placed before any operator text, as the API requires;
* assistant ``thinking`` blocks are replayed with their ``signature`` (required when
  extended thinking is on); unsigned ones are dropped;
* prompt caching: ``cache_control: {"type": "ephemeral"}`` on the system block, the
  last tool definition and the last block of the last message (3 of the 4 allowed
  breakpoints) — caches instructions, tools and the conversation prefix;
* ``--reasoning-effort`` low/medium/high/xhigh -> ``thinking`` with a token budget of
  1024/4096/8192/16384, clipped to ``max_tokens - 1024``; ``none`` or unset -> no thinking.

The request is streamed (``messages.stream`` + ``get_final_message``) so large
``max_tokens`` values never hit the SDK's non-streaming time limit.
"""

from __future__ import annotations

from typing import Any

from rpent.planners.api.provider import ModelReply, ToolDef
from rpent.planners.content import b64

__all__ = ["THINKING_BUDGETS", "AnthropicMessagesAdapter", "to_anthropic_messages"]

THINKING_BUDGETS = {"low": 1024, "medium": 4096, "high": 8192, "xhigh": 16384}
_CACHE = {"type": "ephemeral"}


def _tool_result_block(msg: dict[str, Any]) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    for b in msg["content"]:
        if b["type"] == "text":
            if b["text"]:
                content.append({"type": "text", "text": b["text"]})
        elif b["type"] == "image":
            content.append({"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                                        "data": b64(b["png"])}})
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": msg["tool_call_id"],
                             "content": content or [{"type": "text", "text": "(empty result)"}]}
    if msg.get("is_error"):
        block["is_error"] = True
    return block


def _user_blocks(msg: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for b in msg["content"]:
        if b["type"] == "text" and b["text"]:
            out.append({"type": "text", "text": b["text"]})
        elif b["type"] == "image":
            out.append({"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                                    "data": b64(b["png"])}})
    return out


def _assistant_blocks(msg: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for b in msg["content"]:
        if b["type"] == "text" and b["text"]:
            out.append({"type": "text", "text": b["text"]})
        elif b["type"] == "thinking" and b.get("signature"):
            out.append({"type": "thinking", "thinking": b["thinking"], "signature": b["signature"]})
        elif b["type"] == "redacted_thinking":
            out.append({"type": "redacted_thinking", "data": b["data"]})
        elif b["type"] == "tool_use":
            out.append({"type": "tool_use", "id": b["id"], "name": b["name"], "input": b.get("input") or {}})
    return out or [{"type": "text", "text": "(no content)"}]


def to_anthropic_messages(messages: list[dict[str, Any]], cache: bool = True) -> list[dict[str, Any]]:
    """Neutral messages -> Messages API ``messages`` (see the module docstring)."""
    out: list[dict[str, Any]] = []
    for msg in messages:
        if msg["role"] == "assistant":
            out.append({"role": "assistant", "content": _assistant_blocks(msg)})
            continue
        blocks = [_tool_result_block(msg)] if msg["role"] == "tool" else _user_blocks(msg)
        if out and out[-1]["role"] == "user":
            prev = out[-1]["content"]
            if msg["role"] == "tool":  # tool_result blocks must come before any text
                n = sum(1 for b in prev if b["type"] == "tool_result")
                prev[n:n] = blocks
            else:
                prev.extend(blocks)
        else:
            out.append({"role": "user", "content": blocks})
    if cache and out and out[-1]["content"]:
        out[-1]["content"][-1] = dict(out[-1]["content"][-1], cache_control=_CACHE)
    return out


class AnthropicMessagesAdapter:
    """``anthropic:<id>``: Messages API via ``anthropic.Anthropic`` (SDK retries off; the
    planner retries)."""

    provider = "anthropic"

    def __init__(self, model: str, *, api_key: str, base_url: str | None, max_tokens: int,
                 reasoning_effort: str | None) -> None:
        import anthropic

        self.model = model
        self.max_tokens = max_tokens
        self.thinking: dict[str, Any] | None = None
        if reasoning_effort and reasoning_effort != "none":
            budget = min(THINKING_BUDGETS[reasoning_effort], max_tokens - 1024)
            if budget < 1024:
                raise ValueError(f"--reasoning-effort {reasoning_effort} needs --max-tokens >= 2048 "
                                 f"(thinking budget >= 1024 tokens plus room for the answer)")
            self.thinking = {"type": "enabled", "budget_tokens": budget}
        self.client = anthropic.Anthropic(api_key=api_key, base_url=base_url, max_retries=0)

    def params(self) -> dict[str, Any]:
        """``max_tokens`` and ``thinking`` as sent."""
        return {"max_tokens": self.max_tokens, "thinking": self.thinking, "prompt_caching": True}

    def build(self, system: str, messages: list[dict[str, Any]], tools: list[ToolDef]) -> dict[str, Any]:
        """The keyword arguments of ``messages.stream`` (exposed for tests)."""
        wire_tools = [{"name": t.name, "description": t.description, "input_schema": t.input_schema}
                      for t in tools]
        if wire_tools:
            wire_tools[-1] = dict(wire_tools[-1], cache_control=_CACHE)
        req: dict[str, Any] = {"model": self.model, "max_tokens": self.max_tokens,
                               "system": [{"type": "text", "text": system, "cache_control": _CACHE}],
                               "messages": to_anthropic_messages(messages), "tools": wire_tools}
        if self.thinking:
            req["thinking"] = self.thinking
        return req

    def send(self, system: str, messages: list[dict[str, Any]], tools: list[ToolDef], *,
             timeout_s: float) -> ModelReply:
        """Stream one request and return the final message in neutral form."""
        with self.client.messages.stream(**self.build(system, messages, tools), timeout=timeout_s) as stream:
            msg = stream.get_final_message()
        content: list[dict[str, Any]] = []
        for block in msg.content:
            kind = block.type
            if kind == "text":
                content.append({"type": "text", "text": block.text})
            elif kind == "thinking":
                content.append({"type": "thinking", "thinking": block.thinking, "signature": block.signature})
            elif kind == "redacted_thinking":
                content.append({"type": "redacted_thinking", "data": block.data})
            elif kind == "tool_use":
                args = block.input if isinstance(block.input, dict) else None
                entry = {"type": "tool_use", "id": block.id, "name": block.name, "input": args or {}}
                if args is None:
                    entry["input_error"] = f"tool input is not a JSON object: {block.input!r}"
                content.append(entry)
        u = msg.usage
        usage = {"input_tokens": u.input_tokens or 0, "output_tokens": u.output_tokens or 0,
                 "cache_read_tokens": getattr(u, "cache_read_input_tokens", 0) or 0,
                 "cache_write_tokens": getattr(u, "cache_creation_input_tokens", 0) or 0}
        return ModelReply(content=content, stop_reason=msg.stop_reason or "", usage=usage,
                          raw=msg.model_dump(mode="json", exclude_none=True))
