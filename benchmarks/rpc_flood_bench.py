"""Memory a peer can make an RPC server hold with bare frame headers .

Starts an echo server subprocess per transport (default limits: 256 MiB frames), opens N
connections that each send only a header claiming ``--claim-mb`` MB (socket: the 20-byte frame
header; http: a POST head with that content-length) and 1 KB of payload, then prints the
server's RSS before and after, next to the baseline of the same run: the bytes the headers
claimed (what a server that allocates the claimed length up front would hold).

    python benchmarks/rpc_flood_bench.py [--connections 20] [--claim-mb 200]

Run it from a directory other than a checkout you do not mean to measure: the server is started
with ``python -c``, which puts the current directory first on ``sys.path``.
"""

from __future__ import annotations

import argparse
import os
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

SERVER = """
import sys
from rpent.rpc import RpcServer
from rpent.rpc.cli import add_server_args, serve_from_args
import argparse
p = argparse.ArgumentParser(); add_server_args(p)
s = RpcServer("flood_bench"); s.register("echo", lambda x: x, readonly=True)
serve_from_args(s, p.parse_args())
"""


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def run(transport: str, connections: int, claim: int) -> tuple[float, float]:
    proc = subprocess.Popen([sys.executable, "-c", SERVER, "--transport", transport, "--port", "0"],
                            stdout=subprocess.PIPE, text=True, env=dict(os.environ, PYTHONUNBUFFERED="1"))
    try:
        line = proc.stdout.readline().strip()
        host, port = line.rsplit("://", 1)[1].rsplit(":", 1)
        time.sleep(0.5)
        before = _rss_mb(proc.pid)
        if transport == "socket":
            head = struct.pack("<4sQQ", b"RPNT", 1, claim)
        else:
            head = f"POST /rpc HTTP/1.1\r\nhost: x\r\ncontent-length: {claim}\r\n\r\n".encode()
        conns = []
        for _ in range(connections):
            s = socket.create_connection((host, int(port)))
            s.sendall(head + b"\0" * 1024)
            conns.append(s)
        time.sleep(2.0)
        after = _rss_mb(proc.pid)
        for s in conns:
            s.close()
        return before, after
    finally:
        proc.terminate()
        proc.wait(10)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--connections", type=int, default=20)
    ap.add_argument("--claim-mb", type=int, default=200, help="length each header claims, MB (<= 256)")
    args = ap.parse_args()
    claim = args.claim_mb * 1_000_000
    print(f"load average: {os.getloadavg()[0]:.2f}")
    print(f"baseline (claimed by {args.connections} headers): {args.connections * claim / 1e6:,.0f} MB")
    print("transport  RSS before (MB)  RSS after (MB)  grown (MB)")
    for transport in ("socket", "http"):
        before, after = run(transport, args.connections, claim)
        print(f"{transport:<9}  {before:>15.1f}  {after:>14.1f}  {after - before:>10.1f}")


if __name__ == "__main__":
    main()
