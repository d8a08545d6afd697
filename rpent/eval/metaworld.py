"""``rpent-eval --robot metaworld``: closed-loop evaluation of a ``vla.predict`` policy on Meta-World.

Meta-World (metaworld 3.1.1, mujoco 3.3.0) cannot share the main environment with LIBERO
(mujoco 2.3.7), so here every env worker is a Meta-World env server subprocess
(:mod:`rpent.robots.metaworld.env_server`, one per cell = task x seed, under the Meta-World
interpreter ``.venv-metaworld/bin/python``) and the policy is a ``vla.predict`` server too. With
``--policy expert`` rpent starts :mod:`rpent.robots.metaworld.expert_server` (Meta-World's
scripted expert) under the same interpreter; ``--policy-endpoint`` uses any running server instead.

Per step the worker sends ``{"environment_state": float64[1,39], "state": float32[1,4],
"task": [env name], "prompt": [instruction]}`` (plus ``main_image``/``wrist_image``
uint8[1,256,256,3] when ``--images``) and executes the returned float32[1, n_exec, 4] actions
until the env's success predicate holds (terminated) or ``--max-episode-steps`` env steps pass
(truncated). The seed picks the goal variant (seed mod 50) and is the cell's ``init_state_id``.

The log directory has the LIBERO evaluation's layout (:mod:`rpent.eval.outputs`):
``eval_embodiment.log``, ``env_worker_<cell>.log`` (each env server's output), ``config.yaml``,
``plan.txt``, ``episodes.jsonl``, ``metrics.log``/``metrics.json`` (rates with k/N and the Wilson
95% interval, per-task table; an incomplete run is marked INCOMPLETE) and ``tensorboard/``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO

import numpy as np

from rpent.eval.errors import EvalConfigError, EvalError
from rpent.eval.metrics import Completeness, EpisodeResult, EpisodeTracker, aggregate, per_task_table
from rpent.eval.outputs import (EpisodeLog, close_eval_logger, make_run_dir, metric_lines, setup_eval_logger,
                                write_metrics, write_tensorboard)
from rpent.recording.atomic import write_bytes_atomic

__all__ = ["MetaWorldEvalSettings", "MetaWorldEvalOutcome", "run_metaworld_eval", "POLICIES"]

#: ``--policy`` values: ``expert`` (rpent starts Meta-World's scripted expert server) or ``endpoint``.
POLICIES = ("expert", "endpoint")
#: Seconds to wait for a server's readiness line (a Meta-World env server imports mujoco + metaworld).
READY_TIMEOUT_S = 300.0
READY_PREFIX = "RPC server listening on "


@dataclass(frozen=True)
class MetaWorldEvalSettings:
    """What one Meta-World evaluation runs.

    Attributes:
        suite: ``mt10`` or ``mt50``.
        tasks: task indices in the suite.
        seeds: goal-variant seeds (variant = seed mod 50); one episode per (task, seed) cell.
        policy: ``expert`` or ``endpoint`` (:data:`POLICIES`).
        policy_endpoint: ``[proto://]host:port`` of a running ``vla.predict`` server (``endpoint`` only).
        max_episode_steps: env steps before truncation, 1..500.
        env_python: the Meta-World interpreter.
        images: send main/wrist images to the policy (the expert needs none).
    """

    suite: str
    tasks: tuple[int, ...]
    seeds: tuple[int, ...]
    policy: str = "expert"
    policy_endpoint: str | None = None
    max_episode_steps: int = 500
    env_python: str = ""
    images: bool = False

    @property
    def config_name(self) -> str:
        """Name part of the log directory (``metaworld_mt10_expert_eval``)."""
        return f"metaworld_{self.suite}_{self.policy}_eval"


@dataclass
class MetaWorldEvalOutcome:
    """Result of :func:`run_metaworld_eval`: the log dir, ``eval/*`` metrics, per-task rows, episodes."""

    run_dir: Path
    metrics: dict
    table: list
    results: list
    completeness: Completeness


def build_settings(suite: str, tasks: list[int], seeds: list[int], policy: str, policy_endpoint: str | None,
                   max_episode_steps: int, env_python: str | None, images: bool) -> MetaWorldEvalSettings:
    """Check the arguments against the task registry and the interpreter.

    Raises:
        EvalConfigError: unknown suite, task index out of range, bad steps/policy, missing interpreter.
    """
    from rpent.robots.metaworld import tasks as mw_tasks
    from rpent.robots.metaworld.robot import MetaWorldRobot

    try:
        suite = str(suite).lower()
        for t in tasks:
            mw_tasks.task_info(suite, t)
    except ValueError as exc:
        raise EvalConfigError(str(exc)) from None
    if policy not in POLICIES:
        raise EvalConfigError(f"--policy {policy!r} is unknown for --robot metaworld; use one of {', '.join(POLICIES)}")
    if policy == "endpoint" and not policy_endpoint:
        raise EvalConfigError("--policy endpoint needs --policy-endpoint HOST:PORT of a running vla.predict server")
    if not 1 <= max_episode_steps <= 500:
        raise EvalConfigError(f"--max-episode-steps must be 1..500 (Meta-World's max_path_length), got {max_episode_steps}")

    class _Cfg:
        pass

    cfg = _Cfg()
    cfg.env_python = env_python
    try:
        py = MetaWorldRobot().env_python(cfg)
    except ValueError as exc:
        raise EvalConfigError(str(exc)) from None
    return MetaWorldEvalSettings(suite=suite, tasks=tuple(tasks), seeds=tuple(seeds), policy=policy,
                                 policy_endpoint=policy_endpoint, max_episode_steps=max_episode_steps,
                                 env_python=py, images=images)


class _Server:
    """A ``python -m MODULE --transport socket --port 0`` subprocess under the Meta-World interpreter;
    its output goes to ``log_path`` and its endpoint is read from the readiness line."""

    def __init__(self, python: str, module: str, args: list[str], log_path: Path) -> None:
        from rpent.robots.metaworld.robot import REPO_ROOT

        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH", "")) if p)
        env.setdefault("MUJOCO_GL", "egl")
        env.setdefault("PYOPENGL_PLATFORM", "egl")
        argv = [python, "-u", "-m", module, *args, "--transport", "socket", "--host", "127.0.0.1", "--port", "0",
                "--parent-watch"]
        self.log_path = log_path
        self._log: IO[str] = open(log_path, "a", encoding="utf-8")
        self._log.write("$ " + " ".join(argv) + "\n")
        self._log.flush()
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True, env=env, start_new_session=True)
        self.endpoint = self._wait_ready(module)
        threading.Thread(target=self._pump, daemon=True).start()

    def _wait_ready(self, module: str) -> str:
        result: dict = {}

        def read() -> None:
            for line in self.proc.stdout:
                self._log.write(line)
                self._log.flush()
                if line.startswith(READY_PREFIX):
                    result["endpoint"] = line[len(READY_PREFIX):].strip()
                    return

        t = threading.Thread(target=read, daemon=True)
        t.start()
        t.join(READY_TIMEOUT_S)
        if "endpoint" not in result:
            self.close()
            raise EvalError(f"{module} did not start (exit status {self.proc.returncode}); see {self.log_path}")
        return result["endpoint"]

    def _pump(self) -> None:
        try:
            for line in self.proc.stdout:
                self._log.write(line)
                self._log.flush()
        except (ValueError, OSError):
            pass

    def close(self) -> None:
        """Terminate the server (SIGTERM, then SIGKILL after 10 s) and close its log."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        try:
            self._log.close()
        except OSError:
            pass


def _plan_text(s: MetaWorldEvalSettings, names: dict[int, str]) -> str:
    lines = [f"robot metaworld, suite {s.suite}, policy {s.policy}, max_episode_steps {s.max_episode_steps}",
             "cell\tenv_worker\ttask\tinit_state (seed)\tenv name"]
    cell = 0
    for t in s.tasks:
        for seed in s.seeds:
            lines.append(f"{cell}\tenv_worker_{cell}\t{t}\t{seed}\t{names[t]}")
            cell += 1
    return "\n".join(lines) + "\n"


def _run_episode(env, policy, s: MetaWorldEvalSettings, cell: int, task: int, seed: int, name: str,
                 language: str) -> EpisodeResult:
    """One closed-loop episode on a connected env client; returns its record."""
    t0 = time.monotonic()
    robot = env.reset()
    env_state = np.asarray(robot["obs"], dtype=np.float64)
    state = np.asarray(robot["state"], dtype=np.float32)
    tracker = EpisodeTracker(reward_coef=1.0)
    queries, done = 0, False
    while not done:
        obs = {"environment_state": env_state[None], "state": state[None], "task": [name], "prompt": [language]}
        if s.images:
            po = env.policy_obs(images=True)
            obs["main_image"], obs["wrist_image"] = po["main_image"][None], po["wrist_image"][None]
        chunk = policy.predict(obs)
        queries += 1
        if chunk.ndim != 3 or chunk.shape[0] != 1 or chunk.shape[2] != 4 or chunk.shape[1] < 1:
            raise EvalError(f"the policy returned actions of shape {chunk.shape}; Meta-World needs float32[1, n_exec, 4]")
        for action in chunk[0]:
            out = env.step(action)
            tracker.record_step(bool(out["success"]))
            env_state = np.asarray(out["obs"]["obs"], dtype=np.float64)
            state = np.asarray(out["obs"]["state"], dtype=np.float32)
            if out["terminated"] or out["truncated"]:
                done = True
                break
    return EpisodeResult(epoch=0, env_index=cell, worker=cell, task_id=task, init_state_id=seed,
                         task_language=language, success_once=tracker.success_once,
                         success_at_end=tracker.success_now, episode_return=tracker.episode_return,
                         reward=tracker.reward, episode_len=tracker.steps, steps_to_success=tracker.steps_to_success,
                         num_policy_queries=queries, wall_s=round(time.monotonic() - t0, 3))


def run_metaworld_eval(s: MetaWorldEvalSettings, logs_dir: str | Path,
                       progress: IO[str] | None = None) -> MetaWorldEvalOutcome:
    """Run every (task, seed) cell once; write the log directory (module docstring).

    A cell whose env server fails to start or whose episode raises is recorded as lost (the error is
    in ``eval_embodiment.log`` and ``metrics.json``'s ``stopped_by``) and the next cell runs; the
    metrics then say INCOMPLETE. A policy server that does not start stops the run (EvalError).

    Raises:
        EvalError: the expert policy server did not start, or the endpoint does not answer.
    """
    import yaml

    from rpent.eval.policies.endpoint import EndpointPolicy
    from rpent.robots.metaworld import tasks as mw_tasks
    from rpent.robots.metaworld.env_client import MetaWorldEnvClient

    progress = progress or sys.stderr
    run_dir = make_run_dir(logs_dir, s.config_name)
    log = setup_eval_logger(run_dir)
    infos = {t: mw_tasks.task_info(s.suite, t) for t in s.tasks}
    names = {t: infos[t].name for t in s.tasks}
    write_bytes_atomic(run_dir / "config.yaml", yaml.safe_dump({"robot": "metaworld", **asdict(s)}).encode())
    write_bytes_atomic(run_dir / "plan.txt", _plan_text(s, names).encode())
    log.info("robot metaworld settings %s", asdict(s))
    episodes = EpisodeLog(run_dir)
    results: list[EpisodeResult] = []
    lost: list[tuple[int, int, int, int]] = []
    reason = ""
    server = None
    policy = None
    try:
        if s.policy == "expert":
            server = _Server(s.env_python, "rpent.robots.metaworld.expert_server", [], run_dir / "policy_server.log")
            endpoint = server.endpoint
        else:
            endpoint = s.policy_endpoint
        try:
            policy = EndpointPolicy(endpoint)
        except Exception as exc:  # PolicyError names the endpoint
            raise EvalError(str(exc)) from None
        log.info("policy %s at %s: %s", s.policy, endpoint, policy.metadata())
        cells = [(t, seed) for t in s.tasks for seed in s.seeds]
        for cell, (task, seed) in enumerate(cells):
            env_srv = client = None
            try:
                env_srv = _Server(s.env_python, "rpent.robots.metaworld.env_server",
                                  ["--suite", s.suite, "--task", str(task), "--seed", str(seed),
                                   "--max-episode-steps", str(s.max_episode_steps)],
                                  run_dir / f"env_worker_{cell}.log")
                client = MetaWorldEnvClient(env_srv.endpoint, expected={
                    "robot": "metaworld", "suite": s.suite, "task": task, "seed": seed,
                    "max_episode_steps": s.max_episode_steps})
                r = _run_episode(client, policy, s, cell, task, seed, names[task], infos[task].language)
                episodes.append(r)
                results.append(r)
                log.info("cell %d task %d (%s) seed %d: success=%s steps=%d", cell, task, names[task], seed,
                         r.success_once, r.episode_len)
                print(f"[{cell + 1}/{len(cells)}] task {task} {names[task]} seed {seed}: "
                      f"{'success' if r.success_once else 'failure'} in {r.episode_len} steps", file=progress, flush=True)
            except Exception as exc:  # recorded as lost; the run goes on
                lost.append((task, seed, 0, cell))
                reason = reason or f"cell {cell} (task {task}, seed {seed}): {type(exc).__name__}: {exc}"
                log.error("cell %d task %d seed %d failed: %s: %s", cell, task, seed, type(exc).__name__, exc)
                print(f"[{cell + 1}/{len(cells)}] task {task} seed {seed}: ERROR {exc}", file=progress, flush=True)
            finally:
                if client is not None:
                    client.close()
                if env_srv is not None:
                    env_srv.close()
    except BaseException as exc:
        reason = reason or f"{type(exc).__name__}: {exc}"
        done = {(r.task_id, r.init_state_id) for r in results}
        lost_set = {(t, sd) for t, sd, _, _ in lost}
        for cell, (t, sd) in enumerate((t, sd) for t in s.tasks for sd in s.seeds):
            if (t, sd) not in done and (t, sd) not in lost_set:
                lost.append((t, sd, 0, cell))
        raise
    finally:
        episodes.close()
        if policy is not None:
            policy.close()
        if server is not None:
            server.close()
        completeness = Completeness(expected=len(s.tasks) * len(s.seeds), finished=len(results),
                                    lost=tuple(lost), reason=reason)
        metrics, table = aggregate(results), per_task_table(results)
        write_metrics(run_dir, metrics, table, {"robot": "metaworld", "settings": asdict(s)}, completeness)
        try:
            write_tensorboard(run_dir, metrics, table, completeness)
        except Exception as exc:  # tensorboard is optional output; the metrics files are written
            log.warning("tensorboard not written: %s", exc)
        for line in metric_lines(metrics, completeness):
            log.info("%s", line)
        close_eval_logger(log)
    return MetaWorldEvalOutcome(run_dir, metrics, table, results, completeness)
