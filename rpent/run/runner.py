"""The run loop: start (or attach to) the services, build the toolkit, let the planner act,
and leave a complete run record — also when something dies (trio; used by the CLI and the TUI).

Order of work in :func:`run_task`:

1. create the run directory and its :class:`~rpent.run.record.RunRecord` (refuses a directory
   that holds anything: an earlier run's files are never overwritten or mixed), ``run.log`` and
   ``provenance.json`` (:mod:`rpent.recording.provenance`);
2. start services through the caller's :class:`~rpent.services.Supervisor`: the env server
   (always, unless ``env_endpoint``), the VLA (``vla_endpoint``, or spawned when a Pi0.5
   checkpoint is configured) and SAM3 (``sam3_endpoint``, or spawned when a checkpoint is set);
3. connect the env client (checks the server's (suite, task, seed, max_episode_steps)) and
   build the toolkit (and the trajectory recorder with ``record_trajectory``);
4. run the planner (or the code policy) on a worker thread; trio cancellation (Ctrl-C, a TUI
   task switch) interrupts it: the running tool stops at its next env-step boundary;
5. always: write ``transcript_<tag>.json`` (with the error, if any), close ``episode.mp4``,
   write the recipe when the run is labelled ``succeeded`` and the environment predicate held,
   close the recorder (its ``task.json`` gets the label, verdicts and disagreement). The
   caller's supervisor stops every service it started when its ``async with`` block ends.

The outcome fields (:mod:`rpent.recording.outcome`): a run that stopped before the environment
was read (cancelled while a service started, an unreachable endpoint, a service that died at
start) records ``environment_success`` null with ``environment_success_unknown`` saying why and
``stopped_during`` saying where, never false; a service that failed to start has its own last
error line in the run's ``error``.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
import time
from pathlib import Path
from typing import Callable

import trio

from rpent.display import printable
from rpent.recording.outcome import Outcome, label_exclusion
from rpent.recording.provenance import model_identity, run_provenance
from rpent.run.config import RunConfig, RunOutcome, default_output_dir, run_label, verdict_disagreement
from rpent.run.record import RunRecord, run_tag

__all__ = ["run_task", "env_service_spec", "RUN_LOGGER"]

RUN_LOGGER = "rpent.run"
log = logging.getLogger(RUN_LOGGER)


def env_service_spec(cfg: RunConfig):
    """The :class:`~rpent.services.ServiceSpec` of this run's env server (the robot adapter's,
    :mod:`rpent.robots.registry`; it may run under another interpreter, ``cfg.env_python``)."""
    from rpent.robots.registry import get_robot

    return get_robot(cfg.robot).env_service_spec(cfg)


def vla_service_spec(cfg: RunConfig):
    """The VLA service spec, or None when no VLA is configured."""
    from rpent.services import ServiceSpec

    if cfg.vla_endpoint:
        return ServiceSpec(name="vla_server", endpoint=cfg.vla_endpoint)
    path = cfg.resolved_vla_model_path()
    if not path:
        return None
    argv = [sys.executable, "-m", "rpent.robots.components.pi05_vla_server", "--embodiment", "libero",
            "--model-path", path]
    if cfg.cuda_device is not None:
        argv += ["--cuda-device", str(cfg.cuda_device)]
    return ServiceSpec(name="vla_server", argv=argv, transport=cfg.transport, ready_timeout_s=900.0)


def sam3_service_spec(cfg: RunConfig):
    """The SAM3 service spec, or None when no SAM3 is configured."""
    from rpent.services import ServiceSpec

    if cfg.sam3_endpoint:
        return ServiceSpec(name="sam3_server", endpoint=cfg.sam3_endpoint)
    path = cfg.resolved_sam3_checkpoint()
    if not path:
        return None
    argv = [sys.executable, "-m", "rpent.robots.components.sam3_server", "--checkpoint", path]
    if cfg.cuda_device is not None:
        argv += ["--cuda-device", str(cfg.cuda_device)]
    return ServiceSpec(name="sam3_server", argv=argv, transport=cfg.transport, ready_timeout_s=900.0)


def _setup_run_log(out: Path, verbose: bool) -> logging.Handler:
    handler = logging.FileHandler(out / "run.log", encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.setLevel(logging.DEBUG if verbose else logging.INFO)
    root = logging.getLogger("rpent")
    root.addHandler(handler)
    root.setLevel(logging.DEBUG if verbose else min(root.level or logging.INFO, logging.INFO))
    return handler


def _starting(spec) -> str:
    """``starting env_server`` / ``reaching env_server at socket://...`` for ``stopped_during``."""
    return f"reaching {spec.name} at {spec.endpoint}" if spec.endpoint else f"starting {spec.name}"


def _run_error(exc: BaseException) -> str:
    """``<Type>: <message>``; a service that failed to start gives one line with its own last error
    line (:attr:`rpent.services.ServiceStartError.summary`; the full tail stays in its log)."""
    from rpent.services import ServiceStartError

    if isinstance(exc, BaseExceptionGroup):  # a nursery's wrapper: the record names what failed inside it
        return "; ".join(dict.fromkeys(_run_error(e) for e in exc.exceptions))
    if isinstance(exc, ServiceStartError):
        return f"{type(exc).__name__}: {exc.summary}"
    return f"{type(exc).__name__}: {exc}"


def _config_summary(cfg: RunConfig) -> dict:
    """The run's settings for its provenance (no secrets: keys live in the environment)."""
    pc = cfg.planner_config
    return {"robot": cfg.robot, "suite": cfg.suite, "task": cfg.task, "seed": cfg.seed, "libero_type": cfg.libero_type,
            "max_episode_steps": cfg.max_episode_steps, "planner": cfg.recorded_planner, "model": pc.model,
            "reasoning_effort": pc.reasoning_effort, "max_turns": pc.max_turns, "policy_mode": cfg.policy_mode,
            "code_file": cfg.code_file, "env_endpoint": cfg.env_endpoint, "vla_endpoint": cfg.vla_endpoint,
            "sam3_endpoint": cfg.sam3_endpoint, "vla_model_path": cfg.resolved_vla_model_path(),
            "sam3_checkpoint": cfg.resolved_sam3_checkpoint(), "transport": cfg.transport,
            "cuda_device": cfg.cuda_device, "record_trajectory": cfg.record_trajectory,
            "record_observations": cfg.record_observations, "require_operator_verdict": cfg.require_operator_verdict,
            "step_images": cfg.step_images, "memory_dir": None if cfg.memory_dir is None else str(cfg.memory_dir),
            "output_dir": None if cfg.output_dir is None else str(cfg.output_dir)}


def _model_identity(kind: str, svc, client, checkpoint: str | None) -> dict | None:
    """:func:`rpent.recording.provenance.model_identity` of the VLA / SAM3 service (None when the
    run has none); asks the server for ``<kind>.metadata`` (its own account of its checkpoint)."""
    if svc is None:
        return None
    meta, err = None, None
    try:
        reply = client.call(f"{kind}.metadata", timeout=30.0)
        meta = reply if isinstance(reply, dict) else None
    except Exception as exc:  # noqa: BLE001 — a server without the method: recorded, not fatal
        err = f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:200]}"
    return model_identity(checkpoint=checkpoint, endpoint=str(svc.endpoint), server_metadata=meta, metadata_error=err)


async def run_task(cfg: RunConfig, supervisor, *, operator=None, steering=None,
                   on_event: Callable[[dict], None] | None = None, verbose: bool = False,
                   toolkit_cls: type | None = None, system_prompt: str | None = None) -> RunOutcome:
    """Run one task end to end (see the module docstring).

    Args:
        cfg: the run.
        supervisor: an entered :class:`rpent.services.Supervisor` (its ``log_dir`` should be the
            run directory so service logs land next to the record).
        operator: answers verdict / scene-reset requests (default: none attached).
        steering: :class:`rpent.planners.steering.Steering` for operator lines and interrupts.
        on_event: receives run events (docs/interfaces.md "Run layer"); must not block.
        verbose: DEBUG-level ``run.log``.
        toolkit_cls: a :class:`LiberoToolkit` subclass to build instead (exploration's).
        system_prompt: replaces the rendered tool-mode system prompt (exploration's own prompt).
    Returns:
        :class:`RunOutcome`. Errors of services, planners and tools are reported in it, never
        raised; only bad arguments raise.
    Raises:
        FileExistsError: the output directory already holds a run record.
        ValueError: unknown suite/task, bad policy mode (before anything is started).
    """
    from rpent.robots.registry import get_robot

    robot = get_robot(cfg.robot)
    info = robot.task_info(cfg.suite, cfg.task, cfg.libero_type)
    if toolkit_cls is None and cfg.planner == "flash" and cfg.robot == "libero":
        from rpent.flash.toolkit import FlashToolkit  # state-only steps, images where the replay looks

        toolkit_cls = FlashToolkit
    if cfg.policy_mode not in ("tools", "code"):
        raise ValueError(f"--policy-mode must be 'tools' or 'code', got {cfg.policy_mode!r}")
    out = Path(cfg.output_dir) if cfg.output_dir else default_output_dir(cfg.suite, cfg.task, cfg.seed)
    tag = run_tag(cfg.suite, cfg.task, cfg.seed)
    record = RunRecord(out, tag)
    handler = _setup_run_log(out, verbose)
    provenance = run_provenance(argv=cfg.argv, config=_config_summary(cfg))
    record.write_provenance(provenance)
    where = ["starting the services"]  # what the run is doing: the record's stopped_during if it stops early
    emit = _safe(on_event)
    t0 = time.monotonic()
    outcome = RunOutcome(output_dir=str(out))
    holder: dict = {}  # the planner's result, kept even when the run is cancelled while it returns
    holder["steering"] = steering_log = []
    stop_recording = _record_steering(steering, out, steering_log, emit)
    toolkit = recorder = None
    clients: list = []
    emit({"kind": "status", "state": "starting", "detail": f"{cfg.suite} task {cfg.task} seed {cfg.seed}"})
    log.info("run %s: suite=%s task=%d seed=%d planner=%s model=%s policy_mode=%s output_dir=%s", tag, cfg.suite,
             cfg.task, cfg.seed, cfg.recorded_planner, cfg.planner_config.model, cfg.policy_mode, out)
    try:
        env_spec = env_service_spec(cfg)
        where[0] = _starting(env_spec)
        env_svc = await supervisor.start(env_spec)
        shared = getattr(robot, "services", ("vla", "sam3"))  # the shared services its toolkit can use
        vla_spec = vla_service_spec(cfg) if "vla" in shared else None
        sam3_spec = sam3_service_spec(cfg) if "sam3" in shared else None
        if vla_spec:
            where[0] = _starting(vla_spec)
        vla_svc = await supervisor.start(vla_spec) if vla_spec else None
        if sam3_spec:
            where[0] = _starting(sam3_spec)
        sam3_svc = await supervisor.start(sam3_spec) if sam3_spec else None
        where[0] = f"connecting to {env_svc.name} and building the toolkit"
        if not shared:
            log.info("robot %s uses no VLA / SAM3 services", cfg.robot)
        elif vla_svc is None:
            log.info("pi0_pick and pi0_doubled are left out: no VLA configured (--vla-endpoint or PI05_CHECKPOINT_PATH)")
        if shared and sam3_svc is None:
            log.info("segment answers from the simulator's instance segmentation: no SAM3 configured "
                     "(--sam3-endpoint or SAM3_CHECKPOINT_PATH)")

        def build():
            nonlocal toolkit, recorder
            env = robot.env_client(env_svc.endpoint, cfg)
            clients.append(env)
            vla = vla_svc.client(timeout=120.0) if vla_svc else None
            sam3 = sam3_svc.client(timeout=120.0) if sam3_svc else None
            clients.extend(c for c in (vla, sam3) if c is not None)
            provenance["models"] = {
                "vla": _model_identity("vla", vla_svc, vla, None if cfg.vla_endpoint else cfg.resolved_vla_model_path()),
                "sam3": _model_identity("sam3", sam3_svc, sam3,
                                        None if cfg.sam3_endpoint else cfg.resolved_sam3_checkpoint())}
            record.write_provenance(provenance)
            if cfg.record_trajectory:
                from rpent.recording import TaskInfo, TrajectoryRecorder

                recorder = TrajectoryRecorder(out, TaskInfo(
                    robot=cfg.robot, suite=cfg.suite, task=cfg.task, seed=cfg.seed, task_language=info.language,
                    planner=cfg.recorded_planner, model=cfg.planner_config.model,
                    reasoning_effort=cfg.planner_config.reasoning_effort, policy_mode=cfg.policy_mode,
                    init_state_id=env.meta.get("init_state_id"), init_state_sha256=env.meta.get("init_state_sha256")),
                    observations=cfg.record_observations, provenance=provenance)
            cls = toolkit_cls or robot.toolkit_class()
            # a toolkit with capture modes (LIBERO) renders step images as --step-images says
            capture = {"capture": cfg.resolved_step_images()} if getattr(cls, "CAPTURE_MODES", None) else {}
            toolkit = cls(env, record, vla=vla, sam3=sam3, operator=operator, recorder=recorder,
                          on_event=emit, video=cfg.video,
                          require_operator_verdict=cfg.require_operator_verdict, **capture)
            toolkit.asker = "code_file" if cfg.code_file else cfg.planner
            return toolkit

        await trio.to_thread.run_sync(build)
        # the in-process handle, for hosts that run code-policy cells against this run (the TUI editor)
        emit({"kind": "toolkit", "toolkit": toolkit})
        emit({"kind": "status", "state": "running", "detail": info.language})
        where[0] = "running the planner" if cfg.policy_mode == "tools" and not cfg.code_file else "running the code policy"
        await _run_policy(cfg, toolkit, info, record, steering, emit, recorder, holder, system_prompt)
        result = holder.get("result")
        _take_result(outcome, result)
        if outcome.error:  # the planner ended on an error (a dead service's, too): say where the run was
            outcome.stopped_during = where[0]
        if result is not None and result.error:
            dead = _dead_services(supervisor)
            if dead:
                outcome.error = f"{result.error} ({dead})"
    except BaseException as exc:  # noqa: BLE001 — the record must be written whatever failed
        result = holder.get("result")
        if _is_cancellation(exc):
            _take_result(outcome, result)
            reason = getattr(steering, "stop_reason", None)  # e.g. "replaced by TaskRun 0003" from the TUI
            outcome.error, outcome.stop_reason = f"run cancelled ({reason or 'interrupted'})", "cancelled"
            outcome.error_kind = None
            outcome.stopped_during = where[0]
            raise
        if not isinstance(exc, Exception):
            raise
        _take_result(outcome, result)
        outcome.error, outcome.error_kind = _run_error(exc), None
        dead = _dead_services(supervisor, exclude=getattr(exc, "service", None))
        if dead:
            outcome.error += f" ({dead})"
        outcome.stop_reason = "error"
        outcome.stopped_during = where[0]
        log.error("run failed: %s", outcome.error)
        log.debug("run failure traceback", exc_info=True)
    finally:
        if outcome.error:  # it may quote a code cell's or a model's text: no terminal controls in the summary
            outcome.error = printable(outcome.error)
        with trio.CancelScope(shield=True):
            stop_recording()
            await trio.to_thread.run_sync(lambda: _finalize(cfg, info, record, toolkit, recorder,
                                                           holder.get("result"), outcome, t0, clients,
                                                           steering=steering, steering_log=steering_log,
                                                           memory=holder.get("memory"), provenance=provenance))
            logging.getLogger("rpent").removeHandler(handler)
            handler.close()
            detail = "; ".join(x for x in (outcome.error, outcome.disagreement and f"disagreement: {outcome.disagreement}")
                              if x)
            emit({"kind": "status", "state": outcome.label, "detail": detail})
            emit({"kind": "finished", "outcome": outcome.to_dict()})
    return outcome


def _record_steering(steering, out: Path, log_list: list, emit) -> Callable[[], None]:
    """Write every operator input of ``steering`` (lines, interrupts, stops) to
    ``<out>/steering.jsonl`` as it happens (so a crash keeps it), to ``log_list`` (the
    transcript's ``steering`` list) and as ``{"kind": "steering", ...}`` run events.
    Returns the unregister function (no-op without steering)."""
    add = getattr(steering, "add_event_listener", None)
    if not callable(add):
        return lambda: None
    path = out / "steering.jsonl"
    lock = threading.Lock()

    def on_input(event: dict) -> None:
        with lock:
            log_list.append(dict(event))
            with open(path, "a", encoding="utf-8") as fh:
                fh.write(json.dumps(event, ensure_ascii=False) + "\n")
        emit({"kind": "steering", **event})

    return add(on_input)


def _take_result(outcome: RunOutcome, result) -> None:
    """Copy a planner result into the outcome (no-op for None). A planner that stopped without
    calling ``finish`` and without an error of its own gets a one-line error saying so (no silent ends); its ``stop_reason`` is kept (the exit code stays "not solved")."""
    if result is None:
        return
    outcome.stats = result.stats.to_dict()
    outcome.finish = {"status": result.finish.status, "summary": result.finish.summary} if result.finish else None
    outcome.error = result.error
    outcome.error_kind = result.error_kind if result.error else None
    outcome.stop_reason = result.stop_reason
    if result.finish is None and not result.error:
        why = {"max_turns": "it reached --max-turns", "end_turn": "the model ended its turn",
               "budget": "its budget ran out"}.get(result.stop_reason, f"stop_reason {result.stop_reason!r}")
        outcome.error = f"the planner stopped without calling finish: {why} (stop_reason {result.stop_reason})"


def _is_cancellation(exc: BaseException) -> bool:
    """trio cancellation or Ctrl-C, also when wrapped in (nested) exception groups by nurseries."""
    if isinstance(exc, (trio.Cancelled, KeyboardInterrupt)):
        return True
    if isinstance(exc, BaseExceptionGroup):
        return all(_is_cancellation(e) for e in exc.exceptions)
    return False


def _dead_services(supervisor, exclude: str | None = None) -> str:
    """'env_server exited with code N during the run; see env_server.log' for services that died
    (``exclude``: a service whose failed start the error already names)."""
    parts = []
    for svc in getattr(supervisor, "services", []):
        code = None if svc.external else svc.exit_code()
        if code is not None and svc.name != exclude:
            parts.append(f"{svc.name} exited with code {code} during the run; see {svc.name}.log")
    return "; ".join(parts)


async def _run_policy(cfg, toolkit, info, record, steering, emit, recorder, holder: dict,
                      system_prompt: str | None = None) -> None:
    """Run the planner (or code policy) on a worker thread, interruptible by trio cancellation.
    The result lands in ``holder["result"]`` as soon as the planner returns, so a cancellation that
    arrives while the thread finishes still keeps the transcript."""
    from rpent.planners.base import PlannerResult
    from rpent.robots.registry import get_robot

    prompts = get_robot(cfg.robot)

    def planner_event(kind: str, payload: dict) -> None:
        if recorder is not None and kind not in ("tool_call", "tool_result"):
            try:
                recorder.record_planner_event(kind, {k: v for k, v in payload.items() if k != "images"})
            except Exception:  # noqa: BLE001
                log.debug("recorder rejected a planner event", exc_info=True)
        emit({"kind": "planner", "event": kind, **{k: v for k, v in payload.items() if k not in ("images", "raw")}})

    if cfg.policy_mode == "code" or cfg.code_file:
        from rpent.run.code_mode import solve_code_mode

        if cfg.memory_dir is not None:
            holder["memory"] = {"ignored": "code mode reads no task memory"}
            log.info("--memory-dir ignored: code mode reads no task memory")

        solve = lambda: solve_code_mode(cfg, toolkit, info, record, steering, planner_event)  # noqa: E731
    else:
        from rpent.planners.base import create_planner

        cfg.planner_config.output_dir = cfg.planner_config.output_dir or record.dir
        planner = create_planner(cfg.planner, cfg.planner_config)
        system = system_prompt or prompts.system_prompt(require_operator_verdict=cfg.require_operator_verdict,
                                                        vla_available=toolkit.vla is not None)
        if cfg.memory_dir is not None:
            system += _read_memory(cfg, holder)
        user = cfg.user_message or prompts.task_message(cfg.suite, cfg.task, cfg.seed, info.language)
        solve = lambda: planner.solve(system, user, toolkit, steering=steering, on_event=planner_event)  # noqa: E731

    def stop_planner() -> None:
        toolkit.cancel()
        if steering is not None:
            if getattr(steering, "stop_reason", None) is not None:
                return  # already stopping (a signal, a replaced TaskRun): its reason stays the one on record
            try:
                steering.interrupt(stop=True)
            except TypeError:
                steering.interrupt()

    returned: list[bool] = []  # the planner returned by itself: nothing to stop (and nothing to record)

    async with trio.open_nursery() as nursery:
        async def watch() -> None:
            try:
                await trio.sleep_forever()
            finally:
                if not returned:
                    stop_planner()

        def solve_and_keep() -> PlannerResult:
            holder["result"] = solve()
            return holder["result"]

        nursery.start_soon(watch)
        try:
            await trio.to_thread.run_sync(solve_and_keep)
            returned.append(True)
        finally:
            nursery.cancel_scope.cancel()


def _read_memory(cfg, holder: dict) -> str:
    """The memory section of the system prompt; notes what was read in ``holder["memory"]``.

    Raises:
        rpent.memory.corpus.MemoryCorpusError: no corpus, manifest mismatch, invalid leaf.
    """
    from rpent.memory.context import load_context

    ctx = load_context(cfg.memory_dir, cfg.robot, cfg.suite, cfg.task)
    holder["memory"] = ctx.audit()
    log.info("task memory %s: read %s", ctx.corpus, ", ".join(rel for rel, _ in ctx.files))
    return ctx.prompt_section()


def _finalize(cfg, info, record, toolkit, recorder, result, outcome: RunOutcome, t0: float, clients, *,
              steering=None, steering_log: list | None = None,
              memory: dict | None = None, provenance: dict | None = None) -> None:
    """Write everything that must exist after any run (blocking; runs on a worker thread)."""
    success: bool | None = None
    unknown_reason: str | None = None
    verdicts: list = []
    if toolkit is None:
        # no toolkit: the environment was never read (a cancellation or an error while starting)
        why = (outcome.error or "the run stopped").splitlines()[0]
        why = why if len(why) <= 300 else why[:297] + "..."
        unknown_reason = (f"the environment was never read: the run stopped while {outcome.stopped_during or 'starting'}"
                          f" ({why})")
    else:
        try:
            success = toolkit.solved()
        except Exception as exc:  # noqa: BLE001 — the env server may be dead
            # the predicate cannot be read at the end: unknown, never the last value the env reported
            last = toolkit.current_state()
            unknown_reason = (f"could not read the environment's success at the end of the run "
                              f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}); "
                              f"the env last reported success={bool(last.get('success'))} "
                              f"after {int(last.get('steps', 0))} env steps")
            outcome.error = outcome.error or unknown_reason
            success = None
        if success is not None:
            try:
                outcome.environment_unstable = (toolkit.sim_instability()
                                                if hasattr(toolkit, "sim_instability") else None)
            except Exception as exc:  # noqa: BLE001 — an env server without the check
                log.info("could not ask the env server whether the simulation stayed stable: %s", exc)
            if outcome.environment_unstable:
                log.warning("%s", outcome.environment_unstable.get("detail"))
        try:
            toolkit.close()
        except Exception:  # noqa: BLE001
            log.exception("closing the episode video failed")
        outcome.env_steps = int(toolkit.current_state().get("steps", 0))
        # the finish the toolkit accepted (the planner's or the operator's verdict), never a refused one
        accepted = getattr(toolkit, "finish_result", None)
        outcome.finish = dict(accepted) if accepted else None
        outcome.operator_verdict = getattr(toolkit, "operator_verdict_record", None)
        verdicts = list(getattr(toolkit, "operator_verdicts", []) or [])
    outcome.environment_success = success
    outcome.environment_success_unknown = unknown_reason
    outcome.verdict_required = bool(cfg.require_operator_verdict)
    answer = (outcome.operator_verdict or {}).get("answer")
    outcome.label = run_label(environment_success=success, verdict=answer, verdict_required=outcome.verdict_required,
                              stop_reason=outcome.stop_reason, error=outcome.error)
    outcome.disagreement = verdict_disagreement(success, answer)
    if not (outcome.error or outcome.stop_reason == "cancelled"):
        outcome.stopped_during = None
    undelivered = steering.drain() if steering is not None and hasattr(steering, "drain") else []
    elapsed = time.monotonic() - t0
    stats = dict(outcome.stats)
    stats["elapsed_s"] = round(elapsed, 3)
    outcome.stats = stats
    # the recipe (and everything built from it: flash plans, memory task pairs) only for a run labelled
    # succeeded whose predicate held; a run the operator rejected keeps its record but gives no recipe
    recipe_name, withheld = None, None
    if cfg.policy_mode == "tools" and not cfg.code_file:
        excluded = label_exclusion(Outcome(environment_success=success, label=outcome.label,
                                           verdict_required=outcome.verdict_required,
                                           operator_verdict=outcome.operator_verdict, error=outcome.error,
                                           environment_unstable=outcome.environment_unstable))
        if excluded is None and success is True:
            recipe_name = f"{record.tag}_recipe.jsonl"
        elif success is True or (excluded is not None and excluded[0] == "disagreement"):
            withheld = f"{excluded[0]}: {excluded[1]}" if excluded else "environment predicate not satisfied"
    episode = record.episode or {}
    transcript = {
        "suite": cfg.suite, "task": cfg.task, "seed": cfg.seed,
        "init_state_id": episode.get("init_state_id"), "init_state_global_id": episode.get("init_state_global_id"),
        "init_state_sha256": episode.get("init_state_sha256"), "task_language": info.language,
        "planner": cfg.recorded_planner, "model": cfg.planner_config.model, "policy_mode": cfg.policy_mode,
        "elapsed_s": round(elapsed, 3), "finish": outcome.finish, "error": outcome.error,
        "error_kind": outcome.error_kind, "stop_reason": outcome.stop_reason, "stopped_during": outcome.stopped_during, "environment_success": success,
        "environment_success_unknown": unknown_reason, "environment_unstable": outcome.environment_unstable,
        "env_steps": outcome.env_steps, "label": outcome.label, "operator_verdict": outcome.operator_verdict, "verdict_required": outcome.verdict_required,
        "disagreement": outcome.disagreement, "operator_verdicts": verdicts,
        "recipe": recipe_name, "recipe_withheld": withheld, "steering": list(steering_log or []),
        "undelivered_operator_lines": undelivered, "provenance": provenance,
        "stats": stats, "messages": result.messages if result is not None else [],
    }
    if memory is not None:
        transcript["memory"] = memory
    record.write_transcript(transcript)
    if recipe_name:
        record.write_recipe(record.recipe_commands())
    elif withheld:
        log.info("no recipe written: %s", withheld)
    if recorder is not None:
        status = {"cancelled": "interrupted"}.get(outcome.stop_reason, "error" if outcome.error else "finished")
        try:
            rec_error = outcome.error
            if unknown_reason and unknown_reason not in (rec_error or ""):
                rec_error = f"{rec_error}; {unknown_reason}" if rec_error else unknown_reason
            recorder.close(status, success, rec_error, outcome={
                "label": outcome.label, "operator_verdict": outcome.operator_verdict, "operator_verdicts": verdicts,
                "verdict_required": outcome.verdict_required, "disagreement": outcome.disagreement,
                "environment_success_unknown": unknown_reason, "stop_reason": outcome.stop_reason,
                "environment_unstable": outcome.environment_unstable})
        except Exception:  # noqa: BLE001
            log.exception("closing the trajectory record failed")
    for c in clients:
        try:
            c.close()
        except Exception:  # noqa: BLE001
            pass
    log.info("run %s ended: environment_success=%s label=%s operator_verdict=%s finish=%s error=%s env_steps=%d "
             "elapsed=%.1fs", record.tag, success, outcome.label, answer, outcome.finish, outcome.error,
             outcome.env_steps, elapsed)


def _safe(on_event):
    def emit(event: dict) -> None:
        if on_event is None:
            return
        try:
            on_event(event)
        except Exception:  # noqa: BLE001 — a UI callback must never break a run
            log.debug("run event callback failed", exc_info=True)

    return emit
