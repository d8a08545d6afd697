"""The learning loop offline: ``rpent --explore`` with the api planner (official Anthropic SDK)
driven by the local provider endpoint. The scripted conversation fails its first attempt
(finish is refused, the attempt is archived through ``reset``), then replays the scripted
planner's solution of libero_object task 0 seed 0, writes notes and a draft leaf; the
exploration merges the inbox into the corpus, and a following evaluation run's prompt (seen by
the endpoint) holds the merged leaf. Real env servers and MuJoCo; ~1.5 min on an idle machine."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from rpent.planners.provider_endpoint import ProviderEndpoint, Script, ToolCall, Turn

pytestmark = pytest.mark.slow

TASK = ["--suite", "libero_object", "--task", "0", "--seed", "0", "--no-video"]
CELL = "object_t0_s0"
LEAF = ("---\nscope: global\nkind: strategy\ntitle: Basket drops\napplies_when: the target is a basket\n"
        "confidence: single-shot\nevidence:\n  cells: [object_t0_s0]\n  attempts: 2\n---\n"
        "Carry high and release above the basket centre; EXPLORE-MARKER-4412.\n")


def _rpent(args, env=None):
    return subprocess.run([sys.executable, "-m", "rpent.cli.main", *TASK, *args], capture_output=True, text=True,
                          timeout=900, env=dict(os.environ, MUJOCO_GL="egl", **(env or {})))


@pytest.fixture(scope="module")
def solution(tmp_path_factory):
    out = tmp_path_factory.mktemp("scripted") / "run"
    p = _rpent(["--planner", "scripted", "--output-dir", str(out)])
    assert p.returncode == 0, p.stderr[-2000:]
    tr = json.loads((out / f"transcript_{CELL}.json").read_text())
    return [(b["name"], b["input"]) for m in tr["messages"] if m["role"] == "assistant" for b in m["content"]
            if b["type"] == "tool_use"]


def test_explore_fails_once_then_solves_merges_and_the_next_run_reads_it(solution, tmp_path):
    *steps, (fin_name, fin_args) = solution
    assert fin_name == "finish"
    turns = [Turn(tool_calls=(ToolCall("write_memory_draft", {"name": "wip/notes", "content": "attempt 1: stay high"}),)),
             Turn(tool_calls=(ToolCall("move_to", {"xyz": [-0.15, 0.0, 0.3]}),)),
             Turn(tool_calls=(ToolCall("finish", {"status": "failure", "summary": "gave up"}),)),  # refused
             Turn(tool_calls=(ToolCall("reset", {"reason": "never went down", "changed_lever": "descend"}),))]
    turns += [Turn(tool_calls=(ToolCall(name, args),)) for name, args in steps]
    turns += [Turn(tool_calls=(ToolCall("write_memory_draft", {"name": "new_strategy_basket_drops_draft",
                                                               "content": LEAF}),)),
              Turn(tool_calls=(ToolCall(fin_name, fin_args),))]
    memory, out = tmp_path / "memory", tmp_path / "explore"
    with ProviderEndpoint(Script(turns)) as ep:
        p = _rpent(["--planner", "api", "--model", "anthropic:claude-sonnet-4-5", "--explore", "--explore-sessions",
                    "2", "--explore-attempts-per-session", "2", "--memory-dir", str(memory), "--output-dir", str(out)],
                   {"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": ep.base_url})
        first_system = json.dumps(ep.model_requests()[0].body.get("system"))
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert "EXPLORATION run" in first_system and "reset(reason, changed_lever)" in first_system
    doc = json.loads((out / "explore.json").read_text())
    assert doc["solved"] is True and len(doc["sessions"]) == 1 and doc["error"] is None
    assert doc["status"] == "finished" and doc["current"] is None
    # the TUI's Explore screen reads this exploration with its reader
    from rpent_tui.services.explore import read_exploration

    view = read_exploration(out)
    assert [(s.session, s.attempts, s.outcome) for s in view.sessions] == [(1, 2, "solved")]
    assert [(a.attempt, a.session, a.reason, a.changed_lever) for a in view.attempts] == [
        (1, 1, "never went down", "descend")]
    assert doc["attempts_archived"] == ["attempts/attempt_1_failed.json"]
    att = json.loads((out / "attempts" / "attempt_1_failed.json").read_text())
    assert att["reason"] == "never went down" and att["changed_lever_vs_attempt1"] == "descend"
    assert [c["tool"] for c in att["calls"]] == ["move_to", "finish"] and att["calls"][1]["error"].startswith("finish refused")
    tr = json.loads((out / "sessions" / "session_001" / f"transcript_{CELL}.json").read_text())
    assert tr["environment_success"] is True
    # the recipe covers only the solving attempt (after the reset)
    recipe = [json.loads(x) for x in (out / f"{CELL}_recipe.jsonl").read_text().splitlines()]
    assert recipe[0] != {"action": "move_to", "xyz": [-0.15, 0.0, 0.3]} and all(c["action"] != "reset" for c in recipe)
    prompts = [c["prompt"] for c in recipe if c["action"] == "segment"]
    assert len(prompts) >= 2 and all(c["artifact"].startswith("segment_") for c in recipe if c["action"] == "segment")
    # an api planner's solved session makes a flash plan too (anchors from the recipe's segment lines)
    from rpent.flash import load_flash
    from rpent.flash.generate import generate

    session = out / "sessions" / "session_001"
    generate(session, session / f"{CELL}_recipe.jsonl", tmp_path / "flash")
    plan, anchors = load_flash(tmp_path / "flash", CELL)
    assert [a["prompt"] for a in anchors["anchors"]] == list(dict.fromkeys(prompts))
    assert plan["source"]["planner"] == "api"
    corpus = memory / "libero"
    assert doc["merged"]["created"] == ["global/basket_drops.md"]
    assert (corpus / "task-specific" / f"{CELL}.json").is_file()
    assert (corpus / "task-specific" / f"{CELL}_recipe.jsonl").is_file()
    assert (corpus / "_internal" / "merged" / CELL / "wip" / "notes.md").read_text() == "attempt 1: stay high\n"
    assert "[Basket drops](global/basket_drops.md)" in (corpus / "MEMORY.md").read_text()

    # a following evaluation run reads the merged memory
    with ProviderEndpoint(Script([Turn(tool_calls=(ToolCall("finish", {"status": "failure", "summary": "x"}),))])) as ep:
        p = _rpent(["--planner", "api", "--model", "anthropic:claude-sonnet-4-5", "--memory-dir", str(memory),
                    "--output-dir", str(tmp_path / "eval")], {"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": ep.base_url})
        system = json.dumps(ep.model_requests()[0].body.get("system"))
    assert p.returncode == 1, p.stderr[-2000:]
    assert "EXPLORE-MARKER-4412" in system and f"task-specific/{CELL}_recipe.jsonl" in system
    tr = json.loads((tmp_path / "eval" / f"transcript_{CELL}.json").read_text())
    assert "global/basket_drops.md" in [f["path"] for f in tr["memory"]["files_read"]]
