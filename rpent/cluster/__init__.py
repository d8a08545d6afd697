"""Running rpent past one machine on a Ray cluster (``pip install -e ".[ray]"``).

The local executors (spawned env workers, subprocess batch cells) stay the default and need no Ray.
With ``--ray-address auto|ray://HOST:PORT`` (or a ``ray:`` section in the YAML) ``rpent-eval`` and
``rpent-batch`` place their work on a Ray cluster instead:

* :mod:`rpent.cluster.settings`  -- the ``ray`` section: address, per-role resources, replicas.
* :mod:`rpent.cluster.connect`   -- ``ray.init`` with bounded waits, retries and a clear error.
* :mod:`rpent.cluster.local`     -- a local cluster on 127.0.0.1 (tests, benchmarks), start retried.
* :mod:`rpent.cluster.preflight` -- refuse bad placement before anything starts (names the numbers).
* :mod:`rpent.cluster.replicas`  -- Pi0.5 / SAM3 / replay servers as long-lived Ray actors (one
  replica per GPU), each running our existing RPC server; clients reach them through the ordinary
  RPC endpoints, so a run's record is the same as on one machine.

Ray is imported lazily, only by code paths that were asked for a cluster.
"""

from __future__ import annotations

from rpent.cluster.errors import ClusterConfigError, ClusterError, ReplicaPoolError

__all__ = ["ClusterConfigError", "ClusterError", "ReplicaPoolError"]
