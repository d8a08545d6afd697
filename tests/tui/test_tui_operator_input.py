"""An operator who types at once: a slash command typed right after start (no ``i`` first) reaches the
input line whole, the slash commands are listed in F1 and ``/help``, ``/quit`` leaves the app, and
``t`` offers the last task again. Keys are sent as a terminal delivers them (one burst, nothing in
between), and the TaskRun's record on disk is checked."""

from __future__ import annotations

import asyncio
import json

from textual import events
from textual.widgets import DataTable, Input

from rpent_tui.screens.help import HelpScreen
from rpent_tui.screens.run import RunScreen
from tui_helpers import StandInRun, make_app, type_text, wait_for

NAMES = {" ": "space", "/": "slash", "_": "underscore", "-": "minus", "\n": "enter"}


def _burst(app, text: str) -> None:
    """Queue the key events of ``text`` on the app at once (one terminal read)."""
    for ch in text:
        app.post_message(events.Key(NAMES.get(ch, ch), None if ch == "\n" else ch))


def _taskruns(tmp_path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((tmp_path / "session" / "tasks").glob("*/taskrun.json"))]


def test_a_command_typed_right_after_start_runs_that_task(tmp_path):
    run = StandInRun()
    app = make_app(tmp_path, run, shared=())

    async def main():
        async with app.run_test(size=(100, 30)) as pilot:
            # typed before anything else, as the README shows it: no `i` first
            _burst(app, "/rpent-task libero_object 0 0\n")
            await wait_for(pilot, lambda: app.session.current is not None and app.session.current.finished,
                           what="the TaskRun typed right after start")
            assert app.session.current.command.suite == "libero_object"
            # a letter that is no key starts a message, whole (h is not bound on the Run screen)
            await wait_for(pilot, lambda: app.focused is not None and app.focused.id == "transcript", what="focus")
            _burst(app, "hold the bowl level")
            box = app.screen.query_one("#message", Input)
            await wait_for(pilot, lambda: box.value == "hold the bowl level", 30, what="the message typed")
            assert app.focused is box
            await pilot.press("escape")
            box.value = ""
            await pilot.press("ctrl+q")

    asyncio.run(main())
    records = _taskruns(tmp_path)
    assert [(r["suite"], r["task"], r["seed"]) for r in records] == [("libero_object", 0, 0)]
    assert records[0]["state"] == "succeeded"


def test_help_lists_the_slash_commands_without_a_task_and_quit_exits(tmp_path):
    app = make_app(tmp_path, StandInRun(), shared=())

    async def main():
        async with app.run_test(size=(100, 30)) as pilot:
            await wait_for(pilot, lambda: app.session.state == "ready", what="session")
            _burst(app, "/help\n")
            await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen), 30, what="the help from /help")
            table = app.screen.query_one(DataTable)
            first_cells = [str(table.get_row_at(i)[0]) for i in range(table.row_count)]
            for command in ("/rpent-task <suite> <task> <seed>", "/interrupt", "/cancel", "/help", "/quit"):
                assert command in first_cells, (command, first_cells)
            await pilot.press("escape")
            await wait_for(pilot, lambda: isinstance(app.screen, RunScreen), what="help closed")
            # F1 shows the same commands
            await pilot.press("f1")
            await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen), what="F1 help")
            table = app.screen.query_one(DataTable)
            assert "/quit" in [str(table.get_row_at(i)[0]) for i in range(table.row_count)]
            await pilot.press("escape")
            await wait_for(pilot, lambda: isinstance(app.screen, RunScreen), what="help closed")
            await wait_for(pilot, lambda: app.focused is not None and app.focused.id == "transcript", what="focus")
            _burst(app, "/quit\n")
            await wait_for(pilot, lambda: not app.is_running, 30, what="/quit to leave the app")

    asyncio.run(main())
    assert app.return_code in (0, None)


def test_t_offers_the_last_task_selected(tmp_path):
    run = StandInRun()
    app = make_app(tmp_path, run, shared=())

    async def main():
        async with app.run_test(size=(100, 30)) as pilot:
            await wait_for(pilot, lambda: app.session.state == "ready", what="session")
            await pilot.press("t")
            box = app.screen.query_one("#message", Input)
            await wait_for(pilot, lambda: box.value == "/rpent-task ", 30, what="the bare prefill before any task")
            await type_text(pilot, "libero_spatial 3 2\n")
            await wait_for(pilot, lambda: app.session.current is not None and app.session.current.finished,
                           what="first TaskRun")
            await wait_for(pilot, lambda: app.focused is not None and app.focused.id == "transcript", what="focus")
            await pilot.press("t")
            await wait_for(pilot, lambda: box.value == "/rpent-task libero_spatial 3 2", 30, what="the last task")
            assert box.selected_text == "libero_spatial 3 2"  # typing replaces the arguments
            await pilot.press("enter")  # Enter runs it again
            await wait_for(pilot, lambda: len(app.session.runs) == 2 and app.session.current.finished,
                           what="second TaskRun")
            await wait_for(pilot, lambda: app.focused is not None and app.focused.id == "transcript", what="focus")
            _burst(app, "tlibero_goal 1 0\n")  # typed over the selection
            await wait_for(pilot, lambda: len(app.session.runs) == 3 and app.session.current.finished,
                           what="third TaskRun")
            await pilot.press("ctrl+q")

    asyncio.run(main())
    assert [(r["suite"], r["task"], r["seed"]) for r in _taskruns(tmp_path)] == [
        ("libero_spatial", 3, 2), ("libero_spatial", 3, 2), ("libero_goal", 1, 0)]


def test_palette_offers_every_bound_action_with_its_key(tmp_path):
    from rpent_tui.app import SCREEN_MODES

    run = StandInRun(hang=True)
    app = make_app(tmp_path, run, shared=())

    async def main():
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_for(pilot, lambda: app.session.state == "ready", what="session")
            titles = [c.title for c in app.get_system_commands(app.screen)]
            for mode, (_, cls, title) in SCREEN_MODES.items():  # every key of every screen, with the key
                for binding in cls.BINDINGS:
                    if binding.description:
                        assert any(t.startswith(f"{title}: {binding.description}") and t.endswith("]")
                                   for t in titles), (title, binding.description)
            for words in ("new task", "Cancel", "Interrupt", "Export", "open the current TaskRun's trajectory",
                          "Switch screen: Run [F3]", "Quit", "Jump"):
                assert any(words in t for t in titles), words
            # ctrl+p, "task": the new-task action, run from the palette
            await pilot.press("ctrl+p")
            await type_text(pilot, "new task")
            await pilot.pause(0.5)
            await pilot.press("enter")
            box = app.screen.query_one("#message", Input)
            await wait_for(pilot, lambda: box.value == "/rpent-task " and app.focused is box, 30, what="the prefill")
            await type_text(pilot, "libero_goal 2 0\n")
            await wait_for(pilot, lambda: app.session.current is not None and app.session.current.state == "running",
                           what="TaskRun running")
            # cancel from the palette, from another screen
            await pilot.press("f2")
            await pilot.press("ctrl+p")
            await type_text(pilot, "cancel the running")
            await pilot.pause(0.5)
            await pilot.press("enter")
            await wait_for(pilot, lambda: app.session.current.finished, what="cancelled from the palette")
            assert isinstance(app.screen, RunScreen)
            # open the current TaskRun's record in Trajectories from the palette
            await pilot.press("ctrl+p")
            await type_text(pilot, "open the current")
            await pilot.pause(0.5)
            await pilot.press("enter")
            await wait_for(pilot, lambda: type(app.screen).__name__ == "TrajectoriesScreen"
                           and app.screen.current_run is not None, what="the trajectory opened")
            assert app.screen.current_run.path == app.session.current.output_dir
            await pilot.press("ctrl+q")

    asyncio.run(main())
    assert [r["state"] for r in _taskruns(tmp_path)] == ["cancelled"]
