"""Cells: persistence, echoed values, errors, output capture and the saved record."""

from __future__ import annotations

import json

import pytest


def test_variables_functions_and_imports_persist_across_cells(make_runner):
    runner = make_runner()
    first = runner.run_cell("import statistics\nx = 41\ndef bump(v):\n    return v + 1\n")
    assert first["ok"], first["exception"]
    second = runner.run_cell("bump(x), statistics.mean([1, 3])")
    assert second["ok"], second["exception"]
    assert second["value"] == "(42, 2)"
    assert not second["worker_restarted"]


def test_trailing_expression_value_is_echoed_and_kept_in_underscore(make_runner):
    runner = make_runner()
    assert runner.run_cell("a = 2\na * 21")["value"] == "42"
    assert runner.run_cell("_ + 1")["value"] == "43"
    assert runner.run_cell("a = 5")["value"] is None          # assignment: nothing to echo
    assert runner.run_cell("print('x')")["value"] is None      # None is not echoed
    assert runner.run_cell("np.arange(3).sum() + math.floor(2.5)")["value"] == "5"  # np, math preloaded


def test_exception_traceback_points_at_the_cell_line(make_runner):
    runner = make_runner()
    runner.run_cell("def ratio(a, b):\n    return a / b\n")
    result = runner.run_cell("y = 1\nratio(y, 0)\n")
    assert not result["ok"]
    exc = result["exception"]
    assert exc["type"] == "ZeroDivisionError"
    assert exc["message"] == "division by zero"
    assert 'File "<cell 2>", line 2' in exc["traceback"]
    assert 'File "<cell 1>", line 2, in ratio' in exc["traceback"]
    assert "return a / b" in exc["traceback"]                 # source lines are shown
    assert "rpent/policy" not in exc["traceback"]             # runner frames are hidden


def test_syntax_error_is_a_failed_cell_with_the_line(make_runner):
    runner = make_runner()
    result = runner.run_cell("x = 1\nif x\n    pass\n")
    assert result["exception"]["type"] == "SyntaxError"
    assert "line 2" in result["exception"]["traceback"]
    assert runner.run_cell("40 + 2")["value"] == "42"         # the worker is fine


def test_stdout_stderr_and_saved_files(make_runner, toolkit, tmp_path):
    runner = make_runner(toolkit)
    source = "import sys\nprint('hello')\nprint('oops', file=sys.stderr)\nr = robo.move_to([0.05, 0, 0])\nr.steps_used"
    result = runner.run_cell(source)
    assert result["ok"], result["exception"]
    assert result["stdout"] == "hello\n"
    assert result["stderr"] == "oops\n"
    assert result["moved"] and result["env_steps"] == 2 == toolkit.env_steps
    assert [i["label"] for i in result["images"]] == ["agentview", "wrist"]
    code_dir = tmp_path / "run" / "code_policy"
    assert (code_dir / "cell_001.py").read_text() == source
    saved = json.loads((code_dir / "cell_001.json").read_text())
    assert saved["stdout"] == "hello\n" and saved["value"] == "2"
    assert saved["robot_calls"][0]["tool"] == "move_to"
    assert saved["robot_calls"][0]["result"]["_image_labels"] == ["agentview", "wrist"]
    for entry in saved["image_files"]:
        assert (tmp_path / "run" / entry["path"]).read_bytes().startswith(b"\x89PNG")
    assert not list(code_dir.glob("*.tmp"))


def test_a_reused_output_dir_continues_cell_numbering(make_runner, tmp_path):
    make_runner().run_cell("1")
    again = make_runner()
    result = again.run_cell("2")
    assert result["cell"] == 2
    assert (tmp_path / "run" / "code_policy" / "cell_001.py").read_text() == "1"
    assert (tmp_path / "run" / "code_policy" / "cell_002.py").read_text() == "2"


def test_tool_errors_raise_and_measured_shortfalls_return(make_runner, toolkit):
    runner = make_runner(toolkit)
    result = runner.run_cell(
        "try:\n    robo.move_to([1, 2])\nexcept robo.ToolError as e:\n    err = e.error\n"
        "far = robo.move_to([1.0, 0, 0], max_steps=2)\n"
        "err['error'], round(far.final_dist_m, 3), far.final_dist_m > 0.012\n")
    assert result["ok"], result["exception"]
    assert result["value"] == "('xyz must be a JSON array of three numbers', 0.95, True)"
    missing = runner.run_cell("robo.move_to()")
    assert missing["exception"]["type"] == "TypeError"
    assert "missing a required argument: 'xyz'" in missing["exception"]["message"]
    assert "robo.move_to(xyz: list[float; 3 items]" in missing["exception"]["message"]
    unknown = runner.run_cell("robo.move_to([0, 0, 0], speed=3)")
    assert unknown["exception"]["type"] == "TypeError"
    assert [c[0] for c in toolkit.executed] == ["move_to", "move_to"]   # bad calls never reached it


def test_numpy_arguments_travel_as_numbers(make_runner, toolkit):
    runner = make_runner(toolkit)
    result = runner.run_cell("robo.move_to(np.array([0.05, 0.0, 0.0]), gripper=np.float32(1)).final_eef_pos")
    assert result["ok"], result["exception"]
    assert toolkit.executed[-1][1] == {"xyz": [0.05, 0.0, 0.0], "gripper": 1.0}
    bad = runner.run_cell("robo.move_to([0, 0, 0], gripper=object())")
    assert bad["exception"]["type"] == "TypeError"
    assert "cannot send a builtins.object" in bad["exception"]["message"]


def test_operator_tools_are_refused_in_python(make_runner, toolkit):
    runner = make_runner(toolkit)
    result = runner.run_cell("robo.request_operator_verdict('done?')")
    assert result["exception"]["type"] == "OperatorToolUnavailable"
    assert "call the request_operator_verdict tool directly" in result["exception"]["message"]
    by_name = runner.run_cell("robo.call('request_operator_verdict', {'question': 'done?'})")
    assert by_name["exception"]["type"] == "OperatorToolUnavailable"
    assert "request_operator_verdict" not in runner.run_cell("robo.tools")["value"]
    assert toolkit.executed == []


def test_cells_run_one_at_a_time(make_runner):
    import threading

    runner = make_runner()
    started = threading.Event()
    out = {}

    def long_cell():
        started.set()
        out["r"] = runner.run_cell("import time\ntime.sleep(2.0)\n'slept'")

    thread = threading.Thread(target=long_cell)
    thread.start()
    started.wait()
    import time

    deadline = time.monotonic() + 120
    while not runner._run_lock.locked():  # the first cell is running (not merely its thread started)
        assert thread.is_alive() and time.monotonic() < deadline, out
        time.sleep(0.01)
    with pytest.raises(RuntimeError, match="one at a time"):
        runner.run_cell("1")
    thread.join()
    assert out["r"]["value"] == "'slept'"


def test_bad_runner_arguments_name_the_flag(toolkit, tmp_path):
    from rpent.policy import CodePolicyRunner

    with pytest.raises(ValueError, match="--code-timeout-s"):
        CodePolicyRunner(toolkit, tmp_path, timeout_s=0)
    with pytest.raises(ValueError, match="--code-max-calls"):
        CodePolicyRunner(toolkit, tmp_path, max_calls=-1)
    with pytest.raises(TypeError, match="must be a str"):
        CodePolicyRunner(toolkit, tmp_path).run_cell(b"print(1)")


def test_env_steps_count_stateful_calls_only():
    from rpent.policy.runner import env_steps_of

    view = {"step": 4, "env_steps": 250, "state": {}}                       # view_env_state: cumulative
    assert env_steps_of(view, True, None) == (0, None)
    move = {"steps_used": 35, "state_after": {"env_steps": 285}}
    assert env_steps_of(move, False, None) == (35, 285)
    pick = {"chunks_used": 4, "state_after": {"env_steps": 305}}           # no per-call key: difference
    assert env_steps_of(pick, False, 285) == (20, 305)
    assert env_steps_of({"steps": 5}, False, 305) == (5, 310)              # set_gripper, no view
    assert env_steps_of({"error": "bad arguments"}, False, None) == (0, None)
