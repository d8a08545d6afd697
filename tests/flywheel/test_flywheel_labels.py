"""The label policy in the flywheel: rule sets v1 and v2 export only runs labelled succeeded; every
other run is excluded with its named reason; disagreements only with the explicit opt-in, flagged
in report.json and the dataset card (real recorder files, lerobot's own writer and reader)."""

from __future__ import annotations

import json

import pytest

from rpent.flywheel.export import export_records
from rpent.flywheel.selection import RULES_V1, RULES_V2, select_run
from rpent.flywheel.validate import validate_record
from rpent.recording.reader import load_record

REJECT = {"answer": "failure", "notes": "operator rejects", "request_id": "op_1", "evidence_step": 3}
PLAN = [("scripted", 3), ("vla", "open the drawer", [5]), ("scripted", 2)]

OUTCOMES = {
    "good": (True, "finished", None),
    "rejected": (True, "finished", {"label": "failed", "verdict_required": True, "operator_verdict": REJECT,
                                    "operator_verdicts": [REJECT],
                                    "disagreement": "operator said failure; environment predicate: satisfied"}),
    "aborted": (True, "finished", {"label": "aborted", "verdict_required": True,
                                   "operator_verdict": {"answer": "abort", "notes": ""}}),
    "cancelled": (None, "interrupted", None),
    "no_verdict": (True, "finished", {"label": "failed", "verdict_required": True}),
    "accepted_unsolved": (False, "finished", {"label": "succeeded", "verdict_required": True,
                                              "operator_verdict": {"answer": "success", "notes": ""},
                                              "disagreement": "operator said success; environment predicate: "
                                                              "not satisfied"}),
}
EXPECTED = {"rejected": "operator_rejected", "aborted": "aborted", "cancelled": "cancelled",
            "no_verdict": "no_operator_verdict", "accepted_unsolved": "disagreement"}


@pytest.fixture
def runs(tmp_path, record_run):
    root = tmp_path / "runs"
    dirs = {}
    for i, (name, (success, status, outcome)) in enumerate(OUTCOMES.items()):
        dirs[name], _ = record_run(root / name, PLAN, success=success, status=status, observations="all",
                                   success_seq=9 if success else None, outcome=outcome, obs_offset=100 * i)
    return root, dirs


@pytest.mark.parametrize("rules", [RULES_V1, RULES_V2])
def test_both_rule_sets_exclude_every_run_not_labelled_succeeded(runs, rules):
    _, dirs = runs
    for name, rd in dirs.items():
        sel = select_run(load_record(rd), rules)
        if name == "good":
            assert sel.exported and sel.outcome["label"] == "succeeded", sel.exclusions
            continue
        assert not sel.exported, name
        assert [(x["scope"], x["reason"]) for x in sel.exclusions] == [("run", EXPECTED[name])], (name, sel.exclusions)
    rejected = select_run(load_record(dirs["rejected"]), rules)
    assert "operator rejects" in rejected.exclusions[0]["detail"] and rejected.outcome["verdict"] == "failure"


def test_the_opt_in_exports_rejections_whose_predicate_held_and_says_so(runs, tmp_path):
    root, dirs = runs
    # the opt-in admits the rejected run (predicate held); the operator-accepted unsolved run still lacks
    # the predicate, and an abort is never a disagreement
    sel = select_run(load_record(dirs["rejected"]), RULES_V2, include_disagreements=True)
    assert sel.exported and sel.disagreement_included
    assert select_run(load_record(dirs["accepted_unsolved"]), RULES_V2,
                      include_disagreements=True).exclusions[0]["reason"] == "not_successful"
    assert select_run(load_record(dirs["aborted"]), RULES_V2, include_disagreements=True).exclusions[0]["reason"] \
        == "aborted"

    default = export_records(root, tmp_path / "default", rules=RULES_V2, progress=False, argv=["rpent-flywheel", "x"])
    assert default["label_policy"] == "succeeded" and default["counts"]["runs_exported"] == 1
    assert default["exclusion_counts"]["operator_rejected"] == 1
    assert default["exported_by"]["argv"] == ["rpent-flywheel", "x"]
    card = (tmp_path / "default" / "train" / "README.md").read_text()
    assert "Label policy: `succeeded`" in card and "label succeeded, verdict None" in card
    assert "disagreement, included" not in card

    study = export_records(root, tmp_path / "study", rules=RULES_V2, progress=False, include_disagreements=True)
    assert study["label_policy"] == "succeeded+disagreements"
    assert study["counts"]["runs_exported"] == 2 and study["counts"]["disagreements_included"] == 1
    by_run = {r["record"].split("/")[0]: r for r in study["runs"]}
    assert by_run["rejected"]["disagreement_included"] and by_run["rejected"]["outcome"]["verdict"] == "failure"
    assert not by_run["good"]["disagreement_included"]
    card = (tmp_path / "study" / "train" / "README.md").read_text()
    assert "Label policy: `succeeded+disagreements`" in card and "1 exported run(s) are disagreements" in card
    assert "label failed, verdict failure (disagreement, included for study)" in card
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    ds = LeRobotDataset("rpent/study", root=tmp_path / "study" / "train")
    assert ds.meta.total_episodes == 2
    # the export wrote nothing into the records it read
    assert json.loads((dirs["rejected"] / "task.json").read_text())["label"] == "failed"


def test_validate_says_a_sound_rejected_record_is_not_exportable(runs):
    _, dirs = runs
    res = validate_record(dirs["rejected"])
    assert res["label"] == "failed" and res["operator_verdict"] == "failure" and res["disagreement"]
    assert res["label_exclusion"]["reason"] == "operator_rejected"
    assert "label 'failed', operator verdict 'failure', disagreement:" in res["summary"]
    good = validate_record(dirs["good"])
    assert good["label"] == "succeeded" and good["label_exclusion"] is None
