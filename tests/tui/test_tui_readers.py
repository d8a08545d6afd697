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


def test_scripted_actions_without_images_show_the_run_frames(tmp_path):
    """A scripted run's trajectory records ``obs.main``/``obs.wrist`` as null; the
    Trajectories view must still show frames (the run's camera at the last tool boundary)."""
    import numpy as np

    from rpent.recording import TaskInfo, TrajectoryRecorder
    from rpent.recording.run_readers import step_records
    from tui_records import build_run

    run = build_run(tmp_path, trajectory=False)  # states.json: env_steps 0, 10, 20, 30 with agentview.png/NN.png
    rec = TrajectoryRecorder(run, TaskInfo(robot="libero", suite="libero_goal", task=0, seed=0,
                                           task_language="put the bowl on the plate", planner="scripted"))
    rec.begin_tool_call("call-1", "move_to", {"xyz": [0.1, 0.0, 1.0]})
    for step in range(25):
        rec.record_action(np.zeros(7, np.float32), {"state": np.zeros(8, np.float32)}, call_id="call-1",
                          source="scripted", reward=0.0, terminated=False, truncated=False, step=step)
    rec.end_tool_call("call-1", {"final_dist_m": 0.003})
    rec.close("finished", True)
    steps = step_records(run)
    assert len(steps) == 25 and all(s.raw["obs"]["main"] is None for s in steps)
    by_step = {s.step: s.frames.get("agentview.png") for s in steps}
    assert by_step[0] == run / "agentview.png" / "00.png"
    assert by_step[9] == run / "agentview.png" / "00.png"
    assert by_step[10] == run / "agentview.png" / "01.png"
    assert by_step[24] == run / "agentview.png" / "02.png"
    assert all(p.is_file() for p in by_step.values())
