"""Flash replay benchmark: plans from seed-0 runs of the offline planner, replayed on other seeds.

For every (suite, task): run ``rpent --planner scripted`` on seed 0 (the baseline, timed in the
same run), turn the solved run into flash files with ``rpent-flash generate``, then run
``rpent --planner flash`` on each replay seed. Prints, per suite, the success rate over the
cells whose seed-0 plan exists (target >= 85 %, upstream 72.6 %) and the median wall time per
episode of the flash replays (target <= 20 s, upstream ~60 s) next to the scripted baseline's,
with the load average (the machine is shared; figures are noisy).

    python benchmarks/flash_bench.py --suites libero_object --tasks 0 1 --seeds 1 2 3 --jobs 2 \\
        --work-dir /tmp/flash_bench --json /tmp/flash_bench.json

Every run is a real ``rpent`` process (env server subprocess, MuJoCo); ``--no-video``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path


def _rpent(args: list[str], out: Path) -> dict:
    t = time.monotonic()
    p = subprocess.run([sys.executable, "-m", "rpent.cli.main", *args, "--no-video", "--output-dir", str(out)],
                       capture_output=True, text=True, env=dict(os.environ, MUJOCO_GL="egl"))
    wall = time.monotonic() - t
    tr = next(out.glob("transcript_*.json"), None)
    doc = json.loads(tr.read_text()) if tr else {}
    return {"rc": p.returncode, "wall_s": round(wall, 2), "success": bool(doc.get("environment_success")),
            "error": doc.get("error") or (None if tr else p.stderr.strip()[-300:]),
            "finish": doc.get("finish"), "env_steps": doc.get("env_steps"),
            "tokens": (doc.get("stats") or {}).get("total_input_tokens", 0)
            + (doc.get("stats") or {}).get("total_output_tokens", 0)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--suites", nargs="+", default=["libero_object", "libero_object_swap"])
    ap.add_argument("--tasks", nargs="+", type=int, default=list(range(10)))
    ap.add_argument("--seeds", nargs="+", type=int, default=list(range(1, 11)), help="replay seeds (default 1-10)")
    ap.add_argument("--jobs", type=int, default=1, help="rpent processes at once (each runs one simulator)")
    ap.add_argument("--work-dir", default="/tmp/rpent_flash_bench")
    ap.add_argument("--json", default=None, help="also write all rows here")
    args = ap.parse_args()
    work = Path(args.work_dir)
    work.mkdir(parents=True, exist_ok=True)
    print(f"load average at start: {os.getloadavg()}", flush=True)
    rows: list[dict] = []

    def cell(suite: str, task: int) -> list[dict]:
        base = work / f"{suite}_t{task}"
        src = base / "scripted_s0"
        r0 = _rpent(["--suite", suite, "--task", str(task), "--seed", "0", "--planner", "scripted"], src)
        out = [{"suite": suite, "task": task, "seed": 0, "planner": "scripted", **r0}]
        print(json.dumps(out[-1]), flush=True)
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
            r = _rpent(["--suite", suite, "--task", str(task), "--seed", str(seed), "--planner", "flash",
                        "--flash-dir", str(flash)], base / f"flash_s{seed}")
            out.append({"suite": suite, "task": task, "seed": seed, "planner": "flash", **r})
            print(json.dumps(out[-1]), flush=True)
        return out

    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for res in pool.map(lambda st: cell(*st), [(s, t) for s in args.suites for t in args.tasks]):
            rows.extend(res)
    load = os.getloadavg()
    print(f"\nload average at end: {load}")
    print("| suite | plans (seed-0 solved) | flash success | rate | median flash wall (s) | median scripted seed-0 "
          "wall (s, baseline) | tokens |")
    print("|---|---|---|---|---|---|---|")
    for suite in args.suites:
        base = [r for r in rows if r["suite"] == suite and r["planner"] == "scripted"]
        plans = [r for r in base if r["success"]]
        fl = [r for r in rows if r["suite"] == suite and r["planner"] == "flash"]
        ok = sum(r["success"] for r in fl)
        rate = f"{100.0 * ok / len(fl):.1f}%" if fl else "n/a"
        med_f = f"{statistics.median(r['wall_s'] for r in fl):.1f}" if fl else "n/a"
        med_s = f"{statistics.median(r['wall_s'] for r in base):.1f}" if base else "n/a"
        print(f"| {suite} | {len(plans)}/{len(base)} | {ok}/{len(fl)} | {rate} | {med_f} | {med_s} | "
              f"{sum(r.get('tokens') or 0 for r in fl)} |")
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "load_end": load}, indent=1))


if __name__ == "__main__":
    main()
