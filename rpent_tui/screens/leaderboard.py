"""Leaderboard screen (shift+F7, next to Batch): the leaderboard of one or more ``rpent-batch`` results
roots, read from their run records (``rpent.leaderboard.collect``): one row per arm, best first,
with k/N, the rate and its Wilson interval, per-suite rates, wall time and tokens per episode, and
published reference rows from a YAML file marked "published". The highlighted row's per-suite
drill-down (each task's cells as marks) is shown below. ctrl+s writes the same leaderboard as the
static HTML page of ``rpent-batch leaderboard`` (``<first root>/leaderboard.html``).

The roots are re-read on a worker thread (file reads only) every ``POLL_S`` seconds and on ctrl+r,
so a batch running from the command line or the Batch screen is followed as it goes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import DataTable, Input, Label, Static

from .base import LiveScreen
from ..widgets.footer import StableFooter
from ..widgets.stable import StableHeader
from ..widgets.tables import VimDataTable

__all__ = ["LeaderboardScreen", "read_board"]

#: seconds between two reads of the results roots
POLL_S = 10.0
CELL_MARK = {"success": "✓", "failure": "✗", "infra": "!", "pending": "·"}


def read_board(roots_text: str, published_text: str = "") -> dict[str, Any]:
    """The leaderboard document of the roots typed (space-separated) with the published rows file (if any).

    Raises:
        ValueError: no root given, a root or the published file unreadable (the message names it).
    """
    from rpent.leaderboard.collect import build_board
    from rpent.leaderboard.published import load_published

    roots = [Path(r).expanduser() for r in roots_text.split()]
    if not roots:
        raise ValueError("give one or more results roots (space-separated)")
    published = [load_published(Path(p).expanduser()) for p in published_text.split()]
    return build_board(roots, roots[0], published)


def _pct(x: float | None, digits: int = 1) -> str:
    return "-" if x is None else f"{100 * x:.{digits}f}%"


def _ci(o: dict) -> str:
    return "-" if o.get("wilson_low") is None else f"[{100 * o['wilson_low']:.1f}, {100 * o['wilson_high']:.1f}]"


class LeaderboardScreen(LiveScreen):
    """The Leaderboard screen (shift+F7)."""

    BINDING_GROUP_TITLE = "Leaderboard"
    BINDINGS = [
        Binding("ctrl+r", "reload", "Reload", id="leaderboard-reload", tooltip="Read the results roots now"),
        Binding("ctrl+s", "write_page", "Write HTML page", id="leaderboard-page",
                tooltip="Write <first root>/leaderboard.html (as rpent-batch leaderboard does)"),
    ]
    DEFAULT_CSS = """
    #lb-form { height: auto; }
    #lb-inputs { height: auto; }
    #lb-inputs > Vertical { height: auto; }
    #lb-form Label { color: $text-muted; padding: 0 1; }
    #lb-state { height: auto; padding: 0 1; }
    #lb-board { height: 1fr; }
    #lb-suites { height: 1fr; }
    """

    board: dict[str, Any] | None = None

    def compose(self) -> ComposeResult:
        yield StableHeader()
        with Vertical(id="lb-form"):
            with Horizontal(id="lb-inputs"):
                with Vertical():
                    yield Label("Results roots (space-separated)")
                    yield Input(value=str(Path(self.app.session.output_dir) / "batches" / "results"), id="lb-roots")
                with Vertical():
                    yield Label("Published rows (YAML, optional)")
                    yield Input(value="", placeholder="experiments/published/rpent_libero_pro.yaml", id="lb-published")
        yield Static("", id="lb-state")
        board = VimDataTable(id="lb-board", cursor_type="row")
        board.border_title = "Leaderboard (best first; Wilson 95%)"
        yield board
        suites = VimDataTable(id="lb-suites", cursor_type="row")
        suites.border_title = "Per suite (highlighted row): ✓ success ✗ failure ! infra · pending"
        yield suites
        yield StableFooter()

    def on_mount(self) -> None:
        self.query_one("#lb-roots", Input).cursor_position = 0
        self.set_interval(POLL_S, self.action_reload)
        self.action_reload()

    # -- actions ---------------------------------------------------------------------------------------
    def action_reload(self) -> None:
        """Read the roots (on a worker thread)."""
        self._read(self.query_one("#lb-roots", Input).value, self.query_one("#lb-published", Input).value)

    def action_write_page(self) -> None:
        """Write the static HTML page of the board shown."""
        from rpent.leaderboard.html import render_html, write_page

        if not self.board or not self.board["roots"]:
            self.notify("no leaderboard to write yet", severity="warning", title="Leaderboard")
            return
        path = Path(self.board["roots"][0]["root"]) / "leaderboard.html"
        try:
            write_page(path, render_html(self.board))
        except OSError as exc:
            self.notify(f"cannot write {path}: {exc}", severity="error", title="Leaderboard")
            return
        self.notify(f"wrote {path}", title="Leaderboard")

    @work(thread=True, exclusive=True, group="leaderboard-read", exit_on_error=False)
    def _read(self, roots: str, published: str) -> None:
        from textual.worker import get_current_worker

        try:
            board, error = read_board(roots, published), None
        except (ValueError, OSError) as exc:
            board, error = None, str(exc)
        if not get_current_worker().is_cancelled:  # a newer read replaced it, or the app is closing
            self.app.call_from_thread(self.show_board, board, error)

    # -- rendering ---------------------------------------------------------------------------------------
    def show_board(self, board: dict[str, Any] | None, error: str | None = None) -> None:
        """Render ``board`` (or the error that kept it from being read)."""
        from rpent.leaderboard.markdown import ranked, short_suite

        table = self.query_one("#lb-board", DataTable)
        state = self.query_one("#lb-state", Static)
        if board is None:
            state.update(f"[b]cannot read the leaderboard[/b]: {error}")
            table.clear(columns=True)
            self.query_one("#lb-suites", DataTable).clear(columns=True)
            self.board = None
            return
        self.board = board
        self.rows = ranked(board["rows"])
        cursor = table.cursor_coordinate
        table.clear(columns=True)
        table.add_columns("#", "arm", "k/N", "success", "Wilson 95%", *map(short_suite, board["suites"]),
                          "wall s", "tokens/ep", "infra/pend")
        for i, r in enumerate(self.rows, 1):
            o = r["overall"]
            name = Text(r["name"] + (" (published)" if r["kind"] == "published" else ""),
                        style="italic" if r["kind"] == "published" else "bold")
            suites = []
            for s in board["suites"]:
                so = r["suites"].get(s)
                suites.append(f"{so['k']}/{so['n']}" if so and so["planned"] else "-")
            wall = r.get("wall_s_per_episode") if r["kind"] == "published" else o.get("median_wall_s")
            tokens = o.get("tokens_out_per_episode")
            if o.get("tokens_in_per_episode") is not None:
                tokens = (o.get("tokens_in_per_episode") or 0) + (tokens or 0)
            table.add_row(str(i), name, f"{'?' if o['k'] is None else o['k']}/{o['n']}",
                          r.get("rate_published") or _pct(o["rate"]), _ci(o), *suites,
                          "-" if wall is None else f"{wall:.1f}", "-" if tokens is None else f"{tokens:,.0f}",
                          f"{o.get('infra') or 0}/{o.get('pending') or 0}", key=r["id"])
        if cursor.row < table.row_count:
            table.cursor_coordinate = cursor
        runs = sum(r["kind"] == "run" for r in board["rows"])
        state.update(f"{runs} arm(s) from {len(board['roots'])} root(s), "
                     f"{len(board['rows']) - runs} published row(s) · read {board['generated_at']}")
        self._show_suites(table.cursor_row)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.data_table.id == "lb-board":
            self._show_suites(event.cursor_row)

    def _show_suites(self, index: int) -> None:
        table = self.query_one("#lb-suites", DataTable)
        table.clear(columns=True)
        if not self.board or not 0 <= index < len(self.rows):
            return
        r = self.rows[index]
        table.add_columns("suite", "k/N", "success", "Wilson 95%", "median wall s", "cells by task (seeds in order)")
        if r["kind"] == "published":
            table.add_row("(published, not rerun here)", "", "", "", "", r.get("source") or "")
            return
        for s in self.board["suites"]:
            so = r["suites"].get(s)
            if not so or not so["planned"]:
                continue
            marks = "  ".join(f"t{t['task']} " + "".join(CELL_MARK.get(c["status"], "?") for c in t["cells"])
                              for t in r["tasks"] if t["suite"] == s)
            table.add_row(s, f"{so['k']}/{so['n']}", _pct(so["rate"]), _ci(so),
                          "-" if so["median_wall_s"] is None else f"{so['median_wall_s']:.1f}", marks)
