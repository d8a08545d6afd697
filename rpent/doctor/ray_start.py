"""Start a one-node local Ray cluster, run one task on it, stop it; print the result as one JSON line.

Run by ``rpent doctor --ray`` in a subprocess (``python -m rpent.doctor.ray_start``): Ray's start
installs signal handlers, which only the main thread of a process may do.

Output (stdout, last line): ``{"ok": true, "address": str, "start_s": float, "task_s": float}``
or ``{"ok": false, "error": "<exception type>: <message>"}``.
"""

from __future__ import annotations

import json
import sys
import time


def main() -> int:
    """Start (:func:`rpent.cluster.local.start_local_cluster`, one attempt), use and stop the cluster."""
    t0 = time.monotonic()
    try:
        from rpent.cluster.local import local_node_env, start_local_cluster

        local_node_env()  # loopback node addresses and Ray's start timeouts, before Ray is imported
        import ray

        cluster = start_local_cluster({"num_cpus": 1}, attempts=1)
        try:
            start_s = time.monotonic() - t0
            ray.init(address=cluster.address, log_to_driver=False)
            t1 = time.monotonic()
            value = ray.get(ray.remote(lambda: 41 + 1).remote(), timeout=120)
            out = {"ok": value == 42, "address": cluster.address, "start_s": round(start_s, 1),
                   "task_s": round(time.monotonic() - t1, 1)}
        finally:
            cluster.shutdown()
    except Exception as exc:  # noqa: BLE001 - reported to the caller as data
        out = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
