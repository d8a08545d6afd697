"""``rpent-eval --ray-address``: env workers as Ray actors, the policy from replicas on GPU nodes.

The evaluation is the same as with local workers (:mod:`rpent.eval.rollout`): the same plan, the
same :class:`~rpent.eval.worker.EnvWorker` state machine, the same driver loop feeding one action
chunk per env per policy query, the same outputs. Only placement changes:

* each env worker is a Ray actor (:func:`env_worker_actor_class`) placed by resources
  (``ray.env_worker``: CPUs, an EGL GPU when ``num_gpus > 0``, custom resources that pin workers
  to a node group); messages are :mod:`rpent.rpc.codec` frames (msgpack + raw ndarrays), the same
  as over the local pipes, never pickled objects of ours;
* videos are written node-locally by the worker and shipped back with the episode, so every file
  lands under the driver's run directory with or without a shared filesystem;
* with ``ray.replicas.vla`` the policy is a pool of long-lived server replicas (one per GPU,
  :mod:`rpent.cluster.replicas`); each env worker's queries go to one replica (sticky, least-loaded
  at assignment) over the ordinary ``vla.predict`` RPC endpoint. A replica that fails a call is
  checked, restarted or dropped (logged with the reason) and the call retried once elsewhere.

An env worker whose own code raises aborts the run with :class:`~rpent.eval.errors.EnvWorkerError`,
exactly as locally: finished episodes are on disk. An env worker whose actor is *lost* (its node
died, its process was killed) is started again wherever Ray finds room, up to
``ray.env_worker.max_restarts`` times per worker: it re-runs, from their reset, the episodes of
the current epoch it had not finished, and the episodes it had finished stay counted once. Each
restart is logged with its reason and kept in ``metrics.json`` (``timing.worker_restarts``). Every
wait is bounded (``ray.call_timeout_s``; a replacement that no live node can hold fails after
``ray.preflight_wait_s``).

The actors run at the driver's niceness (Ray starts workers at +15; see :func:`_set_niceness`).
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from rpent.cluster.errors import ClusterError
from rpent.cluster.settings import RaySettings
from rpent.eval.errors import EnvWorkerError, PolicyError
from rpent.eval.metrics import EpisodeResult
from rpent.eval.rollout import WORKER_START_TIMEOUT_S, RolloutDriver
from rpent.eval.worker import EnvWorker, WorkerSpec
from rpent.recording.atomic import write_bytes_atomic
from rpent.rpc.codec import dumps, loads


def _set_niceness(nice: int | None) -> int:
    """Run this actor process at the driver's niceness ``nice`` and return the niceness it now has.

    Ray starts its worker processes at niceness +15 over the raylet (``RAY_worker_niceness``,
    ``ray/_private/ray_constants.py``), which would give the simulator a low scheduling priority
    against every other process of the node and lengthen the evaluation's wall time. Lowering the
    niceness needs the privilege to do so (root / CAP_SYS_NICE, or ``RLIMIT_NICE``); without it the
    actor keeps Ray's niceness (then start the nodes with ``RAY_worker_niceness=0``;
    docs/guides/multi-node.md). The value is reported in the worker's ``ready`` line of the run log.
    """
    if nice is not None:
        try:
            os.setpriority(os.PRIO_PROCESS, 0, int(nice))
        except OSError:
            pass
    return os.getpriority(os.PRIO_PROCESS, 0)


class ActorLostError(EnvWorkerError):
    """An env worker actor's process or node is gone (not an error of the worker's own code).

    Attributes:
        worker: the env worker index.
    """

    def __init__(self, worker: int, message: str):
        super().__init__(message)
        self.worker = worker


class _ActorBody:
    """What runs inside one env worker actor (plain class; wrapped by :func:`env_worker_actor_class`)."""

    def __init__(self, spec: WorkerSpec, use_gpu: bool, nice: int | None = None):
        import ray

        from rpent.robots.libero.egl import configure_rendering

        self.nice = _set_niceness(nice)
        self.local_root = tempfile.mkdtemp(prefix=f"rpent_envw{spec.worker}_")
        egl = spec.egl_device
        if use_gpu:
            gpu_ids = ray.get_gpu_ids()
            egl = int(gpu_ids[0]) if gpu_ids else egl
        spec = dataclasses.replace(
            spec, egl_device=egl, log_dir=self.local_root, output_log=None,
            video_dir=os.path.join(self.local_root, "videos") if spec.video_dir is not None else None,
        )
        configure_rendering(spec.egl_device)
        self.spec = spec
        self.worker: EnvWorker | None = None
        self._last_reply = 0.0

    def ready(self) -> bytes:
        """Build the first epoch's envs; reply a codec-encoded ``ready`` message."""
        import ray

        self.worker = EnvWorker(self.spec)
        for local, task_id in self.spec.prebuild:
            self.worker.ensure_sim(local, task_id)
        build_s = self.worker.timing.build_s
        self.worker.timing.build_s = 0.0
        ctx = ray.get_runtime_context()
        return dumps({"op": "ready", "worker": self.spec.worker, "pid": os.getpid(), "build_s": build_s,
                      "sims_built": self.worker.sims_built, "node_id": ctx.get_node_id(),
                      "node_ip": ray.util.get_node_ip_address(), "egl_device": self.spec.egl_device,
                      "nice": self.nice})

    def _reply(self, msg: dict[str, Any]) -> bytes:
        videos = {}
        for ep in msg.get("episodes", []):
            rel = ep.get("video")
            if rel:
                path = os.path.join(self.local_root, rel)
                with open(path, "rb") as f:
                    videos[rel] = f.read()
                os.remove(path)
        if videos:
            msg["videos"] = videos
        self._last_reply = time.perf_counter()
        return dumps(msg)

    def epoch(self, epoch: int, slots: list[dict[str, int]]) -> bytes:
        """Reset every owned env to its slot; reply the first ``obs``."""
        assert self.worker is not None
        return self._reply(self.worker.start_epoch(epoch, slots))

    def actions(self, frame: bytes) -> bytes:
        """Execute one chunk per listed env (``frame``: codec-encoded ``actions`` message)."""
        assert self.worker is not None
        self.worker.timing.wait_s += time.perf_counter() - self._last_reply  # policy + transport
        msg = loads(bytearray(frame))
        return self._reply(self.worker.apply_actions([int(g) for g in msg["env_indices"]], msg["actions"]))

    def close(self) -> None:
        """Close the sims and remove the node-local scratch folder."""
        if self.worker is not None:
            self.worker.close()
            self.worker = None
        shutil.rmtree(self.local_root, ignore_errors=True)


@functools.cache
def env_worker_actor_class() -> Any:
    """The Ray actor class of an env worker (``ray.remote`` applied lazily: Ray is optional)."""
    import ray

    return ray.remote(max_restarts=0, max_task_retries=0)(_ActorBody)


class ReplicaPolicy:
    """A ``vla.predict`` policy spread over a :class:`~rpent.cluster.replicas.ReplicaPool`.

    :meth:`for_client` returns the view one env worker uses: its calls go to the replica the pool
    assigned it (sticky, so a stateful server such as the replay server sees whole episodes). A
    failed call is reported to the pool (restart or drop, logged) and retried once on the
    endpoint the pool hands out then.

    Args:
        pool: a started replica pool.
        timeout_s / options / send_episode_keys: as for
            :class:`~rpent.eval.policies.endpoint.EndpointPolicy`.
    """

    name = "endpoint"

    def __init__(self, pool: Any, timeout_s: float, options: dict[str, Any] | None, send_episode_keys: bool):
        self.pool = pool
        self.timeout_s = timeout_s
        self.options = options
        self.send_episode_keys = send_episode_keys
        self._clients: dict[str, Any] = {}
        self.retries = 0

    def _client(self, endpoint: str) -> Any:
        from rpent.eval.policies.endpoint import EndpointPolicy

        client = self._clients.get(endpoint)
        if client is None:
            client = self._clients[endpoint] = EndpointPolicy(endpoint, self.timeout_s, self.options,
                                                              send_episode_keys=self.send_episode_keys)
        return client

    def metadata(self) -> dict[str, Any]:
        """``vla.metadata`` of the first live replica."""
        return self._client(self.pool.endpoints()[0]).metadata()

    def for_client(self, key: str) -> _ClientView:
        """The policy view of client ``key`` (e.g. ``env-worker-3``)."""
        return _ClientView(self, key)

    def predict_for(self, key: str, observation: dict[str, Any], episodes: list[Any] | None) -> Any:
        """One ``vla.predict`` for client ``key`` (see the class docstring).

        Raises:
            PolicyError: the call failed twice, or no replica is left.
        """
        try:
            endpoint = self.pool.endpoint_for(key)
        except ClusterError as exc:
            raise PolicyError(str(exc)) from None
        try:
            return self._client(endpoint).predict(observation, episodes)
        except PolicyError as exc:
            stale = self._clients.pop(endpoint, None)
            if stale is not None:
                stale.close()
            try:
                self.pool.report_failure(endpoint, str(exc))
                endpoint = self.pool.endpoint_for(key)
            except ClusterError as pool_exc:
                raise PolicyError(f"{exc}; {pool_exc}") from None
            self.retries += 1
            return self._client(endpoint).predict(observation, episodes)

    def close(self) -> None:
        """Close every client (the pool's owner stops the replicas)."""
        for client in self._clients.values():
            client.close()
        self._clients = {}


class _ClientView:
    """One client's view of a :class:`ReplicaPolicy` (``predict`` like any eval policy)."""

    name = "endpoint"

    def __init__(self, policy: ReplicaPolicy, key: str):
        self.policy = policy
        self.key = key

    def metadata(self) -> dict[str, Any]:
        return self.policy.metadata()

    def predict(self, observation: dict[str, Any], episodes: list[Any] | None = None) -> Any:
        return self.policy.predict_for(self.key, observation, episodes)

    def close(self) -> None:
        pass


class RayRolloutDriver(RolloutDriver):
    """:class:`~rpent.eval.rollout.RolloutDriver` whose env workers are Ray actors (module docstring).

    Args:
        ray_settings: the validated ``ray`` section (env worker resources, timeouts).
        replica_pool: when the policy is a :class:`ReplicaPolicy`, its pool (events go to the run log).
        (the rest as for :class:`RolloutDriver`)
    """

    def __init__(self, *args: Any, ray_settings: RaySettings, replica_pool: Any = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.ray_settings = ray_settings
        self.replica_pool = replica_pool
        self._actors: list[Any] = []
        self._nodes: list[str] = []
        self._base_policy = self.policy
        self._nice = os.getpriority(os.PRIO_PROCESS, 0)  # the actors run at the driver's niceness
        self._restarts: dict[int, int] = {}

    def _fail(self, w: int, detail: str) -> EnvWorkerError:
        node = self._nodes[w] if w < len(self._nodes) else "?"
        return EnvWorkerError(f"env worker {w} (Ray actor on node {node}) failed: {detail}")

    def _get(self, w: int, ref: Any, timeout: float) -> dict[str, Any]:
        import ray
        from ray.exceptions import GetTimeoutError, ObjectLostError, RayActorError, RayTaskError, WorkerCrashedError

        t0 = time.perf_counter()
        try:
            frame = ray.get(ref, timeout=timeout)
        except GetTimeoutError:
            raise self._fail(w, f"no reply within {timeout:.0f} s (ray.call_timeout_s)") from None
        except RayTaskError as exc:  # the worker's own code raised: as locally, the run stops
            self.log.error("env worker %d failed:\n%s", w, exc)
            raise self._fail(w, f"{exc}") from None
        except (RayActorError, WorkerCrashedError, ObjectLostError) as exc:  # its process or node is gone
            node = self._nodes[w] if w < len(self._nodes) else "?"
            raise ActorLostError(w, f"env worker {w} (Ray actor on node {node}) was lost: {type(exc).__name__}: "
                                    f"{str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ''}") from None
        msg = loads(bytearray(frame))
        self.timing.driver_io_s += time.perf_counter() - t0
        for rel, data in (msg.pop("videos", None) or {}).items():
            target = self.log_dir / rel
            if not target.resolve().is_relative_to(self.log_dir.resolve()):
                raise self._fail(w, f"sent a video path outside the run directory: {rel!r}")
            target.parent.mkdir(parents=True, exist_ok=True)
            write_bytes_atomic(target, bytes(data))
        return msg

    def _launch(self, w: int, prebuild: tuple[tuple[int, int], ...] | None = None) -> Any:
        """Create env worker ``w``'s actor (placed by ``ray.env_worker``); returns its ``ready`` ref."""
        spec = self._spec(w)
        if prebuild is not None:
            spec = dataclasses.replace(spec, prebuild=prebuild)
        req = self.ray_settings.env_worker
        actor = env_worker_actor_class().options(**req.ray_options(), name=None).remote(spec, req.num_gpus > 0,
                                                                                        self._nice)
        if w < len(self._actors):
            self._actors[w] = actor
        else:
            self._actors.append(actor)
        return actor.ready.remote()

    def _ready(self, w: int, ref: Any) -> dict[str, Any]:
        """Wait for actor ``w``'s ``ready`` (bounded by :data:`WORKER_START_TIMEOUT_S`; a worker that no live
        node can hold any more fails after ``ray.preflight_wait_s``); log where it runs."""
        import ray

        from rpent.cluster.preflight import live_nodes, node_capacity

        deadline = time.monotonic() + WORKER_START_TIMEOUT_S
        no_node_since: float | None = None
        req = self.ray_settings.env_worker
        while True:
            ready, _ = ray.wait([ref], num_returns=1, timeout=max(0.0, min(2.0, deadline - time.monotonic())))
            if ready or time.monotonic() >= deadline:
                break
            nodes = live_nodes(ray, with_available=False)
            if any(node_capacity(n.resources, req) > 0 for n in nodes):
                no_node_since = None
            elif no_node_since is None:
                no_node_since = time.monotonic()
            elif time.monotonic() - no_node_since >= self.ray_settings.preflight_wait_s:
                listing = "; ".join(n.describe() for n in nodes) or "none"
                raise self._fail(w, f"no live Ray node offers the env worker's {req.describe()} (live nodes: "
                                    f"{listing}); gave up after {self.ray_settings.preflight_wait_s:.0f} s "
                                    "(ray.preflight_wait_s)")
        msg = self._get(w, ref, max(0.0, deadline - time.monotonic()))
        while len(self._nodes) <= w:
            self._nodes.append("?")
        self._nodes[w] = f"{msg.get('node_ip')}[{str(msg.get('node_id'))[:8]}]"
        self.timing.startup_build_s += float(msg.get("build_s", 0.0))
        self.log.info("env worker %d ready on Ray node %s (pid %s, nice %s, egl device %s, built %s envs in %.1f s)",
                      w, self._nodes[w], msg.get("pid"), msg.get("nice"), msg.get("egl_device"),
                      msg.get("sims_built"), float(msg.get("build_s", 0.0)))
        return msg

    def start(self) -> None:
        """Create the env worker actors (placed by ``ray.env_worker``) and wait until each is ready; an
        actor lost while starting (its node died) is started again elsewhere, like one lost mid-epoch.

        Raises:
            EnvWorkerError: an actor failed to start, was not ready within the start timeout, or was lost
                more than ``ray.env_worker.max_restarts`` times.
        """
        t0 = time.perf_counter()
        try:
            refs = [self._launch(w) for w in range(self.settings.env.num_workers)]
            self._nodes = ["?"] * len(refs)
            for w, ref in enumerate(refs):
                while True:
                    try:
                        self._ready(w, ref)
                        break
                    except ActorLostError as exc:
                        ref = self._replace(w, exc, None, [])
        except BaseException:
            self.close()  # no actor outlives a failed start
            raise
        if self.replica_pool is not None:
            self.replica_pool.log = self.log
            for rep in self.replica_pool.describe():
                self.log.info("vla replica %d at %s on node %s", rep["replica"], rep["endpoint"], rep["node_ip"])
        self.timing.startup_s = time.perf_counter() - t0
        self.on_event({"kind": "workers_ready", "startup_s": self.timing.startup_s})

    def _replace(self, w: int, lost: ActorLostError, epoch: int | None, unfinished: list[Any]) -> Any:
        """Start env worker ``w`` again after its actor was lost (``lost``), wherever Ray finds room, for
        the ``unfinished`` slots of ``epoch`` (their episodes start again from their reset; the episodes
        it had finished stay counted once). Logged with the reason and kept in
        ``timing.worker_restarts`` (metrics.json). Returns the new actor's ``ready`` ref.

        Raises:
            EnvWorkerError: ``ray.env_worker.max_restarts`` restarts of this worker are spent.
        """
        import ray

        limit = self.ray_settings.env_worker_max_restarts
        done = self._restarts.get(w, 0)
        lost_text = ", ".join(f"(task {s.task_id}, init state {s.init_state_id}, epoch {s.epoch})" for s in unfinished)
        if done >= limit:
            raise EnvWorkerError(f"{lost}; its restarts are spent ({done}/{limit}, ray.env_worker.max_restarts)"
                                 + (f"; its unfinished episodes: {lost_text}" if lost_text else ""))
        self._restarts[w] = done + 1
        try:
            ray.kill(self._actors[w], no_restart=True)
        except Exception:  # noqa: BLE001 - already gone with its node
            pass
        for s in unfinished:  # the episode starts over: its policy queries (and observation noise) too
            self._queries.pop((s.epoch, s.env_index), None)
        event = {"worker": w, "epoch": epoch, "restart": done + 1, "lost_on": self._nodes[w] if w < len(self._nodes)
                 else "?", "reason": str(lost), "rerun": [[s.task_id, s.init_state_id, s.epoch, s.env_index]
                                                          for s in unfinished]}
        self.timing.worker_restarts.append(event)
        self.log.warning("%s; restarting it elsewhere (restart %d/%d)%s", lost, done + 1, limit,
                         f"; its unfinished episodes start again: {lost_text}" if lost_text else "")
        self.on_event({"kind": "worker_restarted", **event})
        return self._launch(w, tuple((s.local_index, s.task_id) for s in unfinished) if unfinished else None)

    def close(self) -> None:
        """Close every actor's envs (bounded) and kill the actors (idempotent)."""
        import ray

        refs = [a.close.remote() for a in self._actors]
        if refs:
            ray.wait(refs, num_returns=len(refs), timeout=10.0)
        for actor in self._actors:
            try:
                ray.kill(actor, no_restart=True)
            except Exception:  # noqa: BLE001 - already gone
                pass
        self._actors = []

    def _policy_for(self, w: int) -> Any:
        if isinstance(self._base_policy, ReplicaPolicy):
            return self._base_policy.for_client(f"env-worker-{w}")
        return self._base_policy

    def _slots(self, epoch: int, w: int) -> list[Any]:
        """Worker ``w``'s slots of ``epoch`` whose episode has not finished (all of them at the epoch start)."""
        return [s for s in self.plan.epoch_slots(epoch, w) if (s.epoch, s.env_index) not in self._finished]

    @staticmethod
    def _wire_slots(slots: list[Any]) -> list[dict[str, int]]:
        return [{"local_index": s.local_index, "env_index": s.env_index, "task_id": s.task_id,
                 "init_state_id": s.init_state_id} for s in slots]

    def run_epoch(self, epoch: int) -> list[EpisodeResult]:
        """One rollout epoch over the actors (same protocol and results as the local driver).

        An actor lost mid-epoch (its node died, its process was killed) is started again wherever Ray
        finds room (:meth:`_replace`) and runs the epoch's episodes it had not finished; those it had
        finished are kept, so every episode is counted once."""
        import ray

        self.on_event({"kind": "epoch_start", "epoch": epoch})
        self._epoch = epoch
        results: list[EpisodeResult] = []
        pending: dict[Any, tuple[int, str]] = {}  # ref -> (worker, "ready" | "step")
        for w, actor in enumerate(self._actors):
            pending[actor.epoch.remote(epoch, self._wire_slots(self._slots(epoch, w)))] = (w, "step")
        timeout = self.ray_settings.call_timeout_s
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=timeout)
            if not ready:
                waiting = sorted(w for w, _ in pending.values())
                raise self._fail(waiting[0], f"no reply within {timeout:.0f} s (ray.call_timeout_s); "
                                             f"workers still running: {waiting}")
            ref = ready[0]
            w, kind = pending.pop(ref)
            try:
                if kind == "ready":  # a replacement actor is up: give it the epoch's unfinished slots
                    self._ready(w, ref)
                    pending[self._actors[w].epoch.remote(epoch, self._wire_slots(self._slots(epoch, w)))] = (w, "step")
                    continue
                msg = self._get(w, ref, timeout)
            except ActorLostError as exc:
                pending[self._replace(w, exc, epoch, self._slots(epoch, w))] = (w, "ready")
                continue
            for ep in msg.get("episodes", []):
                result = EpisodeResult.from_dict(ep)
                results.append(result)
                self._finished.add((result.epoch, result.env_index))
                self.on_event({"kind": "episode", "result": result})
            if msg["op"] == "epoch_done":
                self.timing.add_worker(msg.get("timing", {}))
                self.timing.per_worker.append(
                    {"worker": w, "epoch": epoch, "sims_built": int(msg.get("sims_built", 0)), **msg.get("timing", {})}
                )
            elif msg["op"] == "obs":
                self.policy = self._policy_for(w)
                actions = self._predict(epoch, msg)
                t0 = time.perf_counter()
                frame = dumps({"op": "actions", "epoch": epoch, "env_indices": msg["env_indices"], "actions": actions})
                self.timing.driver_io_s += time.perf_counter() - t0
                pending[self._actors[w].actions.remote(frame)] = (w, "step")
            else:
                raise EnvWorkerError(f"env worker {w} sent unexpected message {msg['op']!r}")
        self.on_event({"kind": "epoch_done", "epoch": epoch, "timing": self.timing.to_dict()})
        return results


def cluster_cpu_capacity(ray: Any, settings: RaySettings) -> int:
    """How many env worker actors fit in what the live nodes have free now (for ``env.num_workers:
    auto``; the nodes' totals where the free view cannot be read)."""
    from rpent.cluster.preflight import free_capacity, live_nodes, node_capacity

    nodes = live_nodes(ray)
    if all(n.available is not None for n in nodes):
        return max(1, free_capacity(nodes, settings.env_worker))
    return max(1, sum(node_capacity(n.resources, settings.env_worker) for n in nodes))


def preflight_eval(ray: Any, settings: Any, ray_settings: RaySettings) -> None:
    """Refuse an evaluation the cluster cannot place, or cannot place with what is free now (after
    ``ray.preflight_wait_s``; see :mod:`rpent.cluster.preflight`).

    Raises:
        ClusterConfigError: naming the numbers (workers, replicas, GPUs, nodes; free and total).
    """
    from rpent.cluster.preflight import Demand, preflight

    demands = [Demand("env workers (env.num_workers)", ray_settings.env_worker, settings.env.num_workers,
                      f"; total_num_envs={settings.env.total_num_envs} must stay divisible by env.num_workers")]
    for role, rep in ray_settings.replicas.items():
        demands.append(Demand(f"ray.replicas.{role}.count", rep.request, rep.count, " (one replica per GPU)"))
    preflight(ray, demands, wait_s=ray_settings.preflight_wait_s)


def run_eval_on_ray(settings: Any, loaded: Any, ray_settings: RaySettings, *, logs_dir: str | Path,
                    console: Any = None, show_progress: bool = True, logger: logging.Logger | None = None) -> Any:
    """Run one evaluation with env workers (and VLA replicas, if configured) on the connected cluster.

    ``settings`` must already be checked with :func:`preflight_eval`. With ``ray.replicas.vla`` the
    replicas are started first (bounded by their ``ready_timeout_s``) and stopped at the end;
    ``settings.policy`` then records the replica endpoints.

    Returns:
        :class:`rpent.eval.runner.EvalOutcome`.

    Raises:
        ClusterError: a replica did not start; plus everything :func:`rpent.eval.runner.run_eval` raises.
    """
    from rpent.cluster.replicas import ReplicaPool
    from rpent.eval.runner import run_eval

    vla = ray_settings.replicas.get("vla")
    if vla is None:
        factory = functools.partial(RayRolloutDriver, ray_settings=ray_settings)
        return run_eval(settings, loaded, logs_dir=logs_dir, console=console, show_progress=show_progress,
                        driver_factory=factory)
    with ReplicaPool(vla, extra_env={"MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")}, logger=logger) as pool:
        options = {"noise_source": "observation"} if settings.model.noise_source == "observation" else None
        policy = ReplicaPolicy(pool, settings.policy.timeout_s, options, settings.policy.episode_keys)
        settings = dataclasses.replace(
            settings, policy=dataclasses.replace(settings.policy, backend="endpoint",
                                                 endpoint=",".join(pool.endpoints())))
        factory = functools.partial(RayRolloutDriver, ray_settings=ray_settings, replica_pool=pool)
        try:
            return run_eval(settings, loaded, logs_dir=logs_dir, console=console, show_progress=show_progress,
                            policy=policy, driver_factory=factory)
        finally:
            policy.close()


def prepare_ray_eval(loaded: Any, ray_address: str | None, *, cuda_device: int | None = None) -> Any:
    """Read the ``ray`` section (+ ``--ray-address``); when Ray is asked for, connect and validate.

    ``env.num_workers: auto`` resolves against the env worker actors the cluster can hold (not the
    local CPU count). With ``ray.replicas.vla`` the policy is the replica pool, so the config's
    ``policy.*`` backend/endpoint are not validated here (the replicas' server arguments are).

    Returns:
        ``(settings, ray_settings)``, or None when the config does not ask for Ray.

    Raises:
        EvalConfigError: a bad ``ray`` section, or a placement the cluster cannot satisfy (the
            message names the numbers); ClusterError: no cluster answered.
    """
    import copy

    from omegaconf import OmegaConf

    from rpent.cluster.connect import connect
    from rpent.cluster.errors import ClusterConfigError
    from rpent.cluster.settings import parse_ray_section
    from rpent.eval.config import LoadedConfig, apply_overrides, has_key
    from rpent.eval.errors import EvalConfigError
    from rpent.eval.validation import build_settings

    section = OmegaConf.to_container(loaded.cfg.ray, resolve=True) if has_key(loaded.cfg, "ray") else None
    try:
        ray_settings = parse_ray_section(section, ray_address)
    except ClusterConfigError as exc:
        raise EvalConfigError(str(exc)) from None
    if ray_settings is None:
        return None
    ray = connect(ray_settings.address, ray_settings.connect_timeout_s)
    checked = loaded
    if "vla" in ray_settings.replicas:  # the policy is the replica pool; its endpoint is known only once started
        cfg = copy.deepcopy(loaded.cfg)
        apply_overrides(cfg, ["policy.backend=endpoint", "policy.endpoint=socket://127.0.0.1:1"])
        checked = LoadedConfig(loaded.name, loaded.path, cfg, loaded.overrides)
    settings = build_settings(checked, cuda_device=cuda_device, cpu_count=cluster_cpu_capacity(ray, ray_settings))
    try:
        preflight_eval(ray, settings, ray_settings)
    except ClusterConfigError as exc:
        raise EvalConfigError(str(exc)) from None
    return settings, ray_settings
