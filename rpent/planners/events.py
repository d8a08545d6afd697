"""Safe delivery of planner events to an ``on_event(kind, payload)`` hook.

See :data:`rpent.planners.base.EventHook` for the kinds and payloads. A hook that
raises is logged once per kind and otherwise ignored, so a broken recorder or UI never
stops a run.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Callable

from rpent.planners.base import EventHook, PlannerResult, PlannerStats, Steering, Toolkit

__all__ = ["EventEmitter", "PlannerTimeout", "run_sdk_session"]

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


class PlannerTimeout(Exception):
    """Raised inside a planner's session when its wall-clock limit (``--planner-timeout-s``) is hit."""


def run_sdk_session(sdk: str, logger: logging.Logger, timeout_s: float | None, toolkit: Toolkit,
                    steering: Steering | None, on_event: EventHook | None,
                    body: Callable[[EventEmitter, PlannerResult], None]) -> PlannerResult:
    """The frame every SDK planner's ``solve`` shares: stats, event emitter, interrupt listener
    (an operator interrupt cancels the running tool), and errors turned into the result.

    Args:
        sdk: name used in error messages (``"Claude Agent SDK"``, ``"Codex SDK"``).
        logger: where an unexpected failure's traceback goes.
        timeout_s: the planner's limit, for the timeout message.
        body: ``body(emit, result)`` runs the session and fills ``result``; it raises
            :class:`PlannerTimeout` when the limit is hit.
    Returns:
        the result (``error``/``stop_reason``/``error_kind`` set on timeout or failure; never raises).
    """
    start = time.monotonic()
    result = PlannerResult(stats=PlannerStats())
    emit = EventEmitter(on_event)
    remove = steering.add_interrupt_listener(toolkit.cancel) if steering else (lambda: None)
    try:
        body(emit, result)
    except PlannerTimeout:
        result.error = f"{sdk} timed out after {timeout_s:g}s"
        result.stop_reason = result.error_kind = "timeout"
    except Exception as exc:  # noqa: BLE001 — planners report, never raise
        logger.exception("%s planner failed", sdk)
        result.error = f"{sdk} error: {type(exc).__name__}: {exc}"
        result.stop_reason = "error"
        result.error_kind = "sdk"
    finally:
        remove()
        result.stats.elapsed_s = time.monotonic() - start
    if result.error:
        emit("error", error=result.error)
    return result
