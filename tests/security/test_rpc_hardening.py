"""RPC servers that cannot be made to allocate or to hold threads, both
transports, against a real echo-server subprocess: header floods with an RSS bound, 1,000 fuzzed
frames per transport, timeouts for stalled frames and idle connections, a connection limit, the
token checked before any large read, and protocol mismatches that name the fix."""

from __future__ import annotations

import os
import random
import socket
import struct
import sys
import time
from pathlib import Path

import pytest

from rpent.rpc import RemoteError, RpcClient, RpcTransportError
from rpent.rpc import codec
from rpent.rpc.protocol import make_request

ECHO = str(Path(__file__).parent.parent / "rpc" / "echo_server.py")
FRAME = struct.Struct("<4sQQ")
TOKEN = "t0ken-for-the-security-tests"


def _addr(endpoint: str) -> tuple[str, int]:
    host, port = endpoint.split("://")[1].rsplit(":", 1)
    return host, int(port)


def _rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def _threads(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/task"))


def _sockets(pid: int) -> int:
    """Open socket file descriptors of ``pid`` (listeners and connections)."""
    n = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            n += os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:")
        except OSError:
            pass
    return n


def _alive(endpoint: str, **kw) -> None:
    with RpcClient(endpoint, timeout=10, **kw) as c:
        assert c.call("echo", "alive")["args"] == ["alive"]


def _closed_by_server(s: socket.socket, within_s: float) -> bool:
    s.settimeout(within_s)
    try:
        while s.recv(65536):
            pass
        return True
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


def _start(spawn_server, transport: str, *extra: str, env: dict | None = None):
    return spawn_server([sys.executable, ECHO, "--transport", transport, *extra], env=env)


def _flood_bytes(transport: str, claimed: int) -> bytes:
    if transport == "socket":
        return FRAME.pack(b"RPNT", 7, claimed)
    return (b"POST /rpc HTTP/1.1\r\nhost: x\r\ncontent-type: application/x-msgpack\r\n"
            b"content-length: " + str(claimed).encode() + b"\r\n\r\n")


@pytest.mark.parametrize("transport", ["socket", "http"])
def test_a_flood_of_headers_claiming_huge_frames_allocates_nothing(spawn_server, transport):
    server = _start(spawn_server, transport)            # default --max-frame-bytes: 256 MiB
    pid = server.proc.pid
    _alive(server.endpoint)
    before = _rss(pid)
    conns = []
    try:
        for _ in range(20):                                 # 20 x 50 MB claimed = 1 GB (bounded if this regresses)
            s = socket.create_connection(_addr(server.endpoint))
            s.sendall(_flood_bytes(transport, 50_000_000) + b"\x00" * 1000)
            conns.append(s)
        time.sleep(1.0)
        _alive(server.endpoint)
        grown = _rss(pid) - before
        assert grown < 48 * 1024**2, f"server RSS grew {grown / 1e6:.0f} MB for 20 bare headers"
    finally:
        for s in conns:
            s.close()


@pytest.mark.parametrize("transport", ["socket", "http"])
def test_stalled_frames_and_idle_connections_are_dropped(spawn_server, transport):
    server = _start(spawn_server, transport, "--frame-timeout-s", "0.5", "--idle-timeout-s", "1.5")
    with socket.create_connection(_addr(server.endpoint)) as stalled, \
            socket.create_connection(_addr(server.endpoint)) as idle:
        t0 = time.monotonic()  # both connected: the idle one has been idle since (at most) now
        stalled.sendall(_flood_bytes(transport, 5000) + b"x" * 100)
        assert _closed_by_server(stalled, 30.0), "an incomplete frame was kept past --frame-timeout-s"
        assert _closed_by_server(idle, 30.0), "an idle connection was kept past --idle-timeout-s"
        assert time.monotonic() - t0 > 1.0  # not before its 1.5 s idle timeout
    with RpcClient(server.endpoint, timeout=10) as c:   # a client whose connection went idle reconnects
        assert c.call("echo", 1)["args"] == [1]
        time.sleep(2.0)
        assert c.call("echo", 2)["args"] == [2]
    deadline = time.monotonic() + 20  # a loaded machine can take seconds to end the dropped connections' threads
    while _threads(server.proc.pid) >= 12 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _threads(server.proc.pid) < 12


@pytest.mark.parametrize("transport", ["socket", "http"])
def test_a_call_longer_than_the_idle_timeout_still_gets_its_reply(spawn_server, transport):
    server = _start(spawn_server, transport, "--idle-timeout-s", "0.5")
    with RpcClient(server.endpoint, timeout=10) as c:
        assert c.call("sleep", 1.5) == 1.5


@pytest.mark.parametrize("transport", ["socket", "http"])
def test_connections_past_the_limit_get_a_named_error(spawn_server, transport):
    server = _start(spawn_server, transport, "--max-connections", "3")
    held = [socket.create_connection(_addr(server.endpoint)) for _ in range(3)]
    try:
        time.sleep(0.3)
        with RpcClient(server.endpoint, timeout=10) as c, pytest.raises((RpcTransportError, RemoteError)) as info:
            c.call("echo", 1)
        assert "--max-connections" in str(info.value)
        held.pop().close()
        deadline = time.monotonic() + 60  # the server frees the slot once it sees that close
        while True:
            try:
                _alive(server.endpoint)
                break
            except (RpcTransportError, RemoteError):
                assert time.monotonic() < deadline, "the slot of a closed connection was never freed"
                time.sleep(0.1)
    finally:
        for s in held:
            s.close()


@pytest.mark.parametrize("transport", ["socket", "http"])
def test_the_token_is_checked_before_any_large_read(spawn_server, transport):
    server = _start(spawn_server, transport, env={"RPENT_RPC_TOKEN": TOKEN})
    pid = server.proc.pid
    before = _rss(pid)
    with socket.create_connection(_addr(server.endpoint)) as s:
        s.sendall(_flood_bytes(transport, 100_000_000) + b"\x00" * 70_000)
        s.settimeout(5)
        data = s.recv(65536)
        assert b"RpcAuthError" in data and b"token" in data
        assert _closed_by_server(s, 5.0)
    assert _rss(pid) - before < 32 * 1024**2
    big = "x" * 2_000_000                                  # an authenticated client sends large frames
    with RpcClient(server.endpoint, timeout=10, token=TOKEN) as c:
        assert len(c.call("echo", big)["args"][0]) == 2_000_000
    with RpcClient(server.endpoint, timeout=10, token="wrong") as c, pytest.raises(RemoteError, match="RpcAuthError|token"):
        c.call("echo", big)


def _socket_fuzz_frames(rng: random.Random, n: int) -> list[bytes]:
    good = [codec.dumps(make_request("echo", [i, "a" * rng.randrange(50)], {}, None)) for i in range(8)]
    frames = []
    for i in range(n):
        msg = bytearray(rng.choice(good))
        kind = i % 5
        if kind == 0:                                       # flipped bytes in the message
            for _ in range(rng.randrange(1, 6)):
                msg[rng.randrange(len(msg))] = rng.randrange(256)
            frames.append(FRAME.pack(b"RPNT", i + 1, len(msg)) + msg)
        elif kind == 1:                                     # a length that lies (short or long)
            frames.append(FRAME.pack(b"RPNT", i + 1, rng.choice([0, 1, len(msg) + rng.randrange(1, 1 << 30)])) + msg)
        elif kind == 2:                                     # random bytes
            frames.append(rng.randbytes(rng.randrange(1, 200)))
        elif kind == 3:                                     # truncated frame
            full = FRAME.pack(b"RPNT", i + 1, len(msg)) + msg
            frames.append(full[: rng.randrange(1, len(full))])
        else:                                               # msgpack of the wrong shape
            frames.append(FRAME.pack(b"RPNT", i + 1, 3) + rng.choice([b"\x93\x01\x02\x03", b"\xc1\xc1\xc1", b"\xa3abc"])[:3])
    return frames


def _http_fuzz_requests(rng: random.Random, n: int) -> list[bytes]:
    body = codec.dumps(make_request("echo", [1], {}, None))
    good = (b"POST /rpc HTTP/1.1\r\nhost: x\r\ncontent-type: application/x-msgpack\r\ncontent-length: "
            + str(len(body)).encode() + b"\r\n\r\n" + body)
    out = []
    for i in range(n):
        req = bytearray(good)
        kind = i % 4
        if kind == 0:
            for _ in range(rng.randrange(1, 6)):
                req[rng.randrange(len(req))] = rng.randrange(256)
        elif kind == 1:
            req = bytearray(good.replace(b"content-length: " + str(len(body)).encode(),
                                         b"content-length: " + str(rng.randrange(1 << 31)).encode()))
        elif kind == 2:
            req = bytearray(rng.randbytes(rng.randrange(1, 300)))
        else:
            req = req[: rng.randrange(1, len(req))]
        out.append(bytes(req))
    return out


@pytest.mark.parametrize("transport", ["socket", "http"])
def test_a_thousand_fuzzed_frames_leave_the_server_serving_and_small(spawn_server, transport):
    server = _start(spawn_server, transport)
    pid = server.proc.pid
    _alive(server.endpoint)
    before_rss, before_threads, before_sockets = _rss(pid), _threads(pid), _sockets(pid)
    rng = random.Random(19)
    frames = _socket_fuzz_frames(rng, 1000) if transport == "socket" else _http_fuzz_requests(rng, 1000)
    addr = _addr(server.endpoint)
    for data in frames:
        with socket.create_connection(addr, timeout=5) as s:
            try:
                s.sendall(data)
                s.shutdown(socket.SHUT_WR)                  # end of input: the server must not wait for more
                while s.recv(65536):
                    pass
            except (ConnectionResetError, BrokenPipeError):
                pass
    _alive(server.endpoint)
    assert _rss(pid) - before_rss < 64 * 1024**2
    deadline = time.monotonic() + 20  # a loaded 2-core CI machine can take seconds to schedule the exits
    while _sockets(pid) > before_sockets and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _sockets(pid) <= before_sockets, "connections outlived their fuzzed clients (server sockets left open)"
    # Threads: the handler pool (rpent.rpc.workers) keeps its idle workers and grows by one whenever a
    # call arrives before the previous worker marked itself idle, which a loaded machine does now and
    # then even for one client at a time (seen: +7 at load 20, every one idle in a futex wait). A thread
    # per fuzzed connection left behind would be far more than that allowance.
    while _threads(pid) > before_threads + 24 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _threads(pid) <= before_threads + 24, "connection threads outlived their fuzzed connections"
