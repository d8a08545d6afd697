"""Parent-side handle of one cell worker process: spawn, frames in and out, kill.

The worker (``python -s -m rpent.policy.worker``) runs in its own session and process
group (``start_new_session``: a Ctrl-C in the operator's terminal does not reach it), with
the environment and limits of :mod:`rpent.policy.sandbox`, cwd = its scratch directory,
stdin = /dev/null and fds 1/2 appended to ``<output_dir>/code_policy/worker.log``. Before
the spawn the parent creates a pids + memory cgroup for it where the machine allows
(:mod:`rpent.policy.cgroup`); the worker then builds the rest of its sandbox itself
(:mod:`rpent.policy.isolation`). :meth:`WorkerProcess.kill` SIGKILLs the process group
(the stub and the PID namespace's init: the kernel then kills every process of the
namespace) and every process left in the cgroup, and removes the cgroup.

A reader thread turns the worker's frames into a queue. Two synthetic messages mark the
end of the stream: ``{"t": "_eof"}`` (the worker closed its pipe: it exited or died) and
``{"t": "_error", "message": ...}`` (it sent something that is not a valid frame).
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from rpent.policy.frames import FrameError, read_frame, write_frame
from rpent.policy.cgroup import CellCgroup, create_cell_cgroup
from rpent.policy.sandbox import WorkerLimits, rlimits


class WorkerStartError(RuntimeError):
    """The worker process did not start or did not complete its handshake in time."""


class WorkerProcess:
    """One running worker (see the module docstring).

    Args:
        cwd: working directory and ``HOME`` of the worker: its scratch directory, the only
            one it can write.
        log_path: file the worker's fds 1 and 2 are appended to.
        env: the complete environment (from :func:`rpent.policy.sandbox.worker_env`).
        limits: resource limits applied with ``prlimit`` before any cell is sent.
        specs: tool specs as plain dicts ``{name, description, input_schema, readonly}``.
        operator_tools: names the worker exposes only as refusing stubs.
        python: interpreter to run (default: the current one).
        start_timeout_s: seconds to wait for the worker's ``ready`` frame.
        namespaces: let the worker enter user, mount, PID, network and IPC namespaces
            (:mod:`rpent.policy.isolation`).
        read_paths: directories the worker may read besides the interpreter, its
            ``sys.path`` and the system paths of :data:`rpent.policy.isolation.SYSTEM_READ_PATHS`
            (e.g. the run's output directory).
    """

    def __init__(self, *, cwd: Path, log_path: Path, env: dict[str, str], limits: WorkerLimits,
                 specs: list[dict[str, Any]], operator_tools: list[str],
                 python: str = sys.executable, start_timeout_s: float = 30.0, namespaces: bool = True,
                 read_paths: list[str] | None = None):
        self.cwd = Path(cwd)
        self.log_path = Path(log_path)
        self.env = env
        self.limits = limits
        self.specs = specs
        self.operator_tools = operator_tools
        self.python = python
        self.start_timeout_s = start_timeout_s
        self.namespaces = namespaces
        self.read_paths = list(read_paths or [])
        self.cgroup: CellCgroup | None = None
        #: why there is no cgroup (None when there is one)
        self.cgroup_reason: str | None = None
        self._worker_pidfd: int | None = None
        self.proc: subprocess.Popen | None = None
        self.applied_limits: dict[str, int] = {}
        #: what the worker reported of its own isolation (rpent.policy.isolation)
        self.isolation: dict[str, Any] = {}
        self._to_worker: int | None = None
        self._from_worker: int | None = None
        self._queue: queue.Queue[dict[str, Any]] = queue.Queue()
        self._reader: threading.Thread | None = None
        self._send_lock = threading.Lock()

    # -- lifecycle -----------------------------------------------------------------
    def start(self) -> None:
        """Spawn the worker, apply the limits, complete the handshake.

        Raises:
            WorkerStartError: spawn failed, limits could not be applied, or no ``ready``
                frame came within ``start_timeout_s`` (the message quotes the log tail).
        """
        self.cgroup, self.cgroup_reason = create_cell_cgroup(self.limits.max_processes + 2,
                                                             self.limits.total_memory_bytes)
        config = {
            "scratch": str(self.cwd.resolve()),
            "cgroup_procs": self.cgroup.procs_files if self.cgroup else [],
            "limits": rlimits(self.limits),
            "max_processes": self.limits.max_processes,
            "read_paths": _read_paths(self.python, self.env, self.read_paths),
        }
        child_in, parent_out = os.pipe()    # parent -> worker
        parent_in, child_out = os.pipe()    # worker -> parent
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self.cwd.mkdir(parents=True, exist_ok=True)
        try:
            with open(self.log_path, "ab") as log:
                self.proc = subprocess.Popen(
                    [self.python, "-s", "-m", "rpent.policy.worker",
                     "--in-fd", str(child_in), "--out-fd", str(child_out), "--sandbox", json.dumps(config),
                     *([] if self.namespaces else ["--no-namespaces"])],
                    stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                    cwd=str(self.cwd), env=self.env, pass_fds=(child_in, child_out),
                    close_fds=True, start_new_session=True,
                )
        except OSError as exc:
            for fd in (child_in, parent_out, parent_in, child_out):
                os.close(fd)
            self._remove_cgroup()
            raise WorkerStartError(f"could not start the code-policy worker with {self.python}: {exc}") from exc
        os.close(child_in)
        os.close(child_out)
        self._to_worker, self._from_worker = parent_out, parent_in
        self._reader = threading.Thread(target=self._read_loop, name=f"policy-worker-{self.proc.pid}",
                                        daemon=True)
        self._reader.start()
        ready = self.get(self.start_timeout_s)
        if ready is None or ready.get("t") != "ready":
            self.kill()
            raise WorkerStartError(
                f"the code-policy worker did not become ready within {self.start_timeout_s:.0f}s "
                f"(got {ready!r:.120}); see {self.log_path}: {self.log_tail()}"
            )
        self._pin_worker_pid()
        self.isolation = dict(ready.get("sandbox") or {})
        self.applied_limits = {str(k): int(v) for k, v in (self.isolation.pop("limits", None) or {}).items()}
        if self.cgroup is None:
            layer = self.isolation.setdefault("layers", {}).setdefault("cgroup", {"on": False, "detail": ""})
            layer["detail"] = self.cgroup_reason or layer.get("detail", "")
            self.isolation["notes"] = [n for n in self.isolation.get("notes", []) if not n.startswith("cgroup:")]
            self.isolation["notes"].insert(0, f"cgroup: off: {self.cgroup_reason}")
        if not self.send({"t": "hello", "specs": self.specs, "operator_tools": self.operator_tools}):
            self.kill()
            raise WorkerStartError(f"the code-policy worker exited during its handshake; see {self.log_path}")

    def _read_loop(self) -> None:
        assert self._from_worker is not None
        try:
            while True:
                message = read_frame(self._from_worker)
                if message is None:
                    self._queue.put({"t": "_eof"})
                    return
                self._queue.put(message)
        except (FrameError, OSError) as exc:
            self._queue.put({"t": "_error", "message": str(exc)})

    # -- messages ------------------------------------------------------------------
    def send(self, message: dict[str, Any]) -> bool:
        """Send one frame (lenient encoding: odd values become their repr). Returns
        False when the worker is gone (broken pipe)."""
        if self._to_worker is None:
            return False
        try:
            with self._send_lock:
                write_frame(self._to_worker, message, lenient=True)
            return True
        except (BrokenPipeError, OSError):
            return False

    def get(self, timeout: float) -> dict[str, Any] | None:
        """Next message from the worker, or None after ``timeout`` seconds."""
        try:
            return self._queue.get(timeout=max(0.0, timeout))
        except queue.Empty:
            return None

    def _pin_worker_pid(self) -> None:
        """In a PID namespace the process that runs cells is the stub's grandchild (stub -> init
        -> worker): find it through ``/proc/<pid>/task/<pid>/children`` and hold a pidfd to it, so
        :meth:`signal` reaches it in one hop (and never a recycled pid). Best effort: without it,
        signals go to the stub, which forwards them."""
        self._worker_pidfd = None
        if self.proc is None:
            return
        try:
            (init,) = _children(self.proc.pid)
            (worker,) = _children(init)
            self._worker_pidfd = os.pidfd_open(worker)
        except (OSError, ValueError, AttributeError):
            self._worker_pidfd = None

    def signal(self, signum: int) -> None:
        """Send ``signum`` to the process that runs the cells (not its group), if alive."""
        if self.proc is not None and self.proc.poll() is None:
            fd = self._worker_pidfd
            if fd is not None:
                try:
                    signal.pidfd_send_signal(fd, signum)
                    return
                except OSError:
                    pass
            try:
                self.proc.send_signal(signum)
            except ProcessLookupError:
                pass

    @property
    def alive(self) -> bool:
        """The worker process has not exited."""
        return self.proc is not None and self.proc.poll() is None

    def wait_exit(self, timeout: float) -> int | None:
        """Wait up to ``timeout`` s for the worker to exit; its return code (negative =
        killed by that signal) or None if still running."""
        if self.proc is None:
            return None
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def kill(self) -> int | None:
        """SIGKILL the worker's whole process group (and with its PID namespace's init,
        every process of the cell) and whatever is left in its cgroup, reap it, close the
        pipes, remove the cgroup. Returns the worker's return code."""
        code = None
        if self.proc is not None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            code = self.wait_exit(10.0)
        self._remove_cgroup()
        self._close_pidfd()
        self._close_pipes()
        return code

    def _close_pidfd(self) -> None:
        fd, self._worker_pidfd = self._worker_pidfd, None
        if fd is not None:
            os.close(fd)

    def _remove_cgroup(self) -> None:
        if self.cgroup is not None:
            self.cgroup.remove()
            self.cgroup = None

    def close(self, grace_s: float = 2.0) -> int | None:
        """Ask the worker to exit (close its command pipe), wait ``grace_s``, then kill
        its process group (also reaping anything a cell left behind)."""
        if self._to_worker is not None:
            with self._send_lock:
                os.close(self._to_worker)
                self._to_worker = None
        self.wait_exit(grace_s)
        return self.kill()

    def _close_pipes(self) -> None:
        with self._send_lock:
            if self._to_worker is not None:
                os.close(self._to_worker)
                self._to_worker = None
        if self._reader is not None:
            self._reader.join(timeout=5.0)
        if self._from_worker is not None and (self._reader is None or not self._reader.is_alive()):
            os.close(self._from_worker)
            self._from_worker = None

    def log_tail(self, n_chars: int = 1500) -> str:
        """The last ``n_chars`` characters of the worker log ("" when unreadable)."""
        try:
            data = self.log_path.read_bytes()[-n_chars:]
        except OSError:
            return ""
        return data.decode("utf-8", "replace")

    def describe_exit(self, code: int | None) -> str:
        """Words for a return code: ``exit code 1`` / ``killed by SIGKILL`` / ``still running``."""
        if code is None:
            return "still running"
        if code < 0:
            try:
                return f"killed by {signal.Signals(-code).name}"
            except ValueError:
                return f"killed by signal {-code}"
        return f"exit code {code}"



def _read_paths(python: str, env: dict[str, str], extra: list[str]) -> list[str]:
    """Directories a worker must be able to read: the interpreter's installation and
    virtual environment, this process's ``sys.path`` (site-packages and editable installs),
    the worker's ``PYTHONPATH``, plus ``extra``."""
    paths: list[str] = []
    exe = os.path.realpath(python)
    candidates = [os.path.dirname(os.path.dirname(exe)), os.path.dirname(os.path.dirname(os.path.abspath(python))),
                  sys.prefix, sys.base_prefix, sys.exec_prefix, *sys.path,
                  *env.get("PYTHONPATH", "").split(os.pathsep), *extra]
    for p in candidates:
        if not p:
            continue
        for q in {os.path.abspath(p), os.path.realpath(p)}:
            if os.path.exists(q) and q not in paths and q != "/":
                paths.append(q)
    return paths


def _children(pid: int) -> list[int]:
    """Pids of the children of ``pid`` (its main thread's), from ``/proc``."""
    with open(f"/proc/{pid}/task/{pid}/children") as f:
        return [int(x) for x in f.read().split()]
