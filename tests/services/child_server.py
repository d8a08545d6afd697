"""Test service (run by the Supervisor): an RpcServer with misbehaviour switches.

    --exit-before-ready CODE   print a few lines, then exit with CODE before binding
    --never-ready              print a line, then sleep without binding
    --ignore-sigterm           block SIGTERM in every thread (only SIGKILL stops it)
    --grandchild-pidfile PATH  spawn `sleep 300` (same process group) and write its pid to PATH
    --delay S                  sleep S seconds before binding
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time

from rpent.rpc import RpcServer
from rpent.rpc.cli import add_server_args, serve_from_args


def main() -> None:
    p = argparse.ArgumentParser(allow_abbrev=False)
    add_server_args(p)
    p.add_argument("--name", default="child")
    p.add_argument("--exit-before-ready", type=int, default=None)
    p.add_argument("--never-ready", action="store_true")
    p.add_argument("--ignore-sigterm", action="store_true")
    p.add_argument("--grandchild-pidfile", default=None)
    p.add_argument("--delay", type=float, default=0.0)
    args = p.parse_args()
    if args.ignore_sigterm:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    print(f"child {args.name} starting (pid {os.getpid()}, env MARKER={os.environ.get('MARKER', '')})", flush=True)
    if args.exit_before_ready is not None:
        print("loading weights ...", flush=True)
        print("error: checkpoint not found: /nonexistent/model.safetensors", file=sys.stderr, flush=True)
        raise SystemExit(args.exit_before_ready)
    if args.never_ready:
        time.sleep(300)
    if args.grandchild_pidfile:
        gc = subprocess.Popen(["sleep", "300"], stdin=subprocess.DEVNULL)
        with open(args.grandchild_pidfile + ".tmp", "w") as f:
            f.write(str(gc.pid))
        os.replace(args.grandchild_pidfile + ".tmp", args.grandchild_pidfile)
    time.sleep(args.delay)
    server = RpcServer(args.name)
    server.register("pid", os.getpid, readonly=True)
    server.register("say", lambda text: print(text, flush=True) or text, readonly=False)
    serve_from_args(server, args)


if __name__ == "__main__":
    main()
