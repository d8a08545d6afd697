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

A reader thread turns the worker's frames into a bounded queue (:data:`QUEUE_FRAMES`
frames; when it is full the reader stops reading, so a worker that writes faster than the
parent handles its frames blocks on its pipe). Every frame is checked as
:func:`rpent.policy.frames.read_worker_frame` says, so the parent holds at most
``QUEUE_FRAMES + 2`` decoded worker frames (about 5 MiB each at worst). Two synthetic
messages mark the end of the stream: ``{"t": "_eof"}`` (the worker closed its pipe: it
exited or died) and ``{"t": "_error", "message": ..., "violation": bool}`` (it sent
something that is not a valid frame: a protocol violation, or a pipe that closed mid-frame);
the worker cannot send either (a frame with a type starting with ``_`` is a violation).

The worker's fds 1 and 2 are a pipe the parent copies into ``worker.log``, keeping the first
:data:`MAX_LOG_BYTES` bytes per worker and counting the rest, so a cell writing to fd 1 or 2
cannot fill the disk.
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

from rpent.policy.frames import FrameError, ProtocolViolation, read_worker_frame, write_frame
from rpent.policy.cgroup import CellCgroup, create_cell_cgroup
from rpent.policy.sandbox import WorkerLimits, rlimits


#: Decoded worker frames waiting for the runner (the reader blocks beyond that).
QUEUE_FRAMES = 4
#: Bytes of a worker's fd 1/2 output kept in ``worker.log``.
MAX_LOG_BYTES = 1024 * 1024
#: Seconds the parent waits for the worker to take a frame from its pipe before giving up on it.
SEND_TIMEOUT_S = 10.0


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
        self._queue: queue.Queue[dict[str, Any]] = queue.Queue(maxsize=QUEUE_FRAMES)
        self._closing = threading.Event()
        self._reader: threading.Thread | None = None
        self._log_copier: threading.Thread | None = None
        self._send_lock = threading.Lock()

    # -- lifecycle -----------------------------------------------------------------
    def start(self) -> None:
        """Spawn the worker, apply the limits, complete the handshake.

        Raises:
            WorkerStartError: spawn failed, limits could not be applied, or no ``ready``
                frame came within ``start_timeout_s`` (the message quotes the log tail).
        """
        self.cgroup, self.cgroup_reason = create_cell_cgroup(self.limits.max_processes + 2,
                                                             self.limits.total_memory_bytes, self.limits.cpu_cores)
        config = {
            "scratch": str(self.cwd.resolve()),
            "scratch_bytes": self.limits.scratch_bytes,
            "cgroup_procs": self.cgroup.procs_files if self.cgroup else [],
            "cgroup_cpu_procs": self.cgroup.cpu_procs_file if self.cgroup else None,
            "limits": rlimits(self.limits),
            "max_processes": self.limits.max_processes,
            "read_paths": read_paths(self.python, self.read_paths),
        }
        child_in, parent_out = os.pipe()    # parent -> worker
        parent_in, child_out = os.pipe()    # worker -> parent
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self.cwd.mkdir(parents=True, exist_ok=True)
        try:
            self.proc = subprocess.Popen(
                [self.python, "-s", "-P", "-c", BOOTSTRAP, PACKAGE_DIR,
                 "--in-fd", str(child_in), "--out-fd", str(child_out), "--sandbox", json.dumps(config),
                 *([] if self.namespaces else ["--no-namespaces"])],
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
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
        assert self.proc.stdout is not None
        self._log_copier = threading.Thread(target=_copy_log, args=(self.proc.stdout, self.log_path),
                                            name=f"policy-worker-log-{self.proc.pid}", daemon=True)
        self._log_copier.start()
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
        layers = self.isolation.setdefault("layers", {})
        notes = self.isolation.setdefault("notes", [])
        if self.cgroup is None:
            layer = layers.setdefault("cgroup", {"on": False, "detail": ""})
            layer["detail"] = self.cgroup_reason or layer.get("detail", "")
            notes[:] = [n for n in notes if not n.startswith("cgroup:")]
            notes.insert(0, f"cgroup: off: {self.cgroup_reason}")
        # The quota binds only if the worker is in its group: v1's separate cpu group (the worker's
        # own cpu_quota report), or v2's one group.
        worker_cpu = layers.pop("cpu_quota", None)
        notes[:] = [n for n in notes if not n.startswith("cpu_quota:")]
        if self.cgroup is not None and self.cgroup.cpu_procs_file:
            joined, why_not = bool(worker_cpu and worker_cpu.get("on")), (worker_cpu or {}).get("detail", "")
        else:
            joined, why_not = bool(layers.get("cgroup", {}).get("on")), layers.get("cgroup", {}).get("detail", "")
        if self.cgroup is not None and self.cgroup.cpu_cores is not None and joined:
            cpu = {"on": True, "detail": self.cgroup.cpu_note}
        elif self.cgroup is not None and self.cgroup.cpu_cores is not None:
            cpu = {"on": False, "detail": f"{self.cgroup.cpu_note} is set, but the worker is not in that group "
                                          f"({why_not}); RLIMIT_CPU bounds each process's CPU seconds only"}
            notes.append(f"cpu_quota: off: {cpu['detail']}")
        else:
            why = self.cgroup.cpu_note if self.cgroup is not None else f"no cgroup ({self.cgroup_reason})"
            cpu = {"on": False, "detail": f"{why}; RLIMIT_CPU bounds each process's CPU seconds only"}
            notes.append(f"cpu_quota: off: {cpu['detail']}")
        self.isolation["layers"] = {"cgroup": layers.pop("cgroup", {"on": False, "detail": ""}), "cpu_quota": cpu,
                                    **layers}
        if not self.send({"t": "hello", "specs": self.specs, "operator_tools": self.operator_tools}):
            self.kill()
            raise WorkerStartError(f"the code-policy worker exited during its handshake; see {self.log_path}")

    def _put(self, message: dict[str, Any]) -> bool:
        """Queue one message, waiting while the queue is full (back-pressure); False once the
        worker is being closed."""
        while not self._closing.is_set():
            try:
                self._queue.put(message, timeout=0.2)
                return True
            except queue.Full:
                continue
        return False

    def _read_loop(self) -> None:
        assert self._from_worker is not None
        first = True
        try:
            while True:
                message = read_worker_frame(self._from_worker)
                if message is None:
                    self._put({"t": "_eof"})
                    return
                if (message["t"] == "ready") != first:
                    raise ProtocolViolation("the first frame must be 'ready', and only the first (message type)")
                first = False
                if not self._put(message):
                    return
        except ProtocolViolation as exc:
            self._put({"t": "_error", "message": f"protocol violation: {exc}", "violation": True})
        except (FrameError, OSError) as exc:
            self._put({"t": "_error", "message": str(exc), "violation": False})

    # -- messages ------------------------------------------------------------------
    def send(self, message: dict[str, Any], timeout_s: float | None = SEND_TIMEOUT_S) -> bool:
        """Send one frame (lenient encoding: odd values become their repr). Returns
        False when the worker is gone (broken pipe) or took nothing from its pipe for
        ``timeout_s`` seconds (a worker that does not read its replies; the stream is
        unusable then and the worker must be killed)."""
        if self._to_worker is None:
            return False
        try:
            with self._send_lock:
                write_frame(self._to_worker, message, lenient=True, timeout_s=timeout_s)
            return True
        except (BrokenPipeError, OSError):
            return False

    def pending(self) -> list[dict[str, Any]]:
        """Take every message already queued (without waiting)."""
        out = []
        while True:
            try:
                out.append(self._queue.get_nowait())
            except queue.Empty:
                return out

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
        self._closing.set()
        with self._send_lock:
            if self._to_worker is not None:
                os.close(self._to_worker)
                self._to_worker = None
        if self._reader is not None:
            self._reader.join(timeout=5.0)
        self.pending()
        if self._log_copier is not None:
            self._log_copier.join(timeout=5.0)
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



def _copy_log(source: Any, path: Path) -> None:
    """Append the worker's fd 1/2 output to ``path`` up to :data:`MAX_LOG_BYTES`, then count
    and drop the rest (draining the pipe so the worker never blocks on it)."""
    kept = dropped = 0
    try:
        with open(path, "ab") as log:
            fd = source.fileno()
            while True:
                chunk = os.read(fd, 65536)
                if not chunk:
                    break
                room = MAX_LOG_BYTES - kept
                if room > 0:
                    log.write(chunk[:room])
                    log.flush()
                    kept += min(room, len(chunk))
                dropped += max(0, len(chunk) - max(room, 0))
            if dropped:
                log.write(f"\n[worker.log: {dropped} more bytes of this worker's output dropped "
                          f"(kept {MAX_LOG_BYTES})]\n".encode())
    except (OSError, ValueError):
        pass
    finally:
        try:
            source.close()
        except OSError:
            pass


#: The ``rpent`` package directory the worker imports (this process's own), and nothing above it.
PACKAGE_DIR = str(Path(__file__).resolve().parent.parent)

#: What ``python -s -P -c`` runs in the worker: import ``rpent`` from :data:`PACKAGE_DIR` (its first
#: argument) by location, so the worker runs the parent's code without ``PYTHONPATH`` and without
#: read access to the directory above the package, then run :func:`rpent.policy.worker.main`.
BOOTSTRAP = (
    "import importlib.util, os, sys\n"
    "pkg = sys.argv.pop(1)\n"
    "spec = importlib.util.spec_from_file_location('rpent', os.path.join(pkg, '__init__.py'), "
    "submodule_search_locations=[pkg])\n"
    "module = importlib.util.module_from_spec(spec)\n"
    "sys.modules['rpent'] = module\n"
    "spec.loader.exec_module(module)\n"
    "from rpent.policy.worker import main\n"
    "sys.exit(main(sys.argv[1:]))\n"
)


def read_paths(python: str, extra: list[str] | None = None) -> list[str]:
    """What a worker may read besides :data:`rpent.policy.isolation.SYSTEM_READ_PATHS`: the
    interpreter's installation and virtual environment (standard library, site-packages),
    the ``rpent`` package directory itself, plus ``extra``.

    Never this process's working directory or ``sys.path`` (``python -m`` puts the working
    directory first there, a script's directory comes first for a script), nor the directory
    holding the ``rpent`` package (a source checkout keeps its own files there)."""
    import sysconfig

    cwd = os.path.realpath(os.getcwd())
    exe_dir = os.path.dirname(os.path.abspath(python))
    candidates = [os.path.dirname(os.path.dirname(os.path.realpath(python))), os.path.dirname(exe_dir), PACKAGE_DIR]
    if os.path.realpath(python) == os.path.realpath(sys.executable):
        candidates += [sys.prefix, sys.base_prefix, sys.exec_prefix]
        candidates += [p for k, p in sysconfig.get_paths().items() if k in ("stdlib", "platstdlib", "purelib", "platlib")]
        candidates += [p for p in sys.path if "-packages" in os.path.basename(p)]
    candidates += list(extra or [])
    paths: list[str] = []
    for p in candidates:
        if not p:
            continue
        for q in (os.path.abspath(p), os.path.realpath(p)):
            if q in paths or q == "/" or not os.path.exists(q):
                continue
            if q != PACKAGE_DIR and (q == cwd or (cwd.startswith(q.rstrip("/") + "/") and not _is_installation(q))):
                continue  # never the working directory, nor a directory above it
            paths.append(q)
    return paths


def _is_installation(path: str) -> bool:
    """A directory that is a Python installation or virtual environment (its ``lib/python3*``)."""
    lib = os.path.join(path, "lib")
    try:
        return any(name.startswith("python3") for name in os.listdir(lib))
    except OSError:
        return False


def _children(pid: int) -> list[int]:
    """Pids of the children of ``pid`` (its main thread's), from ``/proc``."""
    with open(f"/proc/{pid}/task/{pid}/children") as f:
        return [int(x) for x in f.read().split()]
