"""Local provider endpoint: a scripted LLM provider on a loopback port.

It speaks the Anthropic Messages API and the OpenAI Responses and Chat Completions
APIs (JSON and SSE streaming), so every rpent planner — the ``api`` planner on the
official SDKs, and the Claude Code / Codex CLIs bundled with their SDKs — can run end
to end offline, and a recorded conversation can be replayed for debugging.

    from rpent.planners.provider_endpoint import ProviderEndpoint, Script, Turn, ToolCall
    script = Script([Turn(tool_calls=(ToolCall("view_env_state"),)),
                     Turn(tool_calls=(ToolCall("finish", {"status": "success", "summary": "ok"}),))])
    with ProviderEndpoint(script) as ep:
        ...  # ANTHROPIC_BASE_URL=ep.base_url, OPENAI_BASE_URL=ep.openai_base_url
        ep.requests  # every request received, parsed

Command line: ``python -m rpent.planners.provider_endpoint --script conv.json --port 0``.
"""

from rpent.planners.provider_endpoint.script import (
    Fault,
    ReceivedRequest,
    Responder,
    Script,
    ScriptError,
    SeenToolResult,
    ToolCall,
    Turn,
    load_script,
)
from rpent.planners.provider_endpoint.server import ProviderEndpoint

__all__ = ["Fault", "ProviderEndpoint", "ReceivedRequest", "Responder", "Script", "ScriptError",
           "SeenToolResult", "ToolCall", "Turn", "load_script"]
