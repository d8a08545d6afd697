"""How episodes end and what their records say, against a real LIBERO env server.

* 9: with ``--max-episode-steps 5`` a ``move_to`` that runs out the episode returns
  ``truncated: true``; every later stateful tool (and any after ``finish``) is refused with a
  one-line error and adds no record step (it is listed in ``states.json`` ``failed_calls``).
* 4: the init state actually loaded (``init_state_id``, its sha256) is in ``states.json``, the
  transcript and ``task.json``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rpent.robots.libero import suites
from rpent.robots.libero.env_client import EnvClient
from rpent.robots.libero.toolkit import LiberoToolkit
from rpent.run.record import RunRecord
from video_check import assert_video_in_agentview_orientation

SERVER = [sys.executable, "-m", "rpent.robots.libero.env_server"]


@pytest.fixture(scope="module")
def short_env(start_rpc_server):
    sp = start_rpc_server(SERVER + ["--suite", "libero_object", "--task", "0", "--seed", "53", "--port", "0",
                                    "--max-episode-steps", "5"], timeout=120)
    yield sp.endpoint
    sp.stop()


def _expected_init_state() -> tuple[int, str]:
    info = suites.task_info("libero_object", 0, suites.default_libero_type())
    ids = suites.init_state_ids(info, 53)
    return ids[0], suites.init_state_sha256(suites.load_init_states(info)[ids[0]])


def test_stateful_tools_after_the_episode_ended_are_refused_without_a_step(short_env, tmp_path):
    env = EnvClient(short_env)
    tk = LiberoToolkit(env, RunRecord(tmp_path / "run", "object_t0_s53"), video=False)
    try:
        first = tk.execute("move_to", {"xyz": [0.2, 0.2, 1.2], "max_steps": 40})
        assert first["truncated"] is True and "error" not in first, first
        n_steps = len(tk.record.steps)
        assert n_steps == 2
        for name, args in (("move_to", {"xyz": [0.0, 0.0, 1.1]}), ("set_gripper", {"gripper": 1.0}),
                           ("release", {})):
            r = tk.execute(name, args)
            assert r == {"error": "episode is over (truncated at step 5); call finish", "code": "episode_over",
                         "agent_elapsed_s": r["agent_elapsed_s"]}, r
        # read-only tools still answer; finish is accepted
        assert "error" not in tk.execute("view_env_state", {})
        fin = tk.execute("finish", {"status": "failure", "summary": "out of steps"})
        assert fin["_finish"] is True
        after = tk.execute("move_to", {"xyz": [0.0, 0.0, 1.1]}, call_id="late_call")
        assert after["code"] == "episode_over" and "finish was called" in after["error"]
        assert "\n" not in after["error"]
        assert len(tk.record.steps) == n_steps
        states = json.loads((tmp_path / "run" / "states.json").read_text())
        assert len(states["steps"]) == n_steps
        failed = states["failed_calls"]
        assert [f["tool"] for f in failed] == ["move_to", "set_gripper", "release", "move_to"]
        assert all(f["code"] == "episode_over" and f["after_step"] == n_steps - 1 for f in failed)
        assert failed[-1]["call_id"] == "late_call"
        # item 4: the init state actually loaded is in states.json
        sid, sha = _expected_init_state()
        assert sid == 3
        assert states["episode"]["init_state_id"] == sid and states["episode"]["seed"] == 53
        assert states["episode"]["init_state_sha256"] == sha
    finally:
        tk.close()
        env.close()


def test_episode_video_is_in_the_orientation_of_agentview_png(short_env, tmp_path):
    """Scripted steps: episode.mp4 is for people, like agentview.png."""
    env = EnvClient(short_env)
    tk = LiberoToolkit(env, RunRecord(tmp_path / "run", "object_t0_s53"), video=True)
    try:
        r = tk.execute("move_to", {"xyz": [0.2, 0.2, 1.2], "max_steps": 40})
        assert r["truncated"] is True
    finally:
        tk.close()
        env.close()
    assert_video_in_agentview_orientation(tmp_path / "run", tk.record)


def test_init_state_in_transcript_states_and_task_json(tmp_path):
    out = tmp_path / "run"
    p = subprocess.run([sys.executable, "-m", "rpent.cli.main", "--suite", "libero_object", "--task", "0",
                        "--seed", "53", "--max-episode-steps", "5", "--planner", "scripted", "--no-video",
                        "--record-trajectory", "--output-dir", str(out)],
                       capture_output=True, text=True, timeout=280, env=dict(os.environ, MUJOCO_GL="egl"))
    assert p.returncode in (0, 1), p.stdout[-2000:] + p.stderr[-2000:]
    sid, sha = _expected_init_state()
    tr = json.loads((out / "transcript_object_t0_s53.json").read_text())
    assert (tr["seed"], tr["init_state_id"], tr["init_state_sha256"]) == (53, sid, sha)
    assert tr["init_state_global_id"] == sid  # task 0: no offset
    states = json.loads((out / "states.json").read_text())
    assert (states["episode"]["init_state_id"], states["episode"]["init_state_sha256"]) == (sid, sha)
    task_json = next(Path(out / "trajectories").glob("*/task.json"))
    task = json.loads(task_json.read_text())
    assert (task["seed"], task["init_state_id"], task["init_state_sha256"]) == (53, sid, sha)
    # the truncated episode left no step after its end
    ends = [i for i, s in enumerate(states["steps"]) if s["truncated"]]
    assert ends and ends[0] == len(states["steps"]) - 1


def test_undelivered_result_is_marked_in_states_json(short_env, tmp_path):
    """The LIBERO record side of an MCP disconnect: the bridge's note reaches states.json."""
    env = EnvClient(short_env)
    tk = LiberoToolkit(env, RunRecord(tmp_path / "run", "object_t0_s53"), video=False)
    try:
        r = tk.execute("set_gripper", {"gripper": 1.0}, call_id="lost_1")
        assert "error" not in r, r
        tk.note_undelivered("lost_1", "the MCP client disconnected before the result was sent")
    finally:
        tk.close()
        env.close()
    step = json.loads((tmp_path / "run" / "states.json").read_text())["steps"][-1]
    assert step["call_id"] == "lost_1" and step["result_delivered"] is False
    assert step["undelivered_reason"] == "the MCP client disconnected before the result was sent"
