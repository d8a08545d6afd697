"""Policy batching across env workers (``rollout.pipeline_stage_num``) on the real LIBERO simulator.

A deterministic per-row policy (the real replay policy server over a real socket, one distinct action
sequence per (task, reset state)) must give the same episodes whether every env's observation goes into
one policy call (S = 1), or each worker gets its own call (S = num_workers, the unbatched driver). The
episodes are compared field by field and frame by frame (the per-episode videos show the camera after
every action chunk, so a row sent to the wrong env would change the pictures).
"""

from __future__ import annotations

import imageio.v3 as iio
import numpy as np
import pytest

from conftest import policy_server
from rpent.eval.config import load_eval_config
from rpent.eval.runner import run_eval
from rpent.eval.validation import build_settings
from rpent.robots.components.replay_policy_server import save_replay_table

SUITE = "libero_object"
PAIRS = [(2, 0), (3, 0), (2, 1), (3, 1)]  # the plan of 4 envs x 1 epoch over tasks [2, 3]
STEPS = 20  # 4 policy queries of 5 actions per episode


def _replay_table(path):
    """Distinct, seeded action sequences per (task, reset state): eef deltas in [-0.6, 0.6], gripper +-1."""
    table = {}
    for task, state in PAIRS:
        rng = np.random.default_rng([task, state])
        actions = np.zeros((STEPS, 7), np.float32)
        actions[:, :6] = rng.uniform(-0.6, 0.6, (STEPS, 6))
        actions[:, 6] = np.where(rng.random(STEPS) < 0.5, -1.0, 1.0)
        table[f"{SUITE}_t{task}_s{state}"] = {"suite": SUITE, "task": task, "seed": state, "task_language": None,
                                              "actions": actions, "states": None}
    save_replay_table(table, path)
    return path


def _evaluate(tmp_path, endpoint: str, stages: int):
    loaded = load_eval_config(f"{SUITE}_pi05_eval", [
        f"policy.endpoint={endpoint}", "policy.episode_keys=true", "env.eval.task_ids=[2,3]",
        "env.eval.total_num_envs=4", "env.num_workers=2", "env.eval.rollout_epoch=1",
        f"env.eval.max_episode_steps={STEPS}", "env.eval.save_video=true", f"rollout.pipeline_stage_num={stages}",
        "runner.logger.logger_backends=[]",
    ])
    settings = build_settings(loaded, cpu_count=2)
    return run_eval(settings, loaded, logs_dir=tmp_path / f"s{stages}", show_progress=False)


@pytest.mark.slow
@pytest.mark.timeout(900)  # two runs of two LIBERO workers each: minutes on a loaded machine
def test_one_call_for_all_envs_gives_the_same_episodes_as_one_call_per_worker(tmp_path):
    replay = _replay_table(tmp_path / "replay.json")
    runs = {}
    for stages in (1, 2):
        with policy_server("--replay", str(replay), "--n-exec", "5") as endpoint:
            runs[stages] = _evaluate(tmp_path, endpoint, stages)
    batched, per_worker = runs[1], runs[2]
    # S = 1: one call serves all 4 envs (2 workers x 2 envs); S = 2: one call per worker (its 2 envs)
    assert (batched.timing.policy_queries, batched.timing.mean_envs_per_call) == (4, 4.0)
    assert (per_worker.timing.policy_queries, per_worker.timing.mean_envs_per_call) == (8, 2.0)
    assert batched.timing.to_dict()["mean_envs_per_call"] == 4.0

    def episodes(out):
        return sorted(({k: v for k, v in r.to_dict().items() if k != "wall_s"} for r in out.results),
                      key=lambda d: d["env_index"])

    assert [(e["task_id"], e["init_state_id"]) for e in episodes(batched)] == PAIRS
    assert episodes(batched) == episodes(per_worker)
    assert all(e["episode_len"] == STEPS and e["num_policy_queries"] == STEPS // 5 for e in episodes(batched))
    frames = {}
    for stages, out in runs.items():
        for r in out.results:
            frames[stages, r.env_index] = iio.imread(out.run_dir / r.video, plugin="pyav")
    for g in range(4):
        assert frames[1, g].shape == (STEPS // 5 + 1, 256, 256, 3)
        assert np.array_equal(frames[1, g], frames[2, g]), f"env {g}: the batched run saw other pictures"
    # the arm moved: the first and last frames differ (else the comparison above proves nothing)
    assert all(np.abs(frames[1, g][0].astype(int) - frames[1, g][-1].astype(int)).mean() > 1.0 for g in range(4))
    # the envs ran different sequences: their last frames differ pairwise for the same task
    assert not np.array_equal(frames[1, 0][-1], frames[1, 2][-1])
    log = (batched.run_dir / "eval_embodiment.log").read_text()
    assert "policy calls: 4, 4.00 environments per call" in log
