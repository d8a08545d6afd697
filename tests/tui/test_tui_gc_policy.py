"""``QuietCollector``: full garbage collections only at quiet moments (keystroke latency)."""

from __future__ import annotations

import gc
import weakref

from rpent_tui.services.gc_policy import QuietCollector


class _Node:
    def __init__(self) -> None:
        self.me = self  # a reference cycle: only the cyclic collector frees it


def _old_cycle() -> weakref.ref:
    """A garbage cycle that already sits in the oldest generation (young collections skip it)."""
    node = _Node()
    ref = weakref.ref(node)
    gc.collect(1)
    gc.collect(1)  # survived two young collections: generation 2
    del node
    return ref


def test_full_collections_wait_for_a_quiet_moment_and_stop_restores_gc():
    before = gc.get_threshold()
    collector = QuietCollector(young_per_full=3, max_interval_s=60.0)
    try:
        collector.freeze()
        assert collector.active and gc.get_freeze_count() > 0
        assert gc.get_threshold()[:2] == before[:2] and gc.get_threshold()[2] > 10 ** 6  # no automatic full GC
        ref = _old_cycle()
        for _ in range(3):
            gc.collect(1)  # young collections (as allocations trigger them): a full one is now due
        assert ref() is not None  # young collections leave the old cycle alone
        assert not collector.tick(quiet=False)  # keys are being pressed: wait
        assert ref() is not None and collector.full_collections == 0
        assert collector.tick(quiet=True)  # quiet: the due full collection runs and frees the cycle
        assert ref() is None and collector.full_collections == 1
        assert not collector.tick(quiet=True)  # not due again yet
        ref = _old_cycle()
        for _ in range(3):
            gc.collect(1)
        import time
        assert collector.tick(quiet=False, now=time.monotonic() + 61.0)  # at the latest after max_interval_s
        assert ref() is None
    finally:
        collector.stop()
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0 and not collector.active
    assert not collector.tick(quiet=True)  # stopped: never collects
