"""rpent-batch report / compare count both the environment predicate's success and the label's
(operator verdicts), with the disagreement count, on run records written the way rpent writes them."""

from __future__ import annotations

import json

import pytest
from scipy import stats as ss

from rpent.batch.compare import compare_roots
from rpent.batch.matrix import Arm, Cell, Matrix
from rpent.batch.records import ResultsRoot, classify_attempt
from rpent.batch.report import build_report, render_markdown
from rpent.run.record import run_tag

from prepared import write_attempt

SUITE = "libero_object"
REJECT = {"answer": "failure", "notes": "operator rejects"}
ACCEPT = {"answer": "success", "notes": "looks placed"}


def _judge(run_dir, cell, **fields):
    """Give an attempt's transcript the run layer's outcome fields (label, verdicts, disagreement)."""
    path = run_dir / f"transcript_{run_tag(cell.suite, cell.task, cell.seed)}.json"
    doc = json.loads(path.read_text())
    doc.update(fields)
    path.write_text(json.dumps(doc))


def _root(path, kinds: list[str]) -> ResultsRoot:
    """One arm, task 0, one seed per entry of ``kinds``: success | failure | rejected | accepted_unsolved."""
    m = Matrix(suites=(SUITE,), tasks=(0,), seeds=tuple(range(len(kinds))), arms=(Arm(name="default"),))
    root = ResultsRoot(path)
    root.ensure()
    root.matrix_path.write_text(json.dumps(m.to_dict()))
    for seed, kind in enumerate(kinds):
        cell = Cell("default", SUITE, 0, seed)
        env_ok = kind in ("success", "rejected")
        rd = write_attempt(root, cell, 1, "success" if env_ok else "failure")
        if kind == "rejected":
            _judge(rd, cell, label="failed", verdict_required=True, operator_verdict=REJECT,
                   disagreement="operator said failure; environment predicate: satisfied")
        elif kind == "accepted_unsolved":
            _judge(rd, cell, label="succeeded", verdict_required=True, operator_verdict=ACCEPT,
                   disagreement="operator said success; environment predicate: not satisfied")
        else:
            _judge(rd, cell, label="succeeded" if env_ok else "failed")
    return root


def test_report_counts_predicate_and_label_successes_and_disagreements(tmp_path):
    root = _root(tmp_path / "r", ["success", "rejected", "accepted_unsolved", "failure"])
    m = Matrix.from_dict(json.loads(root.matrix_path.read_text()))
    rep = build_report(m, root.cell_states(m.cells()))
    o = rep["arms"][0]["overall"]
    assert (o["k"], o["n"]) == (2, 4)  # environment predicate: success + rejected
    assert (o["label_k"], o["label_n"]) == (2, 4)  # label: success + operator-accepted
    assert (o["verdicts"], o["disagreements"]) == (2, 2)
    ci = ss.binomtest(2, 4).proportion_ci(method="wilson")
    assert (o["label_wilson_low"], o["label_wilson_high"]) == pytest.approx((ci.low, ci.high))
    rejected = next(c for c in rep["cells"] if c["verdict"] == "failure")
    assert rejected["status"] == "success" and rejected["label"] == "failed" and rejected["environment_success"]
    accepted = next(c for c in rep["cells"] if c["verdict"] == "success")
    assert accepted["status"] == "failure" and accepted["label"] == "succeeded"
    md = render_markdown(rep)
    assert "## environment predicate and label (operator verdicts)" in md
    assert "| default | 2/4 | 50.0% | 2/4 | 50.0% |" in md and "| 2 | 2 |" in md
    assert "operator said failure; environment predicate: satisfied" in md


def test_report_without_verdicts_shows_the_predicate_alone(tmp_path):
    root = _root(tmp_path / "r", ["success", "failure"])
    m = Matrix.from_dict(json.loads(root.matrix_path.read_text()))
    rep = build_report(m, root.cell_states(m.cells()))
    o = rep["arms"][0]["overall"]
    assert (o["k"], o["label_k"], o["verdicts"], o["disagreements"]) == (1, 1, 0, 0)
    assert "operator verdicts" not in render_markdown(rep)


def test_compare_says_which_success_it_compared(tmp_path, capsys):
    a = _root(tmp_path / "a", ["success", "success", "failure", "failure"])
    b = _root(tmp_path / "b", ["rejected", "rejected", "success", "failure"])
    env = compare_roots(a.root, b.root, None, None)
    assert env["basis"] == "environment" and (env["overall"]["a"]["k"], env["overall"]["b"]["k"]) == (2, 3)
    assert env["disagreements"] == {"a": 0, "b": 2}
    assert any("B has 2 deciding attempt(s) whose operator verdict disagrees" in w for w in env["warnings"])
    lab = compare_roots(a.root, b.root, None, None, basis="label")
    assert lab["basis"] == "label" and (lab["overall"]["a"]["k"], lab["overall"]["b"]["k"]) == (2, 1)
    from rpent.cli.batch import main

    with pytest.raises(SystemExit) as ex:
        main(["compare", str(a.root), str(b.root), "--by", "label"])
    assert ex.value.code == 0
    out = capsys.readouterr().out
    assert "compared: label success (operator verdicts where given) (--by label)" in out
    assert "operator verdicts A 0, B 2; disagreements A 0, B 2" in out
    with pytest.raises(SystemExit):
        main(["compare", str(a.root), str(b.root)])
    assert "compared: environment predicate success (--by environment)" in capsys.readouterr().out


def test_a_run_cancelled_before_the_environment_was_read_is_interrupted_not_infra(tmp_path):
    cell = Cell("default", SUITE, 0, 0)
    rd = tmp_path / "attempt-1"
    rd.mkdir()
    (rd / f"transcript_{run_tag(SUITE, 0, 0)}.json").write_text(json.dumps({
        "suite": SUITE, "task": 0, "seed": 0, "elapsed_s": 0.6, "env_steps": 0, "stop_reason": "cancelled",
        "stopped_during": "starting env_server", "finish": None, "error": "run cancelled (received SIGTERM)",
        "environment_success": None, "label": "cancelled",
        "environment_success_unknown": "the environment was never read: the run stopped while starting env_server",
        "stats": {}}))
    res = classify_attempt(cell, 1, rd, {"exit_code": 2, "wall_s": 1.0})
    assert res.status == "interrupted" and res.label == "cancelled" and res.environment_success is None


def test_a_code_file_policy_that_raised_is_a_failure_of_its_cell_not_infra(tmp_path):
    """A --code-file policy's own exception (``error_kind`` policy_code) decides its cell as a
    failure, as its code would on every retry; a planner that crashed is still an infra error."""
    m = Matrix(suites=(SUITE,), tasks=(0,), seeds=(0, 1), arms=(Arm(name="code"),))
    root = ResultsRoot(tmp_path / "r")
    root.ensure()
    root.matrix_path.write_text(json.dumps(m.to_dict()))
    raised, crashed = Cell("code", SUITE, 0, 0), Cell("code", SUITE, 0, 1)
    common = {"finish": None, "stop_reason": "error", "label": "error", "policy_mode": "code"}
    _judge(write_attempt(root, raised, 1, "failure", exit_code=2), raised, **common,
           error="policy code raised KeyError: 'no grasp pose'", error_kind="policy_code")
    _judge(write_attempt(root, crashed, 1, "failure", exit_code=2), crashed, **common,
           error="planner crashed: RuntimeError: lost the SDK", error_kind=None)
    states = root.cell_states(m.cells())
    res = states[raised.key].attempts[0]
    assert (res.status, res.reason, res.label) == ("failure", "policy code raised KeyError: 'no grasp pose'", "error")
    assert states[crashed.key].attempts[0].status == "infra"
    o = build_report(m, states)["arms"][0]["overall"]
    assert (o["k"], o["n"], o["infra"]) == (0, 1, 1)
