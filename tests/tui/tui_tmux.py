"""tmux helpers for the TUI acceptance tests: a real ``rpent-tui`` in a real terminal, driven by keys.

Imported as ``tui_tmux`` (this folder is on ``sys.path``). Every function takes the tmux socket
name, so tests that run at the same time do not share a tmux server.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


class Tmux:
    """One tmux server (socket ``-L name``) holding the sessions of a test."""

    def __init__(self, socket: str) -> None:
        self.socket = socket

    def __call__(self, *args: str, check: bool = True) -> str:
        return subprocess.run(["tmux", "-L", self.socket, "-f", "/dev/null", *args], check=check,
                              capture_output=True, text=True).stdout

    def screen(self, session: str) -> str:
        """The visible text of ``session``'s pane."""
        return self("capture-pane", "-p", "-t", session, check=False)

    def wait(self, session: str, needle: str, timeout: float, poll: float = 0.3) -> str:
        """Wait until ``needle`` is on screen (looking every ``poll`` s); returns the screen (fails
        with the screen shown)."""
        deadline = time.monotonic() + timeout
        text = ""
        while time.monotonic() < deadline:
            text = self.screen(session)
            if needle in text:
                return text
            time.sleep(poll)
        raise AssertionError(f"{needle!r} not on screen after {timeout}s; screen:\n{text}")

    def keys(self, session: str, *keys: str, literal: bool = False) -> None:
        """Send keys (tmux key names, or literal text with ``literal=True``)."""
        self("send-keys", "-t", session, *(("-l",) if literal else ()), *keys)

    def start(self, session: str, out: Path, size: tuple[int, int] = (100, 30), extra: str = "") -> int:
        """Start ``rpent-tui --in-process`` (scripted planner, no shared services, half-block images:
        the session ends with the UI, so an abrupt kill must leave no process) in a new tmux session
        of ``size``; returns the pane's pid once the Run screen is drawn."""
        cmd = (f"cd {ROOT} && TERM=xterm-256color MUJOCO_GL=egl ESCDELAY=50 {sys.executable} -m rpent_tui "
               f"--planner scripted --shared none --images halfblock --output-dir {out} --frame-interval 0.5 "
               f"--in-process {extra}")
        cols, rows = size
        self("new-session", "-d", "-s", session, "-x", str(cols), "-y", str(rows), cmd, ";",
             "set-option", "-g", "default-size", f"{cols}x{rows}")
        pane = int(self("display-message", "-p", "-t", session, "#{pane_pid}").strip())
        self.wait(session, "Transcript", 90)
        return pane

    def start_task(self, session: str, args: str) -> None:
        """Type ``/rpent-task <args>`` into the Run screen's input line and submit it."""
        self.wait(session, "session ready", 90)
        self.keys(session, "t")  # prefills "/rpent-task " and focuses the input line
        # on a loaded machine the app may take seconds: type only once the input line has the focus,
        # else the letters would reach the screen's keys (i, o, x ...)
        self._wait_prefill(session)
        self.keys(session, args, literal=True)
        for _ in range(5):
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline:
                if f"/rpent-task {args}" in self.screen(session):
                    self.keys(session, "Enter")
                    return
                time.sleep(0.2)
            self.keys(session, "C-u")  # a key was lost while the app was busy: retype the whole line
            self.keys(session, f"/rpent-task {args}", literal=True)
        raise AssertionError(f"could not type the task command; screen:\n{self.screen(session)}")

    def _wait_prefill(self, session: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(line.strip().startswith("/rpent-task") and "<suite>" not in line
                   for line in self.screen(session).splitlines()):
                time.sleep(0.3)
                return
            time.sleep(0.2)
        raise AssertionError(f"the input line was not prefilled; screen:\n{self.screen(session)}")

    def kill(self) -> None:
        """Kill the tmux server (every session: an abrupt end for the programs in them)."""
        self("kill-server", check=False)


def descendants(pid: int) -> set[int]:
    """Every live descendant of ``pid`` (from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    out, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.add(child)
            todo.append(child)
    return out


def alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def wait_gone(pids: set[int], timeout: float = 60) -> list[int]:
    """Wait until every pid has ended; returns those still alive."""
    deadline = time.monotonic() + timeout
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.2)
    return [p for p in pids if alive(p)]


def records(task_dir: Path, timeout: float = 60) -> tuple[dict, dict]:
    """``taskrun.json`` and ``transcript_*.json`` of a TaskRun directory, once the TaskRun's record
    is final (the screen shows the end a moment before its services have stopped and it is written)."""
    deadline = time.monotonic() + timeout
    while True:
        taskrun = json.loads((task_dir / "taskrun.json").read_text())
        if taskrun.get("ended_at") or time.monotonic() > deadline:
            break
        time.sleep(0.3)
    transcript = json.loads(next(task_dir.glob("transcript_*.json")).read_text())
    return taskrun, transcript
