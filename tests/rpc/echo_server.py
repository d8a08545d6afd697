"""Test RPC server (run as a subprocess): echo, sleeps, a concurrency probe, errors.

    python tests/rpc/echo_server.py [--transport socket] [--port 0] [--max-frame-bytes N] [--parent-watch]
"""

from __future__ import annotations

import argparse
import threading
import time

import numpy as np

from rpent.rpc import RpcServer
from rpent.rpc.cli import add_server_args, serve_from_args


class EchoServer(RpcServer):
    """Methods: echo (ro), sleep (ro), read_probe (ro), write_probe (mutating), fail (ro),
    big (ro), stats (ro), reset_stats (mutating), bad_result (ro)."""

    def __init__(self) -> None:
        super().__init__(name="echo_server")
        self._mu = threading.Lock()
        self._readers = 0
        self._writers = 0
        self._stats = {"max_readers": 0, "max_writers": 0, "overlaps": 0, "writes": 0}
        self.register("echo", self.echo, readonly=True)
        self.register("sleep", self.sleep, readonly=True)
        self.register("read_probe", self.read_probe, readonly=True)
        self.register("write_probe", self.write_probe, readonly=False)
        self.register("fail", self.fail, readonly=True)
        self.register("big", self.big, readonly=True)
        self.register("stats", self.stats, readonly=True)
        self.register("reset_stats", self.reset_stats, readonly=False)
        self.register("bad_result", lambda: np.array([object()], dtype=object), readonly=True)

    def echo(self, *args, **kwargs):
        return {"args": list(args), "kwargs": kwargs}

    def sleep(self, seconds: float) -> float:
        time.sleep(seconds)
        return seconds

    def _enter(self, writer: bool) -> None:
        with self._mu:
            if writer:
                self._writers += 1
                self._stats["writes"] += 1
            else:
                self._readers += 1
            if self._writers and (self._readers or self._writers > 1):
                self._stats["overlaps"] += 1
            self._stats["max_readers"] = max(self._stats["max_readers"], self._readers)
            self._stats["max_writers"] = max(self._stats["max_writers"], self._writers)

    def _leave(self, writer: bool) -> None:
        with self._mu:
            if writer:
                self._writers -= 1
            else:
                self._readers -= 1

    def read_probe(self, seconds: float) -> int:
        self._enter(False)
        time.sleep(seconds)
        self._leave(False)
        return 1

    def write_probe(self, seconds: float) -> int:
        self._enter(True)
        time.sleep(seconds)
        self._leave(True)
        return 1

    def fail(self, message: str):
        def inner_helper_that_raises():
            raise ValueError(message)

        inner_helper_that_raises()

    def big(self, nbytes: int):
        return np.full(nbytes, 7, dtype=np.uint8)

    def stats(self) -> dict:
        with self._mu:
            return dict(self._stats)

    def reset_stats(self) -> None:
        with self._mu:
            self._stats = {"max_readers": 0, "max_writers": 0, "overlaps": 0, "writes": 0}


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False)
    add_server_args(parser)
    serve_from_args(EchoServer(), parser.parse_args())


if __name__ == "__main__":
    main()
