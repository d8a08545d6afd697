"""Acceptance: a demonstration the operator rejected never becomes training data, a recipe, a flash
plan or a batch success. A real LIBERO run under ``--require-operator-verdict``, answered ``f`` at the
real terminal prompt (a pseudo-terminal on the CLI's stdin), then the real consoles on its files:
``rpent-flywheel export`` (v1, v2, and v2 with the opt-in), ``rpent-flywheel validate``,
``rpent-flash generate`` and ``rpent-batch report``."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rpent.batch.matrix import Arm, Cell, Matrix
from rpent.batch.records import ResultsRoot

RPENT = [sys.executable, "-m", "rpent.cli.main"]
CELL = Cell("default", "libero_object", 0, 0)


def _console(module: str, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True, timeout=timeout,
                          env=dict(os.environ, MUJOCO_GL="egl", HF_HUB_OFFLINE="1"))


def _run_at_a_terminal(argv: list[str], timeout: float = 2000) -> tuple[int, str, list[str]]:
    """Run ``argv`` with a pseudo-terminal as stdin/stdout/stderr; answer the operator's verdict
    prompt with ``f operator rejects`` (the single-letter answer the TUI takes too). Returns (exit code,
    everything printed, answers sent).
    """
    master, slave = pty.openpty()
    proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=dict(os.environ, MUJOCO_GL="egl"),
                            start_new_session=True)
    os.close(slave)
    buf, sent = b"", []
    deadline = time.monotonic() + timeout
    try:
        while True:
            ready, _, _ = select.select([master], [], [], 0.5)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # EIO: the child closed the terminal
                    chunk = b""
                if not chunk:
                    break
                buf += chunk
                text = buf.decode("utf-8", "replace")
                if not sent and "then optional notes:" in text:
                    os.write(master, b"f operator rejects\n")
                    sent.append("f")
            elif proc.poll() is not None:
                break
            assert time.monotonic() < deadline, buf.decode("utf-8", "replace")[-3000:]
        return proc.wait(timeout=60), buf.decode("utf-8", "replace"), sent
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)


@pytest.mark.slow
@pytest.mark.timeout(3000)  # a loaded 2-core machine runs the MuJoCo task and the exports several times slower
def test_a_rejected_demonstration_reaches_no_data(tmp_path):
    # a results root whose one attempt an operator judged (its matrix names the run's cell)
    root = ResultsRoot(tmp_path / "results")
    root.ensure()
    m = Matrix(suites=(CELL.suite,), tasks=(CELL.task,), seeds=(CELL.seed,), arms=(Arm(name="default"),))
    root.matrix_path.write_text(json.dumps(m.to_dict()))
    run = root.run_dir(CELL, 1)
    code, printed, sent = _run_at_a_terminal(RPENT + [
        "--robot", "libero", "--suite", "libero_object", "--task", "0", "--seed", "0", "--planner", "scripted",
        "--record-trajectory", "--record-observations", "all", "--require-operator-verdict", "--no-video",
        "--output-dir", str(run)])
    assert sent == ["f"] and "invalid operator response" not in printed, printed[-3000:]
    assert code == 1, printed[-3000:]  # not solved: the operator's verdict decides
    assert "NOT SOLVED (operator verdict) [disagreement: operator said failure; environment predicate: satisfied]" \
        in printed

    # the run record: the predicate held, the operator rejected, the label is failed; no recipe
    tr = json.loads((run / "transcript_object_t0_s0.json").read_text())
    assert tr["environment_success"] is True and tr["label"] == "failed" and tr["verdict_required"] is True
    assert tr["operator_verdict"]["answer"] == "failure" and tr["operator_verdict"]["notes"] == "operator rejects"
    assert tr["disagreement"] == "operator said failure; environment predicate: satisfied"
    assert tr["recipe"] is None and tr["recipe_withheld"].startswith("operator_rejected: ")
    assert not list(run.glob("*_recipe.jsonl"))
    # the trajectory says the same, with the run's provenance
    task = json.loads((run / "trajectories" / "libero_object_t0_s0" / "task.json").read_text())
    assert (task["label"], task["environment_success"], task["disagreement"]) == ("failed", True, tr["disagreement"])
    assert task["operator_verdict"]["answer"] == "failure" and [v["answer"] for v in task["operator_verdicts"]] \
        == ["failure"]
    prov = json.loads((run / "provenance.json").read_text())
    assert task["provenance"] == prov == tr["provenance"]
    assert "--require-operator-verdict" in prov["argv"] and prov["rpent"]["version"]
    assert set(prov["versions"]) >= {"python", "torch", "mujoco", "libero"} and prov["host"]
    assert prov["models"] == {"vla": None, "sam3": None}

    # flywheel: both rule sets exclude it as operator_rejected; nothing is exported
    for rules in ("v1", "v2"):
        out = tmp_path / f"ds_{rules}"
        p = _console("rpent.cli.flywheel", "export", "--input-root", str(run), "--output-dir", str(out),
                     "--rules", rules, "--no-progress")
        assert p.returncode == 3, p.stdout + p.stderr  # nothing exported
        report = json.loads((out / "report.json").read_text())
        assert report["counts"]["runs_exported"] == 0 and not (out / "train").exists()
        assert [(x["scope"], x["reason"]) for x in report["exclusions"]] == [("run", "operator_rejected")]
        assert "operator rejects" in report["exclusions"][0]["detail"]
        assert report["label_policy"] == "succeeded" and "operator_rejected x1" in p.stderr
    # the explicit opt-in exports it for study, flagged
    out = tmp_path / "ds_study"
    p = _console("rpent.cli.flywheel", "export", "--input-root", str(run), "--output-dir", str(out), "--rules", "v2",
                 "--include-disagreements", "--no-progress")
    assert p.returncode == 0, p.stdout + p.stderr
    report = json.loads((out / "report.json").read_text())
    assert report["label_policy"] == "succeeded+disagreements" and report["counts"]["disagreements_included"] == 1
    assert report["runs"][0]["disagreement_included"] and report["runs"][0]["provenance"]["argv"] == prov["argv"]
    assert "Label policy: `succeeded+disagreements`" in (out / "train" / "README.md").read_text()
    # validate: the files are sound, the run is not exportable
    p = _console("rpent.cli.flywheel", "validate", str(run))
    assert p.returncode == 0, p.stdout + p.stderr
    assert "trajectories/libero_object_t0_s0: ok, not exportable (operator_rejected)" in p.stdout

    # flash generate is refused with the reason; nothing written
    dest = tmp_path / "flash"
    p = _console("rpent.cli.flash", "generate", "--audit", str(run), "--recipe",
                 str(run / "object_t0_s0_recipe.jsonl"), "--destination", str(dest))
    assert p.returncode == 2 and "refused (operator_rejected)" in p.stderr, p.stderr
    assert not dest.exists()

    # rpent-batch report: an environment success, a label failure, one disagreement
    p = _console("rpent.cli.batch", "report", str(root.root), "--json")
    assert p.returncode == 0, p.stderr
    o = json.loads(p.stdout)["arms"][0]["overall"]
    assert (o["k"], o["n"], o["label_k"], o["label_n"], o["verdicts"], o["disagreements"]) == (1, 1, 0, 1, 1, 1)
    md = (root.root / "report.md").read_text()
    assert "| default | 1/1 | 100.0% | 0/1 | 0.0% |" in md
