"""Blocking socket I/O helpers: scatter-gather send and exact-length receive without extra copies."""

from __future__ import annotations

import socket
from typing import Sequence

_IOV_MAX = 512
_RCVBUF = 4 * 1024 * 1024
_SNDBUF = 4 * 1024 * 1024


def tune(sock: socket.socket) -> None:
    """Set TCP_NODELAY and large (4 MiB) send/receive buffers on a connected TCP socket."""
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    for opt, size in ((socket.SO_RCVBUF, _RCVBUF), (socket.SO_SNDBUF, _SNDBUF)):
        try:
            sock.setsockopt(socket.SOL_SOCKET, opt, size)
        except OSError:
            pass


def send_all(sock: socket.socket, segments: Sequence[bytes | bytearray | memoryview]) -> None:
    """Write every byte of ``segments`` in order with ``sendmsg`` (no joining copy).

    Raises:
        OSError: the connection failed (ConnectionResetError, BrokenPipeError, ...).
    """
    views = [memoryview(s).cast("B") if not isinstance(s, bytes) else s for s in segments if len(s)]
    while views:
        batch = views[:_IOV_MAX]
        sent = sock.sendmsg(batch)
        i = 0
        while i < len(batch) and sent >= len(batch[i]):
            sent -= len(batch[i])
            i += 1
        rest = views[i:]
        if sent:
            rest[0] = memoryview(rest[0])[sent:]
        views = rest


def recv_exact_into(sock: socket.socket, buf: bytearray | memoryview) -> int:
    """Fill ``buf`` completely from ``sock``.

    Returns:
        Number of bytes read: ``len(buf)``, or fewer if the peer closed the connection
        (0 means it closed before the first byte).
    """
    view = memoryview(buf)
    n = len(view)
    got = 0
    while got < n:
        k = sock.recv_into(view[got:])
        if k == 0:
            return got
        got += k
    return got
