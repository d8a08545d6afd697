"""Textual widgets without screen layout passes that cannot change anything (Run screen costs).

A ``refresh(layout=True)`` reflows and repaints the whole screen (at 120x40 about 4x the cost of the
repaint it asks for). Two stock widgets ask for one where the layout cannot change:

* ``Header``: every title/subtitle change updates its ``HeaderTitle`` with ``Static.update``
  (``layout=True``), i.e. on every screen switch (a screen's subtitle is the status bar) and every
  status change. The title is one row of a one-row header (``width: 100%``, no wrap): its size never
  depends on the text. ``StableHeader`` composes a ``HeaderTitle`` that repaints only.
* ``Input``: every keystroke sets ``virtual_size`` (a ``layout=True`` reactive) to the text width.
  An ``Input`` is a ``ScrollView``: its scroll range follows ``virtual_size`` without a layout pass
  (``ScrollView._size_updated`` reads ``self.virtual_size``), and with fixed CSS dimensions its own
  size never depends on the text. ``LineInput`` updates the scroll range in place (a layout pass is
  still requested when a CSS dimension is ``auto``, as ``Input`` does).

``LineInput`` also runs its own key bindings (backspace, arrows, ctrl+u, ...) in the order its keys
arrive. Textual resolves a widget's bindings only when the key has bubbled back up to the App, i.e.
after the keys queued behind it (a burst from one terminal read: a paste, ``tmux send-keys``, a busy
machine) were already typed: ``ab<backspace>c`` became ``ab``, and a key queued before a focus change
resolved against the new focus.

Both look and behave exactly like the stock widgets (CSS type selectors of the base class apply).
"""

from __future__ import annotations

from typing import Any

from textual import events
from textual.app import ComposeResult
from textual.geometry import Size
from textual.reactive import Reactive
from textual.widgets import Header, Input
from textual.widgets._header import HeaderClock, HeaderClockSpace, HeaderIcon, HeaderTitle

__all__ = ["StableHeader", "LineInput"]


class _RepaintTitle(HeaderTitle):
    """``HeaderTitle`` whose ``update`` repaints without a layout pass (one fixed row)."""

    def update(self, content: Any = "", *, layout: bool = True) -> None:  # noqa: ARG002 - see module docstring
        """Replace the title text; repaint only."""
        super().update(content, layout=False)


class StableHeader(Header):
    """``Header`` whose title changes repaint the title row only (see the module docstring)."""

    def compose(self) -> ComposeResult:
        yield HeaderIcon().data_bind(Header.icon)
        yield _RepaintTitle()
        yield HeaderClock().data_bind(Header.time_format) if self._show_clock else HeaderClockSpace()


class LineInput(Input):
    """``Input`` whose keystrokes repaint the line without a screen layout pass and whose own key
    bindings act in key order (see the module docstring); for inputs with fixed CSS width and height
    (e.g. ``height: 1; width: 1fr``)."""

    async def _on_key(self, event: events.Key) -> None:
        """Printable keys insert text (``Input``); a key bound by the input itself (backspace, arrows,
        ctrl+u, ...) runs its action now, in order with the text keys."""
        if not event.is_printable:
            for binding in self._bindings.key_to_bindings.get(event.key, ()):
                if not binding.priority and await self.app.run_action(binding.action, self):
                    event.stop()
                    event.prevent_default()
                    return
        await super()._on_key(event)

    virtual_size: Reactive[Size] = Reactive(Size(0, 0), layout=False)

    def watch_virtual_size(self, size: Size) -> None:
        """Update the horizontal scroll range (what the skipped layout pass would do)."""
        if self.styles.auto_dimensions:
            self.refresh(layout=True)
        elif self.is_mounted and self.container_size:
            self._scroll_update(size)
