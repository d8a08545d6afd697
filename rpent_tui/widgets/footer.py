"""A ``Footer`` that rebuilds its keys only when the keys it shows change.

Textual's ``Footer`` recomposes (unmounts and mounts one ``FooterKey`` per binding, each styled
anew) on every ``bindings_updated_signal``, which a screen publishes on every screen switch and
focus change even when the shown keys stay the same. Measured on the Run screen (120x40): about
14 widgets mounted per F2/F3 switch, a large part of the switch's CPU time. This subclass compares
the shown bindings (key, action, description, enabled, tooltip) with what it last composed and
skips an identical recompose.
"""

from __future__ import annotations

from typing import Any

from textual.widgets import Footer

__all__ = ["StableFooter"]


class StableFooter(Footer):
    """``Footer`` without recomposes that would draw the same keys (see the module docstring)."""

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
