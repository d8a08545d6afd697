"""Helpers shared by the three wire formats of the local provider endpoint: ids,
token-count estimates and the reply-content model.

Token counts are *estimates* (4 bytes of request JSON per token, the usual rule of
thumb), so planners' usage bookkeeping can be asserted against deterministic numbers.
"""

from __future__ import annotations

import itertools
import json
import secrets
from typing import Any

from rpent.planners.provider_endpoint.script import ToolCall, Turn, resolve_tool_name

__all__ = ["estimate_tokens", "new_id", "reply_usage", "resolved_calls"]

_counter = itertools.count(1)


def new_id(prefix: str) -> str:
    """A unique id such as ``toolu_0001a3f9…`` (prefix + counter + random hex)."""
    return f"{prefix}{next(_counter):04d}{secrets.token_hex(6)}"


def estimate_tokens(obj: Any) -> int:
    """Token estimate of a JSON-able object or string: ceil(bytes / 4), at least 1."""
    raw = obj if isinstance(obj, str) else json.dumps(obj, separators=(",", ":"))
    return max(1, (len(raw.encode("utf-8")) + 3) // 4)


IMAGE_TOKENS = 1600
"""Tokens counted per image block (about a 1092x1092 image in Anthropic's (w*h)/750 rule);
image bytes themselves are not counted as text."""


def _strip_images(obj: Any) -> tuple[Any, int]:
    """Copy of ``obj`` with base64 image payloads blanked, and the number of images."""
    if isinstance(obj, dict):
        kind = obj.get("type")
        if kind in ("image", "input_image", "image_url"):
            return {k: v for k, v in obj.items() if k not in ("source", "image_url", "data")}, 1
        out, n = {}, 0
        for k, v in obj.items():
            out[k], c = _strip_images(v)
            n += c
        return out, n
    if isinstance(obj, list):
        items = [_strip_images(v) for v in obj]
        return [i for i, _ in items], sum(c for _, c in items)
    return obj, 0


def reply_usage(turn: Turn, body: dict[str, Any], cached_prefix_tokens: int, first_cached: bool) -> dict[str, int]:
    """Usage numbers for one reply (estimates: text bytes / 4, plus :data:`IMAGE_TOKENS`
    per image block).

    Args:
        turn: the scripted turn (``turn.usage`` overrides the estimate key by key).
        body: the request body (its size drives ``input_tokens``).
        cached_prefix_tokens: tokens of the cacheable prefix (system + tools) when the
            request asked for prompt caching, else 0.
        first_cached: True when this is the first request with that prefix
            (reported as a cache write; later ones as cache reads).

    Returns:
        ``{"input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens"}``
        where ``input_tokens`` excludes the cached prefix (the Anthropic convention).
    """
    out_parts = [turn.text or "", turn.thinking or ""] + [json.dumps(c.args) + c.name for c in turn.tool_calls]
    text_body, images = _strip_images(body)
    total_in = estimate_tokens(text_body) + IMAGE_TOKENS * images
    usage = {
        "input_tokens": max(1, total_in - cached_prefix_tokens),
        "output_tokens": estimate_tokens("".join(out_parts)),
        "cache_read_tokens": 0 if first_cached else cached_prefix_tokens,
        "cache_write_tokens": cached_prefix_tokens if first_cached else 0,
    }
    usage.update(turn.usage or {})
    return usage


def resolved_calls(turn: Turn, offered: list[str], id_prefix: str) -> list[ToolCall]:
    """The turn's tool calls with names mapped onto the offered tools and ids filled in."""
    return [ToolCall(name=resolve_tool_name(c.name, offered), args=c.args, id=c.id or new_id(id_prefix))
            for c in turn.tool_calls]
