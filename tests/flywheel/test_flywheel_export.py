"""Export of recorded runs to a LeRobot dataset: the product document's rules, end to end on real files.

Records are written by the real ``TrajectoryRecorder``; the dataset is written by lerobot's
``LeRobotDataset`` and reopened with it offline; every frame is compared with the record.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from rpent.cli.flywheel import main as flywheel_main
from rpent.flywheel import FlywheelError, export_records
from rpent.flywheel.lerobot_compat import import_lerobot_dataset
from rpent.recording.jsonl import read_jsonl


def open_dataset(train_dir: Path):
    LeRobotDataset = import_lerobot_dataset()
    return LeRobotDataset("rpent/test", root=train_dir)


def dataset_frames(train_dir: Path) -> list[dict]:
    """Every frame of the dataset as numpy: image/wrist uint8 HWC, state, actions, task, episode_index."""
    ds = open_dataset(train_dir)
    out = []
    for i in range(len(ds)):
        x = ds[i]
        to_u8 = lambda t: (t.permute(1, 2, 0).numpy() * 255.0).round().astype(np.uint8)  # noqa: E731
        out.append(
            {
                "image": to_u8(x["image"]),
                "wrist_image": to_u8(x["wrist_image"]),
                "state": x["state"].numpy(),
                "actions": x["actions"].numpy(),
                "task": x["task"],
                "episode_index": int(x["episode_index"]),
                "frame_index": int(x["frame_index"]),
            }
        )
    return out


def assert_dataset_matches(train_dir: Path, episodes: list[list]) -> None:
    frames = dataset_frames(train_dir)
    expected = [(e, j, t) for e, ep in enumerate(episodes) for j, t in enumerate(ep)]
    assert len(frames) == len(expected)
    for fr, (e, j, t) in zip(frames, expected):
        assert (fr["episode_index"], fr["frame_index"]) == (e, j)
        np.testing.assert_array_equal(fr["image"], t.main)
        np.testing.assert_array_equal(fr["wrist_image"], t.wrist)
        np.testing.assert_array_equal(fr["state"], t.state)
        np.testing.assert_array_equal(fr["actions"], t.action)
        assert fr["task"] == t.instruction


def tree_digest(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*")) if p.is_file()}


def exclusions(report: dict, reason: str) -> list[dict]:
    return [e for e in report["exclusions"] if e["reason"] == reason]


def test_vla_only_successful_run_round_trips_through_lerobot(tmp_path, record_run):
    run = tmp_path / "run"
    rec_dir, truth = record_run(run, [("vla", "pick up the black bowl", [5, 5, 3])])
    before = tree_digest(run)
    out = tmp_path / "export"
    report = export_records(rec_dir, out, progress=False)  # a single trajectory directory as input root
    assert report["counts"] == {"runs_seen": 1, "runs_exported": 1, "episodes": 1, "frames": 13, "actions_seen": 13,
                                "disagreements_included": 0}
    assert report["label_policy"] == "succeeded" and report["runs"][0]["outcome"]["label"] == "succeeded"
    assert sorted(p.name for p in out.iterdir()) == ["report.json", "train"]
    info = json.loads((out / "train" / "meta" / "info.json").read_text())
    assert info["codebase_version"] == "v3.0"
    assert info["robot_type"] == "panda" and info["fps"] == 20
    assert info["features"]["image"]["shape"] == [256, 256, 3]
    assert info["features"]["state"]["shape"] == [8] and info["features"]["actions"]["shape"] == [7]
    assert json.loads((out / "report.json").read_text()) == report
    assert_dataset_matches(out / "train", [truth])
    assert tree_digest(run) == before, "input records must never be modified"
    assert not list(tmp_path.glob(".*partial*")), "temporary build directory left behind"


def test_mixed_run_exports_only_vla_segments_as_separate_episodes(tmp_path, record_run, vla_segments):
    plan = [
        ("scripted", 3),
        ("vla", "pick up the bowl", [5, 2]),
        ("scripted", 2),
        ("vla", "place it on the plate", [4]),
        ("vla", "push the plate", [3]),  # directly after the previous VLA call: same contiguous segment
        ("reset",),
        ("vla", "pick up the bowl", [2]),  # after a reset: a new episode even though no action lies between
    ]
    rec_dir, truth = record_run(tmp_path / "run", plan)
    out = tmp_path / "export"
    report = export_records(tmp_path / "run", out, progress=False)  # a run directory as input root
    segs = vla_segments(truth)
    assert [len(s) for s in segs] == [7, 7, 2]
    assert report["counts"]["episodes"] == 3 and report["counts"]["frames"] == 16
    (not_vla,) = exclusions(report, "not_vla")
    assert not_vla["scope"] == "actions" and not_vla["count"] == 5 and not_vla["seqs"] == [[0, 2], [10, 11]]
    assert_dataset_matches(out / "train", segs)
    eps = report["runs"][0]["episodes"]
    assert [e["tasks"] for e in eps] == [["pick up the bowl"], ["place it on the plate", "push the plate"], ["pick up the bowl"]]


def test_each_bad_run_is_excluded_with_its_reason(tmp_path, record_run):
    root = tmp_path / "runs"
    good, good_truth = record_run(root / "good", [("vla", "open the drawer", [5])])
    record_run(root / "failed", [("vla", "open the drawer", [5])], success=False)
    record_run(root / "unknown", [("vla", "open the drawer", [5])], success=None)
    record_run(root / "interrupted", [("vla", "open the drawer", [5])], success=None, status="interrupted")
    no_task, _ = record_run(root / "no_task", [("vla", "open the drawer", [5])])
    (no_task / "task.json").unlink()
    truncated, _ = record_run(root / "truncated", [("vla", "open the drawer", [5])])
    data = (truncated / "actions.jsonl").read_bytes()
    (truncated / "actions.jsonl").write_bytes(data[:-40])  # cut the last line mid-way, as a crash would
    empty, empty_truth = record_run(root / "empty", [("vla", "", [3]), ("vla", "close the drawer", [2])])
    dup, dup_truth = record_run(root / "dup", [("vla", "open the drawer", [3])])
    lines = (dup / "actions.jsonl").read_text().splitlines()
    clone = json.loads(lines[1])
    clone.update(seq=3, step=3)  # a 4th executed action claiming (pred_id, 1) again
    (dup / "actions.jsonl").write_text("\n".join(lines + [json.dumps(clone)]) + "\n")
    other, _ = record_run(root / "other_call", [("vla", "open the drawer", [2]), ("vla", "open the drawer", [2])])
    preds = [json.loads(s) for s in (other / "predictions.jsonl").read_text().splitlines()]
    preds[1]["call_id"] = preds[0]["call_id"]
    (other / "predictions.jsonl").write_text("".join(json.dumps(p) + "\n" for p in preds))
    missing, _ = record_run(root / "missing_pred", [("vla", "open the drawer", [2])])
    (missing / "predictions.jsonl").write_text("")

    before = tree_digest(root)
    out = tmp_path / "export"
    report = export_records(root, out, progress=False)
    assert tree_digest(root) == before

    by_run = {}
    for e in report["exclusions"]:
        by_run.setdefault(e["record"].split("/")[0], []).append((e["scope"], e["reason"]))
    assert by_run["failed"] == [("run", "not_successful")]
    assert by_run["unknown"] == [("run", "success_unknown")]
    assert by_run["interrupted"] == [("run", "cancelled")]  # the recorder's label of an interrupted record
    assert by_run["no_task"] == [("run", "no_task_json")]
    assert by_run["truncated"] == [("run", "corrupt_actions_line")]
    assert by_run["empty"] == [("actions", "empty_instruction")]
    assert by_run["dup"] == [("actions", "duplicate_link")]
    assert ("actions", "prediction_from_other_tool_call") in by_run["other_call"]
    assert by_run["missing_pred"] == [("actions", "missing_prediction"), ("run", "no_qualifying_actions")]
    assert "good" not in by_run
    (dup_ex,) = exclusions(report, "duplicate_link")
    assert dup_ex["seqs"] == [[1, 1], [3, 3]]  # both claimants lose the frame
    c = report["counts"]
    assert c["runs_seen"] == 10 and c["runs_exported"] == 4

    # exported frames: good (5), empty (2 of 5), dup (seq 0 and 2 as separate episodes), other_call (first call's 2)
    runs = {r["record"].split("/")[0]: r for r in report["runs"]}
    assert runs["good"]["frames"] == 5
    assert runs["empty"]["frames"] == 2 and runs["empty"]["episodes"][0]["tasks"] == ["close the drawer"]
    assert [e["seqs"] for e in runs["dup"]["episodes"]] == [[0, 0], [2, 2]]
    assert runs["other_call"]["frames"] == 2
    ds_episodes = [ep for r in report["runs"] for ep in r["episodes"]]
    assert [e["episode_index"] for e in ds_episodes] == list(range(len(ds_episodes)))
    frames = dataset_frames(out / "train")
    assert len(frames) == c["frames"] == 5 + 2 + 2 + 2
    exported_empty = [f for f in frames if f["task"] == "close the drawer"]
    np.testing.assert_array_equal(exported_empty[0]["image"], empty_truth[3].main)
    np.testing.assert_array_equal(exported_empty[1]["actions"], empty_truth[4].action)


def test_nothing_qualifies_writes_only_the_report(tmp_path, record_run):
    record_run(tmp_path / "runs" / "a", [("scripted", 3), ("vla", "open", [2])], success=False)
    record_run(tmp_path / "runs" / "b", [("scripted", 2)], success=True)
    out = tmp_path / "export"
    report = export_records(tmp_path / "runs", out, progress=False)
    assert [p.name for p in out.iterdir()] == ["report.json"]
    assert report["dataset"] is None and report["counts"]["frames"] == 0 and report["counts"]["runs_seen"] == 2
    assert {e["reason"] for e in report["exclusions"]} == {"not_successful", "not_vla", "no_qualifying_actions"}


def test_cli_exits_3_when_nothing_qualifies_and_writes_no_dataset(tmp_path, record_run):
    """A script must not take an export with no episode for a dataset: exit 3 (documented), one line
    saying nothing was exported and why, only report.json (with the exclusions), no train/."""
    record_run(tmp_path / "runs" / "a", [("scripted", 3), ("vla", "open", [2])], success=False)
    out = tmp_path / "export"
    p = subprocess.run([sys.executable, "-m", "rpent.cli.flywheel", "--input-root", str(tmp_path / "runs"),
                        "--output-dir", str(out), "--no-progress"], capture_output=True, text=True, timeout=240)
    assert p.returncode == 3, p.stdout + p.stderr
    assert ("rpent-flywheel: nothing exported: no episode qualifies under rules v1: 1 run(s) seen, 0 exported "
            "(reasons: not_successful x1)") in p.stderr
    assert [q.name for q in out.iterdir()] == ["report.json"]
    report = json.loads((out / "report.json").read_text())
    assert report["dataset"] is None and report["counts"]["episodes"] == 0
    # no record at all under the input root: the same status, and the line names how to record one
    (tmp_path / "empty").mkdir()
    p = subprocess.run([sys.executable, "-m", "rpent.cli.flywheel", "--input-root", str(tmp_path / "empty"),
                        "--output-dir", str(tmp_path / "export2"), "--no-progress"], capture_output=True, text=True,
                       timeout=240)
    assert p.returncode == 3 and "--record-trajectory" in p.stderr, p.stdout + p.stderr
    assert "3 no episode qualified" in subprocess.run([sys.executable, "-m", "rpent.cli.flywheel", "export", "--help"],
                                                      capture_output=True, text=True, timeout=240).stdout


def test_existing_output_dir_and_mixed_robots_are_refused(tmp_path, capsys, record_run):
    record_run(tmp_path / "runs" / "a", [("vla", "open", [2])])
    out = tmp_path / "export"
    out.mkdir()
    assert flywheel_main(["--input-root", str(tmp_path / "runs"), "--output-dir", str(out), "--no-progress"]) == 2
    assert "already exists" in capsys.readouterr().err
    assert list(out.iterdir()) == []
    blocker = tmp_path / "afile"
    blocker.write_text("x")
    assert flywheel_main(["--input-root", str(tmp_path / "runs"), "--output-dir", str(blocker / "sub"),
                          "--no-progress"]) == 2
    assert f"({blocker} is a file)" in capsys.readouterr().err
    # a place that takes no new directory is refused before any record is read
    assert flywheel_main(["--input-root", str(tmp_path / "runs"), "--output-dir", "/proc/rpent-no-such-dir/out",
                          "--no-progress"]) == 2
    assert "cannot be created in /proc" in capsys.readouterr().err
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    assert flywheel_main(["--input-root", str(tmp_path / "runs"), "--output-dir", str(tmp_path / "loop"),
                          "--no-progress"]) == 2
    assert "symbolic link to nothing (or a link loop)" in capsys.readouterr().err

    record_run(tmp_path / "runs" / "b", [("vla", "open", [2])], robot="robocasa365", suite="robocasa_kitchen")
    with pytest.raises(FlywheelError, match="different robots.*libero.*robocasa365"):
        export_records(tmp_path / "runs", tmp_path / "export2", progress=False)
    assert not (tmp_path / "export2").exists()


def test_truncated_png_excludes_only_its_run_as_bad_observation(tmp_path, record_run, vla_segments):
    bad_dir, _ = record_run(tmp_path / "runs" / "bad", [("vla", "open", [4])])
    _, good_truth = record_run(tmp_path / "runs" / "good", [("vla", "open", [3])], obs_offset=50)
    png = bad_dir / "artifacts" / "main" / "000002.png"
    png.write_bytes(png.read_bytes()[:200])  # header intact, pixel data cut: fails only when decoded
    before = tree_digest(tmp_path / "runs")
    out = tmp_path / "export"
    report = export_records(tmp_path / "runs", out, progress=False)
    (bad,) = exclusions(report, "bad_observation")
    assert bad["record"].startswith("bad/") and "action seq 2" in bad["detail"] and "000002.png" in bad["detail"]
    assert report["counts"]["runs_exported"] == 1 and report["counts"]["frames"] == 3
    assert_dataset_matches(out / "train", vla_segments(good_truth))
    assert tree_digest(tmp_path / "runs") == before, "the export must not modify its input"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["export", "runs"], "no temporary directory may be left"


def test_image_writer_threads_4_gives_the_same_dataset_as_0(tmp_path, record_run, vla_segments):
    rec_dir, truth = record_run(tmp_path / "run", [("vla", "pick", [5, 5]), ("scripted", 1), ("vla", "place", [4])])
    r0 = export_records(tmp_path / "run", tmp_path / "t0", image_writer_threads=0, progress=False)
    r4 = export_records(tmp_path / "run", tmp_path / "t4", image_writer_threads=4, progress=False)
    assert r4["dataset"]["image_writer_threads"] == 4
    for key in ("counts", "runs", "exclusions"):
        assert r0[key] == r4[key]
    f0, f4 = dataset_frames(tmp_path / "t0" / "train"), dataset_frames(tmp_path / "t4" / "train")
    assert len(f0) == len(f4) == 14
    for a, b in zip(f0, f4):
        for k in a:
            if isinstance(a[k], np.ndarray):
                np.testing.assert_array_equal(a[k], b[k])
            else:
                assert a[k] == b[k]
    assert_dataset_matches(tmp_path / "t4" / "train", vla_segments(truth))


def test_cli_runs_as_a_process(tmp_path, record_run):
    record_run(tmp_path / "runs" / "x", [("vla", "open the drawer", [3])])
    out = tmp_path / "export"
    proc = subprocess.run(
        [sys.executable, "-m", "rpent.cli.flywheel", "--input-root", str(tmp_path / "runs"), "--output-dir", str(out),
         "--image-writer-threads", "2"],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "exported 3 frame(s) in 1 episode(s) from 1 of 1 run(s)" in proc.stdout
    assert "exporting frames" in proc.stderr  # the progress bar
    assert (out / "train" / "meta" / "info.json").is_file()
    assert read_jsonl(tmp_path / "runs" / "x" / "trajectories" / "libero_goal_t0_s0" / "actions.jsonl").problems == []


def test_repeated_input_roots_are_merged(tmp_path, record_run):
    record_run(tmp_path / "a" / "run1", [("vla", "open the drawer", [3])])
    record_run(tmp_path / "b" / "run2", [("vla", "open the drawer", [2])])
    record_run(tmp_path / "c" / "run3", [("vla", "open the drawer", [4])])  # not selected
    out = tmp_path / "export"
    assert flywheel_main(["--input-root", str(tmp_path / "a"), "--input-root", str(tmp_path / "b"),
                          "--input-root", str(tmp_path / "a" / "run1"),  # the same record twice counts once
                          "--output-dir", str(out), "--no-progress"]) == 0
    report = json.loads((out / "report.json").read_text())
    assert report["counts"]["runs_seen"] == 2 and report["counts"]["frames"] == 5
