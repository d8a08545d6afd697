"""Run a call on the thread that read it, and hand reading on only if the peer sends more meanwhile.

A socket-transport connection carries many calls at once, so its reader must never be stuck behind
a long call. Handing every call to a worker thread guarantees that, but costs a thread wake-up on
every round trip, and on a loaded machine each wake-up waits for a CPU (``benchmarks/rpc_bench.py``,
``benchmarks/env_step_bench.py``). Instead the reader runs the call itself after *arming* its
connection here: one watcher thread per server waits (``epoll``, one-shot) on every armed
connection, and when bytes arrive on one while its reader is busy, the watcher starts another reader
for it on the worker pool. When the call returns, the reader *disarms* its connection: if nobody
took reading over, it goes on reading; otherwise it leaves. In the common case (one call at a time
per connection) no thread but the reader ever wakes up; arming and disarming are one ``epoll_ctl``
each.

Linux only (``select.epoll``); elsewhere :func:`ReadWatch.create` returns None and the transport
hands every call to a worker thread.
"""

from __future__ import annotations

import select
import socket
import threading
from typing import Callable


class Watched:
    """One connection's state as the watch sees it.

    Attributes:
        sock: the connection.
        armed: the :class:`Ticket` of the call its reader runs now (None: not armed).
        data: what the owner attached (handed back to ``takeover``).
    """

    __slots__ = ("sock", "fd", "armed", "lock", "data")

    def __init__(self, sock: socket.socket, data: object = None) -> None:
        self.sock = sock
        self.data = data
        self.fd = sock.fileno()
        self.armed: Ticket | None = None
        self.lock = threading.Lock()


class Ticket:
    """One arming: ``taken`` once the watch started another reader during that call. (A ticket per
    call, because after a takeover the new reader may arm again while the old call still runs.)"""

    __slots__ = ("taken",)

    def __init__(self) -> None:
        self.taken = False


class ReadWatch:
    """The watcher thread of one server (see the module docstring).

    Args:
        takeover: called on the watcher thread with the :class:`Watched` of an armed connection
            that became readable (or hung up); it must start a reader for it without blocking.
        name: thread name.
    """

    def __init__(self, takeover: Callable[[Watched], None], name: str) -> None:
        self._ep = select.epoll()
        self._takeover = takeover
        self._conns: dict[int, Watched] = {}
        self._lock = threading.Lock()
        self._wake_r, self._wake_w = socket.socketpair()
        self._ep.register(self._wake_r.fileno(), select.EPOLLIN)
        self._closed = False
        threading.Thread(target=self._run, name=name, daemon=True).start()

    @classmethod
    def create(cls, takeover: Callable[[Watched], None], name: str) -> "ReadWatch | None":
        """A watch, or None where ``select.epoll`` does not exist."""
        if not hasattr(select, "epoll"):
            return None
        return cls(takeover, name)

    def add(self, sock: socket.socket, data: object = None) -> Watched | None:
        """Start watching ``sock`` (disarmed), with ``data`` attached; None once the watch is
        closed. Call :meth:`remove` before closing the socket."""
        w = Watched(sock, data)
        with self._lock:
            if self._closed:
                return None
            self._conns[w.fd] = w
        try:
            self._ep.register(w.fd, select.EPOLLONESHOT)  # registered, reporting nothing until armed
        except (OSError, ValueError):
            with self._lock:
                self._conns.pop(w.fd, None)
            return None
        return w

    def remove(self, w: Watched) -> None:
        """Stop watching (before the socket is closed, so its fd number cannot be reused meanwhile)."""
        with self._lock:
            self._conns.pop(w.fd, None)
        try:
            self._ep.unregister(w.fd)
        except (OSError, ValueError):
            pass

    def arm(self, w: Watched) -> Ticket | None:
        """The reader of ``w`` is about to run a call: take reading over if the peer sends more.
        Returns the ticket for :meth:`disarm`, or None when the watch is closed (the caller hands
        the call to a worker instead)."""
        ticket = Ticket()
        with w.lock:
            w.armed = ticket
        try:
            self._ep.modify(w.fd, select.EPOLLIN | select.EPOLLRDHUP | select.EPOLLONESHOT)
        except (OSError, ValueError):
            with w.lock:
                w.armed = None
            return None
        return ticket

    def disarm(self, w: Watched, ticket: Ticket) -> bool:
        """The call of ``ticket`` is done. True: the caller goes on reading; False: another reader
        took over meanwhile (the caller must not read this connection any more)."""
        with w.lock:
            if ticket.taken:
                return False
            w.armed = None  # not taken: the caller is still this connection's only reader
        try:
            self._ep.modify(w.fd, select.EPOLLONESHOT)
        except (OSError, ValueError):
            pass
        return True

    def _run(self) -> None:
        wake = self._wake_r.fileno()
        while True:
            try:
                events = self._ep.poll()
            except InterruptedError:
                continue
            except (OSError, ValueError):
                return
            for fd, _ in events:
                if fd == wake:
                    self._ep.close()
                    self._wake_r.close()
                    self._wake_w.close()
                    return
                with self._lock:
                    w = self._conns.get(fd)
                if w is None:
                    continue
                with w.lock:
                    ticket, w.armed = w.armed, None
                    if ticket is None:
                        continue
                    ticket.taken = True
                self._takeover(w)

    def close(self) -> None:
        """Stop the watcher thread (idempotent)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        try:
            self._wake_w.send(b"x")
        except OSError:
            pass
