"""Connect the driver to a Ray cluster with a bounded wait and a clear error.

The driver is this process (``rpent-eval`` / ``rpent-batch``); it must run on a cluster node
(``auto`` / ``HOST:PORT``) or reach the head's Ray Client server (``ray://HOST:PORT``, port 10001
by default). ``local`` starts a private one-node cluster on this machine for the run (all its CPUs,
its own temp folder, stopped at :func:`disconnect` or exit; :mod:`rpent.cluster.local`). Every node needs the same Python, rpent and its model weights at the same paths
(docs/guides/multi-node.md).
"""

from __future__ import annotations

import atexit
import concurrent.futures
import logging
import os
import time
from typing import Any

from rpent.cluster.errors import ClusterConnectError

log = logging.getLogger("rpent.cluster")

_PRIVATE: Any = None
"""The private local cluster that ``connect("local")`` started (a ``LocalRayCluster``), or None."""


def import_ray() -> Any:
    """Import Ray or raise :class:`ClusterConnectError` naming the install command."""
    try:
        import ray
    except ImportError:
        raise ClusterConnectError(
            'Ray is not installed; install the extra with: pip install -e ".[ray]" (on every node)'
        ) from None
    return ray


def connect(address: str, timeout_s: float = 60.0, *, retry_pause_s: float = 2.0) -> Any:
    """``ray.init(address)`` unless already connected; returns the ``ray`` module.

    A failed connection attempt (a cluster still starting, a GCS too loaded to answer in time: Ray
    raises ``ConnectionError`` and others) is retried after ``retry_pause_s`` (doubling, at most
    10 s) until ``timeout_s`` is spent; one attempt that does not return within what is left of
    ``timeout_s`` ends the wait.

    Args:
        address: ``auto``, ``local`` (start a private cluster on this machine: :func:`start_private`),
            ``ray://HOST:PORT`` or ``HOST:PORT``.
        timeout_s: seconds to wait for the cluster, every attempt included.
        retry_pause_s: first pause between attempts.

    Raises:
        ClusterConnectError: Ray missing, or no connection within ``timeout_s`` (naming the attempts and
            the last error).
    """
    if address == "local":
        address = start_private()
    ray = import_ray()
    if ray.is_initialized():
        return ray
    t0 = time.monotonic()
    deadline = t0 + timeout_s
    errors: list[str] = []
    # a GCS that does not listen would keep ray.init in native code (holding the GIL, so no Python
    # timeout can end it) for minutes: wait for the port to accept a connection first, bounded
    probe = _probe(address, deadline)
    if probe is not None:
        raise ClusterConnectError(
            f"no Ray cluster answered at {address!r} within {timeout_s:.0f} s ({probe}); start one with "
            "`ray start --head` (or check the address / ray.connect_timeout_s)"
        )
    pause = retry_pause_s
    while True:
        left = deadline - time.monotonic()
        pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="ray-connect")
        future = pool.submit(ray.init, address=address, logging_level=logging.WARNING, log_to_driver=False)
        try:
            future.result(timeout=max(left, 0.1))
            break
        except concurrent.futures.TimeoutError:
            raise ClusterConnectError(
                f"no Ray cluster answered at {address!r} within {timeout_s:.0f} s ({len(errors) + 1} attempt(s)"
                + (f"; last error: {errors[-1]}" if errors else "")
                + "); start one with `ray start --head` (or check the address / ray.connect_timeout_s)"
            ) from None
        except Exception as exc:  # noqa: BLE001 - Ray raises several types for a bad or busy address
            errors.append(f"{type(exc).__name__}: {str(exc).strip()[:300]}")
            try:
                ray.shutdown()  # whatever the failed attempt set up
            except Exception:  # noqa: BLE001
                pass
        finally:
            pool.shutdown(wait=False)
        if time.monotonic() + pause >= deadline:
            raise ClusterConnectError(
                f"cannot connect to the Ray cluster at {address!r}: {len(errors)} attempt(s) in "
                f"{time.monotonic() - t0:.0f} s failed; last error: {errors[-1]}; check that the cluster runs "
                "(`ray status`) and the address, or raise ray.connect_timeout_s"
            )
        log.warning("connecting to the Ray cluster at %s failed (%s); retrying in %.0f s", address, errors[-1], pause)
        time.sleep(pause)
        pause = min(pause * 2, 10.0)
    if errors:
        log.warning("connected to the Ray cluster at %s after %d failed attempt(s)", address, len(errors))
    log.info("connected to Ray cluster at %s: %s", address, ray.cluster_resources())
    return ray


def _probe(address: str, deadline: float) -> str | None:
    """Wait until ``HOST:PORT`` (or ``ray://HOST:PORT``) accepts a TCP connection, retrying until
    ``deadline`` (``time.monotonic()``); None when it did (or for ``auto``), else the last error."""
    import socket

    if address == "auto":
        return None
    host, _, port = address.removeprefix("ray://").rpartition(":")
    last = "no attempt"
    while True:
        left = deadline - time.monotonic()
        try:
            with socket.create_connection((host, int(port)), timeout=max(0.5, min(5.0, left))):
                return None
        except OSError as exc:
            last = f"{host}:{port}: {exc.strerror or exc}"
        if time.monotonic() + 0.5 >= deadline:
            return last
        time.sleep(0.5)


def start_private() -> str:
    """Start (once per process) a one-node Ray cluster on 127.0.0.1 with this machine's CPUs, in a temp
    folder of its own, stopped by :func:`disconnect` or at exit; returns its GCS address ``127.0.0.1:PORT``.

    Raises:
        ClusterConnectError: Ray missing, or the cluster did not start (each attempt's error named).
    """
    global _PRIVATE
    if _PRIVATE is None:
        import threading

        if threading.current_thread() is not threading.main_thread():
            raise ClusterConnectError("a private local Ray cluster must be started from the main thread "
                                      "(Ray's node start installs signal handlers); start it before any worker thread")
        from rpent.cluster.local import local_node_env, start_local_cluster

        local_node_env()  # loopback node IPs: before Ray is imported in this process
        import_ray()
        _PRIVATE = start_local_cluster({"num_cpus": os.cpu_count() or 1}, temp_prefix="rray_local_")
        atexit.register(_stop_private)
        log.info("started a private local Ray cluster at %s (%s)", _PRIVATE.address, _PRIVATE.temp_dir)
    return _PRIVATE.address


def private_folder() -> str | None:
    """The temp folder of the private cluster :func:`start_private` started (None when none runs)."""
    return _PRIVATE.temp_dir if _PRIVATE is not None else None


def _stop_private() -> None:
    global _PRIVATE
    if _PRIVATE is not None:
        cluster, _PRIVATE = _PRIVATE, None
        cluster.shutdown()


def disconnect() -> None:
    """``ray.shutdown()`` when connected, and stop the private cluster of ``connect("local")`` (idempotent)."""
    try:
        import ray
    except ImportError:
        return
    if ray.is_initialized():
        ray.shutdown()
    _stop_private()
