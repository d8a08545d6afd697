"""Explore screen (F9): the explorations under the logs directory, a running exploration's
sessions and archived attempts refreshing as its files change, and the reader's tolerance of a
half-written exploration. Pilot key presses only; the record files follow the layout that
``rpent.explore.loop`` writes (its slow end-to-end test reads a real exploration with the same
reader, tests/memory/test_explore_loop.py)."""

from __future__ import annotations

import asyncio
import json

import pytest

from rpent_tui.services import explore as ex
from tui_helpers import StandInRun, make_app, wait_for


def _write(path, doc):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))


def _session(root, k, steps):
    _write(root / "sessions" / f"session_{k:03d}" / "states.json",
           {"steps": [{"step_idx": i, "env_steps": 10 * i, "success": False} for i in range(steps)]})


def _attempt(root, n, session, in_session, reason, lever):
    _write(root / "attempts" / f"attempt_{n}_failed.json",
           {"attempt": n, "session": session, "attempt_in_session": in_session, "reason": reason,
            f"changed_lever_vs_attempt{n}": lever, "calls": [{"tool": "move_to"}] * 3})


def _explore_doc(root, **kw):
    doc = {"cell": "object_t0_s0", "status": "running", "sessions_max": 2, "attempts_per_session": 2,
           "sessions": [{"session": 1, "output_dir": str(root / "sessions" / "session_001"), "attempts": 1,
                         "state": "running"}],
           "current": {"session": 1, "attempt": 2}, "attempts_archived": ["attempts/attempt_1_failed.json"],
           "solved": False, "merged": None, "error": None, "memory_inbox": str(root / "inbox")}
    doc.update(kw)
    _write(root / "explore.json", doc)


def test_explore_screen_follows_a_running_exploration(tmp_path):
    logs = tmp_path / "logs"
    old = logs / "old_explore"  # an earlier, finished exploration that was never solved
    _write(old / "explore.json", {"cell": "object_t3_s0", "sessions": [
        {"session": 1, "attempts": 2, "environment_success": False, "error": None, "stop_reason": "finished"}],
        "solved": False, "merged": None, "error": None})
    _session(old, 1, 4)
    live = logs / "live_explore"
    _session(live, 1, 3)
    _attempt(live, 1, 1, 1, "grasp came up empty", "descend 1 cm lower")
    (live / "inbox" / "wip").mkdir(parents=True)
    (live / "inbox" / "wip" / "notes.md").write_text("attempt 1: too high\n")
    _explore_doc(live)
    app = make_app(tmp_path, StandInRun(), shared=(), start_mode="run", logs_dir=logs)

    async def main():
        async with app.run_test(size=(160, 45)) as pilot:
            await pilot.press("f9")
            screen = app.screen
            await wait_for(pilot, lambda: type(screen).__name__ == "ExploreScreen" and screen.current is not None,
                           what="the explore screen and its first exploration")
            assert screen.query_one("#explorations").row_count == 2
            assert screen.current.path == live  # newest first
            sessions, attempts = screen.query_one("#explore-sessions"), screen.query_one("#explore-attempts")
            assert sessions.row_count == 1 and attempts.row_count == 1
            assert [str(c) for c in sessions.get_row_at(0)[2:5]] == ["2", "20", "2"]
            assert "running" in str(sessions.get_row_at(0)[1])
            row = [str(c) for c in attempts.get_row_at(0)]
            assert row == ["1", "1.1", "grasp came up empty", "descend 1 cm lower", "3"]
            summary = str(screen.query_one("#explore-summary").render())
            assert "session 1/2, attempt 2/2" in summary and "wip/notes.md" in summary
            # the exploration moves on: session 1 ends, session 2 archives an attempt, then solves
            _attempt(live, 2, 1, 2, "dropped on the rim", "release lower")
            _session(live, 2, 5)
            _explore_doc(live, sessions=[
                {"session": 1, "attempts": 2, "state": "finished", "environment_success": False,
                 "error": "planner timed out after 60s", "stop_reason": "timeout"},
                {"session": 2, "attempts": 1, "state": "running"}], current={"session": 2, "attempt": 1})
            await wait_for(pilot, lambda: sessions.row_count == 2 and attempts.row_count == 2,
                           what="session 2 and attempt 2 on screen")
            assert "timeout" in str(sessions.get_row_at(0)[1]) and "running" in str(sessions.get_row_at(1)[1])
            _explore_doc(live, status="finished", current=None, solved=True, sessions=[
                {"session": 1, "attempts": 2, "state": "finished", "environment_success": False,
                 "error": "planner timed out after 60s", "stop_reason": "timeout"},
                {"session": 2, "attempts": 1, "state": "finished", "environment_success": True, "error": None,
                 "stop_reason": "finished"}],
                merged={"cell": "object_t0_s0", "created": ["global/basket_drops.md"], "evidence_merged": [],
                        "conflicts": [], "task_pair": ["task-specific/object_t0_s0.json"]})
            await wait_for(pilot, lambda: screen.current.status == "finished", what="the finished exploration")
            assert "solved" in str(sessions.get_row_at(1)[1])
            summary = str(screen.query_one("#explore-summary").render())
            assert "memory merged: 1 new leaf(s)" in summary and "audit + recipe published" in summary
            # keyboard: the exploration list, down to the older one
            await pilot.press("e", "j")
            await wait_for(pilot, lambda: screen.current.path == old, what="the older exploration")
            assert sessions.row_count == 1 and "not solved" in str(sessions.get_row_at(0)[1])
            assert attempts.row_count == 0
            await pilot.press("ctrl+q")

    asyncio.run(main())


def test_reader_tolerates_half_written_and_refuses_bad_records(tmp_path):
    d = tmp_path / "x"
    with pytest.raises(FileNotFoundError, match="not an exploration directory"):
        ex.read_exploration(d)
    (d / "sessions" / "session_001").mkdir(parents=True)  # session 1 started, nothing written yet
    e = ex.read_exploration(d)
    assert e.status == "running" and [(s.session, s.outcome, s.env_steps) for s in e.sessions] == [(1, "running", None)]
    assert [x.cell for x in ex.list_explorations(tmp_path)] == ["x"]
    (d / "explore.json").write_text("{not json")
    with pytest.raises(ex.RecordError, match="explore.json"):
        ex.read_exploration(d)
    assert ex.list_explorations(tmp_path)[0].status == "unknown"
    assert ex.list_explorations(tmp_path / "missing") == []


@pytest.mark.skipif(__import__("shutil").which("tmux") is None, reason="needs tmux: run scripts/install.sh (apt: tmux)")
def test_explore_screen_in_a_real_terminal(tmp_path):
    """The real ``rpent-tui`` in tmux: F9 shows the exploration, its attempt, and a second session
    once the record says so; ctrl+q quits (no simulator: the session starts no service)."""
    import os
    import subprocess
    import sys
    import time
    from pathlib import Path

    sock = f"rpent-explore-{os.getpid()}"

    def tmux(*args, check=True):
        return subprocess.run(["tmux", "-L", sock, "-f", "/dev/null", *args], check=check, capture_output=True,
                              text=True).stdout

    def wait_screen(needle, timeout=120.0):
        deadline, text = time.monotonic() + timeout, ""
        while time.monotonic() < deadline:
            text = tmux("capture-pane", "-p", "-t", "ex", check=False)
            if needle in text:
                return text
            time.sleep(0.3)
        raise AssertionError(f"{needle!r} not on screen after {timeout}s; screen:\n{text}")

    logs = tmp_path / "logs"
    live = logs / "live_explore"
    _session(live, 1, 3)
    _attempt(live, 1, 1, 1, "grasp came up empty", "descend lower")
    _explore_doc(live)
    root = Path(__file__).resolve().parents[2]
    cmd = (f"cd {root} && TERM=xterm-256color ESCDELAY=50 {sys.executable} -m rpent_tui --in-process --planner "
           f"scripted --shared none --images none --output-dir {tmp_path / 'session'} --logs-dir {logs}")
    try:
        tmux("start-server", ";", "set-option", "-g", "default-size", "160x45", ";", "new-session", "-d", "-s", "ex",
             "-x", "160", "-y", "45", cmd)
        wait_screen("session ready", 120)
        for _ in range(5):  # a key can be lost while a loaded machine is still drawing: press F9 again
            tmux("send-keys", "-t", "ex", "F9")
            try:
                text = wait_screen("grasp came up empty", 20)
                break
            except AssertionError:
                continue
        else:
            text = wait_screen("grasp came up empty", 1)
        assert "object_t0_s0" in text and "running" in text and "session 1/2" in text
        _session(live, 2, 1)
        _explore_doc(live, sessions=[{"session": 1, "attempts": 2, "state": "finished", "environment_success": False,
                                      "error": "planner timed out", "stop_reason": "timeout"},
                                     {"session": 2, "attempts": 1, "state": "running"}],
                     current={"session": 2, "attempt": 1})
        text = wait_screen("session 2/2")
        assert "timeout" in text
        deadline = time.monotonic() + 60
        pressed = 0.0
        while "ex" in tmux("list-sessions", check=False) and time.monotonic() < deadline:
            if time.monotonic() - pressed > 10:  # again if the key was lost on a loaded machine
                tmux("send-keys", "-t", "ex", "C-q")
                pressed = time.monotonic()
            time.sleep(0.3)
        assert "ex" not in tmux("list-sessions", check=False), "rpent-tui did not quit on ctrl+q"
    finally:
        tmux("kill-server", check=False)
