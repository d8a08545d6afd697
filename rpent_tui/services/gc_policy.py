"""Garbage collection that keeps out of the operator's way (keystroke latency).

CPython's cyclic garbage collector stops the UI thread for a full (generation 2) collection whenever
the long-lived objects grew by a quarter; the pause is proportional to every tracked object. In
``rpent-tui`` at 200 run events/s a full collection took 100-300 ms (~150k objects) several times a
minute, and a key pressed meanwhile waited for it: the slowest 10% of screen switches were such
keys. ``QuietCollector`` does two things:

* ``freeze``: after start-up (first screen drawn, suite list scanned) it collects once and freezes
  every object alive then (``gc.freeze``, the standard library's tool for long-lived start-up
  objects): later collections skip them. Frozen objects are still freed by reference counting; only
  reference cycles among them would stay, which start-up objects do not form in numbers.
* ``tick``: automatic full collections are switched off (the third ``gc`` threshold is raised); the
  app calls ``tick`` a few times a second and a full collection runs when one is due (as many
  young-generation collections as CPython's default would wait for) **and** the operator has not
  pressed a key for a moment, or at the latest ``max_interval_s`` after the previous one (memory
  stays bounded while someone types for minutes). Young-generation collections stay automatic.

``stop`` restores the thresholds and unfreezes (an app run inside a larger process, e.g. tests).
Pure standard library; no Textual.
"""

from __future__ import annotations

import gc
import time

__all__ = ["QuietCollector"]

#: A threshold the generation-1 collection count never reaches: no automatic full collection.
_NEVER = 1 << 30


class QuietCollector:
    """Full garbage collections at quiet moments (see the module docstring).

    Args:
        young_per_full: generation-1 collections between two full ones (CPython's default third
            threshold, 10).
        max_interval_s: a due full collection runs after at most this many seconds (s), quiet or not.
    """

    def __init__(self, *, young_per_full: int = 10, max_interval_s: float = 60.0) -> None:
        self.young_per_full = young_per_full
        self.max_interval_s = max_interval_s
        self._saved: tuple[int, int, int] | None = None
        self._froze = False
        self._last_full = time.monotonic()
        self.full_collections = 0  # run by ``tick`` (for tests and benchmarks)

    @property
    def active(self) -> bool:
        """Whether automatic full collections are switched off (between ``freeze`` and ``stop``)."""
        return self._saved is not None

    def freeze(self) -> None:
        """Collect everything now, freeze what is alive, and take over full collections (``tick``).
        May be called again (e.g. once the suite registry is scanned): it freezes what was added."""
        gc.collect()
        gc.freeze()
        self._froze = True
        self._last_full = time.monotonic()
        if self._saved is None:
            self._saved = gc.get_threshold()
            gc.set_threshold(self._saved[0], self._saved[1], _NEVER)

    def tick(self, quiet: bool, now: float | None = None) -> bool:
        """Run a full collection if one is due and ``quiet`` (no key pressed for a moment), or if one is
        due and ``max_interval_s`` passed since the last; True when it ran."""
        if self._saved is None:
            return False
        now = time.monotonic() if now is None else now
        if gc.get_count()[2] < self.young_per_full:
            return False
        if not quiet and now - self._last_full < self.max_interval_s:
            return False
        gc.collect()
        self._last_full = time.monotonic()
        self.full_collections += 1
        return True

    def stop(self) -> None:
        """Restore the ``gc`` thresholds and unfreeze (the app is ending)."""
        if self._saved is not None:
            gc.set_threshold(*self._saved)
            self._saved = None
        if self._froze:
            gc.unfreeze()
            self._froze = False
