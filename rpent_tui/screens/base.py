"""Base class of the mode screens: registers itself with the app so it receives service events while
hidden, and skips Textual's full restyle and re-layout on a screen switch when nothing a style or
the layout depends on changed."""

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
    _laid_out_for: Any = None  # the size of the last layout pass (None: never laid out)

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

    def _refresh_layout(self, size: Any = None, scroll: bool = False) -> None:
        """Textual's layout pass; remembers the size it laid out for (see ``_screen_resized``)."""
        super()._refresh_layout(size, scroll)
        self._laid_out_for = self.outer_size if size is None else size

    def _screen_resized(self, size: Any) -> None:
        """Textual calls this on every screen switch (``App.switch_mode``): a full reflow, and its
        render. Skipped when the screen was last laid out for this same size and no widget asked for a
        layout since (such a request is pending in ``_layout_required`` and runs on the next update);
        a terminal resized while the screen was hidden still gets its layout pass here."""
        if size == self._laid_out_for and not self._layout_required and not self._layout_widgets:
            return
        super()._screen_resized(size)

    def handle_service_event(self, event: object) -> None:
        """Apply one service-layer event; the default ignores it."""
