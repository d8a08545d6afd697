"""Task memory on disk: leaf format, merge rules under the file lock, manifest checks, the
prompt context (only the run's robot, only relevant leaves) and the ``rpent-memory`` CLI."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from filelock import FileLock

from rpent.memory.context import load_context
from rpent.memory.corpus import MemoryCorpusError, build_index, verify_manifest
from rpent.memory.leaf import LeafError, confidence_for, parse_leaf
from rpent.memory.merge import MergeError, draft_id, merge_inbox


def _global(title="Tall objects", body="Grasp tall objects 2 cm below the top.", cells=("object_t0_s0",),
            kind="primitive", confidence="single-shot", attempts=1):
    cells_yaml = ", ".join(cells)
    return (f"---\nscope: global\nkind: {kind}\ntitle: {title}\napplies_when: the object is taller than 8 cm\n"
            f"confidence: {confidence}\nevidence:\n  cells: [{cells_yaml}]\n  attempts: {attempts}\n---\n{body}\n")


def _suite(task=0, suite="libero_object", body="Soup first, then the basket."):
    return (f"---\nscope: suite\nsuite: {suite}\nregime: standard\ntask_id: {task}\n"
            f"task_language: pick up the alphabet soup and place it in the basket\nconfidence: single-shot\n"
            f"evidence:\n  cells: [object_t{task}_s0]\n  attempts: 1\n---\n{body}\n")


def _inbox(corpus, cell, files: dict[str, str]):
    d = corpus / "_internal" / "inbox" / cell
    d.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (d / name).parent.mkdir(parents=True, exist_ok=True)
        (d / name).write_text(text)
    return d


def test_leaf_rules():
    leaf = parse_leaf(_global(), "tall_objects")
    assert leaf.scope == "global" and leaf.cells == ["object_t0_s0"] and leaf.attempts == 1
    for text, leaf_id, msg in [
        (_global().replace("kind: primitive", "kind: vibes"), "x", "kind in"),
        (_global().replace("confidence: single-shot", "confidence: sure"), "x", "confidence must be"),
        (_global(cells=()), "x", "evidence.cells must be a non-empty"),
        (_global(), "new_x", "bare slug"),
        (_global(), "x_draft", "bare slug"),
        (_suite().replace("task_id: 0\n", ""), "x", "needs task_id"),
        ("no frontmatter", "x", "no YAML frontmatter"),
    ]:
        with pytest.raises(LeafError, match=msg):
            parse_leaf(text, leaf_id)
    assert draft_id("new_perception_tall_objects_draft") == "tall_objects"
    assert confidence_for(["object_t0_s0"]) == "single-shot"
    assert confidence_for(["object_t0_s0", "object_t0_s1"]) == "probable"
    assert confidence_for(["object_t0_s0", "object_t0_s1", "object_t0_s2"]) == "probable"  # one task only
    assert confidence_for(["object_t0_s0", "object_t0_s1", "object_t3_s0"]) == "verified"


def test_merge_new_evidence_conflict_and_solved_pair(tmp_path):
    corpus = tmp_path / "libero"
    _inbox(corpus, "object_t0_s0", {"new_primitive_tall_objects_draft.md": _global(),
                                    "suite_object_t0.md": _suite(),
                                    "wip/notes.md": "attempt 1 slipped",
                                    "object_t0_s0.json": json.dumps({"suite": "libero_object", "label": "succeeded",
                                                                     "environment_success": True}),
                                    "object_t0_s0_recipe.jsonl": '{"action": "release"}\n'})
    r = merge_inbox(corpus, "object_t0_s0", solved=True)
    assert sorted(r.created) == ["global/tall_objects.md", "task-family/object_t0.md"]
    assert r.task_pair == ["task-specific/object_t0_s0.json", "task-specific/object_t0_s0_recipe.jsonl"]
    assert not (corpus / "_internal" / "inbox" / "object_t0_s0").exists()
    assert (corpus / "_internal" / "merged" / "object_t0_s0" / "wip" / "notes.md").is_file()
    assert not list(corpus.glob("**/notes.md"))[0].is_relative_to(corpus / "global")
    index = (corpus / "MEMORY.md").read_text()
    assert "[Tall objects](global/tall_objects.md) — the object is taller than 8 cm" in index
    verify_manifest(corpus)

    # same id from two more cells of another task: evidence unioned, attempts summed -> verified;
    # the second draft's prose differs: archived as a conflict, the published prose is kept
    _inbox(corpus, "object_t3_s1", {"tall_objects.md": _global(cells=("object_t3_s1",), attempts=2)})
    merge_inbox(corpus, "object_t3_s1", solved=False)
    leaf = parse_leaf((corpus / "global" / "tall_objects.md").read_text(), "tall_objects")
    assert leaf.cells == ["object_t0_s0", "object_t3_s1"] and leaf.attempts == 3
    assert leaf.meta["confidence"] == "probable"
    _inbox(corpus, "object_t3_s2", {"tall_objects.md": _global(cells=("object_t3_s2",), body="Grasp low.")})
    r = merge_inbox(corpus, "object_t3_s2", solved=False)
    leaf = parse_leaf((corpus / "global" / "tall_objects.md").read_text(), "tall_objects")
    assert leaf.meta["confidence"] == "verified" and leaf.body == "Grasp tall objects 2 cm below the top."
    assert r.conflicts == ["_internal/conflicts/object_t3_s2/tall_objects.md"]
    assert "Grasp low." in (corpus / r.conflicts[0]).read_text()
    assert not (corpus / "task-specific" / "object_t3_s2.json").exists()  # unsolved: no pair published


@pytest.mark.parametrize("audit, reason", [
    ({"label": "failed", "environment_success": True, "verdict_required": True,
      "operator_verdict": {"answer": "failure", "notes": "operator rejects"}}, "operator_rejected"),
    ({"label": "aborted", "environment_success": False, "operator_verdict": {"answer": "abort"}}, "aborted"),
    ({"label": "cancelled", "environment_success": None, "stop_reason": "cancelled"}, "cancelled"),
    ({"label": "failed", "environment_success": False}, "not_successful"),
    ({"suite": "libero_object"}, "label_unknown"),
])
def test_solved_merge_refuses_an_audit_not_labelled_succeeded(tmp_path, audit, reason):
    """The operator's word reaches the memory: a rejected, aborted or cancelled run's audit never
    becomes a task-specific pair; nothing is merged (the drafts stay in the inbox)."""
    corpus = tmp_path / "libero"
    _inbox(corpus, "object_t0_s0", {"new_primitive_tall_objects_draft.md": _global(),
                                    "object_t0_s0.json": json.dumps({"suite": "libero_object", **audit}),
                                    "object_t0_s0_recipe.jsonl": '{"action": "release"}\n'})
    with pytest.raises(MergeError, match=rf"--solved refused \({reason}\)"):
        merge_inbox(corpus, "object_t0_s0", solved=True)
    assert not (corpus / "task-specific").exists() and not (corpus / "global").exists()
    assert (corpus / "_internal" / "inbox" / "object_t0_s0" / "object_t0_s0.json").is_file()


def test_merge_refuses_invalid_drafts_and_waits_for_the_lock(tmp_path):
    corpus = tmp_path / "libero"
    _inbox(corpus, "object_t0_s0", {"a.md": _global(), "b.md": _global(cells=())})
    with pytest.raises(MergeError, match="b.md: evidence.cells"):
        merge_inbox(corpus, "object_t0_s0", solved=False)
    assert not (corpus / "global").exists()  # nothing written
    (corpus / "_internal" / "inbox" / "object_t0_s0" / "b.md").unlink()
    with pytest.raises(MergeError, match="lacks object_t0_s0.json, object_t0_s0_recipe.jsonl"):
        merge_inbox(corpus, "object_t0_s0", solved=True)
    with FileLock(str(corpus / "_internal" / ".merge.lock")):
        # another process holds the lock: a second merge gives up after its timeout, writing nothing
        p = subprocess.run([sys.executable, "-c", "from pathlib import Path; from rpent.memory.merge import "
                            "merge_inbox; merge_inbox(Path(r'%s'), 'object_t0_s0', solved=False, lock_timeout_s=0.5)"
                            % corpus], capture_output=True, text=True)
        assert p.returncode != 0 and "another merge holds" in p.stderr
    assert merge_inbox(corpus, "object_t0_s0", solved=False).created == ["global/a.md"]
    with pytest.raises(MergeError, match="not a cell tag"):
        merge_inbox(corpus, "../x", solved=False)


def test_manifest_refuses_changed_and_extra_files(tmp_path):
    corpus = tmp_path / "libero"
    (corpus / "global").mkdir(parents=True)
    (corpus / "global" / "tall_objects.md").write_text(_global())
    build_index(corpus)
    verify_manifest(corpus)
    (corpus / "global" / "tall_objects.md").write_text(_global(body="tampered"))
    with pytest.raises(MemoryCorpusError, match="file global/tall_objects.md was changed"):
        verify_manifest(corpus)
    build_index(corpus)
    (corpus / "global" / "sneaky.md").write_text(_global())
    with pytest.raises(MemoryCorpusError, match="extra file global/sneaky.md"):
        load_context(tmp_path, "libero", "libero_object", 0)
    (corpus / "global" / "sneaky.md").unlink()
    (corpus / "_internal" / "inbox" / "x").mkdir(parents=True)  # drafts are not part of the corpus
    (corpus / "_internal" / "inbox" / "x" / "d.md").write_text("draft")
    verify_manifest(corpus)


def test_context_reads_only_this_robot_and_relevant_leaves(tmp_path):
    corpus = tmp_path / "libero"
    for rel, text in {"global/tall_objects.md": _global(), "task-family/object_t0.md": _suite(0),
                      "task-family/object_t5.md": _suite(5, body="Other task."),
                      "task-specific/object_t0_s0.json": "{}",
                      "task-specific/object_t0_s0_recipe.jsonl": '{"action": "release"}\n',
                      "task-specific/object_t5_s0_recipe.jsonl": '{"action": "move_to"}\n'}.items():
        (corpus / rel).parent.mkdir(parents=True, exist_ok=True)
        (corpus / rel).write_text(text)
    build_index(corpus)
    other = tmp_path / "franka_real"
    other.mkdir()
    (other / "MEMORY.md").write_text("secret of another robot")
    ctx = load_context(tmp_path, "libero", "libero_object", 0)
    read = [rel for rel, _ in ctx.files]
    assert read == ["MEMORY.md", "global/tall_objects.md", "task-family/object_t0.md",
                    "task-specific/object_t0_s0.json", "task-specific/object_t0_s0_recipe.jsonl"]
    section = ctx.prompt_section()
    assert "Soup first, then the basket." in section and "Other task." not in section
    assert "secret of another robot" not in section and "re-perceive" in section
    assert all(len(f["sha256"]) == 64 for f in ctx.audit()["files_read"])
    with pytest.raises(MemoryCorpusError, match="no memory corpus for robot 'ur5'"):
        load_context(tmp_path, "ur5", "libero_object", 0)


def test_context_withholds_a_task_pair_whose_run_is_not_labelled_succeeded(tmp_path):
    """A corpus merged before the label policy may hold the pair of a run the operator rejected: the
    run's prompt does not get it, and the audit of the run says what was withheld and why."""
    corpus = tmp_path / "libero"
    rejected = {"suite": "libero_object", "label": "failed", "environment_success": True, "verdict_required": True,
                "operator_verdict": {"answer": "failure", "notes": "operator rejects"}}
    for rel, text in {"global/tall_objects.md": _global(),
                      "task-specific/object_t0_s0.json": json.dumps(rejected),
                      "task-specific/object_t0_s0_recipe.jsonl": '{"action": "release"}\n',
                      "task-specific/object_t0_s1.json": json.dumps({"label": "succeeded", "environment_success": True}),
                      "task-specific/object_t0_s1_recipe.jsonl": '{"action": "move_to"}\n'}.items():
        (corpus / rel).parent.mkdir(parents=True, exist_ok=True)
        (corpus / rel).write_text(text)
    build_index(corpus)
    ctx = load_context(tmp_path, "libero", "libero_object", 0)
    read = [rel for rel, _ in ctx.files]
    assert "task-specific/object_t0_s1.json" in read and "task-specific/object_t0_s1_recipe.jsonl" in read
    assert not any("object_t0_s0" in rel for rel in read)
    withheld = ctx.audit()["withheld"]
    assert [w["path"] for w in withheld] == ["task-specific/object_t0_s0.json",
                                             "task-specific/object_t0_s0_recipe.jsonl"]
    assert all(w["reason"].startswith("operator_rejected: ") for w in withheld)


def test_cli(tmp_path):
    def cli(*args):
        return subprocess.run([sys.executable, "-m", "rpent.cli.memory", "--memory-dir", str(tmp_path), *args],
                              capture_output=True, text=True)

    _inbox(tmp_path / "libero", "object_t0_s0", {"tall_objects.md": _global()})
    p = cli("merge", "--cell", "object_t0_s0")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["created"] == ["global/tall_objects.md"]
    assert cli("validate").returncode == 0
    (tmp_path / "libero" / "global" / "bad.md").write_text("---\nscope: global\n---\nx\n")
    p = cli("validate")
    assert p.returncode == 1 and "bad.md" in p.stdout and "extra file global/bad.md" in p.stdout
    (tmp_path / "libero" / "global" / "bad.md").unlink()
    assert cli("build-index").returncode == 0 and cli("validate").returncode == 0
    p = cli("merge", "--cell", "object_t9_s0")
    assert p.returncode == 2 and "no inbox for cell object_t9_s0" in p.stderr
