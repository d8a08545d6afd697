"""The step timeline: one glyph per env step (or motion step) with terminated/truncated/success marks.

Glyphs: ``·`` a step, ``✓`` success, ``T`` terminated, ``t`` truncated. Only the newest steps that
fit the width are drawn, preceded by ``…``. A second line names the last step's tool and flags.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich.text import Text
from textual.widgets import Static

__all__ = ["StepTimeline", "timeline_text"]


def _glyph(step: Mapping[str, Any]) -> tuple[str, str]:
    if step.get("success"):
        return "✓", "bold green"
    if step.get("terminated"):
        return "T", "bold red"
    if step.get("truncated"):
        return "t", "bold yellow"
    return "·", "cyan"


def timeline_text(steps: Sequence[Mapping[str, Any]], width: int) -> Text:
    """Two-line timeline of ``steps`` fitting ``width`` cells (pure; used by tests)."""
    width = max(width, 8)
    text = Text()
    shown = steps[-(width - 1):] if len(steps) > width else steps
    if len(shown) < len(steps):
        text.append("…", style="dim")
    for step in shown:
        glyph, style = _glyph(step)
        text.append(glyph, style=style)
    text.append("\n")
    if steps:
        last = steps[-1]
        flags = [name for name in ("terminated", "truncated", "success") if last.get(name)]
        text.append(f"{len(steps)} steps · last: {last.get('tool') or '?'}"
                    + (f" · {', '.join(flags)}" if flags else ""), style="dim")
    else:
        text.append("no steps yet", style="dim")
    return text


class StepTimeline(Static):
    """Timeline widget; call ``set_steps(list_of_step_events)``."""

    DEFAULT_CSS = "StepTimeline { height: 2; }"

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__("", id=id)
        self._steps: Sequence[Mapping[str, Any]] = []
        self._shown: Text | None = None

    def set_steps(self, steps: Sequence[Mapping[str, Any]]) -> None:
        """Redraw for ``steps`` (step events: ``step``, ``tool``, ``terminated``, ``truncated``, ``success``)."""
        self._steps = steps
        self._show(timeline_text(steps, self.size.width or 40))

    def _show(self, text: Text) -> None:
        if text != self._shown:  # fixed height: a repaint, never a layout pass
            self._shown = text
            self.update(text, layout=False)

    def on_resize(self) -> None:
        self._show(timeline_text(self._steps, self.size.width or 40))
