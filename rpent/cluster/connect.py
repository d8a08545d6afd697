"""Connect the driver to a Ray cluster with a bounded wait and a clear error.

The driver is this process (``rpent-eval`` / ``rpent-batch``); it must run on a cluster node
(``auto`` / ``HOST:PORT``) or reach the head's Ray Client server (``ray://HOST:PORT``, port 10001
by default). Every node needs the same Python, rpent and its model weights at the same paths
(README "Multi-node").
"""

from __future__ import annotations

import concurrent.futures
import logging
from typing import Any

from rpent.cluster.errors import ClusterConnectError

log = logging.getLogger("rpent.cluster")


def import_ray() -> Any:
    """Import Ray or raise :class:`ClusterConnectError` naming the install command."""
    try:
        import ray
    except ImportError:
        raise ClusterConnectError(
            'Ray is not installed; install the extra with: pip install -e ".[ray]" (on every node)'
        ) from None
    return ray


def connect(address: str, timeout_s: float = 60.0) -> Any:
    """``ray.init(address)`` unless already connected; returns the ``ray`` module.

    Args:
        address: ``auto``, ``ray://HOST:PORT`` or ``HOST:PORT``.
        timeout_s: seconds to wait for the cluster.

    Raises:
        ClusterConnectError: Ray missing, no cluster at ``address``, or no answer within ``timeout_s``.
    """
    ray = import_ray()
    if ray.is_initialized():
        return ray
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="ray-connect")
    future = pool.submit(ray.init, address=address, logging_level=logging.WARNING, log_to_driver=False)
    try:
        future.result(timeout=timeout_s)
    except concurrent.futures.TimeoutError:
        raise ClusterConnectError(
            f"no Ray cluster answered at {address!r} within {timeout_s:.0f} s; start one with "
            "`ray start --head` (or check the address / ray.connect_timeout_s)"
        ) from None
    except ConnectionError as exc:
        raise ClusterConnectError(f"cannot connect to the Ray cluster at {address!r}: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - Ray raises several types for a bad address
        raise ClusterConnectError(f"cannot connect to the Ray cluster at {address!r}: {type(exc).__name__}: {exc}") from None
    finally:
        pool.shutdown(wait=False)
    log.info("connected to Ray cluster at %s: %s", address, ray.cluster_resources())
    return ray


def disconnect() -> None:
    """``ray.shutdown()`` when connected (idempotent)."""
    try:
        import ray
    except ImportError:
        return
    if ray.is_initialized():
        ray.shutdown()
