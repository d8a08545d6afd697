"""``rpent-eval`` on a real local two-node Ray cluster: Ray env workers + VLA replicas vs local workers.

Real components: the LIBERO simulator inside Ray actors, the replay policy server as a replica
actor's child process on the "GPU" node, real sockets, and the same evaluation locally (spawned env
workers + the same server started as a local process) for comparison.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from rpent.cluster.replicas import ReplicaServer
from rpent.eval.config import load_eval_config
from rpent.eval.errors import EvalConfigError
from rpent.eval.outputs import read_episodes
from rpent.eval.ray_workers import prepare_ray_eval, run_eval_on_ray
from rpent.eval.runner import run_eval
from rpent.eval.validation import build_settings

ray = pytest.importorskip("ray")

COMMON = ["env.eval.task_ids=[2,3]", "env.eval.total_num_envs=2", "env.num_workers=2", "env.eval.rollout_epoch=2",
          "env.eval.max_episode_steps=20", "rollout.model.num_action_chunks=5", "env.eval.save_video=true",
          "runner.logger.logger_backends=[]"]
VLA = ["+ray.replicas.vla.server=replay", "+ray.replicas.vla.args=[--zero,--n-exec,5]", "+ray.replicas.vla.num_cpus=0",
       "+ray.replicas.vla.resources={gpu_node: 1}", "+ray.replicas.vla.max_restarts=1",
       "+ray.replicas.vla.ready_timeout_s=120"]
RAY_SECTION = ["+ray.env_worker.num_cpus=1", *VLA, "+ray.replicas.vla.count=1"]
COMPARED = ("epoch", "env_index", "task_id", "init_state_id", "success_once", "success_at_end", "episode_len",
            "num_policy_queries", "episode_return", "video")


def _rows(results):
    return sorted(tuple(getattr(r, k) for k in COMPARED) for r in results)


@pytest.mark.slow
def test_ray_env_workers_and_a_vla_replica_give_the_local_metrics(ray_cluster, tmp_path):
    """2 env worker actors (one per node: each node has 1 CPU) + 1 replay replica on the GPU node give
    the same per-episode results and metrics as 2 local env worker processes + a local server."""
    loaded = load_eval_config("libero_object_pi05_eval", [*COMMON, *RAY_SECTION])
    settings, ray_settings = prepare_ray_eval(loaded, ray_cluster.address)
    assert settings.env.num_workers == 2 and ray_settings.replicas["vla"].count == 1
    remote = run_eval_on_ray(settings, loaded, ray_settings, logs_dir=tmp_path / "ray", show_progress=False)

    server = ReplicaServer([sys.executable, "-m", "rpent.robots.components.replay_policy_server", "--zero",
                            "--n-exec", "5"], "socket", "127.0.0.1", {})
    endpoint = server.start(60.0)
    try:
        local_loaded = load_eval_config("libero_object_pi05_eval", [*COMMON, f"policy.endpoint={endpoint}"])
        local = run_eval(build_settings(local_loaded, cpu_count=2), local_loaded, logs_dir=tmp_path / "local",
                         show_progress=False)
    finally:
        server.stop()

    assert remote.metrics == local.metrics
    assert remote.metrics["eval/num_trajectories"] == 4
    assert _rows(remote.results) == _rows(local.results)
    # the record on disk: episodes, metrics, videos gathered back under the driver's run dir
    run = remote.run_dir
    assert _rows(read_episodes(run)) == _rows(local.results)
    summary = json.loads((run / "metrics.json").read_text())
    assert summary["complete"] is True and summary["metrics"] == json.loads((local.run_dir / "metrics.json").read_text())["metrics"]
    for r in remote.results:
        assert (run / r.video).stat().st_size > 0
    log = (run / "eval_embodiment.log").read_text()
    nodes = {line.split("on Ray node ")[1].split(" ")[0] for line in log.splitlines() if "ready on Ray node" in line}
    assert len(nodes) == 2, log  # one env worker on each node
    gpu_node_id = ray_cluster.gpu_node.node_id
    assert f"[{gpu_node_id[:8]}]" in " ".join(nodes)
    assert "vla replica 0 at socket://127.0.0.1:" in log
    assert "policy loaded: backend=endpoint" in log


def test_bad_placement_is_refused_before_anything_starts(ray_cluster, tmp_path):
    cases = [
        ([*COMMON[:2], "env.eval.total_num_envs=3", "env.num_workers=2"],
         "total_num_envs (3) must be divisible by the number of environment processes (env.num_workers=2)"),
        ([*COMMON, "policy.endpoint=socket://127.0.0.1:9", "+ray.env_worker.resources={tpu_node: 1}"],
         "env workers (env.num_workers): no node offers {CPU: 1, tpu_node: 1}"),
        ([*COMMON, "policy.endpoint=socket://127.0.0.1:9", "env.eval.total_num_envs=4", "env.num_workers=4"],
         "env workers (env.num_workers): 4 requested but the nodes hold at most 2"),
        ([*COMMON, *VLA, "+ray.replicas.vla.count=2"],
         "ray.replicas.vla.count: 2 requested but the cluster has 1 GPUs (1 per unit): at most 1 fit"),
    ]
    for overrides, message in cases:
        loaded = load_eval_config("libero_object_pi05_eval", overrides)
        with pytest.raises(EvalConfigError) as info:
            prepare_ray_eval(loaded, ray_cluster.address)
        assert message in str(info.value), (overrides, str(info.value))
    assert not list(tmp_path.iterdir())  # nothing started, nothing written


def test_cli_refuses_a_replica_count_above_the_gpus(ray_cluster, env_for_cli, tmp_path):
    """Through `rpent-eval --ray-address` in a real process joining the cluster: exit 2, one clear line."""
    run = subprocess.run(
        [sys.executable, "-m", "rpent.cli.eval", "--config", "libero_object_pi05_eval", "--logs-dir", str(tmp_path),
         "--no-progress", "--ray-address", ray_cluster.address, *COMMON, "+ray.replicas.vla.server=replay",
         "+ray.replicas.vla.count=3"],
        capture_output=True, text=True, env=env_for_cli, timeout=240,
    )
    assert run.returncode == 2, run.stderr[-2000:]
    assert "rpent-eval: config error: ray.replicas.vla.count: 3 requested but the cluster has 1 GPUs" in run.stderr
    assert not list(tmp_path.iterdir())
