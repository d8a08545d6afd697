"""End-to-end evaluations on the real LIBERO simulator in real spawned env workers.

Policies: the replay policy server in zero-action mode and in replay mode (real process, real
socket), rpent's tiny random Pi0.5 (in-process, through the CLI in a real process), and an
in-process policy that kills an env worker mid-run.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import REPO, policy_server
from replay_fixtures import replay_file
from rpent.eval.config import load_eval_config
from rpent.eval.errors import EnvWorkerError
from rpent.eval.outputs import read_episodes
from rpent.eval.runner import run_eval
from rpent.eval.validation import build_settings

ROBOSUITE_HORIZON = 1000
"""robosuite's default horizon: the seed's auto_reset bug raised once cumulative steps passed it."""


def evaluate(tmp_path, config: str, overrides: list[str], **kwargs):
    loaded = load_eval_config(config, overrides)
    settings = build_settings(loaded, cpu_count=2)
    return settings, run_eval(settings, loaded, logs_dir=tmp_path / "logs", show_progress=False, **kwargs)


@pytest.mark.timeout(900)  # two LIBERO workers: minutes on a loaded machine (timed out at 300 s under load)
def test_zero_policy_epochs_past_robosuite_horizon_two_workers(tmp_path):
    """3 epochs x 350 steps = 1050 env steps per env on the same simulator: every epoch starts from a
    fresh reset, so nothing accumulates (with auto_reset the seed's run died past 1000 steps)."""
    with policy_server("--zero", "--n-exec", "50") as endpoint:
        settings, out = evaluate(tmp_path, "libero_object_pi05_eval", [
            f"policy.endpoint={endpoint}", "env.eval.task_ids=[2,3]", "env.eval.total_num_envs=2",
            "env.num_workers=2", "env.eval.rollout_epoch=3", "env.eval.max_episode_steps=350",
            "rollout.model.num_action_chunks=50", "rollout.model.apxinf.action_horizon=50", "env.eval.save_video=true",
        ])
    assert settings.env.rollout_epoch * settings.env.max_episode_steps > ROBOSUITE_HORIZON
    assert out.metrics["eval/num_trajectories"] == 6 == settings.env.expected_trajectories
    assert out.metrics["eval/success_once"] == 0.0 and out.metrics["eval/return"] == 0.0
    assert all(r.episode_len == 350 and r.num_policy_queries == 7 for r in out.results)
    # each env ran its planned (task, reset state) in every epoch, on one simulator built once
    ran = sorted((r.epoch, r.env_index, r.task_id, r.init_state_id) for r in out.results)
    assert ran == sorted((s.epoch, s.env_index, s.task_id, s.init_state_id) for s in out.plan.slots)
    assert ran == [(0, 0, 2, 0), (0, 1, 3, 0), (1, 0, 2, 1), (1, 1, 3, 1), (2, 0, 2, 2), (2, 1, 3, 2)]
    last = {w["worker"]: w["sims_built"] for w in out.timing.per_worker if w["epoch"] == 2}
    assert last == {0: 1, 1: 1}
    # outputs
    run = out.run_dir
    assert run.name.endswith("-libero_object_pi05_eval") and len(read_episodes(run)) == 6
    log = (run / "eval_embodiment.log").read_text()
    assert "Evaluating Rollout Epochs: epoch 3/3" in log and "covers 6 distinct pairs" in log
    assert "task  2 (3 eps): reset states 0-2" in (run / "plan.txt").read_text()
    assert "eval/num_trajectories\t6" in (run / "metrics.log").read_text()
    assert json.loads((run / "metrics.json").read_text())["complete"] is True
    assert len(list((run / "tensorboard").glob("events.out.tfevents.*"))) == 1
    import imageio.v3 as iio

    video = run / out.results[0].video
    assert video.name.endswith("_failure.mp4") and iio.imread(video, plugin="pyav").shape == (8, 256, 256, 3)


def _tiny_pi05_eval(checkpoint, logs, epochs: int, timeout: float) -> subprocess.CompletedProcess:
    """`rpent-eval` in a real process: rpent's tiny random Pi0.5 in-process on CPU, LIBERO-10 task 5,
    2 envs on 2 workers, ``epochs`` rollout epochs of 10 steps, logs under ``logs``."""
    env = {**os.environ, "APXINF_PI05_MODEL_DIR": str(checkpoint), "MUJOCO_GL": "egl"}
    return subprocess.run(
        [sys.executable, "-m", "rpent.cli.eval", "--config", "libero_10_pi05_eval", "--logs-dir", str(logs),
         "--no-progress", "env.eval.task_ids=[5]", "env.eval.total_num_envs=2", "env.num_workers=2",
         f"env.eval.rollout_epoch={epochs}", "env.eval.max_episode_steps=10", "policy.device=cpu"],
        capture_output=True, text=True, cwd=REPO, env=env, timeout=timeout,
    )


@pytest.mark.timeout(900)  # two LIBERO workers: minutes on a loaded machine (timed out at 300 s under load)
def test_tiny_pi05_through_the_cli(tmp_path, tiny_pi05_checkpoint):
    """Plumbing: rpent's tiny random Pi0.5, in-process, through `rpent-eval` in a real process."""
    run = _tiny_pi05_eval(tiny_pi05_checkpoint, tmp_path, epochs=2, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "eval/num_trajectories\t4" in run.stdout and "eval/episode_len\t10" in run.stdout
    (run_dir,) = tmp_path.glob("*-libero_10_pi05_eval")
    log = (run_dir / "eval_embodiment.log").read_text()
    assert "policy loaded: backend=pi05, device=cpu" in log and "'num_flow_steps': 5" in log
    results = read_episodes(run_dir)
    assert sorted((r.epoch, r.init_state_id) for r in results) == [(0, 0), (0, 1), (1, 2), (1, 3)]
    assert all(r.task_id == 5 and r.num_policy_queries == 2 for r in results)
    assert "Using Python at" in run.stderr


class ZeroPolicyKillingAWorker:
    """Zero actions; at the first query of epoch 1 it SIGKILLs env worker 1 (a process this test started)."""

    name = "zero"

    def __init__(self):
        self.killed = False

    def metadata(self):
        return {"action_dim": 7, "n_exec": 5, "num_views": 2}

    def predict(self, observation, episodes):
        if episodes and episodes[0].epoch == 1 and not self.killed:
            (victim,) = [p for p in multiprocessing.active_children() if p.name == "rpent-eval-env-1"]
            os.kill(victim.pid, signal.SIGKILL)
            self.killed = True
        return np.zeros((len(observation["task_descriptions"]), 5, 7), np.float32)

    def close(self):
        pass


@pytest.mark.timeout(900)  # two LIBERO workers: minutes on a loaded machine (timed out at 300 s under load)
def test_a_dead_worker_aborts_the_run_and_keeps_finished_episodes(tmp_path):
    policy = ZeroPolicyKillingAWorker()
    with pytest.raises(EnvWorkerError, match="env worker 1 .* failed") as info:
        evaluate(tmp_path, "libero_object_pi05_eval", [
            "policy.endpoint=http://127.0.0.1:9", "env.eval.task_ids=[2]", "env.eval.total_num_envs=2",
            "env.num_workers=2", "env.eval.rollout_epoch=2", "env.eval.max_episode_steps=10",
        ], policy=policy)
    # the error names the lost episode (task, init state, epoch) of the dead worker
    assert "its unfinished episodes: (task 2, init state 3, epoch 1)" in str(info.value), str(info.value)
    (run_dir,) = (tmp_path / "logs").glob("*-libero_object_pi05_eval")
    kept = read_episodes(run_dir)
    assert {(r.epoch, r.env_index) for r in kept} >= {(0, 0), (0, 1)}  # epoch 0 is on disk
    summary = json.loads((run_dir / "metrics.json").read_text())
    assert summary["complete"] is False and summary["metrics"]["eval/num_trajectories"] == len(kept)
    assert summary["expected_trajectories"] == 4 and summary["status"].startswith(f"INCOMPLETE: {len(kept)} of 4")
    lost = {(e["task_id"], e["init_state_id"], e["epoch"]) for e in summary["lost_episodes"]}
    assert (2, 3, 1) in lost and len(lost) == 4 - len(kept)
    text = (run_dir / "metrics.log").read_text()
    assert text.startswith(f"status\tINCOMPLETE: {len(kept)} of 4 expected trajectories; lost (task, init state, epoch): ")
    assert all("INCOMPLETE" in line for line in text.splitlines() if line.startswith("eval/"))
    log = (run_dir / "eval_embodiment.log").read_text()
    assert "evaluation failed" in log and f"INCOMPLETE: {len(kept)} of 4" in log
    rate_lines = [line for line in log.splitlines() if "eval/success_once = " in line]
    assert rate_lines and all("INCOMPLETE" in line and "/" in line for line in rate_lines), rate_lines


REPLAY_PAIRS = [(2, 0), (3, 0), (2, 1), (3, 1)]  # libero_object: salad dressing, bbq sauce -> basket


@pytest.mark.slow
def test_replayed_successes_score_one_and_zero_actions_score_zero(tmp_path, replay_cache_dir):
    """The harness on real successes: recorded scripted-strategy action sequences replayed for their
    (task, reset state) pairs give success_once = 1.0; the zero-action policy gives 0 on the same
    pairs; both with exact trajectory counts over 2 epochs and 2 workers."""
    replay = replay_file(replay_cache_dir, "libero_object", REPLAY_PAIRS)
    common = ["env.eval.task_ids=[2,3]", "env.eval.total_num_envs=2", "env.num_workers=2",
              "env.eval.rollout_epoch=2", "env.eval.max_episode_steps=260", "rollout.model.num_action_chunks=10",
              "policy.episode_keys=true"]
    outcomes = {}
    for mode, args in (("replay", ["--replay", str(replay), "--n-exec", "10"]), ("zero", ["--zero", "--n-exec", "10"])):
        with policy_server(*args) as endpoint:
            _, outcomes[mode] = evaluate(tmp_path / mode, "libero_object_pi05_eval",
                                         [f"policy.endpoint={endpoint}", *common])
    for mode, expected in (("replay", 1.0), ("zero", 0.0)):
        out = outcomes[mode]
        assert sorted((r.task_id, r.init_state_id) for r in out.results) == sorted(REPLAY_PAIRS)
        assert out.metrics["eval/num_trajectories"] == 4
        assert out.metrics["eval/success_once"] == expected, (mode, [r.to_dict() for r in out.results])
        assert out.metrics["eval/success_at_end"] == expected
        assert [row.success_once for row in out.table] == [expected, expected]
    replayed = outcomes["replay"]
    table = json.loads(replay.read_text())["sequences"]
    for r in replayed.results:  # success came when the recorded sequence reached it
        assert r.steps_to_success <= len(table[f"libero_object_t{r.task_id}_s{r.init_state_id}"]["actions"])
        assert r.reward == pytest.approx(5.0 / r.steps_to_success)


@pytest.mark.parametrize("where", ["file", "under_file", "uncreatable"])
def test_a_logs_dir_that_cannot_be_created_is_one_line_through_the_cli(tmp_path, tiny_pi05_checkpoint, where):
    """`rpent-eval --logs-dir` that is a file, lies under one, or cannot be made: one line naming
    --logs-dir and the fix, exit 2, before any env worker starts; the file is untouched."""
    afile = tmp_path / "afile"
    afile.write_text("keep")
    logs = {"file": afile, "under_file": afile / "sub", "uncreatable": Path("/proc/rpent-no-such-dir/logs")}[where]
    run = _tiny_pi05_eval(tiny_pi05_checkpoint, logs, epochs=1, timeout=300)
    assert run.returncode == 2 and "Traceback" not in run.stderr, run.stderr[-3000:]
    last = run.stderr.strip().splitlines()[-1]
    needle = "cannot create" if where == "uncreatable" else f"{afile} is a file, not a directory"
    assert last.startswith(f"rpent-eval: config error: --logs-dir {logs}") and needle in last, last
    assert afile.read_text() == "keep"
