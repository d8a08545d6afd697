"""RPC throughput benchmark: one LIBERO-sized observation per call, both transports, vs a floor.

The observation is what ``env.policy_obs`` returns: two 256x256x3 uint8 images (main, wrist)
plus an 8-float32 state (393,248 bytes of array data). Each call is a small request and that
observation as the reply, client and server in separate processes on loopback. The floor is a
bare loopback TCP round trip of the same reply size (16-byte request, raw ``sendall`` of the
bytes, ``recv_into`` a preallocated buffer) measured in the same run.

Two upstream-style baselines, written here so the ratio prints in the same run (loopback only; the
pickle rows run only between this benchmark's own processes, with an authkey):

* ``http json+b64``: as upstream RPent's HTTP transport: ``POST /call`` with a JSON body, an ``{"ok", "result"}`` envelope in which every array is
  ``{"__ndarray__": base64, "dtype", "shape"}``, decoded into writable copies; stdlib threading
  ``http.server``, and a new connection per call on the client (``requests.post`` without a session);
* ``socket pickle``: as upstream's socket transport: one TCP connection per call, 4-byte big-endian
  length + pickle (highest protocol) frames, the same envelope.

Usage::

    python benchmarks/rpc_bench.py [--rounds 5] [--seconds 1] [--transports socket,http]

All servers start first; each round measures every row for ``--seconds`` (rows interleaved, so
load from other processes hits them alike). Prints per row: best and median calls/s over the
rounds, MB/s of reply payload (1 MB = 1e6 bytes) and the share of the floor; then each transport's ratio
to its upstream-style baseline next to the ceiling of that ratio (the bare TCP floor over the baseline:
no transport that moves the same bytes over loopback can exceed it on that machine at that load).
Targets on the 2-core dev machine: socket >= 2,500 calls/s, http >= 900 calls/s,
socket >= 25 % of the floor; socket and http each >= 8x their upstream-style baseline.
"""

from __future__ import annotations

import argparse
import base64
import json
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


# rpent transport -> its upstream-style baseline row
BASELINES = {"socket": "socket pickle (upstream-style)", "http": "http json+b64 (upstream-style)"}


def _b64_tree(x):
    """Upstream HTTP encoding: every array as ``{"__ndarray__": base64, "dtype", "shape"}``."""
    if isinstance(x, np.ndarray):
        return {"__ndarray__": base64.b64encode(x.tobytes()).decode("ascii"), "dtype": str(x.dtype), "shape": list(x.shape)}
    if isinstance(x, dict):
        return {k: _b64_tree(v) for k, v in x.items()}
    return x


def _unb64_tree(x):
    """Inverse of :func:`_b64_tree` (copies, so the arrays are writable, as upstream's decoder does)."""
    if isinstance(x, dict):
        if "__ndarray__" in x and set(x) <= {"__ndarray__", "dtype", "shape"}:
            return np.frombuffer(base64.b64decode(x["__ndarray__"]), dtype=x["dtype"]).reshape(x["shape"]).copy()
        return {k: _unb64_tree(v) for k, v in x.items()}
    return x


def serve_json_http() -> None:
    """Child role (baseline): stdlib threading HTTP server, ``POST /call`` with a JSON envelope reply."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    obs = observation()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 - stdlib name
            n = int(self.headers.get("Content-Length", "0"))
            if self.path != "/call" or n > 1 << 20:
                self.send_error(404 if self.path != "/call" else 413)
                return
            json.loads(self.rfile.read(n))
            body = json.dumps({"ok": True, "result": _b64_tree(obs)}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(f"json-http listening on 127.0.0.1:{srv.server_address[1]}", flush=True)
    srv.serve_forever()


def _recv_exact(s: socket.socket, n: int) -> bytes:
    chunks, got = [], 0
    while got < n:
        b = s.recv(min(n - got, 1 << 20))
        if not b:
            raise ConnectionError("peer closed")
        chunks.append(b)
        got += len(b)
    return b"".join(chunks)


def serve_pickle_socket(token: bytes) -> None:
    """Child role (baseline): one TCP connection per call, 4-byte big-endian length + pickle frames.

    Only this benchmark's parent talks to it (loopback; a connection must first send the parent's
    random token, else it is closed before anything is unpickled)."""
    import pickle

    obs = observation()
    lsock = socket.socket()
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(8)
    print(f"pickle-socket listening on 127.0.0.1:{lsock.getsockname()[1]}", flush=True)
    while True:
        conn, _ = lsock.accept()
        with conn:
            try:
                if _recv_exact(conn, len(token)) != token:
                    continue
                (n,) = struct.unpack(">I", _recv_exact(conn, 4))
                pickle.loads(_recv_exact(conn, n))  # noqa: S301 - own child/parent only (see docstring)
                reply = pickle.dumps({"ok": True, "result": obs}, protocol=pickle.HIGHEST_PROTOCOL)
                conn.sendall(struct.pack(">I", len(reply)) + reply)
            except ConnectionError:
                continue


def json_http_caller(addr: str):
    """One baseline call: a new HTTP connection, POST the JSON request, parse the reply, decode the arrays."""
    import http.client

    host, port = addr.rsplit(":", 1)
    req = json.dumps({"method": "env.policy_obs", "args": [], "kwargs": {}}).encode()

    def one() -> dict:
        c = http.client.HTTPConnection(host, int(port), timeout=30)
        try:
            c.request("POST", "/call", body=req, headers={"Content-Type": "application/json"})
            env = json.loads(c.getresponse().read())
        finally:
            c.close()
        return _unb64_tree(env["result"])

    out = one()
    assert out["main_image"].shape == IMAGE_SHAPE and out["state"].dtype == np.float32
    return one


def pickle_socket_caller(addr: str, token: bytes):
    """One baseline call: a new TCP connection, one pickled request frame, one pickled reply frame."""
    import pickle

    host, port = addr.rsplit(":", 1)

    def one() -> dict:
        with socket.create_connection((host, int(port)), timeout=30) as s:
            req = pickle.dumps({"method": "env.policy_obs", "args": (), "kwargs": {}, "session_id": None},
                               protocol=pickle.HIGHEST_PROTOCOL)
            s.sendall(token + struct.pack(">I", len(req)) + req)
            (n,) = struct.unpack(">I", _recv_exact(s, 4))
            return pickle.loads(_recv_exact(s, n))["result"]  # noqa: S301 - own child server on loopback

    out = one()
    assert out["main_image"].shape == IMAGE_SHAPE and out["state"].dtype == np.float32
    return one


def _spawn(args: list[str], stdin_line: bytes | None = None) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, __file__, *args], stdout=subprocess.PIPE, stdin=subprocess.PIPE, text=True)
    if stdin_line is not None:
        proc.stdin.write(stdin_line.decode() + "\n")
        proc.stdin.flush()
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
    p.add_argument("--role", choices=("main", "rpc", "floor", "json-http", "pickle-socket"), default="main")
    p.add_argument("--seconds", type=float, default=1.0, help="measuring time per row per round (s)")
    p.add_argument("--rounds", type=int, default=5, help="rounds; rows are interleaved in each round")
    p.add_argument("--transports", default="socket,http")
    p.add_argument("--no-baselines", action="store_true", help="skip the upstream-style baseline rows")
    args, rest = p.parse_known_args()
    if args.role == "rpc":
        serve_rpc(rest)
        return
    if args.role == "floor":
        serve_floor()
        return
    if args.role == "json-http":
        serve_json_http()
        return
    if args.role == "pickle-socket":
        serve_pickle_socket(sys.stdin.buffer.readline().strip())
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
        if not args.no_baselines:
            token = os.urandom(16).hex().encode()
            proc, addr = _spawn(["--role", "pickle-socket"], stdin_line=token)
            procs.append(proc)
            rows[BASELINES["socket"]] = pickle_socket_caller(addr, token)
            proc, addr = _spawn(["--role", "json-http"])
            procs.append(proc)
            rows[BASELINES["http"]] = json_http_caller(addr)
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
    width = max(len(n) for n in rates) + 1
    print(f"RPC benchmark: one observation per call ({payload_bytes():,} B: 2x uint8[256,256,3] + float32[8]), "
          f"{os.cpu_count()} CPUs, python {sys.version.split()[0]}, {args.rounds} rounds x {args.seconds:g} s, "
          f"load avg {os.getloadavg()[0]:.1f}")
    print(f"{'transport':<{width}} {'best calls/s':>12} {'median':>8} {'best MB/s':>10} {'% floor (best)':>15} {'(median)':>9}")
    for name, rs in rates.items():
        best, med = max(rs), statistics.median(rs)
        print(f"{name:<{width}} {best:>12,.0f} {med:>8,.0f} {best * mb:>10,.0f} {100 * best / floor_best:>14.0f}% "
              f"{100 * med / floor_med:>8.0f}%")
    for tr, base in BASELINES.items():
        if tr in rates and base in rates:
            print(f"{tr} vs {base}: {max(rates[tr]) / max(rates[base]):.1f}x (best), "
                  f"{statistics.median(rates[tr]) / statistics.median(rates[base]):.1f}x (median); target >= 8x; "
                  f"ceiling (bare TCP vs {base}): {floor_best / max(rates[base]):.1f}x (best), "
                  f"{floor_med / statistics.median(rates[base]):.1f}x (median)")


if __name__ == "__main__":
    main()
