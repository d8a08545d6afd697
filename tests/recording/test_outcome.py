"""The one reading of a run's outcome (rpent.recording.outcome) and run provenance
(rpent.recording.provenance), on real files written by the real recorder."""

from __future__ import annotations

import json
import os
import time

import numpy as np
import pytest

from rpent.recording import TaskInfo, TrajectoryRecorder
from rpent.recording.outcome import (
    RUN_LABELS,
    label_exclusion,
    outcome_from_doc,
    read_run_outcome,
    run_label,
    trajectory_outcome,
    verdict_disagreement,
)
from rpent.recording.provenance import (
    SMALL_FILE_BYTES,
    checkpoint_fingerprint,
    hash_checkpoint,
    model_identity,
    provenance_summary,
    run_provenance,
)

REJECTED = {"answer": "failure", "notes": "operator rejects", "request_id": "op_1"}


def _transcript(**fields) -> dict:
    doc = {"suite": "libero_object", "task": 0, "seed": 0, "environment_success": True, "label": "succeeded",
           "stop_reason": "finished", "error": None, "verdict_required": False, "operator_verdict": None,
           "operator_verdicts": [], "disagreement": None, "messages": []}
    doc.update(fields)
    return doc


@pytest.mark.parametrize("env, verdict, required, stop, error, label", [
    (True, None, False, "finished", None, "succeeded"),
    (False, None, False, "finished", None, "failed"),
    (True, "failure", True, "finished", None, "failed"),
    (False, "success", True, "finished", None, "succeeded"),
    (True, "abort", True, "finished", None, "aborted"),
    (True, None, True, "finished", None, "failed"),  # required, never answered
    (None, None, False, "cancelled", "run cancelled (received SIGTERM)", "cancelled"),
    (None, None, False, "error", "ServiceStartError: ...", "error"),
    (True, None, False, "interrupted", None, "succeeded"),
])
def test_run_label_rule(env, verdict, required, stop, error, label):
    assert run_label(environment_success=env, verdict=verdict, verdict_required=required, stop_reason=stop,
                     error=error) == label
    assert label in RUN_LABELS


def test_disagreement_only_when_both_are_known_and_differ():
    assert verdict_disagreement(True, "failure") == "operator said failure; environment predicate: satisfied"
    assert verdict_disagreement(False, "success") == "operator said success; environment predicate: not satisfied"
    assert verdict_disagreement(None, "failure") is None
    assert verdict_disagreement(True, "success") is None and verdict_disagreement(True, "abort") is None


@pytest.mark.parametrize("doc, reason", [
    (_transcript(), None),
    (_transcript(label="failed", verdict_required=True, operator_verdict=REJECTED,
                 disagreement="operator said failure; environment predicate: satisfied"), "operator_rejected"),
    (_transcript(label="aborted", operator_verdict={"answer": "abort"}), "aborted"),
    (_transcript(label="cancelled", environment_success=None, stop_reason="cancelled",
                 error="run cancelled (received SIGTERM)"), "cancelled"),
    (_transcript(label="error", environment_success=None, stop_reason="error", error="ServiceStartError: x"),
     "run_error"),
    (_transcript(label="failed", verdict_required=True), "no_operator_verdict"),
    (_transcript(label="failed", environment_success=False), "not_successful"),
    (_transcript(label="succeeded", environment_success=False, verdict_required=True,
                 operator_verdict={"answer": "success"}), "disagreement"),
    ({"suite": "libero_object"}, "label_unknown"),
    (_transcript(environment_unstable={"env_step": 3, "detail": "the simulation became unstable at env step 3"}),
     "sim_unstable"),
    (_transcript(label="failed", environment_success=False, environment_unstable={"env_step": 3}), "not_successful"),
])
def test_label_exclusion_names_the_reason(doc, reason):
    out = outcome_from_doc(doc, "transcript_object_t0_s0.json")
    got = label_exclusion(out)
    assert (got[0] if got else None) == reason
    if got:
        assert "\n" not in got[1]


def test_disagreements_pass_only_when_asked_and_only_with_the_predicate_holding():
    rejected = outcome_from_doc(_transcript(label="failed", verdict_required=True, operator_verdict=REJECTED))
    assert label_exclusion(rejected)[0] == "operator_rejected"
    assert label_exclusion(rejected, include_disagreements=True) is None
    rejected_unsolved = outcome_from_doc(_transcript(label="failed", verdict_required=True, environment_success=False,
                                                     operator_verdict=REJECTED))
    assert label_exclusion(rejected_unsolved, include_disagreements=True)[0] == "operator_rejected"
    aborted = outcome_from_doc(_transcript(label="aborted", operator_verdict={"answer": "abort"}))
    assert label_exclusion(aborted, include_disagreements=True)[0] == "aborted"


def test_a_record_without_a_label_gets_a_derived_one():
    legacy = {"suite": "libero_object", "environment_success": True, "stop_reason": "finished", "error": None,
              "verdict_required": True, "operator_verdict": REJECTED}
    out = outcome_from_doc(legacy)
    assert (out.label, out.label_source, out.verdict) == ("failed", "derived", "failure")
    assert out.disagreement == "operator said failure; environment predicate: satisfied"
    task_json = {"schema_version": 1, "environment_success": None, "status": "interrupted"}
    assert outcome_from_doc(task_json).label == "cancelled"


def test_read_run_outcome_transcript_then_taskrun_then_nothing(tmp_path):
    assert read_run_outcome(tmp_path) is None
    (tmp_path / "taskrun.json").write_text(json.dumps({"state": "cancelled", "outcome": None}))
    out = read_run_outcome(tmp_path)
    assert out.label == "cancelled" and out.source.endswith("taskrun.json")
    (tmp_path / "transcript_object_t0_s0.json").write_text(json.dumps(_transcript(
        label="failed", verdict_required=True, operator_verdict=REJECTED,
        disagreement="operator said failure; environment predicate: satisfied")))
    out = read_run_outcome(tmp_path)
    assert (out.label, out.verdict, out.environment_success) == ("failed", "failure", True)
    assert out.label_success is False and out.to_dict()["verdict"] == "failure"
    (tmp_path / "transcript_object_t0_s0.json").write_text("{not json")
    with pytest.raises(ValueError, match="not readable JSON"):
        read_run_outcome(tmp_path)


def _record(run_dir, **close_kw):
    rec = TrajectoryRecorder(run_dir, TaskInfo(robot="libero", suite="libero_object", task=0, seed=0,
                                               task_language="pick", planner="scripted"),
                             action_capture="full", provenance={"argv": ["rpent"], "rpent": {"commit": "abc"}})
    rec.begin_tool_call("c0", "move_to", {})
    rec.record_action(np.zeros(7, np.float32), {"state": np.zeros(8, np.float32)}, call_id="c0", source="scripted",
                      reward=1.0, terminated=True, truncated=False, step=0)
    rec.end_tool_call("c0", {})
    rec.close("finished", True, **close_kw)
    return rec.record_dir


def test_task_json_carries_label_verdicts_disagreement_and_provenance(tmp_path):
    rd = _record(tmp_path / "a", outcome={
        "label": "failed", "operator_verdict": REJECTED, "operator_verdicts": [REJECTED], "verdict_required": True,
        "disagreement": "operator said failure; environment predicate: satisfied"})
    task = json.loads((rd / "task.json").read_text())
    assert task["label"] == "failed" and task["operator_verdict"] == REJECTED
    assert task["operator_verdicts"] == [REJECTED] and task["verdict_required"] is True
    assert task["disagreement"] and task["environment_success"] is True
    assert task["provenance"] == {"argv": ["rpent"], "rpent": {"commit": "abc"}}
    out = trajectory_outcome(rd, task)
    assert label_exclusion(out)[0] == "operator_rejected"
    # a recorder used without the run layer saw no operator: the label follows the predicate
    plain = json.loads((_record(tmp_path / "b") / "task.json").read_text())
    assert plain["label"] == "succeeded" and plain["operator_verdict"] is None and plain["operator_verdicts"] == []
    with pytest.raises(ValueError, match="outcome label must be one of"):
        _record(tmp_path / "c", outcome={"label": "great"})


def test_an_older_trajectory_record_takes_the_label_of_its_runs_transcript(tmp_path):
    """A task.json written before labels were recorded: the run's transcript (which holds the
    operator's verdict) decides, never the predicate alone."""
    run = tmp_path / "run"
    rd = _record(run)
    task = json.loads((rd / "task.json").read_text())
    for k in ("label", "operator_verdict", "operator_verdicts", "verdict_required", "disagreement"):
        del task[k]
    assert trajectory_outcome(rd, task).label == "succeeded"  # no transcript: derived from the predicate
    (run / "transcript_object_t0_s0.json").write_text(json.dumps(_transcript(
        label="failed", verdict_required=True, operator_verdict=REJECTED)))
    out = trajectory_outcome(rd, task)
    assert out.label == "failed" and out.verdict == "failure" and out.source.endswith("transcript_object_t0_s0.json")


def test_checkpoint_fingerprint_is_cheap_and_changes_with_the_files(tmp_path):
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / "config.json").write_text('{"width": 1024}')
    big = ckpt / "model.safetensors"
    big.write_bytes(os.urandom(SMALL_FILE_BYTES + 10))
    a = checkpoint_fingerprint(ckpt)
    assert a["files"] == 2 and a["bytes"] == SMALL_FILE_BYTES + 10 + len('{"width": 1024}')
    assert set(a["small_files_sha256"]) == {"config.json"}  # the weights are identified by size + mtime
    assert checkpoint_fingerprint(ckpt) == a
    (ckpt / "config.json").write_text('{"width": 2048}')  # same size, new content
    os.utime(ckpt / "config.json", ns=(0, 0))
    b = checkpoint_fingerprint(ckpt)
    assert b["fingerprint"] != a["fingerprint"]
    st = big.stat()
    os.utime(big, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    assert checkpoint_fingerprint(ckpt)["fingerprint"] != b["fingerprint"]
    assert checkpoint_fingerprint(tmp_path / "nope")["error"] == "does not exist on this machine"
    full = hash_checkpoint(ckpt)  # the batch manifest's full hash, shared code
    assert set(full["files"]) == {"config.json", "model.safetensors"}
    ident = model_identity(endpoint="socket://127.0.0.1:5", server_metadata={"checkpoint": str(ckpt), "device": "cpu",
                                                                              "nested": {"x": 1}})
    assert ident["fingerprint"]["fingerprint"] == checkpoint_fingerprint(ckpt)["fingerprint"]
    assert ident["server_metadata"] == {"checkpoint": str(ckpt), "device": "cpu"}


def test_run_provenance_names_code_versions_host_and_start(tmp_path):
    t0 = time.time()
    prov = run_provenance(argv=["rpent", "--suite", "libero_object"], config={"suite": "libero_object"})
    assert prov["argv"] == ["rpent", "--suite", "libero_object"] and prov["config"] == {"suite": "libero_object"}
    assert prov["rpent"]["version"] and "commit" in prov["rpent"] and "dirty" in prov["rpent"]
    assert set(prov["versions"]) >= {"python", "torch", "mujoco", "libero"}
    assert prov["host"] and prov["pid"] == os.getpid() and prov["models"] == {"vla": None, "sam3": None}
    import datetime as dt

    started = dt.datetime.fromisoformat(prov["started_at"]).timestamp()
    assert t0 - 1 <= started <= time.time() + 1
    short = provenance_summary(prov)
    assert short["commit"] == prov["rpent"]["commit"] and short["argv"] == prov["argv"]
    assert provenance_summary(None) is None
