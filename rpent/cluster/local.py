"""A Ray cluster of one or more nodes on this machine, bound to 127.0.0.1, started robustly.

For measurements (``benchmarks/batch_bench.py --executor ray``) and the distributed tests
(``tests/cluster``): ``ray.cluster_utils.Cluster`` nodes whose processes all run here. On a loaded
machine a Ray node start fails in ways that a second try fixes: the raylet gives up waiting for
its dashboard agent's port files (``Timed out waiting for file .../dashboard_agent_listen_port_<node>``:
a 30 s wait that no setting lengthens in Ray 2.60; the agent's Python start-up takes longer on a
machine with a load average several times its cores), for the agent's registration
(``RAY_agent_register_timeout_ms``) or for the GCS (``RAY_raylet_start_wait_time_s``); the failed
start leaves its GCS server and other processes running. Ray's node start ends by itself when its
raylet gave up (``The current node timed out during startup``, after up to ~3 minutes here: its
GCS query for the node waits out an RPC deadline). The attempt is not cut short from outside: the
node start must run on the main thread (signal handlers), and killing its GCS while this process's
GCS client waits on it makes Ray terminate the whole process after 60 s.
:func:`start_local_cluster` therefore

* raises those two Ray timeouts (180 s, unless the environment already sets them),
* starts the nodes' processes at a better priority (``priority_boost``) where permitted,
* tries up to ``attempts`` times, killing every process of a failed try (those whose command line
  names its own temp folder) and removing that folder before the next,
* raises :class:`~rpent.cluster.errors.ClusterConnectError` naming the attempts, each error and the
  load average when every try failed.

Environment set here (before the first node starts; inherited by every Ray process):
``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` makes Ray resolve "this node's IP" to 127.0.0.1 (otherwise a
driver that connects to 127.0.0.1 is sent to the machine's address, where nothing listens);
``RAY_USAGE_STATS_ENABLED=0``.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import time
from typing import Any

from rpent.cluster.errors import ClusterConnectError

log = logging.getLogger("rpent.cluster")

START_ENV = {
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_agent_register_timeout_ms": "180000",
    "RAY_raylet_start_wait_time_s": "180",
}
"""Environment defaults for local nodes (see the module docstring); a value already set wins, except
``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER`` which loopback nodes need."""


LEAN_HEAD_OPTIONS: dict[str, Any] = {
    "no_monitor": True,
    "include_log_monitor": False,
    "_system_config": {"enable_metrics_collection": False},
}
"""Head-node options of :func:`start_local_cluster` (``lean=True``), each one of Ray's own start options
(``ray start --help``: ``--no-monitor``, ``--include-log-monitor``; ``RAY_enable_metrics_collection``):

* ``no_monitor``: no autoscaler monitor process (``monitor.py``); a local cluster has a fixed set of
  nodes, nothing to scale;
* ``include_log_monitor=False``: no log monitor process (it tails every worker's log files to forward
  them to drivers; rpent's drivers connect with ``log_to_driver=False``, the files stay in the
  session's ``logs`` folder);
* ``enable_metrics_collection=False``: Ray's processes record and export no Prometheus metrics.

Measured on this 2-core machine during a 2-cell batch (``benchmarks/batch_bench.py``, CPU seconds
sampled with psutil): the monitor and the log monitor used 0.3 and 0.7 CPU s per 100 s of batch,
and starting them ~2 CPU s (two Python interpreters). The dashboard head is started by Ray even
with ``include_dashboard=False`` (reduced to its usage-stats module); the dashboard agent and
runtime-env agent are started by every raylet and cannot be left out."""


def local_node_env() -> None:
    """Apply :data:`START_ENV` to ``os.environ`` (idempotent)."""
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    for key, value in START_ENV.items():
        os.environ.setdefault(key, value)


def kill_processes_naming(text: str) -> int:
    """SIGKILL every process whose command line contains ``text`` (a failed start's temp folder); returns
    how many."""
    import psutil

    n = 0
    for proc in psutil.process_iter(["pid", "cmdline"]):
        try:
            if proc.pid != os.getpid() and text in " ".join(proc.info["cmdline"] or []):
                proc.kill()
                n += 1
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    return n


class LocalRayCluster:
    """A running local cluster (see :func:`start_local_cluster`).

    Attributes:
        cluster: the ``ray.cluster_utils.Cluster``.
        address: the head's GCS address ``127.0.0.1:PORT`` (``ray.init(address=...)``,
            ``--ray-address``).
        temp_dir: this cluster's Ray temp folder (removed at :meth:`shutdown`).
        nodes: the worker nodes added at start (``Cluster.add_node`` results), in order.
        start_s: seconds the start took, failed attempts included.
        attempts: how many attempts the start needed.
    """

    def __init__(self, cluster: Any, temp_dir: str, nodes: list[Any], start_s: float, attempts: int):
        self.cluster = cluster
        self.address: str = cluster.address
        self.temp_dir = temp_dir
        self.nodes = nodes
        self.start_s = start_s
        self.attempts = attempts

    def add_node(self, num_cpus: float = 1, num_gpus: float = 0, resources: dict[str, float] | None = None,
                 object_store_bytes: int = 80 * 1024 * 1024) -> Any:
        """Add a node on 127.0.0.1 and wait until the cluster sees it; returns the ``Node``."""
        node = self.cluster.add_node(num_cpus=num_cpus, num_gpus=num_gpus, resources=resources or {},
                                     node_ip_address="127.0.0.1", object_store_memory=object_store_bytes)
        self.cluster.wait_for_nodes()
        return node

    def shutdown(self) -> None:
        """Disconnect this process if connected, stop every node, remove the temp folder (idempotent)."""
        import ray

        if ray.is_initialized():
            ray.shutdown()
        try:
            self.cluster.shutdown()
        finally:
            kill_processes_naming(self.temp_dir)  # anything a node left behind
            shutil.rmtree(self.temp_dir, ignore_errors=True)


def start_local_cluster(head: dict[str, Any], workers: list[dict[str, Any]] = (), *, attempts: int = 3,
                        object_store_bytes: int = 80 * 1024 * 1024, temp_prefix: str = "rray_",
                        priority_boost: int = 5, lean: bool = True) -> LocalRayCluster:
    """Start a head node (and ``workers``) on 127.0.0.1, retrying a failed start (module docstring).

    Args:
        head: ``num_cpus``, ``num_gpus``, ``resources`` of the head node (a dict of those keys).
        workers: the same for each further node.
        attempts: starts to try (>= 1).
        object_store_bytes: object store of each node (small: the payloads here are small).
        temp_prefix: prefix of the temp folder under /tmp (short: Ray's Unix socket paths are limited to
            107 bytes).
        priority_boost: the nodes' processes (GCS, raylet, agents: they inherit it) start this much below
            this process's niceness where permitted (root / CAP_SYS_NICE), so the dashboard agent writes
            its port files within the raylet's fixed 30 s on a loaded machine; where the kernel groups
            processes by session (autogroups, :func:`_autogroup_nice`), this session's autogroup
            niceness is lowered as much for the start (a process's own niceness does not count against
            other sessions' work there); both are restored after the start. Ray workers still start at the raylet's +15 (rpent's
            env workers and batch runs set themselves to the driver's niceness). 0: no boost.
        lean: start the head without the processes a fixed-size local cluster whose drivers connect
            with ``log_to_driver=False`` does not use (:data:`LEAN_HEAD_OPTIONS`): fewer processes to
            start (each a Python start-up on a loaded machine) and less background CPU while cells run.

    Returns:
        :class:`LocalRayCluster` (not connected: ``ray.init(address=cluster.address)`` to use it).

    Raises:
        ClusterConnectError: every attempt failed (each error and the load average named).
        ValueError: ``attempts`` < 1.
    """
    if attempts < 1:
        raise ValueError(f"attempts must be >= 1, got {attempts}")
    local_node_env()
    from ray._common.utils import get_ray_address_file
    from ray.cluster_utils import Cluster

    # Cluster.add_node records the head's address in Ray's default temp folder (/tmp/ray) whatever
    # temp_dir says, and fails with FileNotFoundError where that folder does not exist yet (a fresh machine)
    os.makedirs(os.path.dirname(get_ray_address_file(None)), exist_ok=True)

    t0 = time.monotonic()
    errors: list[str] = []
    for attempt in range(1, attempts + 1):
        temp_dir = tempfile.mkdtemp(prefix=temp_prefix, dir="/tmp")
        t_attempt = time.monotonic()
        box: dict[str, Any] = {}
        own_nice = os.getpriority(os.PRIO_PROCESS, 0)
        group_nice = _autogroup_nice()
        try:
            _raise_priority(own_nice, priority_boost)
            if group_nice is not None and priority_boost > 0:
                _set_autogroup_nice(group_nice - priority_boost)
            box["cluster"] = Cluster(initialize_head=False)
            box["cluster"].add_node(
                num_cpus=head.get("num_cpus", 1), num_gpus=head.get("num_gpus", 0),
                resources=dict(head.get("resources") or {}), node_ip_address="127.0.0.1",
                object_store_memory=object_store_bytes, include_dashboard=False, temp_dir=temp_dir,
                **(LEAN_HEAD_OPTIONS if lean else {}))
            started = LocalRayCluster(box["cluster"], temp_dir, [], 0.0, attempt)
            for spec in workers:
                started.nodes.append(started.add_node(spec.get("num_cpus", 1), spec.get("num_gpus", 0),
                                                      spec.get("resources"), object_store_bytes))
            box["started"] = started
        except Exception as exc:  # noqa: BLE001 - Ray raises several types for a failed node start
            box["error"] = exc
        finally:
            try:
                os.setpriority(os.PRIO_PROCESS, 0, own_nice)
            except OSError:
                pass
            if group_nice is not None and priority_boost > 0:
                _set_autogroup_nice(group_nice)
        if "started" in box:
            started = box["started"]
            started.start_s = time.monotonic() - t0
            if attempt > 1:
                log.warning("local Ray cluster started at attempt %d (%.0f s)", attempt, started.start_s)
            return started
        exc = box.get("error")
        what = f"{type(exc).__name__} after {time.monotonic() - t_attempt:.0f} s: {str(exc).strip()[:300]}"
        crash = _raylet_crash(temp_dir)
        errors.append(f"attempt {attempt}: {what}" + (f" (raylet: {crash})" if crash else ""))
        log.warning("local Ray cluster start failed (%s); %s", errors[-1], "retrying" if attempt < attempts else
                    "giving up")
        cluster = box.get("cluster")
        kill_processes_naming(temp_dir)  # a failed start leaves its GCS server etc. running
        if cluster is not None:
            try:
                cluster.shutdown()
            except Exception:  # noqa: BLE001 - half started
                pass
        shutil.rmtree(temp_dir, ignore_errors=True)
    raise ClusterConnectError(
        f"could not start a local Ray cluster in {attempts} attempts ({time.monotonic() - t0:.0f} s; load average "
        f"{', '.join(f'{x:.1f}' for x in os.getloadavg())}): {'; '.join(errors)}; on a loaded machine retry later "
        "or raise RAY_agent_register_timeout_ms / RAY_raylet_start_wait_time_s"
    )


def _autogroup_nice() -> int | None:
    """This session's autogroup niceness (``/proc/self/autogroup``), or None where the kernel does not
    group by session (``kernel.sched_autogroup_enabled`` 0 or absent).

    With autogroups (Linux ``CONFIG_SCHED_AUTOGROUP``, on by default in many distributions and on this
    machine) the scheduler first shares the CPUs fairly between sessions, and a process's own niceness
    only orders it within its session: lowering it does not help the node's processes against other
    sessions' work. The session's autogroup niceness does (``sched(7)``, "The autogroup feature")."""
    try:
        with open("/proc/sys/kernel/sched_autogroup_enabled") as f:
            if f.read().strip() != "1":
                return None
        with open("/proc/self/autogroup") as f:
            return int(f.read().split("nice")[1].split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _set_autogroup_nice(nice: int) -> None:
    """Set this session's autogroup niceness (lowering it needs root / CAP_SYS_NICE; no-op otherwise)."""
    try:
        with open("/proc/self/autogroup", "w") as f:
            f.write(str(nice))
    except OSError:
        pass


def _raise_priority(nice: int, boost: int) -> None:
    """Lower this process's niceness by ``boost`` (children started now inherit it); no-op without the
    privilege."""
    if boost > 0:
        try:
            os.setpriority(os.PRIO_PROCESS, 0, nice - boost)
        except OSError:
            pass


def _raylet_crash(temp_dir: str) -> str:
    """The raylet's fatal log line of a failed start in ``temp_dir`` (Ray's ``... C ...`` lines), or ''."""
    import glob

    for path in glob.glob(os.path.join(temp_dir, "session_*", "logs", "raylet*.out")):
        try:
            with open(path, errors="replace") as f:
                for line in f:
                    if " C " in line[:40] and "Check failed" in line:
                        return line.split("Check failed:", 1)[1].strip()[:300]
        except OSError:
            pass
    return ""
