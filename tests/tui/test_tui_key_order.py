"""Keys typed right after a focus-moving key reach the new focus, in order, however fast they come
(issue 12: keys typed after ``i`` were lost in tmux).

A terminal delivers a burst of keys (a paste-like ``tmux send-keys``, a fast typist, a slow
machine) as one read: the driver queues every key event on the app before the app handles the
first. These tests queue the burst the same way (``App.post_message`` of each key, nothing in
between) and check that every key after ``i`` / ``t`` / Esc landed where the operator expects,
over many rounds, while a TaskRun streams events."""

from __future__ import annotations

import asyncio

from textual import events
from textual.widgets import Input

from rpent_tui.screens.run import RunScreen
from tui_helpers import StandInRun, make_app, type_text, wait_for

NAMES = {" ": "space", "/": "slash", "_": "underscore", "-": "minus", ".": "full_stop", ",": "comma", "\n": "enter",
         "\x1b": "escape"}


def _burst(app, text: str) -> None:
    """Queue the key events of ``text`` on the app at once, as the terminal driver does for one read."""
    for ch in text:
        key = NAMES.get(ch, ch)
        app.post_message(events.Key(key, None if ch in "\n\x1b" else ch))


def _box(app) -> Input:
    return app.screen.query_one("#message", Input)


async def _settle(pilot, done, timeout: float = 30.0) -> None:
    """Let the app work until ``done()`` or ``timeout`` s (a lost key never arrives: the caller's
    assertion then shows what was typed)."""
    import time

    deadline = time.monotonic() + timeout
    while not done() and time.monotonic() < deadline:
        await pilot.pause(0.05)


def test_a_burst_after_i_and_t_lands_in_the_input_in_order(tmp_path):
    app = make_app(tmp_path, StandInRun(hang=True), shared=())
    lines = ["/quit-not-really", "/rpent-task libero_object 1 0", "grasp the bowl, then lift it"]

    async def main():
        async with app.run_test(size=(100, 30)) as pilot:
            await wait_for(pilot, lambda: app.session.state == "ready", what="shared services")
            await pilot.press("t")
            await type_text(pilot, "libero_goal 0 0\n")
            await wait_for(pilot, lambda: app.session.current and app.session.current.transcript, what="run events")
            assert isinstance(app.screen, RunScreen)
            for n in range(6):
                line = lines[n % len(lines)] + f" {n}"
                await wait_for(pilot, lambda: app.focused is not None and app.focused.id == "transcript",
                               30, what="focus on the transcript")
                _burst(app, "i" + line)
                await _settle(pilot, lambda: _box(app).value == line)
                assert _box(app).value == line, f"round {n}: {_box(app).value!r} != {line!r}"
                assert app.focused is _box(app)
                # Esc leaves the line at once: the i behind it is the screen's key again, the rest is text
                _burst(app, "\x1bi.\x1b")
                await _settle(pilot, lambda: _box(app).value == line + "." and app.focused is not _box(app))
                assert _box(app).value == line + ".", f"round {n}: {_box(app).value!r}"
                assert app.focused.id == "transcript"
                _box(app).value = ""
            # t prefills the command; a burst right after it extends the prefill
            _burst(app, "tlibero_object 2 0")
            await _settle(pilot, lambda: _box(app).value == "/rpent-task libero_object 2 0")
            assert _box(app).value == "/rpent-task libero_object 2 0"
            await pilot.press("ctrl+q")

    asyncio.run(main())


def test_notes_typed_right_after_n_never_answer_the_verdict(tmp_path, png_bytes):
    from rpent_tui.screens.operator import OperatorModal

    run = StandInRun(ask=True, png=png_bytes)
    app = make_app(tmp_path, run, shared=())

    async def main():
        async with app.run_test(size=(100, 30)) as pilot:
            await wait_for(pilot, lambda: app.session.state == "ready", what="session")
            await pilot.press("t")
            await type_text(pilot, "libero_goal 1 0\n")
            await wait_for(pilot, lambda: isinstance(app.screen, OperatorModal) and app.screen.is_mounted,
                           what="operator modal")
            _burst(app, "nsuccess is partial, cup tilted\n")  # s, c, a in the notes are text, not answers
            box = app.screen.query_one("#op-notes", Input)
            await _settle(pilot, lambda: box.value == "success is partial, cup tilted" and box.disabled)
            assert box.value == "success is partial, cup tilted" and not run.answers, (box.value, run.answers)
            await wait_for(pilot, lambda: app.focused is None, 30, what="Enter leaves the notes box")
            await pilot.press("f")
            await wait_for(pilot, lambda: app.session.current.finished, what="TaskRun end")
            await pilot.press("ctrl+q")

    asyncio.run(main())
    assert run.answers == [("failure", "success is partial, cup tilted")]


def test_help_key_shows_first_on_every_screen_at_80x24(tmp_path):
    """Issue #12 item 6: at 80x24 the footer still shows help. Textual lays footer keys out in binding order
    (screen's, then the app's), which cut the app's F1 Help off the right edge of wide footers."""
    app = make_app(tmp_path, StandInRun(), shared=())

    async def main():
        async with app.run_test(size=(80, 24)) as pilot:
            for key in ["f2", "f3", "f4", "f5", "f6", "f7", "f9"]:
                await pilot.press(key)
                await wait_for(pilot, lambda: any(getattr(k, "action", None) == "help"
                                                  for k in app.screen.query("FooterKey")), what=f"the footer after {key}")
                keys = [k for k in app.screen.query("FooterKey") if k.display]
                assert getattr(keys[0], "action", None) == "help", (key, type(app.screen).__name__)
                assert 0 < keys[0].region.width and keys[0].region.right <= 80
            await pilot.press("ctrl+q")

    asyncio.run(main())
