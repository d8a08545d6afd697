"""Exploration mode: sessions of attempts on one cell that draft into the task memory and merge
it when solved (RPent reference §6.3). :mod:`rpent.explore.loop` runs it;
:mod:`rpent.explore.toolkit` adds ``reset`` / ``write_memory_draft`` and the finish guard."""

from rpent.explore.loop import ExploreOptions, run_explore

__all__ = ["ExploreOptions", "run_explore"]
