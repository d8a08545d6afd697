"""A plain interrupt (Esc, ``/interrupt``) cancels only the running tool of an MCP planner.

The claude_code and codex planners reach the toolkit through ``ToolBridge``; the run's interrupt
listener calls ``toolkit.cancel()``. Before the fix nothing cleared that flag after a plain
interrupt, so every later motion of the TaskRun was cancelled at its first env-step boundary.
"""

from __future__ import annotations

import json
import threading

from planner_fixture_toolkit import FixtureToolkit

from rpent.planners.base import PlannerStats
from rpent.planners.events import EventEmitter
from rpent.planners.steering import Steering
from rpent.planners.tool_bridge import ToolBridge


def _bridge(toolkit, steering):
    stop = lambda: (steering.stop_reason or "stopped") if steering.stop_requested else None  # noqa: E731
    bridge = ToolBridge(toolkit, EventEmitter(None), PlannerStats(), [], stop_check=stop, steering=steering)
    remove = steering.add_interrupt_listener(toolkit.cancel)  # what run_sdk_session registers
    return bridge, remove


def _result(content):
    return json.loads(next(b["text"] for b in content if b["type"] == "text"))


def _interrupt_during(bridge, toolkit, steering, **kw):
    box = {}
    worker = threading.Thread(target=lambda: box.update(out=bridge.call("mcp__rpent__wait_steps", {"steps": 2000})))
    worker.start()
    assert toolkit.running.wait(20)
    steering.interrupt(**kw)
    worker.join(20)
    assert not worker.is_alive()
    content, is_error = box["out"]
    return _result(content), is_error


def test_after_a_plain_interrupt_the_next_motion_runs():
    toolkit, steering = FixtureToolkit(step_s=0.002), Steering()
    bridge, remove = _bridge(toolkit, steering)
    try:
        result, is_error = _interrupt_during(bridge, toolkit, steering)
        assert is_error and result["code"] == "tool_cancelled"
        before = toolkit.steps
        content, is_error = bridge.call("mcp__rpent__wait_steps", {"steps": 5})
        assert not is_error, _result(content)
        assert _result(content)["steps_used"] == 5 and toolkit.steps == before + 5
        assert toolkit.cancelled_calls == ["wait_steps"]
    finally:
        remove()


def test_an_interrupt_between_tools_does_not_cancel_every_later_tool():
    toolkit, steering = FixtureToolkit(step_s=0.002), Steering()
    bridge, remove = _bridge(toolkit, steering)
    try:
        steering.interrupt()  # Esc while the model was thinking: no tool was running
        for _ in range(2):
            content, is_error = bridge.call("mcp__rpent__wait_steps", {"steps": 3})
            assert not is_error, _result(content)
        assert toolkit.cancelled_calls == []
    finally:
        remove()


def test_a_stop_is_never_cleared():
    toolkit, steering = FixtureToolkit(step_s=0.002), Steering()
    bridge, remove = _bridge(toolkit, steering)
    try:
        result, is_error = _interrupt_during(bridge, toolkit, steering, stop=True, reason="operator quit")
        assert is_error and result["code"] == "tool_cancelled"
        content, is_error = bridge.call("mcp__rpent__wait_steps", {"steps": 3})
        assert is_error and "not executed: operator quit" in _result(content)["error"]
        assert toolkit.steps < 2000
    finally:
        remove()
