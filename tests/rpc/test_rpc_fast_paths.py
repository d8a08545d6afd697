"""The transports' own HTTP/1.1 and socket code paths: real sockets, a real echo-server
subprocess, and small in-test TCP peers that misbehave on purpose (malformed heads, oversized length
claims, non-rpent answers, idle keep-alive connections closed by the server)."""

from __future__ import annotations

import select
import socket
import struct
import sys
import threading
import time
import tracemalloc
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from rpent.rpc import RpcClient, RpcTimeout, RpcTransportError, codec
from rpent.rpc import http1
from rpent.rpc.protocol import make_request

ECHO = str(Path(__file__).with_name("echo_server.py"))
FRAME = struct.Struct("<4sQQ")


@pytest.fixture(scope="module")
def servers(start_rpc_server):
    """One echo server per transport (default limits, 1.5 s idle timeout for the keep-alive test)."""
    started = {t: start_rpc_server([sys.executable, ECHO, "--transport", t, "--idle-timeout-s", "1.5"])
               for t in ("socket", "http")}
    yield started
    for sp in started.values():
        sp.stop()


def _addr(endpoint: str) -> tuple[str, int]:
    host, port = endpoint.split("://")[1].rsplit(":", 1)
    return host, int(port)


def _read_http_reply(s: socket.socket) -> tuple[bytes, bytes, bytes]:
    """(head, body, bytes after the body) of one content-length response."""
    raw = b""
    while b"\r\n\r\n" not in raw:
        chunk = s.recv(65536)
        assert chunk, f"closed before a complete head: {raw!r}"
        raw += chunk
    head, rest = raw.split(b"\r\n\r\n", 1)
    n = int([h for h in head.split(b"\r\n") if h.lower().startswith(b"content-length")][0].split(b":")[1])
    while len(rest) < n:
        chunk = s.recv(65536)
        assert chunk, "closed mid-body"
        rest += chunk
    return head, rest[:n], rest[n:]


def _post(msg: bytes, extra: bytes = b"") -> bytes:
    return b"POST /rpc HTTP/1.1\r\nhost: x\r\n" + extra + b"content-length: %d\r\n\r\n" % len(msg) + msg


# ---------------------------------------------------------------- http1 heads (pure functions)
@pytest.mark.parametrize("raw, status", [
    (b"POST /rpc HTTP/1.1\r\nhost: x\r\n bad: folded", 400),
    (b"POST /rpc HTTP/1.1\r\nhost : x", 400),
    (b"POST /rpc HTTP/1.1\r\ncontent-length: 5\r\ncontent-length: 6", 400),
    (b"POST /rpc HTTP/1.1\r\ncontent-length: -1", 400),
    (b"POST /rpc HTTP/1.1\r\ntransfer-encoding: chunked", 501),
    (b"POST /rpc HTTP/2.0", 400),
    (b"POST  /rpc HTTP/1.1", 400),
])
def test_request_head_parser_refuses_what_it_cannot_serve_safely(raw, status):
    with pytest.raises(http1.HttpError) as info:
        http1.parse_request_head(raw)
    assert info.value.status == status


def test_request_head_parser_reads_what_the_transport_needs():
    req = http1.parse_request_head(b"POST /rpc?x=1 HTTP/1.1\r\nHost: x\r\nContent-Length: 12\r\n"
                                   b"Expect: 100-continue\r\nX-Rpent-Token: t\r\nConnection: keep-alive")
    assert (req.method, req.target, req.content_length, req.keep_alive, req.expect_continue) == \
        (b"POST", b"/rpc", 12, True, True)
    assert req.headers["x-rpent-token"] == "t"
    assert http1.parse_request_head(b"GET /healthz HTTP/1.0").keep_alive is False
    assert http1.parse_request_head(b"GET / HTTP/1.1\r\nconnection: close").keep_alive is False
    assert http1.bad_request_start(b"\x00\x00\x00") and http1.bad_request_start(b"GE\tT /")
    assert not http1.bad_request_start(b"POST /rpc HTTP/1.1\r") and not http1.bad_request_start(b"PO")


# ---------------------------------------------------------------- http server, real subprocess
def test_http_pipelined_requests_and_keep_alive(servers):
    """Two requests in one write: two answers in order on the same connection."""
    a = codec.dumps(make_request("echo", [1], {}, None))
    b = codec.dumps(make_request("echo", ["two"], {}, None))
    with socket.create_connection(_addr(servers["http"].endpoint), timeout=20) as s:
        s.sendall(_post(a) + _post(b))
        head1, body1, rest = _read_http_reply(s)
        assert head1.startswith(b"HTTP/1.1 200") and codec.decode(body1)["result"]["args"] == [1]
        while b"\r\n\r\n" not in rest:
            rest += s.recv(65536)
        s2 = _Prefixed(s, rest)
        head2, body2, _ = _read_http_reply(s2)
        assert head2.startswith(b"HTTP/1.1 200") and codec.decode(body2)["result"]["args"] == ["two"]


class _Prefixed:
    """A socket whose first recv returns bytes already read."""

    def __init__(self, s: socket.socket, prefix: bytes) -> None:
        self._s, self._prefix = s, prefix

    def recv(self, n: int) -> bytes:
        if self._prefix:
            out, self._prefix = self._prefix, b""
            return out
        return self._s.recv(n)


def test_http_expect_continue_and_http10_close(servers):
    msg = codec.dumps(make_request("echo", [np.arange(5)], {}, None))
    with socket.create_connection(_addr(servers["http"].endpoint), timeout=20) as s:
        s.sendall(b"POST /rpc HTTP/1.1\r\nhost: x\r\nexpect: 100-continue\r\ncontent-length: %d\r\n\r\n" % len(msg))
        interim = b""
        while b"\r\n\r\n" not in interim:
            interim += s.recv(1024)
        assert interim == b"HTTP/1.1 100 Continue\r\n\r\n"
        s.sendall(msg)
        head, body, _ = _read_http_reply(s)
        assert head.startswith(b"HTTP/1.1 200") and codec.decode(body)["result"]["args"][0].tolist() == [0, 1, 2, 3, 4]
    with socket.create_connection(_addr(servers["http"].endpoint), timeout=20) as s:
        s.sendall(b"GET /healthz HTTP/1.0\r\n\r\n")
        head, body, _ = _read_http_reply(s)
        assert head.startswith(b"HTTP/1.1 200") and b"connection: close" in head.lower()
        assert s.recv(1) == b""  # the server closed the connection after an HTTP/1.0 request


@pytest.mark.parametrize("request_bytes, status", [
    (b"POST /rpc HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", b"501"),
    (b"POST /rpc HTTP/1.1\r\nhost: x\r\ncontent-length: 3\r\ncontent-length: 4\r\n\r\nabc", b"400"),
    (b"POST /rpc HTTP/1.1\r\n" + b"x-pad: " + b"a" * 70000 + b"\r\n\r\n", b"431"),
])
def test_http_malformed_heads_get_a_status_and_the_server_keeps_serving(servers, request_bytes, status):
    with socket.create_connection(_addr(servers["http"].endpoint), timeout=20) as s:
        try:
            s.sendall(request_bytes)
        except OSError:
            pass  # the server may answer and close before reading everything
        head, body, _ = _read_http_reply(s)
        assert head.split(b" ")[1] == status and codec.decode(body)["error_type"] == "RpcProtocolError"
    with RpcClient(servers["http"].endpoint, timeout=20) as c:
        assert c.call("echo", "alive")["args"] == ["alive"]


def test_http_client_reconnects_after_the_server_closed_an_idle_connection(servers):
    """The server drops keep-alive connections idle 1.5 s; the next call notices and reconnects."""
    with RpcClient(servers["http"].endpoint, timeout=20) as c:
        assert c.call("echo", 1)["args"] == [1]
        idle = c._transport._idle[0]
        deadline = time.monotonic() + 60
        while not select.select([idle], [], [], 0.2)[0]:  # readable = the server closed it
            assert time.monotonic() < deadline, "the server never closed the idle connection"
        assert c.call("echo", 2)["args"] == [2]
        assert idle not in c._transport._idle


# ---------------------------------------------------------------- misbehaving peers (in-test TCP servers)
class _Peer:
    """A one-connection-at-a-time TCP server on 127.0.0.1 that answers every connection with ``reply``
    after reading the request head, then closes (or keeps the connection open with ``linger``)."""

    def __init__(self, reply: bytes, linger: float = 0.0) -> None:
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(4)
        self.port = self._sock.getsockname()[1]
        self._reply, self._linger = reply, linger
        self._stop = False
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(10)
                try:
                    conn.recv(65536)
                    conn.sendall(self._reply)
                    if self._linger:
                        time.sleep(self._linger)
                except OSError:
                    pass

    def close(self) -> None:
        self._stop = True
        self._sock.close()


def _peak_during(fn) -> int:
    tracemalloc.start()
    try:
        fn()
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    return peak


@pytest.mark.parametrize("protocol", ["http", "socket"])
def test_a_reply_claiming_a_huge_length_allocates_only_what_arrives(protocol):
    """Never allocate what a peer merely claims: a 200 MB length claim followed by 10 bytes and a
    close costs the client about its first buffer (1 MiB), not 200 MB."""
    claim = 200_000_000
    if protocol == "http":
        reply = (b"HTTP/1.1 200 OK\r\ncontent-type: application/x-msgpack\r\ncontent-length: %d\r\n\r\n" % claim
                 + b"x" * 10)
    else:
        reply = FRAME.pack(b"RPNT", 1, claim) + b"x" * 10
    peer = _Peer(reply)
    try:
        with RpcClient(f"{protocol}://127.0.0.1:{peer.port}", timeout=20) as c:
            def call():
                with pytest.raises(RpcTransportError, match="closed|truncated"):
                    c.call("echo", 1)
            peak = _peak_during(call)
        assert peak < 8 * 1024 * 1024, f"{peak} bytes allocated for a {claim}-byte claim"
    finally:
        peer.close()


def test_http_client_names_a_non_rpent_answer():
    peer = _Peer(b"HTTP/1.1 404 Not Found\r\ncontent-type: text/html\r\ncontent-length: 22\r\n\r\n<h1>not rpent here</h1>")
    try:
        with RpcClient(f"http://127.0.0.1:{peer.port}", timeout=20) as c, pytest.raises(RpcTransportError) as info:
            c.call("echo", 1)
        msg = str(info.value)
        assert "HTTP 404" in msg and "text/html" in msg and "not rpent here" in msg
        assert f"http://127.0.0.1:{peer.port}" in msg
    finally:
        peer.close()


def test_http_client_refuses_a_reply_over_its_limit_and_garbage_heads():
    peer = _Peer(b"HTTP/1.1 200 OK\r\ncontent-type: application/x-msgpack\r\ncontent-length: 999999\r\n\r\n")
    try:
        with RpcClient(f"http://127.0.0.1:{peer.port}", timeout=20, max_frame_bytes=4096) as c, \
                pytest.raises(RpcTransportError, match="max_frame_bytes=4096"):
            c.call("echo", 1)
    finally:
        peer.close()
    peer = _Peer(b"SSH-2.0-OpenSSH_9.6\r\n\r\n")
    try:
        with RpcClient(f"http://127.0.0.1:{peer.port}", timeout=20) as c, \
                pytest.raises(RpcTransportError, match="did not answer in HTTP"):
            c.call("echo", 1)
    finally:
        peer.close()


def test_http_token_with_a_control_character_is_refused():
    with pytest.raises(ValueError, match="control character"):
        RpcClient("http://127.0.0.1:1", token="abc\r\nx-evil: 1")


# ---------------------------------------------------------------- socket transport: calls run on the reading thread
def test_socket_many_interleaved_calls_on_one_connection_stay_in_step(servers):
    """The server runs calls on the thread that read them and hands reading on mid-call when more
    frames arrive: every reply still reaches its own caller (fast and sleeping calls, 6 threads)."""
    with RpcClient(servers["socket"].endpoint, timeout=60) as c:
        def one(i: int):
            if i % 7 == 0:
                return ("sleep", c.call("sleep", 0.02))
            out = c.call("echo", i, np.full(257 + i, i, np.int32))["args"]
            return ("echo", (out[0], int(out[1][0]), int(out[1][-1]), out[1].size))

        with ThreadPoolExecutor(6) as ex:
            results = list(ex.map(one, range(150)))
    for i, (kind, value) in enumerate(results):
        if i % 7 == 0:
            assert (kind, value) == ("sleep", 0.02)
        else:
            assert value == (i, i, i, 257 + i), (i, value)


def test_socket_a_timed_out_call_does_not_disturb_the_others(servers):
    """A call that times out on a shared connection leaves it usable: a concurrent call still gets
    its reply, and the late reply of the timed-out call is dropped."""
    with RpcClient(servers["socket"].endpoint, timeout=60) as c:
        box = {}
        started = threading.Event()

        def slow():
            started.set()
            try:
                c.call("sleep", 2.0, timeout=0.3)
            except RpcTimeout as exc:
                box["timeout"] = exc

        t = threading.Thread(target=slow)
        t.start()
        started.wait(10)
        box["other"] = c.call("sleep", 0.8)
        t.join(30)
        assert isinstance(box.get("timeout"), RpcTimeout) and box["other"] == 0.8
        time.sleep(0.1)
        assert c.call("echo", "after")["args"] == ["after"]
