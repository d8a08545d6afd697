"""Pilot tests of the Run workflow, driven only by key presses: start a TaskRun, answer the verdict
modal with notes, steer, interrupt, replace a task, quit with every service stopped."""

from __future__ import annotations

import asyncio
import os

from rpent_tui.screens.operator import OperatorModal
from rpent_tui.screens.run import RunScreen
from tui_helpers import StandInRun, make_app, type_text, wait_for


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as fh:
        return fh.read().split(")")[-1].split()[0] != "Z"


def test_task_verdict_with_notes_then_quit_stops_everything(tmp_path, png_bytes):
    run = StandInRun(ask=True, png=png_bytes)
    app = make_app(tmp_path, run)
    pids = []

    async def main():
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_for(pilot, lambda: app.session.state == "ready", what="shared services")
            assert isinstance(app.screen, RunScreen)
            await pilot.press("t")
            await type_text(pilot, "libero_goal 1 0\n")
            await wait_for(pilot, lambda: isinstance(app.screen, OperatorModal) and app.screen.query("#op-frame-main"),
                           what="operator modal")
            await pilot.pause(0.1)
            modal = app.screen
            assert modal.request.kind == "verdict" and "Did it succeed?" in str(modal.query_one("#op-prompt").render())
            assert modal.query_one("#op-frame-main").has_frame  # the request's frame is shown
            await pilot.press("d")  # not a verdict choice: ignored
            assert isinstance(app.screen, OperatorModal)
            await pilot.press("n")
            await type_text(pilot, "bowl is on the plate\n")
            await pilot.press("s")
            await wait_for(pilot, lambda: app.session.current.finished, what="TaskRun end")
            await wait_for(pilot, lambda: app.focused is not None and app.focused.id == "transcript", 60,
                           what="focus back on the transcript")  # no focus trap after a verdict
            run_view = app.session.current
            assert run_view.state == "succeeded"
            assert run.answers == [("success", "bowl is on the plate")]
            screen = app.screen
            assert isinstance(screen, RunScreen)
            text = "\n".join(str(line.text) for line in screen.query_one("#transcript").lines)
            assert "move_to" in text and "I will pick up the bowl." in text
            # the run's last frame reaches the pane on the screen's next refresh (later on a loaded machine)
            await wait_for(pilot, lambda: screen.query_one("#frame-main").has_frame, 60, what="the run's frame")
            pids.extend(v.pid for v in app.session.services.values() if v.pid)
            await pilot.press("ctrl+q")
        return app.return_code

    assert asyncio.run(main()) in (0, None)
    assert pids and not any(_alive(p) for p in pids)


def test_steer_interrupt_and_replace_a_running_task(tmp_path):
    from rpent.planners.steering import Steering

    run = StandInRun(hang=True)
    steerings = []
    app = make_app(tmp_path, run)
    app.session._make_steering = lambda: steerings.append(Steering(interactive=True)) or steerings[-1]

    async def main():
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_for(pilot, lambda: app.session.state == "ready", what="shared services")
            await pilot.press("t")
            await type_text(pilot, "libero_goal 0 0\n")
            await wait_for(pilot, lambda: app.session.current and app.session.current.transcript, what="run events")
            assert app.focused.id == "transcript"  # Enter handed the keys back to the screen
            await pilot.press("i")
            await type_text(pilot, "grasp the bowl by its rim\n")
            assert steerings[0].drain() == ["grasp the bowl by its rim"]
            assert app.focused.id == "transcript"
            await pilot.press("i", "escape")  # Esc in the input line only leaves it
            assert app.focused.id == "transcript" and steerings[0].interrupt_count == 0
            await pilot.press("escape")
            assert steerings[0].interrupt_count == 1
            await pilot.press("i")
            await type_text(pilot, "/rpent-task libero_object 2 5\n")
            await pilot.pause(0.2)
            assert len(app.session.runs) == 1  # a running task is not replaced without confirmation
            assert any("press Enter again to replace" in n.message for n in app._notifications)
            await pilot.press("enter")
            await wait_for(pilot, lambda: len(app.session.runs) == 2 and app.session.runs[0].finished, what="replacement")
            first, second = app.session.runs
            assert first.state == "cancelled" and second.id == "0002" and first.replaced_by == "0002"
            assert app.focused.id == "transcript"
            await pilot.press("x")  # cancel the second (hanging) run
            await wait_for(pilot, lambda: second.finished, what="cancel")
            assert second.state == "cancelled"
            await pilot.press("i")
            await type_text(pilot, "/rpent-task libero_nope 1 0\n")
            notes = [n.message for n in app._notifications]
            assert any("unsupported suite 'libero_nope'" in m for m in notes)
            await pilot.press("ctrl+q")

    asyncio.run(main())


async def _start_hanging_task(pilot, app) -> None:
    """Once the shared services are ready, start libero_goal 0 0 from the ``t`` prompt and wait for
    the stand-in run's first events."""
    await wait_for(pilot, lambda: app.session.state == "ready", what="shared services", timeout=120)
    await pilot.press("t")
    await type_text(pilot, "libero_goal 0 0\n")
    await wait_for(pilot, lambda: app.session.current and len(app.session.current.transcript) >= 3,
                   what="run events", timeout=120)


def test_resize_rewraps_the_transcript_and_keeps_following(tmp_path):
    run = StandInRun(hang=True)
    app = make_app(tmp_path, run)

    async def main():
        async with app.run_test(size=(120, 40)) as pilot:
            await _start_hanging_task(pilot, app)
            for i in range(60):
                app.session.current.transcript.append({"kind": "planner", "event": "text",
                                                       "text": f"line {i}: " + "a long planner sentence " * 4})
            app.screen.render_all()
            await pilot.pause(0.3)
            view = app.screen.query_one("#transcript")

            def settled():  # laid out at 80x24, re-wrapped at the new width, at the end
                return view.size.width < 60 and view._wrap_width == view._width() and view.is_vertical_scroll_end

            await pilot.resize_terminal(80, 24)
            await wait_for(pilot, settled, what="re-layout at 80x24", timeout=60)
            width = view.scrollable_content_region.width
            assert max(line.cell_length for line in view.lines) <= width  # re-wrapped, not clipped
            assert view.is_vertical_scroll_end  # still following the end
            assert_pane_shows_only_its_text(app, view)
            # 12 lines: at 80x24 a scrollbar thumb of this length ended mid-cell ("▃▃" drawn in the pane)
            del app.session.current.transcript[3:]
            app.session.current.transcript.extend(
                {"kind": "planner", "event": "text", "text": f"line {i}: " + "a long planner sentence " * 4}
                for i in range(12))
            await pilot.resize_terminal(120, 40)
            app.screen.render_all()
            await pilot.pause(0.3)
            await pilot.resize_terminal(80, 24)
            await wait_for(pilot, settled, what="re-layout at 80x24", timeout=60)
            assert_pane_shows_only_its_text(app, view)
            await pilot.press("ctrl+q")

    asyncio.run(main())


def assert_pane_shows_only_its_text(app, view):
    """Every row of the transcript pane on screen (the composited screen, inside the border) is the
    pane's own wrapped text padded with blanks: nothing else is drawn in it (after a resize
    a lone block glyph, the end of a scrollbar thumb, appeared at the pane's right edge)."""
    strips = app.screen._compositor.render_strips()
    region = view.region
    top = int(view.scroll_y)
    rows = [line.text for line in view.lines]
    for y in range(1, region.height - 1):  # inside the round border
        shown = strips[region.y + y].crop(region.x + 1, region.right - 1).text
        want = rows[top + y - 1] if top + y - 1 < len(rows) else ""
        assert shown.rstrip() == want.rstrip(), f"row {y} of the pane: {shown!r}, expected {want!r}"


def test_screen_switch_draws_at_once_waits_while_hidden_and_relayouts_after_a_hidden_resize(tmp_path):
    """F2/F3 switches (p90 <= 50 ms): a screen shown before is not held back by Textual's
    50 ms ``delay_update``; a hidden Run screen applies no run events (they wait and are caught up when
    it is shown); a terminal resized while the Run screen was hidden lays it out for the new size."""
    from rpent.session.model import RunEvents

    run = StandInRun(hang=True)
    app = make_app(tmp_path, run)

    async def main():
        async with app.run_test(size=(120, 40)) as pilot:
            await _start_hanging_task(pilot, app)
            run_screen = app.screen
            view = run_screen.query_one("#transcript")
            await pilot.press("f2")
            await wait_for(pilot, lambda: type(app.screen).__name__ == "ServicesScreen", what="Services", timeout=60)
            app.switch_mode("run")
            assert app._batch_count == 0  # no repaint hold (Textual's switch_mode holds them for 50 ms)
            await wait_for(pilot, lambda: app.screen is run_screen, what="Run", timeout=60)
            app.switch_mode("services")
            assert app._batch_count == 0
            await wait_for(pilot, lambda: app.screen is not run_screen, what="Services again", timeout=60)
            shown = view.entry_count
            run_id = app.session.current.id
            events = [{"kind": "planner", "event": "text", "text": f"hidden line {i}: " + "a long planner sentence " * 4}
                      for i in range(40)]
            app.session.current.transcript.extend(events)
            app.post_event(RunEvents(run_id, events))
            await pilot.pause(0.5)
            assert view.entry_count == shown  # nothing drawn while hidden
            await pilot.resize_terminal(80, 24)
            await pilot.pause(0.3)
            await pilot.press("f3")
            await wait_for(pilot, lambda: app.screen is run_screen and view.entry_count == shown + 40
                           and view.size.width < 60 and view._wrap_width == view._width()
                           and view.is_vertical_scroll_end, what="caught up and laid out at 80x24", timeout=60)
            assert max(line.cell_length for line in view.lines) <= view.scrollable_content_region.width
            footer = run_screen.query_one("StableFooter")
            assert footer.region.y == 23 and footer.region.width == 80  # the whole screen laid out anew
            assert_pane_shows_only_its_text(app, view)
            await pilot.press("ctrl+q")

    asyncio.run(main())
