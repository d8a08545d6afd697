"""The cell worker process: ``python -s -P -c BOOTSTRAP PACKAGE_DIR --in-fd R --out-fd W --sandbox JSON``
(:data:`rpent.policy.worker_process.BOOTSTRAP` imports this package by location, then calls :func:`main`).

Started by :class:`rpent.policy.worker_process.WorkerProcess` (never by hand), with a
scrubbed environment and its own process group (see :mod:`rpent.policy.sandbox`); its first
act is to build its sandbox (cgroup, resource limits, namespaces with a read-only filesystem,
its own PID namespace where it runs under its own init, no capabilities, Landlock:
:mod:`rpent.policy.isolation`). Processes a cell starts are killed when the cell ends
(:func:`end_cell_processes`). It talks to the parent only through two pipes carrying
length-prefixed msgpack frames (:mod:`rpent.policy.frames`): fd ``R`` parent -> worker,
fd ``W`` worker -> parent. Its fds 1 and 2 go to ``code_policy/worker.log``; Python-level
``print`` output of a cell is streamed to the parent as ``out`` frames instead.

One worker serves many cells of a run: the cell namespace (preloaded with ``robo``,
``np``/``numpy`` and ``math``) persists, so variables, functions and imports carry over.
The value of a trailing expression is echoed back, as in IPython (and stored in ``_``).

Interrupts: the parent sends ``SIGUSR1`` when the cell's wall time is up (the cell sees
:class:`~rpent.policy.errors.CellTimeout`) and ``SIGINT`` for an operator interrupt
(:class:`~rpent.policy.errors.CellInterrupted`). While a robot call is waiting for its
reply the signal is held and raised right after the reply arrives, so the frame stream
never desynchronises. Code that swallows these is killed by the parent after a grace
period.
"""

from __future__ import annotations

import argparse
import ast
import builtins
import errno
import io
import json
import linecache
import math
import os
import signal
import sys
import threading
import time
import traceback
from typing import Any

from rpent.policy import errors
from rpent.policy.bounded import MAX_EXCEPTION_CHARS, cut
from rpent.policy.frames import MAX_WORKER_FRAME_BYTES, read_frame, write_frame
from rpent.policy.isolation import isolate_self
from rpent.policy.robo import Robo

#: Longest ``repr`` of a trailing expression value sent back (characters).
MAX_VALUE_REPR = 10_000
#: Characters of output per ``out`` frame (at most 4 bytes each in UTF-8: well within a frame).
OUT_CHUNK_CHARS = 16_384
#: Seconds between checks that the parent process is still alive.
PARENT_WATCH_PERIOD_S = 1.0


class _Channel:
    """Both pipes plus the interrupt bookkeeping of the worker (one per process)."""

    def __init__(self, fd_in: int, fd_out: int):
        self.fd_in = fd_in
        self.fd_out = fd_out
        self.write_lock = threading.Lock()
        self.call_lock = threading.Lock()
        self.next_call_id = 0
        self.main_thread = threading.get_ident()
        self.in_cell = False
        self.protected = 0
        self.pending: type[BaseException] | None = None

    def send(self, message: dict[str, Any]) -> None:
        """Write one frame; an interrupt arriving meanwhile is held until the frame is
        complete (a half-written frame would desynchronise the stream)."""
        on_main = threading.get_ident() == self.main_thread
        if on_main:
            self.protected += 1
        try:
            with self.write_lock:
                write_frame(self.fd_out, message, max_bytes=MAX_WORKER_FRAME_BYTES)
        finally:
            if on_main:
                self.protected -= 1
        if on_main and self.protected == 0:
            self.raise_pending()

    # -- signals -------------------------------------------------------------------
    def on_signal(self, signum: int, frame: Any) -> None:
        """SIGUSR1 -> CellTimeout, SIGINT -> CellInterrupted: raised now, or held while a
        frame is being written or a robot call waits for its reply; ignored between cells."""
        kind = errors.CellTimeout if signum == signal.SIGUSR1 else errors.CellInterrupted
        if not self.in_cell:
            return
        if self.protected:
            self.pending = kind
            return
        raise kind(_interrupt_message(kind))

    def raise_pending(self) -> None:
        """Raise an interrupt held by :meth:`on_signal` (if any, and only inside a cell)."""
        kind, self.pending = self.pending, None
        if kind is not None and self.in_cell:
            raise kind(_interrupt_message(kind))

    # -- robot calls ---------------------------------------------------------------
    def call(self, tool: str, args: dict[str, Any]) -> dict[str, Any]:
        """Transport for :class:`Robo`: send one call, wait for its reply."""
        _flush_streams()
        with self.call_lock:
            self.next_call_id += 1
            call_id = self.next_call_id
            on_main = threading.get_ident() == self.main_thread
            if on_main:
                self.protected += 1
            try:
                self.send({"t": "call", "id": call_id, "tool": tool, "args": args})
                while True:
                    message = read_frame(self.fd_in)
                    if message is None:
                        os._exit(0)  # parent gone: nothing left to do
                    if message.get("t") == "result" and message.get("id") == call_id:
                        break
            finally:
                if on_main:
                    self.protected -= 1
        if message.get("refused"):
            self.pending = None
            return message
        if on_main and self.protected == 0:
            self.raise_pending()
        return message


def _interrupt_message(kind: type[BaseException]) -> str:
    if kind is errors.CellTimeout:
        return "the cell ran past its wall-time limit (--code-timeout-s); the rest of the cell did not run"
    return "the cell was interrupted by the operator"


class _FrameStream(io.TextIOBase):
    """A text stream that forwards writes to the parent as ``out`` frames (line
    buffered: flushed on newline, at 8 KiB, before every robot call and at cell end)."""

    def __init__(self, channel: _Channel, name: str):
        self._channel = channel
        self._name = name
        self._buf: list[str] = []
        self._size = 0
        self._lock = threading.Lock()

    @property
    def name(self) -> str:  # type: ignore[override]
        return f"<cell {self._name}>"

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return False

    def write(self, text: str) -> int:
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        with self._lock:
            self._buf.append(text)
            self._size += len(text)
            if "\n" in text or self._size >= 8192:
                self._flush_locked()
        return len(text)

    def flush(self) -> None:
        with self._lock:
            self._flush_locked()

    def _flush_locked(self) -> None:
        if not self._buf:
            return
        text = "".join(self._buf)
        self._buf.clear()
        self._size = 0
        try:
            for start in range(0, len(text), OUT_CHUNK_CHARS):
                self._channel.send({"t": "out", "stream": self._name, "text": text[start:start + OUT_CHUNK_CHARS]})
        except OSError:
            pass  # parent gone; the process ends at the next read


def _flush_streams() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass


_POLICY_DIR = os.path.dirname(os.path.abspath(__file__))


def _hide_runner_frames(te: traceback.TracebackException, seen: set[int]) -> None:
    if id(te) in seen:
        return
    seen.add(id(te))
    kept = [f for f in te.stack if os.path.dirname(os.path.abspath(f.filename)) != _POLICY_DIR]
    te.stack = traceback.StackSummary.from_list(kept)
    for chained in (te.__cause__, te.__context__):
        if chained is not None:
            _hide_runner_frames(chained, seen)


def _exception_info(exc: BaseException) -> dict[str, str]:
    """``{type, message, traceback}``; the traceback shows the cell's code (and any
    library it called) but not the worker's or the robo facade's own frames."""
    te = traceback.TracebackException(type(exc), exc, exc.__traceback__, capture_locals=False)
    _hide_runner_frames(te, set())
    text = "".join(te.format())
    message = str(exc)
    if isinstance(exc, OSError) and exc.errno == errno.ENOSPC and _SCRATCH_QUOTA:
        message += f" (the cell's scratch quota: {_SCRATCH_QUOTA})"
    elif isinstance(exc, OSError) and exc.errno == errno.EPERM and _raised_in_socket_module(exc):
        message += f" ({SOCKET_REFUSED})"
    # cut here (the parent cuts again): a done frame must fit in MAX_WORKER_FRAME_BYTES
    return {"type": cut(type(exc).__name__, 200), "message": cut(message, MAX_EXCEPTION_CHARS),
            "traceback": cut(text, MAX_EXCEPTION_CHARS)}


#: Appended to an EPERM raised inside the ``socket`` module (the syscall filter refuses the call).
SOCKET_REFUSED = ("a code cell may not open sockets: the sandbox refuses socket() and socketpair() other "
                  "than SOCK_STREAM; reach the robot through robo.<tool>()")


def _raised_in_socket_module(exc: BaseException) -> bool:
    """Whether the innermost Python frame of ``exc``'s traceback is in the standard ``socket``
    module (``socket.socket()``, ``socket.socketpair()``, ``socket.create_connection()``)."""
    tb = exc.__traceback__
    if tb is None:
        return False
    while tb.tb_next is not None:
        tb = tb.tb_next
    import socket as _socket_module
    return os.path.abspath(tb.tb_frame.f_code.co_filename) == os.path.abspath(_socket_module.__file__)


#: How the scratch quota is enforced (set once the sandbox is built; named in ENOSPC errors).
_SCRATCH_QUOTA = ""


def _compile_cell(source: str, filename: str):
    """Compile a cell: all statements, plus the trailing expression separately (its
    value is echoed). Raises SyntaxError."""
    tree = ast.parse(source, filename=filename, mode="exec")
    trailing = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = tree.body.pop()
        trailing = compile(ast.Expression(last.value), filename, "eval")
    body = compile(tree, filename, "exec")
    return body, trailing


def run_cell(channel: _Channel, namespace: dict[str, Any], cell: int, source: str,
             filename: str) -> dict[str, Any]:
    """Run one cell in ``namespace``; returns the ``done`` message (without sending it).

    ``done = {t, cell, value: str|None (repr of the trailing expression), exception:
    {type, message, traceback}|None, finished: {status, summary}|None}``.
    """
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    value = exception = finished = None
    channel.pending = None
    channel.in_cell = True
    try:
        try:
            body, trailing = _compile_cell(source, filename)
            exec(body, namespace)
            if trailing is not None:
                result = eval(trailing, namespace)
                if result is not None:
                    namespace["_"] = result
                    text = repr(result)
                    value = text if len(text) <= MAX_VALUE_REPR else text[:MAX_VALUE_REPR] + "...[truncated]"
        finally:
            channel.in_cell = False
    except errors.EpisodeFinished as exc:
        finished = {"status": exc.status, "summary": exc.summary}
    except BaseException as exc:  # the cell's failure is data, never the worker's
        exception = _exception_info(exc)
    channel.pending = None
    _flush_streams()
    return {"t": "done", "cell": cell, "value": value, "exception": exception, "finished": finished}


def end_cell_processes(max_rounds: int = 100) -> int:
    """SIGKILL every other process of the cell's PID namespace (all but init and this
    worker), repeatedly until none is left (a fork loop refills between rounds), and reap
    what is ours. Only called inside the PID namespace, where ``/proc`` lists nothing else.
    Returns how many signals were sent."""
    me = os.getpid()
    sent = 0
    for _ in range(max_rounds):
        others = [int(e) for e in os.listdir("/proc") if e.isdigit() and int(e) not in (1, me)]
        if not others:
            break
        for pid in others:
            try:
                os.kill(pid, signal.SIGKILL)
                sent += 1
            except OSError:
                pass
        while True:
            try:
                if os.waitpid(-1, os.WNOHANG)[0] == 0:
                    break
            except ChildProcessError:
                break
        time.sleep(0.01)
    return sent


def _watch_parent(parent_pid: int) -> None:
    while True:
        time.sleep(PARENT_WATCH_PERIOD_S)
        if os.getppid() != parent_pid:
            os._exit(3)


def main(argv: list[str] | None = None) -> int:
    """Worker entry point. Exits 0 when the parent closes the command pipe."""
    parser = argparse.ArgumentParser(prog="python -m rpent.policy.worker",
                                     description="rpent code-policy cell worker (started by CodePolicyRunner)")
    parser.add_argument("--in-fd", type=int, required=True, help="pipe fd: parent -> worker frames")
    parser.add_argument("--out-fd", type=int, required=True, help="pipe fd: worker -> parent frames")
    parser.add_argument("--no-namespaces", action="store_true",
                        help="skip the user/mount/pid/network namespaces (the other layers still apply)")
    parser.add_argument("--sandbox", default="{}",
                        help="JSON: {scratch, scratch_bytes, cgroup_procs, cgroup_cpu_procs, limits, max_processes, read_paths} "
                             "(see rpent.policy.isolation.isolate_self)")
    args = parser.parse_args(argv)
    config = json.loads(args.sandbox)

    # first, while single-threaded (see rpent.policy.isolation); returns in the worker proper
    isolation = isolate_self(
        namespaces=not args.no_namespaces, scratch=config.get("scratch"), scratch_bytes=config.get("scratch_bytes"),
        cgroup_procs=config.get("cgroup_procs"), cgroup_cpu_procs=config.get("cgroup_cpu_procs"),
        limits=config.get("limits"),
        max_processes=int(config.get("max_processes", 64)), read_paths=config.get("read_paths"),
        keep_fds=(args.in_fd, args.out_fd))
    global _SCRATCH_QUOTA
    quota = isolation["layers"].get("scratch_quota", {})
    _SCRATCH_QUOTA = str(quota.get("detail", "")) if quota.get("on") else ""
    channel = _Channel(args.in_fd, args.out_fd)
    signal.signal(signal.SIGUSR1, channel.on_signal)
    signal.signal(signal.SIGINT, channel.on_signal)
    in_pid_namespace = bool(isolation["layers"].get("pid_namespace", {}).get("on"))
    if not in_pid_namespace:
        # in a PID namespace the stub watches the parent (and init's death ends everything)
        threading.Thread(target=_watch_parent, args=(os.getppid(),), daemon=True,
                         name="parent-watch").start()

    channel.send({"t": "ready", "pid": os.getpid(), "sandbox": isolation})
    hello = read_frame(channel.fd_in)
    if hello is None:
        return 0
    if hello.get("t") != "hello":
        print(f"rpent.policy.worker: expected a hello frame, got {hello.get('t')!r}", file=sys.stderr)
        return 2

    import numpy  # after the handshake: the parent's start timeout does not pay for it

    robo = Robo(hello.get("specs") or [], channel.call, hello.get("operator_tools") or ())
    namespace: dict[str, Any] = {
        "__name__": "__main__",
        "__builtins__": builtins,
        "robo": robo,
        "np": numpy,
        "numpy": numpy,
        "math": math,
    }
    sys.stdout = _FrameStream(channel, "stdout")
    sys.stderr = _FrameStream(channel, "stderr")

    while True:
        message = read_frame(channel.fd_in)
        if message is None:
            return 0
        if message.get("t") != "run":
            continue  # a late reply to a call the cell no longer waits for
        cell = int(message.get("cell", 0))
        done = run_cell(channel, namespace, cell, str(message.get("source", "")),
                        str(message.get("filename", f"<cell {cell}>")))
        if in_pid_namespace:
            done["killed_processes"] = end_cell_processes()   # what a cell starts ends with it
        channel.send(done)


if __name__ == "__main__":
    sys.exit(main())
