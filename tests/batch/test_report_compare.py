"""Matrix files, record classification, the report and compare on prepared run records."""

import json
import subprocess
import sys

import pytest
from scipy import stats as ss

from rpent.batch.compare import compare_roots
from rpent.batch.lock import RootLock, RootLockedError
from rpent.batch.matrix import Arm, Cell, Matrix, load_matrix_file, parse_index_list
from rpent.batch.records import ResultsRoot
from rpent.batch.report import build_report

from prepared import AFTER, BEFORE, prepare_root, write_attempt


def _cli(*args, cwd=None):
    """The real console entry in a subprocess."""
    return subprocess.run([sys.executable, "-m", "rpent.cli.batch", *args], capture_output=True, text=True,
                          timeout=120, cwd=cwd)


class _Result:
    def __init__(self, returncode, stdout, stderr):
        self.returncode, self.stdout, self.stderr = returncode, stdout, stderr


@pytest.fixture
def cli(capsys):
    """``rpent-batch`` in this process (its ``main``), for the many cheap calls."""
    from rpent.cli.batch import main

    def run(*args):
        capsys.readouterr()
        try:
            main(list(args))
            code = 0
        except SystemExit as exc:
            code = exc.code
        out = capsys.readouterr()
        return _Result(code, out.out, out.err)

    return run


def test_index_lists_and_matrix_file(tmp_path):
    assert parse_index_list("0-2,5,7-8", "--tasks") == [0, 1, 2, 5, 7, 8]
    assert parse_index_list([3, "1-2"], "seeds") == [1, 2, 3]
    with pytest.raises(ValueError, match="--tasks: range '5-2' is empty"):
        parse_index_list("5-2", "--tasks")
    with pytest.raises(ValueError, match="cannot read 'x'"):
        parse_index_list("1,x", "--tasks")
    f = tmp_path / "ab.yaml"
    f.write_text("suites: [libero_goal_swap]\ntasks: 0-1\nseeds: 25-26\nflags: [--no-video]\narms:\n"
                 "  - {name: before, planner: scripted, vla_checkpoint: ckpt/a}\n"
                 "  - {name: after, planner: scripted, flags: [--max-turns, '5'], price_in_usd_per_mtok: 3,"
                 " price_out_usd_per_mtok: 15}\n")
    doc = load_matrix_file(f)
    m = Matrix(arms=doc["arms"], suites=doc["suites"], tasks=doc["tasks"], seeds=doc["seeds"], flags=doc["flags"])
    assert [c.key for c in m.cells("after")][:2] == ["after/libero_goal_swap/t0/s25/r0", "after/libero_goal_swap/t0/s26/r0"]
    assert len(m.cells()) == 8 and m.arm("before").vla_checkpoint == str((tmp_path / "ckpt/a").resolve())
    assert Cell.from_key("after/libero_goal_swap/t1/s26/r0") == Cell("after", "libero_goal_swap", 1, 26, 0)
    assert Matrix.from_dict(json.loads(json.dumps(m.to_dict()))) == m
    f.write_text("suites: [x]\narms:\n  - {name: a, planer: api}\n")
    with pytest.raises(ValueError, match="unknown key"):
        load_matrix_file(f)
    with pytest.raises(ValueError, match="set by rpent-batch itself"):
        Arm(name="a", flags=("--seed", "3"))
    with pytest.raises(ValueError, match="arm names must be unique"):
        Matrix(suites=("s",), tasks=(0,), seeds=(0,), arms=(Arm("a"), Arm("a")))


def test_attempts_are_classified_and_a_cell_counted_once(tmp_path):
    m = Matrix(suites=("libero_object",), tasks=(0, 1), seeds=(0, 1), arms=(Arm(),))
    root = ResultsRoot(tmp_path / "r")
    root.ensure()
    c = m.cells()
    write_attempt(root, c[0], 1, "infra")                      # env server died: retried
    write_attempt(root, c[0], 2, "success")
    write_attempt(root, c[0], 3, "failure")                    # a stray later attempt never counts twice
    write_attempt(root, c[1], 1, "cancelled")                  # runner interrupted: pending, not an error
    write_attempt(root, c[2], 1, "none", ledger=False)         # killed with the runner before writing
    write_attempt(root, c[3], 1, "none", exit_code=-11)        # crashed without a record: infra
    bad = write_attempt(root, Cell("default", "libero_object", 1, 1), 2, "success")
    (bad / "states.json").write_text('{"schema_version": 1, "steps": [{"success": false}]}')  # inconsistent
    states = root.cell_states(c)
    assert [states[x.key].status for x in c] == ["success", "pending", "pending", "infra"]
    assert [a.status for a in states[c[0].key].attempts] == ["infra", "success", "failure"]
    assert states[c[0].key].decided.attempt == 2
    assert [a.status for a in states[c[3].key].attempts] == ["infra", "invalid"]
    assert "no step in states.json records it" in states[c[3].key].attempts[1].reason
    assert states[c[3].key].next_attempt() == 3
    report = build_report(m, states)
    o = report["arms"][0]["overall"]
    assert (o["k"], o["n"], o["infra"], o["pending"], o["planned"]) == (1, 1, 1, 2, 4)
    assert o["infra_attempts"] == 2 and o["rate_infra_as_failure"] == 0.5
    assert report["cells"][0]["decided_attempt"] == 2 and "env_server exited" in report["cells"][0]["infra_errors"][0]


def test_report_cli_and_a_b_compare_on_prepared_records(tmp_path, cli):
    a = prepare_root(tmp_path / "before", BEFORE)
    b = prepare_root(tmp_path / "after", AFTER)
    r = _cli("report", str(a.root))
    assert r.returncode == 0, r.stderr
    assert "| default | scripted | - | 70/100 | 70.0% | [60.4, 78.1] |" in r.stdout
    rep = json.loads((a.root / "report.json").read_text())
    assert rep["arms"][0]["overall"]["wilson_low"] == pytest.approx(
        ss.binomtest(70, 100).proportion_ci(method="wilson").low)
    r = cli("compare", str(a.root), str(b.root), "--fail-on-regression", "--json")
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    o = res["overall"]
    assert (o["a"]["k"], o["a"]["n"], o["b"]["k"], o["b"]["n"], o["diff_points"]) == (70, 100, 73, 100, 3.0)
    assert o["p_fisher_pooled"] == pytest.approx(ss.fisher_exact([[70, 30], [73, 27]]).pvalue)
    assert o["p_cmh"] > 0.05 and o["verdict"] == "no significant difference"
    for row, ka, kb in zip(res["rows"], BEFORE, AFTER):
        assert row["p_fisher"] == pytest.approx(ss.fisher_exact([[ka, 10 - ka], [kb, 10 - kb]]).pvalue)
        assert row["verdict"] == "no significant difference"
    text = cli("compare", str(a.root), str(b.root)).stdout
    assert "**no significant difference**" in text and "+3.0" in text


def test_compare_gates_a_regression(tmp_path, cli):
    a = prepare_root(tmp_path / "good", [10, 9, 10])
    b = prepare_root(tmp_path / "bad", [2, 9, 3])
    res = compare_roots(a.root, b.root, None, None)
    assert [r["verdict"] for r in res["rows"]] == ["worse", "no significant difference", "worse"]
    assert res["overall"]["verdict"] == "worse" and res["regression"]
    r = _cli("compare", str(a.root), str(b.root), "--fail-on-regression")
    assert r.returncode == 1 and "regression: B is significantly worse than A overall" in r.stdout
    assert cli("compare", str(b.root), str(a.root), "--fail-on-regression").returncode == 0
    r = cli("compare", str(a.root))
    assert r.returncode == 2 and "--arms ARM_A ARM_B" in r.stderr
    r = cli("compare", str(tmp_path), str(a.root))
    assert r.returncode == 2 and "not an rpent-batch results root" in r.stderr


def test_second_lock_is_refused_and_released_on_exit(tmp_path):
    first = RootLock(tmp_path / ".batch.lock").acquire()
    with pytest.raises(RootLockedError, match=r"in use by another rpent-batch \(pid \d+ on "):
        RootLock(tmp_path / ".batch.lock").acquire()
    first.release()
    with RootLock(tmp_path / ".batch.lock"):
        pass


def test_bad_batch_flags_fail_before_anything_starts(tmp_path, cli):
    root = tmp_path / "r"
    r = cli("--suites", "libero_object", "--tasks", "0", "--seeds", "0", "--results-root", str(root),
             "--max-episode-stepz", "3")
    assert r.returncode == 2 and "unrecognized arguments: --max-episode-stepz" in r.stderr
    r = cli("--suites", "libero_object", "--tasks", "0", "--seeds", "0", "--results-root", str(root), "--seed", "3")
    assert r.returncode == 2 and "--seed is set by rpent-batch itself" in r.stderr
    r = cli("--suites", "libero_object", "--tasks", "99", "--seeds", "0", "--results-root", str(root))
    assert r.returncode == 2 and "99" in r.stderr
    assert not root.exists()


def test_resume_of_a_complete_root_runs_nothing_and_a_different_matrix_is_refused(tmp_path, cli):
    root = prepare_root(tmp_path / "done", [3, 1], seeds=range(25, 28))
    r = cli("--results-root", str(root.root), "--no-progress")  # the stored matrix is resumed
    assert r.returncode == 0, r.stderr
    assert "| default | scripted | - | 4/6 | 66.7% |" in r.stdout
    ledger = root.read_ledger()
    assert [e for e in ledger if e["event"] == "start" and e["attempt"] > 1] == []  # nothing re-run
    manifest = json.loads(root.manifest_path.read_text())
    assert manifest["invocations"][-1]["exit_code"] == 0 and manifest["invocations"][-1]["attempts_started"] == 0
    assert manifest["matrix"]["tasks"] == [0, 1]
    r = cli("--suites", "libero_goal_swap", "--tasks", "0-2", "--seeds", "25-27", "--results-root", str(root.root))
    assert r.returncode == 2 and "holds a different matrix" in r.stderr


def test_compare_two_arms_of_one_root(tmp_path, cli):
    m = Matrix(suites=("libero_goal_swap",), tasks=(0,), seeds=tuple(range(25, 35)), arms=(Arm("before"), Arm("after")))
    root = ResultsRoot(tmp_path / "ab")
    root.ensure()
    root.matrix_path.write_text(json.dumps(m.to_dict()))
    for c in m.cells():
        write_attempt(root, c, 1, "success" if (c.seed - 25) < (2 if c.arm == "before" else 9) else "failure")
    r = cli("compare", str(root.root), "--arms", "before", "after", "--json")
    res = json.loads(r.stdout)
    assert (res["a"], res["b"]) == ("ab:before", "ab:after")
    assert res["rows"][0]["p_fisher"] == pytest.approx(ss.fisher_exact([[2, 8], [9, 1]]).pvalue)
    assert res["overall"]["verdict"] == "better" and not res["regression"]
    r = cli("compare", str(root.root), "--arms", "before", "nope")
    assert r.returncode == 2 and "has no arm 'nope'; arms: before, after" in r.stderr
