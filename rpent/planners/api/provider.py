"""The provider-adapter contract of the api planner.

An adapter turns the neutral conversation (see :mod:`rpent.planners.content`) into one
wire request on an official SDK and the reply back into neutral blocks. Neutral
messages::

    {"role": "user", "content": [text | image blocks]}
    {"role": "assistant", "content": [text | thinking | tool_use blocks]}
    {"role": "tool", "tool_call_id": str, "name": str, "content": [text | image], "is_error": bool}

Assistant blocks: ``{"type": "text", "text"}``, ``{"type": "thinking", "thinking",
"signature"?, "provider_item"?}`` (``provider_item`` is the provider's opaque reasoning
item, replayed verbatim), ``{"type": "tool_use", "id", "name", "input",
"input_error"?}`` (``input_error`` when the arguments were not a JSON object).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from rpent.planners.tool_defs import ToolDef, tool_defs

__all__ = ["ModelReply", "ProviderAdapter", "ToolDef", "make_adapter", "tool_defs"]


@dataclass
class ModelReply:
    """One model reply in neutral form.

    Attributes:
        content: assistant blocks (text, thinking, tool_use).
        stop_reason: provider stop reason (``tool_use``/``end_turn``/``max_tokens``/…).
        usage: ``{"input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens"}``
            with ``input_tokens`` excluding cache reads/writes.
        raw: the provider's reply as a JSON-able dict (for the trajectory recorder).
    """

    content: list[dict[str, Any]]
    stop_reason: str
    usage: dict[str, int] = field(default_factory=dict)
    raw: dict[str, Any] = field(default_factory=dict)


class ProviderAdapter(Protocol):
    """One provider wire API on its official SDK."""

    provider: str
    model: str

    def params(self) -> dict[str, Any]:
        """Request parameters other than messages/tools (for events and logs)."""
        ...

    def send(self, system: str, messages: list[dict[str, Any]], tools: list[ToolDef], *,
             timeout_s: float) -> ModelReply:
        """Send one request and return the reply.

        Raises:
            Exception: whatever the SDK raises (the planner normalises it with
                :func:`rpent.planners.api.errors.from_sdk_exception`).
        """
        ...


def make_adapter(provider: str, model: str, *, api_key: str, base_url: str | None, max_tokens: int,
                 reasoning_effort: str | None) -> ProviderAdapter:
    """Build the adapter for ``provider`` (imports its SDK lazily).

    Raises:
        ValueError: unknown provider.
    """
    if provider == "anthropic":
        from rpent.planners.api.anthropic_messages import AnthropicMessagesAdapter
        return AnthropicMessagesAdapter(model, api_key=api_key, base_url=base_url, max_tokens=max_tokens,
                                        reasoning_effort=reasoning_effort)
    if provider == "openai":
        from rpent.planners.api.openai_responses import OpenAIResponsesAdapter
        return OpenAIResponsesAdapter(model, api_key=api_key, base_url=base_url, max_tokens=max_tokens,
                                      reasoning_effort=reasoning_effort)
    if provider == "openai-chat":
        from rpent.planners.api.openai_chat import OpenAIChatAdapter
        return OpenAIChatAdapter(model, api_key=api_key, base_url=base_url, max_tokens=max_tokens,
                                 reasoning_effort=reasoning_effort)
    raise ValueError(f"unknown provider {provider!r}")
