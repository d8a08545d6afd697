"""The leaderboard experiment's runner overhead, and a kill -9 / resume check, on a grid of real episodes.

Runs a leaderboard-shaped experiment (``--matrix``: by default the checked-in
``experiments/libero_pro_leaderboard.yaml``, cut to ``--suites/--tasks/--seeds``: an offline-planner
arm on every seed and a flash arm replaying its seed-0 plans on the other seeds) with the real
``rpent-batch`` command, real LIBERO env servers, ``--parallel 1``, and prints:

* **TARGET FIGURE** (target <= 3 %): the runner's overhead, ``(batch wall - sum of the runs' own
  wall times) / sum of the runs' own wall times``. The batch wall is ``rpent-batch`` from launch to
  exit; the runs' own wall times (the baseline, from the same invocation) are each run process's
  start to end as the executor measured it (``attempts.jsonl``: an ``rpent`` run per cell, or one
  ``rpent-flash replay`` per task for an arm with ``share_env``, its ``replay_group`` line). With one run at a time everything
  else in the batch's wall time is the runner's: start-up, matrix and flag checks, ledger, lock,
  manifest, flash plan generation, progress, report. It is split by the ledger's timestamps
  (``head``: launch to the first run; ``between``: gaps between runs, flash plans included;
  ``tail``: the last run's end to exit);
* a resume of the finished root (nothing left to run): the runner's fixed cost alone;
* with ``--kill-check``: the same grid in a second results root, its runner SIGKILLed at random
  points (``--kills`` times, after a random number of finished attempts plus a random 0-20 s; seed
  printed, ``--kill-seed`` repeats it) and re-run with the same command each time; the outcome fields of both
  reports (per arm and per task k/N, Wilson interval, infra, pending, and every cell's status) must
  be equal. The killed root runs at the same time as the straight one (each ``--parallel 1``), so
  the check costs no extra wall time; the overhead figure is then measured under the other root's
  load as well.

Usage::

    MUJOCO_GL=egl python benchmarks/leaderboard_bench.py --work-dir DIR [--suites libero_object_swap]
        [--tasks 0-1] [--seeds 0-2] [--kill-check] [--kills 2] [--kill-seed N]

The work directory keeps both roots (re-running with the same ``--work-dir`` resumes them; pass a new
one for a fresh measurement). Prints the load average next to the figures: on a shared machine the
runs' wall times are noisy; the overhead is a difference against the same batch's runs.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from rpent.batch.report import OUTCOME_FIELDS  # noqa: E402

KILL_DELAY_MAX_S = 20.0


def _ledger(root: Path) -> list[dict]:
    p = root / "attempts.jsonl"
    if not p.exists():
        return []
    out = []
    for line in p.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            pass
    return out


def _matrix_file(args, work: Path) -> Path:
    doc = yaml.safe_load(Path(args.matrix).read_text())
    doc["suites"] = args.suites
    doc["tasks"] = args.tasks
    doc["seeds"] = args.seeds
    if args.max_episode_steps:
        doc["flags"] = list(doc.get("flags") or []) + ["--max-episode-steps", str(args.max_episode_steps)]
    doc.pop("ray", None)  # an arm with its own seeds (the flash arm's 1-9) runs those of them in --seeds
    p = work / "matrix.yaml"
    p.write_text(yaml.safe_dump(doc, sort_keys=False))
    return p


def _cmd(matrix: Path, root: Path, parallel: int) -> list[str]:
    return [sys.executable, "-m", "rpent.cli.batch", "--matrix", str(matrix), "--results-root", str(root),
            "--parallel", str(parallel), "--no-progress"]


def _outcomes(root: Path) -> dict:
    rep = json.loads((root / "report.json").read_text())
    return {"arms": {a["arm"]: {"overall": {k: a["overall"][k] for k in OUTCOME_FIELDS},
                                "tasks": [{k: r[k] for k in ("suite", "task", *OUTCOME_FIELDS)} for r in a["tasks"]]}
                     for a in rep["arms"]},
            "cells": {c["key"]: c["status"] for c in rep["cells"]}}


def _split(ledger: list[dict], t_launch: float, t_exit: float) -> dict:
    """head / between / tail of the batch's wall time outside its run processes (one at a time): an
    ``rpent`` run per cell, or for a ``share_env`` arm one ``rpent-flash replay`` per task."""
    starts = {(e["key"], e["attempt"]): e for e in ledger if e.get("event") == "start" and not e.get("not_run")}
    ends = {(e["key"], e["attempt"]): e for e in ledger if e.get("event") == "end" and not e.get("not_run")}
    runs = [(starts[k]["t"], ends[k]["t"], ends[k].get("wall_s") or 0.0) for k in starts
            if k in ends and not starts[k].get("group")]
    group_start: dict[str, float] = {}
    for e in starts.values():
        if e.get("group"):
            group_start[e["group"]] = min(group_start.get(e["group"], e["t"]), e["t"])
    runs += [(group_start[e["group"]], e["t"], e.get("wall_s") or 0.0) for e in ledger
             if e.get("event") == "replay_group" and e.get("group") in group_start]
    runs.sort()
    if not runs:
        return {"runs": 0, "sum_wall_s": 0.0}
    between = sum(max(0.0, b[0] - a[1]) for a, b in zip(runs, runs[1:]))
    return {"runs": len(runs), "sum_wall_s": sum(r[2] for r in runs), "head_s": runs[0][0] - t_launch,
            "between_s": between, "tail_s": t_exit - runs[-1][1],
            "dispatch_s": sum((r[1] - r[0]) - r[2] for r in runs)}


def _run_killed(cmd: list[str], root: Path, kills: int, rng: random.Random, log) -> list[str]:
    """Run ``cmd`` and SIGKILL it at ``kills`` random points (each after a random number of finished
    attempts plus a random delay), re-running the same command after each; returns what happened."""
    notes = []
    for i in range(kills + 1):
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        if i < kills:
            ended = sum(e.get("event") == "end" for e in _ledger(root))
            todo = rng.randint(1, 3)
            delay = rng.uniform(0.0, KILL_DELAY_MAX_S)
            while proc.poll() is None and sum(e.get("event") == "end" for e in _ledger(root)) < ended + todo:
                time.sleep(1.0)
            time.sleep(delay)
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait()
                notes.append(f"kill {i + 1}: SIGKILL after {todo} more attempt(s) ended + {delay:.1f} s")
                time.sleep(3.0)  # its runs get SIGTERM from the kernel (PR_SET_PDEATHSIG) and write cancelled records
                continue
            notes.append(f"kill {i + 1}: the batch had already finished")
        proc.wait()
        notes.append(f"run {i + 1}: exit {proc.returncode}")
        if proc.returncode == 0:
            break
    return notes


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work-dir", required=True)
    ap.add_argument("--matrix", default=str(REPO / "experiments" / "libero_pro_leaderboard.yaml"))
    ap.add_argument("--suites", nargs="+", default=["libero_object_swap"])
    ap.add_argument("--tasks", default="0-1")
    ap.add_argument("--seeds", default="0-2")
    ap.add_argument("--max-episode-steps", type=int, default=None)
    ap.add_argument("--kill-check", action="store_true")
    ap.add_argument("--kills", type=int, default=2)
    ap.add_argument("--kill-seed", type=int, default=None)
    args = ap.parse_args()
    work = Path(args.work_dir).resolve()
    work.mkdir(parents=True, exist_ok=True)
    matrix = _matrix_file(args, work)
    straight, killed = work / "straight", work / "killed"
    print(f"grid: suites {args.suites} tasks {args.tasks} seeds {args.seeds}; arms of {args.matrix} (optional ones "
          f"off); load before: {os.getloadavg()}", flush=True)
    log_k = open(work / "killed.log", "a")
    seed = args.kill_seed if args.kill_seed is not None else random.randrange(1 << 30)
    killer = None
    if args.kill_check:
        import threading

        result: dict = {}
        killer = threading.Thread(target=lambda: result.update(notes=_run_killed(
            _cmd(matrix, killed, 1), killed, args.kills, random.Random(seed), log_k)), daemon=True)
        killer.start()
    t0 = time.time()
    with open(work / "straight.log", "a") as log:
        code = subprocess.call(_cmd(matrix, straight, 1), stdout=log, stderr=subprocess.STDOUT)
    t1 = time.time()
    load_after = os.getloadavg()
    split = _split(_ledger(straight), t0, t1)
    wall = t1 - t0
    print(f"rpent-batch --parallel 1 (exit {code}): {wall:.1f} s wall, {split['runs']} runs; load after {load_after}")
    if split["runs"]:
        own = split["sum_wall_s"]
        over = wall - own
        print(f"baseline: the runs' own wall times sum to {own:.1f} s; outside them {over:.1f} s (head "
              f"{split['head_s']:.1f} s, between runs {split['between_s']:.1f} s incl. flash plans, dispatch "
              f"{split['dispatch_s']:.1f} s, tail {split['tail_s']:.1f} s)")
        print(f"TARGET FIGURE: runner overhead {100 * over / own:+.2f} % of the episodes' own wall time "
              f"(target <= 3 %) [{'met' if over / own <= 0.03 else 'NOT met'}]")
    else:
        print("TARGET FIGURE: none (no run in this invocation: the root was finished already; use a new --work-dir)")
    r0 = time.time()
    with open(work / "straight.log", "a") as log:
        subprocess.call(_cmd(matrix, straight, 1), stdout=log, stderr=subprocess.STDOUT)
    print(f"resume of the finished root (nothing to run): {time.time() - r0:.1f} s (the runner's fixed cost)")
    rep = json.loads((straight / "report.json").read_text())
    for a in rep["arms"]:
        o = a["overall"]
        print(f"  arm {a['arm']}: {o['k']}/{o['n']} infra {o['infra']} pending {o['pending']}, median wall "
              f"{o['median_wall_s']} s")
    if killer is not None:
        killer.join()
        print(f"kill check (seed {seed}): " + "; ".join(result.get("notes", [])))
        same = _outcomes(straight) == _outcomes(killed)
        print(f"kill -9 and resume: report outcomes {'EQUAL' if same else 'DIFFERENT'} to the uninterrupted run's")
        if not same:
            a, b = _outcomes(straight), _outcomes(killed)
            for k in sorted(set(a["cells"]) | set(b["cells"])):
                if a["cells"].get(k) != b["cells"].get(k):
                    print(f"  {k}: straight {a['cells'].get(k)}, killed {b['cells'].get(k)}")
    print(subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())


if __name__ == "__main__":
    main()
