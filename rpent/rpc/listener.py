"""TCP listener: an accept loop on the calling thread that also holds every connection still
authenticating, and one daemon thread per admitted connection, at most ``max_connections`` of them.

Token before slot: on a server with a token, a new connection is *pending* until its first
request proves the token. Pending connections cost no thread and no connection slot: the accept
loop watches them all with one selector, reads at most ``Authenticator.max_bytes`` from each, and
gives each ``auth_timeout_s`` to authenticate. At most ``max_pending`` are held; past that the
oldest pending connection is closed, so a flood of idle connections cannot keep a client with the
token out (it is always the newest). Only a connection whose first request carried the right
token takes one of the ``max_connections`` slots (a thread); one more is refused with an error in
the transport's protocol. A server without a token admits every connection at once.
"""

from __future__ import annotations

import errno
import selectors
import socket
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Callable, Protocol

from rpent.rpc.netio import tune


@dataclass
class Verdict:
    """What an :class:`Authenticator` decided about a pending connection.

    Attributes:
        accepted: True: admit it (the first request carried the right token); False: refuse it.
        data: every byte received so far (the handler gets them first when accepted).
        reply: for a refusal, ``reply(conn)`` answers in the transport's protocol before the close
            (on a short-lived thread, the socket blocking with a 2 s timeout); None: just close.
    """

    accepted: bool
    data: bytes = b""
    reply: Callable[[socket.socket], None] | None = field(default=None, repr=False)


class Authenticator(Protocol):
    """Reads the start of one pending connection (one instance per connection)."""

    def want(self, received: int) -> int:
        """Bytes to read next (> 0), given how many were received so far: never past the end of
        the first request where the transport must not over-read."""

    def feed(self, data: bytes) -> Verdict | None:
        """All bytes received so far; None: need more."""


#: Seconds a refused connection is given to take its answer.
REFUSE_TIMEOUT_S = 2.0


class _Pending:
    __slots__ = ("conn", "deadline", "data", "auth")

    def __init__(self, conn: socket.socket, deadline: float, auth: Authenticator) -> None:
        self.conn = conn
        self.deadline = deadline
        self.data = b""
        self.auth = auth


class TcpListener:
    """Bind ``host:port`` (port 0: the OS picks) and hand each admitted connection to a thread.

    Args:
        host: IPv4/IPv6 literal or hostname to bind (``"127.0.0.1"`` by default upstream).
        port: TCP port, 0 for an ephemeral port.
        name: thread-name prefix.
        max_connections: admitted connections served at once (each holds one thread); one beyond
            it is passed to ``refuse`` (which answers in the transport's own protocol) on a
            short-lived thread and closed.
        max_pending: connections held while they authenticate (the oldest is closed to make room).
        auth_timeout_s: seconds a pending connection has to complete its first request.

    Attributes:
        host, port: the bound address (``port`` is the real one when 0 was asked).

    Raises:
        OSError: the address cannot be bound.
        ValueError: a limit below 1.
    """

    def __init__(self, host: str, port: int, name: str, max_connections: int = 128, max_pending: int = 1024,
                 auth_timeout_s: float = 10.0) -> None:
        if max_connections < 1 or max_pending < 1:
            raise ValueError(f"max_connections and max_pending must be >= 1, got {max_connections}, {max_pending}")
        self.max_connections = max_connections
        self.max_pending = max_pending
        self.auth_timeout_s = auth_timeout_s
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        family, stype, proto, _, addr = infos[0]
        self._sock = socket.socket(family, stype, proto)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(addr)
        self._sock.listen(1024)
        self._sock.setblocking(False)
        self.host = host
        self.port = self._sock.getsockname()[1]
        self._name = name
        self._closed = threading.Event()
        self._wake_r, self._wake_w = socket.socketpair()
        self._conns: set[socket.socket] = set()
        self._conns_lock = threading.Lock()
        self._refusing = threading.BoundedSemaphore(4)
        self._pending: OrderedDict[socket.socket, _Pending] = OrderedDict()

    def serve_forever(self, handle: Callable[[socket.socket, bytes], None],
                      refuse: Callable[[socket.socket], None] | None = None,
                      authenticator: Callable[[], Authenticator] | None = None) -> None:
        """Accept until :meth:`close`; run ``handle(conn, first_bytes)`` on a daemon thread per
        admitted connection.

        ``handle`` owns the connection but must not close it: the listener closes it after
        ``handle`` returns (and shuts down all live connections on :meth:`close`).
        ``first_bytes`` are what the authenticator read (b"" without one). With
        ``authenticator`` (a factory of one :class:`Authenticator` per connection) a new
        connection is pending until its verdict (module docstring). Past ``max_connections``
        live connections, an admitted one goes to ``refuse(conn)`` instead (at most a few
        refusals run at once; beyond that the connection is just closed).
        """
        sel = selectors.DefaultSelector()
        sel.register(self._sock, selectors.EVENT_READ)
        sel.register(self._wake_r, selectors.EVENT_READ)
        try:
            while not self._closed.is_set():
                timeout = None
                if self._pending:  # in arrival order, so the first one expires first
                    timeout = max(0.0, next(iter(self._pending.values())).deadline - time.monotonic())
                for key, _ in sel.select(timeout):
                    if key.fileobj is self._wake_r or self._closed.is_set():
                        return
                    if key.fileobj is self._sock:
                        self._accept(sel, handle, refuse, authenticator)
                    else:
                        self._read_pending(sel, key.fileobj, handle, refuse)  # type: ignore[arg-type]
                self._expire(sel)
        finally:
            sel.close()
            for p in list(self._pending.values()):
                self._drop_pending(None, p.conn)
            self._close_all()

    # -- accepting ---------------------------------------------------------------------
    def _accept(self, sel: selectors.BaseSelector, handle, refuse, authenticator) -> None:
        for _ in range(64):
            try:
                conn, _addr = self._sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                if exc.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                    # out of descriptors: make room by dropping the oldest pending connection, or
                    # wait a little (the backlog keeps the others) instead of spinning on accept
                    if self._pending:
                        self._drop_pending(sel, next(iter(self._pending)))
                    else:
                        time.sleep(0.05)
                return
            if authenticator is None:
                conn.setblocking(True)
                self._admit(conn, b"", handle, refuse)
                continue
            while len(self._pending) >= self.max_pending:
                self._drop_pending(sel, next(iter(self._pending)))
            conn.setblocking(False)
            self._pending[conn] = _Pending(conn, time.monotonic() + self.auth_timeout_s, authenticator())
            sel.register(conn, selectors.EVENT_READ)

    def _drop_pending(self, sel: selectors.BaseSelector | None, conn: socket.socket) -> None:
        self._pending.pop(conn, None)
        if sel is not None:
            try:
                sel.unregister(conn)
            except (KeyError, ValueError):
                pass
        try:
            conn.close()
        except OSError:
            pass

    def _expire(self, sel: selectors.BaseSelector) -> None:
        now = time.monotonic()
        while self._pending:
            conn, p = next(iter(self._pending.items()))
            if p.deadline > now:
                return
            self._drop_pending(sel, conn)

    def _read_pending(self, sel: selectors.BaseSelector, conn: socket.socket, handle, refuse) -> None:
        p = self._pending.get(conn)
        if p is None:
            return
        try:
            chunk = conn.recv(p.auth.want(len(p.data)))
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            chunk = b""
        if not chunk:
            self._drop_pending(sel, conn)
            return
        p.data += chunk
        verdict = p.auth.feed(p.data)
        if verdict is None:
            return
        self._pending.pop(conn, None)
        sel.unregister(conn)
        conn.setblocking(True)
        if verdict.accepted:
            self._admit(conn, verdict.data, handle, refuse)
        else:
            self._refuse(verdict.reply, conn)

    def _admit(self, conn: socket.socket, data: bytes, handle, refuse) -> None:
        tune(conn)
        with self._conns_lock:
            full = len(self._conns) >= self.max_connections
            if not full:
                self._conns.add(conn)
        if full:
            self._refuse(refuse, conn)
            return
        threading.Thread(target=self._run, args=(handle, conn, data), name=f"{self._name}-conn", daemon=True).start()

    def _run(self, handle: Callable[[socket.socket, bytes], None], conn: socket.socket, data: bytes) -> None:
        try:
            handle(conn, data)
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
                conn.settimeout(REFUSE_TIMEOUT_S)
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
