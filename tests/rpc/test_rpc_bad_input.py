"""Malformed, truncated and oversized frames/bodies against a live server that keeps serving."""

from __future__ import annotations

import socket
import struct
import sys
from pathlib import Path

import numpy as np
import pytest

from rpent.rpc import RemoteError, RpcClient, RpcTransportError
from rpent.rpc import codec
from rpent.rpc.protocol import make_request

ECHO = str(Path(__file__).with_name("echo_server.py"))
MAX = 1 << 20  # server limit used here: 1 MiB
FRAME = struct.Struct("<4sQQ")


@pytest.fixture(scope="module")
def servers(start_rpc_server):
    """One echo server per transport, with a 1 MiB frame limit."""
    started = {t: start_rpc_server([sys.executable, ECHO, "--transport", t, "--max-frame-bytes", str(MAX)])
               for t in ("socket", "http")}
    yield started
    for sp in started.values():
        sp.stop()


@pytest.fixture(params=["socket", "http"])
def server(request, servers):
    return servers[request.param]


def _addr(endpoint: str) -> tuple[str, int]:
    host, port = endpoint.split("://")[1].rsplit(":", 1)
    return host, int(port)


def _raw(endpoint: str) -> socket.socket:
    s = socket.create_connection(_addr(endpoint), timeout=5)
    return s


def _read_frame(s: socket.socket) -> tuple[int, dict]:
    hdr = _recv_exact(s, FRAME.size)
    magic, rid, n = FRAME.unpack(hdr)
    assert magic == b"RPNT"
    return rid, codec.decode(_recv_exact(s, n))


def _recv_exact(s: socket.socket, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = s.recv(n - len(out))
        if not chunk:
            raise ConnectionError(f"closed after {len(out)} of {n} bytes")
        out += chunk
    return out


def _recv_all(s: socket.socket) -> bytes:
    out = b""
    while chunk := s.recv(65536):
        out += chunk
    return out


def _closed(s: socket.socket) -> bool:
    try:
        return s.recv(1) == b""
    except ConnectionResetError:
        return True


def _still_serving(server) -> None:
    with RpcClient(server.endpoint, timeout=5) as c:
        assert c.call("echo", "alive")["args"] == ["alive"]


def _request_frame(rid: int, method: str, *args) -> bytes:
    msg = codec.dumps(make_request(method, args, {}, None))
    return FRAME.pack(b"RPNT", rid, len(msg)) + msg


def test_oversized_argument_gets_error_reply_and_server_keeps_serving(server):
    with RpcClient(server.endpoint, timeout=10) as c:
        with pytest.raises(RemoteError) as info:
            c.call("echo", np.zeros(2 * MAX, np.uint8))
        assert info.value.remote_type == "RpcFrameTooLarge"
        assert str(MAX) in info.value.remote_message and "--max-frame-bytes" in info.value.remote_message
    _still_serving(server)


def test_client_limit_on_replies(server):
    with RpcClient(server.endpoint, timeout=10, max_frame_bytes=64 * 1024) as c:
        with pytest.raises(RpcTransportError, match="max_frame_bytes"):
            c.call("big", 200_000)
    _still_serving(server)


@pytest.mark.parametrize("garbage", [b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", b"\x00" * 40, b"hello there, rpc server!\r\n\r\n"])
def test_garbage_bytes(server, garbage):
    with _raw(server.endpoint) as s:
        s.sendall(garbage)
        if server.endpoint.startswith("socket") and garbage.startswith(b"GET "):
            data = _recv_all(s)               # an HTTP client on a socket port: answered in HTTP
            assert data.startswith(b"HTTP/1.1 400") and b"socket-transport server, not HTTP" in data
            assert b"'socket://" in data
        elif server.endpoint.startswith("socket"):
            rid, reply = _read_frame(s)
            assert rid == 0 and reply["ok"] is False and reply["error_type"] == "RpcProtocolError"
            assert "magic" in reply["error"]
            assert _closed(s)
        else:
            data = s.recv(65536)
            assert data.startswith(b"HTTP/1.1 4")
    _still_serving(server)


def test_truncated_frames_and_bodies(server):
    with _raw(server.endpoint) as s:
        if server.endpoint.startswith("socket"):
            s.sendall(FRAME.pack(b"RPNT", 5, 1000) + b"x" * 10)
        else:
            s.sendall(b"POST /rpc HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n" + b"x" * 10)
    with _raw(server.endpoint) as s:
        s.sendall(b"RPN" if server.endpoint.startswith("socket") else b"POST /rp")
    _still_serving(server)


def test_undecodable_message_gets_error_reply_connection_stays_open(server):
    with _raw(server.endpoint) as s:
        if server.endpoint.startswith("socket"):
            s.sendall(FRAME.pack(b"RPNT", 9, 12) + b"not msgpack!")
            rid, reply = _read_frame(s)
            assert rid == 9 and reply["error_type"] == "RpcProtocolError"
            s.sendall(_request_frame(10, "echo", 3))
            rid, reply = _read_frame(s)
            assert rid == 10 and reply == {"ok": True, "result": {"args": [3], "kwargs": {}}}
        else:
            s.sendall(b"POST /rpc HTTP/1.1\r\nHost: x\r\nContent-Length: 12\r\n\r\nnot msgpack!")
            head = s.recv(65536)
            assert head.startswith(b"HTTP/1.1 200") and b"RpcProtocolError" in head
    _still_serving(server)


def test_oversized_frame_header_gets_error_with_its_id(server):
    if not server.endpoint.startswith("socket"):
        with _raw(server.endpoint) as s:
            s.sendall(b"POST /rpc HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % (MAX * 10))
            data = s.recv(65536)
            assert data.startswith(b"HTTP/1.1 413") and b"RpcFrameTooLarge" in data
        _still_serving(server)
        return
    with _raw(server.endpoint) as s:
        s.sendall(FRAME.pack(b"RPNT", 77, 2**40))
        rid, reply = _read_frame(s)
        assert rid == 77 and reply["error_type"] == "RpcFrameTooLarge"
        assert _closed(s)
    _still_serving(server)


def test_multiplexed_out_of_order_replies_on_one_connection(servers):
    server = servers["socket"]
    with _raw(server.endpoint) as s:
        s.sendall(_request_frame(1, "sleep", 0.5) + _request_frame(2, "echo", "fast"))
        first = _read_frame(s)
        second = _read_frame(s)
    assert first == (2, {"ok": True, "result": {"args": ["fast"], "kwargs": {}}})
    assert second == (1, {"ok": True, "result": 0.5})


def test_http_routes(servers):
    import httpx

    server = servers["http"]

    with httpx.Client(trust_env=False, base_url=server.endpoint) as h:
        r = h.get("/healthz")
        assert r.status_code == 200 and r.json()["name"] == "echo_server"
        r = h.get("/nope")
        assert r.status_code == 404 and "POST /rpc" in r.json()["error"]


def test_wrong_transport_is_reported(server):
    other = "http" if server.endpoint.startswith("socket") else "socket"
    wrong = other + "://" + server.endpoint.split("://")[1]
    with RpcClient(wrong, timeout=5) as c, pytest.raises(RpcTransportError) as info:
        c.call("healthz")
    assert wrong in str(info.value)
    right = server.endpoint.replace("0.0.0.0", "127.0.0.1")
    assert f"use the endpoint '{right}'" in str(info.value)          # names the mismatch and the fix
    assert "reset" not in str(info.value).lower()
    _still_serving(server)


def test_foreign_packed_array_is_refused_by_the_server_with_its_key_path(server):
    """A request carrying an openpi-client-packed array names the key and the fix."""
    import msgpack

    a = np.zeros((1, 4, 4, 3), np.uint8)
    packed = {b"__ndarray__": True, b"data": a.tobytes(), b"dtype": a.dtype.str, b"shape": a.shape}
    env = msgpack.packb({"method": "echo", "args": [{"main_images": packed}], "kwargs": {}}, use_bin_type=True)
    msg = b"\x94\xce" + len(env).to_bytes(4, "big") + env + b"\xc4\x00" + b"\xc6" + (0).to_bytes(4, "big")
    with _raw(server.endpoint) as s:
        if server.endpoint.startswith("socket"):
            s.sendall(FRAME.pack(b"RPNT", 3, len(msg)) + msg)
            _, reply = _read_frame(s)
        else:
            host, port = _addr(server.endpoint)
            s.sendall(f"POST /rpc HTTP/1.1\r\nHost: {host}\r\nContent-Length: {len(msg)}\r\n\r\n".encode() + msg)
            raw = b""
            while b"\r\n\r\n" not in raw:
                raw += s.recv(65536)
            head, body = raw.split(b"\r\n\r\n", 1)
            n = int([h for h in head.split(b"\r\n") if h.lower().startswith(b"content-length")][0].split(b":")[1])
            while len(body) < n:
                body += s.recv(65536)
            reply = codec.decode(body)
    assert reply["ok"] is False and reply["error_type"] == "RpcProtocolError"
    assert "at args[0].main_images" in reply["error"] and "openpi-client" in reply["error"]
    _still_serving(server)
