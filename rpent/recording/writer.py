"""Ordered background writer for the trajectory record.

Every write of a record (a JSONL line, an observation PNG) is a *job*; jobs run one at a
time, in submission order, on one daemon thread. Ordering is the crash-safety guarantee:
the recorder submits an action's images before the action's line, so by the time a line
referencing ``artifacts/main/000012.png`` is on disk, the PNG is already complete on disk
(written as tmp + rename). A process killed mid-run loses at most the jobs still queued;
it never leaves a line pointing to a missing or half-written file.

The queue is bounded (``max_pending`` jobs): when encoding falls behind, ``submit`` blocks
the caller (back-pressure) instead of growing memory without limit.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable

_STOP = object()


class RecordWriteError(RuntimeError):
    """A record write failed on the writer thread; the record is incomplete from that job on."""


class OrderedWriter:
    """Run write jobs in submission order, on a background thread or inline.

    Args:
        background: ``True`` runs jobs on a daemon thread; ``False`` runs each job inside
            ``submit`` (simplest, slower for the caller).
        max_pending: bound of the job queue (jobs, not bytes); ``submit`` blocks when full.
        name: thread name (shows up in stack dumps).

    Errors: the first exception raised by a job is kept; every later ``submit``/``flush``/
    ``close`` raises :class:`RecordWriteError` naming it, so a broken record is never silent.
    """

    def __init__(self, *, background: bool = True, max_pending: int = 256, name: str = "rpent-record-writer"):
        if max_pending < 1:
            raise ValueError(f"max_pending must be >= 1, got {max_pending}")
        self._background = background
        self._error: BaseException | None = None
        self._closed = False
        self._queue: queue.Queue = queue.Queue(maxsize=max_pending)
        self._thread: threading.Thread | None = None
        if background:
            self._thread = threading.Thread(target=self._run, name=name, daemon=True)
            self._thread.start()

    def _raise_if_failed(self) -> None:
        if self._error is not None:
            raise RecordWriteError(f"trajectory record write failed: {self._error!r}") from self._error

    def submit(self, job: Callable[[], None]) -> None:
        """Queue ``job`` (a no-argument callable) to run after every job submitted before it.

        Raises:
            RecordWriteError: an earlier job failed.
            RuntimeError: the writer is closed.
        """
        self._raise_if_failed()
        if self._closed:
            raise RuntimeError("the trajectory record writer is closed; no more writes are accepted")
        if not self._background:
            try:
                job()
            except BaseException as e:  # keep the first error, as the thread does
                self._error = e
                raise RecordWriteError(f"trajectory record write failed: {e!r}") from e
            return
        self._queue.put(job)

    def _run(self) -> None:
        while True:
            job = self._queue.get()
            try:
                if job is _STOP:
                    return
                if self._error is None:
                    job()
            except BaseException as e:  # noqa: BLE001 - kept and re-raised in the caller's thread
                self._error = e
            finally:
                self._queue.task_done()

    def flush(self) -> None:
        """Block until every job submitted so far has run.

        Raises:
            RecordWriteError: a job failed.
        """
        if self._background and not self._closed:
            self._queue.join()
        self._raise_if_failed()

    def close(self) -> None:
        """Run the remaining jobs, stop the thread (idempotent).

        Raises:
            RecordWriteError: a job failed.
        """
        if not self._closed:
            self._closed = True
            if self._background and self._thread is not None:
                self._queue.put(_STOP)
                self._thread.join()
        self._raise_if_failed()
