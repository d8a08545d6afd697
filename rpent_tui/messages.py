"""Textual messages carrying service-layer events to the UI.

The service layer (``rpent_tui.services``) imports no Textual: it hands plain dataclass events to a
thread-safe sink. The app's sink wraps each in ``ServiceEvent`` and posts it (``post_message`` is
the only thread-safe Textual call). ``SessionChanged`` and ``CellProgress`` only say "re-read the
model", so a newer one replaces a queued older one (``can_replace``, the toolong coalescing idiom):
a fast producer cannot flood the UI queue.
"""

from __future__ import annotations

from typing import Any

from textual.message import Message

from rpent.session.code_cells import CellProgress
from rpent.session.model import SessionChanged

__all__ = ["ServiceEvent"]

_COALESCE = (SessionChanged, CellProgress)


class ServiceEvent(Message):
    """One service-layer event (``SessionChanged``, ``RunEvents``, ``ServiceLog``, ``OperatorPrompt``,
    ``OperatorResolved``, ``CellProgress``, ``CellFinished``, ``FlywheelOutput``) for the app."""

    def __init__(self, event: Any) -> None:
        super().__init__()
        self.event = event

    def can_replace(self, message: Message) -> bool:
        """A coalescable event replaces a queued one of the same type."""
        return (isinstance(message, ServiceEvent) and isinstance(self.event, _COALESCE)
                and type(message.event) is type(self.event))
