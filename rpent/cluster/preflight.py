"""Refuse a placement the cluster cannot satisfy, before anything starts.

Ray would otherwise queue an actor that fits no node forever (an "infeasible" demand) or wait for
resources that never free up. :func:`preflight` checks each role's demand twice and raises
:class:`ClusterConfigError` naming the numbers:

1. against the live nodes' **total** resources (``ray.nodes()``), a configuration the cluster can
   never hold:

   * no node offers one unit of a role's demand (e.g. ``{GPU: 1}`` on a CPU-only cluster, or a
     custom resource no node declares);
   * a role asks for more units than the nodes can hold (replicas above the GPUs: one replica per
     GPU);
   * all roles together need more of a resource than the cluster has;

2. against what is **free now** on each node (``ray._private.state.available_resources_per_node``,
   a Ray DeveloperAPI; the cluster-wide ``ray.available_resources()`` where that is not reachable,
   e.g. through Ray Client): every role's units are packed onto the nodes' free resources, most
   constrained role first; when some do not fit, :class:`ClusterBusyError` names the role, the
   units that fit, the resources free and total per node. Resources held by other jobs (or by
   actors of an earlier run that are still being torn down) are waited for up to ``wait_s``
   seconds before refusing.

Ray's view of free resources is refreshed by the raylets' periodic reports (sub-second), so a
resource freed a moment ago can still count as held; ``wait_s`` covers that.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, field
from typing import Any

from rpent.cluster.errors import ClusterBusyError, ClusterConfigError
from rpent.cluster.settings import ResourceRequest

log = logging.getLogger("rpent.cluster")

_BOOKKEEPING = ("memory", "object_store_memory")


def _shown(resources: dict[str, float]) -> dict[str, float]:
    return {k: v for k, v in sorted(resources.items()) if not k.startswith("node:") and k not in _BOOKKEEPING}


@dataclass(frozen=True)
class NodeInfo:
    """One live cluster node.

    Attributes:
        node_id: Ray node id (hex).
        address: node IP (``NodeManagerAddress``).
        resources: total resources, e.g. ``{"CPU": 16, "GPU": 8, "memory": ..., "sim_node": 1}``.
        available: resources free now (same keys; a key missing means 0 free), or None when the
            per-node view could not be read (then only cluster-wide free totals are checked).
    """

    node_id: str
    address: str
    resources: dict[str, float]
    available: dict[str, float] | None = field(default=None)

    def describe(self) -> str:
        """``IP[id] {CPU: 16, GPU: 8, sim_node: 1}`` (Ray's bookkeeping resources left out)."""
        return (f"{self.address}[{self.node_id[:8]}] {{"
                + ", ".join(f"{k}: {v:g}" for k, v in _shown(self.resources).items()) + "}")

    def describe_free(self) -> str:
        """``IP[id] {CPU: 0/1 free, GPU: 1/1 free}``."""
        free = self.available or {}
        return (f"{self.address}[{self.node_id[:8]}] {{"
                + ", ".join(f"{k}: {free.get(k, 0.0):g}/{v:g}" for k, v in _shown(self.resources).items())
                + " free}")


@dataclass(frozen=True)
class Demand:
    """``count`` units of ``request`` for a role named ``label`` (used in messages)."""

    label: str
    request: ResourceRequest
    count: int
    hint: str = ""


def _available_per_node(ray: Any) -> dict[str, dict[str, float]] | None:
    try:
        from ray._private.state import available_resources_per_node

        return {str(k): {r: float(v) for r, v in res.items()} for k, res in available_resources_per_node().items()}
    except Exception as exc:  # noqa: BLE001 - Ray Client, or a Ray that moved the DeveloperAPI
        log.debug("per-node free resources unavailable (%s: %s); checking cluster-wide totals", type(exc).__name__, exc)
        return None


def live_nodes(ray: Any, *, with_available: bool = True) -> list[NodeInfo]:
    """The cluster's live nodes (``ray.nodes()`` entries with ``Alive``), with their free resources.

    Args:
        ray: the connected ``ray`` module.
        with_available: also read each node's free resources (``NodeInfo.available``).
    """
    free = _available_per_node(ray) if with_available else None
    nodes = []
    for n in ray.nodes():
        if not n.get("Alive"):
            continue
        node_id = str(n["NodeID"])
        nodes.append(NodeInfo(node_id, str(n.get("NodeManagerAddress", "?")),
                              {k: float(v) for k, v in n["Resources"].items()},
                              None if free is None else dict(free.get(node_id, {}))))
    return nodes


def node_capacity(resources: dict[str, float], request: ResourceRequest) -> int:
    """How many units of ``request`` fit on a node with ``resources`` (0 if one does not)."""
    fits = math.inf
    for key, amount in request.demand().items():
        fits = min(fits, math.floor(resources.get(key, 0.0) / amount + 1e-9))
    return int(fits) if fits != math.inf else 1_000_000


def free_capacity(nodes: list[NodeInfo], request: ResourceRequest, cluster_free: dict[str, float] | None = None) -> int:
    """How many units of ``request`` fit in what is free now (per node; cluster-wide when the nodes'
    free view is missing, using ``cluster_free``)."""
    if nodes and all(n.available is not None for n in nodes):
        return sum(min(node_capacity(n.available or {}, request), node_capacity(n.resources, request))
                   for n in nodes)
    return node_capacity(cluster_free or {}, request)


def check_placement(nodes: list[NodeInfo], demands: list[Demand]) -> None:
    """Raise :class:`ClusterConfigError` if ``demands`` can never be placed on ``nodes`` (their totals)."""
    if not nodes:
        raise ClusterConfigError("the Ray cluster has no live node; start one with `ray start --head`")
    listing = "; ".join(n.describe() for n in nodes)
    for d in demands:
        if d.count <= 0:
            continue
        caps = [node_capacity(n.resources, d.request) for n in nodes]
        if max(caps) == 0:
            raise ClusterConfigError(
                f"{d.label}: no node offers {d.request.describe()} (the cluster's nodes: {listing}); "
                f"add a node with it (ray start --resources / --num-gpus) or change the request{d.hint}"
            )
        if sum(caps) < d.count:
            gpus = sum(n.resources.get("GPU", 0.0) for n in nodes)
            what = (f"the cluster has {gpus:g} GPUs ({d.request.num_gpus:g} per unit)" if d.request.num_gpus
                    else f"the nodes hold at most {sum(caps)}")
            raise ClusterConfigError(
                f"{d.label}: {d.count} requested but {what}: at most {sum(caps)} fit "
                f"(each needs {d.request.describe()}; nodes: {listing}); lower the count or add nodes{d.hint}"
            )
    totals: dict[str, float] = {}
    for n in nodes:
        for k, v in n.resources.items():
            totals[k] = totals.get(k, 0.0) + v
    need: dict[str, float] = {}
    for d in demands:
        for k, v in d.request.demand().items():
            need[k] = need.get(k, 0.0) + v * max(d.count, 0)
    for k, v in sorted(need.items()):
        if v > totals.get(k, 0.0) + 1e-9:
            parts = ", ".join(f"{d.label} {d.count} x {d.request.demand().get(k, 0):g}" for d in demands
                              if d.request.demand().get(k))
            raise ClusterConfigError(
                f"together the roles need {v:g} {k} but the cluster has {totals.get(k, 0.0):g} ({parts}); "
                "lower the counts or add nodes"
            )


def _pack(nodes: list[NodeInfo], demands: list[Demand]) -> tuple[Demand, int, list[str]] | None:
    """Greedy packing of every demand onto the nodes' free resources (most constrained first, each unit
    on the node with the most room for it). Returns ``(demand, units placed, earlier labels)`` of the
    first demand that does not fit, or None when all fit."""
    free = [dict(n.available or {}) for n in nodes]
    live = [d for d in demands if d.count > 0]
    # fewer nodes that could ever hold it, then more GPUs per unit: placed first
    live.sort(key=lambda d: (sum(1 for n in nodes if node_capacity(n.resources, d.request) > 0), -d.request.num_gpus))
    placed_before: list[str] = []
    for d in live:
        need = d.request.demand()
        placed = 0
        for _ in range(d.count):
            caps = [node_capacity(f, d.request) for f in free]
            best = max(range(len(free)), key=lambda i: caps[i]) if free else -1
            if best < 0 or caps[best] == 0:
                return d, placed, placed_before
            for k, v in need.items():
                free[best][k] = free[best].get(k, 0.0) - v
            placed += 1
        placed_before.append(d.label)
    return None


def check_free(nodes: list[NodeInfo], demands: list[Demand], cluster_free: dict[str, float] | None = None) -> None:
    """Raise :class:`ClusterBusyError` when ``demands`` do not all fit in what is free now.

    Args:
        nodes: :func:`live_nodes` (with ``available``).
        demands: every role of the run (packed together).
        cluster_free: ``ray.available_resources()``, used when a node's free view is missing.
    """
    if nodes and all(n.available is not None for n in nodes):
        miss = _pack(nodes, demands)
        if miss is None:
            return
        d, placed, before = miss
        total_fit = sum(node_capacity(n.resources, d.request) for n in nodes)
        alone = free_capacity(nodes, d.request)
        held = ", ".join(f"{k}: {sum((n.available or {}).get(k, 0.0) for n in nodes):g} of "
                         f"{sum(n.resources.get(k, 0.0) for n in nodes):g} free" for k in d.request.demand())
        after = f" after {', '.join(before)}" if before and placed < alone else ""
        raise ClusterBusyError(
            f"{d.label}: {d.count} requested (each {d.request.describe()}) and the cluster could hold {total_fit}, "
            f"but only {placed} fit in what is free now{after} ({held}; per node: "
            f"{'; '.join(n.describe_free() for n in nodes)}); other Ray jobs or actors hold the rest: wait for them, "
            f"stop them, or lower the count{d.hint}"
        )
    free = dict(cluster_free or {})
    need: dict[str, float] = {}
    for d in demands:
        for k, v in d.request.demand().items():
            need[k] = need.get(k, 0.0) + v * max(d.count, 0)
    for k, v in sorted(need.items()):
        if v > free.get(k, 0.0) + 1e-9:
            total = sum(n.resources.get(k, 0.0) for n in nodes)
            parts = ", ".join(f"{d.label} {d.count} x {d.request.demand().get(k, 0):g}" for d in demands
                              if d.request.demand().get(k))
            raise ClusterBusyError(
                f"the roles need {v:g} {k} ({parts}) but only {free.get(k, 0.0):g} of the cluster's {total:g} are free "
                "now; other Ray jobs or actors hold the rest: wait for them, stop them, or lower the counts"
            )


def preflight(ray: Any, demands: list[Demand], *, wait_s: float = 10.0, poll_s: float = 0.5) -> list[NodeInfo]:
    """Check ``demands`` against the totals (refused at once) and against the free resources (waited for
    up to ``wait_s`` seconds, then refused); returns the nodes as last seen.

    Raises:
        ClusterConfigError: the cluster can never hold the demands (see :func:`check_placement`).
        ClusterBusyError: they do not fit in what is free within ``wait_s`` (see :func:`check_free`).
    """
    nodes = live_nodes(ray)
    check_placement(nodes, demands)
    deadline = time.monotonic() + wait_s
    while True:
        try:
            check_free(nodes, demands, None if all(n.available is not None for n in nodes)
                       else {k: float(v) for k, v in ray.available_resources().items()})
            return nodes
        except ClusterBusyError as exc:
            if time.monotonic() >= deadline:
                raise ClusterBusyError(f"{exc} (waited {wait_s:g} s, ray.preflight_wait_s)") from None
            log.info("waiting up to %.0f s for resources to free up: %s", deadline - time.monotonic(), exc)
        time.sleep(poll_s)
        nodes = live_nodes(ray)
        check_placement(nodes, demands)  # a node may have gone meanwhile
