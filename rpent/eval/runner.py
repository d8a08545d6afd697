"""One ``rpent-eval`` run end to end: plan -> policy -> rollout -> metrics -> log directory.

:func:`run_eval` is what the CLI calls; tests and benchmarks call it too (with ``show_progress=False``).
Order of work, each step logged to ``eval_embodiment.log``:

1. create ``<logs>/<YYYYmmdd-HH:MM:SS>-<config name>/``, write ``config.yaml``;
2. build the reset-state plan (:mod:`rpent.eval.plan`), print its coverage, write ``plan.txt``;
3. open the policy backend, check its metadata against the config;
4. spawn the env workers and run every rollout epoch (episodes appended to ``episodes.jsonl``);
5. aggregate ``eval/*``, write ``metrics.log``/``metrics.json`` and TensorBoard, then check
   ``eval/num_trajectories == total_num_envs x rollout_epoch``.

If anything fails after step 1, the error and traceback go to the log, the metrics of the
trajectories finished so far are written and the error is re-raised: nothing recorded is lost.
Such a run is marked INCOMPLETE in every metrics output (``metrics.log`` lines, ``metrics.json``
``complete: false`` / ``status`` / ``lost_episodes``, TensorBoard under ``eval_INCOMPLETE/``, the
log and the console) with k, N and the expected N, and each lost (task, init state, epoch) is named.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from rpent.eval.config import LoadedConfig, to_yaml
from rpent.eval.metrics import (
    Completeness,
    EpisodeResult,
    TaskRow,
    aggregate,
    check_trajectory_count,
    per_task_table,
)
from rpent.eval.outputs import (
    EpisodeLog,
    close_eval_logger,
    make_run_dir,
    metric_lines,
    setup_eval_logger,
    write_metrics,
    write_tensorboard,
)
from rpent.eval.plan import EvalPlan, build_plan
from rpent.eval.policies import check_metadata, open_policy
from rpent.eval.progress import EvalProgress, summary_table
from rpent.eval.rollout import RolloutDriver, RolloutTiming
from rpent.eval.settings import EvalSettings
from rpent.recording.atomic import write_bytes_atomic


@dataclass
class EvalOutcome:
    """Result of :func:`run_eval`.

    Attributes:
        run_dir: the log directory.
        metrics: ``eval/*`` values.
        table: per-task rows.
        results: every finished trajectory.
        timing: where the time went.
        plan: the episode schedule that ran.
    """

    run_dir: Path
    metrics: dict[str, float]
    table: list[TaskRow]
    results: list[EpisodeResult]
    timing: RolloutTiming
    plan: EvalPlan


def plan_for(settings: EvalSettings) -> EvalPlan:
    """The reset-state plan of ``settings`` (suite tasks and init-state counts from the LIBERO registry).

    Raises:
        EvalConfigError: unknown suite / LIBERO type (the registry's message).
    """
    from rpent.eval.errors import EvalConfigError
    from rpent.robots.libero import suites

    env = settings.env
    try:
        info = suites.suite_info(env.suite, env.libero_type)
    except ValueError as exc:
        raise EvalConfigError(f"env.eval.suite: {exc}") from None
    selected = set(range(info.n_tasks)) if env.task_ids is None else set(env.task_ids)
    outside = sorted(t for t in selected if t >= info.n_tasks)
    if outside:
        raise EvalConfigError(
            f"env.eval.task_ids {outside} out of range for suite {env.suite} (tasks 0..{info.n_tasks - 1})"
        )
    not_ready = sorted(t for t in selected if t not in info.ready_tasks)
    if env.task_ids is not None and not_ready:
        raise EvalConfigError(
            f"env.eval.task_ids {not_ready} of suite {env.suite} lack resources: {info.missing}; ready: {list(info.ready_tasks)}"
        )
    counts = [info.n_init_states[t] if t in info.ready_tasks and t in selected else 0 for t in range(info.n_tasks)]
    languages = [
        suites.task_info(env.suite, t, env.libero_type).language if t in info.ready_tasks else info.task_names[t]
        for t in range(info.n_tasks)
    ]
    try:
        return build_plan(
            env.suite, counts, languages, total_num_envs=env.total_num_envs, num_workers=env.num_workers,
            rollout_epoch=env.rollout_epoch, init_state_ids=env.init_state_ids,
        )
    except ValueError as exc:
        raise EvalConfigError(f"env.eval.init_state_ids: {exc}") from None


def plan_text(plan: EvalPlan) -> str:
    """``plan.txt``: the coverage summary, then one line per planned episode."""
    lines = list(plan.coverage_lines()) + ["", "epoch\tenv\tworker\ttask\treset_state\tpool_index\tinstruction"]
    for s in plan.slots:
        lines.append(
            f"{s.epoch}\t{s.env_index}\t{s.worker}\t{s.task_id}\t{s.init_state_id}\t{s.pool_index}\t"
            f"{plan.task_languages[s.task_id]}"
        )
    return "\n".join(lines) + "\n"


def run_eval(
    settings: EvalSettings,
    loaded: LoadedConfig,
    *,
    logs_dir: str | Path = "logs",
    console: Console | None = None,
    show_progress: bool = True,
    policy: Any = None,
    driver_factory: Any = None,
) -> EvalOutcome:
    """Run one evaluation (see the module docstring).

    Args:
        settings: validated settings.
        loaded: the config they came from (written to ``config.yaml``).
        logs_dir: parent of the generated run directory.
        console: rich console for the plan, progress and summary (default: stderr).
        show_progress: draw the live progress display.
        policy: an already-open policy backend (default: :func:`open_policy` from the settings).
        driver_factory: builds the rollout driver (default :class:`RolloutDriver`, local env worker
            processes; ``rpent-eval --ray-address`` passes :class:`rpent.eval.ray_workers.RayRolloutDriver`).

    Returns:
        :class:`EvalOutcome`.

    Raises:
        EvalConfigError, PolicyError, EnvWorkerError, TrajectoryCountError (after writing outputs).
    """
    console = console or Console(stderr=True)
    run_dir = make_run_dir(logs_dir, settings.config_name)
    log = setup_eval_logger(run_dir)
    episode_log = EpisodeLog(run_dir)
    results: list[EpisodeResult] = []
    timing = RolloutTiming()
    plan: EvalPlan | None = None
    meta: dict[str, Any] | None = None
    own_policy = policy is None
    t_start = time.perf_counter()
    try:
        log.info("Using benchmark=libero, config=%s (%s)", settings.config_name, loaded.path)
        log.info("overrides: %s", list(loaded.overrides))
        log.info("settings: %s", settings.to_dict())
        write_bytes_atomic(run_dir / "config.yaml", to_yaml(loaded.cfg).encode("utf-8"))
        console.print(f"[bold]rpent-eval[/] {settings.config_name} -> {run_dir}", soft_wrap=True)

        plan = plan_for(settings)
        for line in plan.coverage_lines():
            log.info("%s", line)
        console.print("\n".join(plan.coverage_lines()), highlight=False, markup=False, soft_wrap=True)
        write_bytes_atomic(run_dir / "plan.txt", plan_text(plan).encode("utf-8"))

        if own_policy:
            policy = open_policy(settings, log)
        meta = policy.metadata()
        for warning in check_metadata(meta, settings.model):
            log.warning("%s", warning)
            console.print(f"[yellow]warning:[/] {warning}", soft_wrap=True)
        log.info("policy loaded: backend=%s, device=%s, metadata=%s", settings.policy.backend,
                 settings.policy.device if settings.policy.backend != "endpoint" else settings.policy.endpoint, meta)
        settings = with_camera_size(settings, meta)
        log.info("policy cameras rendered at %d px", settings.env.policy_image_size)
        provenance = policy_provenance(meta)
        if provenance:
            write_bytes_atomic(run_dir / "policy.json", (json.dumps(provenance, indent=2) + "\n").encode("utf-8"))

        def on_event(event: dict[str, Any]) -> None:
            kind = event["kind"]
            if kind == "episode":
                r: EpisodeResult = event["result"]
                results.append(r)
                episode_log.append(r)
                log.info(
                    "episode epoch=%d env=%d task=%d reset_state=%d success_once=%s success_at_end=%s len=%d "
                    "queries=%d wall=%.1fs", r.epoch, r.env_index, r.task_id, r.init_state_id, r.success_once,
                    r.success_at_end, r.episode_len, r.num_policy_queries, r.wall_s,
                )
            elif kind == "epoch_start":
                log.info("Evaluating Rollout Epochs: epoch %d/%d", event["epoch"] + 1, settings.env.rollout_epoch)
            elif kind == "workers_ready":
                log.info("%d env workers ready in %.1f s", settings.env.num_workers, event["startup_s"])
            progress.on_event(event)

        with EvalProgress(settings.env.rollout_epoch, plan.num_trajectories, console, enabled=show_progress) as progress:
            driver = (driver_factory or RolloutDriver)(settings, plan, policy, log_dir=run_dir, on_event=on_event,
                                                       logger=log)
            timing = driver.timing
            with driver:
                driver.run()
            log.info("policy calls: %d, %.2f environments per call on average (rollout.pipeline_stage_num=%d)",
                     timing.policy_queries, timing.mean_envs_per_call, settings.env.pipeline_stage_num)
        completeness = completeness_of(plan, results, settings.env.expected_trajectories)
    except BaseException as exc:
        log.error("evaluation failed: %s\n%s", exc, traceback.format_exc())
        completeness = completeness_of(plan, results, settings.env.expected_trajectories,
                                       reason=f"{type(exc).__name__}: {exc}")
        try:
            _finish(run_dir, settings, results, timing, time.perf_counter() - t_start, completeness, log, meta)
            console.print(f"{completeness.marker()}; lost (task, init state, epoch): {completeness.lost_text()}; "
                          f"partial metrics: {run_dir / 'metrics.log'}", markup=False, highlight=False, soft_wrap=True)
        except Exception as finish_exc:  # noqa: BLE001 - never mask the original error
            log.error("could not write partial metrics: %s", finish_exc)
        close_eval_logger(log)
        raise
    finally:
        episode_log.close()
        if own_policy and policy is not None:
            policy.close()
    try:
        metrics, table = _finish(run_dir, settings, results, timing, time.perf_counter() - t_start, completeness, log, meta)
        if not show_progress:
            console.print(summary_table(results))
        check_trajectory_count(len(results), settings.env.total_num_envs, settings.env.rollout_epoch)
    except BaseException as exc:
        log.error("%s", exc)
        raise
    finally:
        close_eval_logger(log)
    assert plan is not None
    return EvalOutcome(run_dir, metrics, table, results, timing, plan)


def completeness_of(plan: EvalPlan | None, results: list[EpisodeResult], expected: int, reason: str = "") -> Completeness:
    """Planned vs finished trajectories; every planned (task, init state, epoch) without a result is lost."""
    done = {(r.epoch, r.env_index) for r in results}
    lost = () if plan is None else tuple(
        (s.task_id, s.init_state_id, s.epoch, s.env_index) for s in plan.slots if (s.epoch, s.env_index) not in done
    )
    return Completeness(expected=expected, finished=len(results), lost=lost, reason=reason)


def with_camera_size(settings: EvalSettings, meta: dict[str, Any]) -> EvalSettings:
    """``settings`` with ``env.policy_image_size`` resolved: auto (0) -> the policy's ``camera_size``
    (``vla.metadata``), else 256 (LIBERO's policy cameras)."""
    size = settings.env.policy_image_size or int(meta.get("camera_size") or 256)
    return dataclasses.replace(settings, env=dataclasses.replace(settings.env, policy_image_size=size))


def policy_provenance(meta: dict[str, Any]) -> dict[str, Any]:
    """What identifies the evaluated weights in the outputs: the policy's ``vla.metadata`` fields
    ``policy``, ``checkpoint`` (path and sha256s), ``dataset`` (root, sha256, episodes, frames) and
    ``training`` where it reports them (lerobot checkpoints trained by rpent do)."""
    return {k: meta[k] for k in ("policy", "checkpoint", "dataset", "training", "tasks") if meta.get(k)}


def _finish(
    run_dir: Path, settings: EvalSettings, results: list[EpisodeResult], timing: RolloutTiming,
    wall_s: float, completeness: Completeness, log: logging.Logger, policy_meta: dict[str, Any] | None = None,
) -> tuple[dict[str, float], list[TaskRow]]:
    """Write metrics.log / metrics.json / TensorBoard for whatever finished (marked INCOMPLETE if not all)."""
    metrics = aggregate(results)
    table = per_task_table(results)
    write_metrics(
        run_dir, metrics, table,
        {"wall_s": wall_s, "timing": timing.to_dict(), "settings": settings.to_dict(),
         **({"policy": policy_provenance(policy_meta)} if policy_meta else {})},
        completeness,
    )
    if "tensorboard" in settings.logger_backends:
        write_tensorboard(run_dir, metrics, table, completeness)
    if not completeness.complete:
        log.error("%s; lost (task, init state, epoch): %s", completeness.marker(), completeness.lost_text(limit=1000))
    for line in metric_lines(metrics, completeness):
        log.info("%s", line.replace("\t", " = ", 1).replace("\t", "  "))
    return metrics, table
