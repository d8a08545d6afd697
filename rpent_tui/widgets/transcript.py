"""The planner transcript pane: text, thinking, tool calls with arguments, tool results, operator lines.

A line-based ``ScrollView`` that keeps the events and renders only the rows on screen (Textual's
``Log`` model; a ``RichLog`` rendered every line on arrival and fell behind at 200 events/s);
batches of run events are appended as they arrive, and the pane follows the end only while the
operator has not scrolled up (elia's transcript model). Every tool result is one line with the
fields an operator reads, rounded (``services.tool_summary``); Enter on a selected result (n/p) shows
its raw JSON.
``render_event`` and ``raw_text`` are pure and used by tests.
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Iterable, Mapping
from typing import Any

from rich._wrap import divide_line  # Rich's own line breaking (what Text.wrap uses)
from rich.cells import cell_len
from rich.segment import Segment
from rich.text import Text
from textual.binding import Binding
from textual.cache import LRUCache
from rich.style import Style
from textual.geometry import Region, Size
from textual.scroll_view import ScrollView
from textual.strip import Strip

from rpent.display import printable

from ..services.tool_summary import summarize_tool_result

__all__ = ["TranscriptView", "render_event", "raw_text", "summarize_result", "MAX_RESULT_CHARS"]

#: Tool results and arguments are cut to this many characters in the pane (full text is in the run record).
MAX_RESULT_CHARS = 400


def _compact(value: Any, limit: int = MAX_RESULT_CHARS) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False, default=str, separators=(", ", ": "))
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def summarize_result(result: Any, tool: str | None = None) -> str | None:
    """The one-line summary of a tool result (``services.tool_summary``: every tool, numbers rounded to
    what matters), or None when the result is not a dict (the pane then shows its compact JSON)."""
    return summarize_tool_result(result, tool)


def render_event(event: Mapping[str, Any]) -> Text | None:
    """One transcript line for a run event (None for events the transcript does not show); terminal
    control characters in it (a code cell's output, a model's text) are shown, not sent to the terminal."""
    line = _render_event(event)
    if line is not None:
        line.plain = printable(line.plain)  # same length: the styles stay on their characters
    return line


def _render_event(event: Mapping[str, Any]) -> Text | None:
    kind = event.get("kind")
    if kind == "status":
        return Text.assemble(("● ", "bold"), (f"{event.get('state', '')}", "bold"),
                             (f"  {event.get('detail', '')}" if event.get("detail") else "", "dim"))
    if kind == "finished":
        outcome = event.get("outcome") or {}
        ok = outcome.get("environment_success")
        label = outcome.get("label") or ""
        verdict = (outcome.get("operator_verdict") or {}).get("answer")
        return Text.assemble(("■ finished  ", "bold"),
                             (f"{label}  " if label else "", "bold green" if label == "succeeded" else "bold red"),
                             (f"operator: {verdict}  " if verdict else "", "bold magenta"),
                             ("environment success" if ok else "environment success unknown" if ok is None and
                              "environment_success" in outcome else "environment not solved",
                              "green" if ok else "yellow" if ok is None else "red"),
                             (f"  disagreement: {outcome['disagreement']}" if outcome.get("disagreement") else "",
                              "bold yellow"),
                             (f"  {outcome.get('error')}" if outcome.get("error") else "", "red"))
    if kind == "operator_request":
        event = {"event": "request", **event}
    elif kind not in (None, "planner"):
        return None
    sub = event.get("event")
    if sub == "text":
        return Text(str(event.get("text", "")))
    if sub == "thinking":
        return Text(f"(thinking) {event.get('text', '')}", style="dim italic")
    if sub == "tool_call":
        return Text.assemble(("→ ", "bold cyan"), (str(event.get("name", "?")), "bold cyan"),
                             (f"({_compact(event.get('args', {}))})", "cyan"))
    if sub == "tool_result":
        result = event.get("result")
        is_error = isinstance(result, Mapping) and "error" in result
        name = str(event.get("name") or "")
        summary = summarize_result(result, name)
        return Text.assemble(("← ", "bold red" if is_error else "bold green"),
                             (f"{name}: " if name else "", "bold red" if is_error else "bold green"),
                             (summary if summary is not None else _compact(result), "red" if is_error else "green"))
    if sub == "request":
        choices = "/".join(event.get("choices") or [])
        return Text.assemble(("? operator: ", "bold magenta"), (str(event.get("prompt", "")), "magenta"),
                             (f"  [{choices}]" if choices else "", "dim"))
    if sub == "operator_message":
        return Text.assemble(("» you: ", "bold yellow"), (str(event.get("text", "")), "yellow"))
    if sub == "interrupt":
        return Text("⏹ interrupt requested", style="bold yellow")
    if sub == "usage":
        return None
    return Text(_compact({k: v for k, v in event.items() if k != "kind"}), style="dim")


def raw_text(event: Mapping[str, Any]) -> Text:
    """The expanded form of a transcript line: the header line, then the event's raw JSON (for a tool
    result: its full ``result``; indented, one key per line)."""
    head = render_event(event) or Text("")
    payload = event.get("result") if event.get("event") == "tool_result" else \
        {k: v for k, v in event.items() if k not in ("kind", "images")}
    try:
        body = json.dumps(payload, ensure_ascii=False, default=str, indent=2)
    except (TypeError, ValueError):
        body = repr(payload)
    return Text.assemble(head, "\n", (printable(body), "dim"))


def _line_spans(plain: str, width: int) -> tuple[tuple[int, int], ...]:
    """(start, end) character ranges of ``plain`` word-wrapped at ``width`` cells (Rich's own line
    breaking, ``rich._wrap.divide_line``, as ``Text.wrap`` uses); ``\\n`` always breaks. A tuple of
    int tuples: the garbage collector stops tracking it (see ``TranscriptView``)."""
    spans: list[tuple[int, int]] = []
    pos = 0
    for part in plain.split("\n"):
        if not part:
            spans.append((pos, pos))
        elif cell_len(part) <= width:  # fits (most events): divide_line would find no break; ~10x cheaper
            spans.append((pos, pos + len(part)))
        else:
            cuts = [0, *divide_line(part, width, fold=True), len(part)]
            spans.extend((pos + a, pos + b) for a, b in zip(cuts, cuts[1:]) if b > a)
        pos += len(part) + 1
    return tuple(spans)


class _Entry:
    """One transcript line (event): its plain text and wrapping at the view's current width. The
    styled ``Text`` is rendered again from the event when its rows are painted (``_text``)."""

    __slots__ = ("serial", "event", "plain", "expanded", "spans")

    def __init__(self, serial: int, event: Mapping[str, Any], plain: str) -> None:
        self.serial, self.event, self.plain, self.expanded = serial, event, plain, False
        self.spans: tuple[tuple[int, int], ...] = ()


class TranscriptView(ScrollView, can_focus=True):
    """Scrollable, streaming planner transcript that renders only the rows on screen.

    Appending a batch of events costs a word-wrap of their plain text (no Rich rendering); styled
    rows are rendered when they scroll into view and cached (an LRU of the final strips, base style
    applied). A ``RichLog`` renders every line at write time and copies its whole line list once
    over ``max_lines``, which made the Run screen fall behind at 200 events/s (screen
    switches took seconds). The newest ``MAX_ENTRIES`` events are kept (the run record has all of
    them). The view follows the end while the operator has not scrolled up, and re-wraps on a width
    change. A batch scrolls the pane before it is painted, so it costs one repaint, not two.

    Garbage-collector load (a full collection of the app's objects took 100-300 ms while
    streaming, and a key pressed meanwhile waited for it): an entry keeps its event, its plain text
    and its wrap as int tuples, none of which the collector keeps tracking; the styled ``Text`` of
    the rows on screen and the strips of the last few screens are in small LRU caches.

    Keys: j/k/g/G scroll; n/p select the next/previous tool result; Enter shows the selected
    result's raw JSON (again: the summary); E expands or collapses every tool result.
    """

    BINDINGS = [
        Binding("j", "scroll_down", "Down", show=False, id="transcript-down"),
        Binding("k", "scroll_up", "Up", show=False, id="transcript-up"),
        Binding("g", "scroll_home", "Top", show=False, id="transcript-top"),
        Binding("G", "scroll_end", "Bottom", show=False, id="transcript-bottom"),
        Binding("n", "select_result(1)", "Next result", show=False, id="transcript-next-result"),
        Binding("p", "select_result(-1)", "Prev result", show=False, id="transcript-prev-result"),
        Binding("enter", "toggle_raw", "Raw JSON", id="transcript-raw", show=False,
                tooltip="Show the selected tool result's raw JSON (n/p select)"),
        Binding("E", "toggle_all_raw", "Expand all", show=False, id="transcript-raw-all"),
    ]

    #: No scrollbar (a pager's convention): a thumb that appears after a resize drew a lone partial
    #: block ("▆") at the pane's edge; the position is the border subtitle instead.
    DEFAULT_CSS = "TranscriptView { overflow-x: hidden; overflow-y: scroll; scrollbar-size-vertical: 0; }"

    #: Border subtitle: the keys, after the position (``following`` or ``rows A-B/N · G follows``).
    HINT = "n/p tool result · ⏎ raw JSON"

    #: Events kept in the pane (the oldest are dropped in chunks of ``TRIM_CHUNK``).
    MAX_ENTRIES = 4000
    TRIM_CHUNK = 500
    #: Rendered rows (strips) and styled entry texts kept: a few screens' worth (120x40: ~38 rows).
    ROW_CACHE = 128
    TEXT_CACHE = 256

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.border_subtitle = self.HINT
        self._entries: list[_Entry] = []
        self._starts: list[int] = []  # first row of each entry
        self._total = 0
        self._serial = 0
        self._wrap_width = 0
        self._selected: int | None = None  # serial of the selected tool result
        self._cache: LRUCache[tuple, Strip] = LRUCache(self.ROW_CACHE)
        self._texts: LRUCache[tuple[int, bool], Text] = LRUCache(self.TEXT_CACHE)
        self._follow = True
        self._follow_size = Size(0, 0)
        self._paint_style: Style | None = None

    # -- model --------------------------------------------------------------------------------
    def clear(self) -> "TranscriptView":
        """Remove every line."""
        self._entries.clear()
        self._starts.clear()
        self._total = 0
        self._selected = None
        self._cache.clear()
        self._texts.clear()
        self._update_size()
        self.refresh()
        return self

    def add_events(self, events: Iterable[Mapping[str, Any]]) -> int:
        """Append the displayable events; returns how many lines (events) were added. Follows the end
        when the view was at (or within 2 rows of) the end."""
        near_end = self._follow
        n = 0
        width = self._width()
        for event in events:
            line = render_event(event)
            if line is None:
                continue
            self._serial += 1
            entry = _Entry(self._serial, event, line.plain)
            entry.spans = _line_spans(line.plain, width)
            self._texts[(entry.serial, False)] = line  # the newest lines are the ones painted next
            self._entries.append(entry)
            self._starts.append(self._total)
            self._total += len(entry.spans)
            n += 1
        if n:
            if len(self._entries) > self.MAX_ENTRIES + self.TRIM_CHUNK:
                self._trim()
            self._update_size()
            if near_end:
                self._follow_end()
            else:
                self._show_position()
            self.refresh()
        return n

    def _follow_end(self) -> None:
        """Scroll to the end now when laid out (the batch is then painted once, at its final position;
        a deferred ``scroll_end`` painted it twice: first at the old position, then scrolled), else
        after the next refresh."""
        if self.is_mounted and self.container_size and self.size == self._follow_size:
            self.scroll_to(y=self.max_scroll_y, animate=False, immediate=True)
        else:
            self.scroll_end(animate=False, immediate=False, x_axis=False)

    def _trim(self) -> None:
        drop = len(self._entries) - self.MAX_ENTRIES
        rows = self._starts[drop]
        del self._entries[:drop]
        self._restart()
        self.scroll_to(y=max(0, self.scroll_y - rows), animate=False, immediate=True)

    def _restart(self) -> None:
        """Recompute the row index (after a trim, a re-wrap or an expansion)."""
        self._starts, total = [], 0
        for entry in self._entries:
            self._starts.append(total)
            total += len(entry.spans)
        self._total = total

    def _width(self) -> int:
        return max(self.scrollable_content_region.width, 20) if self.is_mounted else 80

    def _update_size(self) -> None:
        """Set the scrollable size without a screen layout pass: the pane's own size never depends on
        its content (``1fr``), so only its scrollbar and scroll range change. Assigning ``virtual_size``
        (a ``layout=True`` reactive) would reflow and repaint the whole screen on every batch of
        events (measured: ~4x the cost of the transcript repaint itself at 120x40)."""
        self._wrap_width = self._width()
        size = Size(self._wrap_width, self._total)
        if size == self.virtual_size:
            return
        self.set_reactive(TranscriptView.virtual_size, size)
        if self.is_mounted and self.container_size:
            self._scroll_update(size)  # scrollbar thumb and the clamp of scroll_y (what a layout pass would do)

    def _rewrap(self, entries: Iterable[_Entry] | None = None) -> None:
        width = self._width()
        for entry in self._entries if entries is None else entries:
            entry.spans = _line_spans(entry.plain, width)
        self._restart()
        self._update_size()
        self._cache.clear()
        self.refresh()

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        """Track whether the operator left the end (scrolling up stops following; G or scrolling to
        the end resumes it). Scroll changes from a resize do not count."""
        super().watch_scroll_y(old_value, new_value)
        if self.size == self._follow_size:
            self._follow = new_value >= self.max_scroll_y - 2
        self._show_position()

    def _show_position(self) -> None:
        """The border subtitle: the keys, and where the view is when it does not follow the end."""
        if self._follow or self._total <= self.scrollable_content_region.height:
            text = self.HINT
        else:
            top = int(self.scroll_y)
            bottom = min(self._total, top + self.scrollable_content_region.height)
            text = f"rows {top + 1}-{bottom}/{self._total} · G follows · {self.HINT}"
        if text != self.border_subtitle:
            self.border_subtitle = text

    def on_resize(self) -> None:
        """A new width re-wraps every line (kept, not clipped); a pane that followed the end still does."""
        self._follow_size = self.size
        if self._width() != self._wrap_width:
            self._rewrap()
        if self._follow:
            self.call_after_refresh(lambda: self.scroll_end(animate=False, x_axis=False))

    @property
    def lines(self) -> list[Strip]:
        """Every row as a strip (rendered on demand; tests and exports, not the paint path)."""
        width = self._wrap_width or self._width()
        return [self._render_row(*self._locate(y), width, None) for y in range(self._total)]

    @property
    def entry_count(self) -> int:
        """Events shown (after the trim of the oldest)."""
        return len(self._entries)

    # -- painting -----------------------------------------------------------------------------
    def _locate(self, y: int) -> tuple[_Entry, int]:
        index = bisect.bisect_right(self._starts, y) - 1
        return self._entries[index], y - self._starts[index]

    def _text(self, entry: _Entry) -> Text:
        """The styled text of ``entry`` (its summary line, or its raw JSON when expanded)."""
        key = (entry.serial, entry.expanded)
        text = self._texts.get(key)
        if text is None:
            text = (raw_text(entry.event) if entry.expanded else render_event(entry.event)) or Text("")
            self._texts[key] = text
        return text

    def _row(self, y: int, width: int, style: Style | None) -> Strip:
        """Row ``y`` at ``width`` cells with the base ``style`` applied (cached)."""
        entry, sub = self._locate(y)
        key = (entry.serial, entry.expanded, sub, width, entry.serial == self._selected, style)
        strip = self._cache.get(key)
        if strip is None:
            strip = self._cache[key] = self._render_row(entry, sub, width, style)
        return strip

    def _render_row(self, entry: _Entry, sub: int, width: int, style: Style | None) -> Strip:
        """Render row ``sub`` of ``entry``, padded or cropped to ``width`` cells: one ``Strip`` built
        from its segments (no intermediate strips: their caches hold themselves, i.e. reference
        cycles only the garbage collector frees)."""
        start, end = entry.spans[sub]
        part = self._text(entry)[start:end]
        part.rstrip()
        if entry.serial == self._selected:
            part.stylize("reverse")
        segments = list(part.render(self.app.console))
        cells = part.cell_len
        if cells > width:
            segments = list(Segment.adjust_line_length(segments, width))
        elif cells < width:
            segments.append(Segment(" " * (width - cells)))
        if style is not None:
            segments = list(Segment.apply_style(segments, style))
        return Strip(segments, width)

    def render_lines(self, crop: Region) -> list[Strip]:
        """Rows in ``crop``; the pane's base style is computed once per paint (``rich_style`` walks the
        ancestors: it was a third of the pane's paint time when computed for every row)."""
        self._paint_style = self.rich_style
        try:
            return super().render_lines(crop)
        finally:
            self._paint_style = None

    def render_line(self, y: int) -> Strip:
        """Row ``y`` of the viewport (only rows on screen are ever rendered)."""
        _scroll_x, scroll_y = self.scroll_offset
        width = self.scrollable_content_region.width
        row = scroll_y + y
        style = self._paint_style or self.rich_style
        if row >= self._total or width <= 0:
            return Strip.blank(max(width, 0), style)
        return self._row(row, width, style)

    # -- expansion ----------------------------------------------------------------------------
    def _result_indices(self) -> list[int]:
        return [i for i, e in enumerate(self._entries) if e.event.get("event") == "tool_result"]

    def action_select_result(self, direction: int) -> None:
        """Select the next (1) or previous (-1) tool result and scroll it into view."""
        indices = self._result_indices()
        if not indices:
            self.notify("no tool result in the transcript yet", severity="warning")
            return
        current = next((i for i, e in enumerate(self._entries) if e.serial == self._selected), None)
        if current is None:  # start from the rows on screen: the last result above the bottom
            bottom = self.scroll_y + self.scrollable_content_region.height
            visible = [i for i in indices if self._starts[i] < bottom] or indices
            target = visible[-1] if direction < 0 or current is None else visible[0]
        else:
            later = [i for i in indices if (i > current if direction > 0 else i < current)]
            target = (later[0] if direction > 0 else later[-1]) if later else current
        self._selected = self._entries[target].serial
        self._cache.clear()
        self._scroll_to_entry(target)
        self.refresh()

    def _scroll_to_entry(self, index: int) -> None:
        top, rows = self._starts[index], len(self._entries[index].spans)
        height = max(self.scrollable_content_region.height, 1)
        if top < self.scroll_y or top + min(rows, height) > self.scroll_y + height:
            self.scroll_to(y=max(0, top + min(rows, height) - height), animate=False, immediate=True)

    def action_toggle_raw(self) -> None:
        """Show (or hide again) the raw JSON of the selected tool result (the last one when none)."""
        if self._selected is None:
            self.action_select_result(-1)
        index = next((i for i, e in enumerate(self._entries) if e.serial == self._selected), None)
        if index is None:
            return
        self._set_expanded([self._entries[index]], not self._entries[index].expanded)
        self._scroll_to_entry(index)

    def action_toggle_all_raw(self) -> None:
        """Expand every tool result to its raw JSON, or collapse them all when any is expanded."""
        results = [self._entries[i] for i in self._result_indices()]
        self._set_expanded(results, not any(e.expanded for e in results))

    def _set_expanded(self, entries: list[_Entry], expanded: bool) -> None:
        for entry in entries:
            entry.expanded = expanded
            entry.plain = self._text(entry).plain
        self._rewrap(entries)

    def is_expanded(self, event_index: int) -> bool:
        """Whether entry ``event_index`` (0 = oldest shown) shows its raw JSON."""
        return self._entries[event_index].expanded
