"""DataTable and SelectionList with vim keys (j/k/g/G), as the anchors subclass built-in widgets."""

from __future__ import annotations

from textual.binding import Binding
from textual.widgets import DataTable, SelectionList

__all__ = ["VimDataTable", "VimSelectionList"]


class VimDataTable(DataTable):
    """``DataTable`` with j/k down/up and g/G first/last row."""

    BINDINGS = [
        Binding("j", "cursor_down", "Down", show=False, id="table-down"),
        Binding("k", "cursor_up", "Up", show=False, id="table-up"),
        Binding("g", "scroll_top", "First", show=False, id="table-first"),
        Binding("G", "scroll_bottom", "Last", show=False, id="table-last"),
    ]


class VimSelectionList(SelectionList):
    """``SelectionList`` with j/k down/up (space toggles, as built in)."""

    BINDINGS = [
        Binding("j", "cursor_down", "Down", show=False, id="selection-down"),
        Binding("k", "cursor_up", "Up", show=False, id="selection-up"),
    ]
