"""TrajectoryRecorder: layout, lossless content, only-executed predictions, contract errors, crash safety."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from rpent.recording import TaskInfo, TrajectoryRecorder, find_record_dirs, load_observation, load_record
from rpent.recording.jsonl import read_jsonl

INFO = TaskInfo(robot="libero", suite="libero_goal", task=3, seed=7, task_language="open the drawer",
                planner="api", model="anthropic:test-model", reasoning_effort="low")


def obs(k: int) -> dict:
    rng = np.random.default_rng(k)
    return {
        "main_image": rng.integers(0, 256, (256, 256, 3), dtype=np.uint8),
        "wrist_image": rng.integers(0, 256, (256, 256, 3), dtype=np.uint8),
        "state": rng.normal(size=8).astype(np.float32),
    }


def lines(path: Path) -> list[dict]:
    content = read_jsonl(path)
    assert content.problems == []
    return content.records


def test_record_layout_and_lossless_content(tmp_path):
    rec = TrajectoryRecorder(tmp_path, INFO)
    d = tmp_path / "trajectories" / "libero_goal_t3_s7"
    assert rec.record_dir == d
    task = json.loads((d / "task.json").read_text())
    assert task["status"] == "running" and task["environment_success"] is None and task["ended_at"] is None
    assert task["capture"] == {"planner_messages": "full", "actions": "full", "observations": "vla",
                               "note": "all parts captured"}
    assert set(task["versions"]) == {"rpent", "python", "mujoco", "libero"}

    rec.record_planner_event("request", {"messages": [{"role": "user", "content": "go"}], "image": b"\x89PNG"})
    rec.record_planner_event("reply", {"id": "msg_1", "text": "calling move_to"})
    rec.begin_tool_call("tc_1", "move_to", {"xyz": [0.1, 0.2, 0.3]})
    o0, o1, o2, o3 = obs(0), obs(1), obs(2), obs(3)
    a0 = np.array([0.1, -0.2, 0.3, 0, 0, 0.05, -1], np.float32)
    rec.record_action(a0, o0, call_id="tc_1", source="scripted", reward=0.0, terminated=False, truncated=False)
    rec.record_action(a0, {"state": o0["state"]}, call_id="tc_1", source="scripted", reward=0.0, terminated=False,
                      truncated=False)  # scripted step recorded without rendering images
    rec.end_tool_call("tc_1", {"final_dist_m": 0.004, "_images": [{"label": "agentview", "png": b"xx"}]})
    rec.begin_tool_call("tc_2", "pi0_pick", {"prompt": "pick up the bowl"})
    chunk = np.random.default_rng(9).uniform(-1, 1, (5, 7)).astype(np.float32)
    pid = rec.begin_prediction("pick up the bowl", "tc_2", "pi0_pick", chunk)
    for i, o in enumerate((o1, o2, o3)):
        rec.record_action(chunk[i], o, call_id="tc_2", source="vla", pred_id=pid, index_in_chunk=i,
                          reward=float(i == 2), terminated=i == 2, truncated=False)
    assert (d / "predictions.jsonl").read_text() == "" or not lines(d / "predictions.jsonl")  # written at chunk end
    rec.end_prediction(pid, 3)
    rec.end_tool_call("tc_2", {"success": True})
    rec.close("finished", environment_success=True)

    task = json.loads((d / "task.json").read_text())
    assert task["status"] == "finished" and task["environment_success"] is True and task["ended_at"]
    assert task["counts"] == {"planner_lines": 6, "actions": 5, "predictions": 1}

    planners = lines(d / "planners.jsonl")
    assert [p["seq"] for p in planners] == list(range(6))
    assert [p["kind"] for p in planners] == ["request", "reply", "tool_call", "tool_result", "tool_call", "tool_result"]
    assert planners[0]["data"]["image"] == {"_bytes": 4}
    assert planners[3]["result"]["_images"] == ["agentview"] and planners[3]["steps"] == [0, 1]
    assert planners[5]["n_actions"] == 3 and planners[5]["steps"] == [2, 4]
    assert all(p["t"] >= planners[0]["t"] for p in planners)

    actions = lines(d / "actions.jsonl")
    assert [a["seq"] for a in actions] == [0, 1, 2, 3, 4] and [a["step"] for a in actions] == [0, 1, 2, 3, 4]
    assert [a["source"] for a in actions] == ["scripted", "scripted", "vla", "vla", "vla"]
    assert actions[0]["pred_id"] is None and actions[0]["index_in_chunk"] is None
    assert actions[1]["obs"]["main"] is None and actions[1]["obs"]["wrist"] is None
    assert not (d / "artifacts" / "main" / "000001.png").exists()
    main, wrist, state = load_observation(d, actions[1]["obs"])
    assert main is None and wrist is None
    np.testing.assert_array_equal(state, o0["state"])
    actions = actions[:1] + actions[2:]
    assert [a["index_in_chunk"] for a in actions[1:]] == [0, 1, 2] and actions[3]["terminated"] is True
    for a, o, act in zip(actions, (o0, o1, o2, o3), (a0, chunk[0], chunk[1], chunk[2])):
        np.testing.assert_array_equal(np.asarray(a["action"], np.float32), act)  # float32 exact round trip
        main, wrist, state = load_observation(d, a["obs"])
        np.testing.assert_array_equal(main, o["main_image"])
        np.testing.assert_array_equal(wrist, o["wrist_image"])
        np.testing.assert_array_equal(state, o["state"])
    assert actions[2]["obs"]["main"] == "artifacts/main/000003.png"

    (pred,) = lines(d / "predictions.jsonl")
    assert pred["n_executed"] == 3 and pred["chunk_length"] == 5 and pred["call_id"] == "tc_2"
    assert pred["created_step"] == 2 and pred["instruction"] == "pick up the bowl"
    np.testing.assert_array_equal(np.asarray(pred["actions"], np.float32), chunk[:3])  # never the unexecuted tail


def test_second_record_of_same_task_does_not_overwrite(tmp_path):
    r1 = TrajectoryRecorder(tmp_path, INFO, background=False)
    r1.close("finished", False)
    r2 = TrajectoryRecorder(tmp_path, INFO, background=False)
    r2.close("finished", True)
    assert r2.record_dir.name == "libero_goal_t3_s7-r2"
    assert json.loads((r1.record_dir / "task.json").read_text())["environment_success"] is False
    assert [p.name for p in find_record_dirs(tmp_path)] == ["libero_goal_t3_s7", "libero_goal_t3_s7-r2"]


def test_contract_violations_raise_clear_errors(tmp_path):
    rec = TrajectoryRecorder(tmp_path, INFO, background=False)
    o = obs(0)
    with pytest.raises(ValueError, match="not an open tool call"):
        rec.record_action(np.zeros(7), o, call_id="nope", source="scripted", reward=0, terminated=False, truncated=False)
    rec.begin_tool_call("c1", "pi0_pick", {})
    rec.begin_tool_call("c2", "pi0_pick", {})
    with pytest.raises(ValueError, match="already used"):
        rec.begin_tool_call("c1", "pi0_pick", {})
    with pytest.raises(ValueError, match=r"shape \(7,\)"):
        rec.record_action(np.zeros(6), o, call_id="c1", source="scripted", reward=0, terminated=False, truncated=False)
    with pytest.raises(ValueError, match="non-finite"):
        rec.record_action(np.full(7, np.nan), o, call_id="c1", source="scripted", reward=0, terminated=False, truncated=False)
    with pytest.raises(ValueError, match="uint8"):
        rec.record_action(np.zeros(7), {**o, "main_image": o["main_image"].astype(np.float32)}, call_id="c1",
                          source="scripted", reward=0, terminated=False, truncated=False)
    with pytest.raises(ValueError, match="lacks 'state'"):
        rec.record_action(np.zeros(7), {"main_image": o["main_image"]}, call_id="c1", source="scripted",
                          reward=0, terminated=False, truncated=False)
    pid = rec.begin_prediction("pick", "c1", "pi0_pick", np.zeros((5, 7)))
    with pytest.raises(ValueError, match="VLA actions need both policy images"):
        rec.record_action(np.zeros(7), {"state": o["state"]}, call_id="c1", source="vla", pred_id=pid,
                          index_in_chunk=0, reward=0, terminated=False, truncated=False)
    with pytest.raises(ValueError, match="belongs to call"):
        rec.record_action(np.zeros(7), o, call_id="c2", source="vla", pred_id=pid, index_in_chunk=0,
                          reward=0, terminated=False, truncated=False)
    with pytest.raises(ValueError, match="outside chunk"):
        rec.record_action(np.zeros(7), o, call_id="c1", source="vla", pred_id=pid, index_in_chunk=5,
                          reward=0, terminated=False, truncated=False)
    rec.record_action(np.zeros(7), o, call_id="c1", source="vla", pred_id=pid, index_in_chunk=0,
                      reward=0, terminated=False, truncated=False)
    with pytest.raises(ValueError, match="already recorded"):
        rec.record_action(np.zeros(7), o, call_id="c1", source="vla", pred_id=pid, index_in_chunk=0,
                          reward=0, terminated=False, truncated=False)
    with pytest.raises(ValueError, match="exactly 0..1"):
        rec.end_prediction(pid, 2)
    with pytest.raises(ValueError, match="does not match"):
        rec.begin_prediction("pick", "c1", "move_to", np.zeros((5, 7)))
    with pytest.raises(ValueError, match="reserved"):
        rec.record_planner_event("tool_call", {})
    with pytest.raises(ValueError, match="close status"):
        rec.close("done", True)
    rec.close("interrupted", None)  # ends the open prediction (1 executed row) and both open calls
    with pytest.raises(RuntimeError, match="closed"):
        rec.record_planner_event("text", {})
    d = rec.record_dir
    (pred,) = lines(d / "predictions.jsonl")
    assert pred["n_executed"] == 1
    results = [p for p in lines(d / "planners.jsonl") if p["kind"] == "tool_result"]
    assert [r["error"] for r in results] == ["tool call still open when the record closed"] * 2
    assert json.loads((d / "task.json").read_text())["status"] == "interrupted"


def test_robot_without_action_capture_says_so(tmp_path):
    info = TaskInfo(robot="robotwin", suite="robotwin_easy", task=0, seed=0, task_language="lift",
                    planner="claude_code", model="claude")
    rec = TrajectoryRecorder(tmp_path, info, background=False)
    rec.begin_tool_call("c", "move", {})
    with pytest.raises(RuntimeError, match="action capture is 'unavailable'"):
        rec.record_action(np.zeros(7), obs(0), call_id="c", source="scripted", reward=0, terminated=False, truncated=False)
    rec.close("finished", True)
    cap = json.loads((rec.record_dir / "task.json").read_text())["capture"]
    assert cap["planner_messages"] == "tool_calls_only" and cap["actions"] == "unavailable"
    assert "model requests and replies" in cap["note"] and "executed env actions" in cap["note"]


def test_exception_inside_context_marks_error(tmp_path):
    with pytest.raises(ZeroDivisionError):
        with TrajectoryRecorder(tmp_path, INFO) as rec:
            1 / 0
    task = json.loads((rec.record_dir / "task.json").read_text())
    assert task["status"] == "error" and "ZeroDivisionError" in task["error"] and task["environment_success"] is None


CRASH_SCRIPT = textwrap.dedent(
    """
    import os, signal, sys
    import numpy as np
    from rpent.recording import TaskInfo, TrajectoryRecorder
    rec = TrajectoryRecorder(sys.argv[1], TaskInfo("libero", "libero_10", 1, 2, "put both pots", "api", "m"))
    rng = np.random.default_rng(0)
    rec.begin_tool_call("c1", "pi0_pick", {"prompt": "pick"})
    for n in range(40):
        pid = rec.begin_prediction("pick", "c1", "pi0_pick", rng.uniform(-1, 1, (5, 7)))
        for i in range(5):
            o = {"main_image": rng.integers(0, 256, (256, 256, 3), dtype=np.uint8),
                 "wrist_image": rng.integers(0, 256, (256, 256, 3), dtype=np.uint8),
                 "state": rng.normal(size=8).astype(np.float32)}
            rec.record_action(rng.uniform(-1, 1, 7), o, call_id="c1", source="vla", pred_id=pid,
                              index_in_chunk=i, reward=0, terminated=False, truncated=False)
        rec.end_prediction(pid, 5)
        if n == 30:
            os.kill(os.getpid(), signal.SIGKILL)   # killed mid-episode, writes still queued
    """
)


def test_killed_run_leaves_complete_lines_resolvable_images_and_running_status(tmp_path):
    proc = subprocess.run([sys.executable, "-c", CRASH_SCRIPT, str(tmp_path)], capture_output=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()
    (d,) = find_record_dirs(tmp_path)
    record = load_record(d)
    assert record.task["status"] == "running" and record.task["environment_success"] is None
    assert record.actions.problems == [] and record.predictions.problems == []
    assert 0 < len(record.actions.records) <= 155
    for a in record.actions.records:  # every reference written resolves to a complete image
        main, wrist, state = load_observation(d, a["obs"])
        assert main.shape == wrist.shape == (256, 256, 3)
    preds = {p["pred_id"] for p in record.predictions.records}
    assert preds <= {a["pred_id"] for a in record.actions.records}
    leftovers = [p for p in (d / "artifacts").rglob("*") if p.name.endswith(".tmp")]
    # a temporary PNG may survive the kill, but it is never referenced
    referenced = {a["obs"][c] for a in record.actions.records for c in ("main", "wrist")}
    assert not any(str(p.relative_to(d)) in referenced for p in leftovers)


def test_truncated_final_line_is_reported_not_parsed(tmp_path):
    p = tmp_path / "x.jsonl"
    p.write_bytes(b'{"a": 1}\n{"a": 2}\n{"a": 3}')  # parses, but has no line end: cut off
    content = read_jsonl(p)
    assert [r["a"] for r in content.records] == [1, 2]
    assert [(q.line, q.reason) for q in content.problems] == [(3, "truncated")]
    p.write_bytes(b'{"a": 1}\n{"a": \n[1]\n')
    assert [q.reason for q in read_jsonl(p).problems] == ["invalid_json", "not_object"]


def test_observations_all_records_scripted_images_and_refuses_an_action_without_them(tmp_path):
    rec = TrajectoryRecorder(tmp_path, INFO, observations="all")
    assert json.loads((rec.record_dir / "task.json").read_text())["capture"]["observations"] == "all"
    rec.begin_tool_call("tc_1", "move_to", {})
    o = obs(0)
    seq = rec.record_action(np.zeros(7, np.float32), o, call_id="tc_1", source="scripted", reward=0.0,
                            terminated=False, truncated=False)
    with pytest.raises(ValueError, match="lacks 'main_image'.*observations='all'"):
        rec.record_action(np.zeros(7, np.float32), {"state": o["state"]}, call_id="tc_1", source="scripted",
                          reward=0.0, terminated=False, truncated=False)
    rec.end_tool_call("tc_1", {})
    rec.close("finished", True)
    (line,) = lines(rec.record_dir / "actions.jsonl")
    assert line["seq"] == seq and line["obs"]["main"] == "artifacts/main/000000.png"
    assert (rec.record_dir / line["obs"]["wrist"]).is_file()
    with pytest.raises(ValueError, match="observations must be one of"):
        TrajectoryRecorder(tmp_path / "x", INFO, observations="some")
