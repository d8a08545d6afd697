"""A small pool of daemon worker threads that runs blocking RPC handlers.

Daemon threads (unlike ``concurrent.futures``) never keep a server process alive at exit when a
handler is stuck in C code (MuJoCo stepping, torch inference): SIGTERM/shutdown always ends it.
"""

from __future__ import annotations

import queue
import threading
from typing import Callable


class WorkerPool:
    """Runs submitted callables on daemon threads; grows on demand up to ``max_workers``.

    Args:
        name: thread-name prefix (shows in tracebacks and ``py-spy``).
        max_workers: upper bound on threads; further jobs queue until one is idle.
    """

    def __init__(self, name: str, max_workers: int = 64) -> None:
        self._name = name
        self._max = max_workers
        self._jobs: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads = 0
        self._idle = 0
        self._closed = False

    def submit(self, job: Callable[[], None]) -> None:
        """Queue ``job`` (no arguments, return value ignored; it must handle its own errors)."""
        with self._lock:
            if self._closed:
                raise RuntimeError(f"worker pool {self._name} is closed")
            spawn = self._idle == 0 and self._threads < self._max
            if spawn:
                self._threads += 1
            else:
                self._idle -= 1 if self._idle else 0
        self._jobs.put(job)
        if spawn:
            threading.Thread(target=self._run, name=f"{self._name}-{self._threads}", daemon=True).start()

    def _run(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            try:
                job()
            except BaseException:  # noqa: BLE001 - a job must never kill its worker
                pass
            with self._lock:
                self._idle += 1

    def close(self) -> None:
        """Stop idle workers; running jobs finish on their own (threads are daemons)."""
        with self._lock:
            self._closed = True
            n = self._threads
        for _ in range(n):
            self._jobs.put(None)
