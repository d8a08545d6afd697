"""The ``socket`` transport: length-prefixed frames over one persistent TCP connection.

Frame = 20-byte header + message::

    magic b"RPNT" | request id: uint64 LE | message length: uint64 LE | message (rpent.rpc.codec)

Requests and replies use the same header; a reply carries its request's id, so one connection
carries many calls in flight at once and replies may come back in any order. The server reads
frames on one thread per connection and runs each call on a worker thread.

Bad input: a frame with a wrong magic gets an error reply (id 0) and the connection is closed;
an oversized frame gets an error reply with its id and the connection is closed (the stream
cannot be resynchronised); a truncated frame (peer closed mid-frame) just ends that connection;
an undecodable message gets an error reply and the connection stays open. Other clients are
never affected.
"""

from __future__ import annotations

import itertools
import socket
import struct
import threading
import time
from typing import TYPE_CHECKING, Sequence

from rpent.rpc import codec
from rpent.rpc.endpoint import Endpoint
from rpent.rpc.errors import RpcTimeout, RpcTransportError
from rpent.rpc.listener import TcpListener
from rpent.rpc.netio import recv_exact_into, send_all, tune
from rpent.rpc.protocol import error_reply
from rpent.rpc.workers import WorkerPool

if TYPE_CHECKING:
    from rpent.rpc.server import RpcServer

MAGIC = b"RPNT"
FRAME = struct.Struct("<4sQQ")


def frame_error(rid: int, error_type: str, message: str) -> list:
    """Segments of one reply frame carrying an error envelope for request ``rid``."""
    segments, n = codec.encode(error_reply(error_type, message))
    return [FRAME.pack(MAGIC, rid, n), *segments]


class SocketServerTransport:
    """Serves an :class:`~rpent.rpc.server.RpcServer` over the socket transport.

    Args:
        server: the method registry/dispatcher.
        host, port: address to bind (port 0: OS-chosen).
        max_frame_bytes: largest accepted request message (bytes).
    """

    def __init__(self, server: "RpcServer", host: str, port: int, max_frame_bytes: int) -> None:
        self._server = server
        self._max = max_frame_bytes
        self._listener = TcpListener(host, port, name=f"rpc-{server.name}")
        self._pool = WorkerPool(f"rpc-{server.name}-worker")
        self.endpoint = Endpoint("socket", host, self._listener.port)

    def serve_forever(self) -> None:
        """Accept and serve until :meth:`close`."""
        try:
            self._listener.serve_forever(self._handle_connection)
        finally:
            self._pool.close()

    def close(self) -> None:
        """Stop serving (thread-safe)."""
        self._listener.close()

    def _handle_connection(self, conn: socket.socket) -> None:
        send_lock = threading.Lock()
        header = bytearray(FRAME.size)
        while True:
            got = recv_exact_into(conn, header)
            if got < FRAME.size:
                return  # closed (cleanly or mid-header)
            magic, rid, length = FRAME.unpack(header)
            if magic != MAGIC:
                self._send(conn, send_lock, frame_error(
                    0, "RpcProtocolError",
                    f"bad frame magic {bytes(magic)!r} (expected {MAGIC!r}); this is an rpent socket-transport "
                    f"port: use a 'socket://' endpoint, or 'http://' for an HTTP server",
                ))
                return
            if length > self._max:
                self._send(conn, send_lock, frame_error(
                    rid, "RpcFrameTooLarge",
                    f"request frame of {length} bytes exceeds this server's max_frame_bytes={self._max}; "
                    "send less per call or start the server with a larger --max-frame-bytes",
                ))
                _close_gracefully(conn, length)
                return
            payload = bytearray(length)
            if recv_exact_into(conn, payload) < length:
                return  # truncated frame: peer went away
            self._pool.submit(lambda rid=rid, payload=payload: self._reply(conn, send_lock, rid, payload))

    def _reply(self, conn: socket.socket, send_lock: threading.Lock, rid: int, payload: bytearray) -> None:
        reply = self._server.handle_message(payload)
        self._send(conn, send_lock, [FRAME.pack(MAGIC, rid, reply.nbytes), *reply.segments])
        if reply.after_send is not None:
            reply.after_send()

    @staticmethod
    def _send(conn: socket.socket, lock: threading.Lock, segments: Sequence) -> None:
        try:
            with lock:
                send_all(conn, segments)
        except OSError:
            pass  # client gone; its reader sees the closed connection


#: Seconds a refused connection is drained before it is closed (see :func:`_close_gracefully`).
DRAIN_S = 2.0


def _close_gracefully(conn: socket.socket, pending: int) -> None:
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


class _Slot:
    __slots__ = ("done", "payload", "error")

    def __init__(self) -> None:
        self.done = threading.Lock()
        self.done.acquire()
        self.payload: bytearray | None = None
        self.error: BaseException | None = None


class _Connection:
    """One TCP connection with a reader thread that routes reply frames to waiting callers."""

    def __init__(self, endpoint: Endpoint, connect_timeout: float, max_frame_bytes: int) -> None:
        self._ep = endpoint
        self._max = max_frame_bytes
        try:
            sock = socket.create_connection((endpoint.host, endpoint.port), timeout=connect_timeout)
        except socket.timeout as exc:
            raise RpcTimeout(f"cannot connect to {endpoint} (socket transport): no answer within {connect_timeout:g} s") from exc
        except OSError as exc:
            raise RpcTransportError(f"cannot connect to {endpoint} (socket transport): {exc.strerror or exc}") from exc
        sock.settimeout(None)
        tune(sock)
        self.sock = sock
        self.send_lock = threading.Lock()
        self._pending: dict[int, _Slot] = {}
        self._plock = threading.Lock()
        self.dead: BaseException | None = None
        threading.Thread(target=self._read_loop, name=f"rpc-client-{endpoint}", daemon=True).start()

    def add(self, rid: int) -> _Slot:
        """Register a waiter for request ``rid``; raises RpcTransportError if the connection died."""
        slot = _Slot()
        with self._plock:
            if self.dead is not None:
                raise RpcTransportError(str(self.dead))
            self._pending[rid] = slot
        return slot

    def forget(self, rid: int) -> None:
        """Drop the waiter of ``rid`` (timed out / send failed); a late reply is then ignored."""
        with self._plock:
            self._pending.pop(rid, None)

    def _read_loop(self) -> None:
        header = bytearray(FRAME.size)
        reason: BaseException
        try:
            while True:
                got = recv_exact_into(self.sock, header)
                if got < FRAME.size:
                    reason = RpcTransportError(f"connection to {self._ep} (socket transport) closed by the server")
                    break
                magic, rid, length = FRAME.unpack(header)
                if magic != MAGIC:
                    reason = RpcTransportError(
                        f"{self._ep} (socket transport) sent a frame with bad magic {bytes(magic)!r}; "
                        "is it an HTTP server? use an 'http://' endpoint"
                    )
                    break
                if length > self._max:
                    reason = RpcTransportError(
                        f"reply frame of {length} bytes from {self._ep} (socket transport) exceeds the client's "
                        f"max_frame_bytes={self._max}; raise RpcClient(max_frame_bytes=...)"
                    )
                    break
                payload = bytearray(length)
                if recv_exact_into(self.sock, payload) < length:
                    reason = RpcTransportError(f"connection to {self._ep} (socket transport) closed mid-reply")
                    break
                with self._plock:
                    slot = self._pending.pop(rid, None)
                if slot is not None:
                    slot.payload = payload
                    slot.done.release()
                elif rid == 0:
                    reason = _protocol_error(payload, self._ep)
                    break
        except OSError as exc:
            reason = RpcTransportError(f"connection to {self._ep} (socket transport) failed: {exc}")
        self._fail(reason)

    def _fail(self, reason: BaseException) -> None:
        with self._plock:
            if self.dead is None:
                self.dead = reason
            pending, self._pending = self._pending, {}
        for slot in pending.values():
            slot.error = self.dead
            slot.done.release()
        try:
            self.sock.close()
        except OSError:
            pass

    def close(self) -> None:
        """Shut the connection down; pending calls fail with RpcTransportError."""
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._fail(RpcTransportError(f"client connection to {self._ep} (socket transport) was closed"))


def _protocol_error(payload: bytearray, ep: Endpoint) -> BaseException:
    try:
        env = codec.decode(payload)
        msg = env.get("error", "") if isinstance(env, dict) else ""
    except Exception:  # noqa: BLE001
        msg = ""
    return RpcTransportError(f"{ep} (socket transport) rejected the connection: {msg or 'protocol error'}")


class SocketClientTransport:
    """Client side of the socket transport: one persistent, multiplexed connection; thread-safe.

    Args:
        endpoint: server endpoint (protocol ``socket``).
        connect_timeout: seconds to wait for the TCP connection.
        max_frame_bytes: largest accepted reply message (bytes).

    The connection opens on the first call and reopens on the next call after a failure.
    """

    def __init__(self, endpoint: Endpoint, connect_timeout: float, max_frame_bytes: int) -> None:
        self.endpoint = endpoint
        self._connect_timeout = connect_timeout
        self._max = max_frame_bytes
        self._conn: _Connection | None = None
        self._conn_lock = threading.Lock()
        self._ids = itertools.count(1)
        self._closed = False

    def _connection(self, timeout: float | None) -> _Connection:
        conn = self._conn
        if conn is not None and conn.dead is None:
            return conn
        with self._conn_lock:
            if self._closed:
                raise RpcTransportError(f"RpcClient for {self.endpoint} is closed")
            if self._conn is None or self._conn.dead is not None:
                connect = self._connect_timeout if timeout is None else min(timeout, self._connect_timeout)
                self._conn = _Connection(self.endpoint, connect, self._max)
            return self._conn

    def request(self, segments: list, nbytes: int, timeout: float | None, method: str) -> bytearray:
        """Send one request message and wait up to ``timeout`` s for its reply message.

        Raises:
            RpcTimeout: no reply in time (a late reply is dropped).
            RpcTransportError: connect/send/receive failure, naming endpoint and transport.
        """
        if nbytes > self._max:
            raise RpcTransportError(
                f"request to {method!r} is {nbytes} bytes, over the client's max_frame_bytes={self._max}"
            )
        conn = self._connection(timeout)
        rid = next(self._ids)
        slot = conn.add(rid)
        try:
            with conn.send_lock:
                send_all(conn.sock, [FRAME.pack(MAGIC, rid, nbytes), *segments])
        except OSError as exc:
            # the server may have refused the request (e.g. too large) and closed: its error reply
            # can already be on its way to the reader thread; prefer it to a bare connection error
            if slot.done.acquire(timeout=0.5) and slot.payload is not None:
                return slot.payload
            conn.forget(rid)
            conn.close()
            raise RpcTransportError(f"sending {method!r} to {self.endpoint} (socket transport) failed: {exc}") from exc
        if not slot.done.acquire(timeout=-1 if timeout is None else timeout):
            conn.forget(rid)
            raise RpcTimeout(f"{method!r} on {self.endpoint} (socket transport) timed out after {timeout:g} s")
        if slot.error is not None:
            raise RpcTransportError(f"{method!r}: {slot.error}") from slot.error
        assert slot.payload is not None
        return slot.payload

    def close(self) -> None:
        """Close the connection; calls in flight fail with RpcTransportError."""
        with self._conn_lock:
            self._closed = True
            conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()
