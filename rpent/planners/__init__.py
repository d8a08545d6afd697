"""LLM planners: the runtimes that drive the tool-calling loop over a toolkit.

* :mod:`rpent.planners.base` — ``Planner`` protocol, ``PlannerConfig``, ``PlannerResult``,
  ``Steering``, and the lazy registry (``create_planner("api" | "claude_code" | "codex" | …)``).
* :mod:`rpent.planners.api` — Anthropic Messages / OpenAI Responses / OpenAI-compatible
  Chat Completions on the official SDKs.
* :mod:`rpent.planners.claude_code` — Claude Agent SDK (bundled Claude Code CLI).
* :mod:`rpent.planners.codex` — OpenAI Codex Python SDK (bundled ``codex`` CLI).
* :mod:`rpent.planners.provider_endpoint` — local scripted provider for offline runs.

Importing this package imports no SDK.
"""
