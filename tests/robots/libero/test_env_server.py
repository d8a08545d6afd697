"""The LIBERO env server as a real subprocess: meta check, stepping, step after done, bad task."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from rpent.robots.libero.env_client import EnvClient, EnvMetaMismatch
from rpent.rpc import RemoteError

SERVER = [sys.executable, "-m", "rpent.robots.libero.env_server"]


@pytest.fixture(scope="module")
def short_env(start_rpc_server):
    """libero_object task 1, seed 3, truncates after 3 env steps (socket transport)."""
    sp = start_rpc_server(SERVER + ["--suite", "libero_object", "--task", "1", "--seed", "3",
                                    "--max-episode-steps", "3", "--transport", "socket", "--port", "0"], timeout=120)
    yield sp
    sp.stop()


def test_meta_and_mismatch(short_env):
    want = {"suite": "libero_object", "task": 1, "seed": 3, "max_episode_steps": 3}
    c = EnvClient(short_env.endpoint, expected=want)
    assert c.meta["init_state_id"] == 3  # seed mod 50 init states
    assert "pick up" in c.meta["task_language"]
    with pytest.raises(EnvMetaMismatch, match=r"stop the stale env_server and start a new one"):
        EnvClient(short_env.endpoint, expected={**want, "seed": 0})
    c.close()


def test_step_until_truncated_then_error(short_env):
    c = EnvClient(short_env.endpoint)
    c.reset()
    t0 = c.call("env.step_timing")
    r = None
    for _ in range(3):
        r = c.step(np.zeros(7))
    assert r["truncated"] and not r["terminated"] and r["steps"] == 3
    t1 = c.call("env.step_timing")  # the seconds spent inside LiberoSim.step, for env_step_bench's RPC column
    assert t1["steps"] - t0["steps"] == 3 and t1["sim_step_s"] > t0["sim_step_s"]
    assert c.status()["done"]
    with pytest.raises(RemoteError, match="step called after episode done"):
        c.step(np.zeros(7))
    assert c.call("env.step_timing")["steps"] == t1["steps"]  # a refused step is not counted
    # the server survives the error and a reset starts a new episode
    obs = c.reset()
    assert np.asarray(obs["state"]).shape == (8,)
    r = c.step(np.zeros(7), observe="main")
    assert r["frame"].shape == (256, 256, 3) and r["frame"].dtype == np.uint8
    assert c.call("env.step_timing")["steps"] == t1["steps"] + 1
    with pytest.raises(RemoteError, match="observe must be"):
        c.step(np.zeros(7), observe="bogus")
    with pytest.raises(RemoteError, match="shape"):
        c.step(np.zeros(3))
    c.close()


def test_capture_and_policy_obs(short_env):
    c = EnvClient(short_env.endpoint)
    c.reset()
    cap = c.capture()
    ag = cap["cameras"]["agentview"]
    assert ag["rgb"].shape == (256, 256, 3) and ag["depth"].dtype == np.float32
    assert ag["segmentation"].max() > 0 and "robot" in ag["segmentation_ids"].values()
    po = c.policy_obs()
    # VLA orientation: openpi's [::-1, ::-1] of robosuite's OpenGL frame = the natural image mirrored left-right
    assert np.array_equal(po["main_image"], ag["rgb"][:, ::-1])
    assert po["state"].dtype == np.float32 and po["state"].shape == (8,)
    c.close()


def test_unknown_suite_lists_available():
    out = subprocess.run(SERVER + ["--suite", "libero_nope", "--task", "0"], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 2
    assert "libero_object" in out.stderr and "libero_nope" in out.stderr


def test_task_out_of_range():
    out = subprocess.run(SERVER + ["--suite", "libero_object", "--task", "99"], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 2 and "99" in out.stderr
