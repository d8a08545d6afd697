"""Every LLM planner end to end on a real LIBERO task, offline.

The scripted planner solves libero_object task 0 seed 0 once; its transcript is then
replayed by the local provider endpoint (the user-facing "replay a recorded
conversation" feature) while the real ``rpent`` CLI runs each LLM planner: official
SDK / bundled Claude Code CLI / bundled codex CLI, real MCP plumbing, real env-server
subprocess and MuJoCo. Asserts on the tool calls that reached the toolkit, the
transcript, the stats and the environment's success flag. ~45 s per run on 2 CPU cores.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from rpent.planners.provider_endpoint import ProviderEndpoint, load_script

pytestmark = pytest.mark.slow

TAG = "object_t0_s0"
TASK = ["--robot", "libero", "--suite", "libero_object", "--task", "0", "--seed", "0", "--no-video"]


def _rpent(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rpent.cli.main", *TASK, *args], capture_output=True, text=True,
                          timeout=900, env=dict(os.environ, MUJOCO_GL="egl", **env))


def _tools(transcript: dict) -> list[str]:
    return [b["name"] for m in transcript["messages"] if m["role"] == "assistant" for b in m["content"]
            if b["type"] == "tool_use"]


@pytest.fixture(scope="module")
def scripted_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("scripted") / "run"
    p = _rpent(["--planner", "scripted", "--output-dir", str(out)], {})
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    path = out / f"transcript_{TAG}.json"
    return path, json.loads(path.read_text())


@pytest.mark.parametrize("planner,model,env_of", [
    ("api", "anthropic:claude-sonnet-4-5", lambda ep: {"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": ep.base_url}),
    ("api", "openai-chat:glm-test", lambda ep: {"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": ep.openai_base_url}),
    ("claude_code", "claude-sonnet-4-5", lambda ep: {"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": ep.base_url}),
    ("codex", "gpt-test", lambda ep: {"CODEX_API_KEY": "k", "CODEX_BASE_URL": ep.base_url}),
])
def test_llm_planner_replays_a_solved_libero_episode(planner, model, env_of, scripted_run, tmp_path):
    script_path, reference = scripted_run
    expected = _tools(reference)
    with ProviderEndpoint(load_script(script_path)) as ep:
        out = tmp_path / "run"
        p = _rpent(["--planner", planner, "--model", model, "--output-dir", str(out)], env_of(ep))
        requests = ep.model_requests()
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    tr = json.loads((out / f"transcript_{TAG}.json").read_text())
    assert tr["environment_success"] is True and tr["error"] is None
    assert tr["finish"]["status"] == "success"
    assert _tools(tr) == expected  # the same tool calls reached the LIBERO toolkit, in order
    assert tr["stats"]["tool_calls"] == len(expected) and tr["stats"]["total_output_tokens"] > 0
    assert len([r for r in requests if r.tool_names]) == len(expected)  # one model request per tool call
    tool_msgs = [m for m in tr["messages"] if m["role"] == "tool"]
    assert len(tool_msgs) == len(expected) and not any(m["is_error"] for m in tool_msgs)
    # camera images travelled to the provider and are references (not bytes) in the transcript
    assert max(r.image_count for r in requests) >= 1
    assert any(b.get("type") == "image" and b["ref"].startswith("sha256:") for m in tool_msgs for b in m["content"])
