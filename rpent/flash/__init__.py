"""Flash plans: one solved run replayed on other seeds with re-localised anchors, no LLM
(RPent reference §6.4).

* :mod:`rpent.flash.files` — ``<cell>_plan.json`` / ``<cell>_anchors.json`` format, paths, loading.
* :mod:`rpent.flash.generate` — audit (transcript) + recipe -> flash files (``rpent-flash generate``).
* :mod:`rpent.flash.replay` — the ``flash`` planner (``--planner flash``).
* :mod:`rpent.flash.locate` — which instance of a look stands for an anchor.
* :mod:`rpent.flash.episode` — the live episode's identity and its ``flash_replay.json`` report.
"""

from rpent.flash.files import FlashFileError, cell_tag, find_plan, load_flash

__all__ = ["FlashFileError", "cell_tag", "find_plan", "load_flash"]
