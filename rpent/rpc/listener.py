"""TCP listener with an accept loop on the calling thread and one daemon thread per connection."""

from __future__ import annotations

import selectors
import socket
import threading
from typing import Callable

from rpent.rpc.netio import tune


class TcpListener:
    """Bind ``host:port`` (port 0: the OS picks) and hand each accepted connection to a thread.

    Args:
        host: IPv4/IPv6 literal or hostname to bind (``"127.0.0.1"`` by default upstream).
        port: TCP port, 0 for an ephemeral port.
        name: thread-name prefix.

    Attributes:
        host, port: the bound address (``port`` is the real one when 0 was asked).

    Raises:
        OSError: the address cannot be bound.
    """

    def __init__(self, host: str, port: int, name: str) -> None:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        family, stype, proto, _, addr = infos[0]
        self._sock = socket.socket(family, stype, proto)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(addr)
        self._sock.listen(128)
        self.host = host
        self.port = self._sock.getsockname()[1]
        self._name = name
        self._closed = threading.Event()
        self._wake_r, self._wake_w = socket.socketpair()
        self._conns: set[socket.socket] = set()
        self._conns_lock = threading.Lock()

    def serve_forever(self, handle: Callable[[socket.socket], None]) -> None:
        """Accept until :meth:`close`; run ``handle(conn)`` on a daemon thread per connection.

        ``handle`` owns the connection but must not close it: the listener closes it after
        ``handle`` returns (and shuts down all live connections on :meth:`close`).
        """
        sel = selectors.DefaultSelector()
        sel.register(self._sock, selectors.EVENT_READ)
        sel.register(self._wake_r, selectors.EVENT_READ)
        try:
            while not self._closed.is_set():
                for key, _ in sel.select():
                    if key.fileobj is self._wake_r or self._closed.is_set():
                        return
                    try:
                        conn, _addr = self._sock.accept()
                    except OSError:
                        continue
                    tune(conn)
                    with self._conns_lock:
                        self._conns.add(conn)
                    threading.Thread(
                        target=self._run, args=(handle, conn), name=f"{self._name}-conn", daemon=True
                    ).start()
        finally:
            sel.close()
            self._close_all()

    def _run(self, handle: Callable[[socket.socket], None], conn: socket.socket) -> None:
        try:
            handle(conn)
        except OSError:
            pass
        finally:
            with self._conns_lock:
                self._conns.discard(conn)
            try:
                conn.close()
            except OSError:
                pass

    def _close_all(self) -> None:
        try:
            self._sock.close()
        except OSError:
            pass
        with self._conns_lock:
            conns = list(self._conns)
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self) -> None:
        """Stop accepting and shut down live connections; :meth:`serve_forever` returns. Thread-safe."""
        if self._closed.is_set():
            return
        self._closed.set()
        try:
            self._wake_w.send(b"x")
        except OSError:
            pass
