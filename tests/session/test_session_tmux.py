"""A session that outlives SSH, in real terminals (tmux) with the real LIBERO simulator and the
scripted planner (which asks the operator for a verdict before its finish counts):

1. client A (tmux ``a``) starts the session and ``/rpent-task libero_object 0 0``; client B attaches;
2. A's terminal is killed while the TaskRun runs (an SSH drop: tmux kill-session sends SIGHUP);
   the session, its TaskRun and its env server keep running;
3. client C re-attaches; the verdict request shows in B and C; answered in C, it closes in B;
4. the TaskRun succeeds; a fresh client D attaches after the fact and shows it, with its transcript;
5. D quits with "stop the session": no process of the session is left, the records say what happened.

Slow (a MuJoCo env server, ~1-3 min): ``pytest -m slow tests/session/test_session_tmux.py``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rpent.session.layout import SessionPaths, pid_alive

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.slow, pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux: run scripts/install.sh (apt: tmux)")]
SOCK = f"rpent-session-test-{os.getpid()}"  # a tmux server of this run only


def tmux(*args: str, check: bool = True) -> str:
    return subprocess.run(["tmux", "-L", SOCK, "-f", "/dev/null", *args], check=check, capture_output=True,
                          text=True).stdout


def screen(name: str) -> str:
    return tmux("capture-pane", "-p", "-t", name, check=False)


def wait_screen(name: str, needle: str, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    text = ""
    while time.monotonic() < deadline:
        text = screen(name)
        if needle in text:
            return text
        time.sleep(0.5)
    raise AssertionError(f"{needle!r} not on {name}'s screen after {timeout}s; screen:\n{text}")


def descendants(pid: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    children.setdefault(int(fh.read().rsplit(")", 1)[1].split()[1]), []).append(int(entry))
            except (OSError, IndexError, ValueError):
                continue
    out, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.add(child)
            todo.append(child)
    return out


def client(name: str, args: str) -> None:
    env = f"RPENT_SESSIONS_DIR={os.environ['RPENT_SESSIONS_DIR']} PYTHONPATH={os.environ.get('PYTHONPATH', '')}"
    cmd = f"cd {ROOT} && {env} TERM=xterm-256color MUJOCO_GL=egl ESCDELAY=50 {sys.executable} -m rpent_tui {args}"
    tmux("new-session", "-d", "-s", name, "-x", "120", "-y", "40", cmd, ";", "set-option", "-g", "default-size", "120x40")
    tmux("resize-window", "-t", name, "-x", "120", "-y", "40", check=False)
    wait_screen(name, "Transcript", 60)


def type_task(name: str, args: str) -> None:
    """Type ``/rpent-task <args>`` into the input line and submit it (retyped if a key is lost on a
    loaded machine)."""
    wait_screen(name, "session ready", 60)
    for _ in range(5):
        tmux("send-keys", "-t", name, "i")  # focus the input line
        time.sleep(0.5)
        tmux("send-keys", "-t", name, "C-u")
        tmux("send-keys", "-t", name, "-l", f"/rpent-task {args}")
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            if f"/rpent-task {args}" in screen(name):
                tmux("send-keys", "-t", name, "Enter")
                return
            time.sleep(0.2)
    raise AssertionError(f"could not type the task command; screen:\n{screen(name)}")


@pytest.mark.timeout(1500)  # a loaded 2-core machine runs the MuJoCo task several times slower
def test_ssh_drop_reattach_shared_verdict_and_clean_stop(short_tmp):
    out = short_tmp / "sess"
    paths = SessionPaths(out)
    tmux("kill-server", check=False)
    try:
        client("a", f"--planner scripted --shared none --require-operator-verdict --images halfblock "
                    f"--frame-interval 0.5 --output-dir {out}")
        pid = json.loads(paths.state.read_text())["pid"]
        client("b", f"--attach {out.name} --images halfblock")  # by registry name
        type_task("a", "libero_object 0 0")
        wait_screen("b", "TaskRun 0001", 30)
        deadline = time.monotonic() + 120
        env_pids: set[int] = set()
        while time.monotonic() < deadline and not env_pids:
            env_pids = {p for p in descendants(pid)
                        if "env_server" in Path(f"/proc/{p}/cmdline").read_text(errors="replace")}
            time.sleep(0.5)
        assert env_pids, "no env_server under the session process"
        owned = descendants(pid) | {pid}

        # the SSH drop: A's terminal goes away while the TaskRun runs
        tmux("kill-session", "-t", "a")
        time.sleep(2)
        assert pid_alive(pid) and all(pid_alive(p) for p in env_pids), "the session or its env server died with A"
        client("c", f"--attach {out} --images halfblock")
        wait_screen("c", "TaskRun 0001", 30)

        # one verdict request, seen by both clients; answered in C, it closes in B
        wait_screen("c", "Operator verdict requested", 900)  # ~385 s at load 18 on 2 cores
        wait_screen("b", "Operator verdict requested", 30)
        tmux("send-keys", "-t", "c", "s")
        wait_screen("c", "TaskRun 0001 succeeded", 120)
        text = wait_screen("b", "TaskRun 0001 succeeded", 30)
        assert "Operator verdict requested" not in text

        # a client attaching afterwards sees the finished TaskRun with its transcript (the backlog)
        tmux("kill-session", "-t", "b")
        tmux("kill-session", "-t", "c")
        client("d", f"--attach --images halfblock")  # the only running session
        wait_screen("d", "TaskRun 0001 succeeded", 30)
        text = wait_screen("d", "finish", 10)  # the transcript's end, from the backlog
        assert "environment success" in text or "finished" in text or "operator" in text, text

        # quit asks; "s" stops the session and every process it started
        tmux("send-keys", "-t", "d", "C-q")
        wait_screen("d", "stop the session and its services", 20)
        tmux("send-keys", "-t", "d", "s")
        deadline = time.monotonic() + 60
        while any(pid_alive(p) for p in owned) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not [p for p in owned if pid_alive(p)], "processes left after the session stopped"
        state = json.loads(paths.state.read_text())
        assert state["status"] == "stopped" and state["runs"][0]["state"] == "succeeded"
        record = out / "tasks" / "0001_libero_object_t0_s0"
        taskrun = json.loads((record / "taskrun.json").read_text())
        assert taskrun["state"] == "succeeded" and taskrun["environment_success"] is True
        operator_log = [json.loads(line) for line in (record / "operator_events.jsonl").read_text().splitlines()]
        assert [e.get("answer") for e in operator_log if e.get("answer")] == ["success"], operator_log
    finally:
        tmux("kill-server", check=False)
        state = paths.read_state() or {}
        if pid_alive(state.get("pid")):
            os.kill(state["pid"], 15)
