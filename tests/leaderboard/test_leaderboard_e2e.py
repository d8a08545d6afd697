"""The leaderboard experiment end to end on a small grid of real LIBERO episodes (2 suites x 2 tasks x
2 seeds; an offline-planner arm, a flash arm replaying its seed-0 plans on seed 1 one run per cell, and
one replaying them on seeds 0-1 with a task's seeds on one env server), run twice at the
same time: once straight, once with its runner SIGKILLed at random points (the first after a random
number of finished attempts, the second once a shared-env replay has started, each plus a random
delay; the seed is printed) and re-run with the same command after each kill. Both must end with the same report (every cell's status, per arm and per task k/N,
Wilson intervals) and the same leaderboard figures; the killed root decides every cell once and
keeps its flash plans across the kills. ``rpent-batch status`` answers while the straight one runs.

Slow: 40 real episodes, two at a time (~15 min on an idle 2-core machine, much more under load).
"""

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rpent.batch.report import OUTCOME_FIELDS

MATRIX = """suites: [libero_object_swap, libero_spatial_swap]
tasks: 0-1
seeds: 0-1
arms:
  - {name: scripted, planner: scripted}
  - {name: flash, planner: flash, seeds: 1, flash_from: scripted}
  - {name: flash-shared, planner: flash, seeds: 0-1, flash_from: scripted, share_env: true}
"""


def _ledger(root: Path) -> list[dict]:
    p = root / "attempts.jsonl"
    out = []
    for line in (p.read_text().splitlines() if p.exists() else []):
        try:
            out.append(json.loads(line))
        except ValueError:
            pass
    return out


def _outcomes(root: Path) -> dict:
    rep = json.loads((root / "report.json").read_text())
    return {"arms": {a["arm"]: {"overall": {k: a["overall"][k] for k in OUTCOME_FIELDS},
                                "tasks": [{k: r[k] for k in ("suite", "task", *OUTCOME_FIELDS)} for r in a["tasks"]]}
                     for a in rep["arms"]},
            "cells": {c["key"]: c["status"] for c in rep["cells"]}}


def _board(root: Path, out: Path) -> dict:
    done = subprocess.run([sys.executable, "-m", "rpent.cli.batch", "leaderboard", str(root), "--output",
                           str(out / "lb.html"), "--json", str(out / "lb.json")], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    doc = json.loads((out / "lb.json").read_text())
    return {r["arm"]: {"overall": (r["overall"]["k"], r["overall"]["n"]),
                       "suites": {s: (v["k"], v["n"]) for s, v in r["suites"].items()}} for r in doc["rows"]}


@pytest.mark.slow
@pytest.mark.timeout(7200)
def test_killed_at_random_points_and_resumed_ends_with_the_uninterrupted_report(tmp_path):
    (tmp_path / "m.yaml").write_text(MATRIX)
    straight, killed = tmp_path / "straight", tmp_path / "killed"

    def cmd(root):
        return [sys.executable, "-m", "rpent.cli.batch", "--matrix", str(tmp_path / "m.yaml"), "--results-root",
                str(root), "--parallel", "1", "--no-progress"]

    seed = int(os.environ.get("RPENT_KILL_SEED", random.randrange(1 << 30)))
    rng = random.Random(seed)
    print(f"kill seed {seed} (RPENT_KILL_SEED={seed} repeats the kill points)")
    log = open(tmp_path / "straight.log", "w")
    first = subprocess.Popen(cmd(straight), stdout=log, stderr=subprocess.STDOUT)
    klog = open(tmp_path / "killed.log", "w")
    kills, status_seen = 0, False
    try:
        for i in range(2):
            proc = subprocess.Popen(cmd(killed), stdout=klog, stderr=subprocess.STDOUT)
            ended = sum(e.get("event") == "end" for e in _ledger(killed))
            more, delay = rng.randint(1, 4), rng.uniform(0.0, 20.0)
            deadline = time.monotonic() + 3600

            def due() -> bool:
                ledger = _ledger(killed)
                if i == 1:  # the second kill lands while a shared-env replay runs (or just after it started)
                    return any(e.get("event") == "start" and e.get("group") for e in ledger)
                return sum(e.get("event") == "end" for e in ledger) >= ended + more

            while proc.poll() is None and not due():
                assert time.monotonic() < deadline, "the killed root made no progress"
                if not status_seen and first.poll() is None and (straight / "matrix.json").exists():
                    st = subprocess.run([sys.executable, "-m", "rpent.cli.batch", "status", str(straight)],
                                        capture_output=True, text=True, timeout=120)
                    status_seen = st.returncode == 0 and f"runner: pid {first.pid}" in st.stdout
                time.sleep(1.0)
            time.sleep(delay)
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
                proc.wait()
                kills += 1
                print(f"SIGKILL {kills}: after {more} more finished attempt(s) + {delay:.1f} s")
                time.sleep(5.0)  # its runs get SIGTERM (PR_SET_PDEATHSIG) and write cancelled records
        last = subprocess.run(cmd(killed), stdout=klog, stderr=subprocess.STDOUT, timeout=5400)
        assert last.returncode == 0, (tmp_path / "killed.log").read_text()[-3000:]
        assert first.wait(timeout=5400) == 0, (tmp_path / "straight.log").read_text()[-3000:]
    finally:
        for p in (first,):
            if p.poll() is None:
                p.kill()
        log.close()
        klog.close()
    assert kills >= 1 and status_seen
    a, b = _outcomes(straight), _outcomes(killed)
    assert len(a["cells"]) == 20 and all(s in ("success", "failure") for s in a["cells"].values())
    assert a == b
    assert _board(straight, tmp_path / "pa") == _board(killed, tmp_path / "pb")
    # the killed root: every cell has exactly one attempt with a task outcome (never re-run once decided)
    from rpent.batch.matrix import Matrix
    from rpent.batch.records import TASK_STATUSES, ResultsRoot

    rr = ResultsRoot(killed)
    m = Matrix.from_dict(json.loads(rr.matrix_path.read_text()))
    for key, st in rr.cell_states(m.cells()).items():
        assert sum(at.status in TASK_STATUSES for at in st.attempts) == 1, (key, [at.status for at in st.attempts])
    ledger = _ledger(killed)
    starts = [(e["key"], e["attempt"]) for e in ledger if e.get("event") == "start"]
    assert len(starts) == len(set(starts))
    # flash plans: one per task whose seed-0 run was solved, generated once across the kills
    plans = [e for e in ledger if e.get("event") == "flash_plan"]
    solved0 = [k for k, s in a["cells"].items() if k.startswith("scripted/") and "/s0/" in k and s == "success"]
    assert len(plans) == 2 * len(solved0)
    assert len(list((killed / "flash" / "flash").glob("*_plan.json"))) == len(solved0)
    groups = [e for e in ledger if e.get("event") == "replay_group"]
    assert groups and all(e["key"].startswith("flash-shared/") for e in groups)
    manifest = json.loads((killed / "manifest.json").read_text())
    assert len(manifest["invocations"]) == kills + 1
