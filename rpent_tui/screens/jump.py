"""Jump overlay (ctrl+o): one key per focusable pane of the current screen (posting's jump mode, as a list)."""

from __future__ import annotations

from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen, Screen
from textual.widget import Widget
from textual.widgets import Static

from ..widgets.footer import StableFooter

__all__ = ["JumpScreen", "JUMP_KEYS"]

JUMP_KEYS = "123456789abcdefghijklmnopqrstuvwxyz"


def _label(widget: Widget) -> str:
    title = getattr(widget, "border_title", None) or ""
    name = widget.id or type(widget).__name__
    return f"{name} ({type(widget).__name__})" + (f" — {title}" if title else "")


class JumpScreen(ModalScreen[Widget | None]):
    """Press the key shown next to a pane to focus it; Esc cancels."""

    DEFAULT_CSS = """
    JumpScreen { align: center middle; }
    JumpScreen > Vertical { width: 60; height: auto; max-height: 90%; border: thick $accent; background: $surface; padding: 0 1; }
    """
    BINDINGS = [Binding("escape", "cancel", "Cancel", id="jump-cancel")]

    def __init__(self, target: Screen) -> None:
        super().__init__()
        self.targets = {JUMP_KEYS[i]: w for i, w in enumerate(target.focus_chain[: len(JUMP_KEYS)])}

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static("[b]Jump to[/b]")
            for key, widget in self.targets.items():
                yield Static(Text.assemble((f" {key} ", "reverse"), " ", _label(widget)))
        yield StableFooter(compact=True, show_command_palette=False)

    def on_key(self, event: events.Key) -> None:
        if event.character and event.character in self.targets:
            event.stop()
            self.dismiss(self.targets[event.character])

    def action_cancel(self) -> None:
        """Close without jumping."""
        self.dismiss(None)
