"""F1 / ``?`` help: every key of the screen underneath, with its binding id (for keymap overrides), then
the Run screen's slash commands (``/help`` in the input line opens the same help)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen, Screen
from textual.widgets import Static

from ..widgets.footer import StableFooter
from ..widgets.tables import VimDataTable

__all__ = ["HelpScreen", "binding_rows"]

INTRO = ("Keyboard only. F2 Services · F3 Run · F4 Code editor · F5 Trajectories · F6 Flywheel · F7 Batch · "
         "F9 Explore · ctrl+p command palette (every action, by name) · ctrl+o jump to a pane · Tab/shift+Tab move "
         "focus · ctrl+q quit. On the Run screen just type: / or any letter that is not a key opens the input line. "
         "Remap keys by binding id with --keymap FILE.toml. Over SSH set ESCDELAY=200.")


def binding_rows(screen: Screen) -> list[tuple[str, str, str]]:
    """``(keys, description, binding id)`` of the active bindings of ``screen``, sorted by description."""
    rows: dict[tuple[str, str], set[str]] = {}
    for key, active in screen.active_bindings.items():
        binding = active.binding
        if not binding.description:
            continue
        rows.setdefault((binding.description, binding.id or binding.action), set()).add(
            screen.app.get_key_display(binding) if hasattr(screen.app, "get_key_display") else key)
    return sorted(((" ".join(sorted(keys)), desc, bid) for (desc, bid), keys in rows.items()), key=lambda r: r[1])


class HelpScreen(ModalScreen[None]):
    """Modal listing keys; Esc, F1 or ``?`` closes it."""

    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > Vertical { width: 90%; height: 90%; border: thick $primary; background: $surface; padding: 0 1; }
    HelpScreen #help-intro { height: auto; color: $text-muted; margin-bottom: 1; }
    HelpScreen DataTable { height: 1fr; }
    """
    BINDINGS = [Binding("escape,f1,question_mark", "dismiss_help", "Close help", id="help-close")]

    def __init__(self, target: Screen) -> None:
        super().__init__()
        self.target = target

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(f"[b]Keys — {self.target.__class__.__name__.removesuffix('Screen')}[/b]\n{INTRO}", id="help-intro")
            table = VimDataTable(id="help-keys", cursor_type="row", zebra_stripes=True)
            table.add_columns("Keys", "Action", "Binding id")
            for row in binding_rows(self.target):
                table.add_row(*row)
            from .run import SLASH_COMMANDS

            for command, what, key in SLASH_COMMANDS:
                table.add_row(command, f"{what} (also {key})", "input line (Run)")
            table.add_row("<text>", "steer the planner at its next turn boundary", "input line (Run)")
            yield table
        yield StableFooter(compact=True, show_command_palette=False)

    def action_dismiss_help(self) -> None:
        """Close the help."""
        self.dismiss(None)
