"""rpent-tui over a slow link: terminal bytes per second and keystroke-to-repaint latency while
run events stream at 200 events/s (targets: <= 100 KB/s and <= 50 ms).

The real app runs in a child process on a real pseudo-terminal (120x40, xterm-256color); a stand-in
TaskRun (no simulator: this measures the UI) emits planner text, tool calls/results, steps and a
128x128 camera frame pair from a worker thread, like the toolkit does, at ``--rate`` events/s. The
parent reads everything the app writes to the terminal and

1. counts bytes over ``--seconds`` of streaming (the SSH bandwidth cost), then
2. presses F2/F3 alternately ``--presses`` times and times each key until the other screen's
   marker text ("Last error" / "Transcript") has been written (keystroke-to-repaint latency).

Usage::

    python benchmarks/tui_bench.py --baseline-ref main  # this tree and main's code, same run
    python benchmarks/tui_bench.py                      # batched (the default 80 ms flush)
    python benchmarks/tui_bench.py --batch-interval 0.001 --fps 60   # ~unbatched, for comparison

Also prints the app's CPU use while streaming (% of one core: less sensitive to a busy machine than
latencies). With ``--baseline-ref REF`` the same measurement runs on REF's code (a temporary git
worktree) in the same run, alternating ``--rounds`` times. Prints one line per figure. Requires
Linux (pty, termios).
"""

from __future__ import annotations

import argparse
import fcntl
import os
import pty
import re
import select
import signal
import statistics
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COLS, ROWS = 120, 40


# ----------------------------------------------------------------------------------- child side
def child(args: argparse.Namespace) -> None:
    """Run the app with a streaming stand-in TaskRun (no shared services)."""
    import io
    import threading

    import numpy as np
    import trio
    from PIL import Image

    sys.path.insert(0, str(args.code_root or ROOT))
    from rpent_tui.app import AppOptions, RpentApp
    from rpent.session.core import Session
    from rpent.session.model import SessionConfig

    def frame(i: int) -> bytes:
        arr = np.zeros((128, 128, 3), np.uint8)
        arr[..., 0] = (np.arange(128)[None, :] * 2 + i * 7) % 256
        arr[..., 1] = np.arange(128)[:, None] * 2
        buf = io.BytesIO()
        Image.fromarray(arr).save(buf, format="PNG")
        return buf.getvalue()

    frames = [frame(i) for i in range(8)]

    async def streaming_run(config, supervisor, *, operator, steering=None, on_event=None):
        stop = threading.Event()

        def produce() -> None:  # a worker thread, like the toolkit's
            t0, i = time.monotonic(), 0
            while not stop.is_set():
                delay = t0 + i / args.rate - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                if i % 40 == 0:
                    on_event({"kind": "frames", "step": i // 4, "main": frames[i % 8], "wrist": frames[(i + 3) % 8]})
                elif i % 4 == 0:
                    on_event({"kind": "step", "step": i // 4, "terminated": False, "truncated": False,
                              "success": False, "tool": "move_to"})
                elif i % 4 == 1:
                    on_event({"kind": "planner", "event": "tool_call", "name": "move_to",
                              "args": {"xyz": [0.1, 0.02 * (i % 9), 1.0]}, "call_id": f"c{i}"})
                elif i % 4 == 2:
                    on_event({"kind": "planner", "event": "tool_result", "call_id": f"c{i - 1}",
                              "result": {"final_dist_m": 0.003, "steps_used": 12}})
                else:
                    on_event({"kind": "planner", "event": "text", "text": f"event {i}: moving closer to the plate"})
                i += 1

        try:
            await trio.to_thread.run_sync(produce, abandon_on_cancel=True)
        finally:
            stop.set()

    def make(sink):
        return Session(SessionConfig(output_dir=Path(args.output_dir), planner="scripted", shared_services=()),
                       sink, run_task=streaming_run, shared_specs=[], make_run_config=lambda *a: {},
                       batch_interval_s=args.batch_interval)

    from rpent.session import commands

    commands.known_suites()  # the one-time LIBERO registry scan, before the app: steady state is measured
    app = RpentApp(make, AppOptions(image_mode=args.images, start_mode="run", frame_interval_s=args.frame_interval,
                                    repaint_interval_s=args.repaint_interval))
    if args.profile:
        import cProfile

        profiler = cProfile.Profile(time.thread_time)  # CPU time of the UI thread: robust to a busy machine
        try:
            profiler.runcall(app.run)
        finally:
            profiler.dump_stats(args.profile)
    else:
        app.run()


# ---------------------------------------------------------------------------------- parent side
class Terminal:
    """A child process on a pseudo-terminal; ``read`` drains its output and counts bytes."""

    def __init__(self, argv: list[str], env: dict[str, str]) -> None:
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLS, 0, 0))
        self.proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env, close_fds=True,
                                     start_new_session=True)
        os.close(slave)
        self.master = master
        self.total = 0
        self.tail = b""

    def read(self, timeout: float) -> bytes:
        """Read what is available within ``timeout`` seconds."""
        out = b""
        end = time.monotonic() + timeout
        while True:
            left = end - time.monotonic()
            if left <= 0:
                break
            ready, _, _ = select.select([self.master], [], [], left)
            if not ready:
                break
            try:
                chunk = os.read(self.master, 1 << 16)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
            if len(out) > 0 and not select.select([self.master], [], [], 0)[0]:
                break
        self.total += len(out)
        self.tail = (self.tail + out)[-65536:]
        return out

    def wait_for(self, pattern: bytes, timeout: float) -> float | None:
        """Seconds until ``pattern`` appears in the output (None on timeout)."""
        t0 = time.monotonic()
        seen = b""
        while time.monotonic() - t0 < timeout:
            seen += self.read(0.01)
            if pattern in seen:
                return time.monotonic() - t0
            seen = seen[-4096:]
        return None

    def send(self, data: bytes) -> None:
        """Write keys to the terminal."""
        os.write(self.master, data)

    def close(self, grace_s: float = 10.0) -> None:
        """Stop the child: ctrl+q, then (after ``grace_s``) SIGTERM to its group."""
        try:
            self.send(b"\x11")
            self.proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(timeout=10)
        os.close(self.master)


def measure(args: argparse.Namespace, code_root: Path) -> dict | None:
    """Start the app of ``code_root`` on a pty, stream, measure; the figures, or None on failure."""
    import tempfile

    out_dir = tempfile.mkdtemp(prefix="rpent_tui_bench_")
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": str(COLS), "LINES": str(ROWS), "ESCDELAY": "25",
           "TEXTUAL_ANIMATIONS": "none", "PYTHONPATH": str(code_root)}
    if args.fps:
        env["TEXTUAL_FPS"] = str(args.fps)
    argv = [sys.executable, __file__, "--child", "--output-dir", out_dir, "--rate", str(args.rate),
            "--batch-interval", str(args.batch_interval), "--images", args.images,
            "--frame-interval", str(args.frame_interval), "--repaint-interval", str(args.repaint_interval),
            "--code-root", str(code_root)]
    if args.profile:
        argv += ["--profile", args.profile]
    term = Terminal(argv, env)
    try:
        if term.wait_for(b"Transcript", 120) is None:
            print("child did not draw the Run screen in 120 s", file=sys.stderr)
            return None
        term.read(1.0)
        for _ in range(6):  # "t" prefills the input line; its completion (the first suite) shows it has the focus
            term.send(b"t")
            if term.wait_for(b"libero_10", 20) is not None:
                break
        time.sleep(0.2)
        term.send(b"libero_goal 0 0\r")
        if term.wait_for(b"TaskRun 0001", 90) is None:
            Path(out_dir, "terminal_tail.bin").write_bytes(term.tail)
            print(f"(raw terminal tail saved to {out_dir}/terminal_tail.bin)", file=sys.stderr)
            print("the TaskRun did not start; last output:", re.sub(rb"\x1b\[[0-9;?]*[a-zA-Z]", b"", term.tail).decode(errors="replace")[-1500:], file=sys.stderr)
            return None
        time.sleep(2.0)  # warm-up while streaming
        term.read(0.2)
        cpu0 = child_cpu_s(term.proc.pid)
        start_bytes, t0 = term.total, time.monotonic()
        while time.monotonic() - t0 < args.seconds:
            term.read(0.05)
        elapsed = time.monotonic() - t0
        cpu = (child_cpu_s(term.proc.pid) - cpu0) / elapsed
        rate_kb = (term.total - start_bytes) / elapsed / 1024
        latencies = []
        keys = [(b"\x1bOQ", b"Last error"), (b"\x1bOR", b"Transcript")]  # F2 Services, F3 Run
        for i in range(args.presses):
            key, marker = keys[i % 2]
            term.read(0.0)
            sent = time.monotonic()
            term.send(key)
            took = term.wait_for(marker, 5.0)
            latencies.append(float("inf") if took is None else time.monotonic() - sent)
            time.sleep(0.25)
        typing = []
        term.send(b"i")  # focus the input line
        time.sleep(0.3)
        value = b""
        for i in range(args.presses):
            ch = b"Qz" if i == 0 else str(i % 10).encode()
            value += ch
            term.read(0.0)
            sent = time.monotonic()
            term.send(ch)
            took = term.wait_for(value[-8:], 5.0)
            typing.append(float("inf") if took is None else time.monotonic() - sent)
            time.sleep(0.1)
        return {"rate_kb": rate_kb, "elapsed": elapsed, "cpu": cpu, "switch": sorted(x * 1000 for x in latencies),
                "typing": sorted(x * 1000 for x in typing), "load": os.getloadavg()[0]}
    finally:
        term.close(grace_s=60.0 if args.profile else 10.0)  # a profiled child writes its stats at exit


def child_cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (all its threads) from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def report(name: str, r: dict) -> None:
    """Print one code version's figures."""
    def stats(ms: list[float]) -> str:
        return (f"median {statistics.median(ms):.1f} ms, p90 {ms[int(0.9 * (len(ms) - 1))]:.1f} ms, "
                f"max {ms[-1]:.1f} ms")

    print(f"[{name}] terminal output: {r['rate_kb']:.1f} KB/s over {r['elapsed']:.1f} s (target <= 100 KB/s)")
    print(f"[{name}] app CPU while streaming: {r['cpu'] * 100:.0f}% of one core")
    print(f"[{name}] keystroke-to-repaint (F2/F3 screen switch, n={len(r['switch'])}): {stats(r['switch'])} "
          f"(target median and p90 <= 50 ms)")
    print(f"[{name}] keystroke-to-repaint (typing in the input line, n={len(r['typing'])}): {stats(r['typing'])} "
          f"(target median and p90 <= 50 ms)")
    print(f"[{name}] load average at the end: {r['load']:.1f} on {os.cpu_count()} CPU(s)")


def parent(args: argparse.Namespace) -> int:
    """Measure the baseline (``--baseline-ref``, in a temporary git worktree) and this tree, alternating
    ``--rounds`` times in the same run; print the figures of each."""
    import shutil
    import tempfile

    print(f"events/s streamed: {args.rate}  batch interval: {args.batch_interval * 1000:.0f} ms  "
          f"images: {args.images} (repaint >= {args.frame_interval:g} s apart)  "
          f"TEXTUAL_FPS: {args.fps or 'default (60)'}  terminal: {COLS}x{ROWS}  load at start: {os.getloadavg()[0]:.1f}")
    trees = [("this tree", ROOT)]
    base_dir = None
    if args.baseline_ref:
        base_dir = Path(tempfile.mkdtemp(prefix="rpent_tui_bench_base_")) / "tree"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(base_dir), args.baseline_ref],
                       check=True)
        trees.insert(0, (f"baseline {args.baseline_ref}", base_dir))
    results: dict[str, list[dict]] = {name: [] for name, _ in trees}
    try:
        for _ in range(args.rounds):
            for name, root in trees:
                r = measure(args, root)
                if r is None:
                    return 1
                results[name].append(r)
                report(name, r)
    finally:
        if base_dir is not None:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(base_dir)], check=False)
            shutil.rmtree(base_dir.parent, ignore_errors=True)
    if args.rounds > 1:
        for name, runs in results.items():
            merged = {"rate_kb": statistics.mean(r["rate_kb"] for r in runs), "elapsed": sum(r["elapsed"] for r in runs),
                      "cpu": statistics.mean(r["cpu"] for r in runs), "load": statistics.mean(r["load"] for r in runs),
                      "switch": sorted(x for r in runs for x in r["switch"]),
                      "typing": sorted(x for r in runs for x in r["typing"])}
            report(f"{name}, all rounds", merged)
    return 0


def main() -> int:
    """Parse flags; run the parent (measurements) or the child (the app)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rate", type=float, default=200.0, help="run events per second (default 200)")
    p.add_argument("--seconds", type=float, default=10.0, help="bandwidth measurement window in s (default 10)")
    p.add_argument("--presses", type=int, default=20, help="key presses for the latency figure (default 20)")
    p.add_argument("--batch-interval", type=float, default=0.08, help="session event flush period in s (default 0.08)")
    p.add_argument("--images", default="halfblock", choices=("halfblock", "none"), help="frame panes (default halfblock)")
    p.add_argument("--frame-interval", type=float, default=1.0, help="min s between camera frame repaints (default 1)")
    p.add_argument("--repaint-interval", type=float, default=0.3, help="min s between Run-screen repaints (default 0.3)")
    p.add_argument("--fps", type=int, default=None, help="TEXTUAL_FPS for the app (default: Textual's 60)")
    p.add_argument("--profile", default=None, help="write a cProfile (UI-thread CPU time) of the app's event-loop thread to this file")
    p.add_argument("--baseline-ref", default=None,
                   help="git ref measured too, in the same run (a temporary worktree), e.g. main")
    p.add_argument("--rounds", type=int, default=1, help="alternate baseline/this tree this many times (default 1)")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--code-root", default=None, help=argparse.SUPPRESS)
    p.add_argument("--output-dir", default=None, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        child(args)
        return 0
    return parent(args)


if __name__ == "__main__":
    sys.exit(main())
