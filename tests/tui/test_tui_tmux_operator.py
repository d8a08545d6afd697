"""An operator's whole loop in the real ``rpent-tui`` in tmux, at 80x24 and at 100x30, keyboard only:
type the task right after start (no ``i``), judge the verdict with one camera zoomed to the window,
answer it, then export the session's TaskRun from F6 with the v2 rules and read the dataset back with
LeRobot's own reader. The TaskRun is real: the scripted planner on LIBERO libero_object task 0 seed 0
with a fresh env server, recorded with ``--record-trajectory --record-observations all``.

Slow (``pytest -m slow tests/tui/test_tui_tmux_operator.py``): a LIBERO episode per terminal size.
"""

from __future__ import annotations

import json
import re
import shutil
import time

import pytest

from tui_tmux import Tmux, descendants, records, wait_gone

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux (apt-get install tmux)")

DIR = "0001_libero_object_t0_s0"


@pytest.fixture
def tmux(request):
    import hashlib

    server = Tmux("rpent-op-" + hashlib.sha1(request.node.nodeid.encode()).hexdigest()[:10])  # one per parameter
    server.kill()
    yield server
    server.kill()


def _until(tmux, session, predicate, timeout, what):
    deadline = time.monotonic() + timeout
    text = ""
    while time.monotonic() < deadline:
        text = tmux.screen(session)
        if predicate(text):
            return text
        time.sleep(0.3)
    raise AssertionError(f"{what} not on screen after {timeout}s; screen:\n{text}")


@pytest.mark.slow
@pytest.mark.timeout(1500)
@pytest.mark.parametrize("size", [(80, 24), (100, 30)], ids=["80x24", "100x30"])
def test_task_typed_at_once_zoomed_verdict_then_v2_export_read_back(tmux, tmp_path, size):
    out = tmp_path / "session"
    export = tmp_path / "dataset"
    pane = tmux.start("op", out, size=size, extra="--record-trajectory --record-observations all "
                                                  "--require-operator-verdict")
    tmux.wait("op", "session ready", 120)
    # typed at once, as the README shows it: the / opens the input line, nothing acts as a screen key
    tmux.keys("op", "/rpent-task libero_object 0 0", literal=True)
    _until(tmux, "op", lambda t: "/rpent-task libero_object 0 0" in t, 60, "the typed command")
    tmux.keys("op", "Enter")
    tmux.wait("op", "Operator verdict requested", 600)
    text = tmux.wait("op", "wrist camera", 60)
    assert "agentview camera" in text
    tmux.keys("op", "z")  # the main camera alone at the full window size
    zoomed = _until(tmux, "op", lambda t: "wrist camera" not in t, 30, "the zoomed main camera")
    assert "agentview camera" in zoomed and "frame " in zoomed
    tmux.keys("op", "s")
    _until(tmux, "op", lambda t: "TaskRun 0001 succeeded" in t, 300, "the TaskRun's end")
    taskrun, transcript = records(out / "tasks" / DIR, timeout=120)
    assert taskrun["state"] == "succeeded" and transcript["operator_verdict"]["answer"] == "success"
    assert transcript["label"] == "succeeded"

    # F6: the run picked by space (marked x), v2 preselected (the session records every observation)
    tmux.keys("op", "F6")
    listed = _until(tmux, "op", lambda t: "libero_object t0 s0" in t, 60, "the run list")
    assert "▐ ▌" in listed and "0 of 1 picked" in listed
    tmux.keys("op", "Space")
    _until(tmux, "op", lambda t: "▐x▌" in t and "1 of 1 picked" in t, 30, "the picked mark")
    assert "v2:" in tmux.screen("op")
    tmux.keys("op", "Tab", "Tab")  # past the rules to the output directory (focus selects its text)
    time.sleep(0.5)
    tmux.keys("op", str(export), literal=True)
    time.sleep(0.5)
    tmux.keys("op", "C-r")
    deadline = time.monotonic() + 600
    while not (export / "report.json").is_file() and time.monotonic() < deadline:
        time.sleep(1)
    report = json.loads((export / "report.json").read_text())
    assert report["rules"] == "v2" and report["counts"]["episodes"] == 1, report.get("exclusion_counts")
    _until(tmux, "op", lambda t: re.search(r"succeeded · pid \d+", t), 120, "the export's state line")
    if size[1] >= 30:  # the report table has room for its rows
        _until(tmux, "op", lambda t: "✓ " in t, 60, "the report's exported row")

    from rpent.flywheel.lerobot_compat import import_lerobot_dataset

    dataset = import_lerobot_dataset()("rpent/tui", root=export / "train")
    assert dataset.num_episodes == 1 and dataset.num_frames == report["counts"]["frames"] > 0
    frame = dataset[0]
    assert "action" in frame or "actions" in frame

    children = descendants(pane)
    tmux.keys("op", "C-q")
    assert not wait_gone({pane, *children}, 120), "processes left after ctrl+q"
