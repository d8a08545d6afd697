"""Refuse a placement the cluster cannot satisfy, before anything starts.

Ray would otherwise queue an actor that fits no node forever (an "infeasible" demand) or wait for
resources that never free up. :func:`check_placement` compares each role's demand with the live
nodes' total resources (``ray.nodes()``) and raises :class:`ClusterConfigError` naming the numbers:

* no node offers one unit of a role's demand (e.g. ``{GPU: 1}`` on a CPU-only cluster, or a custom
  resource no node declares);
* a role asks for more units than the nodes can hold (replicas above the GPUs available: one
  replica per GPU);
* all roles together need more of a resource than the cluster has.

The check is on totals, not on what is free right now: other jobs on a shared cluster may still
delay the start (bounded by the callers' timeouts).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from rpent.cluster.errors import ClusterConfigError
from rpent.cluster.settings import ResourceRequest


@dataclass(frozen=True)
class NodeInfo:
    """One live cluster node.

    Attributes:
        node_id: Ray node id (hex).
        address: node IP (``NodeManagerAddress``).
        resources: total resources, e.g. ``{"CPU": 16, "GPU": 8, "memory": ..., "sim_node": 1}``.
    """

    node_id: str
    address: str
    resources: dict[str, float]

    def describe(self) -> str:
        """``IP {CPU: 16, GPU: 8, sim_node: 1}`` (Ray's bookkeeping resources left out)."""
        shown = {k: v for k, v in sorted(self.resources.items())
                 if not k.startswith("node:") and k not in ("memory", "object_store_memory")}
        return f"{self.address}[{self.node_id[:8]}] {{" + ", ".join(f"{k}: {v:g}" for k, v in shown.items()) + "}"


@dataclass(frozen=True)
class Demand:
    """``count`` units of ``request`` for a role named ``label`` (used in messages)."""

    label: str
    request: ResourceRequest
    count: int
    hint: str = ""


def live_nodes(ray: Any) -> list[NodeInfo]:
    """The cluster's live nodes (``ray.nodes()`` entries with ``Alive``)."""
    return [
        NodeInfo(str(n["NodeID"]), str(n.get("NodeManagerAddress", "?")), {k: float(v) for k, v in n["Resources"].items()})
        for n in ray.nodes() if n.get("Alive")
    ]


def node_capacity(resources: dict[str, float], request: ResourceRequest) -> int:
    """How many units of ``request`` fit on a node with ``resources`` (0 if one does not)."""
    fits = math.inf
    for key, amount in request.demand().items():
        fits = min(fits, math.floor(resources.get(key, 0.0) / amount + 1e-9))
    return int(fits) if fits != math.inf else 1_000_000


def check_placement(nodes: list[NodeInfo], demands: list[Demand]) -> None:
    """Raise :class:`ClusterConfigError` if ``demands`` cannot be placed on ``nodes`` (see module doc)."""
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
