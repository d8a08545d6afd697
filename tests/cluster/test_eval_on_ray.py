"""``rpent-eval`` on a real local two-node Ray cluster: Ray env workers + VLA replicas vs local workers.

Real components: the LIBERO simulator inside Ray actors, the replay policy server as a replica
actor's child process on the "GPU" node, real sockets, and the same evaluation locally (spawned env
workers + the same server started as a local process) for comparison.
"""

from __future__ import annotations

import functools
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

ray = pytest.importorskip("ray", reason="Ray is an extra: run scripts/install.sh (pip extra .[ray])")

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


def test_env_worker_actors_run_at_the_drivers_niceness(ray_cluster):
    """Ray starts its workers at niceness +15 (the test cluster keeps Ray's default); an env worker actor
    sets itself to the driver's niceness, so the simulator is not deprioritised against the node's other
    work (reported in its ready message and the run log)."""
    import os

    from rpent.eval.ray_workers import env_worker_actor_class
    from rpent.rpc.codec import loads
    from rpent.eval.worker import WorkerSpec

    spec = WorkerSpec(worker=0, suite="libero_object", libero_type="standard", task_languages=("t",),
                      max_episode_steps=1, num_action_chunks=1, ignore_terminations=False, reward_coef=1.0, seed=0,
                      egl_device=None, video_dir=None, video_fps=10.0, log_dir="/tmp")
    cls = env_worker_actor_class()
    driver_nice = os.getpriority(os.PRIO_PROCESS, 0)
    actors = [cls.options(num_cpus=1).remote(spec, False, driver_nice), cls.options(num_cpus=1).remote(spec, False)]
    try:
        with_nice, without = (loads(bytearray(ray.get(a.ready.remote(), timeout=240))) for a in actors)
    finally:
        for a in actors:
            ray.kill(a, no_restart=True)
    assert with_nice["nice"] == driver_nice
    assert without["nice"] > driver_nice  # Ray's own worker niceness: what the fix undoes (the test can fail)


def _expected_worker(plan, epoch: int, env_indices) -> int:
    (w,) = {s.worker for s in plan.epoch_slots(epoch) if s.env_index in set(int(g) for g in env_indices)}
    return w


def _eval_losing_the_gpu_node(ray_cluster, tmp_path, overrides: list[str], compare_local: bool):
    """Run an eval with 2 Ray env workers (one per node) whose GPU node is killed (SIGKILL, no drain) while
    its worker is mid-episode in epoch 0 (at that worker's 2nd policy query of the epoch: it waits for
    this chunk, so the kill never races the episode's end); a new node joins at once. Returns
    ``(remote outcome, local outcome or None, index of the killed worker, the lost node id)``."""
    from rpent.eval.ray_workers import RayRolloutDriver

    server = ReplicaServer([sys.executable, "-m", "rpent.robots.components.replay_policy_server", "--zero",
                            "--n-exec", "5"], "socket", "127.0.0.1", {})
    endpoint = server.start(60.0)
    lost_node = ray_cluster.gpu_node.node_id
    killed: list[int] = []

    class KillsTheGpuNode(RayRolloutDriver):
        def _predict(self, epoch, msg):
            w = _expected_worker(self.plan, epoch, msg["env_indices"])
            if not killed and epoch == 0 and lost_node[:8] in self._nodes[w] and self._queries.get(
                    (epoch, int(msg["env_indices"][0])), 0) == 1:
                killed.append(w)
                ray_cluster.cluster.remove_node(ray_cluster.gpu_node, allow_graceful=False)
                ray_cluster.gpu_node = ray_cluster.add_gpu_node()  # the new node the worker restarts on
            return super()._predict(epoch, msg)

    local = None
    try:
        common = [*overrides, f"policy.endpoint={endpoint}"]
        loaded = load_eval_config("libero_object_pi05_eval", [*common, "+ray.env_worker.num_cpus=1",
                                                              "+ray.preflight_wait_s=60"])
        settings, ray_settings = prepare_ray_eval(loaded, ray_cluster.address)
        remote = run_eval(settings, loaded, logs_dir=tmp_path / "ray", show_progress=False,
                          driver_factory=functools.partial(KillsTheGpuNode, ray_settings=ray_settings))
        if compare_local:
            local_loaded = load_eval_config("libero_object_pi05_eval", common)
            local = run_eval(build_settings(local_loaded, cpu_count=2), local_loaded, logs_dir=tmp_path / "local",
                             show_progress=False)
    finally:
        server.stop()
    assert len(killed) == 1, "the GPU node's worker was never found mid-episode"
    return remote, local, killed[0], lost_node


def _assert_restarted_once(remote, killed: int, lost_node: str, epochs: int) -> None:
    """Every planned episode once (in memory and on disk), the restart in metrics.json and the log."""
    planned = {(e, g) for e in range(epochs) for g in range(2)}
    assert sorted((r.epoch, r.env_index) for r in remote.results) == sorted(planned)
    assert sorted((r.epoch, r.env_index) for r in read_episodes(remote.run_dir)) == sorted(planned)
    summary = json.loads((remote.run_dir / "metrics.json").read_text())
    assert summary["complete"] is True and remote.metrics["eval/num_trajectories"] == len(planned)
    (restart,) = summary["timing"]["worker_restarts"]
    assert restart["worker"] == killed and restart["epoch"] == 0 and restart["restart"] == 1
    assert lost_node[:8] in restart["lost_on"] and "was lost" in restart["reason"]
    assert len(restart["rerun"]) == 1  # its one env's episode of epoch 0 ran again; nothing else did
    log = (remote.run_dir / "eval_embodiment.log").read_text()
    assert f"env worker {killed} (Ray actor on node" in log and "restarting it elsewhere (restart 1/2)" in log
    ready = [line for line in log.splitlines() if f"env worker {killed} ready on Ray node" in line]
    assert len(ready) == 2 and lost_node[:8] not in ready[1], ready  # the new actor is on the new node


@pytest.mark.timeout(600)
def test_a_node_lost_mid_eval_its_episode_reruns_elsewhere_and_counts_once(ray_cluster, tmp_path):
    """One epoch: the lost worker is started again on the new node and re-runs its unfinished episode from
    its reset; the other worker's episode is kept; each planned episode is counted once; the restart is
    in the log and metrics.json."""
    overrides = [o for o in COMMON if not o.startswith("env.eval.rollout_epoch")] + ["env.eval.rollout_epoch=1"]
    remote, _, killed, lost_node = _eval_losing_the_gpu_node(ray_cluster, tmp_path, overrides, compare_local=False)
    _assert_restarted_once(remote, killed, lost_node, epochs=1)
    assert all(r.episode_len == 20 for r in remote.results)  # the re-run episode ran in full, not resumed


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_node_lost_mid_eval_gives_the_local_metrics(ray_cluster, tmp_path):
    """Two epochs with the node lost in the first: the same per-episode results and metrics as local workers."""
    remote, local, killed, lost_node = _eval_losing_the_gpu_node(ray_cluster, tmp_path, COMMON, compare_local=True)
    _assert_restarted_once(remote, killed, lost_node, epochs=2)
    assert remote.metrics == local.metrics
    assert _rows(remote.results) == _rows(local.results)
    assert _rows(read_episodes(remote.run_dir)) == _rows(local.results)
