"""Pilot test of the workbench attached to a session (``AttachedApp`` over ``RemoteSession``), keys
only: start a TaskRun, see its transcript and frames, answer the verdict modal, steer echo, quit
asks and ``d`` detaches (the session keeps serving), a re-attached app shows the finished TaskRun
and ``s`` in the quit dialog stops the session.

The session server runs in its own thread (its own trio run, as in the session process) with the
TUI tests' ``run_task`` stand-in; the app talks to it over the real Unix socket.
"""

from __future__ import annotations

import asyncio
import os
import threading

import trio

from rpent.session.client import RemoteSession
from rpent.session.layout import SessionPaths
from rpent.session.server import SessionServer


class ServerThread:
    """A ``SessionServer`` in a thread of its own; ``stop()`` ends it."""

    def __init__(self, server: SessionServer) -> None:
        self.server = server
        self.ready = threading.Event()
        self.token = None
        self.thread = threading.Thread(target=trio.run, args=(self._main,), daemon=True)

    async def _main(self) -> None:
        self.token = trio.lowlevel.current_trio_token()
        async with trio.open_nursery() as nursery:
            await nursery.start(self.server.serve)
            self.ready.set()

    def __enter__(self):
        self.thread.start()
        assert self.ready.wait(30), "session server did not start"
        return self

    def __exit__(self, *exc):
        if self.thread.is_alive():
            try:
                self.token.run_sync_soon(self.server.stop)
            except trio.RunFinishedError:
                pass
            self.thread.join(30)


def _stand_in_session_server(short_tmp, png_bytes):
    """A session server over the TUI tests' stand-in run (it asks for a verdict; real PNG frames):
    ``(root, paths, token, run, server)``."""
    from tui_helpers import StandInRun, plain_run_config

    from rpent.session.code_cells import CodeCellService
    from rpent.session.core import Session
    from rpent.session.model import SessionConfig

    root = short_tmp / "s"
    paths = SessionPaths(root)
    token = paths.make_token()
    run = StandInRun(ask=True, png=png_bytes)

    def make(sink):
        return Session(SessionConfig(output_dir=root, planner="scripted", shared_services=()), sink, run_task=run,
                       shared_specs=[], make_run_config=plain_run_config, batch_interval_s=0.02)

    return root, paths, token, run, SessionServer(paths, make, token, make_cells=CodeCellService)


def test_attached_app_runs_answers_detaches_reattaches_and_stops(short_tmp, png_bytes):
    from tui_helpers import type_text, wait_for

    from rpent_tui.app import AppOptions
    from rpent_tui.attached import AttachedApp, QuitSessionScreen
    from rpent_tui.screens.operator import OperatorModal
    from rpent_tui.screens.run import RunScreen

    root, paths, token, run, server = _stand_in_session_server(short_tmp, png_bytes)

    async def first() -> AttachedApp:
        app = AttachedApp(RemoteSession(paths, lambda e: None), AppOptions(image_mode="halfblock"))
        async with app.run_test(size=(120, 40)) as pilot:
            session = app.session
            await wait_for(pilot, lambda: session.state == "ready", what="attached, session ready")
            assert "attached to s" in app.session_summary()
            await pilot.press("t")
            await type_text(pilot, "libero_object 0 0\n")
            await wait_for(pilot, lambda: isinstance(app.screen, OperatorModal), what="operator modal")
            await pilot.pause(0.2)
            assert app.screen.request.frames["main"] == png_bytes
            await pilot.press("s")
            await wait_for(pilot, lambda: session.current.state == "succeeded", what="TaskRun end")
            screen = app.screen
            assert isinstance(screen, RunScreen)
            def text():
                return "\n".join(str(line.text) for line in screen.query_one("#transcript").lines)
            await wait_for(pilot, lambda: "move_to" in text() and "I will pick up the bowl." in text(), 60,
                           what="the transcript")
            # the frame arrives with the run's events; a Run screen covered by the verdict window
            # applies them when it is shown again (after its first paint), so wait for it
            await wait_for(pilot, lambda: screen.query_one("#frame-main").has_frame, 60, what="the camera frame")
            await pilot.press("ctrl+q")
            await wait_for(pilot, lambda: isinstance(app.screen, QuitSessionScreen), what="quit dialog")
            await pilot.press("d")
        return app

    async def second() -> AttachedApp:
        app = AttachedApp(RemoteSession(paths, lambda e: None), AppOptions(image_mode="halfblock"))
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_for(pilot, lambda: app.session.current is not None, what="backlog")
            await wait_for(pilot, lambda: app.session.current.state == "succeeded", 60, what="backlog's end")
            def text():
                return "\n".join(str(line.text) for line in app.screen.query_one("#transcript").lines)
            await wait_for(pilot, lambda: "move_to" in text(), 60, what="backlog transcript")  # re-rendered
            # a client attached after the run ended sees how it ended: the closing status and outcome lines
            lines = text().splitlines()
            assert any(line.startswith("● succeeded") for line in lines), lines[-4:]
            assert lines[-1].startswith("■ finished") and "environment success" in lines[-1], lines[-4:]
            await pilot.press("ctrl+q")
            await wait_for(pilot, lambda: isinstance(app.screen, QuitSessionScreen), what="quit dialog")
            await pilot.press("s")
        return app

    with ServerThread(server) as thread:
        app = asyncio.run(first())
        assert app.return_code == 0
        assert server.status == "serving" and run.answers == [("success", "")]  # detached: still serving
        app = asyncio.run(second())
        assert app.return_code == 0 and app.stopped_session
        thread.thread.join(30)
        assert not thread.thread.is_alive() and server.status == "stopped"


def test_flywheel_export_runs_in_the_session_and_survives_a_detach(short_tmp):
    """An export started from an attached client runs in the session process; the client
    detaches (F10) while it runs, a re-attached client sees it finish, and the dataset is complete
    (read back with lerobot's own ``LeRobotDataset``)."""
    import json
    import sys

    from tui_helpers import StandInRun, plain_run_config, type_text, wait_for
    from tui_records import build_run

    from rpent.flywheel.lerobot_compat import import_lerobot_dataset
    from rpent.session.core import Session
    from rpent.session.model import SessionConfig
    from rpent_tui.app import AppOptions
    from rpent_tui.attached import AttachedApp

    root = short_tmp / "s"
    logs = short_tmp / "logs"
    run_dir = build_run(logs, "0001_libero_goal_t0_s0", steps=4)
    out = short_tmp / "dataset"
    paths = SessionPaths(root)
    token = paths.make_token()

    def make(sink):
        return Session(SessionConfig(output_dir=root, planner="scripted", shared_services=()), sink,
                       run_task=StandInRun(), shared_specs=[], make_run_config=plain_run_config)

    # the real exporter, held until the first client has detached (the test then creates `go`), so
    # that it is certainly still running when the client detaches, on any machine
    go = short_tmp / "go"
    program = [sys.executable, "-c", "import os, runpy, sys, time\n"
                                     f"while not os.path.exists({str(go)!r}):\n    time.sleep(0.05)\n"
                                     "sys.argv[0] = 'rpent-flywheel'\n"
                                     "runpy.run_module('rpent.cli.flywheel', run_name='__main__')"]
    server = SessionServer(paths, make, token, flywheel_program=program)
    options = AppOptions(image_mode="halfblock", start_mode="flywheel", logs_dir=logs)
    seen: dict = {}

    async def first() -> AttachedApp:
        app = AttachedApp(RemoteSession(paths, lambda e: None), options)
        async with app.run_test(size=(120, 40)) as pilot:
            selection = app.screen.query_one("#fw-runs")
            await wait_for(pilot, lambda: selection.option_count == 1, what="run list")
            await pilot.press("space")
            await pilot.press("tab", "tab")  # past the rules to the output directory
            await type_text(pilot, str(out))
            await pilot.press("ctrl+r")
            await wait_for(pilot, lambda: app.flywheel.status.state == "running" and app.flywheel.status.pid,
                           what="export running in the session")
            seen["pid"] = app.flywheel.status.pid
            seen["state_at_detach"] = server.flywheel.status.state
            await pilot.press("f10")
        return app

    async def second() -> AttachedApp:
        app = AttachedApp(RemoteSession(paths, lambda e: None), options)
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_for(pilot, lambda: app.flywheel.status.state not in ("idle", "running"), timeout=300,
                           what="export end seen by the re-attached client")
            await pilot.pause(0.3)
            seen["final"] = app.flywheel.status
            seen["log"] = "\n".join(str(line) for line in app.screen.query_one("#fw-log").lines)
            await pilot.press("f10")
        return app

    with ServerThread(server):
        app = asyncio.run(first())
        go.touch()  # detached: let the export go on
        assert app.return_code == 0 and seen["state_at_detach"] == "running"
        assert seen["pid"] != os.getpid()  # a child of the session, not of the client
        app = asyncio.run(second())
    final = seen["final"]
    assert final.state == "succeeded", final.error
    assert final.job.input_root == run_dir and final.report["counts"]["frames"] == 4
    assert seen["log"].strip()  # the export's output (backlog and live lines) reached the re-attached client
    report = json.loads((out / "report.json").read_text())
    assert report["counts"]["episodes"] == 1 and report["counts"]["frames"] == 4
    dataset = import_lerobot_dataset()("rpent/test", root=out / "train")
    assert dataset.num_episodes == 1 and dataset.num_frames == 4


def test_attached_metaworld_session_offers_its_own_suites_not_liberos(short_tmp):
    """A client attached to a Meta-World session scans and offers Meta-World's suites (the
    hint before a TaskRun, ``/rpent-task`` completion), never LIBERO's suite list."""
    from tui_helpers import StandInRun, plain_run_config, wait_for

    from rpent_tui.app import AppOptions
    from rpent_tui.attached import AttachedApp
    from rpent.session.code_cells import CodeCellService
    from rpent.session.core import Session
    from rpent.session.model import SessionConfig

    root = short_tmp / "mw"
    paths = SessionPaths(root)
    token = paths.make_token()

    def make(sink):
        return Session(SessionConfig(output_dir=root, planner="scripted", robot="metaworld", shared_services=()), sink,
                       run_task=StandInRun(), shared_specs=[], make_run_config=plain_run_config, batch_interval_s=0.02)

    server = SessionServer(paths, make, token, make_cells=CodeCellService)

    async def attach() -> AttachedApp:
        app = AttachedApp(RemoteSession(paths, lambda e: None), AppOptions(image_mode="halfblock"))
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_for(pilot, lambda: app.session.state == "ready", what="attached, session ready", timeout=120)
            await wait_for(pilot, lambda: "metaworld" in app.task_lists, what="Meta-World suite list", timeout=120)
            assert app.task_lists == {"metaworld": ("mt10", "mt50")}  # no other robot's list was scanned
            counters = app.screen.query_one("#counters")
            await wait_for(pilot, lambda: "metaworld suites: mt10, mt50" in str(counters.render()), what="hint", timeout=120)
            await pilot.press("t")  # prefills "/rpent-task ": the completion is the first Meta-World suite
            box = app.screen.query_one("#message")
            await wait_for(pilot, lambda: box._suggestion == "/rpent-task mt10 ", what="suite completion", timeout=120)
            await pilot.press("ctrl+u")
            await pilot.press("ctrl+q")
            await wait_for(pilot, lambda: type(app.screen).__name__ == "QuitSessionScreen", what="quit dialog", timeout=120)
            await pilot.press("s")
        return app

    with ServerThread(server) as thread:
        app = asyncio.run(attach())
        assert app.return_code == 0
        thread.thread.join(30)


def test_attached_keys_do_not_shadow_a_screen_key():
    """An attached client (the default ``rpent-tui``) adds detach and download keys; none may take a
    screen's F-key (F7 once downloaded the video instead of opening Batch, as README and F1 help say)."""
    from rpent_tui.app import SCREEN_MODES
    from rpent_tui.attached import AttachedApp

    screen_keys = {key for key, _screen, _title in SCREEN_MODES.values()}
    attached_keys = {k.strip() for b in AttachedApp.BINDINGS for k in b.key.split(",")}
    assert not screen_keys & attached_keys, screen_keys & attached_keys


def test_every_screens_keys_fit_80_columns_in_an_attached_client(short_tmp, png_bytes):
    """At 80x24 the footer of every screen, the verdict window and the quit question shows all its keys
    (an attached client adds F10 Detach) inside the 80 columns; F1 (the rest of the keys) comes first."""
    from tui_helpers import type_text, wait_for

    from rpent_tui.app import AppOptions
    from rpent_tui.attached import AttachedApp, QuitSessionScreen
    from rpent_tui.screens.operator import OperatorModal

    root, paths, token, run, server = _stand_in_session_server(short_tmp, png_bytes)
    seen = {}

    def check(app, label):
        keys = [k for k in app.screen.query("FooterKey") if k.display]
        assert keys and all(0 < k.region.width and k.region.right <= 80 for k in keys), \
            (label, [(k.key_display, k.description, k.region.right) for k in keys])
        seen[label] = [k.description for k in keys]

    async def main():
        app = AttachedApp(RemoteSession(paths, lambda e: None), AppOptions(image_mode="halfblock"))
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_for(pilot, lambda: app.session.state == "ready", what="attached")
            for key in ("f2", "f4", "f5", "f6", "f7", "f9", "f3"):
                await pilot.press(key)
                await wait_for(pilot, lambda: any(k.description == "Detach" for k in app.screen.query("FooterKey")),
                               30, what=f"the footer after {key}")
                await pilot.pause(0.2)
                check(app, key)
                assert seen[key][0] == "Help" and "Detach" in seen[key]
            await type_text(pilot, "/rpent-task libero_object 0 0\n")
            await wait_for(pilot, lambda: isinstance(app.screen, OperatorModal), what="the verdict window")
            await pilot.pause(0.3)
            check(app, "verdict")
            assert {"Success", "Failure", "Continue", "Abort", "Notes", "Zoom", "Later"} <= set(seen["verdict"])
            await pilot.press("s")
            await wait_for(pilot, lambda: app.session.current.finished, what="TaskRun end")
            await pilot.press("ctrl+q")
            await wait_for(pilot, lambda: isinstance(app.screen, QuitSessionScreen), what="quit dialog")
            await pilot.pause(0.2)
            check(app, "quit")
            await pilot.press("s")

    with ServerThread(server):
        asyncio.run(main())
    assert seen["f3"] == ["Help", "Interrupt", "Type", "Task", "Answer", "Cancel", "Quit", "Detach"]
    assert seen["f6"] == ["Help", "Export", "Stop", "Reload", "All", "None", "Quit", "Detach"]
