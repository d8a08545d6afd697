"""Property-based tests (hypothesis): arbitrary bytes never crash the RPC codec, the RPC servers'
authentication parsers, a real server or the code-policy worker channel, never make them allocate
past their stated bound, and a normal call succeeds afterwards."""

from __future__ import annotations

import socket
import sys
import tracemalloc
from pathlib import Path

import msgpack
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rpent.policy.frames import (MAX_WORKER_CONTAINERS, MAX_WORKER_FRAME_BYTES, ProtocolViolation, decode_worker_body,
                                 worker_message_problem)
from rpent.rpc import RpcClient, codec
from rpent.rpc.errors import RpcCodecError
from rpent.rpc.protocol import AUTH_MAX_BYTES, make_request

ECHO = str(Path(__file__).parent.parent / "rpc" / "echo_server.py")
TOKEN = "t0ken-for-the-property-tests"
MiB = 1024**2

#: Bytes likely to matter to a msgpack decoder: container and length headers, then anything.
msgpack_heads = st.sampled_from([b"\x90", b"\x80", b"\xdc\xff\xff", b"\xdd\x00\x10\x00\x00", b"\xde\xff\xff",
                                 b"\xa2ab", b"\xc4\x01x", b"\xd9\xff", b"\xc7\x05\x01", b"\xc1", b"\x94\xce"])
hostile_bytes = st.one_of(st.binary(max_size=4096), st.lists(msgpack_heads, max_size=2000).map(b"".join),
                          st.tuples(msgpack_heads, st.integers(1, 20_000)).map(lambda t: t[0] * t[1]))
wire_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.floats(allow_nan=False) | st.text(max_size=50)
    | st.binary(max_size=50),
    lambda inner: st.lists(inner, max_size=6) | st.dictionaries(st.text(max_size=10), inner, max_size=6),
    max_leaves=40)


def _peak(fn, *args) -> tuple[int, object]:
    """(peak bytes traced while ``fn(*args)`` ran, its result or the exception it raised)."""
    tracemalloc.start()
    try:
        try:
            out: object = fn(*args)
        except Exception as exc:  # noqa: BLE001 - the caller checks the type
            out = exc
        return tracemalloc.get_traced_memory()[1], out
    finally:
        tracemalloc.stop()


# -- the RPC codec ---------------------------------------------------------------------------------------------------
@settings(max_examples=300, deadline=None, database=None)
@given(hostile_bytes)
def test_the_rpc_codec_refuses_arbitrary_bytes_with_its_own_error_and_a_bounded_allocation(data):
    peak, out = _peak(codec.decode, bytearray(data))
    assert not isinstance(out, Exception) or isinstance(out, RpcCodecError), repr(out)
    # msgpack's worst expansion is an empty container per byte (~72 bytes each): the stated bound
    assert peak <= 80 * len(data) + 256 * 1024, f"{peak} bytes traced decoding {len(data)}"


@settings(max_examples=100, deadline=None, database=None)
@given(wire_values, st.lists(st.sampled_from(["f4", "u1", "i8", "c8"]), max_size=3))
def test_the_rpc_codec_round_trips_wire_values(value, dtypes):
    arrays = [np.arange(7, dtype=dt) for dt in dtypes]
    back = codec.decode(bytearray(codec.dumps({"v": value, "a": arrays})))
    assert back["v"] == value
    for a, b in zip(arrays, back["a"]):
        assert a.dtype == b.dtype and np.array_equal(a, b)


# -- the servers' authentication parsers ------------------------------------------------------------------------------
def _auths():
    from rpent.rpc.http import HttpServerTransport, _FirstHeadAuth
    from rpent.rpc.server import RpcServer
    from rpent.rpc.socket import SocketServerTransport, _FirstFrameAuth

    server = RpcServer("prop", token=TOKEN)
    sock = SocketServerTransport(server, "127.0.0.1", 0, 1 << 20)
    http = HttpServerTransport(server, "127.0.0.1", 0, 1 << 20)
    return [lambda: _FirstFrameAuth(sock), lambda: _FirstHeadAuth(http)], (sock, http)


@pytest.fixture(scope="module")
def auth_factories():
    factories, transports = _auths()
    yield factories
    for t in transports:
        t.close()


@settings(max_examples=300, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.binary(min_size=1, max_size=3000), min_size=1, max_size=12))
def test_the_authentication_parsers_take_any_bytes_and_read_a_bounded_amount(auth_factories, chunks):
    for make in auth_factories:
        auth = make()
        data = b""
        for chunk in chunks:
            want = auth.want(len(data))
            assert 0 < want <= AUTH_MAX_BYTES + 64
            data += chunk[:want]
            verdict = auth.feed(data)
            if verdict is not None:
                assert not verdict.accepted, "arbitrary bytes authenticated a connection"
                break
            assert len(data) <= AUTH_MAX_BYTES + 64


# -- a real server under arbitrary bytes ------------------------------------------------------------------------------
@pytest.fixture(scope="module", params=["socket", "http"])
def token_server(request, start_rpc_server):
    server = start_rpc_server([sys.executable, ECHO, "--transport", request.param, "--auth-timeout-s", "2"],
                              env={"RPENT_RPC_TOKEN": TOKEN})
    yield server
    server.stop()


def _rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


@settings(max_examples=120, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=hostile_bytes)
def test_a_server_with_a_token_survives_arbitrary_bytes_and_serves_afterwards(token_server, data):
    host, port = token_server.endpoint.split("://")[1].rsplit(":", 1)
    rss_before = _rss(token_server.proc.pid)
    with socket.create_connection((host, int(port)), timeout=5) as s:
        try:
            s.sendall(data)
            s.shutdown(socket.SHUT_WR)
            s.settimeout(5)
            while s.recv(65536):
                pass
        except (ConnectionResetError, BrokenPipeError, socket.timeout):
            pass
    assert token_server.proc.poll() is None, "the server died"
    assert _rss(token_server.proc.pid) - rss_before < 16 * MiB
    with RpcClient(token_server.endpoint, timeout=20, token=TOKEN) as c:
        assert c.call("echo", "ok")["args"] == ["ok"]


# -- the code-policy worker channel -----------------------------------------------------------------------------------
@settings(max_examples=300, deadline=None, database=None)
@given(hostile_bytes)
def test_the_worker_channel_refuses_arbitrary_bytes_within_its_budget(data):
    body = data[:MAX_WORKER_FRAME_BYTES]
    peak, out = _peak(decode_worker_body, body)
    assert isinstance(out, (dict, ProtocolViolation)), repr(out)
    if isinstance(out, dict):
        assert worker_message_problem(out) is None
    # the stated bound: ~20x the frame for strings, and the container budget for empty containers
    assert peak <= 24 * len(body) + 80 * MAX_WORKER_CONTAINERS + 256 * 1024


@settings(max_examples=120, deadline=None, database=None)
@given(st.dictionaries(st.sampled_from(["t", "id", "tool", "args", "stream", "text", "cell", "value", "exception",
                                        "finished", "pid", "sandbox"]), wire_values, max_size=6),
       st.sampled_from(["out", "call", "done", "ready", "_eof", "result", "hello"]))
def test_the_worker_channel_accepts_only_the_protocols_shapes(message, kind):
    message = {**message, "t": kind}
    body = msgpack.packb(message, use_bin_type=True)
    try:
        got = decode_worker_body(body)
    except ProtocolViolation:
        assert kind not in ("out", "call", "done", "ready") or worker_message_problem(message) is not None \
            or len(body) > MAX_WORKER_FRAME_BYTES
        return
    assert got["t"] in ("out", "call", "done", "ready")
    if got["t"] == "out":
        assert got["stream"] in ("stdout", "stderr") and isinstance(got["text"], str)
    if got["t"] == "done" and got.get("finished") is not None:
        assert set(got["finished"]) <= {"status", "summary"}
