"""``rpent-flywheel validate`` checks the run record (transcript, states.json) next to each trajectory record.

Records are written by the real ``TrajectoryRecorder``; the run record beside them is written in
the form the run layer writes (``rpent.run.record``: ``transcript_<tag>.json``, ``states.json``),
with values taken from the recorded actions, then damaged one defect per run directory.
"""

from __future__ import annotations

import json
from pathlib import Path

from test_flywheel_export import tree_digest

from rpent.cli.flywheel import main as flywheel_main
from rpent.flywheel.validate import validate_root
from rpent.run.record import run_tag

PLAN = [("scripted", 2), ("vla", "pick", [3])]  # 5 actions, env steps 0..4; the last one succeeds


def write_run_record(run_dir: Path, record_dir: Path) -> tuple[Path, Path]:
    """Write a sound ``transcript_<tag>.json`` and ``states.json`` for the record (as the run layer does)."""
    task = json.loads((record_dir / "task.json").read_text())
    actions = [json.loads(x) for x in (record_dir / "actions.jsonl").read_text().splitlines()]
    tag = run_tag(task["suite"], task["task"], task["seed"])
    transcript = {
        "suite": task["suite"], "task": task["task"], "seed": task["seed"], "init_state_id": 0,
        "init_state_global_id": 0, "init_state_sha256": task.get("init_state_sha256"),
        "task_language": task["task_language"], "planner": task["planner"], "model": None, "policy_mode": "tools",
        "elapsed_s": 1.5, "finish": {"success": True}, "error": None, "stop_reason": "finished",
        "environment_success": task["environment_success"], "env_steps": actions[-1]["step"] + 1,
        "label": "succeeded", "operator_verdict": None, "verdict_required": False, "disagreement": None,
        "operator_verdicts": [], "steering": [], "undelivered_operator_lines": [], "stats": {"elapsed_s": 1.5},
        "messages": [],
    }
    states = {
        "schema_version": 1, "tag": tag,
        "episode": {"suite": task["suite"], "task": task["task"], "seed": task["seed"], "init_state_id": 0},
        "run_artifacts": [],
        "steps": [{"step_idx": 0, "env_steps": 0, "terminated": False, "truncated": False, "success": False},
                  {"step_idx": 1, "env_steps": 2, "terminated": False, "truncated": False, "success": False},
                  {"step_idx": 2, "env_steps": 5, "terminated": True, "truncated": False, "success": True}],
        "failed_calls": [],
    }
    t = run_dir / f"transcript_{tag}.json"
    s = run_dir / "states.json"
    t.write_text(json.dumps(transcript))
    s.write_text(json.dumps(states))
    return t, s


def _edit(path: Path, **changes) -> None:
    doc = json.loads(path.read_text())
    doc.update(changes)
    path.write_text(json.dumps(doc))


def test_validate_checks_the_transcript_and_states_of_each_run(tmp_path, record_run, capsys):
    root = tmp_path / "runs"

    def run(name: str) -> tuple[Path, Path]:
        d, _ = record_run(root / name, PLAN, observations="all", success_seq=4)
        return write_run_record(root / name, d)

    run("clean")
    t, _ = run("garbage_transcript")
    t.write_bytes(b"\x00\x9f garbage \xff{{{")
    t, _ = run("truncated_transcript")
    t.write_text(t.read_text()[:-40])
    t, _ = run("transcript_is_a_list")
    t.write_text("[1, 2, 3]")
    t, _ = run("transcript_disagrees")
    _edit(t, environment_success=False, suite="libero_spatial")
    t, _ = run("transcript_env_steps")
    _edit(t, env_steps=9)
    t, _ = run("transcript_fields")
    doc = json.loads(t.read_text())
    del doc["label"]
    doc["task"] = "0"
    t.write_text(json.dumps(doc))
    t, _ = run("transcript_missing")
    t.unlink()
    _, s = run("states_truncated")
    s.write_text(s.read_text()[:30])
    _, s = run("states_steps")
    doc = json.loads(s.read_text())
    doc["steps"][1]["step_idx"] = 7
    doc["steps"][2]["success"] = False
    s.write_text(json.dumps(doc))
    # a run directory with a run record but no trajectory record
    (root / "unrecorded").mkdir()
    (root / "unrecorded" / "transcript_goal_t0_s0.json").write_text("{}")

    before = tree_digest(root)
    result = validate_root(root)
    assert tree_digest(root) == before  # only read
    found = {r["record"].split("/")[0]: r for r in result["records"]}
    assert found["clean"]["ok"] and found["clean"]["problems"] == [], found["clean"]["problems"]
    assert found["clean"]["run_record"] == str(root / "clean")
    expect = {
        "garbage_transcript": [("transcript", "transcript_goal_t0_s0.json is not UTF-8")],
        "truncated_transcript": [("transcript", "is not JSON")],
        "transcript_is_a_list": [("transcript", "holds a JSON array, not an object")],
        "transcript_disagrees": [("transcript", "environment_success False but task.json has True"),
                                 ("transcript", "suite 'libero_spatial' but task.json has 'libero_goal'")],
        "transcript_env_steps": [("transcript", "env_steps 9 but the record's last action (seq 4) is env step 4")],
        "transcript_fields": [("transcript", "field 'label' is missing"),
                              ("transcript", "task is string '0', expected integer")],
        "transcript_missing": [("transcript", "transcript_goal_t0_s0.json is missing")],
        "states_truncated": [("states", "states.json is not JSON")],
        "states_steps": [("states", "step 1 has step_idx 7"), ("states", "no step has success true")],
        "unrecorded": [("files", "not recorded with --record-trajectory")],
    }
    for name, wanted in expect.items():
        probs = found[name]["problems"]
        assert not found[name]["ok"], name
        for check, text in wanted:
            assert any(p["check"] == check and text in p["detail"] for p in probs), (name, check, text, probs)
    assert result["counts"]["records"] == 11 and result["counts"]["ok"] == 1
    with_check = {c: sorted(n for n, r in found.items() if any(p["check"] == c for p in r["problems"]))
                  for c in ("transcript", "states")}
    assert with_check["transcript"] == sorted(n for n in expect if "transcript" in n)
    # a transcript whose env_steps is off also disagrees with states.json's last step
    assert with_check["states"] == ["states_steps", "states_truncated", "transcript_env_steps"]

    # the command says it per episode, exit status 1
    assert flywheel_main(["validate", str(root)]) == 1
    out = capsys.readouterr().out
    assert "garbage_transcript/trajectories/libero_goal_t0_s0: PROBLEMS" in out
    assert "  - [transcript] transcript_goal_t0_s0.json is not UTF-8" in out
    assert "unrecorded: PROBLEMS (run directory without a trajectory record)" in out
    assert "11 record(s): 1 ok, 10 with problems" in out
    assert flywheel_main(["validate", str(root / "clean")]) == 0


def test_a_record_without_a_run_record_beside_it_gets_no_run_checks(tmp_path, record_run):
    d, _ = record_run(tmp_path / "copied", PLAN, observations="all", success_seq=4)
    result = validate_root(tmp_path)
    (rec,) = result["records"]
    assert rec["ok"] and rec["run_record"] is None


def test_validate_of_a_folder_without_raw_records_fails_and_says_why(tmp_path, capsys):
    """Pointing validate at the wrong folder must not pass as "0 records, all valid"."""
    (tmp_path / "runs" / "logs").mkdir(parents=True)
    assert flywheel_main(["validate", str(tmp_path / "runs")]) == 1
    err = capsys.readouterr().err
    assert "no raw episode records under" in err and "--record-trajectory" in err


def test_validate_json_into_a_closed_pipe_ends_without_a_traceback(tmp_path):
    """``rpent-flywheel validate ROOT --json | head`` ends quietly when the reader goes away, with no
    BrokenPipeError traceback. The pipe's read end is closed before the process starts, so every write fails."""
    import os
    import subprocess
    import sys

    (tmp_path / "runs" / "logs").mkdir(parents=True)
    r, w = os.pipe()
    os.close(r)
    try:
        p = subprocess.run([sys.executable, "-m", "rpent.cli.flywheel", "validate", str(tmp_path / "runs"), "--json"],
                           stdout=w, stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(w)
    assert "Traceback" not in p.stderr and "BrokenPipeError" not in p.stderr, p.stderr
    assert p.returncode == 1


def test_a_successful_record_whose_actions_were_emptied_is_not_ok(tmp_path, record_run, capsys):
    """An ``actions.jsonl`` emptied after the run (truncated to 0 bytes) left a record that claimed
    success with no action at all; it validated as ok because every action check had nothing to check."""
    root = tmp_path / "runs"
    d, _ = record_run(root / "emptied", PLAN, observations="all", success_seq=4)
    write_run_record(root / "emptied", d)
    (d / "actions.jsonl").write_text("")
    (rec,) = validate_root(root)["records"]
    assert not rec["ok"]
    details = [(p["check"], p["detail"]) for p in rec["problems"]]
    assert ("success", "environment_success is true but the record has no readable action (actions.jsonl emptied "
                       "or unreadable): nothing shows how the task was solved") in details, details
    assert any(c == "transcript" and "env_steps 5 but the record has no readable action" in t for c, t in details)
    assert flywheel_main(["validate", str(root)]) == 1
    assert "1 record(s): 0 ok, 1 with problems" in capsys.readouterr().out


def test_export_leaves_out_a_run_whose_run_record_validate_rejects(tmp_path, record_run):
    """Export and validate read a run the same way: a trajectory whose transcript is unreadable,
    contradicts its task.json, or whose states.json is truncated is not exported; the clean one is."""
    from rpent.flywheel.selection import RULES_V1, RULES_V2, RUN_RECORD_PROBLEM, select_run
    from rpent.recording.reader import load_record

    root = tmp_path / "runs"
    dirs = {}

    def run(name: str) -> tuple[Path, Path]:
        d, _ = record_run(root / name, PLAN, observations="all", success_seq=4)
        dirs[name] = d
        return write_run_record(root / name, d)

    run("clean")
    t, _ = run("empty_transcript")
    t.write_text("")
    t, _ = run("label_contradicts")
    _edit(t, label="failed", environment_success=False)
    _, s = run("states_empty")
    s.write_text("")
    for rules in (RULES_V1, RULES_V2):
        clean = select_run(load_record(dirs["clean"]), rules)
        assert clean.exported and not [x for x in clean.exclusions if x["scope"] == "run"], clean.exclusions
        for name in ("empty_transcript", "label_contradicts", "states_empty"):
            sel = select_run(load_record(dirs[name]), rules)
            assert not sel.exported, name
            assert [(x["scope"], x["reason"]) for x in sel.exclusions] == [("run", RUN_RECORD_PROBLEM)], (name, sel.exclusions)


_KILLED_RUN = """
import sys, time
import numpy as np
from rpent.run.record import RunRecord, encode_png, run_tag

rec = RunRecord(sys.argv[1], run_tag("libero_goal", 0, 0))
rec.set_episode({"suite": "libero_goal", "task": 0, "seed": 0, "init_state_id": 0})
for i in range(2):
    rec.add_step({"env_steps": 10 * i, "success": False}, {"agentview.png": encode_png(np.zeros((8, 8, 3), np.uint8))})
print("ready", flush=True)
time.sleep(600)
"""


def test_validate_lists_a_run_killed_before_its_transcript(tmp_path, record_run, capsys):
    """A run SIGKILLed mid-episode leaves states.json and step images, no transcript and no
    trajectory record: validate lists it as a run that never ended (exit 1), next to a clean
    recorded run; directories whose states.json is not a run's are not runs."""
    import signal
    import subprocess
    import sys

    root = tmp_path / "runs"
    d, _ = record_run(root / "clean", PLAN, observations="all", success_seq=4)
    write_run_record(root / "clean", d)
    proc = subprocess.Popen([sys.executable, "-c", _KILLED_RUN, str(root / "killed")], stdout=subprocess.PIPE,
                            text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    assert (root / "killed" / "states.json").is_file() and (root / "killed" / "agentview.png" / "01.png").is_file()
    assert not list((root / "killed").glob("transcript_*.json"))
    # not runs: another tool's states.json, and one that is not JSON
    (root / "other_tool").mkdir()
    (root / "other_tool" / "states.json").write_text(json.dumps({"schema_version": 3, "steps": []}))
    (root / "notes").mkdir()
    (root / "notes" / "states.json").write_text("state: fine\n")

    result = validate_root(root)
    found = {r["record"].split("/")[0]: r for r in result["records"]}
    assert sorted(found) == ["clean", "killed"], sorted(found)
    assert found["clean"]["ok"]
    killed = found["killed"]
    assert not killed["ok"] and killed["run_record"] == str(root / "killed")
    assert [(p["check"], p["detail"]) for p in killed["problems"]] == [
        ("transcript", "run never ended: no transcript (killed?); exports skip it: run the task again, "
                      "and delete this directory once no run is writing it")]
    assert result["counts"] == {"records": 2, "ok": 1, "with_problems": 1, "by_check": {"transcript": 1}}

    assert flywheel_main(["validate", str(root)]) == 1
    out = capsys.readouterr().out
    assert "killed: PROBLEMS (run directory without a transcript or trajectory record)" in out
    assert "  - [transcript] run never ended: no transcript (killed?); exports skip it: run the task again" in out
    assert "2 record(s): 1 ok, 1 with problems" in out
    # only the directories that are not runs: nothing to validate
    assert flywheel_main(["validate", str(root / "other_tool")]) == 1
    assert "no raw episode records under" in capsys.readouterr().err
