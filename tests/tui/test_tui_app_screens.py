"""Pilot tests (key presses only) of the Services, Code editor, Trajectories and Flywheel workflows,
and of help, the jump overlay and the command palette."""

from __future__ import annotations

import asyncio
import json

from rpent_tui.screens.help import HelpScreen
from rpent_tui.screens.jump import JumpScreen
from tui_helpers import StandInRun, make_app, type_text, wait_for
from tui_records import build_run


def test_services_screen_log_search_filter_export_and_stop(tmp_path):
    app = make_app(tmp_path, StandInRun(), shared=("vla", "sam3"), start_mode="services")

    async def main():
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_for(pilot, lambda: app.session.state == "ready" and len(app.screen.query_one("#service-log").lines) >= 4,
                           what="services and their logs")
            table = app.screen.query_one("#services")
            assert table.row_count == 2 and app.screen.selected == "vla"
            await pilot.press("j")  # highlight sam3: its log is shown
            assert app.screen.selected == "sam3" and app.screen.query_one("#service-log").source_name == "sam3"
            log = app.screen.query_one("#service-log")
            await wait_for(pilot, lambda: list(log.lines) == list(app.session.services["sam3"].lines), 60,
                           what="sam3's log")
            await pilot.pause(0.5)  # late log batches must not duplicate lines already shown
            assert list(log.lines) == list(app.session.services["sam3"].lines)
            await pilot.press("l")
            await pilot.press("slash")
            await type_text(pilot, "line 1\n")
            status = str(app.screen.query_one("#log-status").render())
            assert "search /line 1/ 1/1" in status
            await pilot.press("ampersand")
            await type_text(pilot, "tiny\n")
            log = app.screen.query_one("#service-log")
            assert len(log._shown) == 3 and "filter /tiny/" in str(app.screen.query_one("#log-status").render())
            await pilot.press("e")
            exported = list((app.session.output_dir / "exports").glob("sam3_filtered_*.log"))
            assert len(exported) == 1
            assert exported[0].read_text().splitlines() == ["tiny log line 0", "tiny log line 1", "tiny log line 2"]
            await pilot.press("shift+tab")  # back to the table
            await pilot.press("x")
            await wait_for(pilot, lambda: app.session.services["sam3"].state == "stopped", what="stop sam3")
            assert app.session.services["vla"].state == "ready"
            await pilot.press("ctrl+q")

    asyncio.run(main())


class EchoToolkit:
    """A minimal in-process toolkit with one tool (the contract of docs/interfaces.md)."""

    def __init__(self):
        self.calls = []

    def specs(self):
        return [{"name": "echo", "description": "echo x", "readonly": True,
                 "input_schema": {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}}]

    def execute(self, name, args, call_id=None):
        self.calls.append((name, args))
        return {"x": args.get("x")}

    def cancel(self):
        pass

    def clear_cancel(self):
        pass

    def solved(self):
        return False


class ToolkitRun(StandInRun):
    """Publishes its toolkit to the TUI (the run-layer seam) and keeps running."""

    def __init__(self, toolkit):
        super().__init__(hang=True)
        self.toolkit = toolkit

    async def __call__(self, config, supervisor, *, operator, steering=None, on_event=None):
        on_event({"kind": "toolkit", "toolkit": self.toolkit})
        return await super().__call__(config, supervisor, operator=operator, steering=steering, on_event=on_event)


def test_editor_runs_the_buffer_as_a_code_policy_cell_with_meters(tmp_path):
    toolkit = EchoToolkit()
    app = make_app(tmp_path, ToolkitRun(toolkit), start_mode="editor", code_timeout_s=30, code_max_calls=5)

    async def main():
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_for(pilot, lambda: app.session.state == "ready", what="session")
            await pilot.press("ctrl+r")  # no TaskRun yet: a clear error
            assert any("no TaskRun toolkit" in n.message for n in app._notifications)
            await pilot.press("f3", "t")
            await type_text(pilot, "libero_goal 0 0\n")
            await wait_for(pilot, lambda: app.session.current and app.session.toolkit_for("0001"), what="toolkit")
            await pilot.press("f4")
            editor = app.screen.query_one("#code")
            editor.focus()
            await pilot.press("ctrl+a")  # select all in the TextArea, then type over it
            await type_text(pilot, "total = 0\nfor i in range(3):\n    total += robo.echo(x=i).x\nprint('total', total)\n")
            assert editor.text.splitlines()[2] == "    total += robo.echo(x=i).x"
            await pilot.press("escape", "ctrl+r")  # Esc leaves the editor; ctrl+r runs the cell
            await wait_for(pilot, lambda: not app.cells.busy and len(app.screen.query_one("#cell-output").lines) > 2,
                           timeout=60, what="cell result")
            out = "\n".join(str(line.text) for line in app.screen.query_one("#cell-output").lines)
            assert "total 3" in out and "3 robot call(s)" in out
            assert app.screen.query_one("#meter-calls").progress == 3
            assert [c[0] for c in toolkit.calls] == ["echo", "echo", "echo"]
            cell = app.session.current.output_dir / "code_policy"
            assert sorted(p.name for p in cell.iterdir())[:2] == ["cell_001.json", "cell_001.py"]
            worker = app.cells._runner._worker.proc
            assert worker.poll() is None
            await pilot.press("f3", "x")  # the TaskRun ends: its code-cell worker must not outlive it
            await wait_for(pilot, lambda: app.session.current.finished, what="TaskRun end")
            await wait_for(pilot, lambda: worker.poll() is not None, timeout=20, what="cell worker exit")
            assert app.cells._runner is None
            await pilot.press("ctrl+q")

    asyncio.run(main())


def test_trajectories_browse_steps_frames_and_play(tmp_path):
    logs = tmp_path / "logs"
    build_run(logs, "0001_libero_goal_t0_s0", steps=4)
    build_run(logs, "0002_libero_object_t3_s1", suite="libero_object", task=3, seed=1, success=False,
              trajectory=False, steps=3)
    app = make_app(tmp_path, StandInRun(), shared=(), start_mode="trajectories", logs_dir=logs)

    async def main():
        async with app.run_test(size=(120, 40)) as pilot:
            screen = app.screen
            await wait_for(pilot, lambda: len(screen.runs) == 2 and screen.steps, what="runs")
            assert screen.current_run.name == "0002_libero_object_t3_s1"  # newest first (same date: higher number)
            assert [s.tool for s in screen.steps] == [None, "pi0_pick", "move_to"]  # motion steps from states.json
            await pilot.press("j")  # the other run: recorded trajectory, one step per env action
            await wait_for(pilot, lambda: screen.current_run.name == "0001_libero_goal_t0_s0" and len(screen.steps) == 4,
                           what="first run")
            await pilot.press("s")  # focus the step list
            await pilot.press("j", "j")
            detail = str(screen.query_one("#step-detail").render())
            assert "step 2" in detail and "pick up the bowl" in detail
            assert screen.query_one("#traj-frame").has_frame
            transcript = "\n".join(str(l.text) for l in screen.query_one("#step-transcript").lines)
            assert "I will pick the bowl." in transcript and "Done." not in transcript  # transcript up to call-1
            await pilot.press("g", "p")
            await wait_for(pilot, lambda: screen.query_one("#steps").cursor_row == 3, what="playback")
            await pilot.press("ctrl+q")

    asyncio.run(main())


def test_flywheel_export_of_a_recorded_run_shows_the_report(tmp_path):
    logs = tmp_path / "logs"
    run_dir = build_run(logs, "0001_libero_goal_t0_s0", steps=4)
    app = make_app(tmp_path, StandInRun(), shared=(), start_mode="flywheel", logs_dir=logs)
    out = tmp_path / "dataset"

    async def main():
        async with app.run_test(size=(120, 40)) as pilot:
            selection = app.screen.query_one("#fw-runs")
            await wait_for(pilot, lambda: selection.option_count == 1, what="run list")
            await pilot.press("ctrl+r")  # nothing picked yet
            assert any("pick at least one run" in n.message for n in app._notifications)
            await pilot.press("space")
            assert selection.selected == [str(run_dir)]
            await pilot.press("tab", "tab")  # past the rules; focusing an input selects its text: typing replaces it
            await type_text(pilot, str(out))
            await pilot.press("tab")
            await type_text(pilot, "2")
            assert app.screen.query_one("#fw-output").value == str(out)
            assert app.screen.query_one("#fw-threads").value == "2"
            await pilot.press("ctrl+r")
            await wait_for(pilot, lambda: app.flywheel.status.state not in ("idle", "running"), timeout=120,
                           what="export end")
            status = app.flywheel.status
            assert status.state == "succeeded", "\n".join(status.lines[-20:])
            assert status.job.input_root == run_dir and status.job.threads == 2
            await wait_for(pilot, lambda: app.screen.query_one("#fw-report").row_count > 0, what="report rows")
            assert status.report["counts"]["frames"] == 4
            await pilot.press("ctrl+q")

    asyncio.run(main())
    assert json.loads((out / "report.json").read_text())["counts"]["episodes"] >= 1


def test_help_jump_and_palette_by_keys(tmp_path):
    app = make_app(tmp_path, StandInRun(), shared=(), start_mode="services")

    async def main():
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.press("f1")
            assert isinstance(app.screen, HelpScreen)
            rows = [app.screen.query_one("#help-keys").get_row_at(i) for i in range(app.screen.query_one("#help-keys").row_count)]
            ids = {r[2] for r in rows}
            assert {"service-restart", "service-stop", "help", "jump", "quit"} <= ids
            await pilot.press("escape")
            await pilot.press("ctrl+o")
            assert isinstance(app.screen, JumpScreen)
            key = next(k for k, w in app.screen.targets.items() if w.id == "services")
            await pilot.press(key)
            assert app.focused.id == "services"
            await pilot.press("ctrl+p")
            await type_text(pilot, "Trajectories")
            await pilot.pause(0.5)
            await pilot.press("enter")
            await wait_for(pilot, lambda: type(app.screen).__name__ == "TrajectoriesScreen", what="palette switch")
            for key, name in (("f2", "Services"), ("f3", "Run"), ("f4", "Editor"), ("f6", "Flywheel")):
                await pilot.press(key)
                assert type(app.screen).__name__ == f"{name}Screen"
                assert app.screen.query("Footer")
            await pilot.press("ctrl+q")

    asyncio.run(main())


def test_services_uptime_ticks_and_empty_screen_explains_env_servers(tmp_path):
    app = make_app(tmp_path, StandInRun(), start_mode="services")

    async def main():
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_for(pilot, lambda: app.session.state == "ready", what="shared services")
            table = app.screen.query_one("#services")
            await wait_for(pilot, lambda: table.row_count == 1, what="vla row")
            first = str(table.get_cell("vla", "Uptime"))
            # the uptime column ticks (every second; a loaded machine may run the timer late)
            await wait_for(pilot, lambda: str(table.get_cell("vla", "Uptime")) != first, 60, what="uptime tick")
            await pilot.press("ctrl+q")

    asyncio.run(main())
    empty = make_app(tmp_path / "empty", StandInRun(), shared=(), start_mode="services")

    async def main_empty():
        async with empty.run_test(size=(100, 30)) as pilot:
            await wait_for(pilot, lambda: empty.session.state == "ready", what="session")
            await wait_for(pilot, lambda: "each TaskRun starts its own env server"
                           in (empty.screen.query_one("#services").border_subtitle or ""), 60, what="explanation")
            await pilot.press("ctrl+q")

    asyncio.run(main_empty())


def test_cell_errors_are_readable_lines_not_a_dict():
    from rpent_tui.screens.editor import format_cell_result

    lines = [t.plain for t in format_cell_result({"exception": {
        "type": "ZeroDivisionError", "message": "division by zero",
        "traceback": "Traceback (most recent call last):\n  File \"cell_002.py\", line 1\nZeroDivisionError"}})]
    assert lines[:3] == ["── exception", "ZeroDivisionError: division by zero", "Traceback (most recent call last):"]
    assert not any("\\n" in line or "{'type'" in line for line in lines)
