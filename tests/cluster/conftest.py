"""A real local multi-node Ray cluster for the distributed tests (``ray.cluster_utils.Cluster``).

Two Ray nodes on this machine, both bound to 127.0.0.1:

* ``head``: 1 CPU, custom resource ``head_node``;
* ``gpu``: 1 CPU, 1 GPU and custom resource ``gpu_node`` standing for a GPU node (Ray only counts
  the GPU; nothing here uses CUDA; the servers fall back to the CPU).

Kept small for the shared 2-core machine: 80 MiB object stores, no dashboard, one Ray temp folder of
its own (so other Ray users of /tmp/ray are not touched). ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``
makes Ray resolve "this node's IP" to 127.0.0.1 instead of the machine's address (otherwise a driver
connecting to 127.0.0.1 is redirected to the machine IP, where nothing listens). The cluster is
started once per test session and shut down at teardown.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from rpent.cluster.local import local_node_env

os.environ.setdefault("MUJOCO_GL", "egl")
local_node_env()  # loopback node IPs, raised start timeouts: before Ray is imported anywhere

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "eval"))  # policy_server / replay fixtures of the eval tests

OBJECT_STORE_BYTES = 80 * 1024 * 1024


class LocalCluster:
    """The running test cluster: ``.address`` (GCS ``127.0.0.1:PORT``), ``.cluster``, ``.gpu_node``.

    Started by :func:`rpent.cluster.local.start_local_cluster` (loopback node IPs, raised Ray start
    timeouts, a failed start retried after its processes are killed)."""

    def __init__(self) -> None:
        from rpent.cluster.local import start_local_cluster

        self.local = start_local_cluster({"num_cpus": 1, "num_gpus": 0, "resources": {"head_node": 1}},
                                         [{"num_cpus": 1, "num_gpus": 1, "resources": {"gpu_node": 1}}],
                                         object_store_bytes=OBJECT_STORE_BYTES)
        self.cluster = self.local.cluster
        self.gpu_node = self.local.nodes[0]
        self.address = self.local.address

    def add_gpu_node(self):
        """Add a node with 1 CPU, 1 GPU and ``gpu_node`` (also used to replace a killed one)."""
        return self.add_node(num_cpus=1, num_gpus=1, resources={"gpu_node": 1})

    def add_node(self, num_cpus=1, num_gpus=0, resources=None):
        """Add a node on 127.0.0.1 with ``resources`` (``num_cpus``, ``num_gpus``, ``resources``) and wait for it."""
        return self.local.add_node(num_cpus, num_gpus, resources, OBJECT_STORE_BYTES)

    def shutdown(self) -> None:
        """Disconnect the driver and stop every node."""
        self.local.shutdown()


def pytest_collection_modifyitems(config, items):
    """The session cluster's start (minutes on a loaded machine, a failed try retried) is charged to the
    first test that uses it: tests here get 600 s unless they set their own limit."""
    here = Path(__file__).resolve().parent
    for item in items:
        if Path(str(item.fspath)).resolve().parent == here and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(600))


@pytest.fixture(scope="session")
def ray_cluster():
    """Session-wide two-node cluster; this process is connected to it as the driver."""
    pytest.importorskip("ray", reason='Ray is an extra: pip install -e ".[ray]"')
    import ray

    cluster = LocalCluster()
    ray.init(address=cluster.address, log_to_driver=False)
    try:
        yield cluster
    finally:
        cluster.shutdown()


@pytest.fixture
def env_for_cli(ray_cluster):
    """Environment for a CLI subprocess that joins the test cluster as its own driver."""
    return {**os.environ, "PYTHONPATH": os.environ.get("PYTHONPATH", str(REPO)), "MUJOCO_GL": "egl"}
