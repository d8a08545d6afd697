"""Blocking socket I/O helpers: scatter-gather send and exact-length receive without extra copies."""

from __future__ import annotations

import socket
import time
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


#: First buffer size of a frame's payload; it then doubles as data arrives (see :func:`recv_payload`).
#: Large enough that a LIBERO observation (two 256x256x3 images, 393 KB) arrives without regrowing.
FIRST_CHUNK = 1024 * 1024


def recv_payload(sock: socket.socket, length: int, prefix: bytes | bytearray | memoryview = b"") -> bytearray | None:
    """Read a message of ``length`` bytes whose header claimed that length.

    Args:
        sock: a connected socket (its timeout applies to each wait for bytes).
        length: the claimed message length (bytes).
        prefix: bytes of the message already received with its header (at most ``length``).

    The buffer grows only with data received (it starts at ``min(length, FIRST_CHUNK)`` bytes and
    doubles when full), so a peer that merely *claims* a large message makes this process allocate
    at most ``max(FIRST_CHUNK, 2 x what it actually sent)``, never the claimed length up front.

    Returns:
        The message (a writable ``bytearray`` of exactly ``length`` bytes), or None if the
        peer closed the connection first.

    Raises:
        OSError / socket.timeout: as ``sock.recv_into`` (a read timeout set on ``sock``
        bounds how long an incomplete message may stall).
        ValueError: ``prefix`` is longer than ``length``.
    """
    got = len(prefix)
    if got > length:
        raise ValueError(f"{got} bytes already received for a {length}-byte message")
    buf = bytearray(min(length, max(FIRST_CHUNK, got)))
    if got:
        buf[:got] = prefix
    while True:
        if got < len(buf):
            view = memoryview(buf)
            try:
                while got < len(buf):
                    k = sock.recv_into(view[got:])
                    if k == 0:
                        return None
                    got += k
            finally:
                view.release()
        if got == length:
            return buf
        buf += bytes(min(len(buf), length - len(buf)))


#: Seconds a refused connection is drained before it is closed (see :func:`close_gracefully`).
DRAIN_S = 2.0


def close_gracefully(conn: socket.socket, pending: int) -> None:
    """Stop sending, then read and drop up to ``pending`` bytes (at most :data:`DRAIN_S` s) before
    the caller closes ``conn``: closing with unread input makes TCP send a reset, which can reach the
    client before it has read the error reply that explains the refusal."""
    try:
        conn.shutdown(socket.SHUT_WR)
        conn.settimeout(0.2)
        deadline = time.monotonic() + DRAIN_S
        buf = bytearray(1 << 16)
        while pending > 0 and time.monotonic() < deadline:
            try:
                n = conn.recv_into(buf)
            except socket.timeout:
                continue
            if n == 0:
                break
            pending -= n
    except OSError:
        pass
