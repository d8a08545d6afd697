"""Trajectories screen: browse run records and recorded trajectories, step by step.

Left: the runs under the logs directory (task, label, environment predicate, operator verdict, planner,
steps, date; ``services.outcome`` reads them from each record), then the episodes
of the LeRobot datasets exported there (``rpent-flywheel``; planner ``dataset``), and the selected
run's step timeline (from ``trajectories/*/actions.jsonl`` when recorded, else ``states.json``; a
dataset episode's frames).
Right: the step's camera frame, the run's outcome in one line (label, predicate, verdict with notes,
disagreement), the step's action and linked VLA prediction, and the planner transcript up to that step. ``p`` plays the frames (5 steps/s). Directory scans and record parsing run in
thread workers, so the UI never blocks on disk.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import DataTable, RichLog, Static

from .base import LiveScreen
from ..widgets.footer import StableFooter
from rpent.display import printable
from rpent.recording import run_readers as readers
from ..services import datasets
from ..services.outcome import RunOutcomeView, read_outcome
from ..services.tool_summary import summarize_tool_result
from ..widgets.frames import FramePane
from ..widgets.tables import VimDataTable
from ..widgets.transcript import MAX_RESULT_CHARS
from ..widgets.stable import StableHeader

__all__ = ["TrajectoriesScreen", "run_row", "step_row", "transcript_lines"]

PLAY_FPS = 5.0


#: Colour of each TaskRun outcome in the run list.
OUTCOME_STYLE = {"succeeded": "green", "failed": "red", "aborted": "magenta", "cancelled": "yellow", "error": "red",
                 "running": "cyan", "starting": "cyan"}


def run_row(run: readers.RunSummary, outcome: RunOutcomeView | None = None) -> tuple[str, ...]:
    """Cells of one run (markup): task, label, environment predicate, operator verdict, planner, env
    steps, date. The label is the record's final ``label`` (``outcome``), else the TaskRun's own state,
    else the environment's predicate (env solved / not solved); it comes second so that a narrow runs
    pane still shows it. The environment column is the predicate alone (``✓`` solved, ``✗`` not, ``?``
    unknown) and the verdict column the operator's answer, ``≠ env`` appended when the record notes a
    disagreement."""
    outcome = outcome or RunOutcomeView()
    label = outcome.label or run.state
    if label:
        cell = f"[{OUTCOME_STYLE.get(label, 'white')}]{label}[/]"
    else:
        cell = {True: "[green]env solved[/]", False: "[red]not solved[/]", None: "-"}[run.success]
    env = outcome.environment_success if outcome.environment_success is not None else run.success
    env_cell = {True: "[green]✓[/]", False: "[red]✗[/]", None: "?"}[env]
    verdict = outcome.verdict_cell()
    if outcome.disagreement:
        verdict = f"[bold yellow]{verdict}[/]"
    return (run.task_label, cell, env_cell, verdict, run.planner or "-", "-" if run.steps is None else str(run.steps),
            run.date.strftime("%Y-%m-%d %H:%M:%S") if run.date else "-")


def step_row(step: readers.StepRecord) -> tuple[str, ...]:
    """Cells of one step."""
    action = " ".join(f"{a:+.2f}" for a in step.action) if step.action else "-"
    flags = "".join(c for c, v in (("T", step.terminated), ("t", step.truncated), ("✓", step.success)) if v)
    return (str(step.step), step.tool or "-", action, flags or "·")


def _tool_line(name: Any, content: Any) -> str:
    """``name: summary`` of a recorded tool result (JSON text or a dict), else its compact JSON."""
    result = content
    if isinstance(content, str):
        try:
            result = json.loads(content)
        except ValueError:
            return content
    summary = summarize_tool_result(result, str(name) if name else None)
    if summary is None:
        return content if isinstance(content, str) else json.dumps(content, default=str)[:MAX_RESULT_CHARS]
    return f"{name}: {summary}" if name else summary


def transcript_lines(entries: list[dict[str, Any]], limit: int = 60) -> list[Text]:
    """The last ``limit`` transcript entries as display lines (role-coloured)."""
    out: list[Text] = []
    for entry in entries[-limit:]:
        role = str(entry.get("role", entry.get("kind", "?")))
        content = entry.get("content", entry.get("text", ""))
        if isinstance(content, list):
            parts = []
            for block in content:
                if isinstance(block, dict):
                    kind = block.get("type")
                    if kind in ("text", "thinking"):
                        parts.append(str(block.get(kind) or block.get("text", "")))
                    elif kind == "tool_use":
                        parts.append(f"→ {block.get('name')}({json.dumps(block.get('input', {}), default=str)[:MAX_RESULT_CHARS]})")
                    else:
                        parts.append(json.dumps(block, default=str)[:MAX_RESULT_CHARS])
                else:
                    parts.append(str(block))
            content = "\n".join(parts)
        elif role == "tool":  # a tool result: its one-line summary (rounded), as on the Run screen
            content = _tool_line(entry.get("name"), content)
        elif not isinstance(content, str):
            content = json.dumps(content, default=str)[:MAX_RESULT_CHARS]
        style = {"assistant": "", "user": "yellow", "tool": "green"}.get(role, "dim")
        out.append(Text.assemble((printable(f"{role}: "), f"bold {style}".strip()), (printable(content[:2000]), style)))
    return out


class TrajectoriesScreen(LiveScreen):
    """The Trajectories screen (F5)."""

    BINDING_GROUP_TITLE = "Trajectories"
    BINDINGS = [
        Binding("r", "reload", "Reload", id="runs-reload", tooltip="Rescan the logs directory"),
        Binding("p", "play", "Play", id="frames-play", tooltip="Play / pause the episode frames"),
        Binding("s", "focus_steps", "Steps", id="steps-focus", tooltip="Focus the step list"),
        Binding("u", "focus_runs", "Runs", id="runs-focus", tooltip="Focus the run list"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.runs: list[readers.RunSummary] = []
        self.steps: list[readers.StepRecord] = []
        self.transcript: list[dict[str, Any]] = []
        self.current_run: readers.RunSummary | None = None
        self.outcomes: dict[Path, RunOutcomeView] = {}
        self._timer = None
        self._select_path: Path | None = None  # a run to highlight once the scan has listed it

    def compose(self) -> ComposeResult:
        yield StableHeader()
        with Horizontal(id="traj-body"):
            with Vertical(id="traj-left"):
                runs = VimDataTable(id="runs", cursor_type="row", zebra_stripes=True)
                runs.border_title = f"Runs · {self.app.logs_dir}"
                yield runs
                steps = VimDataTable(id="steps", cursor_type="row", zebra_stripes=True)
                steps.border_title = "Steps"
                yield steps
            with Vertical(id="traj-right"):
                yield FramePane("frame", self.app.options.image_mode, id="traj-frame")
                yield Static("", id="step-detail")
                log = RichLog(wrap=True, markup=False, max_lines=500, min_width=20, id="step-transcript")
                log.border_title = "Transcript at this step"
                yield log
        yield StableFooter(compact=True, show_command_palette=False)

    def on_mount(self) -> None:
        self.query_one("#runs", DataTable).add_columns("Task", "Label", "Env", "Verdict", "Planner", "Steps", "Date")
        self.query_one("#steps", DataTable).add_columns("Step", "Tool", "Action", "Flags")
        self.query_one("#runs", DataTable).focus()
        self.action_reload()

    # -- loading (thread workers) ---------------------------------------------------------------
    def action_reload(self) -> None:
        """Rescan the logs directory."""
        self._scan(self.app.logs_dir)

    @work(thread=True, exclusive=True, group="trajectories-scan", exit_on_error=False)
    def _scan(self, root: Path) -> None:
        runs = readers.list_runs(root)
        outcomes = {run.path: read_outcome(run.path) for run in runs}
        runs += datasets.list_dataset_episodes(root)
        self.app.call_from_thread(self._show_runs, runs, outcomes)

    def _show_runs(self, runs: list[readers.RunSummary], outcomes: dict[Path, RunOutcomeView] | None = None) -> None:
        self.runs = runs
        self.outcomes = outcomes or {}
        table = self.query_one("#runs", DataTable)
        table.clear()
        for i, run in enumerate(runs):
            episode = isinstance(run, datasets.DatasetEpisode)
            table.add_row(*run_row(run, None if episode else self.outcomes.get(run.path)), key=str(i))
        table.border_subtitle = f"{len(runs)} run(s)"
        wanted = self._select_path
        self._select_path = None
        index = next((i for i, r in enumerate(runs) if wanted is not None and r.path == wanted), 0)
        if runs:
            table.move_cursor(row=index, animate=False)
            self._load(runs[index])

    def select_run(self, path: Path) -> None:
        """Rescan and highlight the run recorded in ``path`` (the palette's "open the current TaskRun")."""
        self._select_path = Path(path)
        self.query_one("#runs", DataTable).focus()
        self.action_reload()

    @work(thread=True, exclusive=True, group="trajectories-load", exit_on_error=False)
    def _load(self, run: readers.RunSummary) -> None:
        path = run.path
        try:
            if isinstance(run, datasets.DatasetEpisode):
                steps, transcript = datasets.episode_steps(path, run.episode), []
            else:
                steps = readers.step_records(path)
                transcript = readers.read_transcript(path)
            error = None
        except (readers.RecordError, OSError, ValueError, KeyError, StopIteration) as exc:
            steps, transcript, error = [], [], f"{type(exc).__name__}: {exc}"
        self.app.call_from_thread(self._show_run, run, steps, transcript, error)

    def _show_run(self, run: readers.RunSummary, steps: list[readers.StepRecord], transcript: list[dict[str, Any]],
                  error: str | None) -> None:
        path = run.path
        self.current_run, self.steps, self.transcript = run, steps, transcript
        table = self.query_one("#steps", DataTable)
        table.clear()
        for i, step in enumerate(steps):
            table.add_row(*step_row(step), key=str(i))
        table.border_title = f"Steps · {run.task_label if isinstance(run, datasets.DatasetEpisode) else path.name}"
        if error:
            self.notify(error, severity="error", title="Record")
        if steps:
            self._show_step(0)
        else:
            outcome = self.outcomes.get(path)
            self.query_one("#step-detail", Static).update(
                (outcome.line() + "\n" if outcome is not None else "") + "no steps recorded")
            self.query_one("#traj-frame", FramePane).show(None)
            log = self.query_one("#step-transcript", RichLog)
            log.clear()
            for line in transcript_lines(transcript):
                log.write(line)

    def _show_step(self, index: int) -> None:
        if not 0 <= index < len(self.steps):
            return
        step = self.steps[index]
        frame_path = step.frames.get("main") or next(iter(step.frames.values()), None)
        if isinstance(frame_path, bytes):  # a dataset episode's frame (PNG bytes)
            png, label = frame_path, "dataset"
        else:
            png = frame_path.read_bytes() if frame_path is not None and frame_path.is_file() else None
            label = frame_path.parent.name if frame_path else "no frame"
        self.query_one("#traj-frame", FramePane).show(png, f"step {step.step} · {label}")
        detail = Text()
        outcome = self.outcomes.get(self.current_run.path) if self.current_run is not None else None
        if outcome is not None:
            detail.append(outcome.line() + "\n", style="bold yellow" if outcome.disagreement else "")
        detail.append(f"step {step.step}  tool {step.tool or '-'}  call {step.call_id or '-'}\n", style="bold")
        if step.action:
            detail.append("action " + " ".join(f"{a:+.3f}" for a in step.action) + "\n")
        source = step.raw.get("source")
        if source:
            detail.append(f"source {source}\n")
        if step.tool == "dataset":
            detail.append(f"task {step.raw.get('task')!r}  t {step.raw.get('timestamp')}\n", style="cyan")
        if step.prediction:
            pred = step.prediction
            detail.append(f"VLA: {pred.get('instruction', '')!r} chunk {pred.get('chunk_length', '?')} "
                          f"executed {pred.get('n_executed', '?')} (row {step.raw.get('index_in_chunk', '?')})\n", style="cyan")
        self.query_one("#step-detail", Static).update(detail)
        log = self.query_one("#step-transcript", RichLog)
        log.clear()
        initial = index == 0 and not step.call_id  # step 0: before any tool call, not the end of the run
        for line in transcript_lines(readers.transcript_until(self.transcript, step.call_id, initial=initial)):
            log.write(line)

    # -- events ----------------------------------------------------------------------------------
    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.row_key is None or event.row_key.value is None:
            return
        index = int(event.row_key.value)
        if event.data_table.id == "runs" and index < len(self.runs):
            if self.runs[index] is not self.current_run:
                self._stop_play()
                self._load(self.runs[index])
        elif event.data_table.id == "steps":
            self._show_step(index)

    def handle_service_event(self, event: Any) -> None:
        """Trajectories are read from disk; nothing to do for live events."""

    # -- actions ---------------------------------------------------------------------------------
    def action_focus_steps(self) -> None:
        """Focus the step list."""
        self.query_one("#steps", DataTable).focus()

    def action_focus_runs(self) -> None:
        """Focus the run list."""
        self.query_one("#runs", DataTable).focus()

    def action_play(self) -> None:
        """Play / pause: advance one step every 1/PLAY_FPS s until the end."""
        if self._timer is not None:
            self._stop_play()
            return
        if not self.steps:
            self.notify("no steps to play", severity="warning")
            return
        self._timer = self.set_interval(1.0 / PLAY_FPS, self._advance)

    def _advance(self) -> None:
        table = self.query_one("#steps", DataTable)
        if table.cursor_row >= len(self.steps) - 1:
            self._stop_play()
            return
        table.move_cursor(row=table.cursor_row + 1, animate=False)

    def _stop_play(self) -> None:
        if self._timer is not None:
            self._timer.stop()
            self._timer = None
