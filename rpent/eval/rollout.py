"""The rollout driver: env worker processes + one policy, closed loop over rollout epochs.

One :class:`RolloutDriver` owns ``num_workers`` spawned env workers (:mod:`rpent.eval.worker`) and
the policy (:mod:`rpent.eval.policies`). Per epoch it sends every worker its slots of the
:class:`~rpent.eval.plan.EvalPlan`; each worker answers with the observations of its running envs.
No planner is involved.

**Policy batching across workers** (``rollout.pipeline_stage_num`` = S, RLinf's pipeline stages): the
workers are dealt to S stages (worker ``w`` to stage ``w mod S``). Once every worker of a stage that
still runs envs has reported its observations, the driver makes **one** policy call for all of them
(rows in worker order) and sends each worker its action chunks (``num_action_chunks`` actions per env).
S = 1 batches every environment of the run into each call (lockstep); S = 2 lets one half of the
workers step their envs while the policy serves the other half, so physics and inference overlap;
S = ``num_workers`` is one call per worker. A policy that answers each row from that row alone (the
replay server; Pi0.5 with ``noise_source: observation``, whose noise is seeded per env and query) gives
the same episodes for every S; :attr:`RolloutTiming.mean_envs_per_call` reports the batching achieved.

The epoch ends when every worker reports ``epoch_done``; the next epoch starts with a fresh reset of
every env (there is no auto-reset path). A worker that raises or dies aborts the run with
:class:`~rpent.eval.errors.EnvWorkerError` (its traceback included); finished episodes have already
been handed to ``on_event`` by then, so none is lost.
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

import numpy as np

from rpent.eval import wire
from rpent.eval.errors import EnvWorkerError, EvalConfigError, PolicyError
from rpent.eval.metrics import EpisodeResult
from rpent.eval.plan import EvalPlan
from rpent.eval.policies.base import EpisodeRef
from rpent.eval.settings import EvalSettings
from rpent.eval.worker import WorkerSpec, worker_main
from rpent.rpc.errors import RpcCodecError

NOISE_DIM = 32
"""Width of Pi0.5's padded action space: ``noise`` is float32 [B, action_horizon, 32] (openpi)."""

WORKER_START_TIMEOUT_S = 600.0
"""Seconds a worker may take to import the simulator, build its first envs and report ``ready``."""

EventSink = Callable[[dict[str, Any]], None]


@dataclass
class RolloutTiming:
    """Where the time went (seconds). Worker figures are summed over workers.

    Attributes:
        wall_s: driver wall time of all epochs (excludes worker start-up).
        startup_s: spawning workers until all are ready (imports + building the first epoch's envs).
        startup_build_s: env construction during start-up, summed over workers.
        policy_s: time inside ``policy.predict`` (for endpoint backends: the whole RPC call).
        policy_queries: ``predict`` calls; policy_batch_envs: envs summed over those calls (their ratio
            is :attr:`mean_envs_per_call`).
        driver_io_s: driver time encoding/sending and receiving/decoding worker messages.
        physics_s, render_s, reset_s, build_s, wait_s, video_s: worker totals (see the worker).
        worker_restarts: env workers started again after their Ray actor was lost (worker, epoch,
            reason, the episodes run again); always empty with local workers.
    """

    wall_s: float = 0.0
    startup_s: float = 0.0
    startup_build_s: float = 0.0
    policy_s: float = 0.0
    policy_queries: int = 0
    policy_batch_envs: int = 0
    driver_io_s: float = 0.0
    physics_s: float = 0.0
    render_s: float = 0.0
    reset_s: float = 0.0
    build_s: float = 0.0
    wait_s: float = 0.0
    video_s: float = 0.0
    per_worker: list[dict[str, float]] = field(default_factory=list)
    worker_restarts: list[dict[str, Any]] = field(default_factory=list)

    def add_worker(self, timing: dict[str, float]) -> None:
        """Add one worker's epoch timing."""
        for key in ("physics_s", "render_s", "reset_s", "build_s", "wait_s", "video_s"):
            setattr(self, key, getattr(self, key) + float(timing.get(key, 0.0)))

    @property
    def mean_envs_per_call(self) -> float:
        """Environments per policy call, averaged over the calls (0.0 before the first call)."""
        return self.policy_batch_envs / self.policy_queries if self.policy_queries else 0.0

    def to_dict(self) -> dict[str, Any]:
        """JSON-able dict (with ``mean_envs_per_call``)."""
        return {**self.__dict__, "mean_envs_per_call": self.mean_envs_per_call}


def observation_noise(seed: int, epoch: int, env_index: int, query: int, action_horizon: int) -> np.ndarray:
    """Deterministic flow-matching start noise for one query (the ``observation`` noise source).

    Seeded by (seed, epoch, env index, query index) so it does not depend on worker scheduling.

    Returns:
        float32 [action_horizon, 32], standard normal.
    """
    rng = np.random.default_rng([seed, epoch, env_index, query])
    return rng.standard_normal((action_horizon, NOISE_DIM)).astype(np.float32)


def merge_observations(msgs: list[dict[str, Any]]) -> dict[str, Any]:
    """Several workers' ``obs`` messages as one batch (rows in the given order): images and states
    concatenated along the batch axis, ``task_descriptions`` and ``env_indices`` joined."""
    out: dict[str, Any] = {"op": "obs", "epoch": msgs[0]["epoch"], "episodes": []}
    for key in ("main_images", "wrist_images", "states"):
        out[key] = np.concatenate([m[key] for m in msgs], axis=0)
    out["task_descriptions"] = [t for m in msgs for t in m["task_descriptions"]]
    out["env_indices"] = [int(g) for m in msgs for g in m["env_indices"]]
    return out


class RolloutDriver:
    """Runs the plan's episodes: spawns env workers, feeds them actions from ``policy``.

    Use as a context manager (workers are started on enter and stopped on exit)::

        with RolloutDriver(settings, plan, policy, log_dir=run_dir, on_event=print) as driver:
            results = driver.run()
    """

    def __init__(
        self,
        settings: EvalSettings,
        plan: EvalPlan,
        policy: Any,
        *,
        log_dir: Path,
        on_event: EventSink | None = None,
        logger: logging.Logger | None = None,
    ):
        """Args:
            settings: validated settings (env, model, policy).
            plan: the episode schedule; its worker count must equal ``settings.env.num_workers``.
            policy: an object with ``predict(observation, episodes) -> float32 [B, n, 7]``
                (:class:`rpent.eval.policies.base.EvalPolicy`).
            log_dir: the run directory (videos go to ``log_dir/videos``).
            on_event: called in the driver thread with ``{"kind": ...}`` dicts: ``workers_ready``,
                ``epoch_start`` {epoch}, ``episode`` {result: EpisodeResult}, ``epoch_done`` {epoch, timing}.
            logger: where progress lines go (default: ``rpent.eval.run``).
        """
        if plan.num_workers != settings.env.num_workers:
            raise ValueError(f"plan has {plan.num_workers} workers but settings say {settings.env.num_workers}")
        self.settings = settings
        self.plan = plan
        self.policy = policy
        self.log_dir = Path(log_dir)
        self.on_event = on_event or (lambda event: None)
        self.log = logger or logging.getLogger("rpent.eval.run")
        self.timing = RolloutTiming()
        self._procs: list[Any] = []
        self._conns: list[Connection] = []
        self._queries: dict[tuple[int, int], int] = {}
        self._slot_of = {(s.epoch, s.env_index): s for s in plan.slots}
        self._epoch: int | None = None  # the epoch running now (names lost episodes in errors)
        self._finished: set[tuple[int, int]] = set()  # (epoch, env_index) of finished episodes

    # -- lifecycle -----------------------------------------------------------------------------------
    def __enter__(self) -> RolloutDriver:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _spec(self, worker: int) -> WorkerSpec:
        env = self.settings.env
        return WorkerSpec(
            worker=worker,
            suite=env.suite,
            libero_type=env.libero_type,
            task_languages=self.plan.task_languages,
            max_episode_steps=env.max_episode_steps,
            num_action_chunks=self.settings.model.num_action_chunks,
            ignore_terminations=env.ignore_terminations,
            reward_coef=env.reward_coef,
            seed=env.seed,
            egl_device=self.settings.cuda_device,
            video_dir=str(self.log_dir / "videos") if env.save_video else None,
            video_fps=env.video_fps,
            log_dir=str(self.log_dir),
            prebuild=tuple((s.local_index, s.task_id) for s in self.plan.epoch_slots(0, worker)),
            output_log=str(self.log_dir / f"env_worker_{worker}.log"),
            policy_image_size=env.policy_image_size or 256,
        )

    def start(self) -> None:
        """Spawn the env workers and wait until each reports ``ready``.

        Raises:
            EnvWorkerError: a worker failed to start (its traceback included) or timed out.
        """
        self.resolve_egl_device()  # validate here; each worker derives the same device itself
        t0 = time.perf_counter()
        ctx = mp.get_context("spawn")
        for w in range(self.settings.env.num_workers):
            parent, child = ctx.Pipe(duplex=True)
            proc = ctx.Process(target=worker_main, args=(child, self._spec(w)), name=f"rpent-eval-env-{w}", daemon=True)
            proc.start()
            child.close()
            self._procs.append(proc)
            self._conns.append(parent)
        for w in range(len(self._conns)):
            msg = self._recv(w, timeout=WORKER_START_TIMEOUT_S)
            if msg["op"] != "ready":
                raise EnvWorkerError(f"env worker {w} sent {msg['op']!r} instead of 'ready'")
            self.timing.startup_build_s += float(msg.get("build_s", 0.0))
            self.log.info("env worker %d ready (pid %s, built %s envs in %.1f s)", w, msg.get("pid"),
                          msg.get("sims_built"), float(msg.get("build_s", 0.0)))
        self.timing.startup_s = time.perf_counter() - t0
        self.on_event({"kind": "workers_ready", "startup_s": self.timing.startup_s})

    def resolve_egl_device(self) -> int | None:
        """The EGL device the env workers render on, checked here before any worker starts
        (:func:`rpent.robots.libero.egl.resolve_egl_device`: ``--cuda-device`` against the EGL devices
        that exist, else derived from ``MUJOCO_EGL_DEVICE_ID`` / ``CUDA_VISIBLE_DEVICES``).

        Raises:
            EvalConfigError: no consistent device (one line with both variables and the fix).
        """
        from rpent.robots.libero import egl

        env = dict(os.environ)
        env.setdefault("MUJOCO_GL", "egl")
        if env["MUJOCO_GL"] != "egl":
            return self.settings.cuda_device
        try:
            choice = egl.resolve_egl_device(self.settings.cuda_device, env, egl.count_egl_devices())
        except egl.EglDeviceError as exc:
            raise EvalConfigError(f"env workers cannot render: {exc}") from None
        self.log.info("env workers render on EGL device %s (%s)",
                      choice.device if choice.device is not None else "default", choice.reason)
        return choice.device

    def close(self) -> None:
        """Ask every worker to exit; terminate those still running after 10 s, kill those still
        running 5 s later (one deadline for all workers, so closing takes at most ~15 s; idempotent)."""
        for conn in self._conns:
            try:
                wire.send(conn, {"op": "close"})
            except (OSError, ValueError):
                pass
        for grace, stop in ((10.0, "terminate"), (5.0, "kill")):
            deadline = time.monotonic() + grace
            for proc in self._procs:
                proc.join(timeout=max(0.0, deadline - time.monotonic()))
            for proc in self._procs:
                if proc.is_alive():
                    getattr(proc, stop)()
        for proc in self._procs:
            proc.join(timeout=5.0)
        for conn in self._conns:
            conn.close()
        self._procs, self._conns = [], []

    # -- messaging ----------------------------------------------------------------------------------
    def _worker_failed(self, w: int, detail: str) -> EnvWorkerError:
        proc = self._procs[w]
        proc.join(timeout=5.0)
        code = proc.exitcode
        log = self.log_dir / f"env_worker_{w}.log"
        epoch = 0 if self._epoch is None else self._epoch
        lost = [f"(task {s.task_id}, init state {s.init_state_id}, epoch {s.epoch})"
                for s in self.plan.epoch_slots(epoch, w) if (s.epoch, s.env_index) not in self._finished]
        lost_text = f"; its unfinished episodes: {', '.join(lost)}" if lost else ""
        return EnvWorkerError(f"env worker {w} (pid {proc.pid}) failed (exit code {code}){lost_text}: {detail} "
                              f"[output: {log}]")

    def _recv(self, w: int, timeout: float | None = None) -> dict[str, Any]:
        conn = self._conns[w]
        if timeout is not None and not conn.poll(timeout):
            alive = self._procs[w].is_alive()
            raise self._worker_failed(w, f"no message within {timeout:.0f} s (alive={alive})")
        t0 = time.perf_counter()
        try:
            msg = wire.recv(conn)
        except (EOFError, OSError):  # closed or reset pipe: the process is gone
            raise self._worker_failed(w, "it exited without reporting an error (crash or kill)") from None
        except (ValueError, RpcCodecError) as exc:  # a half-written frame from a dying worker
            raise self._worker_failed(w, f"it sent a malformed message ({exc})") from None
        self.timing.driver_io_s += time.perf_counter() - t0
        if msg["op"] == "error":
            self.log.error("env worker %d failed:\n%s", w, msg.get("traceback", ""))
            raise self._worker_failed(w, f"{msg.get('message')}\n--- worker traceback ---\n{msg.get('traceback', '')}")
        return msg

    def _send(self, w: int, message: dict[str, Any]) -> None:
        t0 = time.perf_counter()
        try:
            wire.send(self._conns[w], message)
        except (OSError, ValueError) as exc:
            raise self._worker_failed(w, f"cannot send to it: {exc}") from None
        self.timing.driver_io_s += time.perf_counter() - t0

    # -- policy --------------------------------------------------------------------------------------
    def _observation(self, epoch: int, msg: dict[str, Any]) -> dict[str, Any]:
        model = self.settings.model
        obs: dict[str, Any] = {
            "main_images": msg["main_images"],
            "states": msg["states"],
            "task_descriptions": list(msg["task_descriptions"]),
        }
        if model.num_images_in_input >= 2:
            obs["wrist_images"] = msg["wrist_images"]
        if model.noise_source == "observation":
            noise = []
            for g in msg["env_indices"]:
                q = self._queries.get((epoch, g), 0)
                noise.append(observation_noise(self.settings.env.seed, epoch, int(g), q, model.action_horizon))
            obs["noise"] = np.stack(noise)
        for g in msg["env_indices"]:
            self._queries[(epoch, int(g))] = self._queries.get((epoch, int(g)), 0) + 1
        return obs

    def _episodes(self, epoch: int, env_indices: list[int]) -> list[EpisodeRef]:
        refs = []
        for g in env_indices:
            slot = self._slot_of[(epoch, int(g))]
            refs.append(EpisodeRef(self.plan.suite, slot.task_id, slot.init_state_id, epoch, int(g),
                                   self._queries.get((epoch, int(g)), 0)))
        return refs

    def _predict(self, epoch: int, msg: dict[str, Any]) -> np.ndarray:
        n = len(msg["env_indices"])
        k = self.settings.model.num_action_chunks
        episodes = self._episodes(epoch, msg["env_indices"])
        obs = self._observation(epoch, msg)
        t0 = time.perf_counter()
        actions = self.policy.predict(obs, episodes)
        self.timing.policy_s += time.perf_counter() - t0
        self.timing.policy_queries += 1
        self.timing.policy_batch_envs += n
        arr = np.asarray(actions)
        if arr.ndim != 3 or arr.shape[0] != n or arr.shape[2] != self.settings.model.action_dim or arr.shape[1] < k:
            raise PolicyError(
                f"policy returned actions of shape {arr.shape}; expected [B={n}, n_exec>={k}, "
                f"{self.settings.model.action_dim}] (n_exec must cover rollout.model.num_action_chunks={k})"
            )
        if not np.issubdtype(arr.dtype, np.floating) or not np.isfinite(arr[:, :k]).all():
            raise PolicyError(f"policy returned non-finite or non-float actions (dtype {arr.dtype}); check the model")
        return np.ascontiguousarray(arr[:, :k], dtype=np.float32)

    def _serve(self, epoch: int, group: list[int], waiting: dict[int, dict[str, Any]]) -> None:
        """One policy call for the observations of every worker in ``group`` (each has reported); each
        worker gets the action rows of its own envs."""
        msgs = [waiting.pop(w) for w in group]
        merged = msgs[0] if len(msgs) == 1 else merge_observations(msgs)
        actions = self._predict(epoch, merged)
        row = 0
        for w, msg in zip(group, msgs):
            n = len(msg["env_indices"])
            self._send(w, {"op": "actions", "epoch": epoch, "env_indices": msg["env_indices"],
                           "actions": actions[row:row + n]})
            row += n

    def _stage_ready(self, stage: list[int], running: set[int], waiting: dict[int, dict[str, Any]]) -> list[int]:
        """The workers of ``stage`` to serve now: all of its running workers once each has reported
        (empty while one of them is still stepping, or when none is waiting)."""
        group = [w for w in stage if w in running]
        if group and all(w in waiting for w in group):
            return group
        return []

    # -- main loop -----------------------------------------------------------------------------------
    def run_epoch(self, epoch: int) -> list[EpisodeResult]:
        """Run one rollout epoch: fresh reset of every env, closed loop until every episode ends."""
        self.on_event({"kind": "epoch_start", "epoch": epoch})
        self._epoch = epoch
        results: list[EpisodeResult] = []
        for w in range(len(self._conns)):
            slots = [
                {"local_index": s.local_index, "env_index": s.env_index, "task_id": s.task_id,
                 "init_state_id": s.init_state_id}
                for s in self.plan.epoch_slots(epoch, w)
            ]
            self._send(w, {"op": "epoch", "epoch": epoch, "slots": slots})
        pending = set(range(len(self._conns)))
        n_stages = min(self.settings.env.pipeline_stage_num, len(self._conns))
        stages = [[w for w in range(len(self._conns)) if w % n_stages == s] for s in range(n_stages)]
        waiting: dict[int, dict[str, Any]] = {}  # worker -> its observations, until its stage is served
        index = {id(c): w for w, c in enumerate(self._conns)}
        sentinels = {p.sentinel: w for w, p in enumerate(self._procs)}
        while pending:
            watched = [self._conns[w] for w in pending] + [self._procs[w].sentinel for w in pending]
            ready = wait(watched, timeout=5.0)
            conns_ready = [r for r in ready if id(r) in index]
            if not conns_ready:
                for r in ready:  # a worker process ended without a message
                    w = sentinels.get(r)
                    if w is not None and w in pending and not self._conns[w].poll():
                        raise self._worker_failed(w, "process ended unexpectedly")
                continue
            for conn in conns_ready:
                w = index[id(conn)]
                msg = self._recv(w)
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
                    pending.discard(w)
                elif msg["op"] == "obs":
                    waiting[w] = msg
                else:
                    raise EnvWorkerError(f"env worker {w} sent unexpected message {msg['op']!r}")
                group = self._stage_ready(stages[w % n_stages], pending, waiting)
                if group:
                    self._serve(epoch, group, waiting)
        self.on_event({"kind": "epoch_done", "epoch": epoch, "timing": self.timing.to_dict()})
        return results

    def run(self) -> list[EpisodeResult]:
        """Run every epoch of the plan; return all finished trajectories (epoch-major)."""
        t0 = time.perf_counter()
        results: list[EpisodeResult] = []
        try:
            for epoch in range(self.plan.rollout_epoch):
                results.extend(self.run_epoch(epoch))
        finally:
            self.timing.wall_s += time.perf_counter() - t0
        return results
