"""``pi0_pick`` / ``pi0_doubled`` driving a real LIBERO env server through a real ``pi05_vla_server``
subprocess (tiny Pi0.5 checkpoint, CPU). Success is not expected with random weights; the plumbing is:
chunks queried and executed one env step at a time, every action recorded as ``source: vla`` with its
prediction (closed with the rows actually executed), result fields, the env stepping, cancellation
between env steps, and VLA failures (a remote error, a dead service) returned as tool results with a
fallback.
"""

from __future__ import annotations

import json
import sys
import threading

import numpy as np
import pytest

from rpent.models.pi05.tiny import build_tiny_checkpoint
from rpent.recording.recorder import TaskInfo, TrajectoryRecorder
from rpent.robots.libero.env_client import EnvClient
from rpent.robots.libero.toolkit import LiberoToolkit
from rpent.robots.libero.toolkit.vla import VLA_FALLBACK
from rpent.rpc import RpcClient
from rpent.run.record import RunRecord
from video_check import assert_video_in_agentview_orientation

ENV_SERVER = [sys.executable, "-m", "rpent.robots.libero.env_server"]
VLA_SERVER = [sys.executable, "-m", "rpent.robots.components.pi05_vla_server", "--cpu", "--port", "0"]
N_EXEC = 5  # the libero preset returns the first 5 actions of a 10-action chunk


@pytest.fixture(scope="module")
def env_endpoint(start_rpc_server):
    sp = start_rpc_server(ENV_SERVER + ["--suite", "libero_object", "--task", "0", "--seed", "0", "--port", "0"], timeout=120)
    yield sp.endpoint
    sp.stop()


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    root = tmp_path_factory.mktemp("pi0_tools")
    return {"libero": build_tiny_checkpoint(root / "libero", layout="openpi"),
            "yam": build_tiny_checkpoint(root / "yam", layout="openpi", embodiment="yam")}


@pytest.fixture(scope="module")
def vla_endpoint(start_rpc_server, checkpoints):
    sp = start_rpc_server(VLA_SERVER + ["--embodiment", "libero", "--model-path", str(checkpoints["libero"])], timeout=120)
    yield sp.endpoint
    sp.stop()


def make_toolkit(env_endpoint, vla, tmp_path, record_trajectory: bool, video: bool = False):
    env = EnvClient(env_endpoint)
    env.reset()
    record = RunRecord(tmp_path / "run", "object_t0_s0")  # first, as the runner does: it refuses a used folder
    recorder = None
    if record_trajectory:
        recorder = TrajectoryRecorder(tmp_path / "run", TaskInfo("libero", "libero_object", 0, 0, env.call("env.get_task_language", timeout=30.0), "scripted"),
                                      action_capture="full", background=False)
    tk = LiberoToolkit(env, record, vla=vla, recorder=recorder, video=video)
    return tk, env, recorder


def read_jsonl(path):
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_pi0_pick_executes_recorded_chunks(env_endpoint, vla_endpoint, tmp_path):
    vla = RpcClient(vla_endpoint, timeout=60)
    tk, env, rec = make_toolkit(env_endpoint, vla, tmp_path, record_trajectory=True, video=True)
    try:
        steps0 = env.status()["steps"]
        r = tk.execute("pi0_pick", {"prompt": "pick up the alphabet soup", "max_chunks": 2}, call_id="c1")
        assert "error" not in r, r
        assert r["name"] == "pick" and isinstance(r["success"], bool)
        assert set(r) >= {"chunks_used", "peak_lift_m", "min_gripper_opening", "final_gripper_opening", "diagnostics",
                          "terminated", "truncated"}
        assert set(r["diagnostics"]) == {"start_z", "lowest_z", "descent_m"}
        n = r["chunks_used"]
        assert 1 <= n <= 2 and (n == 2 or r["success"])
        assert env.status()["steps"] - steps0 == N_EXEC * n  # every returned action stepped the env once
        assert r["min_gripper_opening"] <= r["final_gripper_opening"] + 1e-9
        rec.close("finished", tk.solved())
        actions = read_jsonl(rec.record_dir / "actions.jsonl")
        preds = read_jsonl(rec.record_dir / "predictions.jsonl")
        assert len(actions) == N_EXEC * n and len(preds) == n
        assert {a["source"] for a in actions} == {"vla"} and {a["call_id"] for a in actions} == {"c1"}
        assert [a["index_in_chunk"] for a in actions] == list(range(N_EXEC)) * n
        for p in preds:
            assert p["tool"] == "pi0_pick" and p["instruction"] == "pick up the alphabet soup"
            assert p["chunk_length"] == N_EXEC and p["n_executed"] == N_EXEC
            mine = [a for a in actions if a["pred_id"] == p["pred_id"]]
            np.testing.assert_array_equal(np.array([a["action"] for a in mine]), np.array(p["actions"]))
        acts = np.array([a["action"] for a in actions])
        assert np.isfinite(acts).all() and acts.std(axis=0).max() > 0  # real, varying VLA output
        assert all(a["obs"]["main"] and a["obs"]["wrist"] for a in actions)
        # the video (VLA-step frames) is in the orientation of agentview.png
        tk.close()
        assert_video_in_agentview_orientation(tmp_path / "run", tk.record)
    finally:
        tk.close()
        env.close()
        vla.close()


def test_pi0_doubled_result_and_env_steps(env_endpoint, vla_endpoint, tmp_path):
    vla = RpcClient(vla_endpoint, timeout=60)
    tk, env, _ = make_toolkit(env_endpoint, vla, tmp_path, record_trajectory=False)
    try:
        steps0 = env.status()["steps"]
        r = tk.execute("pi0_doubled", {"prompt": "turn on the stove", "max_chunks": 2})
        assert "error" not in r, r
        assert r["name"] == "doubled" and r["chunks_used"] == 2
        assert r["success"] == r["task_success"] == r["terminated"] == tk.solved()
        assert env.status()["steps"] - steps0 == 2 * N_EXEC
        assert len(tk.record.steps) == 2  # the tool's motion captured one new step
    finally:
        tk.close()
        env.close()
        vla.close()


def test_cancel_stops_between_env_steps_and_closes_the_prediction(env_endpoint, vla_endpoint, tmp_path):
    vla = RpcClient(vla_endpoint, timeout=60)
    tk, env, rec = make_toolkit(env_endpoint, vla, tmp_path, record_trajectory=True)
    try:
        timer = threading.Timer(1.0, tk.cancel)
        timer.start()
        r = tk.execute("pi0_doubled", {"prompt": "push the plate", "max_chunks": 200}, call_id="c9")
        timer.cancel()
        tk.clear_cancel()
        assert r.get("code") == "tool_cancelled" and r["interrupted"] is True, r
        rec.close("interrupted", tk.solved())
        actions = read_jsonl(rec.record_dir / "actions.jsonl")
        preds = read_jsonl(rec.record_dir / "predictions.jsonl")
        assert 0 < len(actions) < 200 * N_EXEC
        assert sum(p["n_executed"] for p in preds) == len(actions)  # never the unexecuted tail
        assert all(0 <= p["n_executed"] <= N_EXEC for p in preds)
    finally:
        tk.close()
        env.close()
        vla.close()


def test_vla_failures_are_results_with_a_fallback(env_endpoint, start_rpc_server, checkpoints, tmp_path, free_port):
    # a VLA for another robot: the server refuses the 2-view LIBERO observation (a remote ObservationError)
    sp = start_rpc_server(VLA_SERVER + ["--embodiment", "yam", "--model-path", str(checkpoints["yam"])], timeout=120)
    vla = RpcClient(sp.endpoint, timeout=60)
    tk, env, _ = make_toolkit(env_endpoint, vla, tmp_path, record_trajectory=False)
    try:
        steps0 = env.status()["steps"]
        r = tk.execute("pi0_pick", {"prompt": "pick up the ketchup", "max_chunks": 2})
        assert r["error_type"] == "service_error" and r["fallback"] == VLA_FALLBACK
        assert "VLA service failed" in r["error"] and "embodiment 'yam' needs 3 views" in r["error"]
        tk.vla = RpcClient(f"http://127.0.0.1:{free_port}", timeout=5)  # the service is gone
        r = tk.execute("pi0_doubled", {"prompt": "turn on the stove", "max_chunks": 1})
        assert "VLA service failed" in r["error"] and r["fallback"] == VLA_FALLBACK
        assert env.status()["steps"] == steps0  # nothing was executed
        tk.vla.close()
    finally:
        tk.close()
        env.close()
        vla.close()
        sp.stop()
