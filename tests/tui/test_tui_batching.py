"""Batcher cadence/ordering and LineSplitter edge cases, under plain trio (no Textual)."""

import threading
import time

import pytest
import trio

from rpent.session.batching import Batcher, LineSplitter


def test_batcher_caps_flush_rate_and_keeps_order_from_a_thread():
    flushes: list[tuple[float, list[int]]] = []
    batcher = Batcher(lambda items: flushes.append((time.monotonic(), items)), interval_s=0.08)

    def producer():  # 200 events/s for 0.5 s from a worker thread, like the toolkit's
        for i in range(100):
            batcher.put(i)
            time.sleep(0.005)

    async def main():
        async with trio.open_nursery() as nursery:
            nursery.start_soon(batcher.run)
            await trio.to_thread.run_sync(producer)
            await trio.sleep(0.2)
            nursery.cancel_scope.cancel()

    started = time.monotonic()
    trio.run(main)
    elapsed = time.monotonic() - started
    items = [i for _, batch in flushes for i in batch]
    assert items == list(range(100))
    assert len(flushes) <= elapsed / 0.08 + 2
    assert len(flushes) >= 3  # it did batch, not a single flush at the end
    gaps = [b[0] - a[0] for a, b in zip(flushes, flushes[1:])]
    assert min(gaps) >= 0.07


def test_batcher_delivers_first_item_immediately_after_quiet_period():
    seen: list[float] = []
    batcher = Batcher(lambda items: seen.append(time.monotonic()), interval_s=0.5)

    async def main():
        async with trio.open_nursery() as nursery:
            nursery.start_soon(batcher.run)
            await trio.sleep(0.05)
            put_at = time.monotonic()
            batcher.put("x")
            with trio.fail_after(60):
                while not seen:
                    await trio.sleep(0.005)
            nursery.cancel_scope.cancel()
        return put_at

    put_at = trio.run(main)
    assert len(seen) == 1 and seen[0] - put_at < 0.25  # at once, not after the 0.5 s interval


def test_batcher_flushes_leftovers_on_cancel_and_bounds_memory():
    got: list[list[int]] = []
    batcher = Batcher(got.append, interval_s=10, max_items=3)

    async def main():
        async with trio.open_nursery() as nursery:
            nursery.start_soon(batcher.run)
            await trio.sleep(0.01)
            batcher.put(0)  # flushed at once; the next ones wait 10 s
            with trio.fail_after(60):
                while not got:
                    await trio.sleep(0.005)
            for i in range(1, 6):
                batcher.put(i)
            nursery.cancel_scope.cancel()

    trio.run(main)
    assert got == [[0], [3, 4, 5]]
    assert batcher.dropped == 2


def test_batcher_rejects_bad_interval():
    with pytest.raises(ValueError, match="interval_s must be > 0"):
        Batcher(print, interval_s=0)


def test_line_splitter_partial_lines_carriage_return_and_bad_bytes():
    s = LineSplitter()
    assert s.feed(b"hel") == []
    assert s.partial == "hel"
    assert s.feed(b"lo\nwor") == ["hello"]
    assert s.feed(b"ld\r\n 10%\r 50%\r100%\n") == ["world", "100%"]
    assert s.feed(b"\xff\xfeok\n") == ["\ufffd\ufffdok"]
    assert s.feed(b"tail") == []
    assert s.close() == ["tail"]
    assert s.close() == []
