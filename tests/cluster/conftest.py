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
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

os.environ.setdefault("MUJOCO_GL", "egl")
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"  # loopback node IPs (see the module docstring)
os.environ.setdefault("RAY_agent_register_timeout_ms", "180000")  # slow agent / raylet start on a loaded 2-core box
os.environ.setdefault("RAY_raylet_start_wait_time_s", "180")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "eval"))  # policy_server / replay fixtures of the eval tests

OBJECT_STORE_BYTES = 80 * 1024 * 1024


def _kill_leftovers(temp_dir: str) -> None:
    """Kill the processes of a failed cluster start: those whose command line names its temp folder."""
    import psutil

    for proc in psutil.process_iter(["pid", "cmdline"]):
        try:
            if temp_dir in " ".join(proc.info["cmdline"] or []):
                proc.kill()
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass


class LocalCluster:
    """The running test cluster: ``.address`` (GCS ``127.0.0.1:PORT``), ``.cluster``, ``.gpu_node``."""

    def __init__(self) -> None:
        from ray.cluster_utils import Cluster

        self.temp_dir = tempfile.mkdtemp(prefix="rray_", dir="/tmp")  # short: Unix socket paths
        try:
            self.cluster = Cluster(initialize_head=True, head_node_args={
                "num_cpus": 1, "num_gpus": 0, "resources": {"head_node": 1}, "node_ip_address": "127.0.0.1",
                "object_store_memory": OBJECT_STORE_BYTES, "include_dashboard": False, "temp_dir": self.temp_dir,
            })
        except BaseException:
            _kill_leftovers(self.temp_dir)  # a failed start leaves its GCS server etc. running
            shutil.rmtree(self.temp_dir, ignore_errors=True)
            raise
        try:
            self.gpu_node = self.add_gpu_node()
        except BaseException:
            self.cluster.shutdown()  # leave no half-started cluster behind
            shutil.rmtree(self.temp_dir, ignore_errors=True)
            raise
        self.address = self.cluster.address

    def add_gpu_node(self):
        """Add a node with 1 CPU, 1 GPU and ``gpu_node`` (also used to replace a killed one)."""
        return self.add_node(num_cpus=1, num_gpus=1, resources={"gpu_node": 1})

    def add_node(self, **resources):
        """Add a node on 127.0.0.1 with ``resources`` (``num_cpus``, ``num_gpus``, ``resources``) and wait for it."""
        node = self.cluster.add_node(**resources, node_ip_address="127.0.0.1", object_store_memory=OBJECT_STORE_BYTES)
        self.cluster.wait_for_nodes()
        return node

    def shutdown(self) -> None:
        """Disconnect the driver and stop every node."""
        import ray

        if ray.is_initialized():
            ray.shutdown()
        self.cluster.shutdown()
        shutil.rmtree(self.temp_dir, ignore_errors=True)


@pytest.fixture(scope="session")
def ray_cluster():
    """Session-wide two-node cluster; this process is connected to it as the driver."""
    pytest.importorskip("ray", reason='Ray is an extra: pip install -e ".[ray]"')
    import ray

    for attempt in range(3):
        try:
            cluster = LocalCluster()
            break
        except Exception:  # noqa: BLE001 - a raylet gives up after 15 s waiting for its agents on a loaded machine
            if attempt == 2:
                raise
    ray.init(address=cluster.address, log_to_driver=False)
    try:
        yield cluster
    finally:
        cluster.shutdown()


@pytest.fixture
def env_for_cli(ray_cluster):
    """Environment for a CLI subprocess that joins the test cluster as its own driver."""
    return {**os.environ, "PYTHONPATH": os.environ.get("PYTHONPATH", str(REPO)), "MUJOCO_GL": "egl"}
