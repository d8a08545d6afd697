"""Base class of the mode screens: registers itself with the app so it receives service events while hidden."""

from __future__ import annotations

from textual.screen import Screen

__all__ = ["LiveScreen"]


class LiveScreen(Screen):
    """A screen that gets every service event through ``handle_service_event`` once mounted.

    Textual dispatches ``on_mount``/``on_unmount`` for every class in the MRO, so subclasses keep
    their own handlers and must not call ``super()`` for them.
    """

    def on_mount(self) -> None:
        self.app.live_screens.add(self)

    def on_unmount(self) -> None:
        self.app.live_screens.discard(self)

    def handle_service_event(self, event: object) -> None:
        """Apply one service-layer event; the default ignores it."""
