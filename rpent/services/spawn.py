"""Spawn a child process that dies with its parent from the moment it exists (Linux), for trio code.

``trio.lowlevel.open_process`` forks in a worker thread, and Linux delivers ``PR_SET_PDEATHSIG`` when
the *thread* that forked the child ends (prctl(2): "the parent thread"), not the process; trio's idle
worker threads end after a few seconds, which would kill a healthy service. ``open_child`` therefore
forks on the calling (trio) thread, which lives as long as the trio run that owns the child, and
the child asks for ``death_signal`` (default SIGTERM) before it runs a single line of its program:
if the owner is SIGKILLed while the child is still importing (an env server needs 30-45 s before it
serves, and only then does its ``--parent-watch`` thread run), the child still ends. SIGTERM, not
SIGKILL, so a server that is already serving stops cleanly (``rpent.rpc.cli`` handles SIGTERM, then
ends the rest of its process group). The kernel sends the signal when the forking *thread* exits: when
the owner is SIGKILLed that can come before its other threads are gone (``getppid()`` still names it
and the child's stdin pipe is still open), so the child must act on the signal alone.

The child leads its own process group (``start_new_session``), as the supervisor's teardown expects.
Off Linux (no ``prctl``) the child is spawned the same way without the death signal.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

import trio

__all__ = ["Child", "open_child", "PR_SET_PDEATHSIG"]

#: ``PR_SET_PDEATHSIG`` from <linux/prctl.h>.
PR_SET_PDEATHSIG = 1

try:  # loaded before any fork: the child only calls the function
    _prctl = ctypes.CDLL(None, use_errno=True).prctl
except (OSError, AttributeError):  # pragma: no cover - not Linux
    _prctl = None


def _death_signal_preexec(parent_pid: int, sig: int):
    def preexec() -> None:  # runs in the child between fork and exec
        if _prctl is None:
            return
        _prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
        if os.getppid() != parent_pid:  # the parent died before the prctl: nobody will signal us
            os._exit(128 + int(sig))

    return preexec


class Child:
    """A child started by ``open_child``: ``pid``, ``stdin``/``stdout`` trio streams (or None),
    ``returncode`` (None while it runs; negative = killed by that signal)."""

    def __init__(self, popen: subprocess.Popen, stdin: trio.lowlevel.FdStream | None,
                 stdout: trio.lowlevel.FdStream | None) -> None:
        self._popen = popen
        self.pid = popen.pid
        self.stdin = stdin
        self.stdout = stdout

    @property
    def returncode(self) -> int | None:
        """Exit status once reaped (``poll``/``wait``), else None."""
        return self._popen.returncode

    def poll(self) -> int | None:
        """Reap the child if it has exited; its exit status or None."""
        return self._popen.poll()

    async def wait(self) -> int:
        """Wait (cancellable) until the child exits; its exit status. Uses a pidfd where the kernel has one."""
        if self._popen.returncode is not None:
            return self._popen.returncode
        try:
            pidfd = os.pidfd_open(self.pid)
        except (AttributeError, OSError):
            pidfd = None
        if pidfd is None:
            while self._popen.poll() is None:
                await trio.sleep(0.05)
            return self._popen.returncode
        try:
            while self._popen.poll() is None:
                await trio.lowlevel.wait_readable(pidfd)
        finally:
            os.close(pidfd)
        return self._popen.returncode


async def open_child(argv: Sequence[str], *, stdin: int | None = subprocess.PIPE, stdout: int | None = subprocess.PIPE,
                     stderr: int | None = subprocess.STDOUT, env: Mapping[str, str] | None = None,
                     cwd: str | Path | None = None, death_signal: int = signal.SIGTERM) -> Child:
    """Start ``argv`` (no shell) in its own process group, on this thread, with ``death_signal`` set
    for the child (see module docstring); call from the trio thread that owns the child.

    Args:
        stdin / stdout: ``subprocess.PIPE`` (a trio ``FdStream`` on ``Child``), ``subprocess.DEVNULL`` or None.
        stderr: ``subprocess.STDOUT`` (merged into stdout), ``subprocess.DEVNULL`` or None.
        env: the child's whole environment (default: this process's).
        death_signal: signal the child gets when this thread's process dies (0 = none).

    Raises:
        OSError (FileNotFoundError, PermissionError ...): the program cannot be executed.
    """
    await trio.lowlevel.checkpoint()
    close_after: list[int] = []
    ours: dict[str, int] = {}
    try:
        child_stdin, child_stdout = stdin, stdout
        if stdin == subprocess.PIPE:
            r, w = os.pipe()
            child_stdin, ours["stdin"] = r, w
            close_after.append(r)
        if stdout == subprocess.PIPE:
            r, w = os.pipe()
            child_stdout, ours["stdout"] = w, r
            close_after.append(w)
        child_stderr = child_stdout if stderr == subprocess.STDOUT and stdout is not None else stderr
        preexec = _death_signal_preexec(os.getpid(), death_signal) if death_signal else None
        popen = subprocess.Popen(list(map(str, argv)), stdin=child_stdin, stdout=child_stdout, stderr=child_stderr,
                                 env=dict(env) if env is not None else None, cwd=None if cwd is None else str(cwd),
                                 start_new_session=True, close_fds=True, preexec_fn=preexec)
    except BaseException:
        for fd in ours.values():
            os.close(fd)
        raise
    finally:
        for fd in close_after:
            os.close(fd)
    return Child(popen, trio.lowlevel.FdStream(ours["stdin"]) if "stdin" in ours else None,
                 trio.lowlevel.FdStream(ours["stdout"]) if "stdout" in ours else None)
