"""Model servers (Pi0.5, ApxInf, replay, SAM3) as long-lived Ray actors, one replica per GPU.

Each :class:`ReplicaActor` runs one of rpent's existing RPC servers as a child process on the node
Ray placed it on (``python -m <server module> ARGS --transport T --host <node IP> --port 0
--parent-watch``) and reports the endpoint from the server's readiness line. Clients talk to that
endpoint with the ordinary RPC client (:class:`rpent.rpc.RpcClient`), exactly as on one machine;
Ray only places and supervises the server. When the actor dies (node lost, killed) the server's
stdin closes and ``--parent-watch`` stops it.

A server bound to a non-loopback address requires a token (``RPENT_RPC_TOKEN``): the pool passes
the driver's token to every replica, generating one (and setting it in the driver's environment,
where :class:`~rpent.rpc.RpcClient` reads it) when none is set.

:class:`ReplicaPool` starts ``count`` replicas of a role, waits for them with a bounded timeout,
hands endpoints to clients (sticky per client key, assigned to the least-loaded live replica),
and on :meth:`ReplicaPool.report_failure` checks the replica: a dead one is restarted (up to
``max_restarts`` times) or dropped from the pool; each decision is logged with its reason.
"""

from __future__ import annotations

import functools
import ipaddress
import logging
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from rpent.cluster.errors import ClusterError, ReplicaPoolError
from rpent.cluster.settings import ReplicaSettings
from rpent.rpc.protocol import READY_PREFIX, TOKEN_ENV

log = logging.getLogger("rpent.cluster.replicas")

HEALTH_TIMEOUT_S = 10.0
"""Seconds for one liveness check of a replica (actor ping + server ``healthz``)."""


def _unblocked_signals() -> None:  # runs in the child between fork and exec
    """An empty signal mask for the server: a Ray worker runs its task with SIGINT blocked (Ray 2.60,
    ``SigBlk`` in ``/proc/<pid>/status``) and a blocked mask survives ``exec``, so a replica started
    from an actor would otherwise ignore SIGINT (same fix as ``rpent.batch.ray_executor``)."""
    signal.pthread_sigmask(signal.SIG_SETMASK, ())


class ReplicaServer:
    """The body of :class:`ReplicaActor`: one RPC server child process (usable without Ray in tests).

    Args:
        argv: server command without the RPC flags.
        transport: ``socket`` or ``http``.
        host: address to bind (the node's IP on a cluster).
        env: extra environment for the child (token, ``MUJOCO_GL``...).
        log_path: file receiving the child's stderr (a node-local path), or None to discard it.
    """

    def __init__(self, argv: list[str], transport: str, host: str, env: dict[str, str], log_path: str | None = None):
        self.argv = [*argv, "--transport", transport, "--host", host, "--port", "0", "--parent-watch"]
        self.env = {**os.environ, **env, "PYTHONUNBUFFERED": "1"}
        self.log_path = log_path
        self.proc: subprocess.Popen | None = None
        self.endpoint: str | None = None
        self._tail: deque[str] = deque(maxlen=30)

    def start(self, timeout_s: float) -> str:
        """Spawn the server and return its endpoint once the readiness line arrives.

        Raises:
            RuntimeError: the server exited or printed no readiness line within ``timeout_s``
                (its last output lines included).
        """
        err = open(self.log_path, "ab") if self.log_path else subprocess.DEVNULL  # noqa: SIM115
        try:
            self.proc = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err,
                                         env=self.env, text=True, preexec_fn=_unblocked_signals)
        finally:
            if err is not subprocess.DEVNULL:
                err.close()
        found: list[str] = []
        done = threading.Event()

        def read() -> None:
            assert self.proc is not None and self.proc.stdout is not None
            for line in self.proc.stdout:
                line = line.rstrip("\n")
                if line.startswith(READY_PREFIX) and not found:
                    found.append(line[len(READY_PREFIX):].strip())
                    done.set()
                else:
                    self._tail.append(line)
            done.set()

        threading.Thread(target=read, name="replica-stdout", daemon=True).start()
        if not done.wait(timeout_s) or not found:
            tail = " | ".join(self._tail)
            code = self.proc.poll()
            self.stop()
            if self.log_path and os.path.exists(self.log_path):
                with open(self.log_path, "rb") as f:
                    f.seek(max(0, os.path.getsize(self.log_path) - 1500))
                    tail += " | stderr: " + f.read().decode("utf-8", "replace")
            raise RuntimeError(
                f"{' '.join(self.argv[:3])} printed no readiness line within {timeout_s:.0f} s "
                f"(exit code {code}); output: {tail[-1500:]}"
            )
        self.endpoint = found[0]
        return self.endpoint

    def alive(self) -> dict[str, Any]:
        """``{"alive": bool, "pid", "returncode", "endpoint"}`` of the server process."""
        code = self.proc.poll() if self.proc is not None else None
        return {"alive": self.proc is not None and code is None, "pid": self.proc.pid if self.proc else None,
                "returncode": code, "endpoint": self.endpoint}

    def stop(self, grace_s: float = 5.0) -> None:
        """Close the server's stdin (``--parent-watch`` stops it), then terminate/kill (idempotent)."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        try:
            if proc.stdin is not None:
                proc.stdin.close()
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            proc.terminate()
            try:
                proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@functools.cache
def _actor_class() -> Any:
    import ray

    @ray.remote(max_restarts=0, max_concurrency=4)
    class ReplicaActor:
        """Ray actor holding one :class:`ReplicaServer` (see the module docstring)."""

        def __init__(self, argv: list[str], transport: str, env: dict[str, str], log_name: str):
            host = ray.util.get_node_ip_address()
            log_dir = os.path.join(tempfile.gettempdir(), "rpent_replicas")  # node-local server logs
            os.makedirs(log_dir, exist_ok=True)
            self.server = ReplicaServer(argv, transport, host, env, os.path.join(log_dir, log_name))

        def start(self, timeout_s: float) -> dict[str, Any]:
            endpoint = self.server.start(timeout_s)
            return {"endpoint": endpoint, "node_id": ray.get_runtime_context().get_node_id(),
                    "node_ip": ray.util.get_node_ip_address(), "pid": os.getpid(),
                    "server_pid": self.server.alive()["pid"], "log": self.server.log_path,
                    "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES")}

        def alive(self) -> dict[str, Any]:
            return self.server.alive()

        def stop(self) -> None:
            self.server.stop()

    return ReplicaActor


@dataclass
class Replica:
    """One replica as the pool sees it.

    Attributes:
        index: replica number within its role (stable across restarts).
        actor: Ray actor handle (None once dropped).
        endpoint: the server's endpoint (``socket://IP:PORT``).
        node_id / node_ip: where Ray placed it.
        restarts: restarts so far.
        clients: client keys currently assigned to it.
        alive: False once dropped.
    """

    index: int
    actor: Any = None
    endpoint: str = ""
    node_id: str = ""
    node_ip: str = ""
    restarts: int = 0
    clients: set[str] = field(default_factory=set)
    alive: bool = True
    info: dict[str, Any] = field(default_factory=dict)


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


class ReplicaPool:
    """``count`` replicas of one role on the cluster; sticky least-loaded endpoint assignment.

    Use as a context manager (replicas start on enter and are stopped on exit)::

        with ReplicaPool(settings.replicas["vla"]) as pool:
            endpoint = pool.endpoint_for("env-worker-0")

    Args:
        settings: the role's :class:`~rpent.cluster.settings.ReplicaSettings`.
        extra_env: environment for every server (e.g. ``{"MUJOCO_GL": "egl"}``).
        logger: where placement, restart and drop decisions are logged.

    Raises (on enter):
        ClusterError: a replica did not become ready within ``ready_timeout_s`` (all started ones
            are stopped again); the message names the role, the replica and the server's output.
    """

    def __init__(self, settings: ReplicaSettings, *, extra_env: dict[str, str] | None = None,
                 logger: logging.Logger | None = None):
        self.settings = settings
        self.log = logger or log
        self.replicas: list[Replica] = []
        self.events: list[dict[str, Any]] = []
        self._assign: dict[str, int] = {}
        self._lock = threading.RLock()
        token = os.environ.get(TOKEN_ENV) or ""
        if not token and _has_remote_nodes():  # servers bind the node IP: a non-loopback bind needs a token
            token = secrets.token_hex(16)
            os.environ[TOKEN_ENV] = token  # the driver's RPC clients read it from here
        self.env = {**({TOKEN_ENV: token} if token else {}), **(extra_env or {})}
        pythonpath = os.environ.get("PYTHONPATH")
        if pythonpath:
            self.env.setdefault("PYTHONPATH", pythonpath)

    # -- lifecycle -------------------------------------------------------------------------------
    def __enter__(self) -> ReplicaPool:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _argv(self) -> list[str]:
        return [sys.executable, "-m", self.settings.module, *self.settings.args]

    def _launch(self, rep: Replica) -> Any:
        cls = _actor_class()
        name = f"{self.settings.role}_{rep.index}_r{rep.restarts}.log"
        actor = cls.options(**self.settings.request.ray_options()).remote(
            self._argv(), self.settings.transport, self.env, name)
        return actor, actor.start.remote(self.settings.ready_timeout_s)

    def _record(self, kind: str, rep: Replica, reason: str) -> None:
        event = {"kind": kind, "role": self.settings.role, "replica": rep.index, "endpoint": rep.endpoint,
                 "node_ip": rep.node_ip, "restarts": rep.restarts, "reason": reason, "time": time.time()}
        with self._lock:
            self.events.append(event)
        self.log.warning("%s replica %d %s: %s", self.settings.role, rep.index, kind, reason)

    def _await_ready(self, pending: list[tuple[Replica, Any, Any]]) -> None:
        import ray

        deadline = time.monotonic() + self.settings.ready_timeout_s + 30.0
        for rep, actor, ref in pending:
            try:
                info = ray.get(ref, timeout=max(1.0, deadline - time.monotonic()))
            except Exception as exc:  # noqa: BLE001 - GetTimeoutError, RayActorError, the server's RuntimeError
                for r, a, _ in pending:
                    _kill(a)
                    r.actor = None
                raise ClusterError(
                    f"{self.settings.role} replica {rep.index} ({self.settings.server}, {self.settings.request.describe()}) "
                    f"did not become ready within {self.settings.ready_timeout_s:.0f} s: {type(exc).__name__}: {exc}"
                ) from None
            rep.actor, rep.endpoint = actor, info["endpoint"]
            rep.node_id, rep.node_ip, rep.info = info["node_id"], info["node_ip"], info
            self.log.info("%s replica %d ready at %s on node %s (CUDA_VISIBLE_DEVICES=%s, server log %s)",
                          self.settings.role, rep.index, rep.endpoint, rep.node_ip, info.get("cuda_visible_devices"),
                          info.get("log"))

    def start(self) -> None:
        """Create every replica actor and wait (bounded) until each server is ready."""
        pending = []
        for i in range(self.settings.count):
            rep = Replica(index=i)
            actor, ref = self._launch(rep)
            pending.append((rep, actor, ref))
        self._await_ready(pending)
        self.replicas = [rep for rep, _, _ in pending]

    def close(self) -> None:
        """Stop every replica's server and kill its actor (idempotent)."""
        import ray

        for rep in self.replicas:
            if rep.actor is not None:
                try:
                    ray.get(rep.actor.stop.remote(), timeout=HEALTH_TIMEOUT_S)
                except Exception:  # noqa: BLE001 - already dead
                    pass
                _kill(rep.actor)
                rep.actor = None
        self.replicas = []

    # -- clients -----------------------------------------------------------------------------------
    def live(self) -> list[Replica]:
        """Replicas still in the pool."""
        return [r for r in self.replicas if r.alive]

    def endpoints(self) -> list[str]:
        """Endpoints of the live replicas."""
        return [r.endpoint for r in self.live()]

    def endpoint_for(self, client: str) -> str:
        """The endpoint ``client`` should use: its current replica, else the least-loaded live one.

        Raises:
            ReplicaPoolError: no live replica is left.
        """
        with self._lock:
            idx = self._assign.get(client)
            if idx is not None and self.replicas[idx].alive:
                return self.replicas[idx].endpoint
            live = self.live()
            if not live:
                raise ReplicaPoolError(
                    f"no {self.settings.role} replica is left (every one died and its restarts are spent); "
                    f"events: {[e['reason'] for e in self.events][-3:]}"
                )
            rep = min(live, key=lambda r: (len(r.clients), r.index))
            rep.clients.add(client)
            self._assign[client] = rep.index
            return rep.endpoint

    def release(self, client: str) -> None:
        """``client`` is done (e.g. a batch cell ended): free its slot on its replica."""
        with self._lock:
            idx = self._assign.pop(client, None)
            if idx is not None:
                self.replicas[idx].clients.discard(client)

    def check(self, rep: Replica) -> str | None:
        """Liveness of ``rep``: None when its actor and server answer, else the reason."""
        import ray

        from rpent.rpc import RpcClient, RpcError

        if rep.actor is None:
            return "dropped"
        try:
            state = ray.get(rep.actor.alive.remote(), timeout=HEALTH_TIMEOUT_S)
        except Exception as exc:  # noqa: BLE001 - RayActorError (node lost, killed), GetTimeoutError
            return f"its actor on node {rep.node_ip} is gone ({type(exc).__name__})"
        if not state.get("alive"):
            return f"its server process exited with code {state.get('returncode')}"
        try:
            with RpcClient(rep.endpoint, timeout=HEALTH_TIMEOUT_S) as client:
                client.call("healthz")
        except RpcError as exc:
            return f"its server at {rep.endpoint} does not answer healthz ({exc})"
        return None

    def report_failure(self, endpoint: str, error: str) -> str:
        """A client's call to ``endpoint`` failed: check that replica, restart or drop it.

        Returns:
            The endpoint to use now (the restarted replica's, or another live one's for the clients
            that were assigned to a dropped replica; reassigned on their next :meth:`endpoint_for`).

        Raises:
            ReplicaPoolError: no live replica is left.
        """
        import ray

        with self._lock:
            matches = [r for r in self.replicas if r.endpoint == endpoint and r.alive]
            if not matches:
                return self._any_endpoint()
            rep = matches[0]
            reason = self.check(rep)
            if reason is None:
                return rep.endpoint  # the replica is fine: the call itself failed
            reason = f"{reason}; the failing call: {error}"
            _kill(rep.actor)
            rep.actor = None
            if rep.restarts < self.settings.max_restarts:
                rep.restarts += 1
                self._record("restarting", rep, reason)
                actor, ref = self._launch(rep)
                try:
                    info = ray.get(ref, timeout=self.settings.ready_timeout_s + 30.0)
                except Exception as exc:  # noqa: BLE001
                    _kill(actor)
                    rep.alive = False
                    self._record("dropped", rep, f"restart failed: {type(exc).__name__}: {exc}")
                    return self._reassign(rep)
                rep.actor, rep.endpoint, rep.node_id, rep.node_ip, rep.info = (
                    actor, info["endpoint"], info["node_id"], info["node_ip"], info)
                self._record("restarted", rep, f"now at {rep.endpoint} on node {rep.node_ip}")
                return rep.endpoint
            rep.alive = False
            self._record("dropped", rep, f"{reason} (restarts spent: {rep.restarts}/{self.settings.max_restarts})")
            return self._reassign(rep)

    def _reassign(self, rep: Replica) -> str:
        clients, rep.clients = sorted(rep.clients), set()
        for c in clients:
            self._assign.pop(c, None)
        return self._any_endpoint()

    def _any_endpoint(self) -> str:
        live = self.live()
        if not live:
            raise ReplicaPoolError(
                f"no {self.settings.role} replica is left (every one died and its restarts are spent); "
                f"last events: {[e['reason'] for e in self.events][-3:]}"
            )
        return min(live, key=lambda r: (len(r.clients), r.index)).endpoint

    def describe(self) -> list[dict[str, Any]]:
        """JSON-able state of every replica (for logs and records)."""
        return [{"role": self.settings.role, "replica": r.index, "endpoint": r.endpoint, "node_ip": r.node_ip,
                 "node_id": r.node_id, "restarts": r.restarts, "alive": r.alive, "clients": sorted(r.clients)}
                for r in self.replicas]


def _has_remote_nodes() -> bool:
    """Whether any live cluster node has a non-loopback address (its servers then need a token)."""
    import ray

    return any(not _is_loopback(str(n.get("NodeManagerAddress", ""))) for n in ray.nodes() if n.get("Alive"))


def _kill(actor: Any) -> None:
    if actor is None:
        return
    import ray

    try:
        ray.kill(actor, no_restart=True)
    except Exception:  # noqa: BLE001 - already gone
        pass
