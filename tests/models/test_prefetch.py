"""Page-cache prefetch of weight files (rpent.models.prefetch): every byte is read, nothing is kept, and a
missing file or an empty list is harmless (the loader reports such problems itself)."""

from __future__ import annotations

import os

from rpent.models.prefetch import CHUNK, mem_available_bytes, start_prefetch


def test_prefetch_reads_every_byte_of_every_file(tmp_path):
    sizes = [CHUNK + 12345, 3, 2 * CHUNK]  # not multiples of the chunk, a tiny one, several ranges
    files = []
    for i, n in enumerate(sizes):
        f = tmp_path / f"part{i}.safetensors"
        f.write_bytes(os.urandom(1024) * (n // 1024) + os.urandom(n % 1024))
        files.append(f)
    p = start_prefetch(files, threads=3)
    assert p.wait(timeout=120), p.summary()
    assert p.error is None
    assert p.total_bytes == sum(sizes)
    assert p.bytes_read == sum(sizes)
    assert p.summary().startswith("prefetch done: ")
    assert [f.stat().st_size for f in files] == sizes  # read only


def test_prefetch_of_nothing_or_a_missing_file(tmp_path):
    p = start_prefetch([])
    assert p.done() and p.skipped == "no files" and p.summary() == "prefetch skipped: no files"
    q = start_prefetch([tmp_path / "absent.safetensors"])
    assert q.wait(timeout=60) and q.bytes_read == 0 and q.skipped == "no files"


def test_mem_available_is_read_on_linux():
    avail = mem_available_bytes()
    assert avail is None or avail > 0
