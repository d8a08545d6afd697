"""The codex planner end to end: Codex Python SDK -> bundled ``codex app-server`` ->
Responses SSE from the scripted endpoint (custom provider from CODEX_BASE_URL); toolkit
calls through the Streamable-HTTP MCP server on a loopback port."""

from __future__ import annotations

import json
import threading
import time

import pytest

from planner_fixture_toolkit import FixtureToolkit

from rpent.planners.base import PlannerConfig, Steering, create_planner
from rpent.planners.codex import codex_config_toml
from rpent.planners.provider_endpoint import Fault, Script, ToolCall, Turn

FINISH = Turn(tool_calls=(ToolCall("finish", {"status": "success", "summary": "placed"}),))


def make_planner(ep, **overrides):
    cfg = dict(model="gpt-test", max_retries=0,
               env={"CODEX_BASE_URL": ep.base_url, "CODEX_API_KEY": "test-key"})
    cfg.update(overrides)
    return create_planner("codex", PlannerConfig(**cfg))


def test_config_toml_adds_v1_and_approves_mcp_tools():
    text = codex_config_toml("http://127.0.0.1:5/mcp", "http://127.0.0.1:9", 0)
    assert 'model_provider = "rpent_custom"' in text and 'base_url = "http://127.0.0.1:9/v1"' in text
    assert 'wire_api = "responses"' in text and 'default_tools_approval_mode = "approve"' in text
    assert 'base_url = "http://h/v1"' in codex_config_toml("u", "http://h/v1/", 0)
    assert "model_provider" not in codex_config_toml("u", None, 0)


def test_scripted_conversation_through_the_bundled_cli(endpoint, toolkit):
    ep = endpoint(Script([
        Turn(thinking="plan", text="Looking first.", tool_calls=(ToolCall("view_env_state"),)),
        Turn(tool_calls=(ToolCall("move_to", {"xyz": [0.1, 0.0, 0.2]}),)),
        FINISH,
        Turn(text="must never be requested: finish interrupts the turn"),
    ]))
    events = []
    result = make_planner(ep).solve("You control a robot.", "Put the bowl on the plate.", toolkit,
                                    on_event=lambda k, p: events.append((k, p)))
    assert result.error is None and result.stop_reason == "finished", result.error
    assert (result.finish.status, result.finish.summary) == ("success", "placed")
    assert [c[0] for c in toolkit.calls] == ["view_env_state", "move_to", "finish"] and toolkit.solved()
    reqs = ep.model_requests("responses")
    assert len(reqs) == 3 and all(r.stream and r.path == "/v1/responses" for r in reqs)
    assert {"mcp__rpent__move_to", "mcp__rpent__finish"} <= set(reqs[0].tool_names)
    assert "You control a robot." in json.dumps(reqs[0].body)
    assert "eef_pos" in json.dumps(reqs[1].body["input"][-3:])  # the tool result reached the model
    s = result.stats
    assert (s.tool_calls, s.requests, s.turns_used) == (3, 3, 3) and s.total_output_tokens > 0
    tool_uses = [b for m in result.messages if m["role"] == "assistant" for b in m["content"]
                 if b["type"] == "tool_use"]
    assert [b["name"] for b in tool_uses] == ["view_env_state", "move_to", "finish"]
    assert [m["tool_call_id"] for m in result.messages if m["role"] == "tool"] == [b["id"] for b in tool_uses]
    assert {k for k, _ in events} >= {"tool_call", "tool_result", "text", "usage"}


def test_timeout_cancels_the_running_tool(endpoint):
    """The planner's timeout lands while its (300 s) tool runs and cancels it. The timeout counts
    from the start of the CLI, which may take longer than it on a loaded machine: then the timeout
    came before any tool call (a miss, not a failure) and the attempt is repeated with twice the timeout."""
    for timeout_s in (4, 8, 16, 32, 64):
        toolkit = FixtureToolkit(step_s=0.01)
        ep = endpoint(Script([Turn(tool_calls=(ToolCall("wait_steps", {"steps": 30000}),)), FINISH]))
        t0 = time.monotonic()
        result = make_planner(ep, timeout_s=float(timeout_s)).solve("s", "u", toolkit)
        assert result.error == f"Codex SDK timed out after {timeout_s}s" and result.stop_reason == "timeout"
        if toolkit.calls:
            break
    else:
        pytest.fail("the CLI never called the tool within 64 s")
    assert toolkit.cancelled_calls == ["wait_steps"] and time.monotonic() - t0 < timeout_s + 60


def test_interrupt_stop_during_a_long_tool(endpoint):
    toolkit = FixtureToolkit(step_s=0.01)
    steering = Steering()
    ep = endpoint(Script([Turn(tool_calls=(ToolCall("wait_steps", {"steps": 3000}),)), FINISH]))
    threading.Thread(target=lambda: (toolkit.running.wait(30), steering.submit("/quit")), daemon=True).start()
    result = make_planner(ep).solve("s", "u", toolkit, steering=steering)
    assert result.stop_reason == "interrupted" and result.error == "operator quit" and result.finish is None
    assert toolkit.cancelled_calls == ["wait_steps"]


def test_max_turns_interrupts_the_turn(endpoint, toolkit):
    ep = endpoint(lambda req: Turn(tool_calls=(ToolCall("view_env_state"),)))
    result = make_planner(ep, max_turns=2).solve("s", "u", toolkit)
    assert result.stop_reason == "max_turns" and result.error is None and result.stats.requests >= 2


def test_provider_error_is_reported_not_raised(endpoint, toolkit):
    ep = endpoint(lambda req: Turn(fault=Fault(400, "invalid request: schema is broken")))
    result = make_planner(ep).solve("s", "u", toolkit)
    assert result.finish is None and result.stop_reason == "error" and result.error.startswith("Codex turn failed")
    assert toolkit.calls == []


def test_operator_line_steers_the_running_turn(endpoint):
    toolkit = FixtureToolkit(step_s=0.01)
    steering = Steering()

    def responder(req):
        if "[operator] use the left bowl" in json.dumps(req.body["input"]):
            return FINISH
        return Turn(tool_calls=(ToolCall("wait_steps", {"steps": 30}),))

    ep = endpoint(responder)
    threading.Thread(target=lambda: (toolkit.running.wait(30), steering.send("use the left bowl")),
                     daemon=True).start()
    result = make_planner(ep, max_turns=8).solve("s", "u", toolkit, steering=steering)
    assert result.finish is not None, result.error
    assert any(m.get("source") == "operator" for m in result.messages)


def test_interactive_session_continues_with_a_new_turn(endpoint, toolkit):
    steering = Steering(interactive=True)

    def responder(req):
        if "[operator] now finish" in json.dumps(req.body["input"]):
            return FINISH
        threading.Timer(0.3, steering.send, args=("now finish",)).start()
        return Turn(text="What should I do next?")

    ep = endpoint(responder)
    result = make_planner(ep, timeout_s=60).solve("s", "u", toolkit, steering=steering)
    assert result.finish is not None, result.error
    assert [m.get("source") for m in result.messages if m["role"] == "user"] == ["task", "operator"]


def test_custom_provider_without_model_is_refused_by_name(endpoint):
    """The README's offline example without --model sent no tools and ended silently."""
    import pytest

    from rpent.planners.base import PlannerConfigError

    ep = endpoint(Script([FINISH]))
    with pytest.raises(PlannerConfigError, match=r"--planner codex with CODEX_BASE_URL needs --model"):
        make_planner(ep, model=None)


def test_a_turn_without_any_tool_call_is_a_named_error(endpoint, toolkit):
    """The SDK's default model (given explicitly here) reaches a custom provider without tools."""
    ep = endpoint(Script([Turn(text="I cannot see any tools."), FINISH]))
    result = make_planner(ep, model="gpt-6.1-sol").solve("s", "u", toolkit)
    assert result.finish is None and result.stop_reason == "error" and result.error_kind == "provider"
    assert result.error.startswith("Codex ended its turn without calling any rpent tool (model gpt-6.1-sol)")
    assert ep.model_requests("responses")[0].tool_names == [] and toolkit.calls == []


def test_toolkit_mcp_server_exiting_mid_run_is_a_named_error(endpoint, toolkit, monkeypatch):
    """The MCP server dies at the start of the second tool call. The run ends with a
    named error (not end_turn / None), keeps its record, and no server thread outlives the run."""
    import rpent.planners.codex as codex_mod
    from rpent.planners.mcp_http import McpHttpToolServer

    servers = []

    class DyingServer(McpHttpToolServer):
        """The real server; its uvicorn loop is told to exit when the second tool call arrives."""

        def start(self):
            super().start()
            servers.append(self)
            real_call, n = self.bridge.call, {"calls": 0}

            def call(*a, **kw):
                n["calls"] += 1
                if n["calls"] == 2:
                    self._server.should_exit = True  # uvicorn starts its (graceful) shutdown
                    time.sleep(1.0)
                return real_call(*a, **kw)

            self.bridge.call = call
            return self

    monkeypatch.setattr(codex_mod, "McpHttpToolServer", DyingServer)
    ep = endpoint(Script([Turn(tool_calls=(ToolCall("view_env_state"),)),
                          Turn(tool_calls=(ToolCall("move_to", {"xyz": [0.1, 0.0, 0.2]}),)),
                          Turn(text="The tool server seems down; stopping."), FINISH]))
    t0 = time.monotonic()
    result = make_planner(ep).solve("s", "u", toolkit)
    assert result.finish is None and result.stop_reason == "error" and result.error_kind == "internal"
    assert result.error.startswith("toolkit MCP server exited during tool call move_to ("), result.error
    assert "\n" not in result.error
    tools = [m for m in result.messages if m["role"] == "tool"]
    assert tools[0]["name"] == "view_env_state" and tools[-1]["name"] == "move_to" and tools[-1]["is_error"]
    assert not any(t.name == "rpent-mcp-http" and t.is_alive() for t in threading.enumerate())
    assert not servers[0].alive and time.monotonic() - t0 < 60
