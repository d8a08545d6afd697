"""Supervised batch subprocess (e.g. ``rpent-flywheel``) run from a trio task.

Spawn recipe from Textual's guest-mode notes (verified there), through
``rpent.services.spawn.open_child`` (the child dies with this process, even a SIGKILLed one), with
``stdin=DEVNULL`` (a child must not steal Textual's keystrokes), ``stdout=PIPE`` and
``stderr=STDOUT`` (Textual draws on the terminal; a child must never inherit fd 1/2), and
``start_new_session=True`` so the whole process group can be signalled. Cancelling the task sends
SIGTERM to the group, waits ``grace_s``, then SIGKILL; after a normal exit the group is still
signalled so no grandchild outlives the job. Every output line is appended to ``log_path``.

Long-running RPC services are not started here: they go through ``rpent.services.Supervisor``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import trio

from rpent.services.spawn import Child, open_child

from .batching import LineSplitter

__all__ = ["ProcessResult", "run_supervised", "kill_group"]


@dataclass
class ProcessResult:
    """Outcome of ``run_supervised``: exit status (negative = killed by that signal), pid, seconds, last lines."""

    returncode: int | None
    pid: int
    elapsed_s: float
    cancelled: bool = False
    tail: list[str] = field(default_factory=list)


async def kill_group(proc: trio.Process, grace_s: float) -> None:
    """SIGTERM the process group of ``proc``, wait up to ``grace_s`` seconds, then SIGKILL it.

    ``proc`` is a ``trio.Process`` or an ``rpent.services.spawn.Child``; tolerates a group that is already gone.
    """
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    with trio.move_on_after(grace_s):
        await proc.wait()
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


async def run_supervised(argv: Sequence[str], *, on_lines: Callable[[list[str]], None] | None = None,
                         log_path: str | Path | None = None, env: dict[str, str] | None = None,
                         cwd: str | Path | None = None, grace_s: float = 3.0,
                         on_started: Callable[[int], None] | None = None, tail_lines: int = 50) -> ProcessResult:
    """Run ``argv`` to completion under supervision; return its ``ProcessResult``.

    Args:
        argv: program and arguments (no shell).
        on_lines: receives each chunk of complete output lines (stdout and stderr merged), in order.
        log_path: file the output lines are appended to (created with its parents).
        env: extra environment variables (added to ``os.environ``; ``PYTHONUNBUFFERED=1`` is set).
        cwd: working directory.
        grace_s: seconds between SIGTERM and SIGKILL when cancelled.
        on_started: called with the child's pid once it is running.
        tail_lines: how many last output lines ``ProcessResult.tail`` keeps.

    Cancellation (e.g. the UI's stop key) stops the whole process group and re-raises ``trio.Cancelled``.

    Raises:
        FileNotFoundError / PermissionError: the program cannot be executed (message names it).
    """
    if not argv:
        raise ValueError("run_supervised needs a non-empty argv, e.g. ['rpent-flywheel', '--help']")
    full_env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
    log_fh = None
    if log_path is not None:
        Path(log_path).parent.mkdir(parents=True, exist_ok=True)
        log_fh = open(log_path, "a", encoding="utf-8")
    splitter = LineSplitter()
    tail: list[str] = []
    started = time.monotonic()

    def emit(lines: list[str]) -> None:
        if not lines:
            return
        if log_fh is not None:
            log_fh.write("".join(line + "\n" for line in lines))
            log_fh.flush()
        tail.extend(lines)
        del tail[:-tail_lines]
        if on_lines is not None:
            on_lines(lines)

    proc: Child | None = None
    try:
        try:
            # forked on this thread with PR_SET_PDEATHSIG: the job dies with the process that runs it
            # (the session process, or rpent-tui), even when that one is SIGKILLed
            proc = await open_child(list(map(str, argv)), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, env=full_env, cwd=cwd)
        except (FileNotFoundError, PermissionError) as err:
            raise type(err)(f"cannot execute {argv[0]!r}: {getattr(err, 'strerror', None) or err}; "
                            "is it installed and on PATH?") from None
        if on_started is not None:
            on_started(proc.pid)
        assert proc.stdout is not None
        try:
            async for chunk in proc.stdout:
                emit(splitter.feed(chunk))
            emit(splitter.close())
            await proc.wait()
        except BaseException:
            with trio.CancelScope(shield=True):
                await kill_group(proc, grace_s)
            raise
        finally:
            proc.stdout.close()
        return ProcessResult(proc.returncode, proc.pid, time.monotonic() - started, tail=list(tail))
    finally:
        if proc is not None:
            try:  # reap grandchildren left in the group after a normal exit as well
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        if log_fh is not None:
            log_fh.close()
