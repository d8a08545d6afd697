"""The live progress of a plain `rpent` run: a real run on the real LIBERO simulator with its output
on a pseudo-terminal (one status line redrawn in place) and on pipes (plain lines)."""

from __future__ import annotations

import io
import os
import pty
import re
import select
import subprocess
import sys
import time
from pathlib import Path

from rpent.cli.progress import ERASE, RunProgress, resolve_mode

REPO = Path(__file__).resolve().parents[2]
RPENT = [sys.executable, "-m", "rpent.cli.main"]
SHORT_RUN = ["--robot", "libero", "--suite", "libero_object", "--task", "0", "--seed", "0", "--planner", "scripted",
             "--no-video", "--max-episode-steps", "60"]
STATUS = re.compile(r"^rpent \d+:\d\d \| step \d+ \(env \d+\) \| [a-z_]+ \| running: ")


def _env() -> dict:
    env = dict(os.environ, MUJOCO_GL="egl", COLUMNS="200")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    return env


def test_live_status_line_on_a_terminal(tmp_path):
    out = tmp_path / "run"
    leader, follower = pty.openpty()
    proc = subprocess.Popen(RPENT + SHORT_RUN + ["--output-dir", str(out)], stdin=subprocess.DEVNULL,
                            stdout=follower, stderr=follower, env=_env(), cwd=tmp_path)
    os.close(follower)
    chunks = []
    deadline = time.monotonic() + 400
    while time.monotonic() < deadline:
        ready, _, _ = select.select([leader], [], [], 1.0)
        if ready:
            try:
                data = os.read(leader, 65536)
            except OSError:  # the child closed the terminal
                break
            if not data:
                break
            chunks.append(data)
        elif proc.poll() is not None:
            break
    os.close(leader)
    assert proc.wait(30) in (0, 1)
    screen = b"".join(chunks).decode("utf-8", "replace").replace("\r\n", "\n")
    # the status line is redrawn in place: erase-line + text, never a newline of its own
    frames = [f for f in screen.split(ERASE)[1:]]
    statuses = [f.split("\n")[0] for f in frames if f.startswith("rpent ")]
    assert len(statuses) >= 5, screen[-3000:]
    assert any(STATUS.match(s) for s in statuses), statuses[-10:]
    assert {"move_to", "segment"} & {s.split(" | ")[2] for s in statuses if STATUS.match(s)}
    # the clock runs while nothing else happens (redrawn every 0.5 s)
    clocks = {s.split(" | ")[0] for s in statuses}
    assert len(clocks) >= 2, clocks
    # log lines and the result never share a line with the status text
    lines = [ln.split(ERASE)[-1] for ln in screen.split("\n")]
    assert any(ln.startswith("INFO run object_t0_s0:") for ln in lines), lines[:10]
    assert any(ln.startswith("rpent: NOT SOLVED") or ln.startswith("rpent: SUCCESS") for ln in lines), lines[-5:]
    assert any(ln.startswith(f"rpent: run record in {out}") for ln in lines)
    for ln in lines:
        assert "INFO" not in ln or ln.startswith("INFO"), ln
    assert (out / "states.json").is_file()  # the record is unaffected


def test_plain_lines_when_not_a_terminal(tmp_path):
    out = tmp_path / "run"
    p = subprocess.run(RPENT + SHORT_RUN + ["--output-dir", str(out)], capture_output=True, text=True, env=_env(),
                       cwd=tmp_path, timeout=400, stdin=subprocess.DEVNULL)
    assert p.returncode in (0, 1), p.stderr[-3000:]
    assert "\x1b[" not in p.stderr and "\r" not in p.stderr
    lines = p.stderr.splitlines()
    assert re.match(r"^rpent: \d+\.\d s starting: libero_object task 0 seed 0$", lines[0]), lines[:3]
    assert any(re.match(r"^rpent: \d+\.\d s running: pick up the alphabet soup", ln) for ln in lines)
    tool_lines = [ln for ln in lines if re.match(r"^rpent: \d+\.\d s step \d+ \(env step \d+\): [a-z_]+$", ln)]
    assert len(tool_lines) >= 5 and tool_lines[0].endswith(": view_env_state"), lines
    assert "rpent: run record in" in p.stdout  # the result stays on stdout
    off = subprocess.run(RPENT + ["--progress", "off", "--suite", "nope", "--task", "0"], capture_output=True,
                         text=True, env=_env(), cwd=tmp_path, timeout=120)
    assert off.returncode == 2 and "rpent: 0." not in off.stderr


def test_lines_mode_heartbeat_and_operator_wait():
    """The reporter alone, on a text stream, with a clock the test advances."""
    now = [100.0]
    stream = io.StringIO()
    prog = RunProgress(stream, "lines", clock=lambda: now[0], heartbeat_s=30.0)
    try:
        prog.on_event({"kind": "status", "state": "starting", "detail": "libero_object task 0 seed 0"})
        prog.on_event({"kind": "planner", "event": "tool_call", "name": "move_to", "args": {}, "call_id": "c1"})
        prog.on_event({"kind": "step", "step": 0, "env_steps": 12, "tool": "move_to"})
        now[0] += 31.0
        deadline = time.monotonic() + 5
        while "still running" not in stream.getvalue() and time.monotonic() < deadline:
            time.sleep(0.05)
        prog.on_event({"kind": "operator_request", "id": "r1", "request_kind": "verdict", "prompt": "done?"})
        prog.on_event({"kind": "frames", "step": 0})  # ignored
    finally:
        prog.close()
    assert stream.getvalue().splitlines() == [
        "rpent: 0.0 s starting: libero_object task 0 seed 0",
        "rpent: 0.0 s step 0: move_to",
        "rpent: 31.0 s still running (step 1 (env step 12), tool move_to)",
        "rpent: 31.0 s waiting for the operator (verdict)",
    ]


def test_live_mode_steps_aside_for_the_operator_and_erases_at_close():
    stream = io.StringIO()
    prog = RunProgress(stream, "live", width=60, refresh_s=60.0)
    prog.on_event({"kind": "status", "state": "running", "detail": "put the soup in the basket " * 5})
    prog.on_event({"kind": "planner", "event": "tool_call", "name": "segment", "args": {}, "call_id": "c1"})
    text = stream.getvalue().split(ERASE)[-1]
    assert text.startswith("rpent 0:00 | segment | running: put the soup") and len(text) <= 60
    prog.on_event({"kind": "operator_request", "id": "r1", "request_kind": "verdict", "prompt": "done?"})
    assert stream.getvalue().endswith(ERASE)  # erased: the operator prompt gets a clean line
    prog.on_event({"kind": "status", "state": "running", "detail": "x"})  # no redraw while asked...
    assert stream.getvalue().endswith(ERASE)
    prog.on_event({"kind": "planner", "event": "tool_call", "name": "finish", "args": {}, "call_id": "c2"})
    assert stream.getvalue().split(ERASE)[-1].startswith("rpent 0:00 | finish")  # ...until the run goes on
    prog.close()
    assert stream.getvalue().endswith(ERASE)


def test_auto_mode_follows_the_stream():
    r, w = os.pipe()
    try:
        with os.fdopen(w, "w") as pipe:
            assert resolve_mode("auto", pipe) == "lines"
    finally:
        os.close(r)
    leader, follower = pty.openpty()
    try:
        with os.fdopen(follower, "w") as tty:
            assert resolve_mode("auto", tty) == "live"
    finally:
        os.close(leader)
    assert resolve_mode("off", io.StringIO()) == "off"
