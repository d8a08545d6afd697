"""Server-side dynamic batching: concurrent requests from several clients share one model call.

Handler threads call :meth:`DynamicBatcher.submit`; one worker thread (the only one touching the GPU)
takes the first waiting request, then collects more while they keep arriving less than ``window_s``
apart (at most ``max_wait_s`` in all) - but only while more are expected: the expected count is the largest batch of the last few rounds, so a lone client never
waits (its latency is unchanged), while N clients in a closed loop are gathered into one call of N.
Requests whose ``key`` differ (e.g. another image size) are run in separate calls in the same round.
Every request gets its own result (or its own exception) through a future.

Pipelined mode (``launch`` given, e.g. :meth:`Pi05Policy.launch_prepared`): the worker only gathers and
*launches* batches (the GPU work is queued on one CUDA stream), at most ``max_in_flight`` at a time,
and a second thread waits for each launched batch and hands out its results. So the next batch is
gathered, staged and queued while the current one runs, and the GPU does not idle between batches
while results are delivered and the next requests are decoded. While a batch is in flight the worker
gathers until the next one is full (``max_batch`` rows) or the in-flight work is done, so clients
that drifted into small groups (8 = 5 + 3) are merged back into full batches (16 closed-loop clients on an H200:
see ``benchmarks/vla_bench.py``).
"""

from __future__ import annotations

import queue
import threading
import time
from collections import deque
from concurrent.futures import Future
from typing import Any, Callable, Hashable


class BatcherClosed(RuntimeError):
    """The batcher was shut down before the request ran."""


class DynamicBatcher:
    """Collects concurrent work items into batches for a single worker thread.

    Args:
        process: called on the worker thread with a list of items (same ``key``); returns one result
            per item, in order. An exception fails every item of that call.
        window_s: longest gap between arrivals while collecting (s; default 3 ms): the window reopens
            at each arrival, so clients whose requests trickle in (decoding, GIL) still share a call.
        max_batch: most batch rows per call (items carry a row count).
        max_wait_s: longest total collection time after the first item (default 5 x window_s).
        name: worker thread name.
        initializer: called once on the worker thread before any item (e.g. loading a thread-bound
            model handle such as APXinf-robo's L1 model, which must be loaded and called on one
            thread). Its exception is re-raised by :meth:`wait_ready` and fails every submit.
        launch: optional pipelined form of ``process``: called on the worker thread with the items,
            returns a handle whose ``result()`` (called on the results thread) gives the results. An
            exception from either fails every item of that call.
        max_in_flight: launched batches not yet finished (pipelined mode; default 2).
    """

    def __init__(self, process: Callable[[list[Any]], list[Any]], window_s: float = 0.003, max_batch: int = 16,
                 max_wait_s: float | None = None, name: str = "vla-batcher",
                 initializer: Callable[[], None] | None = None, launch: Callable[[list[Any]], Any] | None = None,
                 max_in_flight: int = 2):
        self._process = process
        self._launch = launch
        self._slots = threading.Semaphore(max(1, max_in_flight))
        self._done_q: queue.Queue = queue.Queue()
        self._count_lock = threading.Lock()
        self._in_flight = 0  # launched batches whose results are not delivered yet (pipelined mode)
        self._initializer = initializer
        self._ready: Future = Future()
        self.window_s = window_s
        self.max_wait_s = 5 * window_s if max_wait_s is None else max_wait_s
        self.max_batch = max_batch
        self._q: queue.Queue = queue.Queue()
        self._recent = deque([1], maxlen=4)
        self._closed = False
        self.batches_run = 0
        self.batch_sizes: deque[int] = deque(maxlen=1000)
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()
        self._completer = None
        if launch is not None:
            self._completer = threading.Thread(target=self._complete_loop, name=name + "-results", daemon=True)
            self._completer.start()

    def wait_ready(self, timeout: float | None = None) -> None:
        """Block until the worker ran ``initializer`` (immediately when there is none).

        Raises:
            whatever ``initializer`` raised (the worker has then stopped); TimeoutError after ``timeout`` s.
        """
        self._ready.result(timeout=timeout)

    def submit(self, item: Any, rows: int = 1, key: Hashable = None, timeout: float | None = None) -> Any:
        """Queue ``item`` (``rows`` batch rows, grouping ``key``) and block until its result.

        Raises:
            BatcherClosed: after :meth:`close`; whatever ``process`` raised for this item's call;
            TimeoutError: no result within ``timeout`` seconds.
        """
        if self._ready.done() and self._ready.exception() is not None:
            raise BatcherClosed(f"the VLA batcher never started: {self._ready.exception()}")
        if self._closed:
            raise BatcherClosed("the VLA batcher is shut down")
        fut: Future = Future()
        self._q.put((item, rows, key, fut))
        return fut.result(timeout=timeout)

    def close(self) -> None:
        """Stop the worker; queued items fail with :class:`BatcherClosed`."""
        self._closed = True
        self._q.put(None)
        self._thread.join(timeout=5)
        if self._completer is not None:
            self._done_q.put(None)
            self._completer.join(timeout=5)

    def _collect(self, first) -> list:
        batch = [first]
        rows = first[1]
        if self._launch is not None and self._in_flight > 0:
            # the GPU has queued work: keep gathering until the batch is full or the GPU runs dry, so
            # clients that drifted into small groups merge into full batches again
            while rows < self.max_batch and self._in_flight > 0:
                try:
                    nxt = self._q.get(timeout=0.0005)
                except queue.Empty:
                    continue
                if nxt is None:
                    self._q.put(None)
                    return batch
                batch.append(nxt)
                rows += nxt[1]
            if rows >= self.max_batch:
                return batch
        expected = max(self._recent)
        start = time.monotonic()
        deadline = start + self.window_s
        hard_stop = start + self.max_wait_s
        while rows < self.max_batch:
            try:
                nxt = self._q.get_nowait()
            except queue.Empty:
                if len(batch) >= expected:
                    break
                left = min(deadline, hard_stop) - time.monotonic()
                if left <= 0:
                    break
                try:
                    nxt = self._q.get(timeout=left)
                except queue.Empty:
                    break
            if nxt is None:
                self._q.put(None)
                break
            batch.append(nxt)
            rows += nxt[1]
            deadline = time.monotonic() + self.window_s  # requests keep coming: keep the window open
        return batch

    def _loop(self) -> None:
        try:
            if self._initializer is not None:
                self._initializer()
        except BaseException as exc:  # noqa: BLE001 - reported through wait_ready / submit
            self._ready.set_exception(exc)
            self._closed = True
            self._drain(exc)
            return
        self._ready.set_result(None)
        while True:
            first = self._q.get()
            if first is None:
                break
            batch = self._collect(first)
            self._recent.append(len(batch))
            groups: dict[Hashable, list] = {}
            for entry in batch:
                groups.setdefault(entry[2], []).append(entry)
            for entries in groups.values():
                live = [e for e in entries if e[3].set_running_or_notify_cancel()]
                if not live:
                    continue
                if self._launch is not None:
                    self._slots.acquire()
                    try:
                        handle = self._launch([e[0] for e in live])
                        with self._count_lock:
                            self._in_flight += 1
                    except BaseException as exc:  # noqa: BLE001 - handed to each waiting client
                        self._slots.release()
                        for e in live:
                            e[3].set_exception(exc)
                        continue
                    self._done_q.put((live, handle))
                    continue
                try:
                    results = self._process([e[0] for e in live])
                    if len(results) != len(live):
                        raise RuntimeError(f"batch process returned {len(results)} results for {len(live)} items")
                except BaseException as exc:  # noqa: BLE001 - handed to each waiting client
                    for e in live:
                        e[3].set_exception(exc)
                    continue
                self.batches_run += 1
                self.batch_sizes.append(sum(e[1] for e in live))
                for e, r in zip(live, results):
                    e[3].set_result(r)
        self._drain(BatcherClosed("the VLA batcher is shut down"))

    def _complete_loop(self) -> None:
        """Pipelined mode: wait for each launched batch in launch order and deliver its results."""
        while True:
            job = self._done_q.get()
            if job is None:
                return
            live, handle = job
            try:
                results = handle.result()
                if len(results) != len(live):
                    raise RuntimeError(f"batch launch returned {len(results)} results for {len(live)} items")
            except BaseException as exc:  # noqa: BLE001 - handed to each waiting client
                for e in live:
                    e[3].set_exception(exc)
                continue
            finally:
                with self._count_lock:
                    self._in_flight -= 1
                self._slots.release()
            self.batches_run += 1
            self.batch_sizes.append(sum(e[1] for e in live))
            for e, r in zip(live, results):
                e[3].set_result(r)

    def _drain(self, exc: BaseException) -> None:
        """Fail every queued item with ``exc`` (after close, or when the initializer failed)."""
        while True:
            try:
                entry = self._q.get_nowait()
            except queue.Empty:
                return
            if entry is not None and entry[3].set_running_or_notify_cancel():
                entry[3].set_exception(exc)
