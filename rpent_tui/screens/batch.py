"""Batch screen: launch ``rpent-batch`` on a results root, watch its matrix (cells colored by
state), its progress and the live report (leaderboard per arm), read from the root's files.

The batch runs as a supervised subprocess (``services.batch.BatchLauncher``); the screen polls
the results root every ``POLL_S`` seconds on a worker thread (file reads only), so it also
shows a batch started from the command line (point the results root at it and press ctrl+u).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import DataTable, Input, Label, Log, ProgressBar, Static

from .base import LiveScreen
from ..widgets.footer import StableFooter
from ..services.batch import CELL_STATES, BatchJobError, BatchLauncher, BatchOutput, MatrixSnapshot, batch_argv, \
    read_snapshot
from ..widgets.tables import VimDataTable
from ..widgets.stable import StableHeader

__all__ = ["BatchScreen"]

#: seconds between two reads of the results root
POLL_S = 2.0
#: theme variables per cell state (never hard-coded colours: themes switch with ctrl+t)
STATE_STYLE = {"success": "$success", "failure": "$error", "infra": "$warning", "running": "$accent",
               "pending": "$text-muted", "absent": "$text-muted"}
STATE_MARK = {"success": "✓", "failure": "✗", "infra": "!", "running": "▶", "pending": "·", "absent": " "}
DEFAULT_FLAGS = "--suites libero_object --tasks 0-1 --seeds 0-1 --parallel 2 --no-video"


class BatchScreen(LiveScreen):
    """The Batch screen (F7)."""

    BINDING_GROUP_TITLE = "Batch"
    BINDINGS = [
        Binding("ctrl+r", "launch", "Launch batch", id="batch-launch",
                tooltip="Run rpent-batch with these flags on this results root (resumes it)"),
        Binding("ctrl+x", "stop", "Stop batch", id="batch-stop", tooltip="Stop the running batch (resumable)"),
        Binding("ctrl+u", "reload", "Reload", id="batch-reload", tooltip="Read the results root now"),
    ]
    DEFAULT_CSS = """
    #batch-body { height: 1fr; }
    #batch-left { width: 3fr; }
    #batch-right { width: 2fr; }
    #batch-form Label { color: $text-muted; padding: 0 1; }
    #batch-form { height: auto; }
    #batch-state { height: auto; padding: 0 1; }
    #batch-progress { padding: 0 1; }
    #batch-matrix { height: 1fr; }
    #batch-report { height: 1fr; }
    #batch-log { height: 1fr; }
    """

    def compose(self) -> ComposeResult:
        yield StableHeader()
        with Horizontal(id="batch-body"):
            with Vertical(id="batch-left"):
                with Vertical(id="batch-form"):
                    yield Label("rpent-batch flags (matrix, arm, run flags)")
                    yield Input(value=DEFAULT_FLAGS, id="batch-flags")
                    yield Label("Results root (resumed when it exists)")
                    yield Input(value=str(self._default_root()), id="batch-root")
                yield Static("idle", id="batch-state")
                yield ProgressBar(total=1, show_eta=True, id="batch-progress")
                matrix = VimDataTable(id="batch-matrix", cursor_type="cell")
                matrix.border_title = "Matrix (✓ success ✗ failure ! infra ▶ running · pending)"
                yield matrix
            with Vertical(id="batch-right"):
                report = VimDataTable(id="batch-report", cursor_type="row")
                report.border_title = "Report (per arm, Wilson 95%)"
                yield report
                log = Log(max_lines=2000, id="batch-log")
                log.border_title = "rpent-batch output"
                yield log
        yield StableFooter()

    # -- state -------------------------------------------------------------------------------------------
    @property
    def launcher(self) -> BatchLauncher:
        """One launcher per app (kept on the app so it survives screen switches)."""
        app = self.app
        if getattr(app, "batch_launcher", None) is None:
            app.batch_launcher = BatchLauncher(app.post_event, Path(app.session.output_dir) / "batches")
        return app.batch_launcher

    def _default_root(self) -> Path:
        return Path(self.app.session.output_dir) / "batches" / "results"

    def on_mount(self) -> None:
        self.query_one("#batch-report", DataTable).add_columns("arm", "k/N", "rate", "Wilson 95%", "infra",
                                                               "pend")
        flags = self.query_one("#batch-flags", Input)
        flags.focus()
        flags.cursor_position = 0  # show the start of the flags, not a view scrolled to the end
        self.query_one("#batch-root", Input).cursor_position = 0
        self.set_interval(POLL_S, self.action_reload)
        self.action_reload()

    def root(self) -> Path:
        """The results root of the form."""
        return Path(self.query_one("#batch-root", Input).value.strip()).expanduser()

    # -- actions -------------------------------------------------------------------------------------------
    def action_launch(self) -> None:
        """Start rpent-batch with the form's flags and results root."""
        launcher = self.launcher
        try:
            if launcher.running:
                raise BatchJobError("a batch is already running; stop it with ctrl+x first")
            argv = batch_argv(self.query_one("#batch-flags", Input).value, self.root())
        except BatchJobError as exc:
            self.notify(str(exc), severity="error", title="Batch")
            return
        self.query_one("#batch-log", Log).clear()
        self.query_one("#batch-log", Log).write_line("$ " + " ".join(argv[2:]))
        self.app.run_in_trio(launcher.run, argv, self.root(), description="rpent-batch")
        self.query_one("#batch-state", Static).update(f"starting rpent-batch on {self.root()}")

    def action_stop(self) -> None:
        """Stop the running batch; its finished cells stay and a re-launch resumes it."""
        if not self.launcher.cancel():
            self.notify("no batch is running", severity="warning")

    def action_reload(self) -> None:
        """Read the results root (on a worker thread)."""
        self._read(self.root())

    @work(thread=True, exclusive=True, group="batch-read", exit_on_error=False)
    def _read(self, root: Path) -> None:
        snap = read_snapshot(root)
        self.app.call_from_thread(self.show_snapshot, snap)

    # -- rendering -----------------------------------------------------------------------------------------
    def show_snapshot(self, snap: MatrixSnapshot | None) -> None:
        """Render the matrix, the progress and the report of ``snap`` (None: no batch there yet)."""
        matrix = self.query_one("#batch-matrix", DataTable)
        report = self.query_one("#batch-report", DataTable)
        state = self.query_one("#batch-state", Static)
        launcher = self.launcher
        run_state = f"batch {launcher.state}" + (f" · pid {launcher.pid}" if launcher.running and launcher.pid else "")
        if snap is None:
            matrix.clear(columns=True)
            report.clear()
            state.update(f"{run_state} · no results in {self.root()} yet")
            return
        cursor = matrix.cursor_coordinate
        matrix.clear(columns=True)
        arm_w = max([3] + [len(r[0]) for r in snap.rows])
        suite_w = max([5] + [len(r[1].removeprefix("libero_")) for r in snap.rows])
        matrix.add_column("arm", width=arm_w)
        matrix.add_column("suite", width=suite_w)
        matrix.add_column("task", width=4)
        matrix.add_columns(*snap.columns)
        for arm, suite, task, cells in snap.rows:
            matrix.add_row(arm, suite.removeprefix("libero_"), str(task),
                           *[Text(STATE_MARK[s], style=self._style(s)) for s in cells])
        if cursor.row < matrix.row_count:
            matrix.cursor_coordinate = cursor
        self.query_one("#batch-progress", ProgressBar).update(total=max(snap.total, 1), progress=snap.finished)
        counts = " ".join(f"{s} {snap.counts[s]}" for s in CELL_STATES if snap.counts.get(s))
        state.update(f"{run_state} · {snap.finished}/{snap.total} cells · {counts}")
        report.clear()
        for a in snap.report["arms"]:
            o = a["overall"]
            ci = "-" if o["wilson_low"] is None else f"[{100 * o['wilson_low']:.1f}, {100 * o['wilson_high']:.1f}]"
            rate = "-" if o["rate"] is None else f"{100 * o['rate']:.1f}%"
            report.add_row(a["arm"], f"{o['k']}/{o['n']}", rate, ci, str(o["infra"]), str(o["pending"]))

    def _style(self, state: str) -> str:
        variables = self.app.theme_variables
        return f"bold {variables.get(STATE_STYLE[state].lstrip('$'), '')}".strip()

    def handle_service_event(self, event: Any) -> None:
        """Stream batch output; re-read the root when it ends."""
        if not isinstance(event, BatchOutput):
            return
        if event.lines:
            self.query_one("#batch-log", Log).write_lines(event.lines)
        if event.state != "running":
            self.notify(f"batch {event.state}" + (f" (exit {event.returncode})" if event.returncode is not None else ""),
                        severity="information" if event.state == "succeeded" else "warning", title="Batch")
            self.action_reload()
