"""A run whose env server died before its success predicate could be read records
``environment_success: null`` with the reason (rpent.run.runner): the batch runner reads that as an
infrastructure failure (retried), not as a task failure, and a null without a reason stays invalid."""

from __future__ import annotations

import json

from rpent.batch.matrix import Cell
from rpent.batch.records import classify_attempt
from rpent.run.record import run_tag

CELL = Cell("default", "libero_object", 0, 0)
REASON = ("could not read the environment's success at the end of the run (RpcTransportError: cannot connect); "
          "the env last reported success=False after 40 env steps")


def _write(run_dir, **overrides):
    run_dir.mkdir(parents=True)
    doc = {"suite": CELL.suite, "task": CELL.task, "seed": CELL.seed, "elapsed_s": 3.0, "env_steps": 40,
           "stop_reason": "finished", "finish": None, "error": REASON, "environment_success": None,
           "environment_success_unknown": REASON, "stats": {}, **overrides}
    (run_dir / f"transcript_{run_tag(CELL.suite, CELL.task, CELL.seed)}.json").write_text(json.dumps(doc))
    (run_dir / "states.json").write_text(json.dumps({"steps": [{"step_idx": 0, "success": False}]}))


def test_unknown_success_with_its_reason_is_an_infra_failure(tmp_path):
    _write(tmp_path / "a1")
    res = classify_attempt(CELL, 1, tmp_path / "a1", {"exit_code": 2, "wall_s": 4.0})
    assert res.status == "infra" and res.reason == REASON


def test_unknown_success_without_a_reason_is_invalid(tmp_path):
    _write(tmp_path / "a1", error=None, environment_success_unknown=None)
    res = classify_attempt(CELL, 1, tmp_path / "a1", {"exit_code": 2, "wall_s": 4.0})
    assert res.status == "invalid" and "no boolean environment_success" in res.reason
