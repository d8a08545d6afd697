"""Sampled camera statistics (``rpent.flywheel.stats``) against the every-pixel figures and lerobot's own.

Frames are real PNG files written by the real ``TrajectoryRecorder``; the reference is lerobot
0.4.4's ``compute_episode_stats`` over the same files; the export's ``meta/stats.json`` is read
back as lerobot wrote it.
"""

from __future__ import annotations

import json

import numpy as np
from PIL import Image

from rpent.flywheel import export_records
from rpent.flywheel.lerobot_compat import import_lerobot_dataset
from rpent.flywheel.stats import episode_stats, image_episode_stats


def _frame_paths(record_dir, cam: str) -> list[str]:
    actions = [json.loads(x) for x in (record_dir / "actions.jsonl").read_text().splitlines()]
    return [str(record_dir / a["obs"][cam]) for a in actions]


def test_sampled_image_stats_are_close_to_lerobots_full_resolution_stats(tmp_path, record_run):
    import_lerobot_dataset()
    from lerobot.datasets.compute_stats import compute_episode_stats

    d, _ = record_run(tmp_path / "r", [("scripted", 8)], observations="all", success_seq=7)
    features = {"image": {"dtype": "image", "shape": (256, 256, 3), "names": None},
                "state": {"dtype": "float32", "shape": (8,), "names": None}}
    paths = _frame_paths(d, "main")
    state = np.random.default_rng(0).normal(size=(8, 8)).astype(np.float32)
    lerobot_full = compute_episode_stats({"image": paths, "state": state}, features)
    full = episode_stats({"image": paths, "state": state}, features, stride=1)
    ours = episode_stats({"image": paths, "state": state}, features)
    # lerobot 0.4.4 squares the uint8 frames (wraps around): its std is 0, ours is the real spread
    assert (lerobot_full["image"]["std"] == 0).all()
    assert (full["image"]["std"] > 0.05).all() and (ours["image"]["std"] > 0.05).all()
    # lerobot's algorithm on float frames gives our every-pixel figures
    from lerobot.datasets.compute_stats import get_feature_stats, sample_indices

    frames = np.stack([np.asarray(Image.open(paths[i]).convert("RGB")).transpose(2, 0, 1)
                       for i in sample_indices(len(paths))]).astype(np.float64)
    ref = get_feature_stats(frames, axis=(0, 2, 3), keepdims=True)
    for k in ("mean", "std", "min", "max"):
        np.testing.assert_allclose(full["image"][k], np.squeeze(ref[k] / 255.0, axis=0), rtol=0, atol=1e-9, err_msg=k)
    for k in ("mean", "min", "max", "q50"):  # uint8-safe figures agree with lerobot's own
        np.testing.assert_allclose(full["image"][k], lerobot_full["image"][k], rtol=0, atol=1e-3, err_msg=k)

    assert set(ours) == set(full) and set(ours["image"]) == set(full["image"])
    for k, v in full["image"].items():
        assert ours["image"][k].shape == v.shape and ours["image"][k].dtype == v.dtype, k
    assert ours["image"]["count"].tolist() == full["image"]["count"].tolist() == [8]
    for k in ("mean", "std", "q01", "q10", "q50", "q90", "q99"):
        np.testing.assert_allclose(ours["image"][k], full["image"][k], atol=0.01, err_msg=k)
    # a pixel sample can only narrow the range
    assert (ours["image"]["min"] >= full["image"]["min"]).all() and (ours["image"]["max"] <= full["image"]["max"]).all()
    for k, v in full["state"].items():  # non-image features: lerobot's own computation, unchanged
        np.testing.assert_array_equal(ours["state"][k], v)
    # stride 1 is the every-pixel figure exactly
    one = image_episode_stats(paths, stride=1)
    for k, v in full["image"].items():
        np.testing.assert_allclose(one[k], v, rtol=0, atol=1e-12, err_msg=k)


def test_export_stats_sampled_vs_full(tmp_path, record_run):
    for k in range(2):
        record_run(tmp_path / "runs" / f"r{k}", [("scripted", 6)], observations="all", success_seq=5, obs_offset=20 * k)
    stats = {}
    for mode in ("sampled", "full"):
        report = export_records(tmp_path / "runs", tmp_path / mode, rules="v2", image_stats=mode, progress=False)
        assert report["dataset"]["image_stats"] == mode
        stats[mode] = json.loads((tmp_path / mode / "train" / "meta" / "stats.json").read_text())
    for feat in ("state", "actions"):
        assert stats["sampled"][feat] == stats["full"][feat]
    for feat in ("image", "wrist_image"):
        for k in ("mean", "std"):
            np.testing.assert_allclose(stats["sampled"][feat][k], stats["full"][feat][k], atol=0.01)
        assert min(np.ravel(stats["full"][feat]["std"])) > 0.01, stats["full"][feat]["std"]
        assert stats["sampled"][feat]["count"] == stats["full"][feat]["count"] == [12]
