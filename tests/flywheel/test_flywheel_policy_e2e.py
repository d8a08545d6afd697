"""The flywheel closed on the real simulator: collect -> export -> train -> serve -> evaluate.

One cell of ``experiments/flywheel_libero_object.yaml`` (``rpent-batch``: the scripted planner on
libero_object task 0, init state 0), recorded with both policy cameras at 64 px; ``rpent-flywheel export --rules v2 --video``; ``rpent-train`` (act-small, 2 steps on the CPU);
``lerobot_policy_server`` on the checkpoint; ``rpent-eval`` over the held-out init states 40 and 41 of
task 0 through the server (and once in-process), episodes cut at 20 steps. The policy is far too
briefly trained to succeed; the test checks the plumbing and the records: trajectory count, the image
size the envs rendered, the checkpoint and dataset hashes in the evaluation outputs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rpent.rpc.protocol import READY_PREFIX

pytestmark = [pytest.mark.slow, pytest.mark.timeout(3600)]
REPO = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "MUJOCO_GL": "egl"}


def _run(argv, cwd, timeout=900):
    p = subprocess.run([sys.executable, "-m", *argv], cwd=cwd, env=ENV, capture_output=True, text=True, timeout=timeout)
    return p


def test_collect_export_train_serve_evaluate(tmp_path):
    # the checked-in experiment, one cell of it, cameras at 64 px (a later flag wins)
    run = _run(["rpent.cli.batch", "--matrix", str(REPO / "experiments" / "flywheel_libero_object.yaml"), "--tasks", "0",
                "--seeds", "0", "--no-progress", "--results-root", str(tmp_path / "runs"), "--policy-image-size", "64"],
               tmp_path)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    exp = _run(["rpent.cli.flywheel", "export", "--input-root", str(tmp_path / "runs"), "--output-dir",
                str(tmp_path / "ds"), "--rules", "v2", "--video", "--keyframe-interval", "240", "--no-progress"], tmp_path)
    assert exp.returncode == 0, exp.stderr[-2000:]
    info = json.loads((tmp_path / "ds" / "train" / "meta" / "info.json").read_text())
    assert info["features"]["image"]["shape"] == [64, 64, 3] and info["total_episodes"] == 1
    card = (tmp_path / "ds" / "train" / "README.md").read_text()
    assert "rpent-batch --matrix" in card and "flywheel_libero_object.yaml" in card  # the card names the collection
    tr = _run(["rpent.cli.train", "--dataset", str(tmp_path / "ds" / "train"), "--output-dir", str(tmp_path / "act"),
               "--recipe", "act-small", "--steps", "2", "--batch-size", "2", "--save-every", "2", "--log-every", "1",
               "--device", "cpu", "--no-progress"], tmp_path)
    assert tr.returncode == 0, tr.stderr[-2000:]
    spec = json.loads((tmp_path / "act" / "checkpoints" / "last" / "pretrained_model" / "rpent_policy.json").read_text())
    assert spec["task_conditioning"]["tasks"] == ["pick up the alphabet soup and place it in the basket"]

    eval_args = ["rpent.cli.eval", "--config", "libero_object_lerobot_eval", "--no-progress", "--logs-dir",
                 str(tmp_path / "logs"), "env.eval.task_ids=[0]", "env.eval.init_state_ids=40-41",
                 "env.eval.total_num_envs=2", "env.num_workers=1", "env.eval.rollout_epoch=1",
                 "env.eval.max_episode_steps=20", "runner.logger.logger_backends=[]"]
    server = subprocess.Popen(
        [sys.executable, "-m", "rpent.robots.components.lerobot_policy_server", "--checkpoint", str(tmp_path / "act"),
         "--device", "cpu", "--transport", "socket", "--port", "0", "--parent-watch"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
    try:
        line = server.stdout.readline()
        assert line.startswith(READY_PREFIX), line + (server.stderr.read() if server.poll() is not None else "")
        ev = _run([*eval_args, f"policy.endpoint={line[len(READY_PREFIX):].strip()}"], tmp_path)
        assert ev.returncode == 0, ev.stdout[-3000:] + ev.stderr[-3000:]
    finally:
        server.stdin.close()
        server.wait(timeout=30)
        server.stdout.close()
        server.stderr.close()
    ev2 = _run([*eval_args, f"policy.checkpoint={tmp_path / 'act'}", "policy.device=cpu"], tmp_path)
    assert ev2.returncode == 0, ev2.stdout[-3000:] + ev2.stderr[-3000:]

    runs = sorted((tmp_path / "logs").iterdir())
    assert len(runs) == 2
    model_sha = None
    for d in runs:
        metrics = json.loads((d / "metrics.json").read_text())
        assert metrics["complete"] and metrics["num_trajectories"] == 2
        assert metrics["settings"]["env"]["init_state_ids"] == [40, 41]
        assert metrics["settings"]["env"]["policy_image_size"] == 64  # rendered at the policy's size
        policy = json.loads((d / "policy.json").read_text())
        assert policy["dataset"]["sha256"] == spec["dataset"]["sha256"]
        assert metrics["policy"]["checkpoint"]["model_sha256"] == policy["checkpoint"]["model_sha256"]
        model_sha = model_sha or policy["checkpoint"]["model_sha256"]
        assert policy["checkpoint"]["model_sha256"] == model_sha  # both runs evaluated the same weights
        plan = (d / "plan.txt").read_text()
        assert "reset states 40-41" in plan
    assert Path(spec["dataset"]["root"]) == (tmp_path / "ds" / "train").resolve()
