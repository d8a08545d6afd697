"""``rpent --robot metaworld`` end to end: the env server under the Meta-World interpreter, the
``expert`` planner, the run record, the trajectory record and the flywheel export (sawyer)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import REPO
from tests.robots.metaworld.conftest import needs_metaworld

pytestmark = needs_metaworld


def _main_job(run):
    """``rpent --robot metaworld ... --record-trajectory --record-observations all``; checks the run record
    and the trajectory record, returns the actions.jsonl lines."""
    out = subprocess.run([sys.executable, "-m", "rpent.cli.main", "--robot", "metaworld", "--suite", "mt10",
                          "--task", "reach-v3", "--seed", "0", "--record-trajectory", "--record-observations", "all",
                          "--output-dir", str(run)], capture_output=True, text=True, cwd=REPO, timeout=280)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "rpent: SUCCESS (environment predicate)" in out.stdout
    transcript = json.loads((run / "transcript_mt10_t0_s0.json").read_text())
    assert transcript["environment_success"] is True and transcript["label"] == "succeeded"
    assert transcript["planner"] == "expert" and transcript["init_state_id"] == 0
    tools = [m["name"] for m in transcript["messages"] if m.get("role") == "tool"]
    assert tools == ["view_env_state", "expert_policy", "finish"]
    states = json.loads((run / "states.json").read_text())
    assert states["episode"]["env_name"] == "reach-v3" and states["episode"]["mujoco"].startswith("3.3")
    last = states["steps"][-1]
    assert last["success"] is True and last["terminated"] is True and last["env_steps"] == transcript["env_steps"]
    assert {"agentview.png", "wrist.png", "agentview_seg.npz"} <= set(last["artifacts"])
    assert (run / "episode.mp4").stat().st_size > 0
    rec = next((run / "trajectories").iterdir())
    task = json.loads((rec / "task.json").read_text())
    assert task["robot"] == "metaworld" and task["environment_success"] is True
    lines = [json.loads(x) for x in (rec / "actions.jsonl").read_text().splitlines()]
    assert len(lines) == transcript["env_steps"] and all(len(a["action"]) == 4 for a in lines)
    assert all(len(a["obs"]["state"]) == 4 and a["obs"]["main"] for a in lines) and lines[-1]["terminated"] is True
    return lines


def test_main_job_records_a_sawyer_episode(tmp_path):
    _main_job(tmp_path / "run")


@pytest.mark.slow
def test_main_job_exports_a_sawyer_dataset(tmp_path):
    """The flywheel export of a Meta-World run (slow: lerobot's writer, ~1 min on a loaded VM)."""
    run = tmp_path / "run"
    lines = _main_job(run)
    # the flywheel export: a LeRobot dataset of robot type sawyer with 4-D state/actions at 80 fps
    ds = tmp_path / "ds"
    exp = subprocess.run([sys.executable, "-m", "rpent.cli.flywheel", "export", "--input-root", str(run),
                          "--output-dir", str(ds), "--rules", "v2"], capture_output=True, text=True, cwd=REPO,
                         timeout=280)
    assert exp.returncode == 0, exp.stdout[-2000:] + exp.stderr[-2000:]
    info = json.loads((ds / "train" / "meta" / "info.json").read_text())
    assert info["robot_type"] == "sawyer" and info["fps"] == 80
    assert info["features"]["state"]["shape"] == [4] and info["features"]["actions"]["shape"] == [4]
    assert info["total_frames"] == len(lines)
    from rpent.flywheel.lerobot_compat import import_lerobot_dataset

    LeRobotDataset = import_lerobot_dataset()  # lerobot's own reader
    frame = LeRobotDataset("rpent/ds", root=ds / "train")[0]
    assert tuple(frame["state"].shape) == (4,) and tuple(frame["actions"].shape) == (4,)
    assert frame["task"] == "reach the goal position with the gripper"


@pytest.mark.slow
def test_batch_mt10_two_tasks(tmp_path):
    """rpent-batch --robot metaworld over two MT10 tasks (slow: two env servers, ~2 min loaded)."""
    root = tmp_path / "res"
    out = subprocess.run([sys.executable, "-m", "rpent.cli.batch", "--robot", "metaworld", "--suites", "mt10",
                          "--tasks", "0-1", "--seeds", "0", "--results-root", str(root), "--no-video",
                          "--no-progress"], capture_output=True, text=True, cwd=REPO, timeout=290)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    arm = json.loads((root / "report.json").read_text())["arms"][0]
    assert arm["planner"] == "expert" and (arm["overall"]["k"], arm["overall"]["n"]) == (2, 2)
    runs = sorted((root / "runs").rglob("transcript_*.json"))
    assert len(runs) == 2 and all(json.loads(p.read_text())["environment_success"] for p in runs)
