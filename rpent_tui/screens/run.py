"""Run screen: the planner transcript, counters, step timeline, latest camera frames and the input line.

The input line takes the slash commands of ``SLASH_COMMANDS`` (``/rpent-task <suite> <task> <seed>``
with completion, ``/interrupt``, ``/cancel``, ``/help``, ``/quit``) or plain text that steers the
planner at its next turn boundary. A printable key that no binding of the screen takes (``/``, a
letter of a message) opens the input line with that character, so typing a command right away
never acts on the screen's keys. Esc interrupts the planner's current tool call (also
``/interrupt``); in the input line the first Esc leaves it. After Enter the focus returns to the
transcript, so the screen's keys act at once (``i`` types again). ``t`` prefills the last
``/rpent-task`` line, its arguments selected (typing replaces them, Enter runs it again). Everything
shown is read from the session's ``TaskRunView``; run events arrive in batches (<= ~12/s).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from rich.text import Text
from textual import events, on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.suggester import Suggester
from textual.widgets import Input, Static
from textual.widgets.input import Selection

from .base import LiveScreen
from ..widgets.footer import StableFooter
from rpent.session.commands import (TASK_COMMAND, CommandError, SteerMessage, TaskCommand, completions, parse_input,
                                    suites_ready)
from rpent.session.model import RunEvents, SessionChanged, SessionNotReady, TaskRunView
from ..widgets.frames import FramePane, renderer_name
from ..widgets.timeline import StepTimeline
from ..widgets.transcript import TranscriptView
from ..widgets.stable import LineInput, StableHeader

__all__ = ["RunScreen", "CommandSuggester", "counters_text", "closing_events", "SLASH_COMMANDS", "slash_help_text"]

#: The input line's slash commands: (command with its arguments, what it does, the key that does the same).
SLASH_COMMANDS = (
    (f"{TASK_COMMAND} <suite> <task> <seed>", "start a TaskRun (Enter twice replaces a running one)", "t"),
    ("/interrupt", "interrupt the planner's running tool call at its next env step", "Esc"),
    ("/cancel", "cancel the running TaskRun (recorded as cancelled)", "x"),
    ("/help", "list the keys and these commands", "F1"),
    ("/quit", "quit rpent-tui (an attached client asks: stop the session or detach)", "ctrl+q"),
)


def slash_help_text() -> str:
    """The slash commands, one per line (``/help`` and the F1 help show them)."""
    width = max(len(c) for c, _, _ in SLASH_COMMANDS)
    lines = [f"{c:<{width}}  {what} ({key})" for c, what, key in SLASH_COMMANDS]
    return "\n".join(lines + [f"{'<text>':<{width}}  steers the planner at its next turn boundary"])

#: More events than this waiting for a hidden Run screen: redraw from the model instead of appending.
CATCH_UP_MAX_EVENTS = 2000

#: Keys first (a key pressed while a streaming repaint runs waits for it). While the operator
#: is pressing keys (the last key less than ``KEYS_ACTIVE_S`` s ago: typing, switching screens) the
#: Run screen's streaming repaints are spaced at least ``KEYS_REPAINT_INTERVAL_S`` s apart (transcript,
#: counters, timeline; otherwise ``AppOptions.repaint_interval_s``) and camera frames
#: ``KEYS_FRAME_INTERVAL_S`` s apart (otherwise ``AppOptions.frame_interval_s``): fewer repaints for a
#: key to land in. Nothing is dropped: the next repaint shows every event and the newest frame.
KEYS_ACTIVE_S = 0.5
KEYS_REPAINT_INTERVAL_S = 1.0
KEYS_FRAME_INTERVAL_S = 2.0

STATE_STYLE = {"starting": "yellow", "running": "cyan", "succeeded": "bold green", "failed": "bold red",
               "aborted": "bold magenta", "cancelled": "dim", "error": "bold red"}


class CommandSuggester(Suggester):
    """Inline completion for ``/rpent-task`` (command, then suites, then task indices).

    The suite list comes from scanning the LIBERO registry (~1 s idle, tens of seconds on a busy
    machine), so completions are computed in a worker thread: the event loop keeps drawing and
    reading keys while the first scan runs."""

    def __init__(self, robot: Callable[[], str | None] = lambda: "libero",
                 last_task: Callable[[], str | None] = lambda: None) -> None:
        super().__init__(use_cache=False, case_sensitive=True)
        self._robot = robot  # the session's robot (its suites and task names), read at each suggestion
        self._last_task = last_task  # the last /rpent-task line (offered first)

    async def get_suggestion(self, value: str) -> str | None:
        """First completion of ``value`` (the last ``/rpent-task`` line when it extends ``value``, then the
        slash commands, then suites and tasks), or None (also while the session's robot is not known yet)."""
        last = self._last_task()
        if last and last.startswith(value) and value.startswith("/r") and last != value:
            return last
        if value.startswith("/") and " " not in value:
            names = [c.split(" ")[0] + (" " if " " in c else "") for c, _, _ in SLASH_COMMANDS]
            match = [n for n in names if n.startswith(value) and n != value]
            if match:
                return match[0]
        robot = self._robot()
        if robot is None:
            return None
        if value.startswith(TASK_COMMAND + " ") and len(value.split(" ")) == 2 and not suites_ready(robot):
            return None  # the registry scan still runs (warm_up): no suite suggestion yet, never wait for it
        options = await asyncio.to_thread(completions, value, robot)
        return options[0] if options else None


def counters_text(run: TaskRunView | None, session: Any, robot: str | None = None,
                  suites: tuple[str, ...] | None = None, renderer: str | None = None) -> Text:
    """The counters block: state, tokens in/out, tool calls, steps, operator and session state, and last
    the camera ``renderer`` (``widgets.frames.renderer_name``: also on an 80-column terminal, where the
    status line is cut). Before the first TaskRun: how to start one and ``suites``, the suite list of
    the session's ``robot`` (once the app has scanned it; never another robot's)."""
    text = _counters(run, session, robot, suites)
    if renderer:
        text.append(("" if text.plain.endswith("\n") else "\n") + f"cameras: {renderer}", style="dim")
    return text


def _counters(run: TaskRunView | None, session: Any, robot: str | None,
              suites: tuple[str, ...] | None) -> Text:
    text = Text()
    if run is None:
        text.append("no task yet\n", style="bold")
        text.append(f"session: {session.state}\n", style="dim")
        text.append("type /rpent-task <suite> <task> <seed> (/help: commands)", style="dim")
        if robot is not None and suites:
            listed = ", ".join(suites)
            if len(listed) > 64:  # LIBERO with its variants: the first few and the count (completion has all)
                listed = listed[:64].rsplit(", ", 1)[0] + f", … ({len(suites)} suites)"
            text.append(f"\n{robot} suites: {listed}", style="dim")
        return text
    text.append(f"TaskRun {run.id} ", style="bold")
    text.append(run.state, style=STATE_STYLE.get(run.state, ""))
    text.append(f"\n{run.command.display()}\n")
    text.append(f"tokens in {run.tokens_in:,} · out {run.tokens_out:,}\n")
    text.append(f"tool calls {run.tool_calls} · steps {len(run.timeline)}\n")
    if run.operator is not None:
        text.append("operator request waiting (o)\n", style="bold magenta")
    elif run.detail:
        text.append(run.detail[:120] + "\n", style="dim")
    return text


def closing_events(run: TaskRunView) -> list[dict[str, Any]]:
    """The closing lines of a finished TaskRun (``● <state>`` and ``■ finished`` with its outcome), rebuilt
    from the model: its transcript keeps planner events only, so a screen drawn after the run ended (a
    client attached later, a redraw) shows how it ended too."""
    if not run.finished:
        return []
    events: list[dict[str, Any]] = [{"kind": "status", "state": run.state, "detail": run.detail}]
    if run.outcome is not None:
        events.append({"kind": "finished", "outcome": run.outcome})
    return events


class RunScreen(LiveScreen):
    """The Run screen (F3)."""

    BINDING_GROUP_TITLE = "Run"
    # i, t and Esc move the focus, so they are priority bindings that move it at once (``Screen.set_focus``):
    # Textual forwards each queued key to the widget focused when the app takes it from its queue, and
    # a plain binding runs only after its key has bubbled back up from the focused widget, i.e. after
    # the keys queued behind it (one terminal read: a fast typist, a paste, tmux send-keys, a busy
    # machine) were already handed to the transcript, where they were lost or acted as keys.
    # ``check_action`` lets i and t through as text while the input line has the focus, and Enter through
    # to the transcript (raw JSON) while the input line does not have it.
    BINDINGS = [
        Binding("escape", "interrupt", "Interrupt", id="run-interrupt", priority=True,
                tooltip="Interrupt the planner's current tool call"),
        Binding("i", "focus_message", "Type", id="run-message", priority=True, tooltip="Type a message or a /command"),
        Binding("t", "new_task", "Task", id="run-new-task", priority=True,
                tooltip="Start a TaskRun: /rpent-task <suite> <task> <seed>"),
        # Enter in the input line: the same reason (the keys typed behind Enter are the screen's keys)
        Binding("enter", "send_message", "Send", id="run-send", show=False, priority=True,
                tooltip="Send the input line; the screen's keys act again at once"),
        Binding("o", "operator", "Answer", id="run-operator", tooltip="Answer the pending operator request"),
        Binding("x", "cancel_task", "Cancel", id="run-cancel", tooltip="Cancel the running TaskRun"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self._shown_run: str | None = None
        self._frames_shown_at = 0.0
        self._frames_timer = None
        self._pending: list[dict[str, Any]] = []
        self._repainted_at = 0.0
        self._repaint_timer = None
        self._confirm_replace: str | None = None
        self._stale = False
        self._counters_shown: Text | None = None

    def compose(self) -> ComposeResult:
        yield StableHeader()
        with Horizontal(id="run-body"):
            transcript = TranscriptView(id="transcript")
            transcript.border_title = "Transcript"
            yield transcript
            with Vertical(id="run-side"):
                yield Static("", id="counters")
                yield StepTimeline(id="timeline")
                with Horizontal(id="run-frames"):
                    yield FramePane("main camera", self.app.options.image_mode, id="frame-main")
                    yield FramePane("wrist camera", self.app.options.image_mode, id="frame-wrist")
        yield LineInput(placeholder="/rpent-task <suite> <task> <seed> · /help · text steers the planner · Esc interrupts",
                        suggester=CommandSuggester(self._session_robot, self.last_task_line), select_on_focus=False,
                        compact=True, id="message")
        yield StableFooter(compact=True, show_command_palette=False)

    def on_mount(self) -> None:
        self.render_all()
        self.query_one(TranscriptView).focus()

    # -- rendering from the model -------------------------------------------------------------
    def render_all(self) -> None:
        """Redraw everything from the session model (on mount and when the current TaskRun changes)."""
        run = self.app.session.current
        self._shown_run = run.id if run is not None else None
        self._pending = []
        transcript = self.query_one(TranscriptView)
        transcript.clear()
        if run is not None:
            transcript.add_events([*run.transcript, *closing_events(run)])
        transcript.scroll_end(animate=False)
        self._render_side(run, frames=True)

    def _render_side(self, run: TaskRunView | None, frames: bool) -> None:
        robot = self._session_robot()
        counters = counters_text(run, self.app.session, robot, self.app.task_lists.get(robot) if robot else None,
                                 renderer_name(self.app.options.image_mode, self.app.colour_depth))
        if counters != self._counters_shown:  # a repaint (and a layout pass only when the height changes)
            rows_changed = self._counters_shown is None or counters.plain.count("\n") != self._counters_shown.plain.count("\n")
            self._counters_shown = counters
            self.query_one("#counters", Static).update(counters, layout=rows_changed)
        self.query_one(StepTimeline).set_steps(run.timeline if run is not None else [])
        if frames:
            self._show_frames()
        self.sub_title = self.app.session_summary()

    def handle_service_event(self, event: Any) -> None:
        """Apply a session event (called by the app for every live screen). While another screen is
        shown nothing is drawn: events wait in ``_pending`` and are applied after this screen is
        shown again (so streaming runs cost a hidden Run screen nothing, and screen switches stay fast)."""
        run = self.app.session.current
        if not self.is_current:
            self._stale = True
            if isinstance(event, RunEvents) and run is not None and event.run_id == run.id == self._shown_run:
                self._pending.extend(e for e in event.events if e.get("kind") != "planner" or e.get("event") != "usage")
            return
        if isinstance(event, SessionChanged):
            if (run.id if run else None) != self._shown_run:
                self.render_all()
            else:
                self._render_side(run, frames=False)
        elif isinstance(event, RunEvents) and run is not None and event.run_id == run.id:
            if self._shown_run != run.id:
                self.render_all()
                return
            self._pending.extend(e for e in event.events if e.get("kind") != "planner" or e.get("event") != "usage")
            if self._repaint_timer is None:
                self._repaint_due()

    def _spacing(self, interval_s: float, while_keys_s: float) -> float:
        """``interval_s``, or ``while_keys_s`` when longer and the operator is pressing keys."""
        return max(interval_s, while_keys_s) if self.app.keys_active(KEYS_ACTIVE_S) else interval_s

    def _repaint_due(self) -> None:
        """Repaint now, or (re)arm the timer for when the spacing since the last repaint has passed
        (re-checked when it fires: keys pressed meanwhile stretch it, see ``KEYS_REPAINT_INTERVAL_S``)."""
        self._repaint_timer = None
        spacing = self._spacing(self.app.options.repaint_interval_s, KEYS_REPAINT_INTERVAL_S)
        wait = self._repainted_at + spacing - time.monotonic()
        if wait > 0.001:
            self._repaint_timer = self.set_timer(wait, self._repaint_due)
        else:
            self._repaint()

    def on_screen_resume(self) -> None:
        """Shown again: catch up with what arrived while hidden, right after the first paint."""
        if self._stale:
            self._stale = False
            self.call_after_refresh(self._catch_up)

    def _catch_up(self) -> None:
        run = self.app.session.current
        if (run.id if run else None) != self._shown_run or len(self._pending) > CATCH_UP_MAX_EVENTS:
            self.render_all()  # a new TaskRun, or so much happened that a redraw from the model is cheaper
        else:
            self._repaint()
            self._show_frames()

    def _repaint(self) -> None:
        """Apply the pending run events to the panes (at most every ``repaint_interval_s``): a scrolling
        transcript repaints its whole pane, so fewer, larger updates save terminal bandwidth."""
        self._repaint_timer = None
        if not self.is_current:  # a timer set before a switch away: the events wait for the catch-up
            self._stale = True
            return
        self._repainted_at = time.monotonic()
        events, self._pending = self._pending, []
        run = self.app.session.current
        if run is None or run.id != self._shown_run:
            return
        self.query_one(TranscriptView).add_events(events)
        self._render_side(run, frames=False)
        if any(e.get("kind") == "frames" for e in events):
            self._schedule_frames()

    def _schedule_frames(self) -> None:
        """Repaint the camera panes now, or once ``frame_interval_s`` has passed since the last repaint."""
        if self._frames_timer is not None:
            return  # a repaint is already scheduled; it will show the newest frame
        self._frames_due()

    def _frames_due(self) -> None:
        self._frames_timer = None
        spacing = self._spacing(self.app.options.frame_interval_s, KEYS_FRAME_INTERVAL_S)
        wait = self._frames_shown_at + spacing - time.monotonic()
        if wait > 0.001:
            self._frames_timer = self.set_timer(wait, self._frames_due)
        else:
            self._show_frames()

    def _show_frames(self) -> None:
        self._frames_timer = None
        if not self.is_current:  # hidden meanwhile: the catch-up shows the newest frames
            self._stale = True
            return
        self._frames_shown_at = time.monotonic()
        run = self.app.session.current
        caption = f"step {run.frames_step}" if run is not None and run.frames_step is not None else ""
        for label in ("main", "wrist"):
            png = run.frames.get(label) if run is not None else None
            self.query_one(f"#frame-{label}", FramePane).show(png, caption)

    # -- input ---------------------------------------------------------------------------------
    def _session_robot(self) -> str | None:
        """The session's ``--robot`` (None until an attached client has the session's config)."""
        return self.app.task_robot()

    def task_list_ready(self) -> None:
        """The robot's suite list is scanned (called by the app): show it in the hint before a TaskRun."""
        if self.app.session.current is None and self.is_mounted:
            self._render_side(None, frames=False)

    def action_send_message(self) -> None:
        """Enter in the input line: hand the keys back to the screen now (focus on the transcript, so
        ``t``, ``o``, ``x``, ``i`` typed right behind Enter act as keys), then send the line once the
        input has taken the keys queued before Enter (``_send_line`` runs in the input's own queue)."""
        box = self.query_one("#message", Input)
        self.set_focus(self.query_one(TranscriptView))
        box.call_later(self._send_line, box)

    def _send_line(self, box: Input) -> None:
        """Send the input line's text and clear it (keys typed after a later ``i`` start a new line). A
        refused line, or a new task that needs a second Enter, stays in the line, which gets the focus
        back (Enter again, or edit it)."""
        if self.submit_line(box.value):
            box.value = ""
        else:
            self.set_focus(box)

    def submit_line(self, line: str) -> bool:
        """Start a task, run a steering command, or queue a message (``line``: the input line's text).
        A new task while one runs needs a second submit of the same line (it replaces the running
        TaskRun). Returns False when the line was refused (an error notification says why) or waits for
        that confirmation."""
        word = line.strip().split(" ")[0].lower() if line.strip() else ""
        if word in ("/help", "/quit", "/cancel", "/interrupt"):
            self._screen_command(word)
            return True
        try:
            robot = self._session_robot()
            if robot is None and line.strip().startswith(TASK_COMMAND):
                raise CommandError("the session's configuration has not arrived yet (attaching); "
                                   "try again in a moment")
            parsed = parse_input(line, robot or "libero")
            if isinstance(parsed, TaskCommand):
                active = self.app.session.active
                if active is not None and self._confirm_replace != line.strip():
                    self._confirm_replace = line.strip()
                    self.notify(f"TaskRun {active.id} ({active.command.display()}) is still {active.state}: press "
                                f"Enter again to replace it with {parsed.display()}, or edit the line",
                                severity="warning", title="Replace the running task?")
                    return False
                self._confirm_replace = None
                self.app.last_task = parsed
                self.app.start_task(parsed)  # off the UI thread; the new TaskRun is drawn on SessionChanged
            elif isinstance(parsed, SteerMessage):
                reply = self.app.session.steer(parsed.text)
                self.query_one(TranscriptView).add_events([{"kind": "planner", "event": "operator_message", "text": parsed.text}])
                if reply and not reply.startswith("queued"):
                    self.notify(reply, title="Planner")
        except (CommandError, SessionNotReady, ValueError) as exc:
            self.notify(str(exc), severity="error", title="Input")
            return False
        return True

    def _screen_command(self, word: str) -> None:
        """``/help``, ``/quit``, ``/cancel`` and ``/interrupt``: the same as F1, ctrl+q, ``x`` and Esc."""
        if word == "/help":
            self.app.action_help()
        elif word == "/quit":
            self.app.call_later(self.app.run_action, "quit")
        elif word == "/cancel":
            self.action_cancel_task()
        else:
            self._interrupt()

    def last_task_line(self) -> str | None:
        """The ``/rpent-task`` line of the last TaskRun this client started, else of the session's
        current TaskRun (None before any)."""
        command = getattr(self.app, "last_task", None)
        if command is None:
            run = self.app.session.current
            command = run.command if run is not None else None
        if command is None or not isinstance(command, TaskCommand):
            return None
        return f"{TASK_COMMAND} {command.suite} {command.task} {command.seed}"

    def type_to_input(self, event: events.Key) -> None:
        """Called by the app for every key before it is dispatched: a printable key that no active
        binding takes, pressed while the input line does not have the focus, moves the focus there at
        once, so that key and every key queued behind it are typed into the line (``/rpent-task ...``
        typed right after start never acts on ``t``). ``?`` stays the help key."""
        if not self.is_current or isinstance(self.focused, Input) or not event.is_printable or not event.character:
            return
        if event.key in self.active_bindings:
            return
        self.set_focus(self.query_one("#message", Input))

    @on(Input.Changed, "#message")
    def _edited(self, event: Input.Changed) -> None:
        """An edited line needs its own confirmation. Compared with the line's text now, not the
        event's: the changes of keys typed before Enter may arrive after the line was sent."""
        if self._confirm_replace is not None and event.input.value.strip() != self._confirm_replace:
            self._confirm_replace = None

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """``i`` and ``t`` type text while the input line has the focus (they are priority bindings);
        Enter sends the line only from the input line (elsewhere it is the focused widget's key)."""
        if action in ("focus_message", "new_task") and isinstance(self.focused, Input):
            return False
        if action == "send_message":
            return isinstance(self.focused, Input) and self.focused.id == "message"
        return True

    def action_focus_message(self) -> None:
        """Focus the input line now, so the keys queued behind ``i`` reach it (see ``BINDINGS``)."""
        self.set_focus(self.query_one("#message", Input))

    def action_new_task(self) -> None:
        """Focus the input line now and prefill ``/rpent-task `` in it; the prefill runs in the input's
        own queue, so a line sent by an Enter typed before ``t`` is sent first and the keys behind
        ``t`` extend the prefill."""
        box = self.query_one("#message", Input)
        self.set_focus(box)
        box.call_later(self._prefill_task, box)

    def _prefill_task(self, box: Input) -> None:
        """``/rpent-task `` and the last TaskRun's arguments, selected: typing replaces them, Enter runs
        the same task again."""
        last = self.last_task_line()
        prefix = f"{TASK_COMMAND} "
        box.value = last or prefix
        box.selection = Selection(len(prefix), len(box.value)) if last else Selection.cursor(len(prefix))

    def action_interrupt(self) -> None:
        """Interrupt the planner's current tool call (Esc). In the input line, Esc first leaves it
        (focus on the transcript at once; a second Esc interrupts)."""
        if isinstance(self.focused, Input):
            self.set_focus(self.query_one(TranscriptView))
            return
        self._interrupt()

    def _interrupt(self) -> None:
        result = self.app.session.interrupt()
        self.notify("interrupt sent" if result == "accepted" else "nothing to interrupt",
                    severity="information" if result == "accepted" else "warning")
        self.query_one(TranscriptView).add_events([{"kind": "planner", "event": "interrupt"}] if result == "accepted" else [])

    def action_operator(self) -> None:
        """Open the pending operator request."""
        if not self.app.open_operator_request():
            self.notify("no operator request is waiting", severity="warning")

    def action_cancel_task(self) -> None:
        """Cancel the running TaskRun (it ends as ``cancelled``)."""
        run = self.app.session.active
        if run is None or not self.app.session.cancel_task(run.id):
            self.notify("no task is running", severity="warning")
        else:
            self.notify(f"TaskRun {run.id} cancelled")
