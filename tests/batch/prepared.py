"""Prepared results roots: run records written the way ``rpent`` writes them (a transcript and a
``states.json`` per attempt, the ledger), with chosen outcomes, for report and compare tests.

Usable as a script for the README's A/B example::

    python tests/batch/prepared.py OUT_DIR     # OUT_DIR/before (70/100) and OUT_DIR/after (73/100)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from rpent.batch.matrix import Arm, Cell, Matrix
from rpent.batch.records import ResultsRoot
from rpent.run.record import run_tag


def write_attempt(root: ResultsRoot, cell: Cell, attempt: int, outcome: str, *, exit_code: int | None = None,
                  ledger: bool = True, env_steps: int = 200, elapsed_s: float = 20.0) -> Path:
    """Write one attempt's run record. ``outcome``: success | failure | infra | cancelled | none
    (no transcript)."""
    run_dir = root.run_dir(cell, attempt)
    run_dir.mkdir(parents=True)
    success = outcome == "success"
    if outcome != "none":
        error = {"infra": "scripted planner failed: RpcTransportError: cannot connect (env_server exited with code -9 "
                          "during the run; see env_server.log)", "cancelled": "run cancelled (interrupted)"}.get(outcome)
        stop = {"infra": "error", "cancelled": "cancelled"}.get(outcome, "finished")
        doc = {"suite": cell.suite, "task": cell.task, "seed": cell.seed, "task_language": "x", "planner": "scripted",
               "model": None, "policy_mode": "tools", "elapsed_s": elapsed_s,
               "finish": {"status": "success" if success else "failure", "summary": ""}, "error": error,
               "stop_reason": stop, "environment_success": success, "env_steps": env_steps,
               "stats": {"turns_used": 5, "tool_calls": 9, "total_input_tokens": 1000, "total_output_tokens": 100,
                         "cache_read_tokens": 0, "cache_write_tokens": 0, "requests": 5, "elapsed_s": elapsed_s,
                         "cost_usd": None}, "messages": []}
        (run_dir / f"transcript_{run_tag(cell.suite, cell.task, cell.seed)}.json").write_text(json.dumps(doc))
        steps = [{"step_idx": 0, "success": False}, {"step_idx": 1, "success": success}]
        (run_dir / "states.json").write_text(json.dumps({"schema_version": 1, "steps": steps}))
    if ledger:
        code = exit_code if exit_code is not None else {"success": 0, "failure": 1}.get(outcome, 2)
        root.append_ledger({"event": "start", "key": cell.key, "attempt": attempt, "run_dir": str(run_dir)})
        if outcome != "cancelled":
            root.append_ledger({"event": "end", "key": cell.key, "attempt": attempt, "exit_code": code,
                                "infra_error": None, "wall_s": elapsed_s + 5})
    return run_dir


def prepare_root(path: Path, successes_per_task: list[int], *, arm: str = "default", suite: str = "libero_goal_swap",
                 seeds: range = range(25, 35)) -> ResultsRoot:
    """A results root of one arm with ``successes_per_task[t]`` successes among the seeds of task t."""
    tasks = tuple(range(len(successes_per_task)))
    m = Matrix(suites=(suite,), tasks=tasks, seeds=tuple(seeds), arms=(Arm(name=arm),))
    root = ResultsRoot(path)
    root.ensure()
    root.matrix_path.write_text(json.dumps(m.to_dict()))
    for t, k in zip(tasks, successes_per_task):
        for i, s in enumerate(seeds):
            write_attempt(root, Cell(arm, suite, t, s), 1, "success" if i < k else "failure")
    return root


#: the product documents' comparison: 70/100 before, 73/100 after (per-task split chosen here)
BEFORE = [9, 8, 7, 7, 6, 8, 5, 7, 6, 7]
AFTER = [9, 8, 8, 7, 7, 8, 6, 7, 6, 7]

if __name__ == "__main__":
    out = Path(sys.argv[1])
    prepare_root(out / "before", BEFORE)
    prepare_root(out / "after", AFTER)
    print(f"prepared {out / 'before'} ({sum(BEFORE)}/100) and {out / 'after'} ({sum(AFTER)}/100)")
