"""Read weight files into the OS page cache in the background, while a server does other start-up work.

A cold start of a model server is a disk read (the weights) plus work that needs no weights (importing
torch, creating the CUDA context, checking the checkpoint directory). :func:`start_prefetch` starts
reader threads at the very beginning of a server's ``main()`` (before torch is imported), so the disk is
busy during that other work and the loader's later reads (safetensors maps the file) come from memory.
The threads read with ``os.preadv`` into one reusable buffer each and keep nothing: what remains is the
kernel's page cache, shared with the loader. Nothing is prefetched when the files together exceed half
of ``MemAvailable`` (``/proc/meminfo``): the pages would be evicted before the loader reads them, and
the read would only be done twice.

Used by :mod:`rpent.robots.components.pi05_vla_server`; measured in ``benchmarks/vla_bench.py``
(``--cold-start-from-disk --drop-caches``).
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

__all__ = ["Prefetch", "start_prefetch", "mem_available_bytes"]

#: Bytes per read call (large sequential reads keep the disk's queue full).
CHUNK = 16 << 20


def mem_available_bytes() -> int | None:
    """``MemAvailable`` of ``/proc/meminfo`` in bytes, or None where it cannot be read (not Linux)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


class Prefetch:
    """Reader threads filling the page cache with ``files`` (see the module docstring).

    Attributes:
        files: the files being read. total_bytes: their size together (bytes).
        skipped: why nothing is read ("" when the threads run).
        bytes_read: bytes read so far (int, updated by the threads). error: the first OSError, or None
            (a failed prefetch costs nothing but time: the loader reads the file itself and reports).
    """

    def __init__(self, files: list[Path], threads: int = 4, chunk: int = CHUNK):
        self.files = list(files)
        self.total_bytes = 0
        sizes = []
        for f in self.files:
            try:
                sizes.append(os.path.getsize(f))
            except OSError:
                sizes.append(0)
        self.total_bytes = sum(sizes)
        self.bytes_read = 0
        self.error: OSError | None = None
        self.skipped = ""
        self._t0 = time.perf_counter()
        self._t1: float | None = None
        self._lock = threading.Lock()
        avail = mem_available_bytes()
        if not self.files or self.total_bytes == 0:
            self.skipped = "no files"
        elif avail is not None and self.total_bytes > avail // 2:
            self.skipped = f"{self.total_bytes / 1e9:.1f} GB > half of MemAvailable ({avail / 1e9:.1f} GB)"
        # work items: (file, offset, length) ranges of about total/threads bytes, in file order
        self._ranges: list[tuple[Path, int, int]] = []
        if not self.skipped:
            per = max(chunk, -(-self.total_bytes // max(1, threads)))
            for f, size in zip(self.files, sizes):
                for off in range(0, size, per):
                    self._ranges.append((f, off, min(per, size - off)))
        self._threads = [threading.Thread(target=self._work, args=(i, threads, chunk), name=f"prefetch-{i}", daemon=True)
                         for i in range(min(threads, len(self._ranges)))]
        self._left = len(self._threads)
        for t in self._threads:
            t.start()
        if not self._threads:
            self._t1 = self._t0

    def _work(self, index: int, stride: int, chunk: int) -> None:
        buf = bytearray(chunk)
        view = memoryview(buf)
        try:
            for f, off, length in self._ranges[index::stride]:
                fd = os.open(f, os.O_RDONLY)
                try:
                    end = off + length
                    while off < end:
                        n = os.preadv(fd, [view[: min(chunk, end - off)]], off)
                        if n <= 0:
                            break
                        off += n
                        with self._lock:
                            self.bytes_read += n
                finally:
                    os.close(fd)
        except OSError as exc:
            with self._lock:
                self.error = self.error or exc
        finally:
            with self._lock:
                self._left -= 1
                if self._left == 0:
                    self._t1 = time.perf_counter()

    def done(self) -> bool:
        """Whether every reader thread has finished."""
        return self._t1 is not None

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the readers (at most ``timeout`` s); True when they finished."""
        end = None if timeout is None else time.perf_counter() + timeout
        for t in self._threads:
            t.join(None if end is None else max(0.0, end - time.perf_counter()))
        return self.done()

    def summary(self) -> str:
        """One line for a start-up log: what was read, how fast, or why nothing was."""
        if self.skipped:
            return f"prefetch skipped: {self.skipped}"
        el = (self._t1 if self._t1 is not None else time.perf_counter()) - self._t0
        state = "done" if self._t1 is not None else "still reading"
        err = f", error: {self.error}" if self.error else ""
        return (f"prefetch {state}: {self.bytes_read / 1e9:.2f} of {self.total_bytes / 1e9:.2f} GB in {el:.1f} s "
                f"({self.bytes_read / max(el, 1e-9) / 1e9:.2f} GB/s, {len(self._threads)} threads){err}")


def start_prefetch(files: list[str | os.PathLike], threads: int = 4) -> Prefetch:
    """Start reading ``files`` into the page cache on ``threads`` daemon threads; returns at once.

    Args:
        files: weight files (e.g. a checkpoint's ``*.safetensors``); missing ones count as empty.
        threads: reader threads (each reads its own byte ranges, so several requests are in flight).
    Returns:
        the running :class:`Prefetch` (``summary()`` for the log, ``wait()`` to join).
    """
    return Prefetch([Path(f) for f in files], threads=threads)
