"""Smaller operator items of issue 12: tool results as the fields an operator reads, the transcript
at step 0, and the run list's outcome column."""

from __future__ import annotations

from pathlib import Path

from rpent_tui.screens.trajectories import run_row
from rpent.recording.run_readers import RunSummary, transcript_until
from rpent_tui.widgets.transcript import render_event


def test_tool_results_show_the_fields_an_operator_reads():
    line = render_event({"kind": "planner", "event": "tool_result", "name": "move_to", "call_id": "c1",
                         "result": {"reached": True, "final_dist_m": 0.0041234, "steps_used": 37,
                                    "state_after": {"state": {"robot0_eef_pos": [0.1, 0.2, 0.3]}}}})
    assert line.plain == "← move_to: reached yes · final_dist_m 0.004123 · steps_used 37"
    error = render_event({"kind": "planner", "event": "tool_result", "name": "segment",
                          "result": {"error": "segment failed:\nno mask", "code": "bad"}})
    assert error.plain == "← segment: error segment failed: no mask · code bad" and "\n" not in error.plain
    other = render_event({"kind": "planner", "event": "tool_result", "result": {"world_xyz": [0.1, 0.2]}})
    assert other.plain == '← {"world_xyz": [0.1, 0.2]}'  # no key field: compact JSON


def test_step_zero_shows_the_transcript_before_the_first_tool_call():
    entries = [{"role": "user", "content": [{"type": "text", "text": "task"}]},
               {"role": "assistant", "content": [{"type": "text", "text": "plan"}]},
               {"role": "assistant", "content": [{"type": "tool_use", "id": "c1", "name": "move_to"}]},
               {"role": "tool", "tool_call_id": "c1", "content": {}},
               {"role": "assistant", "content": [{"type": "text", "text": "done"}]}]
    assert transcript_until(entries, None, initial=True) == entries[:2]
    assert transcript_until(entries, "c1") == entries[:4]


def test_run_list_names_each_outcome():
    def row(**kw):
        return run_row(RunSummary(path=Path("x"), name="x", **kw))[1]

    assert "cancelled" in row(state="cancelled", success=False)
    assert "aborted" in row(state="aborted", success=False)
    assert "error" in row(state="error", success=False)
    assert "env solved" in row(success=True)
