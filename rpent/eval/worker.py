"""Env worker process: owns ``total_num_envs / num_workers`` LIBERO envs and steps them closed loop.

Started by :class:`rpent.eval.rollout.RolloutDriver` with ``multiprocessing`` *spawn* (a fresh
interpreter: MuJoCo/EGL state is never forked). It talks to the driver with :mod:`rpent.eval.wire`.

Per rollout epoch, for every owned env slot:

1. **Fresh reset** to the slot's (task, init state): ``LiberoSim.reset(init_state_id)``. There is no
   auto-reset path: every epoch starts with a reset of every env, so env state can never accumulate
   across epochs (the seed's auto_reset pitfall) and no env ever runs past its episode length.
   The sim is rebuilt only when the slot's task changes.
2. **Closed loop.** Render the policy observation (main + wrist 256x256x3 uint8, VLA orientation,
   8-D state), send the batch of running envs to the driver, execute the returned action chunk
   (``num_action_chunks`` env steps, no rendering), record the success predicate after every step.
3. The episode ends after ``max_episode_steps`` steps, or at the first success when
   ``ignore_terminations`` is false. ``success_at_end`` is the predicate at its last step.

Timing (reported per epoch, seconds): physics (env steps), render (policy observations), reset,
build (env construction), wait (blocked on the driver: policy + transport), video (encoding).
"""

from __future__ import annotations

import os
import time
import traceback
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import numpy as np

from rpent.eval import wire
from rpent.eval.metrics import EpisodeResult, EpisodeTracker


@dataclass(frozen=True)
class WorkerSpec:
    """What one env worker needs (picklable: passed to the spawned process).

    Attributes:
        worker: worker index (0-based).
        suite: LIBERO suite; libero_type: ``standard`` or ``pro``.
        task_languages: instruction per task id (sent to the policy).
        max_episode_steps: env steps per episode.
        num_action_chunks: env steps executed per policy query.
        ignore_terminations: see :class:`rpent.eval.settings.EnvSettings`.
        reward_coef: success step reward.
        seed: simulator seed.
        egl_device: GPU index for MuJoCo EGL rendering (``--cuda-device``), or None.
        video_dir: folder for per-episode mp4s, or None for no videos.
        video_fps: frames per second of the videos.
        log_dir: run directory (videos are named relative to it).
        prebuild: ``(local_index, task_id)`` of the envs to build before reporting ``ready`` (the first
            epoch's slots), so env construction overlaps across workers and is not rollout time.
        output_log: file that receives the worker process's stdout/stderr (simulator warnings, crashes),
            or None to keep the parent's terminal (it would break the live progress display).
        policy_image_size: edge (px) of the rendered policy cameras.
    """

    worker: int
    suite: str
    libero_type: str
    task_languages: tuple[str, ...]
    max_episode_steps: int
    num_action_chunks: int
    ignore_terminations: bool
    reward_coef: float
    seed: int
    egl_device: int | None
    video_dir: str | None
    video_fps: float
    log_dir: str
    prebuild: tuple[tuple[int, int], ...] = ()
    output_log: str | None = None
    policy_image_size: int = 256


@dataclass
class _Timing:
    physics_s: float = 0.0
    render_s: float = 0.0
    reset_s: float = 0.0
    build_s: float = 0.0
    wait_s: float = 0.0
    video_s: float = 0.0

    def take(self) -> dict[str, float]:
        """Return the totals so far and zero them."""
        out = dict(self.__dict__)
        for k in self.__dict__:
            setattr(self, k, 0.0)
        return out


@dataclass
class _Slot:
    """One env slot during an epoch."""

    env_index: int
    task_id: int
    init_state_id: int
    tracker: EpisodeTracker
    started: float
    queries: int = 0
    frames: list[np.ndarray] = field(default_factory=list)
    done: bool = False


class EnvWorker:
    """The worker's state machine (runs inside the spawned process; usable in-process for tests)."""

    def __init__(self, spec: WorkerSpec):
        """Import the simulator (after :func:`configure_rendering`)."""
        from rpent.eval.sim_adapter import open_sim  # imports MuJoCo: after GL configuration

        self.spec = spec
        self._open_sim = open_sim
        self.sims: dict[int, tuple[int, Any]] = {}  # local index -> (task id, sim)
        self.slots: dict[int, _Slot] = {}  # local index -> running slot
        self.timing = _Timing()
        self.epoch = -1
        self.sims_built = 0

    # -- envs ------------------------------------------------------------------------------------
    def ensure_sim(self, local: int, task_id: int) -> Any:
        """The env of slot ``local`` for ``task_id``; (re)built only when the slot's task changes."""
        cached = self.sims.get(local)
        if cached is not None and cached[0] == task_id:
            return cached[1]
        if cached is not None:
            cached[1].close()
        t0 = time.perf_counter()
        sim = self._open_sim(
            suite=self.spec.suite,
            task=task_id,
            libero_type=self.spec.libero_type,
            seed=self.spec.seed,
            max_episode_steps=self.spec.max_episode_steps,
            cuda_device=self.spec.egl_device,
            continue_after_success=self.spec.ignore_terminations,
            policy_image_size=self.spec.policy_image_size,
        )
        self.sims_built += 1
        self.timing.build_s += time.perf_counter() - t0
        self.sims[local] = (task_id, sim)
        return sim

    # -- epoch start -----------------------------------------------------------------------------
    def start_epoch(self, epoch: int, slots: list[dict[str, int]]) -> dict[str, Any]:
        """Reset every owned env to its slot; return the first ``obs`` message."""
        self.epoch = epoch
        self.slots = {}
        for s in slots:
            local = int(s["local_index"])
            task_id = int(s["task_id"])
            sim = self.ensure_sim(local, task_id)
            t0 = time.perf_counter()
            sim.reset(int(s["init_state_id"]))
            self.timing.reset_s += time.perf_counter() - t0
            self.slots[local] = _Slot(
                env_index=int(s["env_index"]),
                task_id=task_id,
                init_state_id=int(s["init_state_id"]),
                tracker=EpisodeTracker(reward_coef=self.spec.reward_coef),
                started=0.0,
            )
        now = time.perf_counter()
        for slot in self.slots.values():
            slot.started = now
        return self._observe([])

    # -- one action chunk --------------------------------------------------------------------------
    def apply_actions(self, env_indices: list[int], actions: np.ndarray) -> dict[str, Any]:
        """Execute one chunk per listed env; return ``obs`` (or ``epoch_done`` when all finished).

        Raises:
            ValueError: actions of the wrong shape, or an env index this worker does not run.
        """
        k = self.spec.num_action_chunks
        actions = np.asarray(actions, dtype=np.float64)
        if actions.ndim != 3 or actions.shape[0] != len(env_indices) or actions.shape[1] != k or actions.shape[2] != 7:
            raise ValueError(
                f"worker {self.spec.worker}: actions must be [n_envs={len(env_indices)}, {k}, 7], got {actions.shape}"
            )
        by_env = {slot.env_index: local for local, slot in self.slots.items()}
        finished: list[dict[str, Any]] = []
        for row, g in enumerate(env_indices):
            if g not in by_env:
                raise ValueError(f"worker {self.spec.worker} does not run env {g} in epoch {self.epoch}")
            local = by_env[g]
            slot = self.slots[local]
            sim = self.sims[local][1]
            for i in range(k):
                t0 = time.perf_counter()
                success = sim.step(actions[row, i])
                self.timing.physics_s += time.perf_counter() - t0
                slot.tracker.record_step(success)
                if slot.tracker.steps >= self.spec.max_episode_steps or (
                    success and not self.spec.ignore_terminations
                ):
                    slot.done = True
                    break
            if slot.done:
                finished.append(self._finish(local, slot).to_dict())
        if all(s.done for s in self.slots.values()):
            return {"op": "epoch_done", "epoch": self.epoch, "episodes": finished, "timing": self.timing.take(),
                    "sims_built": self.sims_built}
        return self._observe(finished)

    def _observe(self, finished: list[dict[str, Any]]) -> dict[str, Any]:
        running = [(local, s) for local, s in sorted(self.slots.items()) if not s.done]
        mains, wrists, states, langs, env_indices = [], [], [], [], []
        for local, slot in running:
            t0 = time.perf_counter()
            obs = self.sims[local][1].policy_obs()
            self.timing.render_s += time.perf_counter() - t0
            mains.append(obs["main_image"])
            wrists.append(obs["wrist_image"])
            states.append(np.asarray(obs["state"], dtype=np.float32))
            langs.append(self.spec.task_languages[slot.task_id])
            env_indices.append(slot.env_index)
            slot.queries += 1
            if self.spec.video_dir is not None:
                slot.frames.append(np.asarray(obs["main_image"], dtype=np.uint8))
        return {
            "op": "obs",
            "epoch": self.epoch,
            "env_indices": env_indices,
            "main_images": np.stack(mains) if mains else np.zeros((0, 256, 256, 3), np.uint8),
            "wrist_images": np.stack(wrists) if wrists else np.zeros((0, 256, 256, 3), np.uint8),
            "states": np.stack(states) if states else np.zeros((0, 8), np.float32),
            "task_descriptions": langs,
            "episodes": finished,
        }

    def _finish(self, local: int, slot: _Slot) -> EpisodeResult:
        tr = slot.tracker
        video = None
        if self.spec.video_dir is not None:
            from rpent.eval.outputs import video_name, write_video

            t0 = time.perf_counter()
            t1 = time.perf_counter()
            final = self.sims[local][1].policy_obs()["main_image"]
            self.timing.render_s += time.perf_counter() - t1
            name = video_name(self.epoch, slot.env_index, slot.task_id, slot.init_state_id, tr.success_once)
            path = Path(self.spec.video_dir) / name
            write_video(path, [*slot.frames, np.asarray(final, dtype=np.uint8)], self.spec.video_fps)
            video = str(path.relative_to(self.spec.log_dir))
            slot.frames = []
            self.timing.video_s += time.perf_counter() - t0
        return EpisodeResult(
            epoch=self.epoch,
            env_index=slot.env_index,
            worker=self.spec.worker,
            task_id=slot.task_id,
            init_state_id=slot.init_state_id,
            task_language=self.spec.task_languages[slot.task_id],
            success_once=tr.success_once,
            success_at_end=tr.success_now,
            episode_return=tr.episode_return,
            reward=tr.reward,
            episode_len=tr.steps,
            steps_to_success=tr.steps_to_success,
            num_policy_queries=slot.queries,
            wall_s=time.perf_counter() - slot.started,
            video=video,
        )

    def close(self) -> None:
        """Close every sim (idempotent)."""
        for _, sim in self.sims.values():
            try:
                sim.close()
            except Exception:  # noqa: BLE001 - best effort at shutdown
                pass
        self.sims = {}


def worker_main(conn: Connection, spec: WorkerSpec) -> None:
    """Entry point of a spawned env worker: serve ``epoch``/``actions``/``close`` until closed.

    Any exception is sent back as an ``error`` message (with its traceback) before exiting 1.
    """
    if spec.output_log is not None:  # fd-level, so C libraries' output (MuJoCo, EGL) lands there too
        fd = os.open(spec.output_log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
    from rpent.robots.libero.egl import configure_rendering  # sets MUJOCO_GL/EGL device; imports no MuJoCo

    configure_rendering(spec.egl_device)
    worker: EnvWorker | None = None
    code = 0
    try:
        worker = EnvWorker(spec)
        for local, task_id in spec.prebuild:
            worker.ensure_sim(local, task_id)
        build_s = worker.timing.build_s
        worker.timing.build_s = 0.0
        wire.send(conn, {"op": "ready", "worker": spec.worker, "pid": os.getpid(), "build_s": build_s,
                         "sims_built": worker.sims_built})
        while True:
            t_wait = time.perf_counter()
            msg = wire.recv(conn)
            op = msg["op"]
            if op == "close":
                break
            if op == "epoch":
                reply = worker.start_epoch(int(msg["epoch"]), list(msg["slots"]))
            elif op == "actions":
                worker.timing.wait_s += time.perf_counter() - t_wait  # policy + transport
                reply = worker.apply_actions([int(g) for g in msg["env_indices"]], msg["actions"])
            else:
                raise ValueError(f"worker {spec.worker}: unknown message op {op!r}")
            wire.send(conn, reply)
    except EOFError:
        code = 0  # the driver went away: exit quietly
    except BaseException as exc:  # noqa: BLE001 - report everything to the driver
        code = 1
        try:
            wire.send(
                conn,
                {"op": "error", "worker": spec.worker, "message": f"{type(exc).__name__}: {exc}",
                 "traceback": traceback.format_exc()},
            )
        except Exception:  # noqa: BLE001 - pipe already gone
            pass
    finally:
        if worker is not None:
            worker.close()
        conn.close()
    if code:
        raise SystemExit(code)
