"""rpent-tui over a slow link: terminal bytes per second and keystroke-to-repaint latency while
run events stream at 200 events/s (issue 9 targets: <= 100 KB/s and <= 50 ms).

The real app runs in a child process on a real pseudo-terminal (120x40, xterm-256color); a stand-in
TaskRun (no simulator: this measures the UI) emits planner text, tool calls/results, steps and a
128x128 camera frame pair from a worker thread, like the toolkit does, at ``--rate`` events/s. The
parent reads everything the app writes to the terminal and

1. counts bytes over ``--seconds`` of streaming (the SSH bandwidth cost), then
2. presses F2/F3 alternately ``--presses`` times and times each key until the other screen's
   marker text ("Last error" / "Transcript") has been written (keystroke-to-repaint latency).

Usage::

    python benchmarks/tui_bench.py                      # batched (the default 80 ms flush)
    python benchmarks/tui_bench.py --batch-interval 0.001 --fps 60   # ~unbatched, for comparison

Prints one line per figure. Requires Linux (pty, termios).
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

    sys.path.insert(0, str(ROOT))
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

    app = RpentApp(make, AppOptions(image_mode=args.images, start_mode="run", frame_interval_s=args.frame_interval,
                                    repaint_interval_s=args.repaint_interval))
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

    def close(self) -> None:
        """Stop the child: ctrl+q, then SIGTERM to its group."""
        try:
            self.send(b"\x11")
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(timeout=10)
        os.close(self.master)


def parent(args: argparse.Namespace) -> int:
    """Start the child on a pty, stream, measure, print figures."""
    import tempfile

    out_dir = tempfile.mkdtemp(prefix="rpent_tui_bench_")
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": str(COLS), "LINES": str(ROWS), "ESCDELAY": "25",
           "TEXTUAL_ANIMATIONS": "none"}
    if args.fps:
        env["TEXTUAL_FPS"] = str(args.fps)
    argv = [sys.executable, __file__, "--child", "--output-dir", out_dir, "--rate", str(args.rate),
            "--batch-interval", str(args.batch_interval), "--images", args.images,
            "--frame-interval", str(args.frame_interval), "--repaint-interval", str(args.repaint_interval)]
    term = Terminal(argv, env)
    try:
        if term.wait_for(b"Transcript", 60) is None:
            print("child did not draw the Run screen in 60 s", file=sys.stderr)
            return 1
        term.read(1.0)
        term.send(b"t")
        term.wait_for(b"/rpent-task", 30)  # the input line has the focus: type only now (a busy machine lags)
        time.sleep(0.2)
        term.send(b"libero_goal 0 0\r")
        if term.wait_for(b"TaskRun 0001", 30) is None:
            print("the TaskRun did not start; last output:", re.sub(rb"\x1b\[[0-9;?]*[a-zA-Z]", b"", term.tail).decode(errors="replace")[-1500:], file=sys.stderr)
            return 1
        time.sleep(2.0)  # warm-up while streaming
        term.read(0.2)
        start_bytes, t0 = term.total, time.monotonic()
        while time.monotonic() - t0 < args.seconds:
            term.read(0.05)
        elapsed = time.monotonic() - t0
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
            took = term.wait_for(value, 5.0)
            typing.append(float("inf") if took is None else time.monotonic() - sent)
            time.sleep(0.1)
        typ_ms = sorted(x * 1000 for x in typing)
        lat_ms = sorted(x * 1000 for x in latencies)
        print(f"events/s streamed: {args.rate}  batch interval: {args.batch_interval * 1000:.0f} ms  "
              f"images: {args.images} (repaint >= {args.frame_interval:g} s apart)  "
              f"TEXTUAL_FPS: {args.fps or 'default (60)'}  terminal: {COLS}x{ROWS}")
        print(f"terminal output: {rate_kb:.1f} KB/s over {elapsed:.1f} s (target <= 100 KB/s)")
        print(f"keystroke-to-repaint (F2/F3 screen switch, n={len(lat_ms)}): median {statistics.median(lat_ms):.1f} ms, "
              f"p90 {lat_ms[int(0.9 * (len(lat_ms) - 1))]:.1f} ms, max {lat_ms[-1]:.1f} ms (target <= 50 ms)")
        print(f"keystroke-to-repaint (typing in the input line, n={len(typ_ms)}): median {statistics.median(typ_ms):.1f} ms, "
              f"p90 {typ_ms[int(0.9 * (len(typ_ms) - 1))]:.1f} ms, max {typ_ms[-1]:.1f} ms (target <= 50 ms)")
        print(f"load average during the run: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPU(s)")
        return 0
    finally:
        term.close()


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
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--output-dir", default=None, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        child(args)
        return 0
    return parent(args)


if __name__ == "__main__":
    sys.exit(main())
