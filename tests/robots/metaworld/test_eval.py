"""``rpent-eval --robot metaworld``: Meta-World env server subprocesses (one per task x seed) and the
scripted expert behind ``vla.predict``, both under the Meta-World interpreter; the LIBERO eval's
log-directory layout, asserted on the written files."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from rpent.rpc import RpcClient, RpcError
from tests.conftest import REPO, start_server_process
from tests.robots.metaworld.conftest import METAWORLD_PYTHON, needs_metaworld, server_env


def _eval(tmp_path, *args, timeout=280):
    return subprocess.run([sys.executable, "-m", "rpent.cli.eval", "--robot", "metaworld", *args,
                           "--logs-dir", str(tmp_path)], capture_output=True, text=True, cwd=REPO, timeout=timeout)


@needs_metaworld
def test_expert_eval_of_two_mt10_tasks_writes_the_eval_outputs(tmp_path):
    out = _eval(tmp_path, "--suite", "mt10", "--tasks", "0-1", "--seeds", "0", "--policy", "expert")
    assert out.returncode == 0, out.stderr
    (run_dir,) = list(tmp_path.iterdir())
    assert run_dir.name.endswith("-metaworld_mt10_expert_eval")
    assert f"log dir: {run_dir}" in out.stdout
    assert "eval/success_once\t1\t2/2 [Wilson 95% 0.3424, 1.0000]" in out.stdout
    eps = [json.loads(line) for line in (run_dir / "episodes.jsonl").read_text().splitlines()]
    assert [(e["task_id"], e["init_state_id"], e["env_index"]) for e in eps] == [(0, 0, 0), (1, 0, 1)]
    assert eps[0]["task_language"] == "reach the goal position with the gripper"
    for e in eps:  # the expert solves reach and push; one policy query per env step (n_exec 1)
        assert e["success_once"] and e["success_at_end"]
        assert 1 <= e["steps_to_success"] == e["episode_len"] == e["num_policy_queries"] < 500
    doc = json.loads((run_dir / "metrics.json").read_text())
    assert doc["complete"] is True and doc["num_trajectories"] == doc["expected_trajectories"] == 2
    assert doc["rates"]["eval/success_once"]["k"] == 2 and doc["rates"]["eval/success_once"]["n"] == 2
    assert [r["task_id"] for r in doc["per_task"]] == [0, 1]
    assert doc["robot"] == "metaworld" and doc["settings"]["policy"] == "expert"
    log = (run_dir / "metrics.log").read_text()
    assert "eval/num_trajectories\t2" in log and "INCOMPLETE" not in log
    assert "task 1\t1\t1.0000 1/1 [Wilson 95% 0.2065, 1.0000]" in log
    assert "reach-v3" in (run_dir / "plan.txt").read_text()
    for i in (0, 1):  # each cell had its own env server, whose readiness line is in its worker log
        assert "RPC server listening on socket://127.0.0.1:" in (run_dir / f"env_worker_{i}.log").read_text()
    assert "rpent.robots.metaworld.expert_server" in (run_dir / "policy_server.log").read_text()
    assert list((run_dir / "tensorboard").iterdir())


@needs_metaworld
def test_unreachable_policy_endpoint_is_an_incomplete_record(tmp_path):
    out = _eval(tmp_path, "--tasks", "0,1", "--policy", "endpoint", "--policy-endpoint", "socket://127.0.0.1:1")
    assert out.returncode == 1
    assert out.stderr.strip().splitlines()[-1].startswith("rpent-eval: evaluation failed: policy endpoint")
    (run_dir,) = list(tmp_path.iterdir())
    doc = json.loads((run_dir / "metrics.json").read_text())
    assert doc["complete"] is False and doc["status"] == "INCOMPLETE: 0 of 2 expected trajectories"
    assert [(e["task_id"], e["init_state_id"]) for e in doc["lost_episodes"]] == [(0, 0), (1, 0)]
    assert (run_dir / "episodes.jsonl").read_text() == ""


def test_flags_of_the_other_robot_are_refused_with_one_line(tmp_path):
    out = _eval(tmp_path, "--config", "libero_10_pi05_eval", timeout=120)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.strip() == ("rpent-eval: error: --config applies to --robot libero only; --robot metaworld takes "
                                  "--suite --tasks --seeds --policy (see --help)")
    out = subprocess.run([sys.executable, "-m", "rpent.cli.eval", "--suite", "mt10", "--logs-dir", str(tmp_path)],
                         capture_output=True, text=True, cwd=REPO, timeout=120)
    assert out.returncode == 2 and out.stderr.strip().startswith("rpent-eval: error: --suite applies to --robot metaworld")
    out = _eval(tmp_path, "--tasks", "10", timeout=120)
    assert out.returncode == 2 and "Meta-World suite mt10 has tasks 0-9" in out.stderr
    assert list(tmp_path.iterdir()) == []  # nothing ran


@needs_metaworld
def test_policy_obs_carries_the_environment_state(mw_server):
    from rpent.robots.metaworld.env_client import MetaWorldEnvClient

    c = MetaWorldEnvClient(mw_server.endpoint)
    try:
        lean = c.policy_obs(images=False)
        assert set(lean) == {"state", "environment_state"}
        full = c.policy_obs()
        assert full["main_image"].shape == (256, 256, 3) and full["environment_state"].shape == (39,)
        assert np.allclose(full["environment_state"], c.robot_obs()["obs"])
        assert np.allclose(full["environment_state"][:4], full["state"])
    finally:
        c.close()


@needs_metaworld
def test_expert_server_answers_the_predict_contract_and_refuses_bad_input():
    srv = start_server_process([METAWORLD_PYTHON, "-m", "rpent.robots.metaworld.expert_server", "--transport",
                                "socket", "--port", "0"], env=server_env(), timeout=120.0)
    c = RpcClient(srv.endpoint, timeout=30.0)
    try:
        meta = c.call("vla.metadata")
        assert (meta["action_dim"], meta["n_exec"], meta["policy"]) == (4, 1, "metaworld_expert")
        obs = np.zeros((2, 39))
        obs[:, 36:39] = [0.1, 0.8, 0.2]  # goal position (m, world)
        obs[:, 0:3] = [0.0, 0.6, 0.2]  # hand position
        act = np.asarray(c.call("vla.predict", {"environment_state": obs, "task": ["reach-v3", "reach-v3"]}))
        assert act.shape == (2, 1, 4) and act.dtype == np.float32 and np.all(np.abs(act) <= 1.0)
        assert act[0, 0, 0] > 0 and act[0, 0, 1] > 0  # reach moves the hand towards the goal (+x, +y)
        with pytest.raises(RpcError, match=r"environment_state must be float\[B,39\]"):
            c.call("vla.predict", {"environment_state": np.zeros((1, 7)), "task": ["reach-v3"]})
        with pytest.raises(RpcError, match="no Meta-World expert for task 'fly-v3'"):
            c.call("vla.predict", {"environment_state": np.zeros((1, 39)), "task": ["fly-v3"]})
    finally:
        c.close()
        srv.stop()
