"""The Meta-World env server under its own interpreter: readiness line, meta check, steps, the
expert, rendering and MuJoCo segmentation (real simulator, real socket RPC)."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest

from tests.conftest import REPO
from tests.robots.metaworld.conftest import METAWORLD_PYTHON, needs_metaworld, server_env

pytestmark = needs_metaworld


def test_meta_check_step_expert_render_segment(mw_server):
    from rpent.robots.metaworld.env_client import EnvMetaMismatch, MetaWorldEnvClient

    assert mw_server.endpoint.startswith("socket://127.0.0.1:")  # binds loopback by default
    expected = {"robot": "metaworld", "suite": "mt10", "task": 0, "seed": 3, "max_episode_steps": 120}
    with pytest.raises(EnvMetaMismatch, match="serves .*seed=3.* but this run needs .*seed=4"):
        MetaWorldEnvClient(mw_server.endpoint, expected={**expected, "seed": 4})
    env = MetaWorldEnvClient(mw_server.endpoint, expected=expected)
    try:
        meta = env.meta
        assert meta["env_name"] == "reach-v3" and meta["task_variant"] == 3 and meta["mujoco"].startswith("3.3")
        assert meta["metaworld"] == "3.1.1" and len(meta["rand_vec_sha256"]) == 64
        obs = env.reset()
        assert obs["state"].dtype == np.float32 and obs["state"].shape == (4,) and obs["obs"].shape == (39,)
        # a +x action moves the hand along world +x (at most 1 cm per step)
        x0 = float(obs["hand_pos"][0])
        r = env.step([1.0, 0.0, 0.0, -1.0], observe="main", expert=True)
        assert 0.0 < r["obs"]["hand_pos"][0] - x0 <= 0.0105
        assert r["frame"].shape == (224, 224, 3) and r["frame"].dtype == np.uint8
        assert r["expert_action"].shape == (4,) and r["steps"] == 1 and r["terminated"] is False
        with pytest.raises(Exception, match="4 finite numbers"):
            env.step([0.0, 0.0, 0.0])
        # the expert solves reach within the step limit; the success flag is the env's own
        env.reset()
        nxt, solved = env.expert_action(), False
        for _ in range(120):
            r = env.step(nxt, expert=True)
            nxt = r["expert_action"]
            if r["success"]:
                solved = True
                break
        assert solved and env.status()["success"] is True
        goal = env.object_poses()["goal"]["pos"]
        assert np.linalg.norm(r["obs"]["hand_pos"] - goal) < 0.05  # reach-v3 succeeds within 5 cm of the goal
        # rendering: natural orientation, segmentation from MuJoCo, world centroid near the sim's hand
        img = env.render_camera("corner", 96, 128, depth=True, segmentation=True)
        assert img["rgb"].shape == (96, 128, 3) and img["depth"].shape == (96, 128)
        assert "hand" in img["segmentation_ids"].values()
        seg = env.segment("rightpad", "corner", 128)
        assert seg["pixels"] > 0 and seg["bodies"] == ["rightpad"]
        assert np.linalg.norm(np.asarray(seg["world_centroid"]) - r["obs"]["hand_pos"]) < 0.08
        # the corner image's top rows are the far wall/sky, the table is below: rows 0-10 are not the robot
        top_ids = set(np.unique(img["segmentation"][:10]).tolist())
        assert not any(img["segmentation_ids"].get(str(i), "").startswith("right_l") for i in top_ids if i >= 0)
        # truncation after max_episode_steps
        env.reset()
        for _ in range(120):
            r = env.step([0, 0, 0, -1])
        assert r["truncated"] is True
        with pytest.raises(Exception, match="episode is over"):
            env.step([0, 0, 0, -1])
    finally:
        env.close()


def test_task_lists_match_metaworld():
    """tasks.MT10 / MT50 (agent side, pure data) are metaworld 3.1.1's own lists, in its order."""
    code = ("import rpent.robots.metaworld.tasks as t, metaworld.env_dict as d\n"
            "assert list(t.MT10) == list(d.MT10_V3) and list(t.MT50) == list(d.MT50_V3)\n"
            "from metaworld.policies import ENV_POLICY_MAP\n"
            "assert set(t.MT50) <= set(ENV_POLICY_MAP)\n"
            "print('ok')\n")
    out = subprocess.run([METAWORLD_PYTHON, "-c", code], capture_output=True, text=True, cwd=REPO,
                         env={**server_env(), "PATH": "/usr/bin:/bin"}, timeout=240)
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stderr[-2000:]


@pytest.mark.slow
def test_variant_matches_metaworld_mt1():
    """The server's cheap variant replay equals metaworld.MT1(name, seed=0).train_tasks[k] (rand_vec and first obs)."""
    code = (
        "import pickle, numpy as np, metaworld\n"
        "from rpent.robots.metaworld.sim import _variant_env\n"
        "b = metaworld.MT1('reach-v3', seed=0)\n"
        "ref = b.train_classes['reach-v3'](); ref.set_task(b.train_tasks[5]); o_ref, _ = ref.reset()\n"
        "env = _variant_env('reach-v3', 5); o, _ = env.reset()\n"
        "assert np.array_equal(env._last_rand_vec, pickle.loads(b.train_tasks[5].data)['rand_vec'])\n"
        "assert np.allclose(o, o_ref), (o - o_ref)\n"
        "print('ok')\n")
    out = subprocess.run([METAWORLD_PYTHON, "-c", code], capture_output=True, text=True, cwd=REPO,
                         env={**server_env(), "PATH": "/usr/bin:/bin"}, timeout=240)
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stderr[-2000:]


def test_server_refuses_unknown_task_with_one_line():
    out = subprocess.run([METAWORLD_PYTHON, "-m", "rpent.robots.metaworld.env_server", "--suite", "mt10",
                          "--task", "assembly", "--port", "0"], capture_output=True, text=True, cwd=REPO,
                         env={**server_env(), "PATH": "/usr/bin:/bin"}, timeout=120)
    assert out.returncode == 2 and "no Meta-World task 'assembly' in mt10" in out.stderr


def test_toolkit_motion_perception_and_episode_end(mw_server, tmp_path):
    """The planner's tools against the real server: move_to reaches a world-frame target (m), the
    gripper closes, segment finds the hand, errors are results, the record holds every step."""
    from rpent.robots.metaworld.env_client import MetaWorldEnvClient
    from rpent.robots.metaworld.toolkit import MetaWorldToolkit
    from rpent.run.record import RunRecord

    env = MetaWorldEnvClient(mw_server.endpoint)
    record = RunRecord(tmp_path / "run", "mt10_t0_s3")
    tk = MetaWorldToolkit(env, record, video=False)
    try:
        start = tk.current_state()["hand_pos"]
        target = [float(start[0]) + 0.05, float(start[1]) + 0.03, float(start[2]) - 0.04]
        r = tk.execute("move_to", {"x": target[0], "y": target[1], "z": target[2], "max_steps": 60})
        assert "error" not in r, r
        assert r["error_m"] < 0.01 and np.allclose(r["hand_pos"], target, atol=0.01)
        assert r["state_after"]["step"] == 1 and len(r["_images"]) == 2
        g = tk.execute("set_gripper", {"closed": True, "steps": 10})
        assert g["gripper_opening"] < tk.record.steps[0]["state"]["gripper_opening"]
        seg = tk.execute("segment", {"name": "hand"})
        assert seg["source"] == "sim_oracle" and seg["pixels"] > 0 and "hand" in seg["bodies"]
        assert (record.dir / "segment_00.json").exists() or any(record.dir.glob("segment_00.json/*"))
        cam = tk.execute("render_camera", {"camera": "topview", "size": 128})
        assert cam["_images"][0]["png"][:4] == b"\x89PNG"
        bad = tk.execute("move_to", {"x": "left"})
        assert bad["error"].startswith("bad arguments for move_to")
        done = tk.execute("finish", {"status": "stuck", "summary": "test"})
        assert done["_finish"] is True and done["environment_success"] is False
        refused = tk.execute("move_delta", {"dz": 0.05})
        assert refused["code"] == "episode_over"
        states = record.steps
        assert len(states) == 3 and [s.get("command", {}).get("action") for s in states[1:]] == ["move_to", "set_gripper"]
    finally:
        tk.close()
        env.close()
