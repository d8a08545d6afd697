"""rpent-check-llm: each failure class against real local endpoints, and the CLI itself."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from rpent.cli.check_llm import FAILURE_CLASSES, PROBE_TOOL, check_llm
from rpent.planners import base
from rpent.planners.provider_endpoint import Fault, Script, ToolCall, Turn

PROBE = Turn(tool_calls=(ToolCall(PROBE_TOOL, {"text": "ping"}),))


@pytest.mark.parametrize("provider", ["anthropic", "openai", "openai-chat"])
def test_api_round_trip_ok(provider, endpoint):
    ep = endpoint(Script([PROBE]))
    url = ep.base_url if provider == "anthropic" else ep.openai_base_url
    key = "ANTHROPIC_API_KEY" if provider == "anthropic" else "OPENAI_API_KEY"
    res = check_llm("api", f"{provider}:m", url, env={key: "k"})
    assert res.ok and res.failure_class is None and res.stats["tool_calls"] == 1, res.message
    assert ep.requests[0].tool_names == [PROBE_TOOL]


def test_sdk_planners_round_trip_ok(endpoint):
    ep = endpoint(Script([PROBE]))
    res = check_llm("claude_code", "claude-sonnet-4-5", env={"ANTHROPIC_BASE_URL": ep.base_url,
                                                             "ANTHROPIC_API_KEY": "k"})
    assert res.ok, res.message
    ep2 = endpoint(Script([PROBE]))
    res = check_llm("codex", "gpt-test", env={"CODEX_BASE_URL": ep2.base_url, "CODEX_API_KEY": "k"})
    assert res.ok, res.message


def test_configuration_failure_classes(free_port):
    assert check_llm("api", None).failure_class == "missing_config"
    assert check_llm("claude_code", None, base_url="http://x").failure_class == "missing_config"
    assert check_llm("api", "gemini:pro").failure_class == "unsupported_provider"
    res = check_llm("api", "openai:m", env={"OPENAI_API_KEY": ""})
    assert res.failure_class == "missing_api_key" and "OPENAI_API_KEY" in res.message
    res = check_llm("api", "anthropic:m", f"http://127.0.0.1:{free_port}", env={"ANTHROPIC_API_KEY": "k"})
    assert res.failure_class == "network_error" and not res.ok


def test_provider_failure_classes(endpoint):
    ep = endpoint(Script([PROBE]), api_key="right")
    res = check_llm("api", "openai-chat:m", ep.openai_base_url, env={"OPENAI_API_KEY": "wrong"})
    assert res.failure_class == "auth_failed" and "401" in res.message
    ep = endpoint(lambda req: Turn(fault=Fault(400, "model not found")))
    res = check_llm("api", "anthropic:m", ep.base_url, env={"ANTHROPIC_API_KEY": "k"})
    assert res.failure_class == "provider_error" and "model not found" in res.message
    ep = endpoint(Script([Turn(text="I will not call tools.")]))
    res = check_llm("api", "openai:m", ep.openai_base_url, env={"OPENAI_API_KEY": "k"})
    assert res.failure_class == "provider_error" and "did not call rpent_probe" in res.message


def test_missing_sdk_is_sdk_error(monkeypatch):
    monkeypatch.setitem(base.PLANNER_BACKENDS, "codex", "rpent_no_such_sdk_module:CodexPlanner")
    res = check_llm("codex", None)
    assert res.failure_class == "sdk_error" and res.failure_class in FAILURE_CLASSES


def test_cli_json_and_exit_codes(endpoint):
    ep = endpoint(Script([PROBE]))
    env = dict(os.environ, OPENAI_API_KEY="k")
    ok = subprocess.run([sys.executable, "-m", "rpent.cli.check_llm", "--planner", "api", "--model",
                         "openai-chat:m", "--base-url", ep.openai_base_url, "--json"],
                        capture_output=True, text=True, env=env, timeout=120)
    assert ok.returncode == 0, ok.stderr
    out = json.loads(ok.stdout)
    assert out["ok"] is True and out["failure_class"] is None and out["planner"] == "api"
    bad = subprocess.run([sys.executable, "-m", "rpent.cli.check_llm", "--planner", "api", "--model", "nope:m"],
                         capture_output=True, text=True, env=env, timeout=120)
    assert bad.returncode == 1 and "FAILED [unsupported_provider]" in bad.stderr


def test_the_documented_probe_script_serves_repeated_checks():
    """README: rpent-check-llm against the local endpoint with examples/check_llm_probe.json, twice on
    one endpoint (the script loops) and on two providers."""
    from pathlib import Path

    from rpent.planners.provider_endpoint import ProviderEndpoint, load_script

    script = load_script(Path(__file__).resolve().parents[2] / "examples" / "check_llm_probe.json")
    assert script.loop
    with ProviderEndpoint(script) as ep:
        for _ in range(2):
            res = check_llm("api", "anthropic:replay", ep.base_url, env={"ANTHROPIC_API_KEY": "x"})
            assert res.ok, res.message
        res = check_llm("api", "openai:replay", ep.openai_base_url, env={"OPENAI_API_KEY": "x"})
        assert res.ok, res.message
        assert [r.turn_index for r in ep.requests] == [0, 0, 0]


def test_without_loop_the_script_is_replayed_once():
    script = Script([PROBE])
    from rpent.planners.provider_endpoint import ProviderEndpoint

    with ProviderEndpoint(script) as ep:
        assert check_llm("api", "anthropic:m", ep.base_url, env={"ANTHROPIC_API_KEY": "x"}).ok
        second = check_llm("api", "anthropic:m", ep.base_url, env={"ANTHROPIC_API_KEY": "x"})
        assert not second.ok and second.failure_class == "provider_error"


def test_a_base_url_without_a_scheme_is_a_config_failure_before_any_request():
    """``rpent --base-url notaurl`` is refused at start, before any env server starts or the provider is
    retried ('Request URL is missing an http:// or https:// protocol')."""
    from rpent.planners.api.model_spec import resolve_provider

    res = check_llm("api", "openai-chat:m", "notaurl", env={"OPENAI_API_KEY": "k"})
    assert not res.ok and res.failure_class == "missing_config", (res.failure_class, res.message)
    assert "--base-url 'notaurl' is not an http(s) URL" in res.message
    with pytest.raises(ValueError, match="ANTHROPIC_BASE_URL 'localhost:8000' is not an http"):
        resolve_provider(base.PlannerConfig(model="anthropic:m", env={"ANTHROPIC_API_KEY": "k",
                                                                        "ANTHROPIC_BASE_URL": "localhost:8000"}))
