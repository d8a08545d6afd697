"""Starting and reaching a Ray cluster is bounded and fails with one clear line (real Ray processes)."""

from __future__ import annotations

import glob
import socket
import subprocess
import sys
import time

import psutil
import pytest

pytest.importorskip("ray", reason="Ray is an extra: run scripts/install.sh (pip extra .[ray])")


def _processes_naming(text: str) -> list[int]:
    out = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        try:
            if text in " ".join(proc.info["cmdline"] or []):
                out.append(proc.pid)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    return out


def test_a_local_cluster_start_that_fails_is_retried_then_named_in_one_error():
    """Every attempt of a start that cannot succeed (here Ray refuses the head's resources) is tried, its
    temp folder removed, and the error names each attempt, the time and the load average."""
    from rpent.cluster.errors import ClusterConnectError
    from rpent.cluster.local import start_local_cluster

    prefix = f"rray_fail_{int(time.time())}_"
    with pytest.raises(ClusterConnectError) as info:
        start_local_cluster({"num_cpus": 1, "resources": {"CPU": 1}}, attempts=2, temp_prefix=prefix)
    message = str(info.value)
    assert message.startswith("could not start a local Ray cluster in 2 attempts"), message
    assert "attempt 1: " in message and "attempt 2: " in message, message
    assert message.count("`CPU` cannot be a custom resource") == 2, message  # Ray's own reason, each attempt
    assert "load average" in message
    assert not glob.glob(f"/tmp/{prefix}*") and not _processes_naming(f"/tmp/{prefix}")


def test_connect_to_an_address_where_nothing_listens_fails_within_its_timeout():
    """`connect` waits for the GCS port (bounded) instead of entering ray.init, which would block in native
    code for minutes; one line names the address, the time and the last error."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # free, and closed again: nothing listens there
    code = ("import sys\nfrom rpent.cluster.connect import connect\nfrom rpent.cluster.errors import ClusterConnectError\n"
            f"try:\n    connect('127.0.0.1:{port}', 3.0)\nexcept ClusterConnectError as exc:\n"
            "    print(exc); sys.exit(3)\n")
    t0 = time.monotonic()
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=240)
    assert run.returncode == 3, run.stdout + run.stderr[-2000:]
    assert f"no Ray cluster answered at '127.0.0.1:{port}' within 3 s" in run.stdout
    assert "Connection refused" in run.stdout
    assert time.monotonic() - t0 < 200  # importing Ray dominates on a loaded machine


def test_a_local_cluster_starts_where_rays_default_root_never_existed(tmp_path):
    """Ray's default root (``$RAY_TMPDIR/ray``, else ``/tmp/ray``) is absent, as on a machine that never ran
    Ray: the cluster starts, runs a task on each node, and the default root is neither created nor needed
    (``ray.cluster_utils`` writes its address file into the cluster's own folder)."""
    absent = tmp_path / "never_made"
    run = subprocess.run([sys.executable, "-m", "rpent.cluster.local", "--check"], capture_output=True, text=True,
                         timeout=280, env={**__import__("os").environ, "RAY_TMPDIR": str(absent)})
    assert run.returncode == 0, run.stdout + run.stderr[-3000:]
    assert "a task ran on 2 distinct node(s)" in run.stdout and f"{absent}/ray was not created" in run.stdout
    assert not absent.exists()
    folder = run.stdout.rsplit("its folder was ", 1)[1].strip()
    assert folder.startswith("/tmp/rray_check_") and not _processes_naming(folder)  # this run's own processes


def test_connect_local_starts_a_private_cluster_and_disconnect_stops_it():
    """``--ray-address local``: ``connect("local")`` starts a cluster of this machine's CPUs in its own folder,
    runs work on it, and ``disconnect`` stops every process of it."""
    code = ("import os\nfrom rpent.cluster import connect as c\nray = c.connect('local', 120)\n"
            "folder = c.private_folder()\nprint('CPUS', int(ray.cluster_resources()['CPU']), os.cpu_count())\n"
            "print('TASK', ray.get(ray.remote(lambda: 6 * 7).remote()))\nc.disconnect()\n"
            "print('FOLDER', folder, os.path.exists(folder))\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=280)
    assert run.returncode == 0, run.stdout + run.stderr[-3000:]
    lines = dict(line.split(" ", 1) for line in run.stdout.splitlines() if line[:4] in ("CPUS", "TASK", "FOLD"))
    cpus, count = lines["CPUS"].split()
    assert cpus == count and lines["TASK"] == "42"
    folder, exists = lines["FOLDER"].split()
    assert folder.startswith("/tmp/rray_local_") and exists == "False"
    assert not _processes_naming(folder)
