"""Explore screen (F9): exploration sessions and attempts (``rpent --explore``; RPent reference §6.3).

Left: the explorations under the logs directory (cell, status, sessions, archived attempts,
solved). Right: the selected exploration's sessions (attempts used, env steps and recorded tool
steps of its run record, outcome), its archived failed attempts (reason and the lever the next
attempt changes) and a summary (current session/attempt while running, merge result, memory
inbox). While the selected exploration runs the view refreshes every
:data:`REFRESH_S` seconds; reading happens in thread workers, so the UI never blocks on disk.
Watch-only: explorations are started with ``rpent --explore`` (reference: the Dashboard can watch
exploration).
"""

from __future__ import annotations

from pathlib import Path

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import DataTable, Static

from ..widgets.footer import StableFooter

from .base import LiveScreen
from ..services import explore as ex
from ..widgets.tables import VimDataTable
from ..widgets.stable import StableHeader

__all__ = ["ExploreScreen", "REFRESH_S", "exploration_row", "session_row", "attempt_row", "summary_text"]

#: Seconds between two re-reads of a running exploration.
REFRESH_S = 1.0

_STATUS_STYLE = {"running": "cyan", "finished": "white", "unknown": "dim"}
_OUTCOME_STYLE = {"running": "cyan", "solved": "green", "not solved": "red", "error": "red", "timeout": "yellow",
                  "interrupted": "magenta"}


def exploration_row(e: ex.ExploreSummary) -> tuple[str, ...]:
    """Cells of one exploration (markup)."""
    solved = {True: "[green]solved[/]", False: "[red]not solved[/]", None: "-"}[e.solved]
    return (e.cell, f"[{_STATUS_STYLE.get(e.status, 'white')}]{e.status}[/]", str(e.sessions),
            str(e.attempts_archived), solved, e.date.strftime("%Y-%m-%d %H:%M:%S") if e.date else "-")


def session_row(s: ex.SessionRow) -> tuple[str, ...]:
    """Cells of one session (markup)."""
    return (str(s.session), f"[{_OUTCOME_STYLE.get(s.outcome, 'white')}]{s.outcome}[/]", str(s.attempts),
            "-" if s.env_steps is None else str(s.env_steps), str(s.tool_steps), (s.error or "")[:60])


def attempt_row(a: ex.AttemptRow) -> tuple[str, ...]:
    """Cells of one archived attempt."""
    where = f"{a.session if a.session is not None else '?'}.{a.attempt_in_session or '?'}"
    return (str(a.attempt), where, a.reason[:60], a.changed_lever[:60], str(a.tool_calls))


def summary_text(e: ex.Exploration) -> Text:
    """The summary pane: status, current session/attempt, merge result, inbox."""
    t = Text()
    t.append(f"{e.cell}  ", style="bold")
    t.append(e.status, style=_STATUS_STYLE.get(e.status, "white"))
    if e.current:
        t.append(f"  · session {e.current.get('session')}/{e.sessions_max or '?'}, attempt "
                 f"{e.current.get('attempt')}/{e.attempts_per_session or 'unlimited'}")
    t.append("\n")
    if e.solved or (e.solved is not None and e.status == "finished"):
        t.append("solved\n" if e.solved else "not solved\n", style="green" if e.solved else "red")
    if e.error:
        t.append(f"error: {e.error}\n", style="red")
    if e.merged:
        m = e.merged
        t.append(f"memory merged: {len(m.get('created') or [])} new leaf(s), evidence merged into "
                 f"{len(m.get('evidence_merged') or [])}, {len(m.get('conflicts') or [])} conflict(s) archived"
                 f"{', audit + recipe published' if m.get('task_pair') else ''}\n", style="green")
    elif e.status == "finished" and e.solved:
        t.append("memory not merged (--no-auto-merge-memory, or the merge was refused)\n", style="yellow")
    if e.memory_inbox:
        t.append(f"inbox {e.memory_inbox}: {', '.join(e.inbox_files) or 'empty'}\n", style="dim")
    t.append(f"{e.path}", style="dim")
    return t


class ExploreScreen(LiveScreen):
    """The Explore screen (F9)."""

    BINDING_GROUP_TITLE = "Explore"
    DEFAULT_CSS = """
    #explore-body { height: 1fr; }
    #explorations { width: 2fr; }
    #explore-right { width: 3fr; }
    #explore-sessions { height: 1fr; }
    #explore-attempts { height: 1fr; }
    #explore-summary { height: auto; max-height: 10; padding: 0 1; }
    """
    BINDINGS = [
        Binding("r", "reload", "Reload", id="explore-reload", tooltip="Rescan the logs directory for explorations"),
        Binding("a", "focus_attempts", "Attempts", id="explore-attempts-focus", tooltip="Focus the attempt list"),
        Binding("e", "focus_explorations", "Explorations", id="explore-list-focus",
                tooltip="Focus the exploration list"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.explorations: list[ex.ExploreSummary] = []
        self.current: ex.Exploration | None = None
        self.selected: Path | None = None
        self._timer = None

    def compose(self) -> ComposeResult:
        yield StableHeader()
        with Horizontal(id="explore-body"):
            table = VimDataTable(id="explorations", cursor_type="row", zebra_stripes=True)
            table.border_title = f"Explorations · {self.app.logs_dir}"
            yield table
            with Vertical(id="explore-right"):
                sessions = VimDataTable(id="explore-sessions", cursor_type="row", zebra_stripes=True)
                sessions.border_title = "Sessions"
                yield sessions
                attempts = VimDataTable(id="explore-attempts", cursor_type="row", zebra_stripes=True)
                attempts.border_title = "Archived attempts"
                yield attempts
                yield Static("no exploration selected", id="explore-summary")
        yield StableFooter(compact=True, show_command_palette=False)

    def on_mount(self) -> None:
        self.query_one("#explorations", DataTable).add_columns("Cell", "Status", "Sessions", "Attempts", "Solved",
                                                               "Date")
        self.query_one("#explore-sessions", DataTable).add_columns("Session", "Outcome", "Attempts", "Env steps",
                                                                   "Tool steps", "Error")
        self.query_one("#explore-attempts", DataTable).add_columns("#", "Session.attempt", "Reason",
                                                                   "Changed lever", "Calls")
        self.query_one("#explorations", DataTable).focus()
        self._timer = self.set_interval(REFRESH_S, self._tick)
        self.action_reload()

    # -- loading (thread workers) ---------------------------------------------------------------
    def action_reload(self) -> None:
        """Rescan the logs directory for explorations."""
        self._scan(self.app.logs_dir)

    @work(thread=True, exclusive=True, group="explore-scan", exit_on_error=False)
    def _scan(self, root: Path) -> None:
        found = ex.list_explorations(root)
        self.app.call_from_thread(self._show_list, found)

    def _show_list(self, found: list[ex.ExploreSummary]) -> None:
        self.explorations = found
        table = self.query_one("#explorations", DataTable)
        keep = self.selected
        table.clear()
        for i, e in enumerate(found):
            table.add_row(*exploration_row(e), key=str(i))
        table.border_subtitle = f"{len(found)} exploration(s)"
        if not found:
            self.query_one("#explore-summary", Static).update(
                f"no exploration under {self.app.logs_dir} (start one with rpent --explore ... --output-dir DIR "
                "inside it; --logs-dir picks the directory)")
            return
        index = next((i for i, e in enumerate(found) if e.path == keep), 0)
        if index:
            table.move_cursor(row=index, animate=False)
        self._load(found[index].path)

    @work(thread=True, exclusive=True, group="explore-load", exit_on_error=False)
    def _load(self, path: Path) -> None:
        try:
            e, error = ex.read_exploration(path), None
        except (ex.RecordError, OSError, ValueError) as exc:
            e, error = None, f"{type(exc).__name__}: {exc}"
        self.app.call_from_thread(self._show, path, e, error)

    def _show(self, path: Path, e: ex.Exploration | None, error: str | None) -> None:
        if self.selected is not None and path != self.selected:
            return  # a newer selection was made meanwhile: its own load follows
        self.selected = path
        if e is None:
            self.query_one("#explore-summary", Static).update(Text(f"{path}: {error}", style="red"))
            return
        self.current = e
        sessions = self.query_one("#explore-sessions", DataTable)
        row = sessions.cursor_row
        sessions.clear()
        for s in e.sessions:
            sessions.add_row(*session_row(s), key=str(s.session))
        sessions.border_subtitle = f"{len(e.sessions)}/{e.sessions_max or '?'}"
        if 0 < row < len(e.sessions):
            sessions.move_cursor(row=row, animate=False)
        attempts = self.query_one("#explore-attempts", DataTable)
        row = attempts.cursor_row
        attempts.clear()
        for a in e.attempts:
            attempts.add_row(*attempt_row(a), key=str(a.attempt))
        attempts.border_subtitle = f"{len(e.attempts)} archived"
        if 0 < row < len(e.attempts):
            attempts.move_cursor(row=row, animate=False)
        self.query_one("#explore-summary", Static).update(summary_text(e))

    def _tick(self) -> None:
        """Re-read the selected exploration while it runs (and rescan while none is known)."""
        if self.current is not None and self.current.status == "running" and self.selected is not None:
            self._load(self.selected)
        elif not self.explorations:
            self._scan(self.app.logs_dir)

    # -- events ----------------------------------------------------------------------------------
    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.data_table.id != "explorations" or event.row_key is None or event.row_key.value is None:
            return
        index = int(event.row_key.value)
        if index < len(self.explorations) and self.explorations[index].path != self.selected:
            self.selected = self.explorations[index].path
            self._load(self.selected)

    def handle_service_event(self, event: object) -> None:
        """Explorations are read from disk; nothing to do for live events."""

    # -- actions ---------------------------------------------------------------------------------
    def action_focus_attempts(self) -> None:
        """Focus the attempt list."""
        self.query_one("#explore-attempts", DataTable).focus()

    def action_focus_explorations(self) -> None:
        """Focus the exploration list."""
        self.query_one("#explorations", DataTable).focus()
