"""The api planner end to end: official SDKs -> real HTTP -> scripted endpoint, with the
fixture toolkit doing real (simulated-step) work and honouring cancel."""

from __future__ import annotations

import json
import threading
import time

import pytest
from planner_fixture_toolkit import FixtureToolkit

from rpent.planners.api.images import OMITTED_NOTE
from rpent.planners.base import PlannerConfig, Steering, create_planner
from rpent.planners.provider_endpoint import Fault, Script, ToolCall, Turn

PROVIDERS = ["anthropic", "openai", "openai-chat"]
FINISH = Turn(tool_calls=(ToolCall("finish", {"status": "success", "summary": "placed"}),))


def make_planner(provider: str, ep, **overrides):
    url = ep.base_url if provider == "anthropic" else ep.openai_base_url
    cfg = dict(model=f"{provider}:test-model", base_url=url, api_key="test-key")
    cfg.update(overrides)
    return create_planner("api", PlannerConfig(**cfg))


@pytest.mark.parametrize("provider", PROVIDERS)
def test_scripted_conversation_calls_tools_and_finishes(provider, endpoint, toolkit, tmp_path):
    ep = endpoint(Script([
        Turn(thinking="check the scene", text="Looking first.", tool_calls=(ToolCall("view_env_state"),)),
        Turn(tool_calls=(ToolCall("move_to", {"xyz": [0.1, 0.0, 0.2]}),)),
        FINISH,
    ]))
    events = []
    result = make_planner(provider, ep, output_dir=str(tmp_path)).solve(
        "You control a robot.", "Put the bowl on the plate.", toolkit, on_event=lambda k, p: events.append((k, p)))
    assert result.error is None and result.stop_reason == "finished"
    assert (result.finish.status, result.finish.summary) == ("success", "placed")
    assert [c[0] for c in toolkit.calls] == ["view_env_state", "move_to", "finish"]
    assert toolkit.calls[1][1] == {"xyz": [0.1, 0.0, 0.2]} and toolkit.solved()
    s = result.stats
    assert (s.turns_used, s.tool_calls, s.requests) == (3, 3, 3)
    assert s.total_input_tokens > 0 and s.total_output_tokens > 0 and s.elapsed_s > 0
    if provider == "anthropic":  # prompt caching on: first request writes, later ones read
        assert s.cache_write_tokens > 0 and s.cache_read_tokens > 0
        body = ep.requests[1].body
        assert body["system"][-1]["cache_control"] == {"type": "ephemeral"}
        assert body["tools"][-1]["cache_control"] == {"type": "ephemeral"}
        assert body["messages"][-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    roles = [m["role"] for m in result.messages]
    assert roles == ["user", "assistant", "tool", "assistant", "tool", "assistant", "tool"]
    thinking = result.messages[1]["content"][0]
    assert thinking["type"] == "thinking" and thinking["thinking"] == "check the scene"
    tool_msg = result.messages[2]
    assert tool_msg["name"] == "view_env_state" and tool_msg["tool_call_id"] == result.messages[1]["content"][2]["id"]
    image = tool_msg["content"][1]
    assert image["type"] == "image" and "png" not in image and image["ref"].startswith("sha256:")
    json.dumps(result.to_dict())  # the transcript is JSON-able (no bytes)
    # the endpoint saw the tool results and the images on the wire
    assert ep.requests[1].image_count == 1 and len(ep.requests[1].tool_results) == 1
    assert json.loads(ep.requests[1].tool_results[0].text)["eef_pos"] == [0.0, 0.0, 0.3]
    kinds = [k for k, _ in events]
    assert kinds.count("request") == 3 and kinds.count("tool_call") == 3 and "thinking" in kinds
    tool_results = [p for k, p in events if k == "tool_result"]
    assert tool_results[1]["images"][0]["png"].startswith(b"\x89PNG") and "_images" not in tool_results[1]["result"]
    assert not (tmp_path / "llm_errors.jsonl").exists()


def test_rate_limit_429_is_retried_after_retry_after_and_logged(endpoint, toolkit, tmp_path):
    ep = endpoint(Script([Turn(fault=Fault(429, "rate limited", retry_after_s=1)), FINISH]))
    t0 = time.monotonic()
    result = make_planner("anthropic", ep, output_dir=str(tmp_path)).solve("s", "u", toolkit)
    assert result.error is None and result.finish is not None
    assert time.monotonic() - t0 >= 1.0  # waited the server's retry-after
    assert result.stats.requests == 2 and result.stats.turns_used == 1
    (entry,) = [json.loads(x) for x in (tmp_path / "llm_errors.jsonl").read_text().splitlines()]
    assert entry["status"] == 429 and entry["will_retry"] is True and entry["retry_after_s"] == 1.0


def test_server_error_then_success_uses_backoff(endpoint, toolkit):
    ep = endpoint(Script([Turn(fault=Fault(500, "boom")), FINISH]))
    result = make_planner("openai", ep).solve("s", "u", toolkit)
    assert result.error is None and result.finish is not None and [r.status for r in ep.requests] == [500, 200]


@pytest.mark.parametrize("provider", ["anthropic", "openai-chat"])
def test_provider_400_on_images_ends_with_hint_and_no_images_fixes_it(provider, endpoint, tmp_path):
    script = [Turn(tool_calls=(ToolCall("view_env_state"),)), FINISH]
    ep = endpoint(Script(script, reject_images=True))
    result = make_planner(provider, ep, output_dir=str(tmp_path)).solve("s", "u", FixtureToolkit())
    assert result.finish is None and result.stop_reason == "error" and result.error_kind == "provider"
    assert "HTTP 400" in result.error and "image input is not supported" in result.error
    assert "--no-images" in result.error and "Traceback" not in result.error
    assert [r.status for r in ep.requests] == [200, 400]  # a 400 is not retried
    assert json.loads((tmp_path / "llm_errors.jsonl").read_text())["will_retry"] is False

    ep2 = endpoint(Script(script, reject_images=True))
    result = make_planner(provider, ep2, no_images=True).solve("s", "u", FixtureToolkit())
    assert result.error is None and result.finish is not None
    assert all(r.image_count == 0 and r.status == 200 for r in ep2.requests)
    raw = json.dumps([r.body for r in ep2.requests])
    assert "base64" not in raw and "iVBOR" not in raw  # no PNG bytes anywhere on the wire
    assert "[image 'agentview' not sent: --no-images]" in raw


def test_max_turns_reached_is_a_normal_stop(endpoint, toolkit):
    ep = endpoint(lambda req: Turn(tool_calls=(ToolCall("view_env_state"),)))
    result = make_planner("openai-chat", ep, max_turns=3).solve("s", "u", toolkit)
    assert result.stop_reason == "max_turns" and result.error is None and result.finish is None
    assert result.stats.requests == 3 and len(ep.requests) == 3 and len(toolkit.calls) == 3


def test_refused_finish_continues_the_loop(endpoint):
    toolkit = FixtureToolkit(refuse_finish=1)
    ep = endpoint(Script([FINISH, Turn(tool_calls=(ToolCall("move_to", {"xyz": [0.1, 0.0, 0.2]}),)), FINISH]))
    result = make_planner("anthropic", ep).solve("s", "u", toolkit)
    assert result.finish is not None and result.stop_reason == "finished"
    assert [c[0] for c in toolkit.calls] == ["finish", "move_to", "finish"]
    refused = ep.requests[1].tool_results[0]
    assert refused.is_error and json.loads(refused.text)["error"] == "finish refused"
    assert result.messages[2]["is_error"] is True


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_timeout_cancels_the_running_tool(provider, endpoint):
    toolkit = FixtureToolkit(step_s=0.01)
    ep = endpoint(Script([Turn(tool_calls=(ToolCall("wait_steps", {"steps": 3000}),)), FINISH]))
    planner = make_planner(provider, ep, timeout_s=1.0)  # outside the timing: a first SDK import takes s
    t0 = time.monotonic()
    result = planner.solve("s", "u", toolkit)
    elapsed = time.monotonic() - t0
    assert result.error == "API planner timed out after 1s" and result.stop_reason == "timeout"
    assert toolkit.cancelled_calls == ["wait_steps"]  # the tool saw the cancel at a step boundary
    assert toolkit.steps < 3000 and elapsed < 15  # the tool alone takes 30 s
    assert result.messages[-1]["role"] == "tool" and "cancelled" in result.messages[-1]["content"][0]["text"]


def test_timeout_while_waiting_for_the_model(endpoint, toolkit):
    ep = endpoint(Script([Turn(text="too slow", delay_s=30.0)]))  # the endpoint's thread is a daemon
    planner = make_planner("openai-chat", ep, timeout_s=0.5)  # outside the timing: a first SDK import takes s
    t0 = time.monotonic()
    result = planner.solve("s", "u", toolkit)
    # well before the model's answer (30 s): the 0.5 s timeout ended the wait
    assert result.error == "API planner timed out after 0.5s" and time.monotonic() - t0 < 15


def test_interrupt_with_stop_during_a_long_tool(endpoint):
    toolkit = FixtureToolkit(step_s=0.01)
    steering = Steering()
    ep = endpoint(Script([Turn(tool_calls=(ToolCall("wait_steps", {"steps": 30000}),)), FINISH]))  # 300 s

    def operator():
        toolkit.running.wait(120)  # the tool runs
        steering.submit("/quit")

    planner = make_planner("anthropic", ep)
    threading.Thread(target=operator, daemon=True).start()
    t0 = time.monotonic()
    result = planner.solve("s", "u", toolkit, steering=steering)
    assert result.stop_reason == "interrupted" and result.error == "operator quit"
    assert toolkit.cancelled_calls == ["wait_steps"] and time.monotonic() - t0 < 60  # the tool takes 300 s
    assert len(ep.requests) == 1  # no further model request after the stop


def test_interrupt_without_stop_returns_cancelled_result_to_the_model(endpoint):
    toolkit = FixtureToolkit(step_s=0.01)
    steering = Steering()
    seen = []

    def responder(req):
        seen.append(req)
        if len(seen) == 1:
            return Turn(tool_calls=(ToolCall("wait_steps", {"steps": 30000}), ToolCall("view_env_state")))
        return FINISH

    ep = endpoint(responder)

    def operator():
        toolkit.running.wait(120)  # the 300 s tool runs
        steering.send("stop waiting, just finish")
        steering.interrupt()

    threading.Thread(target=operator, daemon=True).start()
    result = make_planner("openai", ep).solve("s", "u", toolkit, steering=steering)
    assert result.finish is not None and toolkit.cancelled_calls == ["wait_steps"]
    cancelled, skipped = seen[1].tool_results
    assert json.loads(cancelled.text)["code"] == "tool_cancelled"
    assert "not executed" in json.loads(skipped.text)["error"]  # the 2nd call of that turn was skipped
    assert "[operator] stop waiting, just finish" in seen[1].last_user_text
    assert [c[0] for c in toolkit.calls] == ["wait_steps", "finish"]


def test_interrupt_while_the_model_thinks_does_not_cancel_later_tools(endpoint):
    """An Esc while no tool runs (the model is answering) had nothing to cancel: the tools of the
    next turns run in full (before the fix the left-over cancel flag cancelled every later motion)."""
    toolkit = FixtureToolkit(step_s=0.002)
    steering = Steering()
    ep = endpoint(Script([
        Turn(tool_calls=(ToolCall("wait_steps", {"steps": 3}),), delay_s=5.0),
        Turn(tool_calls=(ToolCall("wait_steps", {"steps": 4}),)),
        FINISH]))

    def operator():  # Esc while the first model request is in flight (it answers after 5 s)
        t_end = time.monotonic() + 60
        while not ep.requests and time.monotonic() < t_end:
            time.sleep(0.02)
        steering.interrupt()
        seen.append(toolkit._cancel.is_set())

    seen = []
    threading.Thread(target=operator, daemon=True).start()
    result = make_planner("anthropic", ep).solve("s", "u", toolkit, steering=steering)
    assert seen == [True]  # the Esc reached the toolkit while no tool was running
    assert result.finish is not None and toolkit.cancelled_calls == []
    assert toolkit.steps == 7
    assert [json.loads(r.text).get("code") for r in ep.requests[1].tool_results] == [None]


def test_operator_line_is_delivered_at_the_next_turn_boundary(endpoint):
    toolkit = FixtureToolkit(step_s=0.01)
    steering = Steering()

    def responder(req):
        if "[operator] use the left bowl" in req.last_user_text:
            return FINISH
        return Turn(tool_calls=(ToolCall("wait_steps", {"steps": 300}),))  # 3 s: the line comes while it runs

    ep = endpoint(responder)
    threading.Thread(target=lambda: (toolkit.running.wait(120), steering.send("use the left bowl")),
                     daemon=True).start()
    result = make_planner("anthropic", ep, max_turns=10).solve("s", "u", toolkit, steering=steering)
    assert result.finish is not None
    first_with_line = next(i for i, r in enumerate(ep.requests) if "[operator]" in r.last_user_text)
    assert first_with_line == 1  # delivered with the results of the tool that was running
    assert {"role": "user", "content": [{"type": "text", "text": "[operator] use the left bowl"}],
            "source": "operator"} in result.messages
    # Anthropic needs tool_result blocks first in the user turn, then the operator text
    last_user = ep.requests[1].body["messages"][-1]["content"]
    assert [b["type"] for b in last_user] == ["tool_result", "text"]


def test_images_are_pruned_to_the_budget_before_each_request(endpoint):
    toolkit = FixtureToolkit(image_size=40, noisy_images=True)  # ~4.8 kB per incompressible PNG
    ep = endpoint(Script([Turn(tool_calls=(ToolCall("view_env_state"),))] * 5 + [FINISH]))
    result = make_planner("anthropic", ep, image_budget_bytes=12_000).solve("s", "u", toolkit)
    assert result.finish is not None
    counts = [r.image_count for r in ep.requests]
    assert counts == [0, 1, 2, 2, 2, 2]
    assert json.dumps(ep.requests[-1].body).count(OMITTED_NOTE) == 3
    assert sum(1 for m in result.messages for b in m["content"] if b.get("type") == "image") == 5  # transcript keeps all


def test_auth_failure_is_not_retried(endpoint, toolkit):
    ep = endpoint(Script([FINISH]), api_key="the-right-key")
    result = make_planner("openai", ep).solve("s", "u", toolkit)
    assert result.error_kind == "auth" and "HTTP 401" in result.error and len(ep.requests) == 1


def test_unreachable_provider_is_a_network_error(free_port, toolkit):
    planner = create_planner("api", PlannerConfig(model="anthropic:m", base_url=f"http://127.0.0.1:{free_port}",
                                                  api_key="k", max_retries=0))
    result = planner.solve("s", "u", toolkit)
    assert result.error_kind == "network" and "cannot reach the provider" in result.error


def test_a_failing_event_hook_never_stops_the_run(endpoint, toolkit):
    ep = endpoint(Script([FINISH]))

    def hook(kind, payload):
        raise RuntimeError("recorder broke")

    result = make_planner("openai-chat", ep).solve("s", "u", toolkit, on_event=hook)
    assert result.finish is not None and result.error is None


def test_interactive_run_waits_for_the_operator_after_an_end_turn(endpoint, toolkit):
    steering = Steering(interactive=True)

    def responder(req):
        if "[operator] now finish" in req.last_user_text:
            return FINISH
        return Turn(text="What should I do next?")

    ep = endpoint(responder)
    planner = make_planner("openai-chat", ep)
    threading.Timer(0.5, steering.send, args=("now finish",)).start()
    result = planner.solve("s", "u", toolkit, steering=steering)
    assert result.finish is not None and len(ep.requests) == 2
    assert [m.get("source") for m in result.messages if m["role"] == "user"] == ["task", "operator"]
