"""The claude_code planner end to end: Claude Agent SDK -> its bundled Claude Code CLI ->
Anthropic Messages SSE from the scripted endpoint; toolkit calls through the in-process
SDK MCP server ``rpent``."""

from __future__ import annotations

import json
import threading
import time

import pytest

from planner_fixture_toolkit import FixtureToolkit

from rpent.planners.base import PlannerConfig, Steering, create_planner
from rpent.planners.provider_endpoint import Fault, Script, ToolCall, Turn

FINISH = Turn(tool_calls=(ToolCall("finish", {"status": "success", "summary": "placed"}),))


def make_planner(ep, **overrides):
    cfg = dict(model="claude-sonnet-4-5", env={"ANTHROPIC_BASE_URL": ep.base_url, "ANTHROPIC_API_KEY": "test-key"})
    cfg.update(overrides)
    return create_planner("claude_code", PlannerConfig(**cfg))


def test_scripted_conversation_through_the_bundled_cli(endpoint, toolkit):
    ep = endpoint(Script([
        Turn(thinking="plan", text="Looking first.", tool_calls=(ToolCall("view_env_state"),)),
        Turn(tool_calls=(ToolCall("move_to", {"xyz": [0.1, 0.0, 0.2]}),)),
        FINISH,
        Turn(text="must never be requested: finish ends the session"),
    ]))
    events = []
    result = make_planner(ep).solve("You control a robot.", "Put the bowl on the plate.", toolkit,
                                    on_event=lambda k, p: events.append((k, p)))
    assert result.error is None and result.stop_reason == "finished", result.error
    assert (result.finish.status, result.finish.summary) == ("success", "placed")
    assert [c[0] for c in toolkit.calls] == ["view_env_state", "move_to", "finish"] and toolkit.solved()
    model_requests = ep.model_requests("anthropic")
    assert len(model_requests) == 3  # the PostToolUse hook stopped the CLI right after finish
    first = model_requests[0]
    assert first.path == "/v1/messages" and first.query == "beta=true" and first.stream
    assert sorted(first.tool_names) == ["mcp__rpent__finish", "mcp__rpent__move_to",
                                        "mcp__rpent__view_env_state", "mcp__rpent__wait_steps"]
    assert model_requests[1].image_count == 1  # the PNG travelled as MCP image content
    s = result.stats
    assert (s.tool_calls, s.requests, s.turns_used) == (3, 3, 3)
    assert s.total_input_tokens > 0 and s.total_output_tokens > 0 and s.cost_usd is not None
    tool_uses = [b for m in result.messages if m["role"] == "assistant" for b in m["content"]
                 if b["type"] == "tool_use"]
    tool_msgs = [m for m in result.messages if m["role"] == "tool"]
    assert [b["name"] for b in tool_uses] == ["view_env_state", "move_to", "finish"]
    assert [m["tool_call_id"] for m in tool_msgs] == [b["id"] for b in tool_uses]  # the model's ids
    assert [c[2] for c in toolkit.calls] == [b["id"] for b in tool_uses]
    assert any(b.get("thinking") == "plan" for m in result.messages for b in m["content"])
    assert {k for k, _ in events} >= {"tool_call", "tool_result", "text", "thinking", "usage"}
    json.dumps(result.to_dict())


def test_refused_finish_continues(endpoint):
    toolkit = FixtureToolkit(refuse_finish=1)
    ep = endpoint(Script([FINISH, FINISH]))
    result = make_planner(ep).solve("s", "u", toolkit)
    assert result.finish is not None and toolkit.finish_calls == 2
    second = ep.model_requests("anthropic")[1]
    assert second.tool_results[0].is_error and "finish refused" in second.tool_results[0].text


def test_timeout_cancels_the_running_tool(endpoint):
    """The planner's timeout lands while its (300 s) tool runs and cancels it. The timeout counts
    from the start of the CLI, which may take longer than it on a loaded machine: then the timeout
    came before any tool call (a miss, not a failure) and the attempt is repeated with twice the timeout."""
    for timeout_s in (4, 8, 16, 32, 64):
        toolkit = FixtureToolkit(step_s=0.01)
        ep = endpoint(Script([Turn(tool_calls=(ToolCall("wait_steps", {"steps": 30000}),)), FINISH]))
        t0 = time.monotonic()
        result = make_planner(ep, timeout_s=float(timeout_s)).solve("s", "u", toolkit)
        assert result.error == f"Claude Agent SDK timed out after {timeout_s}s" and result.stop_reason == "timeout"
        if toolkit.calls:
            break
    else:
        pytest.fail("the CLI never called the tool within 64 s")
    assert toolkit.cancelled_calls == ["wait_steps"] and time.monotonic() - t0 < timeout_s + 60


def test_interrupt_stop_during_a_long_tool_and_operator_line(endpoint):
    toolkit = FixtureToolkit(step_s=0.01)
    steering = Steering()
    ep = endpoint(Script([Turn(tool_calls=(ToolCall("wait_steps", {"steps": 3000}),)), FINISH]))

    def operator():
        toolkit.running.wait(30)
        steering.interrupt(stop=True, reason="operator pressed stop")

    threading.Thread(target=operator, daemon=True).start()
    result = make_planner(ep).solve("s", "u", toolkit, steering=steering)
    assert result.stop_reason == "interrupted" and result.error == "operator pressed stop"
    assert toolkit.cancelled_calls == ["wait_steps"] and result.finish is None


def test_operator_line_reaches_the_model_mid_turn(endpoint):
    toolkit = FixtureToolkit(step_s=0.01)
    steering = Steering()

    def responder(req):
        if "[operator] use the left bowl" in json.dumps(req.body["messages"][-1]):
            return FINISH
        return Turn(tool_calls=(ToolCall("wait_steps", {"steps": 30}),))

    ep = endpoint(responder)
    threading.Thread(target=lambda: (toolkit.running.wait(30), steering.send("use the left bowl")),
                     daemon=True).start()
    result = make_planner(ep, max_turns=8).solve("s", "u", toolkit, steering=steering)
    assert result.finish is not None, result.error
    assert any(m.get("source") == "operator" for m in result.messages)


def test_provider_error_is_reported_not_raised(endpoint, toolkit):
    ep = endpoint(lambda req: Turn(fault=Fault(400, "invalid request: schema is broken")))
    result = make_planner(ep).solve("s", "u", toolkit)
    assert result.finish is None and result.stop_reason == "error" and result.error_kind == "provider"
    assert "HTTP 400" in result.error and "schema is broken" in result.error
    assert toolkit.calls == [] and all(r.status == 400 for r in ep.requests)


def test_max_turns_passes_through_as_a_normal_stop(endpoint, toolkit):
    ep = endpoint(lambda req: Turn(tool_calls=(ToolCall("view_env_state"),)))
    result = make_planner(ep, max_turns=2).solve("s", "u", toolkit)
    assert result.stop_reason == "max_turns" and result.error is None and result.finish is None
    assert len(toolkit.calls) == 2


def test_interactive_session_continues_after_end_turn(endpoint, toolkit):
    steering = Steering(interactive=True)

    def responder(req):
        if "[operator] now finish" in json.dumps(req.body["messages"][-1]):
            return FINISH
        threading.Timer(0.3, steering.send, args=("now finish",)).start()
        return Turn(text="What should I do next?")

    ep = endpoint(responder)
    result = make_planner(ep, timeout_s=60).solve("s", "u", toolkit, steering=steering)
    assert result.finish is not None, result.error
    assert [m.get("source") for m in result.messages if m["role"] == "user"] == ["task", "operator"]


def test_large_image_tool_results_do_not_end_the_run(endpoint):
    """Three noisy 700 px frames in one tool-result message (> 1 MiB per line)."""
    toolkit = FixtureToolkit(image_size=700, noisy_images=True)
    three = Turn(tool_calls=tuple(ToolCall("view_env_state") for _ in range(3)))
    ep = endpoint(Script([three, FINISH]))
    result = make_planner(ep).solve("s", "u", toolkit)
    assert result.error is None and result.stop_reason == "finished", result.error
    assert [c[0] for c in toolkit.calls] == ["view_env_state"] * 3 + ["finish"]
    second = ep.model_requests("anthropic")[1]
    assert second.image_count == 3  # every frame reached the model


def test_huge_images_are_downscaled_to_fit_and_say_so(endpoint, monkeypatch):
    """An image over the per-result budget (here 1 MiB of base64; 8 MiB by default) is downscaled."""
    import rpent.planners.claude_code as cc

    monkeypatch.setattr(cc, "IMAGE_BUDGET_BYTES", 1 << 20)
    toolkit = FixtureToolkit(image_size=900, noisy_images=True)  # ~3.2 MB base64 in one image
    ep = endpoint(Script([Turn(tool_calls=(ToolCall("view_env_state"),)), FINISH]))
    result = make_planner(ep).solve("s", "u", toolkit)
    assert result.error is None and result.stop_reason == "finished", result.error
    second = ep.model_requests("anthropic")[1]
    assert second.image_count == 1
    assert "downscaled from 900x900" in second.tool_results[0].text
    (img,) = [b for m in result.messages if m["role"] == "tool" for b in m["content"] if b["type"] == "image"]
    assert img["ref"].startswith("sha256:")


def test_a_line_over_the_sdk_buffer_ends_with_a_named_error(endpoint, monkeypatch):
    """With the SDK's default 1 MiB buffer and no image budget the line overflows: the error names
    the line size, the limit and the fix instead of the SDK's bare CLIJSONDecodeError."""
    import rpent.planners.claude_code as cc

    monkeypatch.setattr(cc, "CLI_BUFFER_BYTES", 1 << 20)
    monkeypatch.setattr(cc, "IMAGE_BUDGET_BYTES", None)
    toolkit = FixtureToolkit(image_size=700, noisy_images=True)
    ep = endpoint(Script([Turn(tool_calls=tuple(ToolCall("view_env_state") for _ in range(3))), FINISH]))
    result = make_planner(ep).solve("s", "u", toolkit)
    assert result.finish is None and result.stop_reason == "error" and result.error_kind == "sdk"
    assert result.error.startswith("Claude Code CLI message too large:"), result.error
    assert "exceeds the Agent SDK buffer of 1048576 bytes" in result.error
    assert "max_buffer_size" in result.error and "smaller images" in result.error
