"""Executor protocol of ``rpent-batch``: how one cell's run is started somewhere and how its end
comes back. The batch runner only talks to an :class:`Executor`; which one runs the cells (the
local subprocess executor below, a distributed engine such as Ray) is chosen at the CLI edge
through :func:`create_executor` / :func:`register_executor`, never by branches in the runner
(``rpent-batch --executor NAME``; a module ``rpent/batch/NAME_executor.py`` that calls
``register_executor("NAME", factory)`` at import is found without further registration).

Contract (stable; later changes are additive only):

* The runner builds one :class:`CellJob` per attempt of a cell: the complete ``argv`` of a normal
  ``rpent`` run (its own env server, its own run directory ``run_dir`` passed as
  ``--output-dir``), extra environment variables, the path of a log file for the process's
  stdout/stderr and an optional wall-clock limit.
* ``executor.submit(job)`` starts it without blocking (at most ``executor.slots`` jobs run at
  once; the runner never submits more). ``executor.wait(timeout)`` blocks until at least one job
  has ended (or ``timeout`` s passed) and returns the :class:`CellOutcome` of every job that
  ended since the last call, each exactly once.
* The executor does not read run records and does not decide success: it reports the process's
  exit code and, separately, ``infra_error`` when the *executor* failed the job (could not start
  it, killed it for its time limit, lost its worker / node, killed by a signal). The runner
  classifies the cell from the run record (``transcript_<tag>.json``) and the exit code.
* ``executor.shutdown(cancel=True)`` stops every running job (SIGTERM, grace, SIGKILL for the
  local executor: ``rpent`` then writes a record marked cancelled) and releases resources.
  Executors are context managers (``__exit__`` calls ``shutdown(cancel=True)``).

Exit codes of ``rpent`` (``rpent.run.config``): 0 success, 1 task not solved, 2 error.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol, runtime_checkable

__all__ = ["CellJob", "CellOutcome", "Executor", "LocalExecutor", "register_executor", "create_executor",
           "executor_names", "node_load"]


@dataclass(frozen=True)
class CellJob:
    """One attempt of one cell, as a process to run.

    Attributes:
        key: the cell key (``<arm>/<suite>/t<task>/s<seed>/r<repeat>``, see ``rpent.batch.matrix``).
        argv: full command line, e.g. ``[sys.executable, "-m", "rpent.cli.main", "--suite", ...,
            "--output-dir", run_dir]``.
        run_dir: the run directory this attempt writes (absolute path; never reused by another attempt).
        env: extra environment variables laid over the executor's environment (str -> str).
        log_path: file that receives the process's stdout and stderr (absolute path; created).
        attempt: 1-based attempt number of this cell.
        arm: the arm name (also the first part of ``key``).
        timeout_s: wall-clock limit in seconds (None: no limit); exceeding it is an infra error.
        cwd: working directory of the process (None: the executor's).
    """

    key: str
    argv: list[str]
    run_dir: str
    env: dict[str, str] = field(default_factory=dict)
    log_path: str | None = None
    attempt: int = 1
    arm: str = ""
    timeout_s: float | None = None
    cwd: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-able dict."""
        return asdict(self)


@dataclass(frozen=True)
class CellOutcome:
    """How one :class:`CellJob` ended, as the executor saw it.

    Attributes:
        key: the job's cell key.
        exit_code: the process's exit status (0/1/2 for ``rpent``; negative: killed by that
            signal; None: never started or lost).
        run_dir: the job's run directory.
        infra_error: one line when the executor itself failed the job (start failure, time
            limit, lost worker, signal), else None. Task failures are never infra errors.
        wall_s: wall-clock seconds from start to end of the process.
        attempt: the job's attempt number.
        arm: the job's arm.
        where: where it ran (host name; an executor may add a worker id), for the record.
        node_load: the load of the node it ran on when it ended (:func:`node_load`), or None.
    """

    key: str
    exit_code: int | None
    run_dir: str
    infra_error: str | None = None
    wall_s: float = 0.0
    attempt: int = 1
    arm: str = ""
    where: str = ""
    node_load: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-able dict."""
        return asdict(self)


def node_load() -> dict[str, Any]:
    """This machine's load: ``{"host", "load": [1, 5, 15-minute load averages], "cpus": CPU count}``
    (``os.getloadavg``, ``os.cpu_count``); the runner shows it per node while a batch runs."""
    try:
        load = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        load = None
    return {"host": os.uname().nodename, "load": load, "cpus": os.cpu_count()}


@runtime_checkable
class Executor(Protocol):
    """What the batch runner calls (see the module docstring for the contract).

    Attributes:
        slots: how many jobs may run at once (the runner's ``--parallel``).
        name: short name recorded in the provenance manifest (``local``, ``ray``, ...).
    """

    slots: int
    name: str

    def submit(self, job: CellJob) -> None:
        """Start ``job`` without blocking. Raises RuntimeError when all slots are busy."""

    def wait(self, timeout: float | None = None) -> list[CellOutcome]:
        """Block until >= 1 job ended or ``timeout`` s passed; return the newly ended jobs' outcomes."""

    def running(self) -> list[str]:
        """Keys of the jobs still running."""

    def shutdown(self, cancel: bool = True) -> None:
        """Stop running jobs (``cancel``) or wait for them, then release resources. Idempotent."""

    def __enter__(self) -> "Executor": ...

    def __exit__(self, *exc) -> None: ...


# ---------------------------------------------------------------------------------------- registry
_FACTORIES: dict[str, Callable[..., Executor]] = {}


def register_executor(name: str, factory: Callable[..., Executor]) -> None:
    """Make ``factory(slots=N, **options) -> Executor`` selectable as ``rpent-batch --executor NAME``."""
    _FACTORIES[name] = factory


def executor_names() -> list[str]:
    """Registered executor names (``local`` first)."""
    return sorted(_FACTORIES, key=lambda n: (n != "local", n))


def create_executor(name: str, *, slots: int, **options: Any) -> Executor:
    """Build the executor registered as ``name``. A name not registered yet is looked up as the
    module ``rpent.batch.<name>_executor`` (imported lazily, e.g. ``rpent.batch.ray_executor``),
    which registers itself with :func:`register_executor` on import; so heavy engines are only
    imported when chosen.

    Raises:
        ValueError: unknown name (lists the known ones) or ``slots < 1``.
    """
    if slots < 1:
        raise ValueError(f"--parallel must be >= 1, got {slots}")
    if name not in _FACTORIES and name.isidentifier():
        import importlib

        try:
            importlib.import_module(f"rpent.batch.{name}_executor")
        except ModuleNotFoundError as exc:
            if exc.name != f"rpent.batch.{name}_executor":
                raise ValueError(f"executor {name!r} needs {exc.name!r}, which is not installed") from None
    if name not in _FACTORIES:
        raise ValueError(f"unknown executor {name!r}; choose one of {', '.join(executor_names())}")
    return _FACTORIES[name](slots=slots, **options)


# ---------------------------------------------------------------------------------------- local
_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:  # runs in the child between fork and exec
    """Ask Linux to send SIGTERM to this child when the runner dies (even by SIGKILL), so a killed
    runner leaves no orphan run behind; ``rpent`` answers SIGTERM by writing a cancelled record."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    except OSError:
        pass



def stop_process_group(proc: subprocess.Popen, grace_s: float) -> None:
    """Stop a job started with ``start_new_session=True``: SIGTERM its process group, wait
    ``grace_s`` seconds, then SIGKILL the group and wait up to 5 s. A group already gone is fine."""
    for sig, grace in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            continue

class LocalExecutor:
    """Runs each job as a child process of this machine (``subprocess.Popen``), at most ``slots``
    at once, each in its own process group (so its env server goes with it).

    Args:
        slots: maximum concurrent jobs (>= 1).
        stop_grace_s: seconds between SIGTERM and SIGKILL when stopping a job (default 20: an
            ``rpent`` run needs a few seconds to write its record and stop its env server).
        poll_s: how often ``wait`` checks the children (s).
    """

    name = "local"

    def __init__(self, slots: int, *, stop_grace_s: float = 20.0, poll_s: float = 0.1) -> None:
        if slots < 1:
            raise ValueError(f"slots must be >= 1, got {slots}")
        self.slots = slots
        self.stop_grace_s = stop_grace_s
        self.poll_s = poll_s
        self._procs: dict[str, tuple[CellJob, subprocess.Popen | None, float, Any]] = {}
        self._done: list[CellOutcome] = []
        self._lock = threading.Lock()
        self._host = os.uname().nodename

    def submit(self, job: CellJob) -> None:
        """Start ``job`` (see :class:`Executor`). A start failure becomes an outcome, not an exception.

        Raises:
            RuntimeError: all slots busy, or a job with the same key is running.
        """
        with self._lock:
            if len(self._procs) >= self.slots:
                raise RuntimeError(f"all {self.slots} slots are busy; wait() first")
            if job.key in self._procs:
                raise RuntimeError(f"cell {job.key} is already running")
            t0 = time.monotonic()
            log = None
            try:
                if job.log_path:
                    Path(job.log_path).parent.mkdir(parents=True, exist_ok=True)
                    log = open(job.log_path, "ab")  # noqa: SIM115 — closed when the job ends
                env = {**os.environ, **job.env}
                proc = subprocess.Popen(job.argv, env=env, cwd=job.cwd, stdin=subprocess.DEVNULL,
                                        stdout=log if log else subprocess.DEVNULL, stderr=subprocess.STDOUT,
                                        start_new_session=True, preexec_fn=_die_with_parent)
            except OSError as exc:
                if log:
                    log.close()
                self._done.append(CellOutcome(job.key, None, job.run_dir, f"could not start the run: {exc}",
                                              0.0, job.attempt, job.arm, self._host))
                return
            self._procs[job.key] = (job, proc, t0, log)

    def running(self) -> list[str]:
        """Keys of running jobs."""
        with self._lock:
            return list(self._procs)

    def _reap(self) -> None:
        now = time.monotonic()
        for key, (job, proc, t0, log) in list(self._procs.items()):
            rc = proc.poll()
            infra = None
            if rc is None and job.timeout_s is not None and now - t0 > job.timeout_s:
                self._stop(proc)
                rc = proc.returncode
                infra = f"run exceeded its time limit of {job.timeout_s:g} s and was stopped"
            if rc is None:
                continue
            if infra is None and rc < 0:
                infra = f"run process killed by signal {signal.Signals(-rc).name}"
            if log:
                log.close()
            del self._procs[key]
            self._done.append(CellOutcome(key, rc, job.run_dir, infra, round(now - t0, 3), job.attempt, job.arm,
                                          self._host, node_load()))

    def wait(self, timeout: float | None = None) -> list[CellOutcome]:
        """See :class:`Executor`; returns [] on timeout or when nothing runs and nothing ended."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            with self._lock:
                self._reap()
                if self._done or not self._procs:
                    out, self._done = self._done, []
                    return out
            if deadline is not None and time.monotonic() >= deadline:
                return []
            time.sleep(self.poll_s)

    def _stop(self, proc: subprocess.Popen) -> None:
        """SIGTERM the job's process group, wait ``stop_grace_s``, then SIGKILL it."""
        stop_process_group(proc, self.stop_grace_s)

    def shutdown(self, cancel: bool = True) -> None:
        """Stop (``cancel``: SIGTERM to every job at once, ``stop_grace_s``, then SIGKILL) or wait
        for every running job; their outcomes are dropped (their records say cancelled). Idempotent."""
        with self._lock:
            procs = list(self._procs.values())
            self._procs.clear()
        if cancel:
            for sig, grace in ((signal.SIGTERM, self.stop_grace_s), (signal.SIGKILL, 5.0)):
                alive = [p for _j, p, _t, _l in procs if p.poll() is None]
                for proc in alive:
                    try:
                        os.killpg(proc.pid, sig)
                    except ProcessLookupError:
                        pass
                deadline = time.monotonic() + grace
                while any(p.poll() is None for p in alive) and time.monotonic() < deadline:
                    time.sleep(0.1)
        for _job, proc, _t0, log in procs:
            proc.wait()
            if log:
                log.close()

    def __enter__(self) -> "LocalExecutor":
        return self

    def __exit__(self, *exc) -> None:
        self.shutdown(cancel=True)


register_executor("local", lambda *, slots, **options: LocalExecutor(slots, **options))
