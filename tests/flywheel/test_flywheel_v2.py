"""Flywheel v2: both rule sets on the same records, validate, video + DataLoader, view, faults.

Records are written by the real ``TrajectoryRecorder``; datasets by lerobot's writer and read
back with lerobot's ``LeRobotDataset`` (video decoded by torchcodec); the Rerun file is read
back with rerun-sdk's own dataframe reader; interruption is a real SIGTERM / SIGKILL to a real
``rpent-flywheel`` process.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from test_flywheel_export import dataset_frames, exclusions, open_dataset, tree_digest

from rpent.cli.flywheel import main as flywheel_main
from rpent.flywheel import export_records
from rpent.flywheel.partial import OWNER_FILE
from rpent.flywheel.validate import validate_root
from rpent.flywheel.view import read_rrd_summary, write_episode_rrd

LANGUAGE = "open the top drawer"  # conftest's task_language

# 3 scripted, VLA chunk rows 5+2 ("pick"), 2 scripted, 3 VLA ("place"), 2 scripted: 17 actions.
MIXED = [("scripted", 3), ("vla", "pick", [5, 2]), ("scripted", 2), ("vla", "place", [3]), ("scripted", 2)]
MIXED_SUCCESS = 14  # the last "place" row achieves success; 2 scripted actions follow it


def _frames_match(frames: list[dict], truth: list, task: str | None = None) -> None:
    assert len(frames) == len(truth)
    for j, (fr, t) in enumerate(zip(frames, truth)):
        assert fr["frame_index"] == j
        np.testing.assert_array_equal(fr["image"], t.main)
        np.testing.assert_array_equal(fr["wrist_image"], t.wrist)
        np.testing.assert_array_equal(fr["state"], t.state)
        np.testing.assert_array_equal(fr["actions"], t.action)
        assert fr["task"] == (task if task is not None else t.instruction)


def test_v1_and_v2_on_the_same_records_give_the_documented_differences(tmp_path, record_run, vla_segments):
    runs = tmp_path / "runs"
    _, mixed = record_run(runs / "mixed", MIXED, observations="all", success_seq=MIXED_SUCCESS)
    # a failed attempt (4 scripted), a reset, then 2 scripted + 3 VLA reaching success at the last row
    _, reset = record_run(runs / "reset", [("scripted", 4), ("reset",), ("scripted", 2), ("vla", "pick", [3])],
                          observations="all", success_seq=8, obs_offset=100)
    record_run(runs / "failed", [("scripted", 2), ("vla", "pick", [3])], observations="all", success=False,
               obs_offset=200)
    before = tree_digest(runs)

    r1 = export_records(runs, tmp_path / "v1", rules="v1", progress=False)
    r2 = export_records(runs, tmp_path / "v2", rules="v2", progress=False)
    assert tree_digest(runs) == before, "exports must never modify their input"
    assert (r1["rules"], r2["rules"]) == ("v1", "v2") and r1["rules_description"] != r2["rules_description"]

    # v1: only VLA segments, task = the VLA instruction; the actions after success are VLA-less anyway
    v1_eps = vla_segments(mixed) + vla_segments(reset)
    assert r1["counts"]["episodes"] == len(v1_eps) == 3
    f1 = dataset_frames(tmp_path / "v1" / "train")
    for e, ep in enumerate(v1_eps):
        _frames_match([f for f in f1 if f["episode_index"] == e], ep)

    # v2: one episode per successful run: every action of the successful attempt up to and including
    # the first success, scripted included; task = the task language
    f2 = dataset_frames(tmp_path / "v2" / "train")
    assert r2["counts"]["episodes"] == 2
    by_ep = [[f for f in f2 if f["episode_index"] == e] for e in range(2)]
    _frames_match(by_ep[0], mixed[: MIXED_SUCCESS + 1], LANGUAGE)
    _frames_match(by_ep[1], reset[4:9], LANGUAGE)
    (ep_mixed,) = next(r for r in r2["runs"] if r["record"].startswith("mixed/"))["episodes"]
    assert ep_mixed["sources"] == {"scripted": 5, "vla": 10} and ep_mixed["seqs"] == [0, MIXED_SUCCESS]
    assert {(e["record"].split("/")[0], e["reason"], e.get("count")) for e in r2["exclusions"]} == {
        ("mixed", "after_success", 2), ("reset", "failed_attempt", 4), ("failed", "not_successful", None)}
    # the failed run is never exported under either rule set
    for rep in (r1, r2):
        assert next(r for r in rep["runs"] if r["record"].startswith("failed/"))["exported"] is False
        assert exclusions(rep, "not_successful")[0]["record"].startswith("failed/")


def test_v2_names_what_it_cannot_export(tmp_path, record_run):
    runs = tmp_path / "runs"
    record_run(runs / "no_images", [("scripted", 2), ("vla", "pick", [2])], success_seq=3)  # default: vla only
    record_run(runs / "no_step", [("scripted", 2)], observations="all")  # success claimed, no terminated step
    out = tmp_path / "out"
    assert flywheel_main(["--input-root", str(runs), "--output-dir", str(out), "--rules", "v2", "--no-progress"]) == 3
    report = json.loads((out / "report.json").read_text())
    assert [p.name for p in out.iterdir()] == ["report.json"] and report["dataset"] is None
    assert report["exclusion_counts"] == {"no_success_step": 1, "observations_missing": 1}
    (miss,) = exclusions(report, "observations_missing")
    assert "action seq 0 (scripted)" in miss["detail"] and "--record-observations all" in miss["detail"]


def test_batch_results_root_is_searched_recursively(tmp_path, record_run):
    # rpent-batch layout: <results-root>/<arm>/<cell>/<run dir>/trajectories/<task_id>/
    root = tmp_path / "batch"
    for arm in ("api", "scripted"):
        for cell in ("t0_s0", "t1_s0"):
            record_run(root / arm / cell, [("scripted", 2), ("vla", "pick", [2])], observations="all", success_seq=3)
    out = tmp_path / "out"
    report = export_records(root, out, rules="v2", progress=False)
    assert report["counts"]["runs_seen"] == 4 and report["counts"]["episodes"] == 4
    assert sorted(r["record"].rsplit("/trajectories", 1)[0] for r in report["runs"]) == [
        "api/t0_s0", "api/t1_s0", "scripted/t0_s0", "scripted/t1_s0"]


def test_validate_finds_each_planted_defect(tmp_path, record_run, capsys):
    root = tmp_path / "raw"
    plan = [("scripted", 2), ("vla", "pick", [3])]

    def rec(name, **kw):
        d, _ = record_run(root / name, plan, observations="all", success_seq=4, **kw)
        return d

    rec("clean")
    d = rec("truncated_line")
    (d / "actions.jsonl").write_bytes((d / "actions.jsonl").read_bytes()[:-20])
    d = rec("missing_predictions")
    (d / "predictions.jsonl").unlink()
    d = rec("action_differs")
    lines = (d / "predictions.jsonl").read_text().splitlines()
    p = json.loads(lines[0])
    p["actions"][1][0] += 0.5
    (d / "predictions.jsonl").write_text("\n".join([json.dumps(p), *lines[1:]]) + "\n")
    d = rec("truncated_png")
    png = d / "artifacts" / "wrist" / "000003.png"
    png.write_bytes(png.read_bytes()[:150])
    d = rec("killed")
    task = json.loads((d / "task.json").read_text())
    (d / "task.json").write_text(json.dumps({**task, "status": "running", "environment_success": None}))
    d, _ = record_run(root / "no_success_step", plan, observations="all")  # success, but no terminated step
    d = rec("scripted_without_images")
    lines = (d / "actions.jsonl").read_text().splitlines()
    a = json.loads(lines[0])
    a["obs"]["main"] = None
    (d / "actions.jsonl").write_text("\n".join([json.dumps(a), *lines[1:]]) + "\n")

    before = tree_digest(root)
    result = validate_root(root)
    assert tree_digest(root) == before
    found = {r["record"].split("/")[0]: r for r in result["records"]}
    assert found["clean"]["ok"] and found["clean"]["problems"] == []
    expect = {
        "truncated_line": ("lines", "no line end"),
        "missing_predictions": ("files", "predictions.jsonl is missing"),
        "action_differs": ("links", "differs from row 1 of prediction"),
        "truncated_png": ("observations", "artifacts/wrist/000003.png"),
        "killed": ("task_json", "status 'running'"),
        "no_success_step": ("success", "no action has terminated=true"),
        "scripted_without_images": ("observations", "action seq 0: no main image"),
    }
    for name, (check, text) in expect.items():
        probs = found[name]["problems"]
        assert not found[name]["ok"] and any(p["check"] == check and text in p["detail"] for p in probs), (name, probs)
    assert result["counts"] == {"records": 8, "ok": 1, "with_problems": 7, "by_check": result["counts"]["by_check"]}

    assert flywheel_main(["validate", str(root)]) == 1
    out = capsys.readouterr().out
    assert "clean/trajectories/libero_goal_t0_s0: ok" in out and "8 record(s): 1 ok, 7 with problems" in out
    assert flywheel_main(["validate", str(root / "clean")]) == 0
    assert flywheel_main(["validate", str(tmp_path / "nope")]) == 2


def test_video_dataset_stats_split_card_and_a_training_dataloader(tmp_path, record_run):
    import torch

    runs = tmp_path / "runs"
    truths = []
    for k in range(4):
        _, t = record_run(runs / f"r{k}", [("scripted", 3), ("vla", "pick", [5, 4])], observations="all",
                          success_seq=11, obs_offset=40 * k)
        truths.append(t[:12])
    out = tmp_path / "out"
    report = export_records(runs, out, rules="v2", video=True, val_fraction=0.25, split_seed=1, progress=False)
    assert report["dataset"]["use_videos"] and report["dataset"]["vcodec"] == "libsvtav1"
    train_eps, val_eps = report["split"]["train_episodes"], report["split"]["val_episodes"]
    assert len(train_eps) == 3 and len(val_eps) == 1 and sorted(train_eps + val_eps) == [0, 1, 2, 3]
    assert report["val_dataset"]["episodes"] == 1 and report["dataset"]["episodes"] == 3

    info = json.loads((out / "train" / "meta" / "info.json").read_text())
    assert info["features"]["image"]["dtype"] == "video" and info["features"]["image"]["info"]["video.codec"] == "av1"
    assert list((out / "train" / "videos" / "image").rglob("*.mp4"))
    card = (out / "train" / "README.md").read_text()
    assert "rule set **v2**" in card and "LeRobot" in card and "video (libsvtav1)" in card
    assert all(f"r{i}/trajectories/libero_goal_t0_s0" in card for i in train_eps)
    assert (out / "val" / "README.md").is_file()

    # per-feature statistics of the vectors equal numpy's over the train frames
    train_truth = [t for i in train_eps for t in truths[i]]
    stats = json.loads((out / "train" / "meta" / "stats.json").read_text())
    for key, arr in (("state", np.stack([t.state for t in train_truth])), ("actions", np.stack([t.action for t in train_truth]))):
        np.testing.assert_allclose(stats[key]["mean"], arr.mean(0), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(stats[key]["std"], arr.std(0), rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(stats[key]["min"], arr.min(0), rtol=0, atol=0)
        np.testing.assert_allclose(stats[key]["max"], arr.max(0), rtol=0, atol=0)
    assert len(stats["image"]["mean"]) == 3  # per channel

    # a training input pipeline: lerobot delta_timestamps (action chunks of 4, one state) + torch DataLoader
    from rpent.flywheel.lerobot_compat import import_lerobot_dataset

    chunk = 4
    ds = import_lerobot_dataset()("rpent/train", root=out / "train",
                                  delta_timestamps={"actions": [i / 20 for i in range(chunk)]})
    assert len(ds) == 36 and ds.num_episodes == 3
    loader = torch.utils.data.DataLoader(ds, batch_size=8, shuffle=True, num_workers=0,
                                         generator=torch.Generator().manual_seed(0))
    batches = 0
    for batch in loader:
        assert batch["image"].shape == (8, 3, 256, 256) and batch["image"].dtype == torch.float32
        assert batch["wrist_image"].shape == (8, 3, 256, 256)
        assert batch["state"].shape == (8, 8) and batch["actions"].shape == (8, chunk, 7)
        assert batch["actions_is_pad"].shape == (8, chunk)
        for b in range(8):
            ep, fi = int(batch["episode_index"][b]), int(batch["frame_index"][b])
            truth = truths[train_eps[ep]]
            want = [truth[min(fi + i, len(truth) - 1)].action for i in range(chunk)]
            np.testing.assert_array_equal(batch["actions"][b].numpy(), np.stack(want))
            pad = [fi + i >= len(truth) for i in range(chunk)]
            assert batch["actions_is_pad"][b].tolist() == pad
            assert batch["task"][b] == LANGUAGE
            # lossy video: decoded frames are close to the recorded ones, not equal
            img = (batch["image"][b].permute(1, 2, 0).numpy() * 255.0)
            assert np.abs(img - truth[fi].main.astype(np.float32)).mean() < 20.0
        batches += 1
        if batches == 3:
            break
    assert batches == 3


def test_view_writes_an_rrd_that_rerun_reads_back(tmp_path, record_run, capsys):
    runs = tmp_path / "runs"
    record_run(runs / "a", [("vla", "pick", [5, 2])])
    record_run(runs / "b", [("vla", "place", [3])], obs_offset=30)
    export_records(runs, tmp_path / "out", progress=False)
    assert flywheel_main(["view", str(tmp_path / "out"), "--episode", "1"]) == 0
    rrd = tmp_path / "out" / "view_train_episode_1.rrd"
    assert f"wrote {rrd} (3 frame(s) of episode 1, " in capsys.readouterr().out
    summary = read_rrd_summary(rrd)
    assert summary["application_id"] == "rpent_flywheel_view" and summary["frames"] == 3
    assert {"/image", "/wrist_image", "/task", "/state/7", "/actions/6"} <= set(summary["entities"])
    assert summary["image_shape"] == (256, 256, 3) and summary["image_media_type"] == "image/jpeg"
    # lossless PNG frames on request: the pixels are the dataset's
    png_rrd = tmp_path / "png.rrd"
    assert flywheel_main(["view", str(tmp_path / "out"), "--episode", "1", "--output", str(png_rrd),
                          "--image-format", "png"]) == 0
    png_summary = read_rrd_summary(png_rrd)
    assert png_summary["image_media_type"] == "image/png" and png_summary["image_shape"] == (256, 256, 3)
    raw = 3 * 2 * 256 * 256 * 3  # bytes of the frames as raw RGB (what the view stored before)
    assert rrd.stat().st_size < raw / 2 and png_rrd.stat().st_size < raw / 2
    assert flywheel_main(["view", str(tmp_path / "out"), "--episode", "5"]) == 2
    assert "out of range" in capsys.readouterr().err
    with pytest.raises(Exception, match="already exists"):
        write_episode_rrd(tmp_path / "out", 1, rrd)


# The real exporter, held inside its build directory (a test hook around
# rpent.flywheel.dataset.write_lerobot_dataset: at its entry, or after its first frame is written)
# until a signal ends it: the signal lands inside the export on any machine, however fast (a fixed
# sleep did not ensure it).
HELD_EXPORT = """
import os, runpy, sys, time
import rpent.flywheel.dataset as dataset
real = dataset.write_lerobot_dataset
def hold():
    open(os.environ["RPENT_TEST_HELD_FLAG"], "w").close()
    while True:  # held inside the export until the test's signal
        time.sleep(0.05)
def held(*args, on_frame=None, **kwargs):
    if os.environ["RPENT_TEST_HELD_AT"] == "entry":
        hold()
    def frame_written():
        if on_frame is not None:
            on_frame()
        if not os.path.exists(os.environ["RPENT_TEST_HELD_FLAG"]):
            hold()
    return real(*args, on_frame=frame_written, **kwargs)
dataset.write_lerobot_dataset = held
sys.argv = ["rpent-flywheel", *sys.argv[1:]]
runpy.run_module("rpent.cli.flywheel", run_name="__main__")
"""


def _held_export_proc(runs: Path, out: Path, flag: Path, at: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", HELD_EXPORT, "--input-root", str(runs), "--output-dir", str(out), "--no-progress"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=dict(os.environ, RPENT_TEST_HELD_FLAG=str(flag), RPENT_TEST_HELD_AT=at))


def _wait_held(proc: subprocess.Popen, flag: Path, timeout: float = 240.0) -> None:
    deadline = time.monotonic() + timeout
    while not flag.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the export never reached the point where the test holds it"
        time.sleep(0.05)


def _partials(parent: Path, name: str) -> list[Path]:
    return [p for p in parent.glob(f".{name}.partial-*") if (p / OWNER_FILE).is_file()]


def test_sigterm_removes_the_build_dir_and_kill9_leftovers_are_removed_by_the_next_export(tmp_path, record_run):
    runs = tmp_path / "runs"
    record_run(runs / "a", [("vla", "pick", [5] * 8)])
    out = tmp_path / "out"
    flags = tmp_path / "flags"
    flags.mkdir()

    proc = _held_export_proc(runs, out, flags / "1", "frame")
    try:
        _wait_held(proc, flags / "1")  # inside the export: lerobot imported, a frame written
        assert len(_partials(tmp_path, "out")) == 1
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 143, err
    assert "interrupted by SIGTERM" in err and "partial build directory was removed" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["flags", "runs"]

    proc = _held_export_proc(runs, out, flags / "2", "entry")
    try:
        _wait_held(proc, flags / "2")  # inside the export: its build directory made
    finally:
        proc.kill()
        proc.communicate(timeout=60)
    (stale,) = _partials(tmp_path, "out")
    assert stale.is_dir() and not out.exists()  # what kill -9 leaves behind

    notes: list[str] = []
    report = export_records(runs, out, progress=False, log=notes.append)
    assert not stale.exists() and report["counts"]["frames"] == 40
    (removed,) = report["stale_partials_removed"]
    assert removed["path"] == str(stale) and removed["bytes"] > 0
    assert len(notes) == 1 and f"removed stale build directory {stale}" in notes[0] and "killed" in notes[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["flags", "out", "runs"]
