"""The Session: shared services started once, TaskRuns numbered 0001.. each with a fresh env server.

Model: the upstream Dashboard's Session/TaskRun, in the
terminal. A ``Session`` opens one ``rpent.services.Supervisor``, starts the shared services (VLA,
SAM3; or connects to ``--vla-endpoint``/``--sam3-endpoint``) once, and then runs TaskRuns through
``rpent.run.run_task``: every TaskRun gets a fresh env server, toolkit and planner conversation
(``run_task`` starts them through the same supervisor) and records under
``<output_dir>/tasks/NNNN_<suite>_t<task>_s<seed>/``. Last write wins: a new task while one runs
cancels the old one, which ends as ``cancelled``. ``--env-endpoint`` is refused, with the seed's
reason (the product document's "远程服务与并行运行" section).

Threading: the Session lives in trio (guest mode on the UI loop, or plain ``trio.run`` in tests).
Run events may arrive from any thread (the toolkit's worker); they go through a ``Batcher`` and are
applied to the model (``TaskRunView``) on the trio thread, then handed to ``sink`` as one
``RunEvents`` batch, so the UI repaints at most ~12 times/s however fast events stream. ``sink``
must be thread-safe (the app passes ``post_message``). This module imports no Textual.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import trio

from rpent.session.batching import Batcher
from rpent.session.commands import TaskCommand
from rpent.session.operator import OperatorReply, OperatorReplyError, OperatorRequest, TuiOperator

from .defaults import (RunTaskFn, default_make_run_config, default_make_steering, default_run_task,
                       default_supervisor_factory, default_shared_specs)
from .layout import pid_alive
from .model import (POLL_S, SERVICE_STATES, TERMINAL_TASK_STATES, OperatorPrompt, OperatorResolved,
                    RunEvents, ServiceLog, ServiceView, SessionChanged, SessionConfig, SessionNotReady, TaskRunView,
                    atomic_write_json, one_line_error)

__all__ = ["Session"]


# -- the session -----------------------------------------------------------------------------------------
class Session:
    """A long-lived TUI session (see module docstring).

    Args:
        config: validated ``SessionConfig``.
        sink: thread-safe callable receiving ``SessionChanged``, ``RunEvents``, ``ServiceLog``,
            ``OperatorPrompt`` and ``OperatorResolved``.
        run_task: the run layer entry point (default ``rpent.run.run_task``).
        supervisor_factory: ``log_dir -> async context manager`` yielding a supervisor with
            ``await start(spec)`` (default ``rpent.services.Supervisor``).
        shared_specs: ``ServiceSpec``s of the shared services (default from ``config``).
        make_run_config / make_steering: builders of the run layer's ``RunConfig`` and ``Steering``.
        batch_interval_s: flush period of the run-event batcher (s).

    Raises:
        SessionConfigError: from ``config.validate()``.
    """

    def __init__(self, config: SessionConfig, sink: Callable[[Any], None], *,
                 run_task: RunTaskFn | None = None,
                 supervisor_factory: Callable[[Path], Any] | None = None,
                 shared_specs: list[Any] | None = None,
                 make_run_config: Callable[[SessionConfig, TaskCommand, Path, dict[str, str]], Any] | None = None,
                 make_steering: Callable[[], Any] | None = None,
                 batch_interval_s: float = 0.08) -> None:
        config.validate()
        self.config = config
        self.output_dir = Path(config.output_dir)
        self._sink = sink
        self._run_task = run_task
        self._supervisor_factory = supervisor_factory or default_supervisor_factory
        self._shared_specs = shared_specs
        self._make_run_config = make_run_config or default_make_run_config
        self._make_steering = make_steering or default_make_steering
        self.state = "starting_shared_services"
        self.fatal_error: str | None = None
        self.services: dict[str, ServiceView] = {}
        self.runs: list[TaskRunView] = []
        self.endpoints: dict[str, str] = {}
        self.feedback: str = ""
        self._events: Batcher[tuple[str, dict[str, Any]]] = Batcher(self._apply_events, interval_s=batch_interval_s)
        self._nursery: trio.Nursery | None = None
        self._supervisor: Any = None
        self._scopes: dict[str, trio.CancelScope] = {}
        self._cancel_reasons: dict[str, str] = {}  # TaskRun id -> why a cancel was requested
        self._done: dict[str, trio.Event] = {}
        self._operators: dict[str, TuiOperator] = {}
        self._steering: dict[str, Any] = {}
        self._toolkits: dict[str, Any] = {}
        self._run_sups: dict[str, Any] = {}
        self._running_services: dict[str, Any] = {}
        self._logs: Batcher[tuple[str, str]] = Batcher(self._flush_logs, interval_s=POLL_S)

    # -- queries ---------------------------------------------------------------------------
    @property
    def current(self) -> TaskRunView | None:
        """The newest TaskRun (running or finished), or None."""
        return self.runs[-1] if self.runs else None

    @property
    def active(self) -> TaskRunView | None:
        """The TaskRun that is still starting or running, or None."""
        run = self.current
        return run if run is not None and not run.finished else None

    @property
    def input_mode(self) -> str:
        """``command_only`` (no active run), ``conversation`` or ``disabled`` (rpent_reference.md §7)."""
        if self.state == "fatal":
            return "disabled"
        return "conversation" if self.active is not None else "command_only"

    def run_by_id(self, run_id: str) -> TaskRunView | None:
        """The TaskRun with id ``run_id`` or None."""
        return next((r for r in self.runs if r.id == run_id), None)

    def toolkit_for(self, run_id: str) -> Any:
        """The toolkit of TaskRun ``run_id`` while it runs, for editor cells (None when the run layer
        has not published one with a ``{"kind": "toolkit", "toolkit": tk}`` event)."""
        return self._toolkits.get(run_id)

    def operator_for(self, run_id: str) -> TuiOperator | None:
        """The ``TuiOperator`` of TaskRun ``run_id`` (while it exists)."""
        return self._operators.get(run_id)

    # -- lifecycle -------------------------------------------------------------------------
    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Run the session until cancelled: open the supervisor, start shared services, serve TaskRuns.

        ``task_status.started()`` is called once the shared services are ready (or failed: the
        session is then ``fatal`` and keeps serving its state until cancelled, as upstream).
        On cancellation every TaskRun is cancelled first, then the supervisor stops the services
        in reverse start order.
        """
        self.output_dir.mkdir(parents=True, exist_ok=True)
        self.close_orphaned_records()
        started = False
        try:
            async with self._supervisor_factory(self.output_dir / "services") as sup:
                self._supervisor = sup
                async with trio.open_nursery() as nursery:
                    self._nursery = nursery
                    nursery.start_soon(self._events.run, name="run-event-batcher")
                    nursery.start_soon(self._logs.run, name="service-log-batcher")
                    subscribe = getattr(sup, "subscribe", None)
                    if callable(subscribe):
                        nursery.start_soon(self._watch_supervisor, sup, subscribe(), "shared", name="supervisor-events")
                    await self._start_shared()
                    task_status.started()
                    started = True
                    self._changed()
                    await trio.sleep_forever()
        finally:
            self._nursery = None
            for svc in self.services.values():
                if svc.state in ("ready", "starting", "pending"):
                    svc.state = "stopped"
            self._changed()
            if not started:
                # Supervisor failed to open: still let the caller's nursery.start() return.
                pass

    def _write_record(self, run: TaskRunView) -> None:
        """``taskrun.json`` of ``run``, naming this session process (``session_pid``), so a later
        session can tell a TaskRun whose session died (SIGKILL, crash) from one still running."""
        atomic_write_json(run.output_dir / "taskrun.json", {**run.record(), "session_pid": os.getpid()})

    def close_orphaned_records(self) -> list[str]:
        """Mark the ``taskrun.json`` of TaskRuns under ``<output_dir>/tasks/`` that never ended because
        their session process died (SIGKILL, crash: nothing could write their end) as ``error``, with
        a one-line reason, so no record says ``running`` for a run that is over. A TaskRun whose
        session process is still alive is left alone. Returns the directories marked.
        """
        marked = []
        for path in sorted((self.output_dir / "tasks").glob("*/taskrun.json")):
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            if not isinstance(data, dict) or data.get("state") in TERMINAL_TASK_STATES:
                continue
            pid = data.get("session_pid")
            if isinstance(pid, int) and pid != os.getpid() and pid_alive(pid):
                continue
            transcripts = sorted(path.parent.glob("transcript_*.json"))
            data.update(state="error", ended_at=data.get("ended_at") or path.stat().st_mtime,
                        error=(f"the session process (pid {pid}) ended while this TaskRun was {data.get('state')!r} "
                               "(killed or crashed), so the run never finished"
                               + ("" if transcripts else " and wrote no transcript")
                               + f"; marked by the session started at {time.strftime('%Y-%m-%dT%H:%M:%S')}"))
            data["detail"] = data["error"]
            atomic_write_json(path, data)
            marked.append(str(path.parent))
        return marked

    async def _start_shared(self) -> None:
        specs = self._shared_specs if self._shared_specs is not None else default_shared_specs(self.config)
        for spec in specs:
            view = ServiceView(name=spec.name, state="starting")
            self.services[spec.name] = view
        self._changed()
        for spec in specs:
            view = self.services[spec.name]
            try:
                svc = await self._supervisor.start(spec)
            except Exception as exc:  # noqa: BLE001 - reported in the UI; the session becomes fatal
                view.state = "failed"
                view.last_error = f"{type(exc).__name__}: {exc}"
                view.log_path = self._guess_log_path(spec.name)
                self.state = "fatal"
                self.fatal_error = f"shared service {spec.name!r} failed to start: {view.last_error}"
                self.feedback = self.fatal_error
                self._changed()
                return
            self._adopt(view, svc)
            self._running_services[spec.name] = svc
            self.endpoints[spec.name] = view.endpoint or ""
            self._changed()
        self.state = "ready"

    def _guess_log_path(self, name: str) -> Path | None:
        path = self.output_dir / "services" / f"{name}.log"
        return path if path.exists() else None

    @staticmethod
    def _adopt(view: ServiceView, svc: Any) -> None:
        view.endpoint = str(svc.endpoint) if getattr(svc, "endpoint", None) is not None else view.endpoint
        view.pid = getattr(svc, "pid", None)
        state = getattr(svc, "state", None)
        state = getattr(state, "value", state)
        view.state = state if state in SERVICE_STATES else ("ready" if state is None else str(state))
        if view.state == "ready" and view.started_at is None:
            view.started_at = time.time()
        log_path = getattr(svc, "log_path", None)
        view.log_path = Path(log_path) if log_path else view.log_path
        err = getattr(svc, "last_error", None) or getattr(svc, "error", None)
        if err:
            view.last_error = str(err)

    async def _watch_supervisor(self, sup: Any, events: Any, scope: str) -> None:
        """Apply a supervisor's ``service_state``/``service_log`` events (``Supervisor.subscribe()``)
        to the service views (key ``name`` for shared services, ``name@NNNN`` for a TaskRun's);
        log lines reach the UI in batches (``ServiceLog``, <= ~4/s)."""
        async for event in events:
            bare = event.get("service")
            if not bare:
                continue
            name = bare if scope == "shared" else f"{bare}@{scope}"
            view = self.services.get(name)
            if view is None:
                view = self.services[name] = ServiceView(name=name, scope=scope)
                self._changed()
            if event.get("kind") == "service_log":
                line = str(event.get("line", ""))
                view.lines.append(line)
                view.total_lines += 1
                self._logs.put((name, line))
            elif event.get("kind") == "service_state":
                state = event.get("state")
                view.state = state if state in SERVICE_STATES else view.state
                view.endpoint = event.get("endpoint") or view.endpoint
                view.pid = event.get("pid") if event.get("pid") is not None else view.pid
                if view.state == "ready":
                    view.started_at = view.started_at or time.time()
                elif view.state in ("stopped", "failed", "starting"):
                    view.started_at = None
                detail = str(event.get("detail") or "")
                if view.state == "failed" and detail:
                    view.last_error = detail
                if view.log_path is None:
                    svc = self._lookup(sup, bare)
                    if svc is not None and getattr(svc, "log_path", None):
                        view.log_path = Path(svc.log_path)
                self._changed()

    @staticmethod
    def _lookup(sup: Any, name: str) -> Any:
        try:
            return sup.get(name)
        except Exception:  # noqa: BLE001 - unknown name or no get(): nothing to add
            return None

    def _flush_logs(self, items: list[tuple[str, str]]) -> None:
        by_name: dict[str, list[str]] = {}
        for name, line in items:
            by_name.setdefault(name, []).append(line)
        for name, lines in by_name.items():
            self._sink(ServiceLog(name, lines))

    # -- service control (Services screen) --------------------------------------------------------------
    async def stop_service(self, name: str) -> None:
        """Stop service ``name`` through the supervisor.

        Raises:
            KeyError: unknown service.
            NotImplementedError: the supervisor has no ``stop`` (the message names the missing API).
        """
        await self._control(name, "stop")

    async def restart_service(self, name: str) -> None:
        """Restart service ``name`` through the supervisor (same spec, new process and endpoint).

        Raises:
            KeyError: unknown service.
            NotImplementedError: the supervisor has no ``restart`` (the message names the missing API).
        """
        await self._control(name, "restart")

    async def _control(self, name: str, verb: str) -> None:
        if name not in self.services:
            raise KeyError(f"unknown service {name!r}; known: {', '.join(self.services) or 'none'}")
        view = self.services[name]
        bare, _, scope = name.partition("@")
        sup = self._run_sups.get(scope) if scope else self._supervisor
        if sup is None:
            raise KeyError(f"service {name!r} belongs to TaskRun {scope}, which has ended")
        fn = getattr(sup, verb, None)
        if fn is None:
            raise NotImplementedError(f"the supervisor has no {verb}(name); needs rpent.services.Supervisor.{verb}")
        view.state = "stopped" if verb == "stop" else "starting"
        self._changed()
        try:
            svc = await fn(bare)
        except Exception as exc:  # noqa: BLE001 - shown in the UI
            view.state = "failed"
            view.last_error = f"{verb} failed: {type(exc).__name__}: {exc}"
            self._changed()
            raise
        if svc is not None and verb == "restart":
            view.started_at = None
            self._adopt(view, svc)
            if view.scope == "shared" and view.endpoint:
                self.endpoints[name] = view.endpoint
        elif verb == "stop":
            view.state = "stopped"
            view.started_at = None
        self._changed()

    # -- TaskRuns --------------------------------------------------------------------------------------
    def start_task(self, command: TaskCommand) -> TaskRunView:
        """Start a TaskRun for ``command`` (call on the trio/UI thread). A running TaskRun is cancelled
        first and marked ``cancelled`` (last write wins).

        Returns the new ``TaskRunView`` (state ``starting``).

        Raises:
            SessionNotReady: the session is not running, or is ``fatal`` (shared services failed).
        """
        self._check_startable()
        return self._launch(command, *self._claim_run_dir(command))

    async def start_task_async(self, command: TaskCommand) -> TaskRunView:
        """``start_task`` for the UI: the record directory is claimed in a worker thread (a scan of
        ``<output_dir>/tasks/`` and a ``mkdir``: slow on a busy disk or a long-lived output dir), the
        TaskRun is then launched on the trio thread exactly as ``start_task`` does (same ids,
        directories and records). Call from the session's trio run.

        Raises:
            SessionNotReady: as ``start_task`` (checked before and again after the claim; a directory
                claimed for a start that became impossible meanwhile is removed again, it is empty).
        """
        self._check_startable()
        run_id, output_dir = await trio.to_thread.run_sync(self._claim_run_dir, command)
        try:
            self._check_startable()
        except SessionNotReady:
            try:
                output_dir.rmdir()
            except OSError:
                pass
            raise
        return self._launch(command, run_id, output_dir)

    def _check_startable(self) -> None:
        if self._nursery is None:
            raise SessionNotReady("the session is not running yet; wait for the shared services to start")
        if self.state == "fatal":
            raise SessionNotReady(f"session is fatal: {self.fatal_error}; fix the shared services and restart rpent-tui")
        if self.state != "ready":
            raise SessionNotReady("shared services are still starting; try again when they are ready")

    def _launch(self, command: TaskCommand, run_id: str, output_dir: Path) -> TaskRunView:
        previous = self.active
        if previous is not None:
            previous.replaced_by = run_id
            self.cancel_task(previous.id, reason=f"replaced by TaskRun {run_id} ({command.display()})")
        run = TaskRunView(id=run_id, command=command, output_dir=output_dir,
                          planner=self.config.planner, model=self.config.model, robot=self.config.robot)
        self.runs.append(run)
        self._done[run_id] = trio.Event()
        self.feedback = f"Task selected: {command.display()} (TaskRun {run_id})"
        self._nursery.start_soon(self._run_one, run, previous, name=f"taskrun-{run_id}")
        self._changed()
        return run

    def _claim_run_dir(self, command: TaskCommand) -> tuple[str, Path]:
        """The next TaskRun id and its new, empty record directory (created here, so no TaskRun ever
        writes into another's directory): ids continue after the highest ``NNNN_*`` already under
        ``<output_dir>/tasks/`` (a reused ``--output-dir``) and this session's own runs."""
        tasks = self.output_dir / "tasks"
        tasks.mkdir(parents=True, exist_ok=True)
        taken = [int(p.name[:4]) for p in tasks.iterdir() if p.name[:4].isdigit()]
        taken += [int(r.id) for r in self.runs if r.id.isdigit()]
        n = max(taken, default=0) + 1
        while True:
            run_id = f"{n:04d}"
            path = tasks / f"{run_id}_{command.slug}"
            try:
                path.mkdir()
            except FileExistsError:  # another session claimed it a moment ago
                n += 1
                continue
            return run_id, path

    def cancel_task(self, run_id: str, reason: str = "cancelled by the operator") -> bool:
        """Cancel TaskRun ``run_id`` (no-op if finished). Returns True if a cancel was requested."""
        run = self.run_by_id(run_id)
        if run is None or run.finished:
            return False
        run.cancel_requested = True
        run.detail = reason
        self._cancel_reasons[run_id] = reason
        steering = self._steering.get(run_id)
        if steering is not None:  # the reason reaches the run record (steering.jsonl, transcript error)
            try:
                steering.interrupt(stop=True, reason=reason)
            except TypeError:
                steering.interrupt()
        operator = self._operators.get(run_id)
        if operator is not None:
            operator.cancel()
        scope = self._scopes.get(run_id)
        if scope is not None:
            scope.cancel()
        self._changed()
        return True

    def stop_runs(self, reason: str) -> list[str]:
        """Cancel every TaskRun that has not ended, with ``reason`` on record (the host is stopping,
        e.g. :func:`rpent.planners.steering.signal_stop_reason` of the signal that stops it).
        Returns the ids of the TaskRuns cancelled."""
        return [run.id for run in list(self.runs) if not run.finished and self.cancel_task(run.id, reason)]

    def steer(self, text: str) -> str:
        """Queue ``text`` for the active planner at its next turn boundary; returns feedback text.

        Raises:
            SessionNotReady: no active TaskRun (type ``/rpent-task`` first) or its planner takes no messages.
        """
        run = self.active
        if run is None:
            raise SessionNotReady("no task is running; start one with /rpent-task <suite> <task> <seed>")
        steering = self._steering.get(run.id)
        if steering is None:
            raise SessionNotReady(f"TaskRun {run.id} takes no messages (its planner has no steering)")
        reply = steering.submit(text)  # rpent.planners.steering: /help, /interrupt, /quit or a queued line
        run.transcript.append({"kind": "planner", "event": "operator_message", "text": text})
        self._changed()
        return reply or f"queued for the next turn: {text}"

    def interrupt(self) -> str:
        """Interrupt the active planner's current turn (Esc). Returns ``accepted`` or ``noop``."""
        run = self.active
        steering = self._steering.get(run.id) if run is not None else None
        if steering is None or not callable(getattr(steering, "interrupt", None)):
            return "noop"
        steering.interrupt()
        run.transcript.append({"kind": "planner", "event": "interrupt"})
        self._changed()
        return "accepted"

    def reply_operator(self, run_id: str, request_id: str, answer: str, notes: str = "") -> OperatorReply:
        """Answer TaskRun ``run_id``'s pending operator request.

        Raises:
            OperatorReplyError: expired request or invalid answer (see ``TuiOperator.reply``).
        """
        operator = self._operators.get(run_id)
        if operator is None:
            raise OperatorReplyError(f"expired or already answered operator request: {request_id!r}")
        return operator.reply(request_id, answer, notes)

    async def wait_run(self, run_id: str) -> TaskRunView:
        """Wait until TaskRun ``run_id`` has finished; return its view."""
        await self._done[run_id].wait()
        run = self.run_by_id(run_id)
        assert run is not None
        return run

    async def _run_one(self, run: TaskRunView, previous: TaskRunView | None) -> None:
        if previous is not None:  # the old env server must be gone before the new one starts
            await self._done[previous.id].wait()
        scope = trio.CancelScope()
        self._scopes[run.id] = scope
        if run.cancel_requested:
            scope.cancel()
        # The toolkit logs requests and answers to the record's operator_events.jsonl itself.
        operator = TuiOperator(on_request=lambda req: self._operator_event(run.id, req, None),
                               on_resolved=lambda req, rep: self._operator_event(run.id, req, rep))
        self._operators[run.id] = operator
        ended: list = []  # the run layer's outcome, once run_task returned (its record is then written)
        try:
            self._write_record(run)
            with scope:
                steering = self._make_steering()
                self._steering[run.id] = steering
                run_task = self._run_task or default_run_task()
                config = self._make_run_config(self.config, run.command, run.output_dir, dict(self.endpoints))
                run.state = "running" if run.state == "starting" else run.state
                self._changed()
                # A TaskRun's own supervisor (log_dir = its record dir): its env server is fresh and
                # owned, its logs land next to the record, and it is stopped when the TaskRun ends.
                async with trio.open_nursery() as watchers:
                    async with self._supervisor_factory(run.output_dir) as run_sup:
                        self._run_sups[run.id] = run_sup
                        subscribe = getattr(run_sup, "subscribe", None)
                        if callable(subscribe):  # ends when the supervisor closes its channel (after stopping)
                            watchers.start_soon(self._watch_supervisor, run_sup, subscribe(), run.id)
                        async with trio.open_nursery() as inner:
                            inner.start_soon(self._release_on_cancel, operator)
                            outcome = await run_task(config, run_sup, operator=operator, steering=steering,
                                                     on_event=lambda ev: self._events.put((run.id, ev)))
                            ended.append(outcome)
                            inner.cancel_scope.cancel()
                self._finish(run, outcome)
        except Exception as exc:  # noqa: BLE001 - a failed TaskRun must not end the session
            run.state = "error"
            run.error = one_line_error(exc)
            run.detail = run.error
        finally:
            operator.cancel()
            for item in self._events.drain():
                self._apply_events([item])
            if ended and not run.finished:
                # The run layer had ended (its record says how) when a cancel or replace landed on the
                # way out of the supervisor: the TaskRun's state is that outcome, not "cancelled".
                self._finish(run, ended[0])
            if not run.finished:
                run.state = "cancelled"
            run.operator = None
            run.ended_at = time.time()
            self._scopes.pop(run.id, None)
            self._cancel_reasons.pop(run.id, None)
            self._steering.pop(run.id, None)
            self._toolkits.pop(run.id, None)
            self._run_sups.pop(run.id, None)
            for view in self.services.values():  # the TaskRun's supervisor has stopped all of them
                if view.scope == run.id and view.state in ("pending", "starting", "ready"):
                    view.state, view.started_at = "stopped", None
            try:
                self._write_record(run)
            finally:
                self._done[run.id].set()
                self._changed()

    @staticmethod
    async def _release_on_cancel(operator: TuiOperator) -> None:
        try:
            await trio.sleep_forever()
        finally:
            operator.cancel()  # a toolkit thread blocked in ask() must not outlive the TaskRun

    def _finish(self, run: TaskRunView, outcome: Any) -> None:
        if isinstance(outcome, Mapping):
            data = dict(outcome)
        else:
            to_dict = getattr(outcome, "to_dict", None)
            data = dict(to_dict()) if callable(to_dict) else {
                k: getattr(outcome, k) for k in ("environment_success", "finish", "error", "stop_reason", "output_dir",
                                                 "stats", "env_steps") if hasattr(outcome, k)}
        finish = data.get("finish")
        if finish is not None and not isinstance(finish, (dict, list, str)):
            data["finish"] = {k: getattr(finish, k, None) for k in ("status", "summary")}
        run.outcome = {k: (str(v) if isinstance(v, Path) else v) for k, v in data.items()}
        run.error = data.get("error") or None
        if run.error:
            run.detail = str(run.error)
        # The run layer's label (docs/concepts.md "Run": the env predicate, or the operator's
        # verdict when one is required); never the planner's finish claim.
        label = data.get("label")
        if label in TERMINAL_TASK_STATES:
            # the run layer's label already says "cancelled" when the cancel reached the run in time
            run.state = label
            if run.cancel_requested and label != "cancelled":
                reason = self._cancel_reasons.get(run.id, "cancel requested")
                run.detail = f"{reason}: it came after the run had ended ({label})"
        elif run.cancel_requested:
            run.state = "cancelled"
        elif data.get("environment_success"):
            run.state = "succeeded"
        else:
            run.state = "error" if run.error and data.get("stop_reason") == "error" else "failed"
        if data.get("disagreement") and "disagreement" not in run.detail:
            run.detail = f"{run.detail + '; ' if run.detail else ''}disagreement: {data['disagreement']}"

    def _operator_event(self, run_id: str, request: OperatorRequest, reply: OperatorReply | None) -> None:
        run = self.run_by_id(run_id)
        if run is not None:
            run.operator = None if reply is not None else request
        self._sink(OperatorPrompt(run_id, request) if reply is None else OperatorResolved(run_id, request, reply))

    def _apply_events(self, items: list[tuple[str, dict[str, Any]]]) -> None:
        by_run: dict[str, list[dict[str, Any]]] = {}
        for run_id, event in items:
            run = self.run_by_id(run_id)
            if run is None:
                continue
            if event.get("kind") == "toolkit":  # in-process handle for editor cells; not shown
                if not run.finished:
                    self._toolkits[run_id] = event.get("toolkit")
                continue
            run.apply(event)
            by_run.setdefault(run_id, []).append(event)
        for run_id, events in by_run.items():
            self._sink(RunEvents(run_id, events))
        if any(e.get("kind") in ("status", "finished") for evs in by_run.values() for e in evs):
            self._changed()

    def _changed(self) -> None:
        self._sink(SessionChanged())
