"""A tiny real RPC service for TUI tests: ``python tests/tui/tiny_service.py [--fail] [--lines N]``.

Prints N log lines, then serves ``tiny.echo`` until the supervisor stops it; ``--fail`` exits 1
before the readiness line (a shared service that fails to start).
"""

import argparse
import sys

from rpent.rpc.cli import add_server_args, serve_from_args
from rpent.rpc.server import RpcServer


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--fail", action="store_true")
    parser.add_argument("--lines", type=int, default=3)
    add_server_args(parser)
    args = parser.parse_args()
    for i in range(args.lines):
        print(f"tiny log line {i}", flush=True)
    if args.fail:
        print("error: checkpoint not found (test)", flush=True)
        sys.exit(1)
    server = RpcServer(name="tiny")
    server.register("tiny.echo", lambda x: x, readonly=True)
    serve_from_args(server, args)


if __name__ == "__main__":
    main()
