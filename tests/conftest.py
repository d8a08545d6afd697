"""Shared pytest fixtures for rpent: real RPC server subprocesses, free ports, repo paths."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Iterator

import pytest

os.environ.setdefault("MUJOCO_GL", "egl")

REPO = Path(__file__).resolve().parent.parent
READY_RE = re.compile(r"^RPC server listening on ((http|socket)://\S+:\d+)$")


class ServerProcess:
    """A spawned RPC server: ``.proc`` (Popen), ``.endpoint`` (str), ``.ready_line`` (str)."""

    def __init__(self, proc: subprocess.Popen, endpoint: str, ready_line: str) -> None:
        self.proc = proc
        self.endpoint = endpoint
        self.ready_line = ready_line

    def stop(self) -> None:
        """Terminate (then kill) the server process."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for f in (self.proc.stdin, self.proc.stdout):
            if f is not None:
                f.close()


def close_parent_watched(proc: subprocess.Popen, timeout: float = 15.0) -> None:
    """Stop a server started with ``--parent-watch``: close its stdin (it exits on EOF), wait up to
    ``timeout`` seconds, then kill it; close its pipes."""
    if proc.stdin is not None:
        proc.stdin.close()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    for f in (proc.stdout, proc.stderr):
        if f is not None:
            f.close()


def start_server_process(argv: list[str], env: dict | None = None, timeout: float = 120.0) -> ServerProcess:
    """Spawn ``argv`` (a server using rpent.rpc.cli) and wait for its readiness line.

    Raises:
        RuntimeError: the process exited or printed something else first (its output is quoted).
    """
    full_env = dict(os.environ, PYTHONUNBUFFERED="1")
    full_env.update(env or {})
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, env=full_env, cwd=REPO)
    deadline = time.monotonic() + timeout
    seen = []
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            proc.wait()
            raise RuntimeError(f"server {argv} exited with {proc.returncode}: {''.join(seen)}")
        m = READY_RE.match(line.rstrip("\n"))
        if m:
            return ServerProcess(proc, m.group(1), line.rstrip("\n"))
        seen.append(line)
    proc.kill()
    raise RuntimeError(f"server {argv} printed no readiness line in {timeout} s: {''.join(seen)}")


@pytest.fixture
def spawn_server() -> Iterator[Callable[..., ServerProcess]]:
    """Factory fixture: ``spawn_server(argv, env=None)`` -> ServerProcess; all stopped at teardown."""
    started: list[ServerProcess] = []

    def spawn(argv: list[str], env: dict | None = None) -> ServerProcess:
        sp = start_server_process(argv, env)
        started.append(sp)
        return sp

    yield spawn
    for sp in started:
        sp.stop()


@pytest.fixture
def free_port() -> int:
    """A TCP port on 127.0.0.1 with nothing listening (bound then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def python() -> str:
    """The interpreter running the tests (use it for child processes)."""
    return sys.executable


@pytest.fixture(scope="session")
def start_rpc_server() -> Callable[..., ServerProcess]:
    """The plain function :func:`start_server_process` (for fixtures of any scope; caller stops it)."""
    return start_server_process
