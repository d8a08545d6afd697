"""Operator workflows of the real ``rpent-tui`` in tmux at 100x30, keyboard only, asserted on the
run record files as well as on the screen. Each TaskRun is real: the scripted planner
on LIBERO libero_object task 0 seed 0 with a fresh env server.

Default run: Esc interrupts the scripted planner's motion (record: ``cancelled``, the cancelled
``move_to`` step, ``steering.jsonl``), then an abrupt tmux kill leaves no child process.
Slow (``pytest -m slow tests/tui/test_tui_tmux_workflows.py``, ~1-2 min each on 2 cores): the
verdicts f / c then s / a under ``--require-operator-verdict``, ``/quit`` (leaves the app, the run is
recorded cancelled), a second task
replacing the first (confirmed with a second Enter), and a reused ``--output-dir``.
"""

from __future__ import annotations

import json
import shutil
import time

import pytest

from tui_tmux import Tmux, alive, descendants, records, wait_gone

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux: run scripts/install.sh (apt: tmux)")

TASK = "libero_object 0 0"
DIR = "0001_libero_object_t0_s0"
VERDICT = "--require-operator-verdict"


@pytest.fixture
def tmux(request):
    server = Tmux(f"rpent-wf-{request.node.name[:40]}".replace("[", "-").replace("]", ""))
    server.kill()
    yield server
    server.kill()


def _wait_end(tmux, session, run_id="0001", timeout=300):
    return tmux.wait(session, f"TaskRun {run_id} ", timeout) and _wait_state(tmux, session, run_id, timeout)


def _wait_state(tmux, session, run_id, timeout):
    deadline = time.monotonic() + timeout
    text = ""
    while time.monotonic() < deadline:
        text = tmux.screen(session)
        for state in ("succeeded", "failed", "aborted", "cancelled", "error"):
            if f"TaskRun {run_id} {state}" in text:
                return state
        time.sleep(0.5)
    raise AssertionError(f"TaskRun {run_id} did not end in {timeout}s; screen:\n{text}")


def _answer_verdict(tmux, session, key, timeout=300):
    tmux.wait(session, "Operator verdict requested", timeout)
    screen = tmux.screen(session)
    assert "agentview camera" in screen and "wrist camera" in screen  # the real frames are shown
    tmux.keys(session, key)
    deadline = time.monotonic() + 10
    while "Operator verdict requested" in tmux.screen(session) and time.monotonic() < deadline:
        time.sleep(0.2)


def test_esc_interrupts_the_motion_and_a_tmux_kill_leaves_no_orphans(tmux, tmp_path):
    # Esc must land while a move_to runs: on a fast machine the first motion (~30 env steps) can end
    # between its name appearing on screen and the key arriving. The record says which it was; a miss
    # (no motion cancelled) is tried again in a fresh TUI, so the outcome does not depend on speed.
    for attempt in range(3):
        out = tmp_path / f"session{attempt}"
        pane = tmux.start(f"wf{attempt}", out)
        screen = tmux.screen(f"wf{attempt}")
        assert "f1" in screen and "Help" in screen and "images halfblock" in screen  # footer help, renderer named
        tmux.start_task(f"wf{attempt}", TASK)
        tmux.wait(f"wf{attempt}", "move_to", 180, poll=0.05)
        tmux.keys(f"wf{attempt}", "Escape")  # focus is back on the transcript after Enter: Esc interrupts at once
        state = _wait_state(tmux, f"wf{attempt}", "0001", 120)
        taskrun, tr = records(out / "tasks" / DIR)
        steps = json.loads((out / "tasks" / DIR / "states.json").read_text())["steps"]
        codes = [s["result"].get("code") for s in steps if (s.get("command") or {}).get("action") == "move_to"]
        if codes and codes[-1] == "tool_cancelled":
            break
        everything = {p for p in descendants(pane) | {pane} if alive(p)}
        tmux("kill-session", "-t", f"wf{attempt}", check=False)
        assert not wait_gone(everything), "processes left after the tmux session was killed"
    else:
        raise AssertionError(f"Esc never landed during a motion in 3 TaskRuns (last move_to codes {codes})")
    assert state == "cancelled"
    assert taskrun["state"] == "cancelled" and tr["stop_reason"] == "interrupted" and tr["label"] == "cancelled"
    assert "tool_cancelled" not in codes[:-1]  # only the motion in flight was cancelled
    events = [json.loads(line) for line in (out / "tasks" / DIR / "steering.jsonl").read_text().splitlines()]
    assert [e["kind"] for e in events] == ["interrupt"]
    everything = {p for p in descendants(pane) | {pane} if alive(p)}
    tmux.kill()  # abrupt: the terminal goes away (SIGHUP)
    assert not wait_gone(everything), "processes left after the tmux kill"


@pytest.mark.slow
@pytest.mark.parametrize("keys, state, answers", [
    (["f"], "failed", ["failure"]),
    (["c", "s"], "succeeded", ["continue", "success"]),
    (["a"], "aborted", ["abort"]),
], ids=["failure", "continue-then-success", "abort"])
def test_verdicts_decide_the_taskrun_on_record(tmux, tmp_path, keys, state, answers):
    out = tmp_path / "session"
    tmux.start("wf", out, extra=VERDICT)
    tmux.start_task("wf", TASK)
    for key in keys:
        _answer_verdict(tmux, "wf", key)
    assert _wait_state(tmux, "wf", "0001", 300) == state
    taskrun, tr = records(out / "tasks" / DIR)
    assert taskrun["state"] == state and tr["label"] == state
    assert [v["answer"] for v in tr["operator_verdicts"]] == answers
    assert taskrun["operator_verdict"]["answer"] == answers[-1] and taskrun["operator_verdict"]["asked_by"] == "scripted"
    if state != "succeeded":  # the operator's verdict ended the episode; no planner finish was accepted
        assert tr["finish"]["by"] == "operator"
    tools = [b["name"] for m in tr["messages"] if m["role"] == "assistant" for b in m["content"]
             if b["type"] == "tool_use"]
    assert tools.count("request_operator_verdict") == len(keys)
    if "c" in keys:  # continue: the planner kept working (a second attempt) before asking again
        first, second = [i for i, t in enumerate(tools) if t == "request_operator_verdict"]
        assert "segment" in tools[first:second]
    tmux.keys("wf", "C-q")


@pytest.mark.slow
def test_quit_command_leaves_the_app_and_records_the_run_cancelled(tmux, tmp_path):
    out = tmp_path / "session"
    pane = tmux.start("wf", out)
    tmux.start_task("wf", TASK)
    tmux.wait("wf", "move_to", 180)
    children = descendants(pane)
    tmux.keys("wf", "i")
    tmux.keys("wf", "/quit", literal=True)
    tmux.keys("wf", "Enter")
    assert not wait_gone({pane, *children}, 120), "/quit left processes running"  # the app itself ended
    taskrun, tr = records(out / "tasks" / DIR)
    assert taskrun["state"] == "cancelled" and taskrun["ended_at"] and tr["label"] == "cancelled"
    assert (taskrun["suite"], taskrun["task"], taskrun["seed"]) == ("libero_object", 0, 0)
    assert sorted(p.name for p in (out / "tasks").iterdir()) == [DIR]  # no stray TaskRun from lost keys


@pytest.mark.slow
def test_closing_the_pane_records_the_hangup_as_the_stop_reason(tmux, tmp_path):
    """Closing the pane of a running ``rpent-tui --in-process`` (the terminal hangs up: SIGHUP)
    cancels the TaskRun, and its record names the hangup, not an operator's interrupt."""
    out = tmp_path / "session"
    pane = tmux.start("wf", out)
    tmux.start_task("wf", TASK)
    tmux.wait("wf", "move_to", 240)
    everything = {p for p in descendants(pane) | {pane} if alive(p)}
    tmux("kill-pane", "-t", "wf")
    assert not wait_gone(everything, 120), "processes left after the pane was closed"
    taskrun, tr = records(out / "tasks" / DIR)
    reason = "interrupted: terminal hung up (SIGHUP)"
    assert taskrun["state"] == "cancelled" and tr["label"] == "cancelled" and tr["stop_reason"] == "cancelled"
    assert tr["error"] == f"run cancelled ({reason})", tr["error"]
    assert reason in taskrun["detail"], taskrun["detail"]
    events = [json.loads(line) for line in (out / "tasks" / DIR / "steering.jsonl").read_text().splitlines()]
    assert [(e["kind"], e.get("reason")) for e in events][:1] == [("stop", reason)], events
    assert "interrupted by operator" not in json.dumps([taskrun, tr["error"], tr["steering"]])


@pytest.mark.slow
def test_second_task_replaces_the_first_after_confirmation(tmux, tmp_path):
    out = tmp_path / "session"
    pane = tmux.start("wf", out)
    tmux.start_task("wf", TASK)
    tmux.wait("wf", "move_to", 180)  # early in the run: the replacement must land while it still runs
    tmux.keys("wf", "i")
    tmux.keys("wf", "/rpent-task libero_object 1 0", literal=True)
    tmux.keys("wf", "Enter")
    tmux.wait("wf", "Enter again", 20)  # not replaced without confirmation
    assert not (out / "tasks" / "0002_libero_object_t1_s0").exists()
    tmux.keys("wf", "Enter")
    tmux.wait("wf", "TaskRun 0002", 60)
    # the first TaskRun's final record: taskrun.json gets ended_at after its transcript was written (a
    # cancel writes taskrun.json's state at once, while the run still winds down)
    first, tr = records(out / "tasks" / DIR, timeout=120)
    assert first["ended_at"], first
    assert first["state"] == "cancelled" and first["replaced_by"] == "0002"
    assert "replaced by TaskRun 0002" in tr["error"]
    children = {p for p in descendants(pane) if alive(p)}
    tmux.keys("wf", "C-q")
    assert not wait_gone(children), "child processes left after quit"
    second = json.loads((out / "tasks" / "0002_libero_object_t1_s0" / "taskrun.json").read_text())
    assert (second["id"], second["suite"], second["task"], second["seed"]) == ("0002", "libero_object", 1, 0)
    assert second["ended_at"] and second["replaced_by"] is None  # the quit ended it; nothing replaced it
    assert sorted(p.name for p in (out / "tasks").iterdir()) == [DIR, "0002_libero_object_t1_s0"]


@pytest.mark.slow
def test_reused_output_dir_continues_the_taskrun_ids(tmux, tmp_path):
    out = tmp_path / "session"
    pane = tmux.start("wf", out)
    tmux.start_task("wf", TASK)
    tmux.wait("wf", "move_to", 180)
    tmux.keys("wf", "x")  # cancel; the record stays
    _wait_state(tmux, "wf", "0001", 60)
    first, _ = records(out / "tasks" / DIR, timeout=120)  # the final record (ended_at), not a fixed sleep
    assert first["ended_at"] and first["state"] == "cancelled", first
    tmux.keys("wf", "C-q")
    assert not wait_gone({pane} | descendants(pane), 120), "the first rpent-tui did not end after ctrl+q"
    before = (out / "tasks" / DIR / "taskrun.json").read_bytes()  # nothing writes it any more
    tmux.start("wf2", out)  # the README's own `--output-dir logs/tui`, used again
    tmux.start_task("wf2", TASK)
    tmux.wait("wf2", "TaskRun 0002", 60)
    assert (out / "tasks" / "0002_libero_object_t0_s0").is_dir()
    assert (out / "tasks" / DIR / "taskrun.json").read_bytes() == before
    assert "ExceptionGroup" not in tmux.screen("wf2")
    tmux.keys("wf2", "x")
    _wait_state(tmux, "wf2", "0002", 60)
    tmux.keys("wf2", "C-q")


@pytest.mark.slow
def test_code_cell_trajectories_and_flywheel_export(tmux, tmp_path):
    """A code cell with a short timeout against the running TaskRun, then (run cancelled) the
    Trajectories screen with a frame, then a flywheel export of the run, asserted on the files."""
    out = tmp_path / "session"
    tmux.start("wf", out, extra="--record-trajectory --code-timeout-s 4")
    tmux.start_task("wf", TASK)
    tmux.wait("wf", "move_to", 180)
    tmux.keys("wf", "F4")
    tmux.wait("wf", "Cell (Python)", 30)
    tmux.keys("wf", "C-a")  # select the starter cell; typing replaces it
    tmux.keys("wf", "while True: pass", literal=True)
    tmux.keys("wf", "C-r")
    text = tmux.wait("wf", "cell done", 120)
    assert "timeout" in text.lower() or "timed out" in text.lower(), text
    tmux.keys("wf", "F3")
    tmux.wait("wf", "Transcript", 30)
    tmux.keys("wf", "x")
    assert _wait_state(tmux, "wf", "0001", 120) == "cancelled"
    task_dir = out / "tasks" / DIR
    records(task_dir)
    tmux.keys("wf", "F5")
    tmux.wait("wf", "Transcript at this step", 30)
    tmux.wait("wf", "libero_object t0 s0", 30)
    tmux.keys("wf", "s")
    tmux.keys("wf", "j")
    text = tmux.wait("wf", "step ", 30)
    assert "no frame" not in text.split("Transcript at this step")[0]
    tmux.keys("wf", "F6")
    tmux.wait("wf", "Runs to export", 30)
    tmux.keys("wf", "C-a")
    tmux.keys("wf", "C-r")
    deadline = time.monotonic() + 240
    report = out / "exports" / "lerobot_001" / "report.json"
    while not report.is_file() and time.monotonic() < deadline:
        time.sleep(1)
    assert report.is_file(), tmux.screen("wf")
    data = json.loads(report.read_text())
    assert "exclusions" in data or "episodes" in data, data
    assert (task_dir / "taskrun.json").is_file()  # the export never modifies its input
    tmux.keys("wf", "C-q")
