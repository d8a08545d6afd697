"""Services screen: each service's state, endpoint, pid, uptime and last error; its log; restart and stop.

Rows come from ``Session.services`` (shared VLA/SAM3 and each TaskRun's env server, fed by the
supervisor's events). The highlighted service's log is shown in a ``LogView`` (follow, filter,
search, export). Restart/stop run in the trio nursery through the session.
"""

from __future__ import annotations

import time
from typing import Any

from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import DataTable

from .base import LiveScreen
from ..widgets.footer import StableFooter
from rpent.session.model import ServiceLog, ServiceView, SessionChanged
from ..widgets.log_view import LogView
from ..widgets.tables import VimDataTable
from ..widgets.stable import StableHeader

__all__ = ["ServicesScreen", "format_uptime", "service_row"]

#: Shown while the session has no service yet.
EMPTY_HINT = ("no services yet: shared VLA/SAM3 start with the session (--vla-endpoint, --sam3-endpoint or the "
              "checkpoint variables); each TaskRun starts its own env server (env_server@NNNN)")
COLUMNS = ("Service", "Scope", "State", "Endpoint", "PID", "Uptime", "Last error")
STATE_STYLE = {"ready": "green", "starting": "yellow", "pending": "dim", "failed": "bold red", "stopped": "dim"}


def format_uptime(seconds: float | None) -> str:
    """``1h02m``, ``3m05s``, ``12s`` or ``-``."""
    if seconds is None:
        return "-"
    s = int(seconds)
    if s >= 3600:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    if s >= 60:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s}s"


def service_row(view: ServiceView, now: float | None = None) -> tuple[str, ...]:
    """Table cells (markup) of one service."""
    style = STATE_STYLE.get(view.state, "")
    error = (view.last_error or "").splitlines()[0][:80] if view.last_error else ""
    return (view.name, view.scope, f"[{style}]{view.state}[/]" if style else view.state, view.endpoint or "-",
            str(view.pid) if view.pid else "-", format_uptime(view.uptime_s(now)), error)


class ServicesScreen(LiveScreen):
    """The Services screen (F2)."""

    BINDING_GROUP_TITLE = "Services"
    BINDINGS = [
        Binding("r", "restart_service", "Restart", id="service-restart", tooltip="Restart the highlighted service"),
        Binding("x", "stop_service", "Stop", id="service-stop", tooltip="Stop the highlighted service"),
        Binding("l", "focus_log", "Log", id="service-log-focus", tooltip="Focus the log pane"),
    ]

    _shown_lines = 0

    def compose(self) -> ComposeResult:
        yield StableHeader()
        table = VimDataTable(id="services", cursor_type="row", zebra_stripes=True)
        table.border_title = "Services"
        yield table
        log = LogView(self.app.export_dir, id="service-log")
        log.border_title = "Log"
        yield log
        yield StableFooter(compact=True, show_command_palette=False)

    def on_mount(self) -> None:
        table = self.query_one("#services", DataTable)
        for label in COLUMNS:  # keyed by label: the uptime tick updates its cells by column key
            table.add_column(label, key=label)
        self.refresh_table()
        self.set_interval(1.0, self._tick_uptime)
        table.focus()

    @property
    def selected(self) -> str | None:
        """Name of the highlighted service."""
        table = self.query_one("#services", DataTable)
        if table.row_count == 0:
            return None
        try:
            return str(table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value)
        except Exception:  # noqa: BLE001 - cursor outside the rows
            return None

    def refresh_table(self) -> None:
        """Rebuild the rows from the session, keeping the highlighted service."""
        table = self.query_one("#services", DataTable)
        keep = self.selected
        table.clear()
        now = time.time()
        names = list(self.app.session.services)
        for name in names:
            table.add_row(*service_row(self.app.session.services[name], now), key=name)
        table.border_subtitle = ("" if names else EMPTY_HINT)
        if keep in names:
            table.move_cursor(row=names.index(keep), animate=False)
        if names and self.query_one(LogView).source_name != (keep or names[0]):
            self._show_log(keep or names[0])

    def _tick_uptime(self) -> None:
        table = self.query_one("#services", DataTable)
        now = time.time()
        for name, view in self.app.session.services.items():
            if view.state == "ready":
                try:
                    table.update_cell(name, COLUMNS[5], format_uptime(view.uptime_s(now)))
                except Exception:  # noqa: BLE001 - row removed meanwhile
                    pass

    def _show_log(self, name: str) -> None:
        view = self.app.session.services.get(name)
        if view is not None:
            self.query_one(LogView).set_source(name, view.lines, view.log_path)
            self._shown_lines = view.total_lines

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.row_key is not None and event.row_key.value != self.query_one(LogView).source_name:
            self._show_log(str(event.row_key.value))

    def handle_service_event(self, event: Any) -> None:
        """Apply a session event (called by the app for every live screen)."""
        if isinstance(event, SessionChanged):
            self.refresh_table()
        elif isinstance(event, ServiceLog) and event.name == self.query_one(LogView).source_name:
            view = self.app.session.services.get(event.name)
            if view is not None:  # append only what the pane has not shown (set_source may have had it)
                new = min(view.total_lines - self._shown_lines, len(view.lines))
                if new > 0:
                    self.query_one(LogView).append(list(view.lines)[-new:])
                self._shown_lines = view.total_lines

    def action_focus_log(self) -> None:
        """Focus the log pane."""
        self.query_one(LogView).log_widget.focus()

    def action_restart_service(self) -> None:
        """Restart the highlighted service."""
        self._control("restart")

    def action_stop_service(self) -> None:
        """Stop the highlighted service."""
        self._control("stop")

    def _control(self, verb: str) -> None:
        name = self.selected
        if name is None:
            self.notify("no service selected", severity="warning")
            return
        method = self.app.session.restart_service if verb == "restart" else self.app.session.stop_service
        self.app.run_in_trio(method, name, description=f"{verb} {name}")
        self.notify(f"{verb} {name} requested")
