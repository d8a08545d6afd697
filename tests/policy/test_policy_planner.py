"""Code mode through a real planner: the api planner (official SDKs, real HTTP) against
the local scripted provider endpoint, with CodeModeToolkit over the fixture toolkit."""

from __future__ import annotations

import json

import pytest

from policy_point_robot import PointRobotToolkit
from rpent.policy import CodeModeToolkit, code_mode_system_prompt

planners = pytest.importorskip("rpent.planners.base")
endpoint_mod = pytest.importorskip("rpent.planners.provider_endpoint")


@pytest.mark.parametrize("provider", ["anthropic", "openai", "openai-chat"])
def test_api_planner_runs_cells_that_share_variables_and_finish(provider, make_runner):
    Script, ToolCall, Turn = endpoint_mod.Script, endpoint_mod.ToolCall, endpoint_mod.Turn
    toolkit = PointRobotToolkit()
    runner = make_runner(toolkit)
    code_tk = CodeModeToolkit(toolkit, runner)
    ep = endpoint_mod.ProviderEndpoint(Script([
        Turn(tool_calls=(ToolCall("python", {"code": "r = robo.move_to([0.05, 0, 0])\nprint(r.steps_used)"}),)),
        Turn(tool_calls=(ToolCall("python", {"code": "robo.finish('success', f'moved in {r.steps_used} steps')\n"
                                                     "print('not reached')"}),)),
    ])).start()
    try:
        url = ep.base_url if provider == "anthropic" else ep.openai_base_url
        planner = planners.create_planner("api", planners.PlannerConfig(model=f"{provider}:test-model",
                                                                        base_url=url, api_key="test-key"))
        prompt = code_mode_system_prompt(toolkit.specs(), timeout_s=runner.timeout_s, max_calls=runner.max_calls)
        result = planner.solve(prompt, "Move 5 cm along x, then finish.", code_tk)
    finally:
        ep.close()
    assert result.error is None, result.error
    assert (result.finish.status, result.finish.summary) == ("success", "moved in 2 steps")
    assert [c[0] for c in toolkit.executed] == ["move_to", "finish"]
    assert ep.requests[0].tool_names == ["python", "finish", "request_operator_verdict"]
    assert ep.requests[1].image_count == 2                     # images after the motion reached the model
    first = json.loads(ep.requests[1].tool_results[0].text)
    assert first["stdout"] == "2\n" and first["moved"] and first["ok"]
    assert (runner.output_dir / "code_policy" / "cell_002.py").exists()
