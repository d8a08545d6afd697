"""Round trips over both transports against a real server subprocess (tests/rpc/echo_server.py)."""

from __future__ import annotations

import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from rpent.rpc import RemoteError, RpcClient, RpcCodecError, RpcTimeout, RpcTransportError

ECHO = str(Path(__file__).with_name("echo_server.py"))


@pytest.fixture(scope="module", params=["socket", "http"])
def server(request, start_rpc_server):
    sp = start_rpc_server([sys.executable, ECHO, "--transport", request.param])
    yield sp
    sp.stop()


@pytest.fixture
def client(server):
    with RpcClient(server.endpoint, timeout=20.0) as c:
        yield c


def test_readiness_line_is_exact(server):
    proto = server.endpoint.split("://")[0]
    assert server.ready_line == f"RPC server listening on {proto}://127.0.0.1:{server.endpoint.rsplit(':', 1)[1]}"


def test_healthz(client, server):
    h = client.healthz()
    assert h["status"] == "ok" and h["name"] == "echo_server" and h["pid"] == server.proc.pid
    assert "echo" in h["methods"] and "shutdown" in h["methods"]


def test_all_dtypes_and_nested_values(client):
    dtypes = [np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
              np.float16, np.float32, np.float64, np.complex64, np.complex128]
    arrays = {np.dtype(d).name: (np.arange(12) % 5).astype(d).reshape(3, 4) for d in dtypes}
    arrays["zero_d"] = np.array(2.5, np.float32)
    arrays["empty"] = np.zeros((0, 7), np.int16)
    arrays["transposed"] = np.arange(20, dtype=np.float64).reshape(4, 5).T
    scalars = [np.float32(1.25), np.int64(-3), np.bool_(True), np.complex64(1 - 2j), np.uint8(255)]
    nested = {"a": [1, (2, {"b": [np.ones(2)]})], "s": "text", "n": None, "bytes": b"\x00\x01"}
    out = client.call("echo", arrays, scalars, nested=nested)
    back = out["args"][0]
    for k, a in arrays.items():
        assert back[k].dtype == a.dtype and back[k].shape == a.shape, k
        np.testing.assert_array_equal(back[k], a)
        assert back[k].flags.writeable
    for s, t in zip(scalars, out["args"][1]):
        assert type(t) is type(s) and t == s
    got = out["kwargs"]["nested"]
    assert got["a"][0] == 1 and got["a"][1][0] == 2
    np.testing.assert_array_equal(got["a"][1][1]["b"][0], np.ones(2))
    assert got["s"] == "text" and got["n"] is None and got["bytes"] == b"\x00\x01"


def test_large_arrays_both_directions(client):
    a = np.random.default_rng(0).standard_normal((1024, 1024, 4)).astype(np.float32)  # 16 MiB
    out = client.call("echo", a)["args"][0]
    assert np.array_equal(out, a)
    big = client.call("big", 48 * 1024 * 1024)
    assert big.shape == (48 * 1024 * 1024,) and big[0] == 7 and big[-1] == 7


def test_remote_error_carries_type_message_traceback(client):
    with pytest.raises(RemoteError) as info:
        client.call("fail", "boom 42")
    err = info.value
    assert err.remote_type == "ValueError" and err.remote_message == "boom 42" and err.method == "fail"
    assert "inner_helper_that_raises" in err.remote_traceback and "Traceback" in err.remote_traceback
    assert "boom 42" in str(err) and "remote traceback" in str(err)
    assert client.call("echo", 1)["args"] == [1]  # the connection survives


def test_unknown_method_and_bad_arguments(client):
    with pytest.raises(RemoteError) as info:
        client.call("no.such")
    assert info.value.remote_type == "RpcMethodNotFound" and "echo" in info.value.remote_message
    with pytest.raises(RemoteError) as info:
        client.call("sleep", 1, 2, 3)
    assert info.value.remote_type == "TypeError"


def test_unencodable_argument_and_result(client):
    with pytest.raises(RpcCodecError, match="object dtype"):
        client.call("echo", np.array([object()]))
    with pytest.raises(RemoteError) as info:
        client.call("bad_result")
    assert info.value.remote_type == "RpcCodecError" and "bad_result" in info.value.remote_message


def test_timeout_then_client_still_works(client, server):
    t0 = time.monotonic()
    with pytest.raises(RpcTimeout) as info:
        client.call("sleep", 4.0, timeout=0.3)
    elapsed = time.monotonic() - t0
    assert 0.25 <= elapsed < 3.0  # gave up at its timeout, not when the 4 s call ended (slack for a loaded machine)
    assert server.endpoint in str(info.value) and "transport" in str(info.value)
    assert client.call("echo", "after")["args"] == ["after"]


def test_concurrent_calls_share_one_client(client):
    with ThreadPoolExecutor(8) as ex:
        t0 = time.monotonic()
        results = list(ex.map(lambda i: client.call("sleep", 1.0), range(8)))
        elapsed = time.monotonic() - t0
    assert results == [1.0] * 8
    # serialised calls would take 8 s; the rest of the bound is slack for a loaded machine
    assert elapsed < 5.0, f"8 concurrent 1 s calls took {elapsed:.2f} s: calls were serialised"

    def tagged(i):
        return client.call("echo", i, np.full(1000, i))["args"]

    with ThreadPoolExecutor(6) as ex:
        for i, (j, arr) in enumerate(ex.map(tagged, range60())):
            assert j == i and arr[0] == i and arr[-1] == i


def range60():
    return range(60)


def test_readonly_concurrent_mutating_serialised(client):
    client.call("reset_stats")
    client.call("reset_stats")

    def work(i):
        if i % 3 == 0:
            return client.call("write_probe", 0.05)
        return client.call("read_probe", 0.15)

    with ThreadPoolExecutor(9) as ex:
        assert sum(ex.map(work, range(18))) == 18
    stats = client.call("stats")
    assert stats["writes"] == 6
    assert stats["max_readers"] >= 2, stats
    assert stats["max_writers"] == 1 and stats["overlaps"] == 0, stats


def test_builtins_answer_and_server_accepts_while_a_mutating_call_runs(server):
    with RpcClient(server.endpoint, timeout=10) as c1:
        t = threading.Thread(target=c1.call, args=("write_probe", 6.0))
        t.start()
        time.sleep(0.2)
        with RpcClient(server.endpoint, timeout=10) as c2:
            t0 = time.monotonic()
            assert c2.healthz()["status"] == "ok"
            # answered while the mutating call still holds the server, well before it lets go (a
            # healthz takes milliseconds; the bound is half the probe, not a latency target)
            assert t.is_alive() and time.monotonic() - t0 < 3.0, "healthz waited for the mutating call"
        t.join()


@pytest.mark.parametrize("protocol", ["socket", "http"])
def test_dead_endpoint_names_endpoint_and_transport(protocol, free_port):
    ep = f"{protocol}://127.0.0.1:{free_port}"
    t0 = time.monotonic()
    with RpcClient(ep, timeout=2.0) as c, pytest.raises(RpcTransportError) as info:
        c.call("healthz")
    assert time.monotonic() - t0 < 2.5
    assert ep in str(info.value) and f"{protocol} transport" in str(info.value)


def test_server_death_fails_pending_call_then_reports_unreachable(python, start_rpc_server):
    sp = start_rpc_server([python, ECHO, "--transport", "socket"])
    try:
        with RpcClient(sp.endpoint, timeout=10) as c:
            assert c.healthz()["status"] == "ok"
            threading.Timer(0.3, sp.proc.kill).start()
            with pytest.raises(RpcTransportError) as info:
                c.call("sleep", 5)
            assert "socket transport" in str(info.value)
            sp.proc.wait()
            with pytest.raises(RpcTransportError, match="cannot connect"):
                c.call("healthz", timeout=2)
    finally:
        sp.stop()


@pytest.mark.parametrize("bad", ["soket://127.0.0.1:1", "http//127.0.0.1:1"])
def test_client_rejects_malformed_endpoint(bad):
    with pytest.raises(ValueError, match="expected"):
        RpcClient(bad)


def test_bad_timeout_values(server):
    with pytest.raises(ValueError, match="positive"):
        RpcClient(server.endpoint, timeout=0)
    with RpcClient(server.endpoint) as c, pytest.raises(ValueError, match="positive"):
        c.call("echo", timeout=-1)
