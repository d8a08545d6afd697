"""Code policy editor: a Python buffer run as a code-policy cell against the current TaskRun.

The buffer (``TextArea.code_editor``, Python highlighting via tree-sitter) runs through
``rpent.session.code_cells.CodeCellService`` -> ``rpent.policy.CodePolicyRunner.run_cell``, which saves
each cell as ``<TaskRun>/code_policy/cell_NNN.{py,json}`` like ``--policy-mode code``. While the
cell runs, two meters show elapsed time against the timeout (s) and robot calls against the call
budget; stdout, stderr and the result appear beside the editor. Esc leaves the editor (focus moves
on), ctrl+r runs the buffer from anywhere on the screen.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import Label, ProgressBar, RichLog, TextArea

from rpent.display import printable

from .base import LiveScreen
from ..widgets.footer import StableFooter
from ..widgets.stable import StableHeader
from rpent.session.code_cells import CellFinished, CellProgress, NoToolkitError

__all__ = ["EditorScreen", "STARTER_CELL", "format_cell_result"]

STARTER_CELL = '''# A code-policy cell: `robo.<tool>(...)` calls the TaskRun's toolkit (same tools as the planner).
# Variables persist between cells. ctrl+r runs this buffer.
s = robo.view_env_state()
print(s)
'''


def format_cell_result(result: dict[str, Any]) -> list[Text]:
    """Display lines of a cell result dict (stdout, stderr, value/result, error/exception); terminal
    control characters in them are replaced by visible stand-ins (:func:`rpent.display.printable`)."""
    lines: list[Text] = []
    for key, style in (("stdout", ""), ("stderr", "yellow")):
        text = result.get(key)
        if text:
            lines.append(Text(f"── {key}", style="bold dim"))
            lines.extend(Text(line, style=style) for line in str(text).rstrip("\n").splitlines())
    for key in ("value", "result", "finish"):
        if result.get(key) not in (None, ""):
            lines.append(Text.assemble((f"── {key}: ", "bold dim"), (str(result[key]), "green")))
    for key in ("error", "exception", "traceback"):
        value = result.get(key)
        if not value:
            continue
        lines.append(Text(f"── {key}", style="bold red"))
        if isinstance(value, dict):  # the runner's {"type", "message", "traceback", ...}: readable, not a dict repr
            head = ": ".join(str(value[k]) for k in ("type", "message") if value.get(k))
            text = "\n".join(x for x in (head, str(value.get("traceback") or "")) if x)
            rest = {k: v for k, v in value.items() if k not in ("type", "message", "traceback")}
            if rest:
                text += "\n" + " · ".join(f"{k}={v}" for k, v in rest.items())
        else:
            text = str(value)
        lines.extend(Text(line, style="red") for line in text.rstrip("\n").splitlines())
    extra = {k: v for k, v in result.items()
             if k not in ("stdout", "stderr", "value", "result", "finish", "error", "exception", "traceback")
             and isinstance(v, (int, float, str, bool))}
    if extra:
        lines.append(Text(" · ".join(f"{k}={v}" for k, v in extra.items()), style="dim"))
    for line in lines:  # what the cell printed or raised is shown, never sent to the terminal as controls
        line.plain = printable(line.plain)
    return lines


class EditorScreen(LiveScreen):
    """The Code policy editor screen (F4)."""

    BINDING_GROUP_TITLE = "Code policy"
    BINDINGS = [
        Binding("ctrl+r", "run_cell", "Run cell", id="cell-run", tooltip="Run the buffer as a code-policy cell"),
        Binding("ctrl+l", "clear_output", "Clear output", id="cell-clear-output"),
        Binding("ctrl+e", "focus_editor", "Editor", id="cell-focus-editor", tooltip="Focus the editor"),
    ]

    def compose(self) -> ComposeResult:
        yield StableHeader()
        with Horizontal(id="editor-body"):
            editor = TextArea.code_editor(STARTER_CELL, language="python", id="code")
            editor.border_title = "Cell (Python)"
            yield editor
            with Vertical(id="cell-side"):
                yield Label("elapsed / timeout", id="meter-time-label")
                yield ProgressBar(total=self.app.options.code_timeout_s, show_eta=False, id="meter-time")
                yield Label("robot calls / budget", id="meter-calls-label")
                yield ProgressBar(total=self.app.options.code_max_calls, show_eta=False, id="meter-calls")
                output = RichLog(wrap=True, markup=False, max_lines=2000, min_width=20, id="cell-output")
                output.border_title = "Output"
                yield output
        yield StableFooter(compact=True, show_command_palette=False)

    def on_mount(self) -> None:
        self._set_meters(0.0, 0)
        self.query_one("#code", TextArea).focus()

    def _set_meters(self, elapsed_s: float, calls: int) -> None:
        opts = self.app.options
        self.query_one("#meter-time", ProgressBar).update(total=opts.code_timeout_s, progress=min(elapsed_s, opts.code_timeout_s))
        self.query_one("#meter-calls", ProgressBar).update(total=opts.code_max_calls, progress=min(calls, opts.code_max_calls))
        self.query_one("#meter-time-label", Label).update(f"elapsed {elapsed_s:5.1f} s / timeout {opts.code_timeout_s:g} s")
        self.query_one("#meter-calls-label", Label).update(f"robot calls {calls} / budget {opts.code_max_calls}")

    def handle_service_event(self, event: Any) -> None:
        """Update meters and output from cell events."""
        if isinstance(event, CellProgress):
            self._set_meters(event.elapsed_s, event.calls)
        elif isinstance(event, CellFinished):
            log = self.query_one("#cell-output", RichLog)
            for line in format_cell_result(event.result):
                log.write(line)
            log.write(Text(f"── cell done in {event.elapsed_s:.1f} s, {event.calls} robot call(s)", style="bold"))

    def action_focus_editor(self) -> None:
        """Focus the editor."""
        self.query_one("#code", TextArea).focus()

    def action_clear_output(self) -> None:
        """Clear the output pane."""
        self.query_one("#cell-output", RichLog).clear()

    def action_run_cell(self) -> None:
        """Run the buffer against the current TaskRun's toolkit."""
        source = self.query_one("#code", TextArea).text
        session = self.app.session
        run = session.active
        toolkit = session.toolkit_for(run.id) if run is not None else None
        cells = self.app.cells
        if cells.busy:
            self.notify("a cell is already running", severity="warning")
            return
        if toolkit is None:
            self.notify(str(NoToolkitError("no TaskRun toolkit: start a task with /rpent-task on the Run screen (F3) first")),
                        severity="error", title="Code policy")
            return
        log = self.query_one("#cell-output", RichLog)
        log.write(Text(f"── running cell against TaskRun {run.id}", style="bold cyan"))
        opts = self.app.options
        self.app.run_in_trio(cells.run_cell, toolkit, Path(run.output_dir), source,
                             description="code cell", timeout_s=opts.code_timeout_s, max_calls=opts.code_max_calls)
