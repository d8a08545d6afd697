"""TCP listener with an accept loop on the calling thread and one daemon thread per connection,
at most ``max_connections`` of them (one more is handed to a ``refuse`` callback and closed)."""

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
        max_connections: connections served at once (each holds one thread); a connection
            beyond it is passed to ``refuse`` (which answers in the transport's own
            protocol) on a short-lived thread and closed.

    Attributes:
        host, port: the bound address (``port`` is the real one when 0 was asked).

    Raises:
        OSError: the address cannot be bound.
    """

    def __init__(self, host: str, port: int, name: str, max_connections: int = 128) -> None:
        if max_connections < 1:
            raise ValueError(f"max_connections must be >= 1, got {max_connections}")
        self.max_connections = max_connections
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
        self._refusing = threading.BoundedSemaphore(4)

    def serve_forever(self, handle: Callable[[socket.socket], None],
                      refuse: Callable[[socket.socket], None] | None = None) -> None:
        """Accept until :meth:`close`; run ``handle(conn)`` on a daemon thread per connection.

        ``handle`` owns the connection but must not close it: the listener closes it after
        ``handle`` returns (and shuts down all live connections on :meth:`close`). Past
        ``max_connections`` live connections, a new one goes to ``refuse(conn)`` instead
        (at most a few refusals run at once; beyond that the connection is just closed).
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
                        full = len(self._conns) >= self.max_connections
                        if not full:
                            self._conns.add(conn)
                    if full:
                        self._refuse(refuse, conn)
                        continue
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

    def _refuse(self, refuse: Callable[[socket.socket], None] | None, conn: socket.socket) -> None:
        if refuse is None or not self._refusing.acquire(blocking=False):
            conn.close()
            return

        def run() -> None:
            try:
                conn.settimeout(2.0)
                refuse(conn)
            except OSError:
                pass
            finally:
                self._refusing.release()
                try:
                    conn.close()
                except OSError:
                    pass

        threading.Thread(target=run, name=f"{self._name}-refuse", daemon=True).start()

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
