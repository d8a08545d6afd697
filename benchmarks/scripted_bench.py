"""Per-task success of the offline ``scripted`` planner through the full main job.

Runs ``rpent --planner scripted`` (real env-server subprocess, the toolkit, the run record)
on every task of the given suites at one seed and prints a table: success (the environment's
predicate), env steps, wall time. Target (issue 3): >= 7/10 on ``libero_object`` and >= 7/10
on ``libero_object_swap`` at seed 0.

Usage::

    python benchmarks/scripted_bench.py --suites libero_object libero_object_swap --seed 0 \\
        --out /tmp/scripted_bench [--tasks 0 1 2] [--json results.json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path


def run_one(suite: str, task: int, seed: int, out: Path, video: bool) -> dict:
    """Run the main job once; returns {suite, task, success, env_steps, wall_s, exit_code, finish}."""
    run_dir = out / f"{suite}_t{task}_s{seed}"
    argv = [sys.executable, "-m", "rpent.cli.main", "--suite", suite, "--task", str(task), "--seed", str(seed),
            "--planner", "scripted", "--output-dir", str(run_dir)]
    if not video:
        argv.append("--no-video")
    t0 = time.monotonic()
    p = subprocess.run(argv, capture_output=True, text=True, env=dict(os.environ, MUJOCO_GL="egl"))
    wall = time.monotonic() - t0
    row = {"suite": suite, "task": task, "seed": seed, "exit_code": p.returncode, "wall_s": round(wall, 1)}
    tag = f"{suite[len('libero_'):]}_t{task}_s{seed}"
    try:
        tr = json.loads((run_dir / f"transcript_{tag}.json").read_text())
        row.update(success=bool(tr["environment_success"]), env_steps=tr["env_steps"],
                   finish=(tr.get("finish") or {}).get("status"), summary=(tr.get("finish") or {}).get("summary"),
                   error=tr.get("error"))
    except (OSError, ValueError, KeyError) as exc:
        row.update(success=False, env_steps=None, finish=None, error=f"no transcript: {exc}; {p.stderr[-500:]}")
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--suites", nargs="+", default=["libero_object", "libero_object_swap"])
    ap.add_argument("--tasks", nargs="*", type=int, default=None, help="task indices (default all 10)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="/tmp/rpent_scripted_bench")
    ap.add_argument("--video", action="store_true", help="also write episode.mp4 (slower)")
    ap.add_argument("--json", default=None, help="write the rows here")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for suite in args.suites:
        for task in (args.tasks if args.tasks is not None else range(10)):
            row = run_one(suite, task, args.seed, out, args.video)
            rows.append(row)
            print(f"{suite:22s} t{task}  success={row['success']!s:5}  steps={row['env_steps']!s:5}  "
                  f"wall={row['wall_s']:6.1f}s  finish={row['finish']}  {row.get('summary') or row.get('error') or ''}",
                  flush=True)
    print("\n| suite | task | success | env steps | wall (s) |\n|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['suite']} | {r['task']} | {'yes' if r['success'] else 'no'} | {r['env_steps']} | {r['wall_s']} |")
    for suite in args.suites:
        sr = [r for r in rows if r["suite"] == suite]
        print(f"{suite}: {sum(r['success'] for r in sr)}/{len(sr)} succeeded")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
