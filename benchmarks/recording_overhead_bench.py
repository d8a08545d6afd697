"""Wall time of the main job with and without ``--record-trajectory`` (the recording overhead of a
real run), interleaved run by run on one task.

Usage::

    python benchmarks/recording_overhead_bench.py [--suite libero_object --task 0] [--repeats 3]

Each repeat runs ``rpent --planner scripted`` once without and once with ``--record-trajectory``
(video on, as by default) and reads ``elapsed_s`` from the transcript. Prints the median of each
and the overhead. The scripted planner's actions are recorded state-only (no extra renders);
VLA-driven steps also render the wrist camera for the exported frames — that part is measured by
``benchmarks/flywheel_bench.py`` (part 1).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path


def run(suite: str, task: int, out: Path, record: bool) -> float:
    """One main-job run; returns its elapsed_s (s)."""
    argv = [sys.executable, "-m", "rpent.cli.main", "--suite", suite, "--task", str(task), "--planner", "scripted",
            "--output-dir", str(out)] + (["--record-trajectory"] if record else [])
    p = subprocess.run(argv, capture_output=True, text=True, env=dict(os.environ, MUJOCO_GL="egl"))
    if p.returncode != 0:
        raise SystemExit(f"run failed ({p.returncode}): {p.stderr[-2000:]}")
    tag = f"{suite[len('libero_'):]}_t{task}_s0"
    return float(json.loads((out / f"transcript_{tag}.json").read_text())["elapsed_s"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--suite", default="libero_object")
    ap.add_argument("--task", type=int, default=0)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="rpent_rec_bench_"))
    plain, recorded = [], []
    for i in range(args.repeats):
        plain.append(run(args.suite, args.task, root / f"plain{i}", False))
        recorded.append(run(args.suite, args.task, root / f"rec{i}", True))
        print(f"repeat {i}: plain {plain[-1]:.2f} s, recorded {recorded[-1]:.2f} s", flush=True)
    a, b = statistics.median(plain), statistics.median(recorded)
    print(f"median: without recording {a:.2f} s, with --record-trajectory {b:.2f} s, overhead {100 * (b / a - 1):+.1f} %")


if __name__ == "__main__":
    main()
