"""Base class of the mode screens: registers itself with the app so it receives service events while
hidden, and skips Textual's full restyle on a screen switch when nothing a style depends on changed."""

from __future__ import annotations

from typing import Any

from textual import events
from textual.screen import Screen

__all__ = ["LiveScreen"]


class LiveScreen(Screen):
    """A screen that gets every service event through ``handle_service_event`` once mounted.

    Textual dispatches ``on_mount``/``on_unmount`` for every class in the MRO, so subclasses keep
    their own handlers and must not call ``super()`` for them.

    Screen switches (F2..F9): ``App.switch_mode`` posts ``ScreenResume(refresh_styles=True)``, which
    re-applies the stylesheet to every node of the screen and drops every widget's rendered lines
    (measured at 120x40: about half of an F2/F3 switch's CPU time). Textual itself resumes a screen
    without that restyle after a modal closes (``pop_screen``). A hidden screen's styles can only go
    stale through app-wide state (theme, app focus, the stylesheet itself: Textual re-applies CSS on
    a stylesheet change in ``switch_mode``); class and focus changes on its widgets restyle them at
    once, shown or not. So the restyle is kept only when that app-wide state changed since the
    screen was last styled.
    """

    _styled_for: tuple | None = None

    def on_mount(self) -> None:
        self.app.live_screens.add(self)
        self._styled_for = self._style_state()

    def on_unmount(self) -> None:
        self.app.live_screens.discard(self)

    def _style_state(self) -> tuple[Any, ...]:
        app = self.app
        return (app.theme, app.app_focus, app.ansi_color)

    def post_message(self, message: Any) -> bool:
        """Queue a message; a ``ScreenResume`` asks for a restyle only when app-wide style state changed."""
        if isinstance(message, events.ScreenResume) and message.refresh_styles:
            state = self._style_state()
            if state == self._styled_for:
                message.refresh_styles = False
            self._styled_for = state
        return super().post_message(message)

    def handle_service_event(self, event: object) -> None:
        """Apply one service-layer event; the default ignores it."""
