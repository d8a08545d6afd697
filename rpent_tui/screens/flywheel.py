"""Flywheel export screen: pick runs, the rule set, an output directory and image-writer threads; run
``rpent-flywheel``.

A picked run shows ``[x]`` in its box, an unpicked one ``[ ]`` (not only a colour); the list's border
says how many are picked. Rules: ``v1`` (VLA actions linked to a prediction) or ``v2`` (every executed
action, scripted and VLA, up to the first success; needs TaskRuns recorded with
``rpent-tui --record-observations all``), preselected ``v2`` when the session records observations.

The export runs as a supervised subprocess (``rpent.session.flywheel_jobs.FlywheelRunner``: own process
group, SIGTERM -> grace -> SIGKILL on ``x`` or when the TUI exits); its output streams into the log
pane in batches with a progress bar (parsed ``done/total``), and at the end ``report.json`` is shown:
the counts, then one row per run (exported frames and episodes, or why it was excluded: the report's
reason and detail, e.g. ``not_vla``, ``observations_missing``, ``operator_rejected``), then the counts
of each exclusion reason.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from rich.segment import Segment
from textual.strip import Strip
from textual.widgets import DataTable, Input, Label, Log, ProgressBar, Select, SelectionList, Static

from .base import LiveScreen
from ..widgets.footer import StableFooter
from rpent.recording import run_readers as readers
from rpent.session.flywheel_jobs import FlywheelJob, FlywheelJobError, FlywheelOutput
from ..services.outcome import RunOutcomeView, read_outcome
from ..widgets.tables import VimDataTable, VimSelectionList
from ..widgets.stable import StableHeader

__all__ = ["FlywheelScreen", "PickList", "report_rows"]

#: The rule sets offered (value, label).
RULES = (("v1", "v1: VLA actions linked to a prediction"),
         ("v2", "v2: every executed action up to success (--record-observations all)"))


class PickList(VimSelectionList):
    """The run list: a picked run's box shows ``x``, an unpicked one a blank (Textual's toggle button
    shows the same ``X`` in both states and tells them apart by colour only)."""

    def render_line(self, y: int) -> Strip:
        """Textual's line with the box's inner character set from the selection state."""
        line = super().render_line(y)
        segments = list(line)
        _, scroll_y = self.scroll_offset
        index = scroll_y + y
        if len(segments) < 3 or index >= self.option_count:
            return line
        picked = self.get_option_at_index(index).value in self._selected
        inner = segments[1]
        segments[1] = Segment("x" if picked else " ", inner.style, inner.control)
        return Strip(segments, line.cell_length)


def run_choice(outcome: RunOutcomeView | None, run: readers.RunSummary) -> str:
    """One run in the pick list: its task first (which run it is stays readable in a list 38 columns
    wide, the 80x24 layout), then its label (what the export's label policy reads, the operator's
    verdict where one was given), the environment's predicate, trajectories and name:
    ``libero_object t0 s0 · failed (operator: failure) · env ✓ · 1 traj · 0001_libero_object_t0_s0``."""
    outcome = outcome or RunOutcomeView()
    label = outcome.label or run.state or "-"
    if outcome.verdict:
        label += f" (operator: {outcome.verdict})"
    env = outcome.environment_success if outcome.environment_success is not None else run.success
    ok = {True: "✓", False: "✗", None: "?"}[env]
    return f"{run.task_label} · {label} · env {ok} · {run.trajectories} traj · {run.name}"


def report_rows(report: dict[str, Any]) -> list[tuple[str, str]]:
    """``(field, value)`` rows of a flywheel ``report.json``: ``readers.summarize_report``'s counts, with
    one row per run first: ``✓ <record>`` and what it gave, or ``✗ <record>`` and why it was excluded
    (the report's reason and detail); a run with some actions excluded gets a row per reason."""
    rows: list[tuple[str, str]] = []
    exclusions: dict[str, list[dict[str, Any]]] = {}
    for ex in report.get("exclusions") or []:
        if isinstance(ex, dict):
            exclusions.setdefault(str(ex.get("record", "?")), []).append(ex)
    for run in report.get("runs") or []:
        if not isinstance(run, dict):
            continue
        record = str(run.get("record", "?"))
        if run.get("exported"):
            rows.append((f"✓ {record}", f"exported {run.get('frames', 0)} frame(s) in "
                                        f"{len(run.get('episodes') or [])} episode(s)"))
        for ex in exclusions.pop(record, []):
            if ex.get("scope") == "run" or not run.get("exported"):
                rows.append((f"✗ {record}", f"{ex.get('reason')}: {ex.get('detail', '')}".rstrip(": ")))
            else:
                rows.append((f"  {record}", f"{ex.get('count', '?')} action(s) left out: {ex.get('reason')}"))
    for record, items in exclusions.items():  # records the report lists only as excluded
        for ex in items:
            rows.append((f"✗ {record}", f"{ex.get('reason')}: {ex.get('detail', '')}".rstrip(": ")))
    return rows + readers.summarize_report(report)


class FlywheelScreen(LiveScreen):
    """The Flywheel export screen (F6)."""

    BINDING_GROUP_TITLE = "Flywheel export"
    BINDINGS = [
        Binding("ctrl+r", "launch", "Export", id="export-launch", tooltip="Launch rpent-flywheel with these choices"),
        Binding("ctrl+x", "stop", "Stop", id="export-stop", tooltip="Stop the running export"),
        Binding("ctrl+u", "reload", "Reload", id="export-reload", tooltip="Rescan the logs directory for runs"),
        Binding("ctrl+a", "select_all", "All", id="export-select-all", tooltip="Pick every listed run"),
        Binding("ctrl+n", "select_none", "None", id="export-select-none", tooltip="Clear the selection"),
    ]

    def compose(self) -> ComposeResult:
        yield StableHeader()
        with Horizontal(id="fw-body"):
            with Vertical(id="fw-left"):
                runs = PickList(id="fw-runs")
                runs.border_title = "Runs to export (space picks)"
                yield runs
                yield Select([(label, value) for value, label in RULES], value=self._default_rules(),
                             allow_blank=False, compact=True, id="fw-rules")
                yield Label("Output directory (must not exist)")
                yield Input(value=str(self._default_output()), id="fw-output")
                yield Label("Image writer threads (0 = one by one)")
                yield Input(value="0", type="integer", id="fw-threads")
            with Vertical(id="fw-right"):
                yield Static("idle", id="fw-state")
                yield ProgressBar(total=1, show_eta=False, id="fw-progress")
                log = Log(max_lines=2000, id="fw-log")
                log.border_title = "rpent-flywheel output"
                yield log
                report = VimDataTable(id="fw-report", cursor_type="row")
                report.border_title = "report.json"
                yield report
        yield StableFooter(compact=True, show_command_palette=False)

    def _default_output(self) -> Path:
        """``<session>/exports/lerobot_NNN``: the first that does not exist (rpent-flywheel needs a new dir)."""
        n = 1
        while (self.app.export_dir / f"lerobot_{n:03d}").exists():
            n += 1
        return self.app.export_dir / f"lerobot_{n:03d}"

    def _default_rules(self) -> str:
        """``v2`` when the session's TaskRuns record every observation, else ``v1`` (rpent-flywheel's default)."""
        options = getattr(getattr(self.app.session, "config", None), "run_options", None) or {}
        return "v2" if options.get("record_observations") == "all" else "v1"

    def _show_picked(self) -> None:
        selection = self.query_one("#fw-runs", SelectionList)
        selection.border_subtitle = f"{len(selection.selected)} of {selection.option_count} picked"

    def on_selection_list_selected_changed(self, event: SelectionList.SelectedChanged) -> None:
        self._show_picked()

    def on_mount(self) -> None:
        self.query_one("#fw-report", DataTable).add_columns("Field", "Value")
        self.query_one("#fw-runs", SelectionList).focus()
        self.action_reload()
        self._render_state()

    def action_reload(self) -> None:
        """Rescan the logs directory for runs."""
        self._scan(self.app.logs_dir)

    @work(thread=True, exclusive=True, group="flywheel-scan", exit_on_error=False)
    def _scan(self, root: Path) -> None:
        runs = readers.list_runs(root)
        outcomes = {run.path: read_outcome(run.path) for run in runs}
        self.app.call_from_thread(self._show_runs, runs, outcomes)

    def _show_runs(self, runs: list[readers.RunSummary], outcomes: dict | None = None) -> None:
        selection = self.query_one("#fw-runs", SelectionList)
        chosen = set(selection.selected)
        selection.clear_options()
        for run in runs:
            label = run_choice((outcomes or {}).get(run.path), run)
            selection.add_option((label, str(run.path), str(run.path) in chosen))
        if runs and selection.highlighted is None:
            selection.highlighted = 0  # so space toggles at once
        self._show_picked()

    def action_select_none(self) -> None:
        """Clear the run selection."""
        self.query_one("#fw-runs", SelectionList).deselect_all()

    def action_select_all(self) -> None:
        """Select every listed run."""
        self.query_one("#fw-runs", SelectionList).select_all()

    def job(self) -> FlywheelJob:
        """The export described by the form.

        Raises:
            FlywheelJobError: a non-integer thread count (other checks happen in ``FlywheelJob.validate``).
        """
        selection = self.query_one("#fw-runs", SelectionList)
        threads_text = self.query_one("#fw-threads", Input).value.strip() or "0"
        try:
            threads = int(threads_text)
        except ValueError:
            raise FlywheelJobError(f"image writer threads must be an integer, got {threads_text!r}") from None
        output = Path(self.query_one("#fw-output", Input).value.strip()).expanduser()
        listed = [selection.get_option_at_index(i).value for i in range(selection.option_count)]
        rules = str(self.query_one("#fw-rules", Select).value)
        return FlywheelJob.from_selection([Path(p) for p in selection.selected], [Path(p) for p in listed],
                                          self.app.logs_dir, output, threads, rules)

    def action_launch(self) -> None:
        """Validate the form and start the export."""
        runner = self.app.flywheel
        try:
            job = self.job()
            job.validate()
            if runner.running:
                raise FlywheelJobError("an export is already running; stop it with ctrl+x first")
        except FlywheelJobError as exc:
            self.notify(str(exc), severity="error", title="Flywheel")
            return
        self.query_one("#fw-log", Log).clear()
        self.query_one("#fw-report", DataTable).clear()
        self.query_one("#fw-progress", ProgressBar).update(total=None, progress=0)  # pulses until a done/total line
        self.app.run_in_trio(runner.run, job, description="flywheel export")
        self.query_one("#fw-state", Static).update(f"starting: {len(job.runs)} run(s), rules {job.rules} -> {job.output_dir}")

    def action_stop(self) -> None:
        """Stop the running export (SIGTERM to its process group, then SIGKILL)."""
        if not self.app.flywheel.cancel():
            self.notify("no export is running", severity="warning")

    def _render_state(self) -> None:
        status = self.app.flywheel.status
        parts = [status.state]
        if status.pid:
            parts.append(f"pid {status.pid}")
        if status.progress:
            parts.append(f"{status.progress[0]}/{status.progress[1]}")
        if status.error:
            parts.append(status.error)
        if status.log_path:
            parts.append(f"log {status.log_path}")
        self.query_one("#fw-state", Static).update(" · ".join(parts))

    def handle_service_event(self, event: Any) -> None:
        """Stream export output, progress and, at the end, the report."""
        if not isinstance(event, FlywheelOutput):
            return
        if event.lines:
            self.query_one("#fw-log", Log).write_lines(event.lines)
        if event.progress:
            self.query_one("#fw-progress", ProgressBar).update(total=event.progress[1], progress=event.progress[0])
        self._render_state()
        status = self.app.flywheel.status
        if event.state != "running" and status.report is not None:
            table = self.query_one("#fw-report", DataTable)
            table.clear()
            for field, value in report_rows(status.report):
                table.add_row(field, value)
            if status.state == "succeeded":
                self.query_one("#fw-progress", ProgressBar).update(total=1, progress=1)
            self.notify(f"export {status.state}; report.json in {status.job.output_dir if status.job else '?'}",
                        severity="information" if status.state == "succeeded" else "error", title="Flywheel")
        elif event.state in ("failed", "cancelled"):
            self.notify(f"export {event.state}: {status.error or 'no report.json'}", severity="error", title="Flywheel")
