"""The data flywheel end to end on real LIBERO, offline.

1. ``rpent --planner scripted --record-trajectory`` solves libero_object task 0 seed 0: a
   successful record whose actions are all scripted.
2. The replay policy server serves that record's actions over the VLA predict contract; a
   code policy calls ``pi0_pick`` through it (``--vla-endpoint``): the episode succeeds again,
   now with every action linked to a VLA prediction.
3. ``rpent-flywheel`` exports both runs: the scripted run is excluded (no VLA action), the
   replayed run becomes one LeRobot episode; the dataset is reopened with lerobot's
   ``LeRobotDataset`` offline and every frame is compared with the record.

About 5-7 minutes on 2 CPU cores (policy renders after every recorded step); the v2 test (a scripted
run recorded with --record-observations all, exported with --rules v2) about 5 more.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from rpent.flywheel.lerobot_compat import import_lerobot_dataset
from rpent.recording import find_record_dirs, load_observation, load_record

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]

TASK = ["--robot", "libero", "--suite", "libero_object", "--task", "0", "--seed", "0", "--no-video"]
POLICY = """
r = robo.pi0_pick(prompt="pick up the alphabet soup", max_chunks=200)
if not r.terminated:
    r = robo.pi0_doubled(prompt="place the alphabet soup in the basket", max_chunks=200)
robo.finish("success" if r.terminated else "failure", "replayed through the VLA predict contract")
"""


def _rpent(args: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rpent.cli.main", *TASK, *args], capture_output=True, text=True,
                          timeout=1200, env=dict(os.environ, MUJOCO_GL="egl"))


def test_replayed_vla_episode_is_exported_and_matches_the_record(tmp_path, spawn_server):
    runs = tmp_path / "runs"
    p = _rpent(["--planner", "scripted", "--record-trajectory", "--output-dir", str(runs / "scripted")])
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]

    server = spawn_server([sys.executable, "-m", "rpent.robots.components.replay_policy_server",
                           "--from-records", str(runs / "scripted"), "--port", "0"])
    policy = tmp_path / "policy.py"
    policy.write_text(POLICY)
    p = _rpent(["--policy-mode", "code", "--code-file", str(policy), "--code-timeout-s", "1100",
                "--vla-endpoint", server.endpoint, "--record-trajectory", "--output-dir", str(runs / "replay")])
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]

    (scripted_dir,) = find_record_dirs(runs / "scripted")
    (replay_dir,) = find_record_dirs(runs / "replay")
    replay = load_record(replay_dir)
    assert replay.task["environment_success"] is True and replay.task["policy_mode"] == "code"
    assert replay.task["planner"] == "code_file"  # a --code-file run names no planner it did not run
    actions = replay.actions.records
    assert actions and all(a["source"] == "vla" and a["tool"] == "pi0_pick" for a in actions)
    scripted_actions = load_record(scripted_dir).actions.records
    np.testing.assert_array_equal(  # the VLA answered the recorded actions, in order
        np.asarray([a["action"] for a in actions], np.float32),
        np.asarray([a["action"] for a in scripted_actions[: len(actions)]], np.float32))

    out = tmp_path / "lerobot"
    proc = subprocess.run([sys.executable, "-m", "rpent.cli.flywheel", "--input-root", str(runs),
                           "--output-dir", str(out), "--no-progress"], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads((out / "report.json").read_text())
    assert report["counts"]["runs_seen"] == 2 and report["counts"]["runs_exported"] == 1
    assert report["counts"]["episodes"] == 1 and report["counts"]["frames"] == len(actions)
    assert {(e["record"].split("/")[0], e["reason"]) for e in report["exclusions"]} == {
        ("scripted", "not_vla"), ("scripted", "no_qualifying_actions")}

    preds = {p["pred_id"]: p for p in replay.predictions.records}
    ds = import_lerobot_dataset()("rpent/e2e", root=out / "train")
    assert len(ds) == len(actions) and ds.meta.robot_type == "panda" and ds.fps == 20
    for i, a in enumerate(actions):
        frame = ds[i]
        main, wrist, state = load_observation(replay_dir, a["obs"])
        to_u8 = lambda t: (t.permute(1, 2, 0).numpy() * 255.0).round().astype(np.uint8)  # noqa: E731
        np.testing.assert_array_equal(to_u8(frame["image"]), main)
        np.testing.assert_array_equal(to_u8(frame["wrist_image"]), wrist)
        np.testing.assert_array_equal(frame["state"].numpy(), state)
        np.testing.assert_array_equal(frame["actions"].numpy(), np.asarray(a["action"], np.float32))
        assert frame["task"] == preds[a["pred_id"]]["instruction"]
        assert int(frame["episode_index"]) == 0 and int(frame["frame_index"]) == i


def test_scripted_run_recorded_with_all_observations_exports_under_v2(tmp_path):
    """Flywheel v2 on real LIBERO: a scripted run with --record-observations all is one v2 episode:
    every action up to and including the first success, each frame equal to the record."""
    runs = tmp_path / "runs"
    p = _rpent(["--planner", "scripted", "--record-trajectory", "--record-observations", "all",
                "--output-dir", str(runs / "scripted")])
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    (rec_dir,) = find_record_dirs(runs)
    rec = load_record(rec_dir)
    assert rec.task["capture"]["observations"] == "all" and rec.task["environment_success"] is True
    actions = rec.actions.records
    assert all(a["source"] == "scripted" and a["obs"]["main"] and a["obs"]["wrist"] for a in actions)
    first = next(i for i, a in enumerate(actions) if a["terminated"])

    v = subprocess.run([sys.executable, "-m", "rpent.cli.flywheel", "validate", str(runs)], capture_output=True,
                       text=True, timeout=600)
    assert v.returncode == 0 and "1 record(s): 1 ok, 0 with problems" in v.stdout, v.stdout[-2000:]
    out = tmp_path / "lerobot"
    proc = subprocess.run([sys.executable, "-m", "rpent.cli.flywheel", "--input-root", str(runs), "--output-dir",
                           str(out), "--rules", "v2", "--no-progress"], capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads((out / "report.json").read_text())
    assert report["rules"] == "v2" and report["counts"]["episodes"] == 1 and report["counts"]["frames"] == first + 1
    ds = import_lerobot_dataset()("rpent/e2e", root=out / "train")
    assert len(ds) == first + 1
    for i in range(0, first + 1, max(1, first // 10)):
        frame = ds[i]
        main, wrist, state = load_observation(rec_dir, actions[i]["obs"])
        to_u8 = lambda t: (t.permute(1, 2, 0).numpy() * 255.0).round().astype(np.uint8)  # noqa: E731
        np.testing.assert_array_equal(to_u8(frame["image"]), main)
        np.testing.assert_array_equal(to_u8(frame["wrist_image"]), wrist)
        np.testing.assert_array_equal(frame["state"].numpy(), state)
        np.testing.assert_array_equal(frame["actions"].numpy(), np.asarray(actions[i]["action"], np.float32))
        assert frame["task"] == rec.task["task_language"]
