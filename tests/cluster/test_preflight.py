"""Placement checks against what is free now, on the real two-node test cluster (``head``: 1 CPU;
``gpu``: 1 CPU, 1 GPU, ``gpu_node``): another job's actor holds resources; the batch executor and
``rpent-eval`` refuse before anything starts, naming the free and total numbers, or wait for the
resources to free up (bounded by ``ray.preflight_wait_s``)."""

from __future__ import annotations

import threading
import time

import pytest

from rpent.batch.executor import create_executor
from rpent.cluster.errors import ClusterBusyError
from rpent.cluster.preflight import Demand, NodeInfo, check_free, live_nodes
from rpent.cluster.settings import ResourceRequest, parse_ray_section

ray = pytest.importorskip("ray", reason="Ray is an extra: run scripts/install.sh (pip extra .[ray])")


def _hold(**options):
    """Start a holder actor with ``options`` (resources) and wait until it runs (its resources are taken).

    It stands for another job's actor; defined here so Ray ships it by value (test modules are not
    importable on the workers)."""

    class Holder:
        def ping(self) -> str:
            return "held"

    actor = ray.remote(Holder).options(**options).remote()
    assert ray.get(actor.ping.remote(), timeout=120) == "held"
    # the free-resource view (what preflight reads) follows the actor's start with a delay a loaded
    # machine stretches: wait until it shows the hold
    want = {"CPU": options.get("num_cpus", 0), "GPU": options.get("num_gpus", 0)}
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        free: dict[str, float] = {}
        total: dict[str, float] = {}
        for node in live_nodes(ray):
            for key, value in (node.available or {}).items():
                free[key] = free.get(key, 0.0) + value
            for key, value in node.resources.items():
                total[key] = total.get(key, 0.0) + value
        if all(free.get(k, 0.0) <= total.get(k, 0.0) - v + 1e-9 for k, v in want.items()):
            break
        time.sleep(0.2)
    return actor


def _release(actor) -> None:
    """Kill the holder and wait until Ray reports its resources free again."""
    ray.kill(actor, no_restart=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        free = ray.available_resources()
        if free.get("CPU", 0) >= 2 and free.get("GPU", 0) >= 1:
            return
        time.sleep(0.2)
    raise AssertionError(f"resources not freed: {ray.available_resources()}")


def test_nodes_report_their_free_resources(ray_cluster):
    nodes = {n.node_id: n for n in live_nodes(ray)}
    gpu = nodes[ray_cluster.gpu_node.node_id]
    assert gpu.resources["GPU"] == 1 and gpu.available is not None
    holder = _hold(num_cpus=1, num_gpus=1, resources={"gpu_node": 0.5})
    try:
        gpu = {n.node_id: n for n in live_nodes(ray)}[ray_cluster.gpu_node.node_id]
        assert gpu.available.get("GPU", 0.0) == 0.0 and gpu.available.get("CPU", 0.0) == 0.0
        assert "CPU: 0/1, GPU: 0/1, gpu_node: 0.5/1 free" in gpu.describe_free()
    finally:
        _release(holder)


def test_batch_executor_refuses_cells_that_fit_the_totals_but_not_what_is_free(ray_cluster, tmp_path):
    """--parallel 2 fits the cluster's 2 CPUs, but another job holds the GPU node's CPU: refused, naming
    1 of 2 CPUs free, before any task starts (nothing written under the results root but the root)."""
    settings = parse_ray_section({"cell": {"num_cpus": 1}, "results": "shared", "preflight_wait_s": 1},
                                 ray_cluster.address)
    holder = _hold(num_cpus=1, resources={"gpu_node": 0.5})
    try:
        t0 = time.monotonic()
        with pytest.raises(ClusterBusyError) as info:
            create_executor("ray", slots=2, settings=settings, results_root=tmp_path)
        assert time.monotonic() - t0 < 30
        msg = str(info.value)
        assert "cells (--parallel): 2 requested (each {CPU: 1}) and the cluster could hold 2, but only 1 fit in " \
               "what is free now (CPU: 1 of 2 free;" in msg, msg
        assert "(waited 1 s, ray.preflight_wait_s)" in msg
        assert not list(tmp_path.iterdir())
        with create_executor("ray", slots=1, settings=settings, results_root=tmp_path) as ex:  # 1 fits
            assert ex.slots == 1
    finally:
        _release(holder)


def test_preflight_waits_for_resources_another_job_frees(ray_cluster, tmp_path):
    settings = parse_ray_section({"cell": {"num_cpus": 1}, "results": "shared", "preflight_wait_s": 60},
                                 ray_cluster.address)
    holder = _hold(num_cpus=1, resources={"gpu_node": 0.5})
    timer = threading.Timer(2.0, ray.kill, args=(holder,), kwargs={"no_restart": True})
    timer.start()
    try:
        t0 = time.monotonic()
        with create_executor("ray", slots=2, settings=settings, results_root=tmp_path) as ex:
            assert ex.slots == 2 and time.monotonic() - t0 >= 1.5
    finally:
        timer.join()
        _release(holder)


def test_eval_replica_refused_while_another_job_holds_the_gpu(ray_cluster):
    """rpent-eval: a VLA replica needs the one GPU; another job holds it: refused naming 0 of 1 GPUs free."""
    from rpent.eval.config import load_eval_config
    from rpent.eval.errors import EvalConfigError
    from rpent.eval.ray_workers import prepare_ray_eval

    loaded = load_eval_config("libero_object_pi05_eval", [
        "env.eval.task_ids=[2,3]", "env.eval.total_num_envs=2", "env.num_workers=1", "+ray.preflight_wait_s=1",
        "+ray.replicas.vla.server=replay", "+ray.replicas.vla.count=1", "+ray.replicas.vla.num_cpus=0"])
    holder = _hold(num_cpus=0, num_gpus=1)
    try:
        with pytest.raises(EvalConfigError) as info:
            prepare_ray_eval(loaded, ray_cluster.address)
        msg = str(info.value)
        assert "ray.replicas.vla.count: 1 requested (each {GPU: 1}) and the cluster could hold 1, but only 0 fit" in msg
        assert "GPU: 0 of 1 free" in msg, msg
    finally:
        _release(holder)


def test_roles_are_packed_together_on_free_resources():
    """Two roles that each fit alone but not together on what is free (no cluster needed)."""
    nodes = [NodeInfo("a" * 16, "10.0.0.1", {"CPU": 4.0, "GPU": 1.0}, {"CPU": 2.0, "GPU": 1.0}),
             NodeInfo("b" * 16, "10.0.0.2", {"CPU": 4.0}, {"CPU": 0.0})]
    workers = Demand("env workers (env.num_workers)", ResourceRequest(num_cpus=1), 2)
    replica = Demand("ray.replicas.vla.count", ResourceRequest(num_cpus=1, num_gpus=1), 1)
    check_free(nodes, [workers])
    check_free(nodes, [replica])
    with pytest.raises(ClusterBusyError) as info:
        check_free(nodes, [workers, replica])
    msg = str(info.value)
    assert msg.startswith("env workers (env.num_workers): 2 requested (each {CPU: 1}) and the cluster could hold 8, "
                          "but only 1 fit in what is free now after ray.replicas.vla.count (CPU: 2 of 8 free"), msg
    assert "10.0.0.2[bbbbbbbb] {CPU: 0/4 free}" in msg
