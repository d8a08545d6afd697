"""Limits the parent enforces: wall time (with cancel at the env-step boundary), call
budget, finish, operator interrupt."""

from __future__ import annotations

import threading
import time

from policy_point_robot import PointRobotToolkit


def test_timeout_during_a_motion_cancels_it_at_a_step_boundary(make_runner):
    toolkit = PointRobotToolkit(step_s=0.02)
    runner = make_runner(toolkit, timeout_s=1.0, grace_s=10.0)
    runner.run_cell("kept = 'still here'")
    t0 = time.monotonic()
    result = runner.run_cell("while True:\n    robo.move_to([100.0, 0, 0], max_steps=10**6)\n")
    elapsed = time.monotonic() - t0
    assert result["timed_out"] and not result["ok"]
    assert result["exception"]["type"] == "CellTimeout"
    assert toolkit.cancel_seen_at_step is not None and toolkit.cancel_seen_at_step > 0
    # stopped at the next step, well before the 10 s grace would have ended it (slack for a loaded machine)
    assert 1.0 <= elapsed < 1.0 + 5.0, elapsed
    motion = result["robot_calls"][0]
    assert motion["refused"] == "timeout"
    assert motion["result"]["code"] == "tool_cancelled"
    assert result["env_steps"] == motion["env_steps"] > 0 and result["moved"]
    assert not result["worker_lost"]
    runner.timeout_s = 60.0  # the way back takes as many steps as the 1 s out: more than the 1 s limit with overhead
    after = runner.run_cell("robo.move_to([0.05, 0, 0]).final_dist_m < 0.012, kept")
    assert after["value"] == "(True, 'still here')"           # cancel cleared, namespace kept


def test_timeout_of_a_pure_python_loop_keeps_the_namespace(make_runner):
    runner = make_runner(timeout_s=60)  # the quick cells get time for a loaded machine; the loop 0.5 s
    runner.run_cell("n = 0")
    runner.timeout_s = 0.5
    result = runner.run_cell("while True:\n    n += 1\n")
    runner.timeout_s = 60
    assert result["timed_out"] and result["exception"]["type"] == "CellTimeout"
    assert 'File "<cell 2>"' in result["exception"]["traceback"]
    assert not result["worker_lost"]
    assert int(runner.run_cell("n")["value"]) > 0


def test_a_cell_that_swallows_the_timeout_is_killed_and_the_next_cell_starts_fresh(make_runner):
    runner = make_runner(timeout_s=60, grace_s=0.5)  # the quick cells get time for a loaded machine
    assert runner.run_cell("old = 1")["ok"]
    runner.timeout_s = 0.5
    t0 = time.monotonic()
    result = runner.run_cell(
        "while True:\n    try:\n        while True:\n            pass\n    except BaseException:\n        pass\n")
    assert time.monotonic() - t0 < 0.5 + 0.5 + 30  # ended (the cell alone never ends), slack for a slow machine
    assert result["timed_out"] and result["worker_lost"]
    assert "killed by the runner" in result["worker_exit"]
    runner.timeout_s = 60
    nxt = runner.run_cell("'old' in globals()")
    assert nxt["worker_restarted"] and nxt["value"] == "False"


def test_the_101st_call_is_refused(make_runner, toolkit):
    runner = make_runner(toolkit)                              # default max_calls=100
    result = runner.run_cell(
        "for i in range(101):\n    robo.view_env_state()\n")
    assert result["exception"]["type"] == "CallBudgetExhausted"
    assert "--code-max-calls 100" in result["exception"]["message"]
    assert result["budget_exhausted"] and result["calls_made"] == 100
    assert len(toolkit.executed) == 100
    assert len(result["robot_calls"]) == 101 and result["robot_calls"][-1]["refused"] == "budget"
    assert 'File "<cell 1>", line 2' in result["exception"]["traceback"]
    fresh = runner.run_cell("robo.view_env_state().step")      # a new cell has a new budget
    assert fresh["ok"] and fresh["calls_made"] == 1


def test_catching_the_budget_error_does_not_help_but_finish_is_still_allowed(make_runner, toolkit):
    runner = make_runner(toolkit, max_calls=3)
    result = runner.run_cell(
        "try:\n"
        "    for i in range(6):\n        robo.view_env_state()\n"
        "except robo.CallBudgetExhausted:\n    print('refused')\n"
        "robo.finish('failure', 'out of calls')\n")
    assert result["stdout"] == "refused\n"
    assert len(toolkit.executed) == 4 and toolkit.executed[-1][0] == "finish"
    assert result["finished"] == {"status": "failure", "summary": "out of calls"}


def test_calling_again_after_the_budget_refusal_ends_the_cell(make_runner, toolkit):
    runner = make_runner(toolkit, max_calls=3)
    result = runner.run_cell(
        "refused = 0\n"
        "for i in range(6):\n"
        "    try:\n        robo.view_env_state()\n"
        "    except robo.CallBudgetExhausted:\n        refused += 1\n"
        "print('not reached')\n")
    assert result["exception"]["type"] == "CallBudgetExhausted"
    assert "called the robot again after its call budget" in result["exception"]["message"]
    assert result["stdout"] == "" and result["worker_lost"] and not result["ok"]
    assert [c.get("refused") for c in result["robot_calls"]] == [None, None, None, "budget", "budget"]
    assert len(toolkit.executed) == 3
    assert runner.run_cell("1 + 1")["value"] == "2"


def test_finish_ends_the_cell_early_and_cannot_be_swallowed(make_runner, toolkit):
    runner = make_runner(toolkit)
    result = runner.run_cell(
        "print('before')\n"
        "try:\n    robo.finish('success', 'placed it')\n"
        "except Exception:\n    print('swallowed')\n"
        "print('after')\n")
    assert result["ok"] and result["exception"] is None
    assert result["stdout"] == "before\n"
    assert result["finished"] == {"status": "success", "summary": "placed it"}
    assert toolkit.finish_result == {"status": "success", "summary": "placed it"}
    later = runner.run_cell("robo.move_to([0.1, 0, 0])\nprint('moved')")
    assert later["stdout"] == "" and later["robot_calls"][0]["refused"] == "finished"
    assert [c[0] for c in toolkit.executed] == ["finish"]     # nothing moved after the finish


def test_a_refused_finish_is_a_tool_error_the_cell_can_handle(make_runner):
    class RefusingFinish(PointRobotToolkit):
        def _tool_finish(self, status, summary):
            return {"error": "finish refused; attempts remain"}

    runner = make_runner(RefusingFinish())
    result = runner.run_cell(
        "try:\n    robo.finish('success', 'x')\nexcept robo.ToolError as e:\n    print(e.error['error'])\n'went on'")
    assert result["stdout"] == "finish refused; attempts remain\n" and result["value"] == "'went on'"
    assert result["finished"] is None


def test_interrupt_from_another_thread_stops_the_motion(make_runner):
    toolkit = PointRobotToolkit(step_s=0.02)
    runner = make_runner(toolkit, timeout_s=30)
    runner.run_cell("0")                                       # the worker is up: the timer hits the motion
    threading.Timer(0.5, runner.interrupt).start()
    t0 = time.monotonic()
    result = runner.run_cell("robo.move_to([100.0, 0, 0], max_steps=10**6)")
    assert time.monotonic() - t0 < 25  # the motion alone takes 20000 s; the cell's timeout is 30 s
    assert result["interrupted"] and not result["timed_out"]
    assert result["exception"]["type"] == "CellInterrupted"
    assert toolkit.cancel_seen_at_step is not None
    assert not runner.interrupt()                              # nothing running now
