"""Operator request modal: the question, the current frames, one key per answer, optional notes.

Keys: ``s`` success, ``f`` failure, ``c`` continue, ``a`` abort, ``d`` done (scene reset);
only the request's own choices are active. ``n`` focuses the notes box (Enter returns to the keys).
Esc hides the modal without answering; ``o`` on the Run screen reopens it. An answer or Esc hands
the keys back to the screen below at once (on the Run screen: the transcript), also for keys typed
right behind it. The answer goes to
``Session.reply_operator`` and is logged to the TaskRun's ``operator_tui.jsonl`` by the operator.

Frames: the request's own camera labels as the toolkit sends them (LIBERO: ``agentview`` and
``wrist``, :func:`rpent.robots.libero.toolkit.operator.evidence_frames`), at most two panes, the
main camera first. ``z`` shows one camera at the full window size (main, then wrist, then both
again); ``,`` / ``.`` (or the left / right arrows) step back and forward through the TaskRun's last
``FRAME_HISTORY`` camera frames (``RpentApp.frame_history``; the request's own frames are the newest),
the pane caption says which step is shown.
"""

from __future__ import annotations

from collections.abc import Callable

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Static

from rpent.session.operator import ANSWER_KEYS, OperatorReplyError, OperatorRequest
from ..widgets.footer import StableFooter
from ..widgets.frames import FramePane

__all__ = ["OperatorModal", "FRAME_HISTORY"]

#: Camera frames of a TaskRun kept for the verdict window's ``,`` / ``.`` keys (newest last).
FRAME_HISTORY = 32


class OperatorModal(ModalScreen[str | None]):
    """Modal for one ``OperatorRequest`` of TaskRun ``run_id``; dismisses with the answer (or None)."""

    AUTO_FOCUS = None  # the answer keys must work at once, not type into the notes box
    DEFAULT_CSS = """
    OperatorModal { align: center middle; }
    OperatorModal > Vertical { width: 90%; height: 90%; border: thick $warning; background: $surface; padding: 0 1; }
    OperatorModal #op-prompt { height: auto; margin-bottom: 1; }
    OperatorModal #op-frames { height: 1fr; }
    OperatorModal #op-choices { height: auto; margin-top: 1; }
    OperatorModal.-zoomed > Vertical { width: 100%; height: 100%; }
    OperatorModal.-zoomed #op-prompt { display: none; }
    """
    # Priority bindings act when the app takes the key from its queue (see RunScreen.BINDINGS): n focuses
    # the notes at once (the keys behind it are notes, never answers); an answer or Esc closes the modal
    # and hands the keys to the screen below at once (``on_closed``), so the keys typed right behind the
    # answer (t, o, x, i) are that screen's keys, never lost in the closing modal.
    BINDINGS = [
        Binding("s", "answer('success')", "Success", id="operator-success", priority=True),
        Binding("f", "answer('failure')", "Failure", id="operator-failure", priority=True),
        Binding("c", "answer('continue')", "Continue", id="operator-continue", priority=True),
        Binding("a", "answer('abort')", "Abort", id="operator-abort", priority=True),
        Binding("d", "answer('done')", "Done", id="operator-done", priority=True),
        Binding("n", "notes", "Notes", id="operator-notes", priority=True),
        Binding("escape", "later", "Later", id="operator-later", priority=True, tooltip="Hide; answer later with o"),
        Binding("z", "zoom", "Zoom", id="operator-zoom", priority=True,
                tooltip="One camera at the full window size (main, wrist, both)"),
        Binding("comma,left", "step_frames(-1)", "Older frame", id="operator-older", show=False, priority=True,
                tooltip="Show the TaskRun's previous camera frame"),
        Binding("full_stop,right", "step_frames(1)", "Newer frame", id="operator-newer", show=False, priority=True,
                tooltip="Show the TaskRun's next camera frame (the request's own is the newest)"),
    ]

    def __init__(self, run_id: str, request: OperatorRequest, image_mode: str,
                 on_closed: Callable[[], None] | None = None) -> None:
        """``on_closed`` runs right after the modal left the screen stack (in the same key's handling)."""
        super().__init__()
        self.run_id = run_id
        self.request = request
        self.image_mode = image_mode
        self.answered = False
        self._on_closed = on_closed
        self.zoom: str | None = None  # the label shown alone, or None: both
        self.history: list[tuple[int | None, dict[str, bytes]]] = []  # (step, label -> PNG), oldest first
        self.position = -1  # index into ``history`` shown (-1: the newest, the request's own frames)

    def compose(self) -> ComposeResult:
        req = self.request
        with Vertical():
            title = "Scene reset requested" if req.kind == "scene_reset" else "Operator verdict requested"
            yield Static(Text.assemble((f"{title} · TaskRun {self.run_id} · {req.id}\n", "bold"), req.prompt), id="op-prompt")
            with Horizontal(id="op-frames"):
                labels = self.frame_labels()
                for label in labels:
                    yield FramePane(f"{label} camera", self.image_mode, id=f"op-frame-{label}")
                if not labels:
                    yield Static("this request carries no camera frames", id="op-no-frames")
            keys = "  ".join(f"[{ANSWER_KEYS.get(c, '?')}] {c}" for c in req.choices)
            yield Static(Text.assemble((keys + "   [n] notes   [Esc] later", "bold"),
                                       ("\n[z] zoom one camera   [,] [.] older / newer frame", "")), id="op-choices")
            yield Input(placeholder="optional notes: press n, type, Enter returns to the answer keys",
                        disabled=True, id="op-notes")
        yield StableFooter(compact=True, show_command_palette=False)

    def frame_labels(self) -> list[str]:
        """Labels of the frames shown: the main camera (``main``/``agentview``) first, at most two."""
        order = {"main": 0, "agentview": 0, "wrist": 1}
        labels = [k for k, v in self.request.frames.items() if v]
        return sorted(labels, key=lambda k: (order.get(k, 2), labels.index(k)))[:2]

    def on_mount(self) -> None:
        history = getattr(self.app, "frame_history", None)
        earlier = list(history(self.run_id)) if callable(history) else []
        own = {k: v for k, v in self.request.frames.items() if v}
        # the request's own frames are the newest; earlier ones of the run that differ come before them
        self.history = [(step, frames) for step, frames in earlier if frames != own][-(FRAME_HISTORY - 1):]
        self.history.append((None, own))
        self._show_position()
        self.set_focus(None)  # answer keys work at once; n focuses the notes

    def _show_position(self) -> None:
        step, frames = self.history[self.position]
        n = len(self.history)
        index = self.position % n
        where = "request" if index == n - 1 else f"step {step}" if step is not None else "earlier"
        for label in self.frame_labels():
            caption = f"{label} · {where} · frame {index + 1}/{n}"
            self.query_one(f"#op-frame-{label}", FramePane).show(frames.get(label) or self._nearest(label), caption)

    def _nearest(self, label: str) -> bytes | None:
        """The newest frame of ``label`` at or before the shown position (a history entry without it)."""
        for _, frames in reversed(self.history[: self.position % len(self.history) + 1]):
            if frames.get(label):
                return frames[label]
        return self.request.frames.get(label)

    def action_zoom(self) -> None:
        """Cycle: the main camera alone at the full window size, the wrist camera alone, both."""
        labels = self.frame_labels()
        if not labels:
            return
        order = [*labels, None] if len(labels) > 1 else [labels[0], None]
        self.zoom = order[(order.index(self.zoom) + 1) % len(order)]
        for label in labels:
            self.query_one(f"#op-frame-{label}", FramePane).display = self.zoom in (None, label)
        self.set_class(self.zoom is not None, "-zoomed")

    def action_step_frames(self, delta: int) -> None:
        """Show an older (-1) or newer (+1) camera frame of the TaskRun."""
        n = len(self.history)
        index = max(0, min(n - 1, self.position % n + delta))
        if index == self.position % n:
            self.app.bell()
            return
        self.position = index
        self._show_position()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Only the request's own choices are active keys; in the notes box s/f/c/a/d/n are text."""
        if action == "answer":
            return parameters[0] in self.request.choices and not isinstance(self.focused, Input)
        if action in ("notes", "zoom", "step_frames") and isinstance(self.focused, Input):
            return False  # n, z, comma and full stop are text in the notes box
        return True

    def action_notes(self) -> None:
        """Enable and focus the notes box now (it stays disabled otherwise, so answer keys never type into
        it); the keys queued behind n reach it (``Screen.set_focus`` at once, not ``focus()`` later)."""
        box = self.query_one("#op-notes", Input)
        box.disabled = False
        self.set_focus(box)

    @on(Input.Submitted, "#op-notes")
    def _notes_done(self, event: Input.Submitted) -> None:
        event.stop()
        event.input.disabled = True
        self.set_focus(None)

    def action_answer(self, answer: str) -> None:
        """Send ``answer`` with the notes; close on success, show the error otherwise."""
        notes = self.query_one("#op-notes", Input).value
        self.answered = True
        try:
            self.app.session.reply_operator(self.run_id, self.request.id, answer, notes)
        except OperatorReplyError as exc:
            self.app.notify(str(exc), severity="error", title="Operator")
            self.close(None)
            return
        self.app.notify(f"answered {answer}" + (f" ({notes.strip()})" if notes.strip() else ""), title="Operator")
        self.close(answer)

    def action_later(self) -> None:
        """Hide the modal; the request stays pending."""
        self.close(None)

    def close(self, answer: str | None) -> None:
        """Dismiss with ``answer`` (None: not answered here) and run ``on_closed`` at once (Textual
        leaves the screen stack at once; the result callback runs later)."""
        self.dismiss(answer)
        if self._on_closed is not None:
            self._on_closed()
