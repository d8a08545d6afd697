"""Keys typed right after ``i`` in a real terminal reach the Run screen's input line, in order
(none lost while the input line takes focus).

``rpent-tui`` runs in tmux at 100x30; each round sends ``i`` and a line in one ``send-keys`` (one
write, so the app reads them together, as from a fast typist or a paste), then reads the input
line off the screen. Slow (~20-40 s: a real ``rpent-tui`` start); the Pilot test
``test_tui_key_order.py`` covers the same in the default run."""

from __future__ import annotations

import shutil
import time

import pytest

from tui_tmux import Tmux

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux: run scripts/install.sh (apt: tmux)")]

LINES = ["/quit-not-really", "/rpent-task libero_object 1 0", "steer: take the bowl by its rim, then lift"]


@pytest.fixture
def tmux():
    server = Tmux("rpent-keys-order")
    server.kill()
    yield server
    server.kill()


def _input_line(screen: str) -> str:
    """The input line's text (the row above the footer), without the trailing blanks."""
    rows = [r for r in screen.splitlines() if r.strip()]
    return rows[-2].strip() if len(rows) >= 2 else ""


def _wait_input(tmux, session: str, want: str, timeout: float = 30) -> str:
    deadline = time.monotonic() + timeout
    line = ""
    while time.monotonic() < deadline:
        line = _input_line(tmux.screen(session))
        if line.startswith(want):
            return line
        time.sleep(0.1)
    return line


def test_keys_right_after_i_reach_the_input_line_in_order(tmux, tmp_path):
    tmux.start("keys", tmp_path / "session")
    tmux.wait("keys", "session ready", 90)
    for n in range(12):
        line = f"{LINES[n % len(LINES)]} {n}"
        if n % 2:
            tmux.keys("keys", "i" + line, literal=True)  # one write: i and the line in one read
        else:
            tmux.keys("keys", "i")  # two writes right after each other (the acceptance tests' way)
            tmux.keys("keys", line, literal=True)
        shown = _wait_input(tmux, "keys", line)
        assert shown.startswith(line), f"round {n}: input line {shown!r}, typed {line!r}"
        tmux.keys("keys", "C-u")  # clear the line (still focused), then leave it
        assert _wait_input(tmux, "keys", "/rpent-task <suite>").startswith("/rpent-task <suite>")  # the placeholder
        tmux.keys("keys", "Escape")
        time.sleep(0.5)  # let the lone Esc be read as Esc (not as alt+i with the next round's i)
    tmux.keys("keys", "C-q")


def test_keys_right_after_enter_are_the_screens_keys_in_a_real_terminal(tmux, tmp_path):
    """Enter and the keys behind it in one ``send-keys``: ``t`` right behind Enter is the screen's key
    (it prefills ``/rpent-task ``), never text of the line just sent. Without a
    TaskRun the steering line is refused: it stays in the line until ``t`` replaces it."""
    tmux.start("enter", tmp_path / "session")
    tmux.wait("enter", "session ready", 90)
    for n in range(4):
        tmux.keys("enter", f"ihold the bowl {n}", literal=True)
        tmux.keys("enter", "Enter", f"tlibero_goal {n} 0")  # one write: Enter, then t and a task line
        want = f"/rpent-task libero_goal {n} 0"
        shown = _wait_input(tmux, "enter", want)
        assert shown.startswith(want), f"round {n}: input line {shown!r}"
        tmux.keys("enter", "C-u")
        assert _wait_input(tmux, "enter", "/rpent-task <suite>").startswith("/rpent-task <suite>")
        tmux.keys("enter", "Escape")
        time.sleep(0.5)
    tmux.keys("enter", "C-q")
