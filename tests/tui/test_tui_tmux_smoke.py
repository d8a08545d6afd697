"""tmux smoke test: the real ``rpent-tui`` in a real terminal runs a real offline TaskRun on LIBERO
(scripted planner, fresh env server), answers the operator verdict its finish requires, opens the
trajectory browser, quits, and leaves no child process; a second session is killed with SIGHUP
(an SSH drop) and must leave no child either.

Slow (a MuJoCo env server, ~1 min): ``pytest -m slow tests/tui/test_tui_tmux_smoke.py``. With
``RPENT_TUI_SCREENSHOTS=<dir>`` it also saves an SVG of every screen there (F12, at the pane's size).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tui_tmux import alive, descendants

pytestmark = [pytest.mark.slow, pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux: run scripts/install.sh (apt: tmux)")]

ROOT = Path(__file__).resolve().parents[2]
SOCK = f"rpent-smoke-{os.getpid()}"  # a tmux server of this run only (others may run the same test)


def tmux(*args: str, check: bool = True) -> str:
    return subprocess.run(["tmux", "-L", SOCK, "-f", "/dev/null", *args], check=check, capture_output=True,
                          text=True).stdout


def screen_text(session: str) -> str:
    return tmux("capture-pane", "-p", "-t", session, check=False)


def wait_screen(session: str, needle: str, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    text = ""
    while time.monotonic() < deadline:
        text = screen_text(session)
        if needle in text:
            return text
        time.sleep(0.5)
    raise AssertionError(f"{needle!r} not on screen after {timeout}s; screen:\n{text}")


def start_task(session: str, args: str) -> None:
    """Type ``/rpent-task <args>`` into the Run screen's input line and submit it."""
    wait_screen(session, "session ready", 60)  # mounted, session running: keys are read now
    tmux("send-keys", "-t", session, "t")  # prefills "/rpent-task " and focuses the input line
    time.sleep(0.5)
    tmux("send-keys", "-t", session, "-l", args)
    for _ in range(5):
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            if f"/rpent-task {args}" in screen_text(session):
                tmux("send-keys", "-t", session, "Enter")
                return
            time.sleep(0.2)
        # a key was lost while the app was busy: focus the input line (i), retype the whole command
        tmux("send-keys", "-t", session, "i")
        time.sleep(0.5)
        tmux("send-keys", "-t", session, "C-u")
        tmux("send-keys", "-t", session, "-l", f"/rpent-task {args}")
    raise AssertionError(f"could not type the task command; screen:\n{screen_text(session)}")


def start(session: str, out: Path) -> int:
    cmd = (f"cd {ROOT} && TERM=xterm-256color MUJOCO_GL=egl ESCDELAY=50 {sys.executable} -m rpent_tui "
           f"--in-process --planner scripted --shared none --require-operator-verdict --images halfblock "
           f"--output-dir {out} --frame-interval 0.5")
    # no client is attached: the default size decides the window size, so make it 120x40 too
    tmux("new-session", "-d", "-s", session, "-x", "120", "-y", "40", cmd, ";", "set-option", "-g", "default-size", "120x40")
    pane_pid = int(tmux("display-message", "-p", "-t", session, "#{pane_pid}").strip())
    wait_screen(session, "Transcript", 60)
    return pane_pid


def test_real_taskrun_verdict_trajectories_quit_and_sighup(tmp_path):
    shots = os.environ.get("RPENT_TUI_SCREENSHOTS")
    out = tmp_path / "session"
    tmux("kill-server", check=False)
    try:
        pane = start("smoke", out)
        start_task("smoke", "libero_object 0 0")
        wait_screen("smoke", "TaskRun 0001", 30)
        tmux("send-keys", "-t", "smoke", "BTab")  # leave the input line
        wait_screen("smoke", "running", 120)
        children = descendants(pane)
        assert any("env_server" in Path(f"/proc/{p}/cmdline").read_text(errors="replace") for p in children
                   if alive(p)), "no env_server child while the TaskRun runs"
        deadline = time.monotonic() + 300
        answered = False
        while time.monotonic() < deadline:
            text = screen_text("smoke")
            if "Operator verdict requested" in text and not answered:
                if shots:
                    tmux("send-keys", "-t", "smoke", "F12")
                tmux("send-keys", "-t", "smoke", "s")
                answered = True
            if "TaskRun 0001 succeeded" in text or "TaskRun 0001 failed" in text or "TaskRun 0001 error" in text:
                break
            time.sleep(1)
        text = screen_text("smoke")
        assert answered, "the scripted planner never asked for the operator verdict that finish requires"
        assert "TaskRun 0001 succeeded" in text, text
        if shots:
            for key in ("F12", "F2", "F12", "F4", "F12", "F6", "F12"):
                tmux("send-keys", "-t", "smoke", key)
                time.sleep(1.5)
        tmux("send-keys", "-t", "smoke", "F2")
        text = wait_screen("smoke", "env_server@0001", 30)
        deadline = time.monotonic() + 30  # "succeeded" shows before the TaskRun's supervisor has stopped it
        while "stopped" not in text.split("env_server@0001", 1)[1].splitlines()[0] and time.monotonic() < deadline:
            time.sleep(0.5)
            text = screen_text("smoke")
        assert "stopped" in text.split("env_server@0001", 1)[1].splitlines()[0]  # the TaskRun's env server is gone
        tmux("send-keys", "-t", "smoke", "F5")
        text = wait_screen("smoke", "Transcript at this step", 30)
        text = wait_screen("smoke", "libero_object t0 s0", 30)
        assert "succeeded" in text  # the run list's Outcome column is the TaskRun's own state
        time.sleep(1.5)
        if shots:
            tmux("send-keys", "-t", "smoke", "s")
            time.sleep(1.0)
            tmux("send-keys", "-t", "smoke", "j", "j", "F12")
            time.sleep(1.5)
        children = {p for p in descendants(pane) if alive(p)}
        tmux("send-keys", "-t", "smoke", "C-q")
        deadline = time.monotonic() + 30
        while any(alive(p) for p in children) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not [p for p in children if alive(p)], "child processes left after quit"
        record = out / "tasks" / "0001_libero_object_t0_s0"
        assert (record / "states.json").is_file() and (record / "taskrun.json").is_file()
        if shots:
            Path(shots).mkdir(parents=True, exist_ok=True)
            for svg in (out / "screenshots").glob("*.svg"):
                shutil.copy(svg, Path(shots) / svg.name)

        # An SSH drop: SIGHUP to the TUI while a TaskRun's env server runs.
        pane = start("hup", tmp_path / "session2")
        start_task("hup", "libero_object 1 0")
        deadline = time.monotonic() + 120
        env_pids: set[int] = set()
        while time.monotonic() < deadline and not env_pids:
            env_pids = {p for p in descendants(pane) if alive(p)
                        and "env_server" in Path(f"/proc/{p}/cmdline").read_text(errors="replace")}
            time.sleep(0.5)
        assert env_pids, f"no env_server started; screen:\n{screen_text('hup')}"
        everything = {p for p in descendants(pane) | {pane} if alive(p)}  # the shell may have exec'd python
        tui = [p for p in everything if "rpent_tui" in Path(f"/proc/{p}/cmdline").read_text(errors="replace")]
        assert tui, "rpent-tui process not found"
        os.kill(tui[0], signal.SIGHUP)
        deadline = time.monotonic() + 30
        while any(alive(p) for p in everything) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not [p for p in everything if alive(p)], "children left after SIGHUP"
        record2 = tmp_path / "session2" / "tasks" / "0001_libero_object_t1_s0"
        assert '"state": "cancelled"' in (record2 / "taskrun.json").read_text()
    finally:
        tmux("kill-server", check=False)
