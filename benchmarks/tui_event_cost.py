"""CPU cost of the Run screen per run event, for this tree and a baseline git ref in the same run.

Latency figures of ``tui_bench.py`` depend on how busy the machine is (on the shared 2-core VM at
load 15-20 every figure is seconds). This script measures what the app itself spends: the real app
runs headless (Textual's ``run_test``, 120x40) in a child process per code version; a stand-in TaskRun
emits ``--events`` run events (the same mix as ``tui_bench.py``: planner text, tool calls/results,
steps, a 128x128 frame pair every 40 events) at ``--rate`` events/s; the UI thread's CPU time
(``time.thread_time``) from the first event until the screen has drawn the last one is divided by
the event count. Then ``--switches`` F2/F3 presses are timed in CPU ms per switch.

Usage::

    python benchmarks/tui_event_cost.py --baseline-ref main
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = r'''
import asyncio, io, json, sys, tempfile, threading, time
from pathlib import Path
import numpy as np, trio
from PIL import Image
from rpent_tui.app import AppOptions, RpentApp
from rpent.session import commands
from rpent.session.commands import TaskCommand
try:
    from rpent.session.core import Session
    from rpent.session.model import SessionConfig
except ImportError:  # an older baseline: the session lived in the TUI package
    from rpent_tui.services.session import Session, SessionConfig
N, RATE, SWITCHES = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
commands.known_suites()
def frame(i):
    a = np.zeros((128, 128, 3), np.uint8); a[..., 0] = (np.arange(128)[None, :] * 2 + i * 7) % 256
    b = io.BytesIO(); Image.fromarray(a).save(b, format="PNG"); return b.getvalue()
frames = [frame(i) for i in range(8)]
done = threading.Event()
async def run_task(config, supervisor, *, operator, steering=None, on_event=None):
    def produce():
        t0 = time.monotonic()
        for i in range(N):
            delay = t0 + i / RATE - time.monotonic()
            if delay > 0: time.sleep(delay)
            if i % 40 == 0: on_event({"kind": "frames", "step": i // 4, "main": frames[i % 8], "wrist": frames[(i + 3) % 8]})
            elif i % 4 == 0: on_event({"kind": "step", "step": i // 4, "terminated": False, "truncated": False, "success": False, "tool": "move_to"})
            elif i % 4 == 1: on_event({"kind": "planner", "event": "tool_call", "name": "move_to", "args": {"xyz": [0.1, 0.02 * (i % 9), 1.0]}, "call_id": f"c{i}"})
            elif i % 4 == 2: on_event({"kind": "planner", "event": "tool_result", "call_id": f"c{i - 1}", "result": {"final_dist_m": 0.003, "steps_used": 12}})
            else: on_event({"kind": "planner", "event": "text", "text": f"event {i}: moving closer to the plate"})
        done.set()
    await trio.to_thread.run_sync(produce)
    await trio.sleep_forever()
def make(sink):
    return Session(SessionConfig(output_dir=Path(tempfile.mkdtemp()), planner="scripted", shared_services=()), sink,
                   run_task=run_task, shared_specs=[], make_run_config=lambda *a: {}, batch_interval_s=0.08)
async def main():
    app = RpentApp(make, AppOptions(image_mode="halfblock", start_mode="run"))
    async with app.run_test(size=(120, 40)) as pilot:
        while app.session.state != "ready": await pilot.pause(0.1)
        await pilot.pause(0.5)
        c0, t0 = time.thread_time(), time.monotonic()
        app.session.start_task(TaskCommand("libero_goal", 0, 0)); app.screen.render_all()
        while not done.is_set(): await asyncio.sleep(0.05)
        await pilot.pause(1.0)  # the last batch and its repaint
        stream_cpu, stream_wall = time.thread_time() - c0, time.monotonic() - t0
        c1 = time.thread_time()
        for i in range(SWITCHES):
            await pilot.press("f2" if i % 2 == 0 else "f3"); await pilot.pause()
        switch_cpu = time.thread_time() - c1
        print(json.dumps({"cpu_ms_per_1000_events": 1e6 * stream_cpu / N, "stream_wall_s": stream_wall,
                          "stream_cpu_s": stream_cpu, "cpu_ms_per_switch": 1000 * switch_cpu / max(SWITCHES, 1)}))
        await pilot.press("ctrl+q")
asyncio.run(main())
'''


def measure(root: Path, args: argparse.Namespace) -> dict:
    """Run the child on ``root``'s code; its figures."""
    env = {**os.environ, "PYTHONPATH": str(root), "TEXTUAL_ANIMATIONS": "none"}
    out = subprocess.run([sys.executable, "-c", CHILD, str(args.events), str(args.rate), str(args.switches)],
                         env=env, cwd=root, capture_output=True, text=True, timeout=1800)
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
    if out.returncode != 0 or not lines:
        raise SystemExit(f"child on {root} failed (rc {out.returncode}): {out.stderr[-2000:]}")
    return json.loads(lines[-1])


def main() -> int:
    """Measure the baseline (a temporary worktree of ``--baseline-ref``) and this tree, alternating."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--baseline-ref", default=None, help="git ref measured too (a temporary worktree), e.g. main")
    p.add_argument("--events", type=int, default=4000, help="run events streamed (default 4000)")
    p.add_argument("--rate", type=float, default=200.0, help="events per second (default 200)")
    p.add_argument("--switches", type=int, default=20, help="F2/F3 presses (default 20)")
    p.add_argument("--rounds", type=int, default=1, help="alternate the trees this many times (default 1)")
    args = p.parse_args()
    trees = [("this tree", ROOT)]
    base = None
    if args.baseline_ref:
        base = Path(tempfile.mkdtemp(prefix="rpent_tui_cost_base_")) / "tree"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(base), args.baseline_ref], check=True)
        trees.insert(0, (f"baseline {args.baseline_ref}", base))
    print(f"{args.events} events at {args.rate:g}/s, 120x40 headless, {args.switches} F2/F3 switches; "
          f"load at start {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPU(s)")
    try:
        for _ in range(args.rounds):
            for name, root in trees:
                r = measure(root, args)
                print(f"[{name}] UI-thread CPU {r['cpu_ms_per_1000_events']:.0f} ms per 1000 events "
                      f"({r['stream_cpu_s']:.1f} s over {r['stream_wall_s']:.1f} s wall); "
                      f"{r['cpu_ms_per_switch']:.0f} ms CPU per screen switch; load {os.getloadavg()[0]:.1f}")
    finally:
        if base is not None:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(base)], check=False)
            shutil.rmtree(base.parent, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
