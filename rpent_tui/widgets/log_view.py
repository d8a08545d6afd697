"""A log pane with follow, live filter, search and export (keyboard only).

Built on Textual's ``Log`` (a line-based ``ScrollView``, cheaper than ``RichLog``; reference §1.1)
with pager keys. Keys follow ``less`` where it has one: ``/`` search, ``n``/``N`` next/previous
match, ``&`` filter (show only matching lines, toolong#37's top ask), ``f`` follow the tail,
``g``/``G`` top/bottom, ``e`` export. Queries are case-insensitive regular expressions; an
invalid regex is matched literally. Export writes what the pane shows (the filtered view when a
filter is on, else the full on-disk log when there is one) to ``<export_dir>/<name>_<stamp>.log``
atomically (tmp + rename).
"""

from __future__ import annotations

import os
import re
import shutil
import time
from collections import deque
from collections.abc import Iterable
from pathlib import Path

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.widgets import Input, Log, Static

__all__ = ["LogView", "PagerLog", "compile_query"]

MAX_LINES = 5000


def compile_query(text: str) -> re.Pattern[str]:
    """A case-insensitive pattern for ``text``: a regex when valid, else the literal text."""
    try:
        return re.compile(text, re.IGNORECASE)
    except re.error:
        return re.compile(re.escape(text), re.IGNORECASE)


class PagerLog(Log):
    """``Log`` with vim/pager keys (j/k, g/G, space/b)."""

    BINDINGS = [
        Binding("j", "scroll_down", "Down", show=False, id="log-down"),
        Binding("k", "scroll_up", "Up", show=False, id="log-up"),
        Binding("g", "scroll_home", "Top", show=False, id="log-top"),
        Binding("G", "scroll_end", "Bottom", show=False, id="log-bottom"),
        Binding("space", "page_down", "Page down", show=False, id="log-page-down"),
        Binding("b", "page_up", "Page up", show=False, id="log-page-up"),
    ]


class LogView(Vertical):
    """Log pane: ``set_source`` to show a service's lines, ``append`` new lines as they arrive.

    Args:
        export_dir: directory for exported logs (created on export).
    """

    DEFAULT_CSS = """
    LogView { height: 1fr; }
    LogView > PagerLog { height: 1fr; border: none; }
    LogView > PagerLog:focus { border: none; }
    LogView:focus-within { border: round $accent; }
    LogView > #log-status { height: 1; background: $panel; color: $text-muted; padding: 0 1; }
    LogView > #log-query { display: none; }
    LogView.-querying > #log-query { display: block; }
    """

    BINDINGS = [
        Binding("f", "toggle_follow", "Follow", id="log-follow", tooltip="Follow the end of the log"),
        Binding("slash", "query('search')", "Search", id="log-search", tooltip="Search (regex, case-insensitive)"),
        Binding("n", "next_match(1)", "Next", id="log-next-match", show=False),
        Binding("N", "next_match(-1)", "Prev", id="log-prev-match", show=False),
        Binding("ampersand", "query('filter')", "Filter", id="log-filter", tooltip="Show only matching lines"),
        Binding("e", "export", "Export", id="log-export", tooltip="Write the shown log to a file"),
        Binding("escape", "close_query", "Close", show=False, id="log-close-query"),
    ]

    def __init__(self, export_dir: Path | None = None, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.export_dir = export_dir or Path.cwd() / "exports"
        self.source_name = "log"
        self.log_path: Path | None = None
        self.lines: deque[str] = deque(maxlen=MAX_LINES)
        self.follow = True
        self.filter: re.Pattern[str] | None = None
        self.search: re.Pattern[str] | None = None
        self._query_mode = "search"
        self._shown: list[str] = []
        self._match_rows: list[int] = []
        self._match_index = -1

    def compose(self) -> ComposeResult:
        yield PagerLog(max_lines=MAX_LINES, auto_scroll=True, id="log-lines")
        yield Static("", id="log-status")
        yield Input(placeholder="regex; Enter applies, Esc cancels", id="log-query")

    def on_mount(self) -> None:
        self._update_status()

    @property
    def log_widget(self) -> PagerLog:
        """The line widget."""
        return self.query_one(PagerLog)

    # -- content ---------------------------------------------------------------------------
    def set_source(self, name: str, lines: Iterable[str], log_path: Path | None = None) -> None:
        """Show ``lines`` of source ``name`` (replacing the content); ``log_path`` is the full log on disk."""
        self.source_name = name
        self.log_path = log_path
        self.lines = deque(lines, maxlen=MAX_LINES)
        self._rebuild()

    def append(self, lines: list[str]) -> None:
        """Add new lines (one batch); only lines matching the filter are shown."""
        self.lines.extend(lines)
        shown = [ln for ln in lines if self.filter is None or self.filter.search(ln)]
        if shown:
            self._shown.extend(shown)
            if len(self._shown) > MAX_LINES:
                del self._shown[: len(self._shown) - MAX_LINES]
            self.log_widget.write_lines(shown, scroll_end=self.follow)
        self._update_status()

    def _rebuild(self) -> None:
        self._shown = [ln for ln in self.lines if self.filter is None or self.filter.search(ln)]
        log = self.log_widget
        log.clear()
        if self._shown:
            log.write_lines(self._shown, scroll_end=self.follow)
        self._refresh_matches()
        self._update_status()

    def _refresh_matches(self) -> None:
        self._match_rows = [i for i, ln in enumerate(self._shown) if self.search and self.search.search(ln)]
        self._match_index = -1

    def _update_status(self) -> None:
        parts = [self.source_name, f"{len(self._shown)}/{len(self.lines)} lines",
                 "follow" if self.follow else "paused"]
        if self.filter is not None:
            parts.append(f"filter /{self.filter.pattern}/")
        if self.search is not None:
            pos = f"{self._match_index + 1}/{len(self._match_rows)}" if self._match_rows else "no match"
            parts.append(f"search /{self.search.pattern}/ {pos}")
        self.query_one("#log-status", Static).update(" · ".join(parts))

    # -- actions ---------------------------------------------------------------------------
    def action_toggle_follow(self) -> None:
        """Toggle following the end of the log."""
        self.follow = not self.follow
        self.log_widget.auto_scroll = self.follow
        if self.follow:
            self.log_widget.scroll_end(animate=False)
        self._update_status()

    def action_query(self, mode: str) -> None:
        """Open the query input for ``search`` or ``filter``."""
        self._query_mode = mode
        box = self.query_one("#log-query", Input)
        current = self.filter if mode == "filter" else self.search
        box.value = current.pattern if current is not None else ""
        box.placeholder = f"{mode} regex; Enter applies (empty clears), Esc cancels"
        self.add_class("-querying")
        box.focus()

    def action_close_query(self) -> None:
        """Close the query input without applying it."""
        if self.has_class("-querying"):
            self.remove_class("-querying")
            self.log_widget.focus()

    @on(Input.Submitted, "#log-query")
    def _apply_query(self, event: Input.Submitted) -> None:
        event.stop()
        text = event.value.strip()
        pattern = compile_query(text) if text else None
        if self._query_mode == "filter":
            self.filter = pattern
            self._rebuild()
        else:
            self.search = pattern
            self._refresh_matches()
            self.action_next_match(1)
        self.remove_class("-querying")
        self.log_widget.focus()

    def action_next_match(self, direction: int) -> None:
        """Scroll to the next (1) or previous (-1) search match; pauses following."""
        if not self._match_rows:
            self._update_status()
            return
        self._match_index = (self._match_index + direction) % len(self._match_rows)
        row = self._match_rows[self._match_index]
        if self.follow:
            self.action_toggle_follow()
        self.log_widget.scroll_to(y=max(0, row - 2), animate=False)
        self._update_status()

    def action_export(self) -> None:
        """Export the shown log (see module docstring) and say where it went."""
        path = self.export()
        self.notify(f"log exported to {path}", title="Export")

    def export(self) -> Path:
        """Write the export file; return its path."""
        self.export_dir.mkdir(parents=True, exist_ok=True)
        stamp = time.strftime("%Y%m%dT%H%M%S")
        suffix = "_filtered" if self.filter is not None else ""
        target = self.export_dir / f"{self.source_name}{suffix}_{stamp}.log"
        tmp = target.with_name(f".{target.name}.tmp")
        if self.filter is None and self.log_path is not None and self.log_path.is_file():
            shutil.copyfile(self.log_path, tmp)
        else:
            tmp.write_text("".join(ln + "\n" for ln in self._shown), encoding="utf-8")
        os.replace(tmp, target)
        return target
