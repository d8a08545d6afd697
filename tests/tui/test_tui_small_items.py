"""Smaller operator items: tool results as the fields an operator reads, the transcript
at step 0, and the run list's outcome column."""

from __future__ import annotations

from pathlib import Path

from rpent_tui.screens.trajectories import run_row
from rpent.recording.run_readers import RunSummary, transcript_until
from rpent_tui.widgets.transcript import render_event


def test_tool_results_show_the_fields_an_operator_reads():
    line = render_event({"kind": "planner", "event": "tool_result", "name": "move_to", "call_id": "c1",
                         "result": {"reached": True, "final_dist_m": 0.0041234, "steps_used": 37,
                                    "final_eef_pos": [0.22440000000000002, -0.0512, 1.0049999],
                                    "state_after": {"state": {"robot0_eef_pos": [0.1, 0.2, 0.3]}}}})
    assert line.plain == "← move_to: reached yes · dist 4.12 mm · eef (224, -51, 1005) mm · 37 steps"
    error = render_event({"kind": "planner", "event": "tool_result", "name": "segment",
                          "result": {"error": "segment failed:\nno mask", "code": "bad"}})
    assert error.plain == "← segment: error segment failed: no mask · code bad" and "\n" not in error.plain
    other = render_event({"kind": "planner", "event": "tool_result", "result": [0.1, 0.2]})
    assert other.plain == "← [0.1, 0.2]"  # not a dict: compact JSON


def test_every_tool_gets_a_rounded_one_line_summary():
    def line(name, result):
        text = render_event({"kind": "planner", "event": "tool_result", "name": name, "result": result}).plain
        assert "\n" not in text and "0000000" not in text, text
        return text

    assert line("set_gripper", {"gripper": 1.0, "steps": 5, "gripper_opening": 0.022440000000000002,
                                "terminated": False, "truncated": False}) == "← set_gripper: close · opening 22.4 mm · 5 steps"
    assert line("back_project", {"world_xyz": [0.22440000000000002, 0.1, 0.9124999], "pixel": [512, 300],
                                 "camera": "agentview", "step": 4, "source_artifact": "x.npy"}) == \
        "← back_project: xyz (224, 100, 912) mm · pixel (512, 300) · camera agentview · step 4"
    assert line("back_project", {"center_xyz": [0.1, 0.2, 0.3], "median_xyz": [0.1, 0.2, 0.3], "n_valid": 812,
                                 "points": [[0.1, 0.2, 0.3]] * 50}).startswith("← back_project: centre (100, 200, 300) mm · valid px 812")
    fixtures = {"wooden_cabinet_1": [{"part": "top", "qpos": 0.0012345678}, {"part": "middle"}],
                "flat_stove_1": [{"part": "button", "qpos": 0.22440000000000002}]}
    assert line("view_fixtures", {"fixtures": fixtures, "note": "live"}) == \
        "← view_fixtures: 2 fixture(s): wooden_cabinet_1 (2 part(s)), flat_stove_1 (1 part(s))"
    assert line("rotate_wrist", {"start_yaw": 0.1, "target_yaw": 1.5707963267948966, "final_yaw": 1.5612345678,
                                 "final_err": 0.009512345, "steps_used": 12}) == \
        "← rotate_wrist: yaw 1.56 · err 0.00951 · 12 steps"
    # a tool the summariser does not know: its scalar fields, rounded; bulky values as counts
    assert line("weigh_object", {"mass_kg": 0.31234567891, "ok": True, "images": ["..."], "samples": [1, 2, 3, 4]}) == \
        "← weigh_object: mass_kg 0.312 · ok yes · samples 4 item(s)"


def test_trajectories_transcript_summarises_recorded_tool_results():
    from rpent_tui.screens.trajectories import transcript_lines

    lines = transcript_lines([{"role": "tool", "name": "move_to", "tool_call_id": "c1",
                               "content": '{"reached": true, "final_dist_m": 0.0070551230322079515, '
                                          '"final_eef_pos": [-0.11973828067755818, -0.2413189607847582, 0.0616], '
                                          '"steps_used": 27}'},
                              {"role": "tool", "name": "odd", "content": "plain text"}])
    assert lines[0].plain == "tool: move_to: reached yes · dist 7.06 mm · eef (-120, -241, 62) mm · 27 steps"
    assert lines[1].plain == "tool: plain text"


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


def test_run_list_shows_label_predicate_verdict_and_disagreement(tmp_path):
    from rpent_tui.services.outcome import read_outcome
    from tui_records import build_run

    run = build_run(tmp_path, "0001_libero_goal_t0_s0", success=False, trajectory=False,
                    verdict={"answer": "success", "notes": "bowl rests on the rim"}, label="succeeded")
    outcome = read_outcome(run)
    assert (outcome.label, outcome.environment_success, outcome.verdict) == ("succeeded", False, "success")
    assert outcome.disagreement == "operator said success; environment predicate: not satisfied"
    cells = run_row(RunSummary(path=run, name=run.name, success=False), outcome)
    assert "succeeded" in cells[1] and "✗" in cells[2] and "success ≠ env" in cells[3]
    assert outcome.line() == ("label succeeded · env not solved · operator success (bowl rests on the rim) · "
                              "disagreement: operator said success; environment predicate: not satisfied")
    # a plain rpent run (no taskrun.json): the transcript's fields
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "transcript_libero_goal_t0_s0.json").write_text(
        '{"label": "failed", "environment_success": true, "operator_verdict": {"answer": "failure", "notes": ""},'
        ' "disagreement": "operator said failure; environment predicate: satisfied", "messages": []}')
    outcome = read_outcome(plain)
    assert (outcome.label, outcome.environment_success, outcome.verdict) == ("failed", True, "failure")
    assert outcome.verdict_cell() == "failure ≠ env"


def test_the_editor_starter_cell_calls_only_tools_every_robot_has():
    # the F4 editor opens with this cell: ctrl+r on it must run, on LIBERO as on Meta-World
    import re

    from rpent.robots.libero.toolkit import LiberoToolkit
    from rpent.robots.metaworld.toolkit import MetaWorldToolkit
    from rpent.toolkit.registry import build_spec
    from rpent_tui.screens.editor import STARTER_CELL

    called = set(re.findall(r"\brobo\.(\w+)\(", STARTER_CELL))
    assert called
    for cls in (LiberoToolkit, MetaWorldToolkit):
        tools = {build_spec(getattr(cls, n)).spec.name for n in dir(cls)
                 if callable(getattr(cls, n, None)) and hasattr(getattr(cls, n), "__rpent_tool__")}
        assert called <= tools, (cls.__name__, called - tools)


def test_terminal_controls_from_a_cell_or_a_model_are_shown_not_sent_to_the_terminal():
    # ESC sequences a hostile cell prints (retitle the window, clear the screen, write the clipboard) and
    # a C1 CSI: each becomes one visible stand-in character in every pane that shows run text
    from rpent_tui.screens.editor import format_cell_result
    from rpent_tui.screens.trajectories import transcript_lines
    from rpent_tui.widgets.transcript import raw_text

    hostile = "a\x1b]2;PWNED\x07b\x1b[2Jc\x1b]52;c;cHduZWQ=\x07d\x9b2Je"
    lines = [render_event({"kind": "planner", "event": "text", "text": hostile}),
             render_event({"kind": "planner", "event": "tool_result", "name": "python",
                           "result": {"stdout": hostile}}),
             raw_text({"kind": "planner", "event": "tool_result", "name": "python", "result": {"stdout": hostile}}),
             *format_cell_result({"stdout": hostile, "exception": {"type": "ValueError", "message": hostile}}),
             *transcript_lines([{"role": "assistant", "content": hostile},
                                {"role": "tool", "name": "python", "content": {"stdout": hostile}}])]
    for line in lines:
        assert not any(ord(ch) < 0x20 and ch not in "\t\n" or 0x7F <= ord(ch) < 0xA0 for ch in line.plain), \
            repr(line.plain)
    assert "a␛]2;PWNEDb␛[2Jc" in lines[0].plain and "d�2Je" in lines[0].plain
    assert any("stdout a␛]2;PWNED" in line.plain for line in lines[1:3])
