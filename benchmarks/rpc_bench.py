"""RPC throughput benchmark: one LIBERO-sized observation per call, both transports, vs a floor.

The observation is what ``env.policy_obs`` returns: two 256x256x3 uint8 images (main, wrist)
plus an 8-float32 state (393,248 bytes of array data). Each call is a small request and that
observation as the reply, client and server in separate processes on loopback. The floor is a
bare loopback TCP round trip of the same reply size (16-byte request, raw ``sendall`` of the
bytes, ``recv_into`` a preallocated buffer) measured in the same run.

Usage::

    python benchmarks/rpc_bench.py [--rounds 5] [--seconds 1] [--transports socket,http]

All servers start first; each round measures every row for ``--seconds`` (rows interleaved, so
load from other processes hits them alike). Prints per row: best and median calls/s over the
rounds, MB/s of reply payload (1 MB = 1e6 bytes) and the share of the floor.
Targets on the 2-core dev machine: socket >= 2,500 calls/s, http >= 900 calls/s,
socket >= 25 % of the floor.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import struct
import subprocess
import sys
import time

import numpy as np

IMAGE_SHAPE = (256, 256, 3)
STATE_DIM = 8


def observation() -> dict:
    """A LIBERO policy observation: main/wrist uint8 [256,256,3] images and float32 [8] state."""
    rng = np.random.default_rng(0)
    return {
        "main_image": rng.integers(0, 255, IMAGE_SHAPE, dtype=np.uint8),
        "wrist_image": rng.integers(0, 255, IMAGE_SHAPE, dtype=np.uint8),
        "state": rng.standard_normal(STATE_DIM).astype(np.float32),
    }


def payload_bytes() -> int:
    """Bytes of array data in one observation (393,248)."""
    return sum(v.nbytes for v in observation().values())


def serve_rpc(argv: list[str]) -> None:
    """Child role: an RpcServer offering ``env.policy_obs`` (read-only)."""
    from rpent.rpc import RpcServer
    from rpent.rpc.cli import add_server_args, serve_from_args

    p = argparse.ArgumentParser()
    add_server_args(p)
    args = p.parse_args(argv)
    obs = observation()
    server = RpcServer("bench")
    server.register("env.policy_obs", lambda: obs, readonly=True)
    serve_from_args(server, args)


def serve_floor() -> None:
    """Child role: bare TCP server replying to each 16-byte request with the observation's bytes."""
    blob = b"".join(v.tobytes() for v in observation().values())
    reply = struct.pack("<Q", len(blob)) + blob
    lsock = socket.socket()
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(1)
    print(f"floor listening on 127.0.0.1:{lsock.getsockname()[1]}", flush=True)
    conn, _ = lsock.accept()
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    req = bytearray(16)
    view = memoryview(req)
    while True:
        got = 0
        while got < 16:
            k = conn.recv_into(view[got:])
            if not k:
                return
            got += k
        conn.sendall(reply)


def _spawn(args: list[str]) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, __file__, *args], stdout=subprocess.PIPE, stdin=subprocess.PIPE, text=True)
    line = proc.stdout.readline().strip()
    if not line:
        raise RuntimeError(f"benchmark server {args} exited with {proc.wait()}")
    return proc, line.rsplit(" ", 1)[1]


def floor_caller(addr: str):
    """A function doing one bare loopback round trip (16-byte request, observation-sized reply)."""
    host, port = addr.rsplit(":", 1)
    s = socket.create_connection((host, int(port)))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    buf = bytearray(8 + payload_bytes())
    view = memoryview(buf)
    req = bytes(16)

    def one() -> None:
        s.sendall(req)
        got = 0
        while got < len(buf):
            k = s.recv_into(view[got:])
            if not k:
                raise RuntimeError("floor server closed")
            got += k

    return one


def rpc_caller(endpoint: str, transport: str):
    """A function doing one ``env.policy_obs`` call over ``transport`` (checks the reply once)."""
    from rpent.rpc import RpcClient

    if not endpoint.startswith(transport + "://"):
        raise RuntimeError(f"expected a {transport} server, got {endpoint}")
    c = RpcClient(endpoint, timeout=30.0)
    out = c.call("env.policy_obs")
    assert out["main_image"].shape == IMAGE_SHAPE and out["state"].dtype == np.float32
    return lambda: c.call("env.policy_obs")


def _rate(fn, seconds: float) -> float:
    for _ in range(50):
        fn()
    n = 0
    t0 = time.perf_counter()
    end = t0 + seconds
    while True:
        for _ in range(50):
            fn()
        n += 50
        now = time.perf_counter()
        if now >= end:
            return n / (now - t0)


def main() -> None:
    """Run the benchmark and print the table (or act as a child server with ``--role``)."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                allow_abbrev=False)
    p.add_argument("--role", choices=("main", "rpc", "floor"), default="main")
    p.add_argument("--seconds", type=float, default=1.0, help="measuring time per row per round (s)")
    p.add_argument("--rounds", type=int, default=5, help="rounds; rows are interleaved in each round")
    p.add_argument("--transports", default="socket,http")
    args, rest = p.parse_known_args()
    if args.role == "rpc":
        serve_rpc(rest)
        return
    if args.role == "floor":
        serve_floor()
        return
    procs = []
    try:
        proc, addr = _spawn(["--role", "floor"])
        procs.append(proc)
        rows = {"floor (bare TCP)": floor_caller(addr)}
        for tr in args.transports.split(","):
            proc, ep = _spawn(["--role", "rpc", "--transport", tr, "--parent-watch"])
            procs.append(proc)
            rows[tr] = rpc_caller(ep, tr)
        rates: dict[str, list[float]] = {name: [] for name in rows}
        for _ in range(args.rounds):
            for name, fn in rows.items():
                rates[name].append(_rate(fn, args.seconds))
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
    mb = payload_bytes() / 1e6
    floor_best = max(rates["floor (bare TCP)"])
    floor_med = statistics.median(rates["floor (bare TCP)"])
    print(f"RPC benchmark: one observation per call ({payload_bytes():,} B: 2x uint8[256,256,3] + float32[8]), "
          f"{os.cpu_count()} CPUs, python {sys.version.split()[0]}, {args.rounds} rounds x {args.seconds:g} s, "
          f"load avg {os.getloadavg()[0]:.1f}")
    print(f"{'transport':<18} {'best calls/s':>12} {'median':>8} {'best MB/s':>10} {'% floor (best)':>15} {'(median)':>9}")
    for name, rs in rates.items():
        best, med = max(rs), statistics.median(rs)
        print(f"{name:<18} {best:>12,.0f} {med:>8,.0f} {best * mb:>10,.0f} {100 * best / floor_best:>14.0f}% "
              f"{100 * med / floor_med:>8.0f}%")


if __name__ == "__main__":
    main()
