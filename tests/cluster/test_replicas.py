"""VLA replicas as long-lived Ray actors on the "GPU" node: placement, sticky least-loaded endpoints,
a dead replica restarted then dropped (each logged with its reason); and the ``ray`` section's
validation (no cluster needed)."""

from __future__ import annotations

import logging
import time

import numpy as np
import pytest

from rpent.cluster.errors import ClusterConfigError, ReplicaPoolError
from rpent.cluster.settings import parse_ray_section
from rpent.rpc import RpcClient


def _replay_pool_settings(**over):
    section = {"address": "auto", "replicas": {"vla": {
        "server": "replay", "args": ["--zero", "--n-exec", "5"], "count": 1, "num_cpus": 0,
        "resources": {"gpu_node": 1}, "max_restarts": 1, "ready_timeout_s": 120, **over}}}
    return parse_ray_section(section).replicas["vla"]


def _predict(endpoint: str) -> np.ndarray:
    obs = {"main_images": np.zeros((1, 8, 8, 3), np.uint8), "wrist_images": np.zeros((1, 8, 8, 3), np.uint8),
           "states": np.zeros((1, 8), np.float32),
           "task_descriptions": ["pick"]}
    with RpcClient(endpoint, timeout=30) as client:
        return np.asarray(client.call("vla.predict", obs, None))


def _kill_and_wait(actor) -> None:
    """SIGKILL-like ``ray.kill`` (asynchronous), then wait until the actor no longer answers."""
    import ray

    ray.kill(actor, no_restart=True)
    for _ in range(120):
        try:
            ray.get(actor.alive.remote(), timeout=5)
        except Exception:  # noqa: BLE001 - RayActorError: it is gone
            return
        time.sleep(0.5)
    raise AssertionError("the replica actor did not die")


def test_replica_restarted_then_dropped_with_logged_reasons(ray_cluster, caplog):
    from rpent.cluster.replicas import ReplicaPool

    caplog.set_level(logging.INFO, logger="rpent.cluster.replicas")
    with ReplicaPool(_replay_pool_settings()) as pool:
        (rep,) = pool.replicas
        assert rep.node_id == ray_cluster.gpu_node.node_id  # placed on the node with the GPU resource
        assert rep.info["cuda_visible_devices"] == "0"  # Ray assigned it the node's one GPU
        first = pool.endpoint_for("env-worker-0")
        assert pool.endpoint_for("env-worker-1") == first  # one replica: both clients on it
        assert _predict(first).shape == (1, 5, 7)
        assert pool.report_failure(first, "a call failed") == first  # healthy: nothing restarted

        _kill_and_wait(rep.actor)  # the replica dies (its server follows via --parent-watch)
        second = pool.report_failure(first, "RpcTransportError: connection reset")
        assert second != first and pool.endpoint_for("env-worker-0") == second
        assert _predict(second).shape == (1, 5, 7)
        assert [e["kind"] for e in pool.events] == ["restarting", "restarted"]
        assert "its actor on node 127.0.0.1 is gone" in pool.events[0]["reason"]

        _kill_and_wait(pool.replicas[0].actor)
        with pytest.raises(ReplicaPoolError, match="no vla replica is left"):
            pool.report_failure(second, "RpcTransportError: connection reset")
        assert pool.events[-1]["kind"] == "dropped" and "restarts spent: 1/1" in pool.events[-1]["reason"]
        with pytest.raises(ReplicaPoolError):
            pool.endpoint_for("env-worker-0")
    assert "vla replica 0 dropped" in caplog.text and "vla replica 0 restarting" in caplog.text


def test_replica_that_cannot_start_fails_within_its_timeout(ray_cluster):
    from rpent.cluster.errors import ClusterError
    from rpent.cluster.replicas import ReplicaPool

    bad = _replay_pool_settings(args=["--replay", "/nonexistent.json"], ready_timeout_s=60)
    with pytest.raises(ClusterError, match="vla replica 0 .* did not become ready"):
        with ReplicaPool(bad):
            pass


@pytest.mark.parametrize("section, address, message", [
    ({"replicas": {"vla": {"count": 1}}}, None, "the ray section has no address"),
    ({}, "localhost", "ray address 'localhost' is malformed"),
    ({"address": "auto", "replicas": {"tpu": {}}}, None, "ray.replicas: unknown key(s) ['tpu']"),
    ({"address": "auto", "replicas": {"vla": {"count": 0}}}, None, "ray.replicas.vla.count must be >= 1"),
    ({"address": "auto", "replicas": {"vla": {"server": "gpt"}}}, None, "ray.replicas.vla.server 'gpt' unknown"),
    ({"address": "auto", "env_worker": {"resources": {"GPU": 1}}}, None, "use num_cpus / num_gpus"),
    ({"address": "auto", "results": "rsync"}, None, "ray.results must be auto, shared or copy"),
])
def test_bad_ray_sections_name_the_key(section, address, message):
    with pytest.raises(ClusterConfigError) as info:
        parse_ray_section(section, address)
    assert message in str(info.value)


def test_no_section_and_no_address_means_local():
    assert parse_ray_section(None) is None and parse_ray_section({}) is None
    s = parse_ray_section({"cell": {"num_cpus": 2, "resources": {"sim_node": 1}, "max_retries": 3}}, "ray://head:10001")
    assert s.address == "ray://head:10001" and s.cell.demand() == {"CPU": 2.0, "sim_node": 1.0}
    assert s.cell_max_retries == 3 and s.replicas == {}
