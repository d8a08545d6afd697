"""Flash replay benchmark: plans from seed-0 runs of the offline planner, replayed on other seeds.

For every (suite, task): run ``rpent --planner scripted`` on seed 0 (the baseline, timed in the
same run), turn the solved run into flash files with ``rpent-flash generate``, then run
``rpent --planner flash`` on each replay seed. Prints, per suite, the success rate over the
cells whose seed-0 plan exists (target >= 85 %, upstream 72.6 %) and the median wall time per
episode of the flash replays (target <= 20 s, upstream ~60 s) next to the scripted baseline's,
with the load average (the machine is shared; figures are noisy) and the CPU time (user + sys
of the ``rpent`` process and its env server) per episode, which does not grow with the load.

    python benchmarks/flash_bench.py --suites libero_object --tasks 0 1 --seeds 1 2 3 --jobs 2 \\
        --work-dir /tmp/flash_bench --json /tmp/flash_bench.json

Every run is a real ``rpent`` process (env server subprocess, MuJoCo); ``--no-video``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path


def _rpent(args: list[str], out: Path) -> dict:
    """One ``rpent`` run; wall time (s) and the CPU time (user + sys, s) of the ``rpent`` process
    and every descendant it reaped (its env server), from ``os.wait4`` (Linux accumulates the
    reaped children's usage). CPU time is what a run costs on an idle machine, whatever the load."""
    t = time.monotonic()
    load = os.getloadavg()[0]
    p = subprocess.Popen([sys.executable, "-m", "rpent.cli.main", *args, "--no-video", "--output-dir", str(out)],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                         env=dict(os.environ, MUJOCO_GL="egl"))
    err = p.stderr.read()
    _, status, usage = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    wall = time.monotonic() - t
    tr = next(out.glob("transcript_*.json"), None)
    doc = json.loads(tr.read_text()) if tr else {}
    stats = doc.get("stats") or {}
    return {"rc": p.returncode, "wall_s": round(wall, 2), "cpu_s": round(usage.ru_utime + usage.ru_stime, 2),
            "load_at_start": round(load, 2), "success": bool(doc.get("environment_success")),
            "error": doc.get("error") or (None if tr else err.strip()[-300:]),
            "finish": doc.get("finish"), "env_steps": doc.get("env_steps"),
            "tokens": stats.get("total_input_tokens", 0) + stats.get("total_output_tokens", 0)}


def _median(rows: list[dict], key: str) -> str:
    vals = [r[key] for r in rows if r.get(key) is not None]
    return f"{statistics.median(vals):.1f}" if vals else "n/a"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--suites", nargs="+", default=["libero_object", "libero_object_swap"])
    ap.add_argument("--tasks", nargs="+", type=int, default=list(range(10)))
    ap.add_argument("--seeds", nargs="+", type=int, default=list(range(1, 11)), help="replay seeds (default 1-10)")
    ap.add_argument("--jobs", type=int, default=1, help="rpent processes at once (each runs one simulator)")
    ap.add_argument("--work-dir", default="/tmp/rpent_flash_bench")
    ap.add_argument("--json", default=None, help="also write all rows here")
    ap.add_argument("--report-only", action="store_true",
                    help="print the tables of the runs in WORK/rows.jsonl (e.g. of a stopped benchmark); run nothing")
    ap.add_argument("--resume", action="store_true",
                    help="keep the runs already finished in --work-dir (WORK/rows.jsonl) and run only the others")
    args = ap.parse_args()
    work = Path(args.work_dir)
    work.mkdir(parents=True, exist_ok=True)
    print(f"load average at start: {os.getloadavg()}", flush=True)
    rows: list[dict] = []
    done: dict[tuple, dict] = {}
    log_path = work / "rows.jsonl"
    if (args.resume or args.report_only) and log_path.is_file():
        for line in log_path.read_text().splitlines():
            if line.strip():
                r = json.loads(line)
                done[(r["suite"], r["task"], r["seed"], r["planner"])] = r
    elif log_path.exists():
        log_path.unlink()
    lock = threading.Lock()

    def run_once(suite: str, task: int, seed: int, planner: str, args_: list[str], out: Path) -> dict:
        key = (suite, task, seed, planner)
        if key in done:
            print(json.dumps({**done[key], "resumed": True}), flush=True)
            return done[key]
        if out.exists():
            shutil.rmtree(out)  # an unfinished run of an earlier, interrupted benchmark
        r = {"suite": suite, "task": task, "seed": seed, "planner": planner, **_rpent(args_, out)}
        with lock:
            with open(log_path, "a") as f:
                f.write(json.dumps(r) + "\n")
        print(json.dumps(r), flush=True)
        return r

    def cell(suite: str, task: int) -> list[dict]:
        base = work / f"{suite}_t{task}"
        src = base / "scripted_s0"
        r0 = run_once(suite, task, 0, "scripted",
                      ["--suite", suite, "--task", str(task), "--seed", "0", "--planner", "scripted"], src)
        out = [r0]
        recipe = next(src.glob("*_recipe.jsonl"), None)
        if not r0["success"] or recipe is None:
            return out
        flash = base / "flash"
        g = subprocess.run([sys.executable, "-m", "rpent.cli.flash", "generate", "--audit", str(src), "--recipe",
                            str(recipe), "--destination", str(flash)], capture_output=True, text=True)
        if g.returncode != 0:
            out.append({"suite": suite, "task": task, "seed": 0, "planner": "flash-generate", "rc": g.returncode,
                        "error": g.stderr.strip()})
            print(json.dumps(out[-1]), flush=True)
            return out
        for seed in args.seeds:
            out.append(run_once(suite, task, seed, "flash", ["--suite", suite, "--task", str(task), "--seed", str(seed),
                                                             "--planner", "flash", "--flash-dir", str(flash)],
                                base / f"flash_s{seed}"))
        return out

    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        # tasks outer, suites inner: a benchmark stopped early still covers every suite
        for res in pool.map(lambda st: cell(*st), [] if args.report_only else
                            [(s, t) for t in args.tasks for s in args.suites]):
            rows.extend(res)
    if args.report_only:
        rows = [r for r in done.values() if r["suite"] in args.suites]
    load = os.getloadavg()
    print(f"\nload average at end: {load}")
    print("| suite | plans (seed-0 solved) | flash success | rate | median flash wall (s) | median flash CPU (s) "
          "| median scripted seed-0 wall (s, baseline) | median scripted seed-0 CPU (s) | flash tokens |")
    print("|---|---|---|---|---|---|---|---|---|")
    for suite in [*args.suites, None]:
        sel = [r for r in rows if suite is None or r["suite"] == suite]
        base = [r for r in sel if r["planner"] == "scripted"]
        plans = [r for r in base if r["success"]]
        fl = [r for r in sel if r["planner"] == "flash"]
        ok = sum(r["success"] for r in fl)
        rate = f"{100.0 * ok / len(fl):.1f}%" if fl else "n/a"
        print(f"| {suite or 'all'} | {len(plans)}/{len(base)} | {ok}/{len(fl)} | {rate} | {_median(fl, 'wall_s')} | "
              f"{_median(fl, 'cpu_s')} | {_median(base, 'wall_s')} | {_median(base, 'cpu_s')} | "
              f"{sum(r.get('tokens') or 0 for r in fl)} |")
    loads = [r["load_at_start"] for r in rows if r.get("load_at_start") is not None]
    if loads:
        print(f"1-min load average when the runs started: {min(loads):.1f}-{max(loads):.1f} "
              f"(median {statistics.median(loads):.1f}); the machine has {os.cpu_count()} cores")
    failed = [r for r in rows if r["planner"] == "flash" and not r["success"]]
    for r in failed:
        print(f"not solved: {r['suite']} t{r['task']} s{r['seed']}: {r.get('error') or (r.get('finish') or {}).get('summary')}")
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "load_end": load}, indent=1))


if __name__ == "__main__":
    main()
