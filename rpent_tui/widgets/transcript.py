"""The planner transcript pane: text, thinking, tool calls with arguments, tool results, operator lines.

A ``RichLog`` (it keeps styled renderables) with a line cap; batches of run events are appended
as they arrive, and the pane follows the end only while the operator has not scrolled up
(elia's transcript model, reference §1.5). ``render_event`` is pure and used by tests.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from rich.text import Text
from textual.binding import Binding
from textual.widgets import RichLog

__all__ = ["TranscriptView", "render_event", "summarize_result", "MAX_RESULT_CHARS", "RESULT_FIELDS"]

#: Tool results and arguments are cut to this many characters in the pane (full text is in the run record).
MAX_RESULT_CHARS = 400


def _compact(value: Any, limit: int = MAX_RESULT_CHARS) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False, default=str, separators=(", ", ": "))
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


#: Result fields an operator reads, in this order (the full result is in the run record's transcript).
RESULT_FIELDS = ("error", "reached", "final_dist_m", "steps_used", "found", "success", "status", "code")


def summarize_result(result: Any) -> str | None:
    """``reached yes · final_dist_m 0.004 · steps_used 12`` from a tool result's key fields, or None
    when it has none of ``RESULT_FIELDS`` (the pane then shows its compact JSON)."""
    if not isinstance(result, Mapping):
        return None
    parts = []
    for key in RESULT_FIELDS:
        if key not in result or result[key] is None:
            continue
        value = result[key]
        if isinstance(value, bool):
            value = "yes" if value else "no"
        elif isinstance(value, float):
            value = f"{value:.4g}"
        elif key == "error":
            value = str(value).replace("\n", " ")[:MAX_RESULT_CHARS]
        parts.append(f"{key} {value}")
    return " · ".join(parts) if parts else None


def render_event(event: Mapping[str, Any]) -> Text | None:
    """One transcript line for a run event (None for events the transcript does not show)."""
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
                             ("environment success" if ok else "environment not solved", "green" if ok else "red"),
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
        summary = summarize_result(result)
        name = str(event.get("name") or "")
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


class TranscriptView(RichLog):
    """Scrollable, streaming planner transcript (j/k/g/G keys)."""

    BINDINGS = [
        Binding("j", "scroll_down", "Down", show=False, id="transcript-down"),
        Binding("k", "scroll_up", "Up", show=False, id="transcript-up"),
        Binding("g", "scroll_home", "Top", show=False, id="transcript-top"),
        Binding("G", "scroll_end", "Bottom", show=False, id="transcript-bottom"),
    ]

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(max_lines=4000, wrap=True, markup=False, highlight=False, auto_scroll=True, min_width=20, id=id)

    def add_events(self, events: Iterable[Mapping[str, Any]]) -> int:
        """Append the displayable events; returns how many lines were written."""
        near_end = self.is_vertical_scroll_end or self.max_scroll_y - self.scroll_y <= 2
        n = 0
        for event in events:
            line = render_event(event)
            if line is not None:
                self.write(line, scroll_end=near_end)
                n += 1
        return n
