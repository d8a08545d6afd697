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

    def _update_dimensions(self, new_rows) -> None:  # type: ignore[no-untyped-def]
        """Textual's on-idle column-width update, then invalidate the line caches.

        Textual 8.2.8 measures added rows' column widths only on the table's idle, and for
        fixed-height rows it does not invalidate the lines it cached keyed by ``_update_count``: a
        paint that came between ``add_row`` and that idle (the screen's and the table's tasks race;
        seen on loaded machines) kept columns at their label width with cells cut (``pi0_`` for
        ``pi0_pick``) until something else moved the cursor."""
        super()._update_dimensions(new_rows)
        self._update_count += 1
        self.refresh()


class VimSelectionList(SelectionList):
    """``SelectionList`` with j/k down/up (space toggles, as built in)."""

    BINDINGS = [
        Binding("j", "cursor_down", "Down", show=False, id="selection-down"),
        Binding("k", "cursor_up", "Up", show=False, id="selection-up"),
    ]
