"""The ``ray`` section of an ``rpent-eval`` / ``rpent-batch`` YAML, validated into dataclasses.

Schema (every key optional; ``--ray-address`` on the command line overrides ``address``)::

    ray:
      address: auto                 # auto (RAY_ADDRESS / the local head) | local | ray://HOST:PORT | HOST:PORT
      connect_timeout_s: 60         # bounded wait for the cluster to answer
      call_timeout_s: 900           # longest wait for one actor reply (an env chunk, a batch cell)
      preflight_wait_s: 10          # wait this long for resources other jobs hold, then refuse
      env_worker:                   # one rpent-eval env worker actor
        num_cpus: 1
        num_gpus: 0                 # > 0: the worker renders with EGL on the GPU Ray assigns it
        resources: {}               # custom resources pin roles to node groups, e.g. {sim_node: 1}
        max_restarts: 2             # restarts of a worker whose actor was lost (node died); its episodes re-run
      results: auto                 # rpent-batch: shared (every node mounts the results root) | copy | auto
      cell:                         # one rpent-batch cell task
        num_cpus: 1
        resources: {}
        max_retries: 2              # cell re-runs after its node died (the cell is counted once)
      replicas:                     # long-lived RPC servers, one replica per GPU by default
        vla:
          server: pi05              # pi05 | apxinf | replay | sam3 (the module to run) ...
          args: [--model-path, /models/pi05_libero]   # ... with these arguments
          count: 2                  # replicas (<= GPUs that can hold one each)
          num_gpus: 1
          num_cpus: 1
          resources: {}
          transport: socket         # socket | http
          max_restarts: 1           # restarts per replica before it is dropped from the pool
          ready_timeout_s: 600      # model loading counts
        sam3: {server: sam3, args: [--checkpoint, /models/sam3.pt], count: 1}

Resource names follow Ray: ``CPU``, ``GPU`` and custom names declared with ``ray start
--resources='{"sim_node": 1}'`` (RLinf's node groups map onto custom resources).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from rpent.cluster.errors import ClusterConfigError

SERVER_MODULES = {
    "pi05": "rpent.robots.components.pi05_vla_server",
    "apxinf": "rpent.robots.components.apxinf_vla_server",
    "replay": "rpent.robots.components.replay_policy_server",
    "sam3": "rpent.robots.components.sam3_server",
}
"""Replica ``server`` name -> module run as ``python -m MODULE ARGS --transport T --host IP --port 0``."""

ROLES = ("vla", "sam3")
_ADDRESS_RE = re.compile(r"^(auto|local|ray://[^\s:/]+:\d{1,5}|[^\s:/]+:\d{1,5})$")


@dataclass(frozen=True)
class ResourceRequest:
    """Resources one actor or task holds while it runs.

    Attributes:
        num_cpus: logical CPUs (Ray ``num_cpus``; fractions allowed).
        num_gpus: GPUs (Ray ``num_gpus``); Ray sets ``CUDA_VISIBLE_DEVICES`` to the assigned ones.
        resources: custom resources, name -> amount (e.g. ``{"sim_node": 1}``).
    """

    num_cpus: float = 1.0
    num_gpus: float = 0.0
    resources: dict[str, float] = field(default_factory=dict)

    def demand(self) -> dict[str, float]:
        """``{"CPU": n, "GPU": n, **custom}`` without zero entries (what a node must offer)."""
        out = {"CPU": self.num_cpus, "GPU": self.num_gpus, **self.resources}
        return {k: float(v) for k, v in out.items() if v}

    def ray_options(self) -> dict[str, Any]:
        """Keyword arguments for ``.options(...)`` of a Ray actor class or remote function."""
        opts: dict[str, Any] = {"num_cpus": self.num_cpus, "num_gpus": self.num_gpus}
        if self.resources:
            opts["resources"] = dict(self.resources)
        return opts

    def describe(self) -> str:
        """Human-readable demand, e.g. ``{CPU: 1, GPU: 1}``."""
        return "{" + ", ".join(f"{k}: {_num(v)}" for k, v in self.demand().items()) + "}"


@dataclass(frozen=True)
class ReplicaSettings:
    """One role's replica pool (``ray.replicas.<role>``).

    Attributes:
        role: ``vla`` or ``sam3``.
        server: key of :data:`SERVER_MODULES`.
        args: extra server arguments (model path, flags); the RPC flags are added by the pool.
        count: replicas to start.
        request: resources of each replica (default one GPU, one CPU).
        transport: ``socket`` or ``http``.
        max_restarts: restarts per replica before it is dropped.
        ready_timeout_s: seconds from actor creation to the server's readiness line.
    """

    role: str
    server: str
    args: tuple[str, ...]
    count: int
    request: ResourceRequest
    transport: str = "socket"
    max_restarts: int = 1
    ready_timeout_s: float = 600.0

    @property
    def module(self) -> str:
        """The server module (``python -m`` target)."""
        return SERVER_MODULES[self.server]


@dataclass(frozen=True)
class RaySettings:
    """Validated ``ray`` section.

    Attributes:
        address: ``auto``, ``local`` (a private cluster on this machine, started for the run and stopped
            at exit), ``ray://HOST:PORT`` or ``HOST:PORT``.
        connect_timeout_s: seconds for the cluster to answer ``ray.init``.
        call_timeout_s: longest wait for one actor reply before the run fails with a clear error.
        preflight_wait_s: seconds to wait for free resources (held by other jobs) before refusing
            (:func:`rpent.cluster.preflight.preflight`).
        env_worker: resources of one rpent-eval env worker actor.
        env_worker_max_restarts: restarts of one env worker whose actor was lost (its node died);
            the unfinished episodes of its epoch run again on the new actor, each counted once.
        cell: resources of one rpent-batch cell task.
        cell_max_retries: re-runs of a cell whose node died.
        replicas: role -> :class:`ReplicaSettings`.
        results: rpent-batch run directories: ``shared``, ``copy`` or ``auto`` (see
            :mod:`rpent.batch.ray_executor`).
    """

    address: str
    connect_timeout_s: float = 60.0
    call_timeout_s: float = 900.0
    preflight_wait_s: float = 10.0
    env_worker: ResourceRequest = field(default_factory=ResourceRequest)
    env_worker_max_restarts: int = 2
    cell: ResourceRequest = field(default_factory=ResourceRequest)
    cell_max_retries: int = 2
    replicas: dict[str, ReplicaSettings] = field(default_factory=dict)
    results: str = "auto"


def _num(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else f"{v:g}"


def _number(section: dict, key: str, where: str, default: float, *, minimum: float = 0.0, integer: bool = False) -> Any:
    value = section.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (integer and not float(value).is_integer()):
        kind = "an integer" if integer else "a number"
        raise ClusterConfigError(f"{where}.{key} must be {kind} >= {_num(minimum)}, got {value!r}")
    if value < minimum or not math.isfinite(float(value)):
        raise ClusterConfigError(f"{where}.{key} must be >= {_num(minimum)}, got {value!r}")
    return int(value) if integer else float(value)


def _mapping(value: Any, where: str) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ClusterConfigError(f"{where} must be a mapping, got {type(value).__name__} {value!r}")
    return value


def _unknown(section: dict, allowed: tuple[str, ...], where: str) -> None:
    extra = sorted(set(section) - set(allowed))
    if extra:
        raise ClusterConfigError(f"{where}: unknown key(s) {extra}; allowed: {', '.join(allowed)}")


def _request(value: Any, where: str, *, cpus: float, gpus: float) -> ResourceRequest:
    section = _mapping(value, where)
    _unknown(section, ("num_cpus", "num_gpus", "resources"), where)
    custom = _mapping(section.get("resources"), f"{where}.resources")
    res: dict[str, float] = {}
    for name, amount in custom.items():
        if name in ("CPU", "GPU"):
            raise ClusterConfigError(f"{where}.resources: use num_cpus / num_gpus instead of {name!r}")
        res[str(name)] = _number(custom, name, f"{where}.resources", 0.0, minimum=0.0)
    return ResourceRequest(
        num_cpus=_number(section, "num_cpus", where, cpus),
        num_gpus=_number(section, "num_gpus", where, gpus),
        resources=res,
    )


def _replica(role: str, value: Any) -> ReplicaSettings:
    where = f"ray.replicas.{role}"
    section = _mapping(value, where)
    _unknown(section, ("server", "args", "count", "num_cpus", "num_gpus", "resources", "transport", "max_restarts",
                       "ready_timeout_s"), where)
    server = section.get("server", "pi05" if role == "vla" else "sam3")
    if server not in SERVER_MODULES:
        raise ClusterConfigError(f"{where}.server {server!r} unknown; choose one of {', '.join(SERVER_MODULES)}")
    args = section.get("args") or []
    if not isinstance(args, (list, tuple)) or not all(isinstance(a, (str, int, float)) for a in args):
        raise ClusterConfigError(f"{where}.args must be a list of strings, got {args!r}")
    transport = section.get("transport", "socket")
    if transport not in ("socket", "http"):
        raise ClusterConfigError(f"{where}.transport must be socket or http, got {transport!r}")
    request = _request({k: section[k] for k in ("num_cpus", "num_gpus", "resources") if k in section}, where,
                       cpus=1.0, gpus=1.0)
    return ReplicaSettings(
        role=role, server=server, args=tuple(str(a) for a in args),
        count=_number(section, "count", where, 1, minimum=1, integer=True),
        request=request, transport=transport,
        max_restarts=_number(section, "max_restarts", where, 1, minimum=0, integer=True),
        ready_timeout_s=_number(section, "ready_timeout_s", where, 600.0, minimum=1.0),
    )


def parse_ray_section(section: Any, address: str | None = None) -> RaySettings | None:
    """Validate a ``ray`` section (a plain dict, e.g. from YAML) plus the ``--ray-address`` flag.

    Args:
        section: the section (None or ``{}`` when absent).
        address: ``--ray-address`` (wins over ``section["address"]``).

    Returns:
        :class:`RaySettings`, or None when neither an address nor a section asks for Ray (the local
        executor runs).

    Raises:
        ClusterConfigError: a malformed key, naming it and the allowed values.
    """
    section = _mapping(section, "ray")
    _unknown(section, ("address", "connect_timeout_s", "call_timeout_s", "preflight_wait_s", "env_worker", "cell",
                       "replicas", "results"), "ray")
    address = address or section.get("address")
    if not address:
        if section:
            raise ClusterConfigError(
                "the ray section has no address; set ray.address: auto (or local, or ray://HOST:PORT) or pass --ray-address"
            )
        return None
    address = str(address)
    if not _ADDRESS_RE.match(address):
        raise ClusterConfigError(
            f"ray address {address!r} is malformed; use auto, local (a private cluster on this machine), ray://HOST:PORT "
            "(Ray Client) or HOST:PORT (the head's GCS)"
        )
    cell_section = dict(_mapping(section.get("cell"), "ray.cell"))
    max_retries = _number(cell_section, "max_retries", "ray.cell", 2, minimum=0, integer=True)
    cell_section.pop("max_retries", None)
    worker_section = dict(_mapping(section.get("env_worker"), "ray.env_worker"))
    worker_restarts = _number(worker_section, "max_restarts", "ray.env_worker", 2, minimum=0, integer=True)
    worker_section.pop("max_restarts", None)
    replicas_section = _mapping(section.get("replicas"), "ray.replicas")
    _unknown(replicas_section, ROLES, "ray.replicas")
    results = section.get("results", "auto")
    if results not in ("auto", "shared", "copy"):
        raise ClusterConfigError(f"ray.results must be auto, shared or copy, got {results!r}")
    return RaySettings(
        address=address, results=results,
        connect_timeout_s=_number(section, "connect_timeout_s", "ray", 60.0, minimum=1.0),
        call_timeout_s=_number(section, "call_timeout_s", "ray", 900.0, minimum=1.0),
        preflight_wait_s=_number(section, "preflight_wait_s", "ray", 10.0, minimum=0.0),
        env_worker=_request(worker_section, "ray.env_worker", cpus=1.0, gpus=0.0),
        env_worker_max_restarts=worker_restarts,
        cell=_request(cell_section, "ray.cell", cpus=1.0, gpus=0.0),
        cell_max_retries=max_retries,
        replicas={role: _replica(role, value) for role, value in replicas_section.items()},
    )
