"""Exploration prompt and hand-off message (no simulator)."""

from __future__ import annotations

import json

from rpent.explore.loop import explore_prompt, handoff_message
from rpent.robots.libero import prompts


def test_explore_prompt_is_its_own_file_with_the_rules():
    text = explore_prompt("object_t0_s0", 3)
    assert text != prompts.system_prompt()
    assert "up to 3 attempt(s)" in text and "finish is refused" in text and "Never teleport" in text
    assert "Only AFTER the environment reports success" in text and "cells: [object_t0_s0]" in text
    assert "unlimited attempt(s)" in explore_prompt("object_t0_s0", 0)


def test_handoff_lists_archived_attempts_sorted_with_their_levers(tmp_path):
    (tmp_path / "attempts").mkdir()
    for n, lever in ((2, "grasp lower"), (1, "go slower")):
        (tmp_path / "attempts" / f"attempt_{n}_failed.json").write_text(json.dumps(
            {"reason": f"reason {n}", f"changed_lever_vs_attempt{n}": lever}))
    msg = handoff_message(2, 3, tmp_path, ["attempts/attempt_2_failed.json", "attempts/attempt_1_failed.json"],
                          "notes here", "Task: pick")
    assert msg.startswith("You are agent 2 of up to 3 on this cell. 2 attempt(s) by earlier agents")
    assert "attempts/attempt_1_failed.json, attempts/attempt_2_failed.json" in msg
    assert "notes here" in msg and "A fresh toolkit has already restored a clean scene" in msg
    assert msg.index("reason 1; next lever: go slower") < msg.index("reason 2; next lever: grasp lower")
