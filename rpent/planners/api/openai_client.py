"""What the two OpenAI adapters (Responses, Chat Completions) share: the SDK client."""

from __future__ import annotations

__all__ = ["OpenAIClientBase"]


class OpenAIClientBase:
    """Holds the model, limits and an ``openai.OpenAI`` client with SDK retries off (the api
    planner retries itself, with backoff and ``llm_errors.jsonl``).

    Args:
        model: provider model id; api_key, base_url: from ``resolve_provider``;
        max_tokens: ``--max-tokens`` per response; reasoning_effort: ``--reasoning-effort`` or None.
    """

    def __init__(self, model: str, *, api_key: str, base_url: str | None, max_tokens: int,
                 reasoning_effort: str | None) -> None:
        import openai

        self.model = model
        self.max_tokens = max_tokens
        self.reasoning_effort = reasoning_effort
        self.client = openai.OpenAI(api_key=api_key, base_url=base_url, max_retries=0)
