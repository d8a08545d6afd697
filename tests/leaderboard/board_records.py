"""Prepared results roots for the leaderboard tests: run records written the way ``rpent`` writes them
(a transcript with label and operator verdict fields, ``states.json``, an ``episode.mp4`` placeholder,
the ledger), with chosen outcomes; and a flash arm whose task without a plan is decided without a run.

Usable as a script (the Chromium test and the docs' screenshot use it)::

    python tests/leaderboard/board_records.py OUT_DIR      # OUT_DIR/lb: arms scripted, flash, llm
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from rpent.batch.matrix import Arm, Cell, Matrix
from rpent.batch.records import ResultsRoot
from rpent.run.record import run_tag

SUITES = ("libero_object_task", "libero_goal_swap")


def write_run(root: ResultsRoot, cell: Cell, attempt: int, success: bool, *, wall_s: float = 30.0,
              verdict: str | None = None, tokens: tuple[int, int] | None = None, video: bool = True) -> Path:
    """One attempt's run record and its ledger lines (``verdict``: the operator's final answer, which
    makes the label follow it as ``--require-operator-verdict`` does)."""
    run_dir = root.run_dir(cell, attempt)
    run_dir.mkdir(parents=True)
    if verdict is not None:
        label = {"success": "succeeded", "failure": "failed", "abort": "aborted"}[verdict]
    else:
        label = "succeeded" if success else "failed"
    doc = {"suite": cell.suite, "task": cell.task, "seed": cell.seed, "task_language": "x", "planner": "scripted",
           "model": None, "policy_mode": "tools", "elapsed_s": wall_s - 2,
           "finish": {"status": "success" if success else "failure", "summary": ""}, "error": None,
           "stop_reason": "finished", "environment_success": success, "env_steps": 150, "label": label,
           "operator_verdict": {"answer": verdict} if verdict else None, "verdict_required": verdict is not None,
           "stats": {"turns_used": 5, "tool_calls": 9,
                     "total_input_tokens": tokens[0] if tokens else 0, "total_output_tokens": tokens[1] if tokens else 0,
                     "cache_read_tokens": 0, "cache_write_tokens": 0}, "messages": []}
    (run_dir / f"transcript_{run_tag(cell.suite, cell.task, cell.seed)}.json").write_text(json.dumps(doc))
    steps = [{"step_idx": 0, "success": False}, {"step_idx": 1, "success": success}]
    (run_dir / "states.json").write_text(json.dumps({"schema_version": 1, "steps": steps}))
    if video:
        (run_dir / "episode.mp4").write_bytes(b"\x00\x00\x00\x18ftypmp42")  # a link target, not a playable video
    root.append_ledger({"event": "start", "key": cell.key, "attempt": attempt, "run_dir": str(run_dir)})
    root.append_ledger({"event": "end", "key": cell.key, "attempt": attempt, "exit_code": 0 if success else 1,
                        "infra_error": None, "wall_s": wall_s, "where": "hostA",
                        "status": "success" if success else "failure",
                        "node_load": {"host": "hostA", "load": [1.5, 1.2, 1.0], "cpus": 2}})
    return run_dir


def prepare_board_root(path: Path) -> ResultsRoot:
    """A results root with three arms over 2 suites x 2 tasks x seeds 0-3:

    * ``scripted``: all 16 cells; fails only libero_goal_swap task 1 (every seed);
    * ``flash`` (seeds 1-3, plans from ``scripted``): libero_goal_swap task 1 has no plan, so its 3
      cells are decided without a run; one replay fails (libero_object_task task 0 seed 2);
    * ``llm`` (optional arm): succeeds 10/16, with operator verdicts that disagree on 2 cells, tokens.
    """
    arms = (Arm(name="scripted", note="reads simulator state and oracle segmentation"),
            Arm(name="flash", planner="flash", seeds=(1, 2, 3), flash_from="scripted"),
            Arm(name="llm", planner="api", model="anthropic:claude-x", optional=True,
                price_in_usd_per_mtok=3.0, price_out_usd_per_mtok=15.0))
    m = Matrix(suites=SUITES, tasks=(0, 1), seeds=(0, 1, 2, 3), arms=arms)
    root = ResultsRoot(path)
    root.ensure()
    root.matrix_path.write_text(json.dumps(m.to_dict()))
    for c in m.cells("scripted"):
        write_run(root, c, 1, not (c.suite == "libero_goal_swap" and c.task == 1), wall_s=40.0 + c.seed)
    for c in m.cells("flash"):
        if c.suite == "libero_goal_swap" and c.task == 1:
            root.append_ledger({"event": "start", "key": c.key, "attempt": 1, "not_run": True})
            root.write_not_run(c, 1, "flash_plan_missing", "the source run scripted/libero_goal_swap/t1/s0/r0 was "
                               "not solved (finished)", None)
            root.append_ledger({"event": "end", "key": c.key, "attempt": 1, "status": "failure", "not_run": True})
        else:
            write_run(root, c, 1, not (c.suite == "libero_object_task" and c.task == 0 and c.seed == 2),
                      wall_s=12.0 + c.seed)
    for i, c in enumerate(m.cells("llm")):
        success = i % 8 not in (1, 4, 6)
        verdict = None
        if i in (0, 1):
            verdict = "failure" if i == 0 else "success"   # cell 0: env success, operator said failure; cell 1: the reverse
        write_run(root, c, 1, success, wall_s=300.0 + 10 * i, verdict=verdict, tokens=(200_000, 30_000))
    return root


if __name__ == "__main__":
    out = Path(sys.argv[1])
    r = prepare_board_root(out / "lb")
    print(f"prepared {r.root}")
