"""``RpentApp``: the operator's workbench (Textual on a trio nursery, keyboard only, SSH-friendly).

Architecture:

* Trio runs in guest mode on Textual's asyncio loop (``services.trio_bridge.TrioBridge``); its
  root nursery owns the ``Session`` (supervisor, shared services, TaskRuns), the flywheel export
  and code cells. ``on_unmount`` cancels it and waits, so every child server is stopped and every
  run record closed before the process exits. SIGHUP (SSH drop, tmux kill) and SIGTERM exit the app
  the same way (``install_exit_signals``), first cancelling the running TaskRuns with the signal as
  their recorded reason (``interrupted: terminal hung up (SIGHUP)``).
* The service layer reports through one thread-safe sink -> ``ServiceEvent`` messages; the app
  forwards each to every live screen's ``handle_service_event`` and opens the operator modal.
* Screens are modes: F2 Services, F3 Run, F4 Code editor, F5 Trajectories, F6 Flywheel export, F7 Batch,
  shift+F7 Leaderboard, F9 Explore.
  F1/``?`` help, ctrl+p palette, ctrl+o jump overlay, ctrl+t themes, ctrl+q quit; every binding
  has an id, remappable with ``--keymap`` (``App.set_keymap``).
"""

from __future__ import annotations

import asyncio
import functools
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from textual import events
from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.screen import Screen

from .messages import ServiceEvent
from .screens.batch import BatchScreen
from .screens.editor import EditorScreen
from .screens.explore import ExploreScreen
from .screens.flywheel import FlywheelScreen
from .screens.help import HelpScreen
from .screens.jump import JumpScreen
from .screens.leaderboard import LeaderboardScreen
from .screens.operator import FRAME_HISTORY, OperatorModal
from .screens.run import RunScreen
from .screens.services import ServicesScreen
from .screens.trajectories import TrajectoriesScreen
from rpent.session.code_cells import CodeCellService
from rpent.session.commands import known_suites, warm_up as warm_suite_list
from rpent.session.flywheel_jobs import FlywheelRunner
from rpent.session.core import Session
from rpent.session.model import OperatorPrompt, OperatorResolved, RunEvents, SessionChanged
from .services.gc_policy import QuietCollector
from .services.trio_bridge import TrioBridge, install_exit_signals

__all__ = ["RpentApp", "AppOptions", "SCREEN_MODES"]

#: How often (s) the app offers the garbage collector a full collection, and how long (s) without a key
#: counts as quiet (``services.gc_policy.QuietCollector``).
GC_TICK_S = 0.25
GC_QUIET_S = 1.0

#: Screen modes and their F-keys.
SCREEN_MODES = {"services": ("f2", ServicesScreen, "Services"), "run": ("f3", RunScreen, "Run"),
         "editor": ("f4", EditorScreen, "Code editor"), "trajectories": ("f5", TrajectoriesScreen, "Trajectories"),
         "flywheel": ("f6", FlywheelScreen, "Flywheel export"), "batch": ("f7", BatchScreen, "Batch"),
         "leaderboard": ("shift+f7", LeaderboardScreen, "Leaderboard"), "explore": ("f9", ExploreScreen, "Explore")}


@dataclass
class AppOptions:
    """UI options (``rpent-tui`` flags).

    Attributes:
        image_mode: resolved image mode: ``sixel``, ``kitty``, ``halfblock`` or ``none``.
        code_timeout_s / code_max_calls: code-policy cell limits (s, robot calls per cell; seeds: 120, 100).
        logs_dir: root the Trajectories and Flywheel screens scan (default: the session output dir).
        start_mode: the first screen.
        start_session: run the session (supervisor, shared services) in the trio nursery; False shows
            the session model as given (snapshot tests).
        theme: Textual theme name, e.g. ``textual-dark``, ``textual-ansi`` for low-colour terminals.
        keymap: binding id -> keys overrides.
        flywheel_program: command prefix of the exporter (default ``python -m rpent.cli.flywheel``).
        frame_interval_s: minimum seconds between two camera-frame repaints on the Run screen (an image
            pane is the costliest repaint over SSH: ~25 KB per 128 px half-block frame); the newest frame
            is always shown, just not more often.
        repaint_interval_s: minimum seconds between two transcript/counter repaints of the Run screen
            (events still reach the model every 80 ms; 0.3 s ~ the reference's 4 Hz batched log flush).
        colour_depth: ``truecolor``, ``256`` or ``16`` to override the terminal's detected colours for the
            camera panes (None: detected, see ``RpentApp.colour_depth``).
    """

    image_mode: str = "halfblock"
    code_timeout_s: float = 120.0
    code_max_calls: int = 100
    logs_dir: Path | None = None
    start_mode: str = "run"
    start_session: bool = True
    theme: str | None = None
    keymap: dict[str, str] = field(default_factory=dict)
    flywheel_program: list[str] | None = None
    frame_interval_s: float = 1.0
    repaint_interval_s: float = 0.3
    colour_depth: str | None = None


class RpentApp(App[int]):
    """The rpent TUI.

    Args:
        make_session: ``sink -> Session``; called once with the app's thread-safe event sink.
        options: ``AppOptions``.
    """

    TITLE = "rpent"
    CSS_PATH = "tcss/app.tcss"
    MODES = {name: cls for name, (_, cls, _) in SCREEN_MODES.items()}
    BINDINGS = [
        # F-keys never type text, so they are priority bindings: they work even inside the editor.
        Binding("f1", "help", "Help", id="help", tooltip="Keys of this screen", priority=True),
        Binding("question_mark", "help", "Help", id="help-alt", show=False),
        *[Binding(key, f"switch_mode('{name}')", title, id=f"screen-{name}", show=False, priority=True)
          for name, (key, _, title) in SCREEN_MODES.items()],
        Binding("ctrl+o", "jump", "Jump", id="jump", show=False, tooltip="Jump to a pane by key"),
        Binding("ctrl+t", "change_theme", "Theme", id="theme", show=False),
        Binding("f12", "screenshot_svg", "Screenshot", id="screenshot", show=False, priority=True,
                tooltip="Save an SVG of the screen to <session>/screenshots/"),
        Binding("ctrl+q", "quit", "Quit", id="quit", priority=True),
    ]

    def __init__(self, make_session: Callable[[Callable[[Any], None]], Session], options: AppOptions | None = None) -> None:
        super().__init__()
        self.options = options or AppOptions()
        self.session = make_session(self.post_event)
        self.logs_dir = Path(self.options.logs_dir or self.session.output_dir)
        self.export_dir = self.session.output_dir / "exports"
        self.flywheel = FlywheelRunner(self.post_event, self.session.output_dir, program=self.options.flywheel_program)
        self.cells = CodeCellService(self.post_event)
        self.bridge = TrioBridge(on_crash=self._trio_crashed)
        self.live_screens: set[Screen] = set()
        self._restore_signals: Callable[[], None] | None = None
        self._operator_modal: OperatorModal | None = None
        self.task_lists: dict[str, tuple[str, ...]] = {}  # robot -> its suites, once this app scanned them
        self._switching_shown_mode = False
        self._modes_shown: set[str] = set()  # modes whose screen was composed (switched to once; never removed)
        self.collector = QuietCollector()  # full garbage collections wait for a quiet moment
        self._last_key_at = float("-inf")  # time.monotonic() of the last key event
        self.last_task: Any = None  # the TaskCommand this client started last (``t`` prefills it)
        self._frame_history: dict[str, deque] = {}  # run id -> (step, {label: PNG}), see frame_history

    # -- lifecycle ---------------------------------------------------------------------------------
    def on_mount(self) -> None:
        """Start trio, the session and the signal handlers; show the first screen."""
        self.bridge.start()
        if self.options.start_session:
            self.bridge.spawn(self.session.run, name="session")
            self.warm_task_list()
        if threading.current_thread() is threading.main_thread():
            self._restore_signals = install_exit_signals(self._exit_on_signal, asyncio.get_running_loop(),
                                                         on_stuck=self._hard_exit)
        if self.options.theme:
            self.theme = self.options.theme
        if self.options.keymap:
            self.set_keymap(self.options.keymap)
        self.switch_mode(self.options.start_mode)
        self.call_after_refresh(self.collector.freeze)
        self.set_interval(GC_TICK_S, lambda: self.collector.tick(quiet=not self.keys_active(GC_QUIET_S)))

    async def on_unmount(self) -> None:
        """Cancel every background task and wait for trio: servers stopped, records closed."""
        if self._restore_signals is not None:
            self._restore_signals()
        await self.bridge.aclose()
        self.collector.stop()

    def _exit_on_signal(self, code: int) -> None:
        """SIGHUP (terminal closed, SSH drop) or SIGTERM: cancel the running TaskRuns with the signal
        as their recorded reason (``interrupted: terminal hung up (SIGHUP)``), then exit."""
        from rpent.planners.steering import signal_stop_reason

        stop_runs = getattr(self.session, "stop_runs", None)
        if self.options.start_session and callable(stop_runs):
            try:
                stop_runs(signal_stop_reason(code - 128))
            except Exception:  # noqa: BLE001 - the exit must happen; the runs are cancelled with the nursery anyway
                pass
        self.exit(return_code=code, message=f"rpent-tui: signal {code - 128} received; stopped every service")

    def _hard_exit(self, code: int) -> None:
        """Last resort when a clean exit is stuck (called from the watchdog thread): SIGKILL every
        child process group we started (each child leads its own group), then end the process."""
        import os
        import signal as _signal

        pids = [v.pid for v in self.session.services.values() if v.pid and v.state in ("starting", "ready")]
        if self.flywheel.status.state == "running" and self.flywheel.status.pid:
            pids.append(self.flywheel.status.pid)
        for pid in pids:
            try:
                os.killpg(pid, _signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        os._exit(code)

    def _trio_crashed(self, error: BaseException) -> None:
        self.exit(return_code=1, message=f"rpent-tui: background task failed: {type(error).__name__}: {error}")

    async def on_event(self, event: events.Event) -> None:
        """Textual's event handling; notes the time of every key (``keys_active``)."""
        if isinstance(event, events.Key):
            self._last_key_at = time.monotonic()
            if not event.is_forwarded:
                redirect = getattr(self.screen, "type_to_input", None)
                if redirect is not None:
                    redirect(event)  # may move the focus before the key is dispatched (RunScreen)
        await super().on_event(event)

    def keys_active(self, within_s: float) -> bool:
        """Whether the operator pressed a key in the last ``within_s`` seconds (screens then space out
        streaming repaints, so keys rarely wait behind one: ``screens.run.KEYS_ACTIVE_S``)."""
        return time.monotonic() - self._last_key_at < within_s

    # -- screen switches -----------------------------------------------------------------------------
    def switch_mode(self, mode: str) -> Any:
        """Show screen mode ``mode`` (F2..F9). A screen shown before is drawn in the next frame:
        Textual's ``switch_mode`` first suspends every repaint for 50 ms (``delay_update``, to mask the
        mounting of a new screen) and discards any frame rendered meanwhile (measured: 50 ms plus a
        wasted ~25 ms render on every F2/F3 switch at 120x40), so that delay is kept only for a mode's
        first screen, which is still being composed."""
        first = mode not in self._modes_shown  # our own record (not Textual's private ``_screen_stacks``)
        self._switching_shown_mode = not first
        try:
            result = super().switch_mode(mode)
            self._modes_shown.add(mode)
            return result
        finally:
            self._switching_shown_mode = False

    def delay_update(self, delay: float = 0.05) -> None:
        """Textual's repaint delay (s), skipped during a switch to a screen shown before (``switch_mode``)."""
        if self._switching_shown_mode:
            return
        super().delay_update(delay)

    # -- service events ----------------------------------------------------------------------------
    def post_event(self, event: Any) -> None:
        """Thread-safe sink for service-layer events."""
        self.post_message(ServiceEvent(event))

    def on_service_event(self, message: ServiceEvent) -> None:
        """Forward to every live screen; open/close the operator modal."""
        event = message.event
        if isinstance(event, SessionChanged):  # a TaskRun that ended takes its code-cell worker with it
            active = self.session.active
            self.cells.release(self.session.toolkit_for(active.id) if active is not None else None)
        if isinstance(event, RunEvents):
            self._keep_frames(event)
        if isinstance(event, OperatorPrompt):
            self._show_operator(event.run_id)
        elif isinstance(event, OperatorResolved) and self._operator_modal is not None:
            modal = self._operator_modal
            if modal.request.id == event.request.id and not modal.answered and self.screen is modal:
                modal.close(None)  # answered elsewhere or cancelled (the TaskRun ended)
        for screen in list(self.live_screens):
            handler = getattr(screen, "handle_service_event", None)
            if handler is not None and screen.is_mounted:
                handler(event)

    def _keep_frames(self, event: RunEvents) -> None:
        """Keep the last ``FRAME_HISTORY`` camera frames of the TaskRun (the verdict window steps through
        them); only the two newest TaskRuns' frames are kept."""
        frames = [e for e in event.events if e.get("kind") == "frames"]
        if not frames:
            return
        history = self._frame_history.get(event.run_id)
        if history is None:
            history = self._frame_history[event.run_id] = deque(maxlen=FRAME_HISTORY)
            for old in list(self._frame_history)[:-2]:
                del self._frame_history[old]
        for e in frames:
            pngs = {k: bytes(v) for k, v in e.items() if k in ("main", "wrist") and isinstance(v, (bytes, bytearray))}
            if pngs:
                history.append((e.get("step"), pngs))

    def frame_history(self, run_id: str) -> list[tuple[int | None, dict[str, bytes]]]:
        """``(step, {label: PNG})`` of TaskRun ``run_id``'s last camera frames, oldest first (what this
        client received; a client attached later has only the frames sent since)."""
        return list(self._frame_history.get(run_id, ()))

    def _show_operator(self, run_id: str) -> bool:
        operator = self.session.operator_for(run_id)
        request = operator.pending if operator is not None else None
        if request is None:
            return False
        if self._operator_modal is not None and self._operator_modal.is_attached:
            return True
        modal = OperatorModal(run_id, request, self.options.image_mode, on_closed=self._keys_after_operator)
        self._operator_modal = modal

        def closed(_answer: str | None) -> None:
            if self._operator_modal is modal:
                self._operator_modal = None

        self.push_screen(modal, closed)
        return True

    def _keys_after_operator(self) -> None:
        """The operator modal just closed (answer, Esc, answered elsewhere): never hand the keys back to a
        text box: on the Run screen the transcript gets the focus at once, so s/f/t/o/x typed right behind
        the answer act as keys."""
        self._operator_modal = None
        screen = self.screen
        if isinstance(screen, RunScreen) and screen.is_mounted:
            screen.set_focus(screen.query_one("#transcript"))

    def open_operator_request(self) -> bool:
        """Open the modal for the current TaskRun's pending request; False when none waits."""
        run = self.session.active
        return run is not None and self._show_operator(run.id)

    def task_robot(self) -> str | None:
        """The robot whose suites and tasks ``/rpent-task`` offers and parses: the session's ``--robot``
        (None while unknown: an attached client before the session's snapshot arrived)."""
        return str(getattr(getattr(self.session, "config", None), "robot", None) or "libero")

    def warm_task_list(self) -> None:
        """Scan the session robot's suite list in a thread (LIBERO's registry scan takes seconds on a busy
        machine; ``/rpent-task`` completion never waits for it); the Run screen's hint shows the list
        once it is known."""
        robot = self.task_robot()
        if robot is None:
            return

        def scan() -> None:
            warm_suite_list(robot).join()
            try:
                suites = known_suites(robot)
            except Exception:  # noqa: BLE001 - an unknown robot: /rpent-task names the problem when used
                return
            try:
                self.call_from_thread(self._task_list_ready, robot, suites)
            except Exception:  # noqa: BLE001 - the app ended meanwhile
                pass

        threading.Thread(target=scan, name="rpent-task-list", daemon=True).start()

    def _task_list_ready(self, robot: str, suites: tuple[str, ...]) -> None:
        self.task_lists[robot] = tuple(suites)
        self.collector.freeze()  # the registry scan's objects live as long as the app
        for screen in list(self.live_screens):
            handler = getattr(screen, "task_list_ready", None)
            if handler is not None and screen.is_mounted:
                handler()

    def start_task(self, command: Any) -> None:
        """Start a TaskRun for ``command`` off the UI thread: the session's ``start_task_async`` runs in
        the trio nursery (a local session claims the record directory in a worker thread; an attached
        client makes its blocking call to the session process in one). The screens draw the new
        TaskRun from the session's ``SessionChanged``; the outcome is a notification ("Task selected
        ... (TaskRun N)", or the session's one-line refusal, e.g. ``SessionNotReady``)."""
        session = self.session

        async def start() -> None:
            try:
                run = await session.start_task_async(command)
            except Exception as exc:  # noqa: BLE001 - the session's refusal, shown to the operator
                self.notify(str(exc) or type(exc).__name__, severity="error", title="Task not started")
                return
            self.notify(f"Task selected: {command.display()} (TaskRun {run.id})")

        self.bridge.spawn(start, name=f"start-task {command.display()}")

    def session_summary(self) -> str:
        """One line for screen subtitles (the status bar): session state, the current TaskRun and the
        image renderer of the camera panes (``sixel``, ``kitty``, ``halfblock`` or ``none``)."""
        run = self.session.current
        text = f"session {self.session.state} · {self.session.config.planner}"
        if self.session.config.model:
            text += f" {self.session.config.model}"
        if run is not None:
            text += f" · TaskRun {run.id} {run.command.display()} {run.state}"
        from .widgets.frames import renderer_name

        return text + f" · images {renderer_name(self.options.image_mode, self.colour_depth)}"

    @property
    def colour_depth(self) -> str:
        """The terminal's colours as the UI draws them: ``truecolor``, ``256`` or ``16`` (``AppOptions.colour_depth``
        when set, else Rich's detection from ``COLORTERM`` / ``TERM`` / ``TEXTUAL_COLOR_SYSTEM``)."""
        system = self.options.colour_depth or self.console.color_system or "standard"
        return {"truecolor": "truecolor", "256": "256"}.get(system, "16")

    # -- trio helpers --------------------------------------------------------------------------------
    def run_in_trio(self, fn: Callable[..., Awaitable[Any]], *args: Any, description: str = "task", **kwargs: Any) -> None:
        """Run ``fn(*args, **kwargs)`` in the trio nursery; an exception becomes an error notification."""
        call = functools.partial(fn, *args, **kwargs)

        async def guarded() -> None:
            try:
                await call()
            except Exception as exc:  # noqa: BLE001 - reported to the operator, never crashes the nursery
                self.notify(f"{description} failed: {exc}", severity="error", title="Error")

        self.bridge.spawn(guarded, name=description)

    # -- actions -------------------------------------------------------------------------------------
    def action_help(self) -> None:
        """Show the keys of the current screen."""
        if isinstance(self.screen, HelpScreen):
            self.screen.dismiss(None)
            return
        self.push_screen(HelpScreen(self.screen))

    def action_screenshot_svg(self) -> None:
        """Save an SVG of the current screen as ``<session>/screenshots/<screen>_<NNN>.svg`` (atomic),
        0.3 s later so that pending updates land and earlier toasts are gone."""
        self.clear_notifications()
        self.set_timer(0.3, self._save_screenshot)

    def _save_screenshot(self) -> None:
        import os

        folder = self.session.output_dir / "screenshots"
        folder.mkdir(parents=True, exist_ok=True)
        name = type(self.screen).__name__.removesuffix("Screen").removesuffix("Modal").lower() or "screen"
        n = 1
        while (folder / f"{name}_{n:03d}.svg").exists():
            n += 1
        target = folder / f"{name}_{n:03d}.svg"
        tmp = target.with_name(f".{target.name}.tmp")
        tmp.write_text(self.export_screenshot(title=f"rpent-tui {name}"), encoding="utf-8")
        os.replace(tmp, target)
        self.notify(f"screenshot saved to {target}", title="Screenshot")

    def action_jump(self) -> None:
        """Open the jump overlay for the current screen."""
        target = self.screen

        def jumped(widget: Any) -> None:
            if widget is not None:
                widget.focus()

        self.push_screen(JumpScreen(target), jumped)

    def key_of(self, binding: Binding) -> str:
        """The key(s) of ``binding`` as the footer shows them, after ``--keymap`` overrides."""
        keys = self.options.keymap.get(binding.id, binding.key) if binding.id else binding.key
        return ", ".join(self.get_key_display(Binding(k.strip(), binding.action)) for k in keys.split(","))

    def palette_bindings(self) -> Iterable[tuple[str | None, str, Binding]]:
        """Every bound action for the command palette: ``(mode or None for app-wide, group title, binding)``:
        the app's keys, then each screen's (and the Run screen's transcript keys)."""
        from .widgets.transcript import TranscriptView

        for cls in type(self).__mro__:  # the app's own keys (an attached client adds F10, F8)
            for binding in cls.__dict__.get("BINDINGS", ()):
                if isinstance(binding, Binding) and binding.description and not binding.action.startswith("switch_mode"):
                    yield None, "App", binding
        for mode, (_, cls, title) in SCREEN_MODES.items():
            extra = TranscriptView.BINDINGS if mode == "run" else ()
            for binding in [*cls.BINDINGS, *extra]:
                if isinstance(binding, Binding) and binding.description:
                    yield mode, title, binding

    def _palette_action(self, mode: str | None, action: str, widget: type | None = None) -> Callable[[], Awaitable[None]]:
        async def run() -> None:
            if mode is not None and self.current_mode != mode:
                await self.switch_mode(mode)
            target: Any = self if mode is None else self.screen
            if widget is not None:  # a widget's key (the Run screen's transcript): focus it first
                found = self.screen.query(widget)
                if found:
                    target = found.first()
                    self.screen.set_focus(target)
            await self.run_action(action, target)

        return run

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        """Command palette entries: every bound action with its key (the app's, then each screen's: a
        screen's action switches to that screen first), the screens, the slash commands, then Textual's."""
        from .widgets.transcript import TranscriptView

        transcript_ids = {b.id for b in TranscriptView.BINDINGS}
        for name, (key, _, title) in SCREEN_MODES.items():
            yield SystemCommand(f"Switch screen: {title} [{key.upper()}]", f"Show the {title} screen",
                                functools.partial(self.switch_mode, name))
        for mode, group, binding in self.palette_bindings():
            if binding.action in ("help",) and binding.id != "help":
                continue
            text = binding.tooltip or binding.description
            title = f"{group}: {binding.description}" + (f" — {text}" if text != binding.description else "")
            widget = TranscriptView if binding.id in transcript_ids else None
            yield SystemCommand(f"{title} [{self.key_of(binding)}]",
                                f"binding id {binding.id}" if binding.id else binding.action,
                                self._palette_action(mode, binding.action, widget))
        yield SystemCommand("Run: new task — type /rpent-task <suite> <task> <seed> [t]",
                            "Prefill the input line with the last task", self._palette_action("run", "new_task"))
        yield SystemCommand("Run: slash commands and keys — /help [F1]", "List the keys and the slash commands",
                            self.action_help)
        yield SystemCommand("Trajectories: open the current TaskRun's trajectory [F5]",
                            "Show the current TaskRun in the Trajectories screen", self.open_current_trajectory)
        yield from super().get_system_commands(screen)

    async def open_current_trajectory(self) -> None:
        """Switch to the Trajectories screen with the current TaskRun's record selected."""
        await self.switch_mode("trajectories")
        run = self.session.current
        if run is not None and hasattr(self.screen, "select_run"):
            self.screen.select_run(Path(run.output_dir))
