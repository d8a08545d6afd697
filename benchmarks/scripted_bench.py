"""Per-task success of the offline ``scripted`` planner through the full main job.

Runs ``rpent --planner scripted`` (real env-server subprocess, the toolkit, the run record)
on the given tasks x seeds of the given suites and prints a per-task table (success = the
environment's predicate, env steps, wall time, finish status, where it stopped) and per
suite ``k/N`` with a 95% Wilson interval (``scipy.stats.binomtest``) and the median wall
time per episode and the median CPU time (user + sys of ``rpent`` and its env server, from
``wait4``: much less load-dependent than wall time), plus the load average before and after
(the machine is shared: figures are only comparable within one run). Targets: >= 80% per suite, >= 85% over
all, median <= 30 s per episode on libero_10.

``--baseline DIR`` also runs every cell with the rpent source tree in DIR (e.g. ``git archive
main | tar -x -C DIR``; imported through ``PYTHONPATH``), right before the same cell with this
tree, and prints the baseline's median wall time next to this tree's, with the number of
cells whose success or env steps differ (speed work must not change what happens).

Usage::

    python benchmarks/scripted_bench.py --suites libero_spatial libero_goal --seeds 0 \\
        --out /tmp/scripted_bench [--tasks 0 1 2] [--jobs 2] [--json results.json] [--baseline /tmp/main_src]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from scipy.stats import binomtest


def run_one(suite: str, task: int, seed: int, out: Path, video: bool, source: str | None = None) -> dict:
    """Run the main job once; returns {suite, task, seed, success, env_steps, wall_s, exit_code, finish, summary}.

    ``source``: an rpent source tree to import instead of this one (``PYTHONPATH``; the baseline arm)."""
    run_dir = (out / (f"{suite}_t{task}_s{seed}" + ("_baseline" if source else ""))).resolve()
    argv = [sys.executable, "-m", "rpent.cli.main", "--suite", suite, "--task", str(task), "--seed", str(seed),
            "--planner", "scripted", "--output-dir", str(run_dir)]
    if not video:
        argv.append("--no-video")
    t0 = time.monotonic()
    env = dict(os.environ, MUJOCO_GL="egl")
    if source:
        env["PYTHONPATH"] = str(Path(source).resolve())
    with tempfile.TemporaryFile() as err:
        # ``python -m`` puts the working directory first on sys.path, ahead of PYTHONPATH: started
        # from a checkout's root, the baseline arm would import that checkout, not ``source``
        p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err, env=env,
                             cwd=str(Path(source).resolve()) if source else None)
        # CPU time (user + sys) of rpent and of the env server it reaped: much less load-dependent than wall time
        _, status, usage = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        stderr = err.read().decode("utf-8", "replace")
    wall = time.monotonic() - t0
    row = {"suite": suite, "task": task, "seed": seed, "exit_code": p.returncode, "wall_s": round(wall, 1),
           "cpu_s": round(usage.ru_utime + usage.ru_stime, 1)}
    tag = f"{suite[len('libero_'):]}_t{task}_s{seed}"
    try:
        tr = json.loads((run_dir / f"transcript_{tag}.json").read_text())
        row.update(success=bool(tr["environment_success"]), env_steps=tr["env_steps"],
                   finish=(tr.get("finish") or {}).get("status"), summary=(tr.get("finish") or {}).get("summary"),
                   error=tr.get("error"))
    except (OSError, ValueError, KeyError) as exc:
        row.update(success=False, env_steps=None, finish=None, summary=None,
                   error=f"no transcript: {exc}; {stderr[-500:]}")
    return row


def suite_line(suite: str, rows: list[dict]) -> str:
    """``suite: k/N = p% (95% Wilson lo-hi%), median wall s``."""
    k, n = sum(bool(r["success"]) for r in rows), len(rows)
    ci = binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
    med = statistics.median(r["wall_s"] for r in rows)
    cpu = statistics.median(r["cpu_s"] for r in rows)
    return (f"{suite}: {k}/{n} = {100 * k / n:.0f}% (95% Wilson {100 * ci.low:.0f}-{100 * ci.high:.0f}%), "
            f"median wall {med:.1f} s/episode, median CPU {cpu:.1f} s/episode")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--suites", nargs="+", default=["libero_object", "libero_object_swap"])
    ap.add_argument("--tasks", nargs="*", type=int, default=None, help="task indices (default all 10)")
    ap.add_argument("--seeds", nargs="+", type=int, default=None, help="seeds (default 0)")
    ap.add_argument("--seed", type=int, default=None, help="one seed (same as --seeds N)")
    ap.add_argument("--jobs", type=int, default=1, help="episodes run at once (each is one simulator, ~1.3 GB)")
    ap.add_argument("--out", default="/tmp/rpent_scripted_bench")
    ap.add_argument("--video", action="store_true", help="also write episode.mp4 (slower)")
    ap.add_argument("--json", default=None, help="write the rows here")
    ap.add_argument("--baseline", default=None, metavar="DIR",
                    help="also run every cell with the rpent source tree in DIR first (e.g. main: "
                         "git archive main | tar -x -C DIR) and print its median wall time next to this tree's")
    args = ap.parse_args()
    if args.baseline and not (Path(args.baseline) / "rpent" / "__init__.py").is_file():
        ap.error(f"--baseline {args.baseline}: no rpent/__init__.py there; pass an rpent source tree")
    seeds = args.seeds if args.seeds is not None else [args.seed if args.seed is not None else 0]
    if args.jobs < 1:
        ap.error("--jobs must be >= 1")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    cells = [(s, t, sd) for s in args.suites for t in (args.tasks if args.tasks is not None else range(10)) for sd in seeds]
    load_before = os.getloadavg()
    t_all = time.monotonic()

    base_rows: list[dict] = []

    def one(cell):
        if args.baseline:
            b = run_one(*cell, out, args.video, source=args.baseline)
            b["load_1min"] = round(os.getloadavg()[0], 2)
            base_rows.append(b)
            print(f"{b['suite']:22s} t{b['task']} s{b['seed']}  BASELINE success={b['success']!s:5}  "
                  f"steps={b['env_steps']!s:5}  wall={b['wall_s']:6.1f}s  cpu={b['cpu_s']:6.1f}s  load={b['load_1min']}", flush=True)
        row = run_one(*cell, out, args.video)
        row["load_1min"] = round(os.getloadavg()[0], 2)
        print(f"{row['suite']:22s} t{row['task']} s{row['seed']}  success={row['success']!s:5}  "
              f"steps={row['env_steps']!s:5}  wall={row['wall_s']:6.1f}s  cpu={row['cpu_s']:6.1f}s  load={row['load_1min']}  "
              f"finish={row['finish']}  "
              f"{row.get('summary') or row.get('error') or ''}", flush=True)
        return row

    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        rows = list(pool.map(one, cells))
    load_after = os.getloadavg()
    print("\n| suite | task | seed | success | env steps | wall (s) | CPU (s) | finish | where it stopped / why |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        why = "" if r["success"] else (r.get("summary") or r.get("error") or "").replace("|", "/")[:120]
        print(f"| {r['suite']} | {r['task']} | {r['seed']} | {'yes' if r['success'] else 'no'} | {r['env_steps']} | "
              f"{r['wall_s']} | {r['cpu_s']} | {r['finish']} | {why} |")
    print()
    for suite in args.suites:
        print(suite_line(suite, [r for r in rows if r["suite"] == suite]))
    if len(args.suites) > 1:
        print(suite_line("all", rows))
    if args.baseline:
        key = lambda r: (r["suite"], r["task"], r["seed"])  # noqa: E731
        base = {key(r): r for r in base_rows}
        for suite in args.suites:
            print("baseline " + suite_line(suite, [r for r in base_rows if r["suite"] == suite]))
        differ = [key(r) for r in rows if (base[key(r)]["success"], base[key(r)]["env_steps"]) != (r["success"], r["env_steps"])]
        print(f"baseline ({args.baseline}) vs this tree: median wall {statistics.median(r['wall_s'] for r in base_rows):.1f} s "
              f"vs {statistics.median(r['wall_s'] for r in rows):.1f} s, median CPU "
              f"{statistics.median(r['cpu_s'] for r in base_rows):.1f} s vs {statistics.median(r['cpu_s'] for r in rows):.1f} s "
              f"per episode; cells whose success or env steps "
              f"differ: {len(differ)} {differ if differ else ''}")
    print(f"load average (1/5/15 min) before {tuple(round(x, 2) for x in load_before)}, after "
          f"{tuple(round(x, 2) for x in load_after)}; {args.jobs} job(s); total {time.monotonic() - t_all:.0f} s")
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "baseline_rows": base_rows} if args.baseline else rows, indent=1))


if __name__ == "__main__":
    main()
