"""The Ray executor against the executor protocol on the real two-node test cluster, with small real
child processes as jobs: results shared in place or copied back, time limits, cancellation at
shutdown (the run gets SIGTERM and can write its record), exit codes passed through."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from rpent.batch.executor import CellJob, Executor, create_executor
from rpent.cluster.settings import parse_ray_section

pytest.importorskip("ray", reason="Ray is an extra: run scripts/install.sh (pip extra .[ray])")

WRITER = """
import os, signal, sys, time
run_dir, code, sleep_s = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
os.makedirs(run_dir, exist_ok=True)
def on_term(*_):
    open(os.path.join(run_dir, "cancelled.txt"), "w").write("SIGTERM")
    sys.exit(2)
signal.signal(signal.SIGTERM, on_term)
open(os.path.join(run_dir, "record.json"), "w").write('{"ok": true}')
open(os.path.join(run_dir, "extra_args.txt"), "w").write(" ".join(sys.argv[4:]))
blocked = [ln.split()[1] for ln in open("/proc/self/status") if ln.startswith("SigBlk:")][0]
open(os.path.join(run_dir, "sigblk.txt"), "w").write(blocked)
print("hello from", os.getpid(), flush=True)
time.sleep(sleep_s)
sys.exit(code)
"""


def _job(tmp_path: Path, key: str, code: int = 0, sleep_s: float = 0.0, timeout_s: float | None = None) -> CellJob:
    run_dir = tmp_path / "runs" / key / "attempt-1"
    return CellJob(key=key, argv=[sys.executable, "-c", WRITER, str(run_dir), str(code), str(sleep_s)],
                   run_dir=str(run_dir), log_path=str(tmp_path / "runs" / key / "attempt-1.log"), arm="a",
                   timeout_s=timeout_s)


def _executor(ray_cluster, tmp_path, results: str, slots: int = 2):
    settings = parse_ray_section({"results": results, "cell": {"num_cpus": 1}}, ray_cluster.address)
    return create_executor("ray", slots=slots, settings=settings, results_root=tmp_path)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _wait_all(ex, n: int, timeout: float = 120.0):
    outs, deadline = [], time.monotonic() + timeout
    while len(outs) < n and time.monotonic() < deadline:
        outs += ex.wait(timeout=5.0)
    return {o.key: o for o in outs}


@pytest.mark.parametrize("results", ["copy", "auto"])
def test_runs_land_under_the_driver_root_with_exit_codes(ray_cluster, tmp_path, results):
    with _executor(ray_cluster, tmp_path, results) as ex:
        assert isinstance(ex, Executor) and ex.name == "ray" and ex.slots == 2
        ex.submit(_job(tmp_path, "c0", code=0))
        ex.submit(_job(tmp_path, "c1", code=1))
        with pytest.raises(RuntimeError, match="slots are busy"):
            ex.submit(_job(tmp_path, "c2"))
        outs = _wait_all(ex, 2)
        assert ex.running() == []
    assert {k: (o.exit_code, o.infra_error) for k, o in outs.items()} == {"c0": (0, None), "c1": (1, None)}
    for key in ("c0", "c1"):
        assert (tmp_path / "runs" / key / "attempt-1" / "record.json").read_text() == '{"ok": true}'
        assert "hello from" in (tmp_path / "runs" / key / "attempt-1.log").read_text()
        assert ("results copied back" in outs[key].where) == (results == "copy")
        assert outs[key].node_load["cpus"] >= 1 and len(outs[key].node_load["load"]) == 3  # the node's, for progress
        # no signal blocked in the run (a Ray worker runs tasks with SIGINT blocked; the mask survives exec)
        assert int((tmp_path / "runs" / key / "attempt-1" / "sigblk.txt").read_text(), 16) == 0
        # the run gets the driver's niceness back from Ray's worker niceness (+15) where permitted
        expected = os.getpriority(os.PRIO_PROCESS, 0) if os.geteuid() == 0 else None
        if expected is not None:
            assert outs[key].where.endswith(f", nice {expected}"), outs[key].where
    assert not list(tmp_path.glob(".rpent_ray_visible_*"))


def test_time_limit_and_cancellation_are_bounded_and_recorded(ray_cluster, tmp_path):
    """The time limit stops the run (SIGTERM: it records its cancellation); shutdown(cancel=True) stops a
    running cell through the executor's stop request in Ray's key-value store (polled by the task), not
    through ``ray.cancel``'s KeyboardInterrupt, which did not always reach the task here (full default
    runs, 2026-12-01: the run kept going until the 35 s escalation) and once aborted a driver."""
    with _executor(ray_cluster, tmp_path, "shared") as ex:
        ex.submit(_job(tmp_path, "slow", sleep_s=120, timeout_s=3))
        outs = _wait_all(ex, 1, timeout=90)
        assert "exceeded its time limit of 3 s" in outs["slow"].infra_error
        assert (tmp_path / "runs" / "slow" / "attempt-1" / "cancelled.txt").read_text() == "SIGTERM"
        ex.submit(_job(tmp_path, "stopped", sleep_s=300))
        run_dir = tmp_path / "runs" / "stopped" / "attempt-1"
        deadline = time.monotonic() + 60
        while not (run_dir / "record.json").exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        t0 = time.monotonic()
    # __exit__ -> shutdown(cancel=True): the run got SIGTERM, wrote its record, and nothing waited 300 s
    assert time.monotonic() - t0 < 60
    assert (run_dir / "cancelled.txt").read_text() == "SIGTERM"


def test_vla_replica_endpoints_are_added_to_jobs(ray_cluster, tmp_path):
    """With ray.replicas.vla the executor starts the replica on the GPU node and gives each job that names
    no VLA endpoint the least-loaded replica's (the run reaches it over the ordinary RPC endpoint)."""
    from rpent.rpc import RpcClient

    settings = parse_ray_section({"cell": {"num_cpus": 1}, "results": "shared", "replicas": {"vla": {
        "server": "replay", "args": ["--zero"], "count": 1, "num_cpus": 0, "resources": {"gpu_node": 1},
        "ready_timeout_s": 120}}}, ray_cluster.address)
    with create_executor("ray", slots=1, settings=settings, results_root=tmp_path) as ex:
        (endpoint,) = ex._pools["vla"].endpoints()
        ex.submit(_job(tmp_path, "c0"))
        outs = _wait_all(ex, 1)
        assert outs["c0"].exit_code == 0
        assert (tmp_path / "runs" / "c0" / "attempt-1" / "extra_args.txt").read_text() == f"--vla-endpoint {endpoint}"
        with RpcClient(endpoint, timeout=10) as client:
            assert client.call("healthz")["status"] == "ok"
        assert ex._pools["vla"].replicas[0].clients == set()  # released when the cell ended


def test_a_node_killed_under_a_running_cell_is_reported_once_and_never_hangs(ray_cluster, tmp_path):
    """A third node (the only one with ``sim_node``) runs a cell; its raylet and processes are killed
    (SIGKILL, no graceful drain): the cell ends once, as an infra error "lost its Ray node", and its run
    process is gone, not left running as an orphan; a cell submitted afterwards, which no live node can
    hold any more, ends with an infra error naming the resources after ray.preflight_wait_s instead of
    waiting forever."""
    node = ray_cluster.add_node(num_cpus=1, resources={"sim_node": 1})
    settings = parse_ray_section({"cell": {"num_cpus": 1, "resources": {"sim_node": 1}}, "results": "shared",
                                  "preflight_wait_s": 3}, ray_cluster.address)
    try:
        with create_executor("ray", slots=1, settings=settings, results_root=tmp_path) as ex:
            ex.submit(_job(tmp_path, "lost", sleep_s=300))
            run_dir = tmp_path / "runs" / "lost" / "attempt-1"
            deadline = time.monotonic() + 120
            while not (run_dir / "record.json").exists() and time.monotonic() < deadline:
                time.sleep(0.2)
            assert (run_dir / "record.json").exists(), "the cell never started on the sim node"
            ray_cluster.cluster.remove_node(node, allow_graceful=False)
            node = None
            t0 = time.monotonic()
            outs = []
            while not outs and time.monotonic() - t0 < 120:
                outs = ex.wait(timeout=5.0)
            assert [o.key for o in outs] == ["lost"], outs
            assert outs[0].exit_code is None and "lost its Ray node or worker" in outs[0].infra_error
            assert ex.wait(timeout=1.0) == [] and ex.running() == []  # reported once
            # the run on the dead node does not live on as an orphan (Ray kills a dead worker's children)
            pid = int((tmp_path / "runs" / "lost" / "attempt-1.log").read_text().split("hello from")[1].split()[0])
            deadline = time.monotonic() + 30
            while _alive(pid) and time.monotonic() < deadline:
                time.sleep(0.2)
            assert not _alive(pid), f"the run (pid {pid}) outlived its node"

            ex.submit(_job(tmp_path, "stranded", sleep_s=0))
            t1 = time.monotonic()
            outs = _wait_all(ex, 1, timeout=60)
            assert time.monotonic() - t1 < 30
            assert "no live Ray node offers the cell's {CPU: 1, sim_node: 1} any more" in outs["stranded"].infra_error
            assert "gave up after" in outs["stranded"].infra_error
            assert not (tmp_path / "runs" / "stranded").exists()  # it never ran anywhere
    finally:
        if node is not None:
            ray_cluster.cluster.remove_node(node, allow_graceful=False)


def test_a_dead_replica_is_restarted_then_dropped_between_cells(ray_cluster, tmp_path):
    """The VLA replica dies; the cell using it fails (exit 2): the executor checks the replica, restarts
    it (logged reason, in replica_events) and the next cell gets the new endpoint; after the second death
    (restarts spent) it is dropped and the next cell ends at once as an infra error naming the pool."""
    import ray

    settings = parse_ray_section({"cell": {"num_cpus": 1}, "results": "shared", "replicas": {"vla": {
        "server": "replay", "args": ["--zero"], "count": 1, "num_cpus": 0, "resources": {"gpu_node": 1},
        "max_restarts": 1, "ready_timeout_s": 120}}}, ray_cluster.address)
    with create_executor("ray", slots=1, settings=settings, results_root=tmp_path) as ex:
        pool = ex._pools["vla"]
        (first,) = pool.endpoints()
        for key in ("dies-1", "dies-2"):
            actor = pool.replicas[0].actor
            ray.kill(actor, no_restart=True)
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:  # ray.kill is asynchronous: wait until it no longer answers
                try:
                    ray.get(actor.alive.remote(), timeout=5)
                except Exception:  # noqa: BLE001 - RayActorError: gone
                    break
                time.sleep(0.5)
            ex.submit(_job(tmp_path, key, code=2))  # the run could not reach its replica
            assert _wait_all(ex, 1)[key].exit_code == 2
        assert [e["kind"] for e in ex.replica_events] == ["restarting", "restarted", "dropped"]
        assert "cell dies-1 attempt 1 ended with exit code 2" in ex.replica_events[0]["reason"]
        assert "restarts spent: 1/1" in ex.replica_events[2]["reason"]
        second = (tmp_path / "runs" / "dies-2" / "attempt-1" / "extra_args.txt").read_text().split()[-1]
        assert second != first and second == ex.replica_events[1]["endpoint"]
        ex.submit(_job(tmp_path, "after", code=0))
        outs = _wait_all(ex, 1, timeout=10)
        assert outs["after"].exit_code is None and "not started: no vla replica is left" in outs["after"].infra_error
        assert not (tmp_path / "runs" / "after").exists()
    assert len(ex.replica_events) == 3  # kept after the pools are closed (the CLI writes them to the manifest)
