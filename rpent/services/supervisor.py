"""Supervisor: start, watch and stop a run's RPC services (trio).

Works under plain ``trio.run`` (the CLI) and under trio guest mode (the TUI): it installs no
signal handlers and runs blocking RPC calls on worker threads (``trio.to_thread``). Each spawned
service's stdout+stderr is appended to ``<log_dir>/<name>.log`` (small appends to a local file are
done with ``os.write`` on the trio thread; they do not block in practice).

Lifecycle of a :class:`RunningService`: ``pending -> starting -> ready`` (or ``failed``), and at
teardown ``stopped`` (a service that failed stays ``failed``). Every state change and every log
line is an event (plain dicts) delivered to ``on_event`` and to :meth:`Supervisor.subscribe`
channels::

    {"kind": "service_state", "service": name, "state": "starting", "detail": str,
     "endpoint": str | None, "pid": int | None, "returncode": int | None}
    {"kind": "service_log", "service": name, "line": str}

No orphans: spawned servers lead their own process group (``start_new_session``); teardown
signals the whole group (SIGTERM, ``stop_grace_s``, SIGKILL) so grandchildren die too. Spawned
servers also get ``--parent-watch`` and a stdin pipe: if this process dies, the pipe closes and
the server exits (taking its group with it). A server still starting up (not yet watching its
stdin) gets SIGTERM from the kernel when this process dies (``PR_SET_PDEATHSIG``, set before its
first line: ``rpent.services.spawn.open_child``).
"""

from __future__ import annotations

import collections
import enum
import os
import re
import signal
import subprocess
import time
from pathlib import Path
from typing import Any, Callable

import trio

from rpent.rpc.client import RpcClient
from rpent.rpc.endpoint import Endpoint, parse_endpoint
from rpent.rpc.errors import RpcError
from rpent.rpc.procgroup import group_alive, killpg_quiet
from rpent.services.spawn import Child, open_child
from rpent.rpc.protocol import READY_PREFIX
from rpent.services.spec import ServiceSpec

LOG_TAIL_LINES = 40
"""Log lines kept in memory per service (quoted in start errors)."""

_READY_RE = re.compile(r"^" + re.escape(READY_PREFIX) + r"(\S+)\s*$")


class ServiceState(str, enum.Enum):
    """Lifecycle states of a service."""

    PENDING = "pending"
    STARTING = "starting"
    READY = "ready"
    FAILED = "failed"
    STOPPED = "stopped"


class ServiceStartError(RuntimeError):
    """A service did not become ready: it exited, timed out, or failed ``healthz``.

    The message names the service and, for a spawned one, its exit code and the last log lines.

    Attributes:
        service: the service name.
        returncode: exit code of the child (negative: killed by that signal), or None.
        log_tail: last lines of its log.
        reason: the service's own last error line (:func:`last_error_line` of ``log_tail``), or None.
    """

    def __init__(self, message: str, *, service: str, returncode: int | None = None, log_tail: list[str] | None = None):
        super().__init__(message)
        self.service = service
        self.returncode = returncode
        self.log_tail = list(log_tail or [])
        self.reason = last_error_line(self.log_tail)

    @property
    def summary(self) -> str:
        """One line: the message's first line and, when the service said why, its own last error line."""
        head = (str(self).splitlines() or [""])[0]
        return f"{head}; the service said: {self.reason}" if self.reason else head


#: Lines of a service's output that are not its error: Python traceback frames and source lines,
#: the supervisor's own notes, warnings, blank lines.
_NOT_AN_ERROR = re.compile(r"^(\s+|Traceback \(most recent call last\)|\[rpent supervisor |.*\bWarning\b.*:|"
                           r"warnings\.warn|During handling of the above exception|The above exception was)")


def last_error_line(lines: list[str]) -> str | None:
    """The service's own last error line among its last output ``lines``: the last non-blank line
    that is not a traceback frame, a supervisor note or a warning (a Python traceback ends with its
    exception line; rpent's servers print one ``<server>: <reason>`` line before exiting). Cut to
    500 characters; None when there is none."""
    for line in reversed(lines):
        text = line.rstrip()
        if text and not _NOT_AN_ERROR.match(text):
            return text[:500]
    return None


class RunningService:
    """A service under supervision (spawned or external). Read its attributes; do not set them.

    Attributes:
        spec: the ServiceSpec.
        state: current :class:`ServiceState`.
        endpoint: the Endpoint to call (None until known).
        pid: child pid (None for external services).
        log_path: ``<log_dir>/<name>.log`` (None for external services).
        returncode: exit code once the child exited (negative = killed by signal), else None.
        health: the last ``healthz`` reply (dict) or None.
    """

    def __init__(self, spec: ServiceSpec, log_path: Path | None) -> None:
        self.spec = spec
        self.name = spec.name
        self.state = ServiceState.PENDING
        self.endpoint: Endpoint | None = None
        self.pid: int | None = None
        self.log_path = log_path
        self.returncode: int | None = None
        self.health: dict | None = None
        self.log_tail: collections.deque[str] = collections.deque(maxlen=LOG_TAIL_LINES)
        self._proc: Child | None = None
        self._log_fd: int | None = None
        self._ready_or_exit = trio.Event()
        self._exited = trio.Event()
        self._stdout_done = trio.Event()
        self._stopping = False
        # Pump and reaper run shielded from the caller's cancellation (so the log of a
        # cancelled run is complete); the supervisor cancels these scopes itself at exit.
        self._io_scopes: list[trio.CancelScope] = []

    def exit_code(self) -> int | None:
        """The child's exit status now (None while it runs, and for external services): the reaper's,
        else a non-blocking poll, so a death is seen before the reaper task has had its turn."""
        if self.returncode is not None or self._proc is None:
            return self.returncode
        return self._proc.poll()

    @property
    def external(self) -> bool:
        """True when the service was reached at ``spec.endpoint`` rather than spawned."""
        return self.spec.endpoint is not None

    def client(self, timeout: float | None = 30.0) -> RpcClient:
        """A new RpcClient for this service (the caller closes it).

        Raises:
            RuntimeError: the service has no endpoint yet (not ready).
        """
        if self.endpoint is None:
            raise RuntimeError(f"service {self.name!r} has no endpoint yet (state {self.state.value})")
        return RpcClient(self.endpoint, timeout=timeout)

    def __repr__(self) -> str:
        return f"<RunningService {self.name} {self.state.value} {self.endpoint} pid={self.pid}>"


class Supervisor:
    """Starts services and stops them in reverse order; an async context manager (trio).

    Args:
        log_dir: directory for ``<name>.log`` files (created if missing).
        on_event: optional callback ``fn(event: dict)`` called on the trio thread for every
            state change and log line; it must not block. Exceptions it raises are ignored.

    Usage::

        async with Supervisor(log_dir=run_dir) as sup:
            svc = await sup.start(spec)
            ...
        # all services stopped here (also on error or cancellation)
    """

    def __init__(self, log_dir: str | os.PathLike, *, on_event: Callable[[dict], Any] | None = None) -> None:
        self.log_dir = Path(log_dir)
        self._on_event = on_event
        self._services: list[RunningService] = []
        self._subscribers: list[trio.MemorySendChannel] = []
        self.dropped_events = 0
        self._nursery: trio.Nursery | None = None
        self._nursery_cm: Any = None

    # ------------------------------------------------------------------ context
    async def __aenter__(self) -> "Supervisor":
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self._nursery_cm = trio.open_nursery()
        self._nursery = await self._nursery_cm.__aenter__()
        return self

    async def __aexit__(self, exc_type, exc, tb) -> bool | None:
        try:
            with trio.CancelScope(shield=True):
                await self.stop_all()
        finally:
            assert self._nursery is not None
            for svc in self._services:
                for scope in svc._io_scopes:
                    scope.cancel()
            self._nursery.cancel_scope.cancel()
            for ch in self._subscribers:
                ch.close()
            self._subscribers.clear()
            # The body's own exception propagates unchanged (not wrapped in an ExceptionGroup).
            await self._nursery_cm.__aexit__(None, None, None)
            self._nursery = None
        return None

    # ------------------------------------------------------------------ events
    @property
    def services(self) -> list[RunningService]:
        """Services in start order (including failed ones)."""
        return list(self._services)

    def get(self, name: str) -> RunningService:
        """The service called ``name``. Raises KeyError naming the known services."""
        for svc in self._services:
            if svc.name == name:
                return svc
        raise KeyError(f"no service {name!r}; known: {[s.name for s in self._services]}")

    def subscribe(self, max_buffer: int = 4096) -> trio.MemoryReceiveChannel:
        """A channel receiving every later event (dicts, see module doc).

        When the consumer falls ``max_buffer`` events behind, newer events are dropped for it
        (counted in ``dropped_events``); log lines are always in the log files.
        The channel closes when the supervisor exits.
        """
        send, recv = trio.open_memory_channel(max_buffer)
        self._subscribers.append(send)
        return recv

    def _emit(self, event: dict) -> None:
        if self._on_event is not None:
            try:
                self._on_event(event)
            except Exception:  # noqa: BLE001 - a faulty observer must not break supervision
                pass
        for ch in list(self._subscribers):
            try:
                ch.send_nowait(event)
            except trio.WouldBlock:
                self.dropped_events += 1
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                self._subscribers.remove(ch)

    def _set_state(self, svc: RunningService, state: ServiceState, detail: str = "") -> None:
        svc.state = state
        self._emit({
            "kind": "service_state", "service": svc.name, "state": state.value, "detail": detail,
            "endpoint": None if svc.endpoint is None else str(svc.endpoint), "pid": svc.pid,
            "returncode": svc.returncode,
        })

    def _log_line(self, svc: RunningService, line: str) -> None:
        svc.log_tail.append(line)
        self._emit({"kind": "service_log", "service": svc.name, "line": line})

    def _log_note(self, svc: RunningService, text: str) -> None:
        if svc._log_fd is not None:
            stamp = time.strftime("%Y-%m-%d %H:%M:%S")
            os.write(svc._log_fd, f"[rpent supervisor {stamp}] {text}\n".encode())

    # ------------------------------------------------------------------ start
    async def start(self, spec: ServiceSpec) -> RunningService:
        """Start ``spec`` (spawn, or reach its endpoint) and wait until it is ready.

        Returns:
            The RunningService in state ``ready`` with ``endpoint`` set.

        Raises:
            ValueError: a service with that name was already started.
            ServiceStartError: the child exited first (names the exit code and last log lines),
                the readiness line or ``healthz`` did not come within ``ready_timeout_s``, the
                executable is missing, or the external endpoint failed ``healthz``.
            RuntimeError: used outside ``async with``.
        """
        if self._nursery is None:
            raise RuntimeError("use Supervisor as 'async with Supervisor(...) as sup:' before start()")
        if any(s.name == spec.name for s in self._services):
            raise ValueError(f"a service named {spec.name!r} was already started; service names must be unique")
        log_path = None if spec.endpoint is not None else self.log_dir / f"{spec.name}.log"
        svc = RunningService(spec, log_path)
        self._services.append(svc)
        self._emit({"kind": "service_state", "service": svc.name, "state": "pending", "detail": "",
                    "endpoint": spec.endpoint, "pid": None, "returncode": None})
        if spec.endpoint is not None:
            await self._connect_external(svc)
        else:
            await self._spawn(svc)
        return svc

    async def _connect_external(self, svc: RunningService) -> None:
        svc.endpoint = parse_endpoint(svc.spec.endpoint)  # type: ignore[arg-type]
        self._set_state(svc, ServiceState.STARTING, f"checking healthz of external {svc.endpoint}")
        try:
            svc.health = await _healthz(svc.endpoint, svc.spec.healthz_timeout_s)
        except (RpcError, OSError) as exc:
            msg = f"service {svc.name!r}: external endpoint {svc.endpoint} failed healthz: {exc}"
            self._set_state(svc, ServiceState.FAILED, msg)
            raise ServiceStartError(msg, service=svc.name) from exc
        self._set_state(svc, ServiceState.READY, f"external {svc.endpoint}")

    def _argv(self, spec: ServiceSpec) -> list[str]:
        argv = list(spec.argv)
        if spec.server_args:
            argv += ["--transport", spec.transport, "--host", "127.0.0.1", "--port", "0", "--parent-watch"]
        return argv

    async def _spawn(self, svc: RunningService) -> None:
        spec = svc.spec
        argv = self._argv(spec)
        env = dict(os.environ)
        env.update(spec.env)
        env.setdefault("PYTHONUNBUFFERED", "1")
        assert svc.log_path is not None
        svc._log_fd = os.open(svc.log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self._log_note(svc, "starting: " + subprocess.list2cmdline(argv))
        self._set_state(svc, ServiceState.STARTING, "spawning")
        try:
            # forked on this (trio) thread with PR_SET_PDEATHSIG: dies with this process even while it
            # is still starting, before its --parent-watch thread runs (rpent.services.spawn)
            proc = await open_child(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    env=env, cwd=spec.cwd)
        except OSError as exc:
            msg = f"service {svc.name!r}: cannot run {argv[0]!r}: {exc.strerror or exc}"
            self._log_note(svc, msg)
            self._close_log(svc)
            self._set_state(svc, ServiceState.FAILED, msg)
            raise ServiceStartError(msg, service=svc.name) from exc
        svc._proc = proc
        svc.pid = proc.pid
        assert self._nursery is not None
        self._nursery.start_soon(self._pump, svc)
        self._nursery.start_soon(self._reap, svc)
        self._set_state(svc, ServiceState.STARTING, f"pid {proc.pid}, waiting for the readiness line")

        deadline = trio.current_time() + spec.ready_timeout_s
        with trio.move_on_at(deadline):
            await svc._ready_or_exit.wait()
        if svc._exited.is_set() and svc.endpoint is None:
            with trio.move_on_after(2.0):  # let the pump drain the last output
                await svc._stdout_done.wait()
            await self._fail_start(svc, f"exited with code {svc.returncode} before it was ready")
        if svc.endpoint is None:
            await self._fail_start(svc, f"printed no readiness line ('{READY_PREFIX}<endpoint>') within "
                                        f"{spec.ready_timeout_s:g} s")
        assert svc.endpoint is not None
        self._set_state(svc, ServiceState.STARTING, f"listening on {svc.endpoint}, checking healthz")
        remaining = max(0.5, min(spec.healthz_timeout_s, deadline - trio.current_time()))
        try:
            svc.health = await _healthz(svc.endpoint, remaining)
        except (RpcError, OSError) as exc:
            await self._fail_start(svc, f"failed healthz at {svc.endpoint}: {exc}")
        if svc._exited.is_set():
            await self._fail_start(svc, f"exited with code {svc.returncode} right after healthz")
        self._set_state(svc, ServiceState.READY, f"ready at {svc.endpoint}")

    async def _fail_start(self, svc: RunningService, why: str) -> None:
        with trio.CancelScope(shield=True):
            await self._terminate(svc)
        tail = list(svc.log_tail)[-20:]
        msg = f"service {svc.name!r} (pid {svc.pid}) {why}"
        if svc.returncode is not None and "exit" not in why:
            msg += f"; exit code {svc.returncode}"
        msg += f"; log: {svc.log_path}"
        if tail:
            msg += "\n--- last log lines ---\n" + "\n".join(tail)
        self._log_note(svc, f"start failed: {why}")
        self._close_log(svc)
        self._set_state(svc, ServiceState.FAILED, why)
        raise ServiceStartError(msg, service=svc.name, returncode=svc.returncode, log_tail=tail)

    async def _pump(self, svc: RunningService) -> None:
        scope = trio.CancelScope(shield=True)
        svc._io_scopes.append(scope)
        try:
            with scope:
                await self._pump_lines(svc)
        finally:
            svc._stdout_done.set()

    async def _pump_lines(self, svc: RunningService) -> None:
        proc = svc._proc
        assert proc is not None and proc.stdout is not None
        partial = b""
        while True:
            try:
                chunk = await proc.stdout.receive_some(65536)
            except (trio.ClosedResourceError, trio.BrokenResourceError):
                break
            if not chunk:
                break
            if svc._log_fd is not None:
                os.write(svc._log_fd, chunk)
            lines = (partial + chunk).split(b"\n")
            partial = lines.pop()
            for raw in lines:
                self._handle_line(svc, raw.rstrip(b"\r").decode("utf-8", "replace"))
        if partial:
            self._handle_line(svc, partial.decode("utf-8", "replace"))

    def _handle_line(self, svc: RunningService, line: str) -> None:
        self._log_line(svc, line)
        if svc.endpoint is None:
            m = _READY_RE.match(line)
            if m:
                try:
                    ep = parse_endpoint(m.group(1))
                except ValueError:
                    return
                if ep.host in ("0.0.0.0", "::"):
                    ep = Endpoint(ep.protocol, "127.0.0.1" if ep.host == "0.0.0.0" else "::1", ep.port)
                svc.endpoint = ep
                svc._ready_or_exit.set()

    async def _reap(self, svc: RunningService) -> None:
        proc = svc._proc
        assert proc is not None
        scope = trio.CancelScope(shield=True)
        svc._io_scopes.append(scope)
        with scope:
            rc = await proc.wait()
        if scope.cancelled_caught:
            return
        svc.returncode = rc
        svc._exited.set()
        svc._ready_or_exit.set()
        if svc.state is ServiceState.READY and not svc._stopping:
            self._log_note(svc, f"exited unexpectedly with code {rc}")
            self._set_state(svc, ServiceState.FAILED, f"exited unexpectedly with code {rc}")

    # ------------------------------------------------------------------ stop
    async def _terminate(self, svc: RunningService) -> None:
        """SIGTERM the process group, wait ``stop_grace_s``, SIGKILL what is left, reap."""
        proc = svc._proc
        if proc is None:
            return
        svc._stopping = True
        pgid = proc.pid  # start_new_session: the child leads its own group
        if group_alive(pgid) or not svc._exited.is_set():
            killpg_quiet(pgid, signal.SIGTERM)
            with trio.move_on_after(svc.spec.stop_grace_s):
                while not svc._exited.is_set() or group_alive(pgid):
                    await trio.sleep(0.03)
        killpg_quiet(pgid, signal.SIGKILL)
        with trio.move_on_after(10.0):
            await svc._exited.wait()
        if svc.returncode is None:
            svc.returncode = proc.poll()
        with trio.move_on_after(2.0):
            await svc._stdout_done.wait()
        if proc.stdin is not None:
            try:
                await proc.stdin.aclose()
            except (trio.ClosedResourceError, trio.BrokenResourceError, OSError):
                pass

    def _close_log(self, svc: RunningService) -> None:
        if svc._log_fd is not None:
            try:
                os.close(svc._log_fd)
            finally:
                svc._log_fd = None

    async def stop(self, name: str) -> None:
        """Stop one service (spawned: process-group SIGTERM, grace, SIGKILL). Idempotent."""
        svc = self.get(name)
        if svc.state is ServiceState.STOPPED:
            return
        if not svc.external:
            self._log_note(svc, "stopping")
            await self._terminate(svc)
            self._log_note(svc, f"stopped (exit code {svc.returncode})")
            self._close_log(svc)
        if svc.state is not ServiceState.FAILED:
            self._set_state(svc, ServiceState.STOPPED, f"exit code {svc.returncode}" if not svc.external else "")

    async def restart(self, name: str) -> RunningService:
        """Stop service ``name`` and start it again from the same spec, keeping its place in the
        teardown order. A spawned service gets a new process (and port); an external one is
        checked again. The log file is appended to.

        Returns:
            the new RunningService (state ``ready``).
        Raises:
            KeyError: unknown service; ServiceStartError: the new start failed (as :meth:`start`).
        """
        old = self.get(name)
        index = self._services.index(old)
        await self.stop(name)
        self._services.remove(old)
        try:
            svc = await self.start(old.spec)
        finally:
            new = next((s for s in self._services if s.name == name), None)
            if new is not None:
                self._services.remove(new)
                self._services.insert(index, new)
        return svc

    async def stop_all(self) -> None:
        """Stop every service in reverse start order (shielded from cancellation by callers that need it)."""
        for svc in reversed(self._services):
            if svc.state is ServiceState.STOPPED:
                continue
            await self.stop(svc.name)


async def _healthz(endpoint: Endpoint, timeout: float) -> dict:
    def call() -> dict:
        with RpcClient(endpoint, timeout=timeout, connect_timeout=timeout) as c:
            reply = c.healthz()
        if not isinstance(reply, dict) or reply.get("status") != "ok":
            raise RpcError(f"healthz of {endpoint} answered {reply!r}")
        return reply

    return await trio.to_thread.run_sync(call, abandon_on_cancel=True)
