"""Safe delivery of planner events to an ``on_event(kind, payload)`` hook.

See :data:`rpent.planners.base.EventHook` for the kinds and payloads. A hook that
raises is logged once per kind and otherwise ignored, so a broken recorder or UI never
stops a run.
"""

from __future__ import annotations

import logging
from typing import Any

from rpent.planners.base import EventHook

__all__ = ["EventEmitter"]

log = logging.getLogger("rpent.planners")


class EventEmitter:
    """Calls ``hook(kind, payload)``; no-op when ``hook`` is None; never raises."""

    def __init__(self, hook: EventHook | None) -> None:
        self.hook = hook
        self._failed_kinds: set[str] = set()

    def __call__(self, kind: str, **payload: Any) -> None:
        """Deliver one event."""
        if self.hook is None:
            return
        try:
            self.hook(kind, payload)
        except Exception:
            if kind not in self._failed_kinds:
                self._failed_kinds.add(kind)
                log.exception("planner event hook failed on %r events (further failures of this kind are silent)",
                              kind)
