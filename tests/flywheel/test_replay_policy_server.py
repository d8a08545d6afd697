"""Replay policy server over real RPC (a real server process, real sockets), built from real records."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from contextlib import contextmanager

import numpy as np
import pytest

from rpent.robots.components.replay_policy_server import (
    ReplayTableError,
    load_replay_table,
    replay_table_from_records,
    save_replay_table,
)
from rpent.rpc import RemoteError, RpcClient
from rpent.rpc.protocol import READY_PREFIX
from tests.conftest import close_parent_watched


@contextmanager
def replay_server(*args: str, transport: str = "socket"):
    proc = subprocess.Popen(
        [sys.executable, "-m", "rpent.robots.components.replay_policy_server", *args,
         "--transport", transport, "--port", "0", "--parent-watch"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        line = proc.stdout.readline()
        assert line.startswith(READY_PREFIX), (line, proc.stderr.read() if proc.poll() is not None else "")
        with RpcClient(line[len(READY_PREFIX):].strip(), timeout=30) as client:
            yield client
    finally:
        close_parent_watched(proc, timeout=10)


def observation(states: list[np.ndarray], descriptions: list[str]) -> dict:
    b = len(states)
    img = np.zeros((b, 256, 256, 3), np.uint8)
    return {"main_images": img, "wrist_images": img, "states": np.stack(states).astype(np.float32),
            "task_descriptions": descriptions}


@pytest.fixture()
def records(tmp_path, record_run):
    _, truth = record_run(tmp_path / "runs" / "a", [("scripted", 4), ("vla", "pick up the bowl", [5, 3])])
    return tmp_path / "runs", truth


def test_replays_recorded_actions_per_episode_key_over_rpc(records):
    root, truth = records
    actions = np.stack([t.action for t in truth])  # 12 executed actions, scripted + VLA, in order
    with replay_server("--from-records", str(root)) as c:
        meta = c.call("vla.metadata")
        assert meta["n_exec"] == 5 and meta["action_dim"] == 7 and meta["sequences"] == ["libero_goal_t0_s0"]
        s = truth[0].state
        # batch evaluation: two envs replay the same sequence in parallel with their own cursors
        out = c.call("vla.predict", observation([s, s], ["x", "x"]),
                     {"episode_keys": ["libero_goal_t0_s0#env0", "libero_goal_t0_s0#env1"]})
        assert out.dtype == np.float32 and out.shape == (2, 5, 7)
        np.testing.assert_array_equal(out[0], actions[0:5])
        np.testing.assert_array_equal(out[1], actions[0:5])
        out = c.call("vla.predict", observation([s], ["x"]), {"episode_key": "libero_goal_t0_s0#env0"})
        np.testing.assert_array_equal(out[0], actions[5:10])
        out = c.call("vla.predict", observation([s], ["x"]), {"episode_key": "libero_goal_t0_s0#env0"})
        np.testing.assert_array_equal(out[0, :2], actions[10:12])  # sequence ends: hold pose, keep gripper
        np.testing.assert_array_equal(out[0, 2:, :6], 0)
        np.testing.assert_array_equal(out[0, 2:, 6], actions[11, 6])
        status = c.call("vla.replay_status")
        assert status["libero_goal_t0_s0#env0"] == {"sequence": "libero_goal_t0_s0", "cursor": 12, "length": 12,
                                                    "exhausted": True}
        assert status["libero_goal_t0_s0#env1"]["cursor"] == 5
        assert c.call("vla.replay_reset", "libero_goal_t0_s0#env0") == {"reset": ["libero_goal_t0_s0#env0"]}
        out = c.call("vla.predict", observation([s], ["x"]), {"episode_key": "libero_goal_t0_s0#env0"})
        np.testing.assert_array_equal(out[0], actions[0:5])

        # pi0_pick without options: the default episode; it restarts when the initial state comes back
        out = c.call("vla.predict", observation([s], ["pick up the bowl"]))
        np.testing.assert_array_equal(out[0], actions[0:5])
        out = c.call("vla.predict", observation([truth[5].state], ["pick up the bowl"]))
        np.testing.assert_array_equal(out[0], actions[5:10])
        out = c.call("vla.predict", observation([s], ["pick up the bowl"]))  # env was reset to the init state
        np.testing.assert_array_equal(out[0], actions[0:5])

        with pytest.raises(RemoteError, match="unknown option key"):
            c.call("vla.predict", observation([s], ["x"]), {"noise_seed": 3})
        with pytest.raises(RemoteError, match="no replay sequence 'libero_10_t1_s0'"):
            c.call("vla.predict", observation([s], ["x"]), {"episode_key": "libero_10_t1_s0"})
        with pytest.raises(RemoteError, match="episode_keys"):
            c.call("vla.predict", observation([s, s], ["x", "x"]), {"episode_key": "libero_goal_t0_s0"})
        with pytest.raises(RemoteError, match=r"states must be float32 \[B, 8\]"):
            c.call("vla.predict", {**observation([s], ["x"]), "states": np.zeros((1, 7), np.float32)})


def test_zero_mode_and_replay_file(tmp_path, records, record_run):
    root, truth = records
    with replay_server("--zero", "--n-exec", "3", transport="http") as c:
        out = c.call("vla.predict", observation([truth[0].state] * 3, ["a", "b", "c"]))
        assert out.shape == (3, 3, 7) and not out.any()
        assert c.call("vla.metadata")["policy"] == "zero"

    table = replay_table_from_records(root)
    path = tmp_path / "replay.json"
    save_replay_table(table, path)
    again = load_replay_table(path)
    np.testing.assert_array_equal(again["libero_goal_t0_s0"]["actions"], np.stack([t.action for t in truth]))
    np.testing.assert_array_equal(again["libero_goal_t0_s0"]["states"], np.stack([t.state for t in truth]))
    with replay_server("--replay", str(path), "--n-exec", "4") as c:
        out = c.call("vla.predict", observation([truth[0].state], ["x"]), {"episode_key": "libero_goal_t0_s0"})
        np.testing.assert_array_equal(out[0], again["libero_goal_t0_s0"]["actions"][:4])

    path.write_text(json.dumps({"format": "rpent.replay", "schema_version": 1,
                                "sequences": {"x": {"actions": [[0.0] * 6]}}}))
    with pytest.raises(ReplayTableError, match=r"actions must be \[n>=1, 7\]"):
        load_replay_table(path)
    proc = subprocess.run([sys.executable, "-m", "rpent.robots.components.replay_policy_server", "--replay", str(path)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "actions must be" in proc.stderr
    failed = tmp_path / "failed"
    record_run(failed, [("scripted", 2)], success=False)
    with pytest.raises(ReplayTableError, match="no successful trajectory record"):
        replay_table_from_records(failed)


@pytest.mark.slow
def test_replayed_episode_reproduces_the_recorded_libero_trajectory(tmp_path):
    """Real LIBERO: record a run, replay its actions through the server into a fresh env: same states."""
    os.environ.setdefault("MUJOCO_GL", "egl")
    from rpent.recording import TaskInfo, TrajectoryRecorder
    from rpent.robots.libero.sim import LiberoSim

    rng = np.random.default_rng(0)
    sim = LiberoSim("libero_goal", 0, seed=0, max_episode_steps=200)
    rec = TrajectoryRecorder(tmp_path / "run", TaskInfo("libero", "libero_goal", 0, 0, sim.task_language, "scripted"))
    rec.begin_tool_call("c0", "move_to", {})
    recorded_states = []
    for step in range(20):
        state = sim.robot_obs()["state"]
        recorded_states.append(state)
        a = np.concatenate([rng.uniform(-0.5, 0.5, 6), [-1.0]]).astype(np.float32)
        out = sim.step(a)
        rec.record_action(a, {"state": state}, call_id="c0", source="scripted", reward=out["reward"],
                          terminated=out["terminated"], truncated=out["truncated"], step=step)
    rec.end_tool_call("c0", {})
    rec.close("finished", True)  # marked successful so the table builder takes it
    final_state = sim.robot_obs()["state"]
    sim.reset()
    with replay_server("--from-records", str(tmp_path / "run")) as c:
        replayed_states = []
        for _ in range(4):
            chunk = c.call("vla.predict", observation([sim.robot_obs()["state"]], [sim.task_language]))[0]
            for a in chunk:
                replayed_states.append(sim.robot_obs()["state"])
                sim.step(a)
    replay_final = sim.robot_obs()["state"]
    sim.close()
    # Two fresh LiberoSims of the same (suite, task, seed) start ~2e-4 apart in gripper qpos
    # (measured); the replayed trajectory must stay within 2 mm / 2 mrad of the recorded one.
    np.testing.assert_allclose(np.stack(replayed_states), np.stack(recorded_states), atol=2e-3)
    np.testing.assert_allclose(replay_final, final_state, atol=2e-3)
    assert np.abs(final_state - recorded_states[0]).max() > 0.01  # the arm really moved
