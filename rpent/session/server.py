"""``SessionServer``: one ``Session`` (shared services, TaskRuns, operator requests, code cells) served
to any number of attached clients over the session's Unix socket.

The server owns the session model (``rpent.session.core.Session``, Textual-free) in its trio
nursery. Clients (``rpent.session.client.RemoteSession``) attach with the session token:

* an *events* connection gets a ``snapshot`` (session state, every service with the newest
  ``LOG_BACKLOG`` log lines, every TaskRun with its whole transcript, step timeline, latest frames and
  pending operator request: the backlog), then ``delta`` messages at most every ``SYNC_S`` seconds:
  what changed in the model since the last delta (new transcript and timeline items by index, new log
  lines, changed meta fields, new frames), the raw run events for live display, and notices (operator
  request opened / resolved, code-cell progress). Every client gets the same deltas in the same
  order, so two terminals and a browser tab show the same state; an operator verdict answered in
  one closes the request in all (the ``operator_resolved`` notice).
* a *commands* connection sends calls (``COMMANDS``) and gets one reply per call.

A client that sends garbage, an oversized frame or a wrong token is refused (logged) and the server
keeps serving; a client too slow to drain its deltas (``CLIENT_QUEUE`` messages behind) is
disconnected rather than slowing the session. Nothing a client sends is unpickled or evaluated.
"""

from __future__ import annotations

import hmac
import logging
import os
import stat
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import trio

from . import wire
from .layout import SessionPaths, write_json_atomic

__all__ = ["SessionServer", "COMMANDS", "LOG_BACKLOG", "SYNC_S"]

log = logging.getLogger("rpent.session")

#: Newest log lines of each service sent in a snapshot (the full logs stay on disk).
LOG_BACKLOG = 500
#: Minimum seconds between two deltas (20 Hz; the TUI repaints at most ~12 times/s anyway).
SYNC_S = 0.05
#: Deltas queued for one client before it counts as stuck and is disconnected.
CLIENT_QUEUE = 512
#: Seconds a new connection has to send its hello.
HELLO_TIMEOUT_S = 5.0
#: Calls a commands connection may make (method -> argument names).
COMMANDS = {
    "status": (), "start_task": ("suite", "task", "seed"), "cancel_task": ("run_id", "reason"), "steer": ("text",),
    "interrupt": (), "reply_operator": ("run_id", "request_id", "answer", "notes"), "stop_service": ("name",),
    "restart_service": ("name",), "run_cell": ("source", "timeout_s", "max_calls"), "stop_session": (),
    "flywheel_export": ("input_roots", "output_dir", "threads", "runs", "rules"), "flywheel_cancel": (),
}
#: Output lines of the flywheel export kept for a client that attaches later (the full log stays on disk).
FLYWHEEL_BACKLOG = 500
#: Exceptions whose type name and message travel back to the caller (anything else is reported as
#: ``SessionError`` with its message; tracebacks stay in the session log).
PASS_THROUGH = ("SessionNotReady", "OperatorReplyError", "CommandError", "KeyError", "NotImplementedError",
                "ValueError", "NoToolkitError", "RuntimeError", "FlywheelJobError")


def _warm_commands(robot: str = "libero") -> None:
    """Load the ``/rpent-task`` suite tables of ``robot`` once the session serves (LIBERO's benchmark
    import takes seconds), so the first ``start_task`` replies at once."""
    from rpent.session.commands import known_suites

    known_suites(robot)


class _Client:
    def __init__(self, n: int, role: str) -> None:
        self.n = n
        self.role = role
        self.send, self.receive = trio.open_memory_channel[bytes](CLIENT_QUEUE)
        self.dropped = False
        self.ready = False  # an events client gets deltas only after its snapshot


class SessionServer:
    """Serve one session (see module docstring).

    Args:
        paths: the session directory's ``SessionPaths`` (socket, token, state file).
        make_session: ``sink -> Session``; called once inside ``serve`` with the thread-safe sink.
        token: the secret clients must send (the content of ``paths.token``).
        make_cells: ``sink -> CodeCellService`` for code cells run against the active TaskRun's toolkit.
        flywheel_program: command prefix of the LeRobot exporter the session runs for ``flywheel_export``
            (default ``python -m rpent.cli.flywheel``, see ``rpent.session.flywheel_jobs.flywheel_argv``).
    """

    def __init__(self, paths: SessionPaths, make_session: Callable[[Callable[[Any], None]], Any], token: str, *,
                 make_cells: Callable[[Callable[[Any], None]], Any] | None = None,
                 flywheel_program: list[str] | None = None) -> None:
        self.paths = paths
        self._make_session = make_session
        self._make_cells = make_cells
        self._flywheel_program = flywheel_program
        self.flywheel: Any = None
        self._token = token.encode()
        self.session: Any = None
        self.cells: Any = None
        self._clients: dict[int, _Client] = {}
        self._next_client = 0
        self._trio_token: trio.lowlevel.TrioToken | None = None
        self._kick = trio.Event()
        self._notices: list[dict[str, Any]] = []
        self._live: dict[str, list[dict[str, Any]]] = {}
        self._sent_meta: dict[str, dict[str, Any]] = {}
        self._sent_len: dict[str, tuple[int, int]] = {}
        self._sent_frames: dict[str, dict[str, bytes]] = {}
        self._sent_services: dict[str, dict[str, Any]] = {}
        self._sent_session: dict[str, Any] = {}
        self._seq = 0
        self._nursery: trio.Nursery | None = None
        self.status = "starting"
        self.started_at = wire.now()
        self.refused = 0
        self._state_written: dict[str, Any] = {}

    # -- the sink (any thread) -----------------------------------------------------------------------
    def _sink(self, event: Any) -> None:
        token = self._trio_token
        if token is None:
            return
        try:
            token.run_sync_soon(self._on_event, event)
        except trio.RunFinishedError:
            pass

    def _on_event(self, event: Any) -> None:
        name = type(event).__name__
        if name == "SessionChanged" and self.cells is not None and self.session is not None:
            # a TaskRun that ended takes its code-cell worker with it (as in the in-process app)
            active = self.session.active
            self.cells.release(self.session.toolkit_for(active.id) if active is not None else None)
        if name == "RunEvents":
            live = self._live.setdefault(event.run_id, [])
            for ev in event.events:
                kind = ev.get("kind")
                if kind == "frames":
                    live.append({"kind": "frames", "step": ev.get("step")})
                elif kind not in ("toolkit",) and not (kind == "planner" and ev.get("event") == "usage"):
                    live.append(wire.plain(ev))
        elif name == "OperatorPrompt":
            self._notices.append({"t": "operator_prompt", "run_id": event.run_id,
                                  "request": wire.request_to_wire(event.request)})
        elif name == "OperatorResolved":
            self._notices.append({"t": "operator_resolved", "run_id": event.run_id,
                                  "request": wire.request_to_wire(event.request),
                                  "reply": wire.reply_to_wire(event.reply)})
        elif name == "CellProgress":
            self._notices = [n for n in self._notices if n.get("t") != "cell_progress"]
            self._notices.append({"t": "cell_progress", "elapsed_s": event.elapsed_s, "timeout_s": event.timeout_s,
                                  "calls": event.calls, "max_calls": event.max_calls})
        elif name == "FlywheelOutput":
            self._notices.append({"t": "flywheel", "lines": list(event.lines),
                                  "progress": list(event.progress) if event.progress else None, "state": event.state})
        elif name == "CellFinished":
            self._notices.append({"t": "cell_finished", "result": wire.plain(event.result),
                                  "elapsed_s": event.elapsed_s, "calls": event.calls})
        self._kick.set()

    # -- the model as messages -----------------------------------------------------------------------
    def _session_meta(self) -> dict[str, Any]:
        s = self.session
        return {"state": s.state, "fatal_error": s.fatal_error, "feedback": s.feedback,
                "endpoints": dict(s.endpoints), "cell_busy": bool(getattr(self.cells, "busy", False)),
                "flywheel": self._flywheel_meta()}

    def _flywheel_meta(self) -> dict[str, Any] | None:
        """The export's status without its output lines (those travel as ``flywheel`` notices)."""
        status = getattr(self.flywheel, "status", None)
        if status is None:
            return None
        job = status.job
        return {"state": status.state, "pid": status.pid, "progress": list(status.progress) if status.progress else None,
                "returncode": status.returncode, "report": wire.plain(status.report), "error": status.error,
                "log_path": str(status.log_path) if status.log_path else None,
                "job": None if job is None else {"input_roots": [str(p) for p in job.input_roots],
                                                 "output_dir": str(job.output_dir), "threads": job.threads,
                                                 "runs": [str(p) for p in job.runs], "rules": job.rules}}

    def snapshot(self) -> dict[str, Any]:
        """The whole model (the backlog a client gets on attach)."""
        s = self.session
        config = s.config
        services = {}
        for name, view in s.services.items():
            lines = list(view.lines)[-LOG_BACKLOG:]
            services[name] = {**wire.service_to_wire(view), "lines_from": view.total_lines - len(lines), "lines": lines}
        runs = []
        for run in s.runs:
            runs.append({**wire.run_to_wire(run), "transcript_from": 0, "transcript": wire.plain(run.transcript),
                         "timeline_from": 0, "timeline": wire.plain(run.timeline),
                         "frames": {k: bytes(v) for k, v in run.frames.items()}})
        meta = self._session_meta()
        if self.flywheel is not None:
            meta["flywheel_lines"] = list(self.flywheel.status.lines[-FLYWHEEL_BACKLOG:])
        return {"t": "snapshot", "seq": self._seq, "session": meta, "services": services, "runs": runs,
                "config": {"output_dir": str(config.output_dir), "robot": config.robot, "planner": config.planner,
                           "model": config.model, "vla_endpoint": config.vla_endpoint,
                           "sam3_endpoint": config.sam3_endpoint, "shared_services": list(config.shared_services),
                           "run_options": wire.plain(config.run_options)},
                "server": {"pid": os.getpid(), "started_at": self.started_at, "session_dir": str(self.paths.root)}}

    def _delta(self) -> dict[str, Any] | None:
        s = self.session
        msg: dict[str, Any] = {"t": "delta"}
        meta = self._session_meta()
        if meta != self._sent_session:
            msg["session"] = self._sent_session = meta
        services = {}
        for name, view in s.services.items():
            data = wire.service_to_wire(view)
            sent = self._sent_services.get(name, {})
            new = view.total_lines - int(sent.get("total_lines", 0))
            if data != sent:
                lines = list(view.lines)[-min(max(new, 0), len(view.lines)):] if new > 0 else []
                services[name] = {**data, "lines_from": view.total_lines - len(lines), "lines": lines}
                self._sent_services[name] = data
        if services:
            msg["services"] = services
        runs = []
        for run in s.runs:
            data = wire.run_to_wire(run)
            entry: dict[str, Any] = {}
            n_tr, n_tl = self._sent_len.get(run.id, (0, 0))
            if len(run.transcript) > n_tr:
                entry["transcript_from"], entry["transcript"] = n_tr, wire.plain(run.transcript[n_tr:])
            if len(run.timeline) > n_tl:
                entry["timeline_from"], entry["timeline"] = n_tl, wire.plain(run.timeline[n_tl:])
            sent_frames = self._sent_frames.get(run.id, {})
            if any(sent_frames.get(k) is not v for k, v in run.frames.items()):
                entry["frames"] = {k: bytes(v) for k, v in run.frames.items()}
                self._sent_frames[run.id] = dict(run.frames)
            live = self._live.pop(run.id, [])
            # operator lines typed in one client reach the others live too (they are not run events)
            live += [e for e in entry.get("transcript", []) if e.get("event") in ("operator_message", "interrupt")]
            if live:
                entry["events"] = live
            if entry or data != self._sent_meta.get(run.id):
                self._sent_meta[run.id] = data
                self._sent_len[run.id] = (len(run.transcript), len(run.timeline))
                runs.append({**data, **entry})
        if runs:
            msg["runs"] = runs
        if self._notices:
            msg["notices"], self._notices = self._notices, []
        if len(msg) == 1:
            return None
        self._seq += 1
        msg["seq"] = self._seq
        return msg

    def _broadcast(self, msg: dict[str, Any]) -> None:
        frame = wire.encode_frame(msg)
        for client in list(self._clients.values()):
            if client.role != "events" or client.dropped or not client.ready:
                continue
            try:
                client.send.send_nowait(frame)
            except trio.WouldBlock:
                client.dropped = True
                log.warning("client %d is %d deltas behind; disconnecting it", client.n, CLIENT_QUEUE)
                client.send.close()
            except trio.ClosedResourceError:
                pass

    async def _syncer(self) -> None:
        while True:
            await self._kick.wait()
            self._kick = trio.Event()
            msg = self._delta()
            if msg is not None:
                self._broadcast(msg)
            self._write_state()
            await trio.sleep(SYNC_S)

    # -- state file ----------------------------------------------------------------------------------
    def _write_state(self, force: bool = False) -> None:
        s = self.session
        data = {"schema_version": 1, "status": self.status, "pid": os.getpid(), "pgid": os.getpgid(0),
                "session_dir": str(self.paths.root), "socket": str(self.paths.socket), "log": str(self.paths.log),
                "started_at": self.started_at, "clients": sum(1 for c in self._clients.values() if c.role == "events"),
                "refused_connections": self.refused,
                "session_state": getattr(s, "state", None), "fatal_error": getattr(s, "fatal_error", None),
                "runs": [{"id": r.id, "suite": r.command.suite, "task": r.command.task, "seed": r.command.seed,
                          "state": r.state, "output_dir": str(r.output_dir)} for r in getattr(s, "runs", [])],
                "services": {n: {"state": v.state, "endpoint": v.endpoint, "pid": v.pid}
                             for n, v in getattr(s, "services", {}).items()},
                "flywheel": self._flywheel_meta() if self.flywheel is not None else None}
        if force or data != self._state_written:
            self._state_written = data
            write_json_atomic(self.paths.state, {**data, "updated_at": wire.now()})

    # -- serving -------------------------------------------------------------------------------------
    async def serve(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Bind the socket (0600), run the session and accept clients until cancelled or
        ``stop_session``; then stop the session (its services stop with it), remove the socket and
        mark the state file ``stopped``.

        Raises:
            ValueError: the socket path is too long. OSError: the socket cannot be bound.
        """
        self.paths.check_socket_path()
        self._trio_token = trio.lowlevel.current_trio_token()
        self.session = self._make_session(self._sink)
        if self._make_cells is not None:
            self.cells = self._make_cells(self._sink)
        from rpent.session.flywheel_jobs import FlywheelRunner

        self.flywheel = FlywheelRunner(self._sink, self.paths.root, program=self._flywheel_program)
        sock_path = self.paths.socket
        sock_path.unlink(missing_ok=True)
        listener = trio.socket.socket(trio.socket.AF_UNIX, trio.socket.SOCK_STREAM)
        old_umask = os.umask(0o177)
        try:
            await listener.bind(str(sock_path))
        finally:
            os.umask(old_umask)
        os.chmod(sock_path, stat.S_IRUSR | stat.S_IWUSR)
        listener.listen(16)
        self.status = "serving"
        self._write_state(force=True)
        log.info("session serving on %s (pid %d)", sock_path, os.getpid())
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                nursery.start_soon(self.session.run, name="session")
                nursery.start_soon(self._syncer, name="session-sync")
                nursery.start_soon(self._accept, listener, name="session-accept")
                nursery.start_soon(partial(trio.to_thread.run_sync, _warm_commands, self.session.config.robot,
                                           abandon_on_cancel=True),
                                   name="warm-task-commands")  # abandoned: never delays a stop
                task_status.started()
        finally:
            self.status = "stopping"
            listener.close()
            sock_path.unlink(missing_ok=True)
            for client in self._clients.values():
                client.send.close()
            self.status = "stopped"
            with trio.CancelScope(shield=True):
                self._write_state(force=True)
            log.info("session stopped")

    def stop(self) -> None:
        """Stop serving (the session and its services stop; clients see the connection close)."""
        if self._nursery is not None:
            self._nursery.cancel_scope.cancel()

    async def _accept(self, listener: Any) -> None:
        async with trio.open_nursery() as nursery:
            while True:
                sock, _ = await listener.accept()
                self._next_client += 1
                nursery.start_soon(self._handle, trio.SocketStream(sock), self._next_client)

    async def _refuse(self, stream: trio.SocketStream, n: int, reason: str) -> None:
        self.refused += 1
        log.warning("refused connection %d: %s", n, reason)
        with trio.move_on_after(1):
            try:
                await stream.send_all(wire.encode_frame({"t": "refused", "error": reason}))
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass
        await stream.aclose()
        self._kick.set()

    async def _handle(self, stream: trio.SocketStream, n: int) -> None:
        buffer = bytearray()
        hello: Any = None
        with trio.move_on_after(HELLO_TIMEOUT_S):
            try:
                hello = await wire.receive_frame(stream, wire.HELLO_MAX_BYTES, buffer)
            except wire.FrameError as exc:
                return await self._refuse(stream, n, f"bad hello: {exc}")
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                return await stream.aclose()
        if not isinstance(hello, dict) or hello.get("t") != "hello":
            return await self._refuse(stream, n, "expected a hello message first (see rpent.session.wire)")
        if hello.get("protocol") != wire.PROTOCOL:
            return await self._refuse(stream, n, f"protocol {hello.get('protocol')!r} not supported; "
                                                 f"this session speaks {wire.PROTOCOL} (same rpent version on both ends)")
        token = hello.get("token")
        if not isinstance(token, str) or not hmac.compare_digest(token.encode(), self._token):
            return await self._refuse(stream, n, f"wrong or missing token (read it from {self.paths.token})")
        role = hello.get("role")
        if role not in ("events", "commands"):
            return await self._refuse(stream, n, f"unknown role {role!r}; use 'events' or 'commands'")
        client = _Client(n, role)
        self._clients[n] = client
        self._kick.set()
        try:
            await stream.send_all(wire.encode_frame({"t": "welcome", "protocol": wire.PROTOCOL, "client": n}))
            if role == "events":
                await self._serve_events(stream, client, buffer)
            else:
                await self._serve_commands(stream, client, buffer)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        except wire.FrameError as exc:
            self.refused += 1
            log.warning("client %d sent a bad frame (%s); disconnected", n, exc)
        finally:
            self._clients.pop(n, None)
            self._kick.set()
            with trio.CancelScope(shield=True):
                await stream.aclose()

    async def _serve_events(self, stream: trio.SocketStream, client: _Client, buffer: bytearray) -> None:
        # On the trio thread, with no checkpoint in between: the attached clients get what is still
        # pending, then the new one gets the snapshot and every later delta. Nothing is missed and
        # nothing is shown twice (and the client merges transcript items by index anyway).
        pending = self._delta()
        if pending is not None:
            self._broadcast(pending)
        client.send.send_nowait(wire.encode_frame(self.snapshot()))
        client.ready = True
        async with trio.open_nursery() as nursery:
            async def watch_close() -> None:  # an events client sends nothing; EOF means it left
                while await stream.receive_some(4096):
                    pass
                nursery.cancel_scope.cancel()

            nursery.start_soon(watch_close)
            async for frame in client.receive:
                await stream.send_all(frame)
            nursery.cancel_scope.cancel()

    async def _serve_commands(self, stream: trio.SocketStream, client: _Client, buffer: bytearray) -> None:
        while True:
            msg = await wire.receive_frame(stream, wire.CLIENT_MAX_BYTES, buffer)
            if msg is None:
                return
            if not isinstance(msg, dict) or msg.get("t") != "call":
                raise wire.FrameError("expected a call message")
            reply = await self._call(msg)
            await stream.send_all(wire.encode_frame(reply))
            if msg.get("method") == "stop_session" and reply.get("ok"):
                self.stop()

    async def _call(self, msg: dict[str, Any]) -> dict[str, Any]:
        call_id, method = msg.get("id"), msg.get("method")
        args = msg.get("args") if isinstance(msg.get("args"), dict) else {}
        if method not in COMMANDS or not set(args) <= set(COMMANDS[method]):
            return {"t": "reply", "id": call_id, "ok": False, "error_type": "ValueError",
                    "error": f"unknown call {method!r} or arguments {sorted(args)}; calls: {', '.join(COMMANDS)}"}
        try:
            result = await getattr(self, f"_cmd_{method}")(**args)
        except Exception as exc:  # noqa: BLE001 - a failed command is the caller's error, never the session's
            name = type(exc).__name__
            if name not in PASS_THROUGH:
                log.exception("command %s failed", method)
            self._kick.set()
            return {"t": "reply", "id": call_id, "ok": False,
                    "error_type": name if name in PASS_THROUGH else "SessionError", "error": str(exc)}
        self._kick.set()
        return {"t": "reply", "id": call_id, "ok": True, "result": wire.plain(result)}

    # -- commands ------------------------------------------------------------------------------------
    async def _cmd_status(self) -> dict[str, Any]:
        return {"status": self.status, "session_state": self.session.state, "pid": os.getpid(),
                "clients": sum(1 for c in self._clients.values() if c.role == "events"), "runs": len(self.session.runs)}

    async def _cmd_start_task(self, suite: str, task: int, seed: int) -> dict[str, Any]:
        from rpent.session.commands import TaskCommand, parse_input

        # on a worker thread: the first parse imports the LIBERO suite tables (seconds; ~20 s on a loaded
        # machine), which must not stall the deltas every attached client is waiting for
        command = await trio.to_thread.run_sync(parse_input, f"/rpent-task {suite} {int(task)} {int(seed)}",
                                                self.session.config.robot)
        if not isinstance(command, TaskCommand):  # pragma: no cover - the line above always is one
            raise ValueError("not a task command")
        run = self.session.start_task(command)
        return {**wire.run_to_wire(run), "transcript": [], "timeline": [], "frames": {}}

    async def _cmd_cancel_task(self, run_id: str, reason: str = "cancelled by the operator") -> bool:
        return self.session.cancel_task(str(run_id), reason=str(reason))

    async def _cmd_steer(self, text: str) -> str:
        return self.session.steer(str(text))

    async def _cmd_interrupt(self) -> str:
        return self.session.interrupt()

    async def _cmd_reply_operator(self, run_id: str, request_id: str, answer: str, notes: str = "") -> dict[str, Any]:
        return wire.reply_to_wire(self.session.reply_operator(str(run_id), str(request_id), str(answer), str(notes)))

    async def _cmd_stop_service(self, name: str) -> None:
        await self.session.stop_service(str(name))

    async def _cmd_restart_service(self, name: str) -> None:
        await self.session.restart_service(str(name))

    async def _cmd_run_cell(self, source: str, timeout_s: float, max_calls: int) -> str:
        from rpent.session.code_cells import NoToolkitError

        run = self.session.active
        toolkit = self.session.toolkit_for(run.id) if run is not None else None
        if self.cells is None or toolkit is None:
            raise NoToolkitError("no TaskRun toolkit: start a task with /rpent-task on the Run screen (F3) first")
        if self.cells.busy:
            raise RuntimeError("a cell is already running")
        assert self._nursery is not None

        async def guarded() -> None:
            try:
                await self.cells.run_cell(toolkit, Path(run.output_dir), str(source), timeout_s=float(timeout_s),
                                          max_calls=int(max_calls))
            except Exception as exc:  # noqa: BLE001 - reported to the clients, never ends the session
                log.exception("code cell failed")
                self._notices.append({"t": "cell_finished", "result": {"error": f"{type(exc).__name__}: {exc}"},
                                      "elapsed_s": 0.0, "calls": 0})
                self._kick.set()

        self._nursery.start_soon(guarded, name="code-cell")
        return run.id

    async def _cmd_flywheel_export(self, input_roots: list[str], output_dir: str, threads: int = 0,
                                   runs: list[str] | None = None, rules: str = "v1") -> dict[str, Any] | None:
        """Start a LeRobot export in the session (it survives every client detaching); progress reaches
        the clients as ``flywheel`` notices, the status in the session meta.

        Raises:
            FlywheelJobError: invalid job (missing input, existing output dir, negative threads) or an
                export already running.
        """
        from rpent.session.flywheel_jobs import FlywheelJob, FlywheelJobError

        if not isinstance(input_roots, list) or not input_roots or not all(isinstance(r, str) for r in input_roots):
            raise FlywheelJobError("input_roots must be a non-empty list of run directories")
        job = FlywheelJob(tuple(Path(r) for r in input_roots), Path(str(output_dir)), int(threads),
                          tuple(Path(str(r)) for r in (runs or ())), str(rules))
        if self.flywheel.running:
            raise FlywheelJobError("an export is already running; stop it with ctrl+x first")
        job.validate()
        assert self._nursery is not None

        before, ended = self.flywheel.status, trio.Event()

        async def guarded() -> None:
            try:
                await self.flywheel.run(job)
            except Exception as exc:  # noqa: BLE001 - reported to the clients, never ends the session
                log.exception("flywheel export failed")
                self.flywheel.status.state, self.flywheel.status.error = "failed", f"{type(exc).__name__}: {exc}"
            finally:
                ended.set()
                self._kick.set()

        self._nursery.start_soon(guarded, name="flywheel-export")
        with trio.move_on_after(10):  # reply with the new export's status (run() replaces it as it starts)
            while self.flywheel.status is before and not ended.is_set():
                await trio.sleep(0.01)
        return self._flywheel_meta()

    async def _cmd_flywheel_cancel(self) -> bool:
        return bool(self.flywheel.cancel())

    async def _cmd_stop_session(self) -> str:
        return "stopping"
