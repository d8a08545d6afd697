"""The robo facade and ToolResult, in process, over a direct transport to a real
fixture toolkit (the worker uses the same classes over pipes)."""

from __future__ import annotations

import inspect

import pytest

from policy_point_robot import PointRobotToolkit
from rpent.policy import errors
from rpent.policy.robo import Robo, ToolResult
from rpent.policy.runner import spec_to_dict


def make_robo():
    toolkit = PointRobotToolkit(step_s=0.0)

    def transport(tool, args):
        return {"result": toolkit.execute(tool, args, None)}

    return Robo([spec_to_dict(s) for s in toolkit.specs()], transport), toolkit


def test_methods_have_the_tool_signatures_and_docs():
    robo, _ = make_robo()
    sig = inspect.signature(robo.move_to)
    assert list(sig.parameters) == ["xyz", "gripper", "tol", "step_clip", "max_steps"]
    assert sig.parameters["xyz"].default is inspect.Parameter.empty
    assert sig.parameters["tol"].default == 0.012
    assert "Servo the point toward xyz" in robo.move_to.__doc__
    assert "target position, m, world frame" in robo.move_to.__doc__
    assert robo.tools == ["finish", "move_to", "set_gripper", "view_env_state"]
    assert "robo.set_gripper(gripper: float = -1, steps: int = 5)" in robo.describe("set_gripper")


def test_only_given_arguments_are_sent():
    robo, toolkit = make_robo()
    robo.move_to([0.01, 0, 0])
    robo.move_to(xyz=[0.02, 0, 0], tol=0.001)
    assert [c[1] for c in toolkit.executed] == [{"xyz": [0.01, 0, 0]}, {"xyz": [0.02, 0, 0], "tol": 0.001}]


def test_results_are_read_only_attribute_objects():
    robo, _ = make_robo()
    state = robo.view_env_state()
    assert isinstance(state, ToolResult)
    assert state.state.robot0_eef_pos == [0.0, 0.0, 0.0]     # nested dicts are views too
    assert state["step"] == state.step == 0 and "state" in state
    assert [img["label"] for img in state["_images"]] == ["agentview", "wrist"]
    plain = state.to_dict()
    assert plain["state"]["robot0_gripper_qpos"] == [0.04, -0.04] and isinstance(plain["state"], dict)
    with pytest.raises(AttributeError, match="read-only"):
        state.step = 3
    with pytest.raises(AttributeError, match="no field 'stpe'; fields: step, terminated"):
        state.stpe
    assert "_images=<2 images>" in repr(state)


def test_errors_finish_and_unknown_tools():
    robo, _ = make_robo()
    with pytest.raises(errors.ToolError) as info:
        robo.move_to([1, 2])
    assert info.value.error["error"] == "xyz must be a JSON array of three numbers"
    assert info.value.tool == "move_to"
    with pytest.raises(errors.EpisodeFinished) as fin:
        robo.finish("success", "ok")
    assert (fin.value.status, fin.value.summary) == ("success", "ok")
    assert not isinstance(fin.value, Exception)
    with pytest.raises(AttributeError, match="no tool 'fly'; available tools: finish, move_to"):
        robo.fly()
    with pytest.raises(errors.OperatorToolUnavailable):
        robo.request_operator_verdict("done?")


@pytest.mark.parametrize("kind, exc", [("budget", errors.CallBudgetExhausted), ("timeout", errors.CellTimeout),
                                       ("interrupt", errors.CellInterrupted), ("finished", errors.EpisodeFinished),
                                       ("operator", errors.OperatorToolUnavailable)])
def test_refusals_map_to_exceptions(kind, exc):
    robo = Robo([{"name": "noop", "description": "", "input_schema": {}, "readonly": True}],
                lambda tool, args: {"refused": {"kind": kind, "message": f"{kind} refusal"}})
    with pytest.raises(exc):
        robo.noop()
