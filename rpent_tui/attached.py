"""The workbench attached to a session process: ``rpent-tui`` (default), ``rpent-tui --attach`` and
every browser tab of ``rpent --dashboard``.

``AttachedApp`` is ``RpentApp`` over a ``rpent.session.client.RemoteSession``: the session (shared
services, TaskRuns, operator requests, code cells) lives in the session process, so closing the
terminal, an SSH drop (SIGHUP) or closing a browser tab only detaches. Keys added here: F10 detach
(the session keeps running), shift+F8 download the current TaskRun's ``episode.mp4``, F8 download its latest
camera frames (in a browser these are real downloads; in a terminal they are saved to the
downloads folder). ctrl+q asks: stop the session and its services, or detach.

``python -m rpent_tui.attached SESSION`` is the client a dashboard tab runs (no terminal checks,
half-block images); in a terminal use ``rpent-tui --attach SESSION``.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from rich.text import Text
from textual.app import ComposeResult, SystemCommand
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen, Screen
from textual.widgets import Footer, Static

from .app import AppOptions, RpentApp
from .messages import ServiceEvent

__all__ = ["AttachedApp", "QuitSessionScreen", "run_attached", "start_or_attach"]


class QuitSessionScreen(ModalScreen[str | None]):
    """ctrl+q in an attached client: ``s`` stop the session and its services, ``d`` detach, Esc cancel."""

    DEFAULT_CSS = """
    QuitSessionScreen { align: center middle; }
    QuitSessionScreen > Vertical { width: 72; height: auto; border: thick $warning; background: $surface; padding: 1 2; }
    """
    BINDINGS = [
        Binding("s", "choose('stop')", "Stop session", id="quit-stop"),
        Binding("d", "choose('detach')", "Detach", id="quit-detach"),
        Binding("escape", "choose(None)", "Cancel", id="quit-cancel"),
    ]

    def __init__(self, name: str, active: str | None) -> None:
        super().__init__()
        self.session_name = name
        self.active = active

    def compose(self) -> ComposeResult:
        with Vertical():
            text = Text.assemble(("Quit rpent-tui\n\n", "bold"),
                                 (f"Session {self.session_name}" + (f" is running TaskRun {self.active}.\n" if self.active
                                                                    else ".\n")),
                                 ("[s] stop the session and its services (TaskRuns are cancelled and recorded)\n"
                                  "[d] detach: the session keeps running; re-attach with rpent-tui --attach "
                                  f"{self.session_name}\n[Esc] cancel", ""))
            yield Static(text, id="quit-text")
        yield Footer()

    def action_choose(self, choice: str | None) -> None:
        """Close with ``stop``, ``detach`` or None."""
        self.dismiss(choice)


class AttachedApp(RpentApp):
    """``RpentApp`` attached to a session process (see module docstring).

    Args:
        session: a ``RemoteSession`` (its ``run`` is started in the app's trio nursery).
        options: ``AppOptions``.
        owned: the ``Popen`` of a session process this client started (reaped when it stops).
    """

    BINDINGS = [
        Binding("f10", "detach", "Detach", id="detach", priority=True,
                tooltip="Leave the session running and close this client"),
        Binding("shift+f8", "download_video", "Download video", id="download-video", show=False,  # F7 is Batch
                tooltip="Download the current TaskRun's episode.mp4"),
        Binding("f8", "download_frames", "Download frames", id="download-frames", show=False,
                tooltip="Download the current TaskRun's latest camera frames (PNG)"),
    ]

    def __init__(self, session: Any, options: AppOptions | None = None, owned: subprocess.Popen | None = None) -> None:
        super().__init__(lambda sink: _bind(session, sink), options)
        self.cells = session.cells
        self.flywheel = session.flywheel  # exports run in the session: a detach does not stop them
        self.owned = owned
        self.stopped_session = False
        self._attached_once = False

    def task_robot(self) -> str | None:
        """The session's ``--robot``, known from the session's snapshot on (None before: this client
        never offers or scans another robot's suites, e.g. LIBERO's for a Meta-World session)."""
        return super().task_robot() if self._attached_once else None

    def warm_task_list(self) -> None:
        """At mount the session's robot is not known yet: the scan starts with the first snapshot."""
        if self._attached_once:
            super().warm_task_list()

    @property
    def session_name(self) -> str:
        """The session's directory name (what ``rpent-tui --attach`` takes)."""
        return self.session.session_dir.name

    def on_service_event(self, message: ServiceEvent) -> None:
        """The session process ended: leave with a message (the base class forwards everything else)."""
        from rpent.session.client import SessionGone

        event = message.event
        if not self._attached_once and type(event).__name__ == "SessionChanged":
            # the backlog arrived (maybe before the Run screen had its size): show its end
            self._attached_once = True  # the snapshot (and with it the session's config) arrived
            self.warm_task_list()  # the suite list of the session's own robot
            self.set_timer(0.5, self._scroll_to_latest)
        if isinstance(event, SessionGone) and not self.stopped_session:
            self.exit(return_code=0 if event.stopped else 1,
                      message=f"rpent-tui: {event.detail} ({self.session.session_dir})")

    def _scroll_to_latest(self) -> None:
        from .widgets.transcript import TranscriptView

        for view in self.screen.query(TranscriptView):
            view.scroll_end(animate=False)

    def session_summary(self) -> str:
        """Subtitle: the base summary plus the session name."""
        return f"{super().session_summary()} · attached to {self.session_name} (F10 detach)"

    def _exit_on_signal(self, code: int) -> None:
        """SIGHUP (SSH drop, terminal closed) or SIGTERM: this client ends, the session keeps running."""
        self.exit(return_code=code, message=f"rpent-tui: signal {code - 128} received; detached, session "
                                            f"{self.session_name} keeps running (rpent-tui --attach {self.session_name})")

    def _trio_crashed(self, error: BaseException) -> None:
        """The attach itself failed (refused, no socket): one line naming the cause and the fix."""
        from rpent.session.client import attach_error

        leaves = getattr(error, "exceptions", None)
        while leaves:  # unwrap the nursery's exception group
            error = leaves[0]
            leaves = getattr(error, "exceptions", None)
        if isinstance(error, OSError):
            self.exit(return_code=1, message=f"rpent-tui: {attach_error(error, self.session.paths)}")
        else:
            super()._trio_crashed(error)

    def _hard_exit(self, code: int) -> None:
        """A stuck exit: this client owns no services (the session does); just end the process."""
        os._exit(code)

    async def on_unmount(self) -> None:
        self.session.close()

    # -- actions -------------------------------------------------------------------------------------
    async def action_quit(self) -> None:
        """Ask whether to stop the session or detach (a stopped session cannot be re-attached)."""
        if isinstance(self.screen, QuitSessionScreen):
            return
        active = self.session.active

        def chosen(choice: str | None) -> None:
            if choice == "stop":
                self.action_stop_session()
            elif choice == "detach":
                self.action_detach()

        self.push_screen(QuitSessionScreen(self.session_name, active.id if active is not None else None), chosen)

    def action_detach(self) -> None:
        """Close this client; the session keeps running."""
        self.exit(return_code=0, message=f"rpent-tui: detached; session {self.session_name} keeps running "
                                         f"(re-attach: rpent-tui --attach {self.session_name})")

    def action_stop_session(self) -> None:
        """Stop the session process (TaskRuns cancelled and recorded, services stopped), then exit."""
        self.stopped_session = True
        self.session.stop_session()
        if self.owned is not None:
            try:
                self.owned.wait(timeout=60)
            except subprocess.TimeoutExpired:
                pass
        self.exit(return_code=0, message=f"rpent-tui: session {self.session_name} stopped")

    def action_download_video(self) -> None:
        """Deliver ``episode.mp4`` of the current TaskRun (written when the run ends)."""
        run = self.session.current
        path = Path(run.output_dir) / "episode.mp4" if run is not None else None
        if path is None or not path.is_file():
            self.notify("no episode.mp4 yet: it is written when a TaskRun ends (--no-video turns it off)",
                        severity="warning", title="Download")
            return
        self.deliver_binary(path, save_filename=f"{self.session_name}_{run.id}_episode.mp4", mime_type="video/mp4")
        self.notify(f"delivering {path.name} of TaskRun {run.id}", title="Download")

    def action_download_frames(self) -> None:
        """Deliver the latest main and wrist camera frames of the current TaskRun as PNG files."""
        run = self.session.current
        if run is None or not run.frames:
            self.notify("no camera frames yet", severity="warning", title="Download")
            return
        for label, png in sorted(run.frames.items()):
            self.deliver_binary(io.BytesIO(png), save_filename=f"{run.id}_{label}_step{run.frames_step}.png",
                                mime_type="image/png")
        self.notify(f"delivering {len(run.frames)} frame(s) of TaskRun {run.id}", title="Download")

    def get_system_commands(self, screen: Screen):
        """Palette entries of an attached client, besides the workbench's."""
        yield from super().get_system_commands(screen)
        yield SystemCommand("Session: detach", "Leave the session running and close this client (F10)",
                            self.action_detach)
        yield SystemCommand("Session: stop", "Stop the session and its services", self.action_stop_session)
        yield SystemCommand("Download: episode.mp4", "The current TaskRun's video (shift+F8)", self.action_download_video)
        yield SystemCommand("Download: frames", "The current TaskRun's latest camera frames (F8)",
                            self.action_download_frames)


def _bind(session: Any, sink: Any) -> Any:
    session._sink = sink
    return session


def start_or_attach(config: Any, vla_server_args: list[str]) -> tuple[Any, subprocess.Popen | None]:
    """Start a detached session for ``config`` (or find the one already running in its directory).

    Returns ``(SessionPaths, Popen or None)``.

    Raises:
        FileExistsError / ValueError / rpent.session.process.SessionStartError: with a one-line reason.
    """
    from rpent.session.layout import SessionPaths
    from rpent.session.process import start_detached, write_session_options

    paths = SessionPaths(Path(config.output_dir).resolve())
    if paths.running():
        return paths, None
    write_session_options(paths, config, vla_server_args)
    return paths, start_detached(paths)


def run_attached(paths: Any, options: AppOptions, *, mouse: bool = True, owned: subprocess.Popen | None = None) -> int:
    """Attach ``AttachedApp`` to the session in ``paths`` and run it; returns the exit status."""
    from rpent.session.client import RemoteSession, attach_error

    try:
        session = RemoteSession(paths, lambda event: None)
    except OSError as exc:
        print(f"rpent-tui: {attach_error(exc, paths)}", file=sys.stderr)
        return 2
    app = AttachedApp(session, options, owned=owned)
    app.run(mouse=mouse)
    return int(app.return_code or 0)


def main(argv: list[str] | None = None) -> int:
    """``python -m rpent_tui.attached SESSION_DIR``: the client each dashboard browser tab runs (its
    stdin/stdout are textual-serve's pipes, not a terminal; images use the half-block renderer)."""
    import argparse

    from rpent.session.layout import SessionNotFound, resolve_session

    p = argparse.ArgumentParser(prog="python -m rpent_tui.attached",
                                description="rpent workbench attached to a session (one dashboard tab).")
    p.add_argument("session", help="session directory or name")
    p.add_argument("--frame-interval", type=float, default=1.0, help="minimum seconds between camera-frame repaints")
    args = p.parse_args(argv)
    try:
        paths = resolve_session(args.session)
    except SessionNotFound as exc:
        p.exit(2, f"rpent-tui: {exc}\n")
    return run_attached(paths, AppOptions(image_mode="halfblock", frame_interval_s=args.frame_interval))


if __name__ == "__main__":
    sys.exit(main())
