"""Keys typed right after a focus-moving key reach the new focus, in order, however fast they come
(keys typed after ``i`` were lost in tmux; keys typed right after Enter in the input line or
after a verdict were typed into the input line instead of acting as the screen's keys).

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
         "\x1b": "escape", "\x7f": "backspace"}


def _burst(app, text: str) -> None:
    """Queue the key events of ``text`` on the app at once, as the terminal driver does for one read."""
    for ch in text:
        key = NAMES.get(ch, ch)
        app.post_message(events.Key(key, None if ch in "\n\x1b\x7f" else ch))


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
    """At 80x24 the footer still shows help. Textual lays footer keys out in binding order
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


def test_keys_right_after_enter_are_the_screens_keys(tmp_path):
    """Enter in the input line sends it and hands the keys back to the screen at once: in one burst,
    the line is sent (editing keys applied in order), then ``t`` / ``x`` behind Enter act as keys."""
    from rpent.planners.steering import Steering

    steerings = []
    app = make_app(tmp_path, StandInRun(hang=True), shared=())
    app.session._make_steering = lambda: steerings.append(Steering(interactive=True)) or steerings[-1]

    async def main():
        async with app.run_test(size=(100, 30)) as pilot:
            await wait_for(pilot, lambda: app.session.state == "ready", what="session")
            await pilot.press("t")
            await type_text(pilot, "libero_goal 0 0\n")
            await wait_for(pilot, lambda: app.session.current and app.session.current.transcript, what="run events")
            sent = []
            for n in range(4):
                await wait_for(pilot, lambda: app.focused is not None and app.focused.id == "transcript",
                               30, what="focus on the transcript")
                # a typo fixed with backspace, Enter, then t and the start of a task line, all in one read
                _burst(app, f"ilift the bowz\x7fl {n}\ntlibero_object {n} 0")
                sent.append(f"lift the bowl {n}")
                want = f"/rpent-task libero_object {n} 0"
                await _settle(pilot, lambda: _box(app).value == want)
                assert _box(app).value == want, f"round {n}: {_box(app).value!r}"
                assert app.focused is _box(app)
                assert steerings[0].drain() == [sent[-1]], f"round {n}"
                _burst(app, "\x1b")
                await _settle(pilot, lambda: app.focused is not _box(app))
                _box(app).value = ""
            # a new task while one runs: the line (typed in one burst) waits for a second Enter in the line
            _burst(app, "i/rpent-task libero_object 5 0\n")
            await wait_for(pilot, lambda: any("press Enter again" in n.message for n in app._notifications)
                           and app.focused is _box(app), 30, what="the replace confirmation")
            assert _box(app).value == "/rpent-task libero_object 5 0" and len(app.session.runs) == 1
            _burst(app, "\n")
            await wait_for(pilot, lambda: len(app.session.runs) == 2 and app.session.current.transcript, 60,
                           what="the replacing TaskRun")
            run = app.session.current
            _burst(app, "ilast words\nx")  # x right behind Enter cancels the TaskRun
            await wait_for(pilot, lambda: run.finished, 60, what="x behind Enter cancels")
            assert run.state == "cancelled" and steerings[-1].drain() == ["last words"] and _box(app).value == ""
            await pilot.press("ctrl+q")

    asyncio.run(main())


def test_keys_right_after_a_verdict_are_the_run_screens_keys(tmp_path, png_bytes):
    from rpent_tui.screens.operator import OperatorModal

    run = StandInRun(ask=True, png=png_bytes)
    app = make_app(tmp_path, run, shared=())

    async def main():
        async with app.run_test(size=(100, 30)) as pilot:
            await wait_for(pilot, lambda: app.session.state == "ready", what="session")
            await pilot.press("t")
            await type_text(pilot, "libero_goal 1 0\n")
            box = _box(app)
            await pilot.press("i")  # the operator is typing when the verdict window opens
            await wait_for(pilot, lambda: isinstance(app.screen, OperatorModal) and app.screen.is_mounted,
                           what="operator modal")
            _burst(app, "stlibero_goal 2 0")  # the answer, then a new task line, in one read
            await _settle(pilot, lambda: box.value == "/rpent-task libero_goal 2 0")
            assert box.value == "/rpent-task libero_goal 2 0" and app.focused is box
            await wait_for(pilot, lambda: app.session.current.finished, what="TaskRun end")
            await pilot.press("ctrl+q")

    asyncio.run(main())
    assert run.answers == [("success", "")]
