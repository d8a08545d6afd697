"""The planner-facing python tool, CodeModeToolkit, the prompt and --code-file."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from policy_point_robot import PickPlaceWorld, PointRobotToolkit
from rpent.policy import (CodeModeToolkit, code_mode_system_prompt, execute_python_tool, python_tool_spec,
                          run_code_file)

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "pick_place_policy.py"


def test_code_mode_toolkit_offers_python_finish_and_operator_tools(make_runner, toolkit):
    code_tk = CodeModeToolkit(toolkit, make_runner(toolkit, timeout_s=30, max_calls=7))
    specs = code_tk.specs()
    assert [s.name for s in specs] == ["python", "finish", "request_operator_verdict"]
    assert "30 s wall time" in specs[0].description and "7 robot-tool calls" in specs[0].description
    assert specs[0].input_schema["required"] == ["code"]
    out = code_tk.execute("move_to", {"xyz": [0, 0, 0]}, "c1")
    assert "robo.move_to(...)" in out["error"] and toolkit.executed == []
    verdict = code_tk.execute("request_operator_verdict", {"question": "ok?"}, "c2")
    assert verdict == {"status": "success", "operator_notes": ""}


def test_python_tool_result_for_the_planner(make_runner, toolkit):
    code_tk = CodeModeToolkit(toolkit, make_runner(toolkit))
    out = code_tk.execute("python", {"code": "print('x' * 50_000)\nrobo.move_to([0.05, 0, 0]).steps_used"}, "c1")
    assert out["ok"] and out["value"] == "2" and out["moved"] and out["env_steps"] == 2
    assert len(out["stdout"]) < 21_000 and "characters omitted" in out["stdout"]
    assert [i["label"] for i in out["_images"]] == ["agentview", "wrist"]
    assert out["saved"] == ["code_policy/cell_001.py", "code_policy/cell_001.json"]
    assert "_finish" not in out
    fin = code_tk.execute("python", {"code": "robo.finish('success', 'done')"}, "c2")
    assert fin["_finish"] is True and fin["status"] == "success" and fin["summary"] == "done"
    assert "_images" not in fin                                # no motion, no images


def test_python_tool_bad_arguments_are_error_results(make_runner):
    runner = make_runner()
    assert "pass {\"code\"" in execute_python_tool(runner, {})["error"]
    assert "unexpected ['cwd']" in execute_python_tool(runner, {"code": "1", "cwd": "/"})["error"]


def test_images_can_be_turned_off(make_runner, toolkit):
    runner = make_runner(toolkit, images=False)
    out = execute_python_tool(runner, {"code": "robo.move_to([0.05, 0, 0])\nNone"})
    assert out["moved"] and "_images" not in out


def test_cancel_from_the_planner_interrupts_the_cell(make_runner):
    toolkit = PointRobotToolkit(step_s=0.02)
    runner = make_runner(toolkit, timeout_s=30)
    runner.run_cell("0")                                       # the worker is up: the cancel hits the motion
    code_tk = CodeModeToolkit(toolkit, runner)
    threading.Timer(0.4, code_tk.cancel).start()
    t0 = time.monotonic()
    out = code_tk.execute("python", {"code": "robo.move_to([100.0, 0, 0], max_steps=10**6)"}, "c1")
    assert time.monotonic() - t0 < 25  # the motion alone takes 20000 s; the cell's timeout is 30 s
    assert out["interrupted"] and out["exception"]["type"] == "CellInterrupted"


def test_prompt_lists_the_robo_api_from_the_specs(toolkit):
    prompt = code_mode_system_prompt(toolkit.specs(), timeout_s=90, max_calls=40, task_language="put it there",
                                     robot_notes="Never move more than 0.30 m in xy in one call.")
    assert "`robo.move_to(xyz: list[float; 3 items], gripper: float = -1, tol: float = 0.012" in prompt
    assert "Servo the point toward xyz" in prompt
    assert "robo.request_operator_verdict" not in prompt and "`request_operator_verdict`" in prompt
    assert "90 s of wall time" in prompt and "40 robot-tool calls" in prompt and "call 41" in prompt
    assert "reads no task memory and writes no recipe" in prompt
    assert "Task: put it there" in prompt and "0.30 m" in prompt
    assert python_tool_spec(90, 40).name == "python"


def test_example_pick_place_policy_solves_a_libero_shaped_world(make_runner):
    world = PickPlaceWorld()
    runner = make_runner(world, timeout_s=60)
    result = run_code_file(runner, EXAMPLE)
    assert result["exception"] is None, result["exception"]
    assert result["finished"]["status"] == "success", result["stdout"]
    assert world.solved() and world.finish_result["status"] == "success"
    tools = [c["tool"] for c in result["robot_calls"]]
    assert {"segment", "move_to", "set_gripper", "release", "finish"} <= set(tools)
    assert result["calls_made"] < 100
    assert (runner.output_dir / "code_policy" / "cell_001.py").read_text() == EXAMPLE.read_text()


def test_example_policy_reports_failure_when_the_target_is_not_found(make_runner):
    world = PickPlaceWorld(language="pick up the alphabet soup and place it in the drawer")
    result = run_code_file(make_runner(world, timeout_s=60), EXAMPLE)
    assert result["finished"]["status"] == "failure" and "target" in result["finished"]["summary"]
    assert not world.solved()


def test_code_file_errors_run_nothing(make_runner, tmp_path):
    runner = make_runner()
    with pytest.raises(FileNotFoundError, match="--code-file .*no such file"):
        run_code_file(runner, tmp_path / "missing.py")
    bad = tmp_path / "bad.py"
    bad.write_text("def f(:\n")
    with pytest.raises(ValueError, match="syntax error at line 1"):
        run_code_file(runner, bad)
    assert not (runner.output_dir / "code_policy" / "cell_001.py").exists()


def test_planner_copy_of_robot_calls_is_compact(make_runner):
    class Verbose(PointRobotToolkit):
        def _tool_move_to(self, xyz, **kw):
            out = super()._tool_move_to(xyz, **kw)
            out["state_after"] = {"terminated": False, "artifacts": ["x.png"] * 500}
            out["diagnostics"] = "d" * 5000
            return out

    runner = make_runner(Verbose())
    out = execute_python_tool(runner, {"code": "robo.move_to([0.05, 0, 0])\nNone"})
    call = out["robot_calls"][0]
    assert "state_after" not in call["result"] or "summary" in call["result"]
    assert len(repr(call["result"])) < 1_700
    full = runner.run_cell("1")  # the saved JSON of cell 1 keeps everything
    import json

    saved = json.loads((runner.output_dir / "code_policy" / "cell_001.json").read_text())
    assert len(saved["robot_calls"][0]["result"]["state_after"]["artifacts"]) == 500
    assert full["ok"]


def test_incompatible_options_are_refused_with_the_fix():
    from rpent.policy import check_code_mode_options

    for planner in ("api", "claude_code", "codex"):
        check_code_mode_options(planner)
    check_code_mode_options("scripted", code_file="policy.py")
    with pytest.raises(ValueError, match="--planner flash.*--code-file"):
        check_code_mode_options("flash", code_file="policy.py")
    with pytest.raises(ValueError, match="--explore .*no task memory"):
        check_code_mode_options("api", explore=True)
    with pytest.raises(ValueError, match="needs a planner that writes code"):
        check_code_mode_options("scripted")


def test_a_code_file_that_never_calls_finish_is_recorded_as_such_not_as_a_model_turn(tmp_path):
    """No model runs with --code-file: the record's error names the file and the missing finish."""
    from types import SimpleNamespace

    from rpent.run.code_mode import solve_code_mode

    policy = tmp_path / "no_finish.py"
    policy.write_text("x = robo.move_to([0.05, 0, 0]).steps_used\nprint('moved', x)\n")
    cfg = SimpleNamespace(code_file=str(policy), code_timeout_s=60.0, code_max_calls=10,
                          planner_config=SimpleNamespace(no_images=True))
    events = []
    result = solve_code_mode(cfg, PointRobotToolkit(), None, SimpleNamespace(dir=tmp_path / "run"), None,
                             lambda kind, data: events.append((kind, data)))
    assert result.finish is None
    assert result.error == (f"the --code-file policy {policy} ran to its end without calling robo.finish(...); "
                            "end it with robo.finish('success'|'failure', summary)")
    assert result.messages[0]["content"]["stdout"] == "moved 2\n"


@pytest.mark.parametrize("source, stop_reason, error, error_kind", [
    ("robo.view_env_state()\nraise KeyError('no grasp pose')\n", "error",
     "policy code raised KeyError: 'no grasp pose'", "policy_code"),
    ("import time\nwhile True:\n    time.sleep(0.05)\n", "timeout", "policy cell timed out after 2s", None),
    ("for i in range(5):\n    robo.view_env_state()\n", "budget", "policy code ran out of robot calls: ", None),
    ("robo.finish('failure', 'no grasp pose')\n", "finished", None, None),
], ids=["raises", "timeout", "budget", "gives-up"])
def test_how_a_code_file_cell_ended_decides_the_stop(tmp_path, source, stop_reason, error, error_kind):
    """An exception of the policy's own code is an error (``error_kind`` policy_code); its limits
    (wall time, robot calls) stop it as a planner's limits do; robo.finish('failure') is an answer."""
    from types import SimpleNamespace

    from rpent.run.code_mode import solve_code_mode

    policy = tmp_path / "policy.py"
    policy.write_text(source)
    cfg = SimpleNamespace(code_file=str(policy), code_timeout_s=2.0, code_max_calls=3,
                          planner_config=SimpleNamespace(no_images=True))
    result = solve_code_mode(cfg, PointRobotToolkit(), None, SimpleNamespace(dir=tmp_path / "run"), None,
                             lambda kind, data: None)
    assert result.stop_reason == stop_reason
    assert (result.error or "").startswith(error or "") and (result.error is None) == (error is None), result.error
    assert result.error_kind == error_kind


def test_a_code_file_stopped_by_a_failed_service_is_a_service_error_not_its_own(tmp_path):
    """A ``robo.ToolError`` left uncaught after the tool's service failed (``service_error``, as the
    toolkit answers when its VLA or SAM3 server is gone) is the service's error, not the policy's."""
    from types import SimpleNamespace

    from rpent.run.code_mode import solve_code_mode

    class DeadService(PointRobotToolkit):
        def _tool_view_env_state(self, **_):
            return {"error": "the sam3 server is not reachable", "error_type": "service_error"}

    policy = tmp_path / "policy.py"
    policy.write_text("robo.view_env_state()\n")
    cfg = SimpleNamespace(code_file=str(policy), code_timeout_s=30.0, code_max_calls=3,
                          planner_config=SimpleNamespace(no_images=True))
    result = solve_code_mode(cfg, DeadService(), None, SimpleNamespace(dir=tmp_path / "run"), None,
                             lambda kind, data: None)
    assert (result.stop_reason, result.error_kind) == ("service_error", None)
    assert result.error == ("policy code stopped on a service error: view_env_state: the sam3 server is not "
                            "reachable"), result.error
