"""``RemoteSession``: a client attached to a session process, with the interface of the in-process
``rpent.session.core.Session`` that the TUI uses (``state``, ``services``, ``runs``,
``current``, ``active``, ``start_task``, ``steer``, ``interrupt``, ``reply_operator`` ...).

Two connections to ``<session dir>/session.sock``, both authenticated with the session token:

* events (trio; ``run()`` is the task, on the UI thread in the TUI): the snapshot on attach, then the
  deltas, applied to a local mirror of the model (``TaskRunView``/``ServiceView`` objects, merged by
  index so nothing is applied twice); each is handed to ``sink`` as the same events the in-process
  session produces (``SessionChanged``, ``RunEvents``, ``ServiceLog``, ``OperatorPrompt``,
  ``OperatorResolved``, ``CellProgress``, ``CellFinished``), plus ``SessionGone`` when the
  session process ends or the connection drops.
* commands (blocking socket, one call at a time, from the caller's thread): a local Unix socket
  round trip (well under a millisecond when the session is idle). Long calls (restart a service)
  use their own connection in a worker thread.
"""

from __future__ import annotations

import itertools
import socket
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import trio

from . import wire
from .layout import SessionPaths

__all__ = ["RemoteSession", "SessionGone", "RemoteCells", "RemoteFlywheel", "RemoteCallError", "attach_error"]

#: Seconds a command waits for its reply before the client reports the session as unresponsive.
CALL_TIMEOUT_S = 30.0
#: ``start_task`` may wait for the session to load the suite tables (LIBERO's benchmark import).
START_TASK_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class SessionGone:
    """The session process ended (``stopped``) or the connection to it dropped; ``detail`` says which."""

    detail: str
    stopped: bool = True


class RemoteCallError(RuntimeError):
    """A command failed in the session with an error type this client has no class for."""


def _error_class(name: str) -> type[Exception]:
    from rpent.session.code_cells import NoToolkitError
    from rpent.session.commands import CommandError
    from rpent.session.flywheel_jobs import FlywheelJobError
    from rpent.session.operator import OperatorReplyError
    from rpent.session.model import SessionNotReady

    known = {"SessionNotReady": SessionNotReady, "OperatorReplyError": OperatorReplyError, "CommandError": CommandError,
             "KeyError": KeyError, "NotImplementedError": NotImplementedError, "ValueError": ValueError,
             "NoToolkitError": NoToolkitError, "RuntimeError": RuntimeError, "FlywheelJobError": FlywheelJobError}
    return known.get(name, RemoteCallError)


def attach_error(exc: BaseException, paths: SessionPaths) -> str:
    """One line for a failed attach (refused, no socket, not our session)."""
    if isinstance(exc, PermissionError):
        return f"cannot read {paths.token}: {exc.strerror}; attach as the user who started the session"
    if isinstance(exc, (FileNotFoundError, ConnectionRefusedError)):
        return f"no session is serving at {paths.socket}; is it running? (rpent-tui --list)"
    return f"cannot attach to {paths.root}: {exc}"


def _connect(paths: SessionPaths, token: str, role: str, timeout: float | None) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout)
        sock.connect(str(paths.socket))
        wire.send_frame_sync(sock, {"t": "hello", "protocol": wire.PROTOCOL, "token": token, "role": role})
        welcome = wire.read_frame_sync(sock, wire.SERVER_MAX_BYTES)
    except BaseException:
        sock.close()
        raise
    if not isinstance(welcome, dict) or welcome.get("t") != "welcome":
        sock.close()
        raise ConnectionRefusedError(f"the session refused the connection: "
                                     f"{welcome.get('error') if isinstance(welcome, dict) else welcome!r}")
    return sock


class _RemoteOperator:
    """What ``Session.operator_for`` returns: the pending request of one TaskRun (read-only here)."""

    def __init__(self, run: Any) -> None:
        self._run = run

    @property
    def pending(self) -> Any:
        return self._run.operator


class RemoteCells:
    """The TUI's code-cell service for an attached client: cells run in the session process against
    the active TaskRun's toolkit; progress and the result come back as ``CellProgress``/``CellFinished``."""

    def __init__(self, session: RemoteSession) -> None:
        self._session = session

    @property
    def busy(self) -> bool:
        """True while the session runs a cell (from the latest delta)."""
        return bool(self._session.cell_busy)

    def release(self, keep_toolkit: Any = None) -> bool:
        """Nothing to release here: the session process ends its own cell worker when a TaskRun ends
        (``SessionServer``). Returns False (no runner was closed by this client)."""
        return False

    async def run_cell(self, toolkit: Any, output_dir: Path, source: str, *, timeout_s: float, max_calls: int) -> None:
        """Start ``source`` as a cell in the session (``toolkit``/``output_dir`` are the session's own).

        Raises:
            NoToolkitError / RuntimeError: no TaskRun toolkit, or a cell is already running.
        """
        await trio.to_thread.run_sync(self._session.call_fresh, "run_cell",
                                      {"source": source, "timeout_s": timeout_s, "max_calls": max_calls})


class RemoteFlywheel:
    """The TUI's ``FlywheelRunner`` for an attached client: the export runs in the session process, so
    detaching (or an SSH drop) does not stop it; ``status`` mirrors the session's, output lines and
    progress arrive as ``FlywheelOutput`` events (the backlog on attach)."""

    def __init__(self, session: RemoteSession) -> None:
        from rpent.session.flywheel_jobs import FlywheelState

        self._session = session
        self.status = FlywheelState()

    @property
    def running(self) -> bool:
        """True while the session runs an export (from the latest delta)."""
        return self.status.state == "running"

    def cancel(self) -> bool:
        """Stop the session's export (SIGTERM to its process group, then SIGKILL). False if none runs."""
        return bool(self._session.call("flywheel_cancel"))

    async def run(self, job: Any) -> Any:
        """Start ``job`` (a ``FlywheelJob``) in the session and return at once (the status follows).

        Raises:
            FlywheelJobError: invalid job or an export already running (checked in the session).
        """
        data = await trio.to_thread.run_sync(self._session.call_fresh, "flywheel_export", {
            "input_roots": [str(p) for p in job.input_roots], "output_dir": str(job.output_dir),
            "threads": int(job.threads), "runs": [str(p) for p in job.runs], "rules": job.rules})
        if data and data.get("state") == "running" and self.status.state != "running":
            self.merge(data)  # a delta may already have said more
        return self.status

    def merge(self, data: dict[str, Any] | None) -> None:
        """Apply the session meta's ``flywheel`` entry to ``status``."""
        from rpent.session.flywheel_jobs import FlywheelJob

        if not data:
            return
        st = self.status
        st.state, st.pid, st.returncode, st.error = data.get("state", st.state), data.get("pid"), data.get("returncode"), data.get("error")
        st.progress = tuple(data["progress"]) if data.get("progress") else None
        st.report = data.get("report")
        st.log_path = Path(data["log_path"]) if data.get("log_path") else None
        job = data.get("job")
        st.job = None if not job else FlywheelJob(tuple(Path(p) for p in job["input_roots"]), Path(job["output_dir"]),
                                                  int(job.get("threads", 0)), tuple(Path(p) for p in job.get("runs") or ()),
                                                  str(job.get("rules") or "v1"))


class RemoteSession:
    """A session process seen through its socket (see module docstring).

    Args:
        paths: the session directory.
        sink: thread-safe callable receiving the UI events (as for ``Session``).
        token: the session token (default: read from ``paths.token``).

    Raises:
        PermissionError / FileNotFoundError: the token cannot be read.
    """

    remote = True

    def __init__(self, paths: SessionPaths, sink: Any, token: str | None = None) -> None:
        from rpent.session.model import SessionConfig

        self.paths = paths
        self.session_dir = paths.root
        self._sink = sink
        self._token = token if token is not None else wire.read_token(paths.root)
        state = paths.read_state() or {}
        self.output_dir = Path(paths.root)
        self.config = SessionConfig(output_dir=self.output_dir)
        self.state = str(state.get("session_state") or "starting_shared_services")
        self.fatal_error: str | None = None
        self.feedback = ""
        self.endpoints: dict[str, str] = {}
        self.services: dict[str, Any] = {}
        self.runs: list[Any] = []
        self.cell_busy = False
        self.server_pid: int | None = state.get("pid")
        self.attached = threading.Event()
        self.gone: SessionGone | None = None
        self.cells = RemoteCells(self)
        self.flywheel = RemoteFlywheel(self)
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None
        self._echo: list[tuple[str, str]] = []

    # -- queries (as Session) ------------------------------------------------------------------------
    @property
    def current(self) -> Any:
        """The newest TaskRun (running or finished), or None."""
        return self.runs[-1] if self.runs else None

    @property
    def active(self) -> Any:
        """The TaskRun that is still starting or running, or None."""
        run = self.current
        return run if run is not None and not run.finished else None

    @property
    def input_mode(self) -> str:
        """``command_only``, ``conversation`` or ``disabled`` (as ``Session.input_mode``)."""
        if self.state == "fatal":
            return "disabled"
        return "conversation" if self.active is not None else "command_only"

    def run_by_id(self, run_id: str) -> Any:
        """The TaskRun with id ``run_id`` or None."""
        return next((r for r in self.runs if r.id == run_id), None)

    def toolkit_for(self, run_id: str) -> Any:
        """A marker for the session's toolkit of ``run_id`` while it runs (cells run in the session)."""
        run = self.run_by_id(run_id)
        return ("remote-toolkit", run_id) if run is not None and not run.finished else None

    def operator_for(self, run_id: str) -> Any:
        """An object whose ``pending`` is TaskRun ``run_id``'s pending operator request."""
        run = self.run_by_id(run_id)
        return _RemoteOperator(run) if run is not None else None

    # -- commands ------------------------------------------------------------------------------------
    def _call_on(self, sock: socket.socket, method: str, args: dict[str, Any]) -> Any:
        call_id = next(self._ids)
        wire.send_frame_sync(sock, {"t": "call", "id": call_id, "method": method, "args": args})
        reply = wire.read_frame_sync(sock, wire.SERVER_MAX_BYTES)
        if not isinstance(reply, dict) or reply.get("id") != call_id:
            raise RemoteCallError(f"malformed reply to {method}: {reply!r:.200}")
        if reply.get("ok"):
            return reply.get("result")
        raise _error_class(str(reply.get("error_type")))(str(reply.get("error", "")))

    def call(self, method: str, args: dict[str, Any] | None = None, timeout: float = CALL_TIMEOUT_S) -> Any:
        """Run command ``method`` in the session and return its result (blocking, thread-safe).

        Raises:
            The session's error for the command (``SessionNotReady``, ``OperatorReplyError`` ...);
            ConnectionError when the session is gone.
        """
        with self._lock:
            try:
                if self._sock is None:
                    self._sock = _connect(self.paths, self._token, "commands", timeout)
                self._sock.settimeout(timeout)
                return self._call_on(self._sock, method, args or {})
            except (OSError, wire.FrameError) as exc:
                if self._sock is not None:
                    self._sock.close()
                    self._sock = None
                raise ConnectionError(f"lost the session at {self.paths.socket}: {exc}") from None

    def call_fresh(self, method: str, args: dict[str, Any] | None = None, timeout: float | None = 600.0) -> Any:
        """``call`` on a connection of its own (for long calls from a worker thread)."""
        try:
            sock = _connect(self.paths, self._token, "commands", timeout)
        except OSError as exc:
            raise ConnectionError(f"lost the session at {self.paths.socket}: {exc}") from None
        try:
            return self._call_on(sock, method, args or {})
        finally:
            sock.close()

    def start_task(self, command: Any) -> Any:
        """Start a TaskRun for ``command`` in the session; returns its (mirrored) ``TaskRunView``.

        Raises:
            SessionNotReady: as ``Session.start_task``.
        """
        # the session's first parse may wait for LIBERO's suite tables (seconds; more on a loaded machine)
        data = self.call("start_task", {"suite": command.suite, "task": command.task, "seed": command.seed},
                         timeout=START_TASK_TIMEOUT_S)
        return self._merge_run(data)

    async def start_task_async(self, command: Any) -> Any:
        """``start_task`` for the UI (call from the client's trio run): the blocking call runs in a worker
        thread, the reply is merged into the mirror on the trio thread (where the event reader merges).

        Raises:
            SessionNotReady: as ``Session.start_task``; ConnectionError when the session is gone.
        """
        import functools

        data = await trio.to_thread.run_sync(functools.partial(
            self.call, "start_task", {"suite": command.suite, "task": command.task, "seed": command.seed},
            timeout=START_TASK_TIMEOUT_S))
        return self._merge_run(data)

    def cancel_task(self, run_id: str, reason: str = "cancelled by the operator") -> bool:
        """Cancel TaskRun ``run_id`` in the session; True if a cancel was requested."""
        return bool(self.call("cancel_task", {"run_id": run_id, "reason": reason}))

    def steer(self, text: str) -> str:
        """Queue ``text`` for the active planner (see ``Session.steer``)."""
        reply = self.call("steer", {"text": text})
        run = self.active
        if run is not None:
            self._echo.append((run.id, "operator_message:" + text))
        return str(reply)

    def interrupt(self) -> str:
        """Interrupt the active planner's turn; ``accepted`` or ``noop``."""
        result = str(self.call("interrupt"))
        run = self.active
        if result == "accepted" and run is not None:
            self._echo.append((run.id, "interrupt:"))
        return result

    def reply_operator(self, run_id: str, request_id: str, answer: str, notes: str = "") -> Any:
        """Answer TaskRun ``run_id``'s pending request (the request closes in every attached client).

        Raises:
            OperatorReplyError: expired request or invalid answer (as ``TuiOperator.reply``).
        """
        from rpent.session.operator import OperatorReply

        data = self.call("reply_operator", {"run_id": run_id, "request_id": request_id, "answer": answer,
                                            "notes": notes})
        return OperatorReply(data["id"], data["answer"], data.get("notes", ""))

    async def stop_service(self, name: str) -> None:
        """Stop service ``name`` in the session."""
        await trio.to_thread.run_sync(self.call_fresh, "stop_service", {"name": name})

    async def restart_service(self, name: str) -> None:
        """Restart service ``name`` in the session."""
        await trio.to_thread.run_sync(self.call_fresh, "restart_service", {"name": name})

    def stop_session(self) -> None:
        """Stop the session process (TaskRuns cancelled and recorded, services stopped)."""
        try:
            self.call("stop_session", timeout=10.0)
        except ConnectionError:
            pass  # already gone

    def close(self) -> None:
        """Close the command connection (the session keeps running: a detach)."""
        with self._lock:
            if self._sock is not None:
                self._sock.close()
                self._sock = None

    # -- events --------------------------------------------------------------------------------------
    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Attach (snapshot), then apply deltas until cancelled (a detach) or the session ends
        (``SessionGone`` to the sink). ``task_status.started()`` once the snapshot is applied.

        Raises:
            ConnectionRefusedError: the session refused the hello (wrong token, other protocol).
            OSError: no session serves at the socket.
        """
        stream = await trio.open_unix_socket(str(self.paths.socket))
        buffer = bytearray()
        started = False
        try:
            await stream.send_all(wire.encode_frame({"t": "hello", "protocol": wire.PROTOCOL, "token": self._token,
                                                     "role": "events"}))
            welcome = await wire.receive_frame(stream, wire.SERVER_MAX_BYTES, buffer)
            if not isinstance(welcome, dict) or welcome.get("t") != "welcome":
                raise ConnectionRefusedError(f"the session refused the connection: "
                                             f"{welcome.get('error') if isinstance(welcome, dict) else welcome!r}")
            detail = "the session stopped"
            while True:
                try:
                    msg = await wire.receive_frame(stream, wire.SERVER_MAX_BYTES, buffer)
                except (trio.BrokenResourceError, wire.FrameError) as exc:
                    detail = f"lost the connection to the session: {exc}"
                    break
                if msg is None:
                    break
                self.apply(msg)
                if not started:
                    started = True
                    self.attached.set()
                    task_status.started()
            self.gone = SessionGone(detail, stopped=not self.paths.running())
            self.state = "stopped"
            self._sink(self.gone)
        finally:
            with trio.CancelScope(shield=True):
                await stream.aclose()

    def apply(self, msg: dict[str, Any]) -> None:
        """Apply a ``snapshot`` or ``delta`` to the mirror and hand the matching UI events to the sink."""
        from rpent.session.code_cells import CellFinished, CellProgress
        from rpent.session.flywheel_jobs import FlywheelOutput
        from rpent.session.operator import OperatorReply
        from rpent.session.model import OperatorPrompt, OperatorResolved, RunEvents, ServiceLog, SessionChanged

        if msg.get("t") == "snapshot":
            self._apply_config(msg.get("config") or {})
            self.server_pid = (msg.get("server") or {}).get("pid", self.server_pid)
        session = msg.get("session")
        if session:
            self.state = session.get("state", self.state)
            self.fatal_error = session.get("fatal_error")
            self.feedback = session.get("feedback", "")
            self.endpoints = dict(session.get("endpoints") or {})
            self.cell_busy = bool(session.get("cell_busy"))
            self.flywheel.merge(session.get("flywheel"))
            if session.get("flywheel_lines"):  # the backlog of an export started before this client attached
                self.flywheel.status.lines[:] = list(session["flywheel_lines"])
                self._sink(FlywheelOutput(list(session["flywheel_lines"]), self.flywheel.status.progress,
                                          self.flywheel.status.state))
        for name, data in (msg.get("services") or {}).items():
            lines = self._merge_service(name, data)
            if lines:
                self._sink(ServiceLog(name, lines))
        pending = []
        for data in msg.get("runs") or []:
            run = self._merge_run(data)
            events = [e for e in data.get("events") or [] if not self._is_echo(run.id, e)]
            if events:
                self._sink(RunEvents(run.id, events))
            if msg.get("t") == "snapshot" and run.operator is not None:
                pending.append(OperatorPrompt(run.id, run.operator))
        self._sink(SessionChanged())
        for request in pending:
            self._sink(request)
        for notice in msg.get("notices") or []:
            kind = notice.get("t")
            if kind == "operator_prompt":
                self._sink(OperatorPrompt(notice["run_id"], _request(notice["request"])))
            elif kind == "operator_resolved":
                reply = notice["reply"]
                self._sink(OperatorResolved(notice["run_id"], _request(notice["request"]),
                                            OperatorReply(reply["id"], reply["answer"], reply.get("notes", ""))))
            elif kind == "cell_progress":
                self._sink(CellProgress(notice["elapsed_s"], notice["timeout_s"], notice["calls"], notice["max_calls"]))
            elif kind == "flywheel":
                status = self.flywheel.status
                status.lines.extend(notice.get("lines") or [])
                del status.lines[:-2000]
                if notice.get("progress"):
                    status.progress = tuple(notice["progress"])
                # the state in the session meta (merged above) is the newest; the notice's is the one of its lines
                self._sink(FlywheelOutput(list(notice.get("lines") or []), status.progress,
                                          str(notice.get("state") or status.state)))
            elif kind == "cell_finished":
                self._sink(CellFinished(dict(notice.get("result") or {}), float(notice.get("elapsed_s", 0.0)),
                                        int(notice.get("calls", 0))))

    def _is_echo(self, run_id: str, event: dict[str, Any]) -> bool:
        sub = event.get("event")
        if sub not in ("operator_message", "interrupt"):
            return False
        key = (run_id, f"{sub}:{event.get('text', '') if sub == 'operator_message' else ''}")
        if key in self._echo:
            self._echo.remove(key)  # this client showed it when it was typed
            return True
        return False

    def _apply_config(self, data: dict[str, Any]) -> None:
        from rpent.session.model import SessionConfig

        self.config = SessionConfig(output_dir=Path(data.get("output_dir") or self.output_dir),
                                    robot=data.get("robot", "libero"), planner=data.get("planner", "api"),
                                    model=data.get("model"), vla_endpoint=data.get("vla_endpoint"),
                                    sam3_endpoint=data.get("sam3_endpoint"),
                                    shared_services=tuple(data.get("shared_services") or ()),
                                    run_options=dict(data.get("run_options") or {}))
        self.output_dir = Path(self.config.output_dir)

    def _merge_service(self, name: str, data: dict[str, Any]) -> list[str]:
        from rpent.session.model import ServiceView

        view = self.services.get(name)
        if view is None:
            view = self.services[name] = ServiceView(name=name)
        for key in ("scope", "state", "endpoint", "pid", "started_at", "last_error"):
            if key in data:
                setattr(view, key, data[key])
        if data.get("log_path"):
            view.log_path = Path(data["log_path"])
        lines = list(data.get("lines") or [])
        start = int(data.get("lines_from", view.total_lines))
        new = lines[max(0, view.total_lines - start):]
        view.lines.extend(new)
        view.total_lines = max(view.total_lines, start + len(lines))
        return new

    def _merge_run(self, data: dict[str, Any]) -> Any:
        from rpent.session.commands import TaskCommand
        from rpent.session.model import TaskRunView

        run = self.run_by_id(data["id"])
        if run is None:
            cmd = data["command"]
            run = TaskRunView(id=data["id"], command=TaskCommand(cmd["suite"], int(cmd["task"]), int(cmd["seed"])),
                              output_dir=Path(data["output_dir"]))
            self.runs.append(run)
            self.runs.sort(key=lambda r: r.id)
        for key in wire.run_meta_fields(run):
            if key in data and key != "id":
                setattr(run, key, data[key])
        if "operator" in data:
            run.operator = _request(data["operator"]) if data["operator"] else None
        for name in ("transcript", "timeline"):
            items = data.get(name)
            if items:
                target = getattr(run, name)
                start = int(data.get(f"{name}_from", len(target)))
                target.extend(items[max(0, len(target) - start):])
        if data.get("frames"):
            run.frames.update({k: bytes(v) for k, v in data["frames"].items()})
        return run


def _request(data: dict[str, Any]) -> Any:
    from rpent.session.operator import OperatorRequest

    return OperatorRequest(id=data["id"], kind=data["kind"], prompt=data["prompt"], choices=tuple(data["choices"]),
                           frames=dict(data.get("frames") or {}), created_at=float(data.get("created_at") or 0.0))
