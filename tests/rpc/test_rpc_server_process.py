"""Server processes: readiness line, token rules, shutdown, --parent-watch, bad CLI input."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rpent.rpc import RemoteError, RpcClient, RpcServer

ECHO = str(Path(__file__).with_name("echo_server.py"))


@pytest.mark.parametrize("transport", ["socket", "http"])
def test_token_required_when_set(spawn_server, transport):
    sp = spawn_server([sys.executable, ECHO, "--transport", transport], env={"RPENT_RPC_TOKEN": "s3cret"})
    with RpcClient(sp.endpoint, token="wrong", timeout=5) as c, pytest.raises(RemoteError) as info:
        c.call("echo", 1)
    assert info.value.remote_type == "RpcAuthError" and "RPENT_RPC_TOKEN" in info.value.remote_message
    env_backup = os.environ.pop("RPENT_RPC_TOKEN", None)
    try:
        with RpcClient(sp.endpoint, timeout=5) as c, pytest.raises(RemoteError, match="token"):
            c.healthz()
    finally:
        if env_backup is not None:
            os.environ["RPENT_RPC_TOKEN"] = env_backup
    with RpcClient(sp.endpoint, token="s3cret", timeout=5) as c:
        assert c.call("echo", 1)["args"] == [1]


def test_non_loopback_bind_requires_token(python):
    env = {k: v for k, v in os.environ.items() if k != "RPENT_RPC_TOKEN"}
    out = subprocess.run([python, ECHO, "--host", "0.0.0.0"], capture_output=True, text=True, env=env, timeout=30)
    assert out.returncode == 2
    assert "RPENT_RPC_TOKEN" in out.stderr and "0.0.0.0" in out.stderr


def test_non_loopback_bind_with_token_prints_bound_host(spawn_server):
    sp = spawn_server([sys.executable, ECHO, "--transport", "socket", "--host", "0.0.0.0"],
                      env={"RPENT_RPC_TOKEN": "tok"})
    assert sp.ready_line.startswith("RPC server listening on socket://0.0.0.0:")
    with RpcClient(sp.endpoint, token="tok", timeout=5) as c:  # 0.0.0.0 is dialled as 127.0.0.1
        assert c.healthz()["status"] == "ok"
    with RpcClient(sp.endpoint, token="bad", timeout=5) as c, pytest.raises(RemoteError, match="token"):
        c.healthz()


def test_register_rejects_duplicates_and_builtins():
    s = RpcServer("x")
    s.register("a", lambda: 1, readonly=True)
    with pytest.raises(ValueError, match="already registered"):
        s.register("a", lambda: 2, readonly=True)
    with pytest.raises(ValueError, match="built-in"):
        s.register("healthz", lambda: 2, readonly=True)
    with pytest.raises(ValueError, match="transport"):
        s.bind(transport="grpc")


@pytest.mark.parametrize("transport", ["socket", "http"])
def test_shutdown_method_stops_the_process(spawn_server, transport):
    sp = spawn_server([sys.executable, ECHO, "--transport", transport])
    with RpcClient(sp.endpoint, timeout=5) as c:
        assert c.call("shutdown") == {"status": "shutting down"}
    assert sp.proc.wait(timeout=10) == 0


def test_parent_watch_exits_when_stdin_closes(spawn_server):
    sp = spawn_server([sys.executable, ECHO, "--parent-watch"])
    sp.proc.stdin.close()
    assert sp.proc.wait(timeout=10) == 0


def test_without_parent_watch_stdin_eof_is_ignored(spawn_server):
    sp = spawn_server([sys.executable, ECHO])
    sp.proc.stdin.close()
    time.sleep(0.3)
    assert sp.proc.poll() is None
    with RpcClient(sp.endpoint, timeout=5) as c:
        assert c.healthz()["status"] == "ok"


def test_sigterm_stops_cleanly(spawn_server):
    sp = spawn_server([sys.executable, ECHO, "--transport", "socket"])
    sp.proc.terminate()
    assert sp.proc.wait(timeout=10) == 0


def test_port_in_use_fails_with_message(spawn_server, python):
    sp = spawn_server([python, ECHO])
    port = sp.endpoint.rsplit(":", 1)[1]
    out = subprocess.run([python, ECHO, "--port", port], capture_output=True, text=True, timeout=30)
    assert out.returncode == 2 and "cannot start RPC server" in out.stderr


def test_in_process_start_and_shutdown():
    s = RpcServer("inproc")
    s.register("add", lambda a, b: a + b, readonly=True)
    ep = s.start(transport="socket")
    with RpcClient(ep, timeout=5) as c:
        assert c.call("add", 2, b=3) == 5
    s.shutdown()
    assert s.wait_stopped(5)
