"""A ``Footer`` that rebuilds its keys only when the keys it shows change.

Textual's ``Footer`` recomposes (unmounts and mounts one ``FooterKey`` per binding, each styled
anew) on every ``bindings_updated_signal``, which a screen publishes on every screen switch and
focus change even when the shown keys stay the same. Measured on the Run screen (120x40): about
14 widgets mounted per F2/F3 switch, a large part of the switch's CPU time. This subclass compares
the shown bindings (key, action, description, enabled, tooltip) with what it last composed and
skips an identical recompose.

It also puts the Help key (F1) first: Textual lays the keys out in binding order (the screen's,
then the app's), so on an 80-column terminal the app's Help key was the one cut off at the right
edge, while the footer must still show help at 80x24.
"""

from __future__ import annotations

from typing import Any, ClassVar

from textual.app import ComposeResult
from textual.widgets import Footer

__all__ = ["StableFooter"]


class StableFooter(Footer):
    """``Footer`` without recomposes that would draw the same keys, Help first (see the module docstring)."""

    #: actions whose keys come first, in this order, whatever the binding order
    LEAD_ACTIONS: ClassVar[tuple[str, ...]] = ("help",)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._shown_signature: tuple | None = None

    @staticmethod
    def _signature(screen: Any) -> tuple:
        return tuple((b.key, b.action, b.description, enabled, tooltip)
                     for (_, b, enabled, tooltip) in screen.active_bindings.values() if b.show)

    def bindings_changed(self, screen: Any) -> None:
        """Recompose only when the shown keys differ from the last composed ones."""
        will_compose = screen.app.app_focus and self.is_attached and screen is self.screen
        if will_compose:
            signature = self._signature(screen)
            if self._bindings_ready and signature == self._shown_signature:
                return
            self._shown_signature = signature
        super().bindings_changed(screen)

    def compose(self) -> ComposeResult:
        """Textual's keys, with those of ``LEAD_ACTIONS`` moved to the front (so they survive a narrow terminal)."""
        widgets = list(super().compose())
        lead = [w for a in self.LEAD_ACTIONS for w in widgets if getattr(w, "action", None) == a]
        return lead + [w for w in widgets if not any(w is x for x in lead)]
