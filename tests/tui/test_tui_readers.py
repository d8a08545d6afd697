"""Readers against records written by the real run-record and trajectory writers."""

import json

import pytest

from rpent.recording import run_readers as readers
from tui_records import build_run


def test_list_runs_and_step_timeline_from_a_recorded_trajectory(tmp_path):
    build_run(tmp_path / "logs" / "tasks", "0001_libero_goal_t0_s0", steps=4)
    build_run(tmp_path / "logs" / "tasks", "0002_libero_object_t3_s1", suite="libero_object", task=3, seed=1,
              success=False, trajectory=False, steps=3)
    runs = readers.list_runs(tmp_path / "logs")
    by_name = {r.name: r for r in runs}
    goal, obj = by_name["0001_libero_goal_t0_s0"], by_name["0002_libero_object_t3_s1"]
    assert (goal.suite, goal.task, goal.seed, goal.success, goal.planner, goal.trajectories) == (
        "libero_goal", 0, 0, True, "scripted", 1)
    assert (obj.task_label, obj.success, obj.steps) == ("libero_object t3 s1", False, 3)

    steps = readers.step_records(goal.path)
    assert [s.step for s in steps] == [0, 1, 2, 3]
    assert steps[2].tool == "pi0_pick" and steps[2].call_id == "call-1" and len(steps[2].action) == 7
    assert steps[2].prediction["instruction"] == "pick up the bowl"
    assert steps[3].terminated is True
    assert steps[1].frames["main"].is_file() and steps[1].frames["wrist"].is_file()

    motion = readers.step_records(obj.path)  # no trajectory: states.json steps
    assert [s.tool for s in motion] == [None, "pi0_pick", "move_to"]
    assert motion[2].frames["agentview.png"].name == "02.png"

    transcript = readers.read_transcript(goal.path)
    assert len(transcript) == 4
    assert len(readers.transcript_until(transcript, "call-1")) == 3


def test_bad_json_names_the_file_and_a_torn_last_line_is_skipped(tmp_path):
    (tmp_path / "states.json").write_text("{nope")
    with pytest.raises(readers.RecordError, match="states.json: invalid JSON"):
        readers.read_states(tmp_path)
    (tmp_path / "a.jsonl").write_text(json.dumps({"a": 1}) + "\n" + '{"a": 2')
    assert readers.read_jsonl(tmp_path / "a.jsonl") == [{"a": 1}]


def test_report_summary_lists_counts_and_exclusion_reasons():
    rows = dict(readers.summarize_report({"episodes": 3, "frames": 120,
                                          "exclusions": [{"reason": "not successful"}, {"reason": "not successful"},
                                                         {"reason": "scripted action"}]}))
    assert rows["episodes"] == "3" and rows["excluded: not successful"] == "2" and rows["excluded: scripted action"] == "1"
