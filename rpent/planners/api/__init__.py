"""``--planner api``: Anthropic Messages (``anthropic:<id>``), OpenAI Responses
(``openai:<id>``) and OpenAI-compatible Chat Completions (``openai-chat:<id>``) on the
official SDKs. See :mod:`rpent.planners.api.planner`."""

from rpent.planners.api.planner import ApiPlanner

__all__ = ["ApiPlanner"]
