"""Progress of a long batch: the runner's progress.json (cells done/total, each arm's k/N with its
Wilson interval, ETA, per-node load) and ``rpent-batch status ROOT`` answering from the files while
a runner holds the root (and after)."""

import json
import subprocess
import sys

import pytest
from scipy.stats import binomtest

from rpent.batch.lock import RootLock
from rpent.batch.matrix import Arm, Cell, Matrix
from rpent.batch.progress import PROGRESS_FILE, Progress, format_duration
from rpent.batch.records import ResultsRoot
from rpent.run.record import run_tag


def _decided(root: ResultsRoot, cell: Cell, success: bool, wall: float, host: str) -> None:
    run_dir = root.run_dir(cell, 1)
    run_dir.mkdir(parents=True)
    (run_dir / f"transcript_{run_tag(cell.suite, cell.task, cell.seed)}.json").write_text(json.dumps(
        {"suite": cell.suite, "task": cell.task, "seed": cell.seed, "elapsed_s": wall, "error": None,
         "stop_reason": "finished", "environment_success": success, "env_steps": 10, "stats": {}, "messages": []}))
    (run_dir / "states.json").write_text(json.dumps({"steps": [{"step_idx": 0, "success": success}]}))
    root.append_ledger({"event": "start", "key": cell.key, "attempt": 1, "run_dir": str(run_dir)})
    root.append_ledger({"event": "end", "key": cell.key, "attempt": 1, "exit_code": 0 if success else 1,
                        "wall_s": wall, "where": host, "status": "success" if success else "failure",
                        "node_load": {"host": host, "load": [1.0, 1.0, 1.0], "cpus": 2}})


def _status(root, *extra):
    return subprocess.run([sys.executable, "-m", "rpent.cli.batch", "status", str(root), *extra],
                          capture_output=True, text=True, timeout=120)


def test_progress_file_and_status_while_a_runner_holds_the_root(tmp_path):
    m = Matrix(suites=("libero_object",), tasks=(0, 1), seeds=(0, 1, 2),
               arms=(Arm("a"), Arm("f", planner="flash", seeds=(1, 2), flash_from="a")))
    root = ResultsRoot(tmp_path / "r")
    root.ensure()
    root.matrix_path.write_text(json.dumps(m.to_dict()))
    cells = m.cells("a")
    for c, ok in zip(cells[:4], (True, True, False, True)):
        _decided(root, c, ok, 30.0, "node1")
    # an attempt whose record says success but whose "end" line the killed runner never wrote
    _decided(root, cells[4], True, 31.0, "node1")
    lines = root.ledger_path.read_text().splitlines()
    root.ledger_path.write_text("\n".join(lines[:-1]) + "\n")
    root.append_ledger({"event": "start", "key": cells[5].key, "attempt": 1, "run_dir": str(root.run_dir(cells[5], 1))})
    with RootLock(root.lock_path):
        counts = {"a": [4, 5, 0], "f": [0, 0, 0]}
        p = Progress(root.root, {"a": 6, "f": 4}, counts, decided=5, to_run=5, slots=2, bar=False)
        p.attempt_started(cells[5].key, 1)
        p.attempt_ended("x", 40.0, {"host": "node2", "load": [3.5, 2.0, 1.0], "cpus": 16}, "node2 10.0.0.2")
        p.attempt_ended("y", 20.0, None, "node1 10.0.0.1")
        p.advance()
        p.refresh()
        doc = json.loads((root.root / PROGRESS_FILE).read_text())
        assert doc["done"] == 6 and doc["total"] == 10 and doc["finished_here"] == 1
        a = next(x for x in doc["arms"] if x["arm"] == "a")
        ci = binomtest(4, 5).proportion_ci(method="wilson")
        assert (a["k"], a["n"], a["pending"]) == (4, 5, 1)
        assert a["wilson_low"] == pytest.approx(ci.low, abs=1e-6) and a["wilson_high"] == pytest.approx(ci.high, abs=1e-6)
        assert doc["eta_s"] is not None and doc["eta_s"] >= 0 and doc["running"][0]["key"] == cells[5].key
        nodes = {n["node"]: n for n in doc["nodes"]}
        assert nodes["node2"]["load"] == [3.5, 2.0, 1.0] and nodes["node2"]["cpus"] == 16
        assert nodes["node1"]["attempts"] == 1 and nodes["node1"]["median_wall_s"] == 20.0
        assert "a 4/5 80.0% [" in p.summary() and "ETA" in p.summary()

        st = _status(root.root)
        assert st.returncode == 0, st.stderr
        out = st.stdout
        assert "runner: pid" in out and f"running: {cells[5].key} attempt 1" in out
        # 3/4 by the ledger's "end" lines; the success whose "end" line is missing is read from its record
        assert "  a: 4/5 = 80.0% [" in out and "1 running" in out
        js = json.loads(_status(root.root, "--json").stdout)
        arm_a = next(x for x in js["arms"] if x["arm"] == "a")
        assert (arm_a["k"], arm_a["n"], arm_a["running"], arm_a["pending"]) == (4, 5, 1, 1)
        assert js["counts"] == {"success": 4, "failure": 1, "infra": 0, "running": 1, "pending": 4}
        assert "node node2: load 3.5/2.0/1.0 (16 CPUs)" in out and "ETA" in out
    st = _status(root.root)
    assert "runner: none" in st.stdout and "running:" not in st.stdout


def test_status_agrees_with_report_after_records_are_edited(tmp_path):
    """``status`` re-reads the run records as ``report`` does: a record edited or broken after its
    ledger "end" line was written counts as the record says, and status names the cell whose
    record disagrees with the ledger."""
    m = Matrix(suites=("libero_object",), tasks=(0,), seeds=(0, 1, 2, 3), arms=(Arm("a"),))
    root = ResultsRoot(tmp_path / "r")
    root.ensure()
    root.matrix_path.write_text(json.dumps(m.to_dict()))
    cells = m.cells("a")
    for c, ok in zip(cells, (True, True, True, False)):
        _decided(root, c, ok, 30.0, "node1")
    edited = root.run_dir(cells[0], 1) / f"transcript_{run_tag(cells[0].suite, cells[0].task, cells[0].seed)}.json"
    doc = json.loads(edited.read_text())
    doc["environment_success"] = False
    edited.write_text(json.dumps(doc))
    (root.run_dir(cells[1], 1) / f"transcript_{run_tag(cells[1].suite, cells[1].task, cells[1].seed)}.json").unlink()

    rep = subprocess.run([sys.executable, "-m", "rpent.cli.batch", "report", str(root.root), "--json"],
                         capture_output=True, text=True, timeout=120)
    assert rep.returncode == 0, rep.stderr
    overall = json.loads(rep.stdout)["arms"][0]["overall"]
    assert (overall["k"], overall["n"], overall["infra"]) == (1, 3, 1)

    js = json.loads(_status(root.root, "--json").stdout)
    arm = js["arms"][0]
    assert (arm["k"], arm["n"], arm["infra"]) == (overall["k"], overall["n"], overall["infra"])
    assert js["counts"] == {"success": 1, "failure": 2, "infra": 1, "running": 0, "pending": 0}
    mismatch = {(d["key"], d["attempt"]): (d["ledger"], d["record"]) for d in js["ledger_mismatch"]}
    assert mismatch == {(cells[0].key, 1): ("success", "failure"), (cells[1].key, 1): ("success", "infra")}
    out = _status(root.root).stdout
    assert "  a: 1/3 = 33.3%" in out
    assert f"record disagrees with the ledger: {cells[0].key} attempt 1: ledger success, record failure" in out
    assert f"record disagrees with the ledger: {cells[1].key} attempt 1: ledger success, record infra" in out


def test_status_of_a_root_that_is_not_one(tmp_path):
    st = _status(tmp_path)
    assert st.returncode == 2 and "is not an rpent-batch results root (no matrix.json)" in st.stderr


def test_format_duration():
    assert [format_duration(x) for x in (None, 40, 720, 11100)] == ["-", "40 s", "12 min", "3 h 05 min"]
