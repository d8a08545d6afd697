"""The ``socket`` transport: length-prefixed frames over one persistent TCP connection.

Frame = 20-byte header + message::

    magic b"RPNT" | request id: uint64 LE | message length: uint64 LE | message (rpent.rpc.codec)

Requests and replies use the same header; a reply carries its request's id, so one connection
carries many calls in flight at once and replies may come back in any order. The server reads
frames on one thread per connection and runs each call on a worker thread.

Bad input: a frame with a wrong magic gets an error reply (id 0) and the connection is closed
(an HTTP request gets an HTTP 400 answer that names the mismatch); an oversized frame gets an
error reply with its id and the connection is closed (the stream cannot be resynchronised); a
truncated frame (peer closed mid-frame) just ends that connection; an undecodable message gets
an error reply and the connection stays open. Other clients are never affected.

Resources (:class:`~rpent.rpc.protocol.ConnectionLimits`): a message buffer grows only with the
bytes received (:func:`~rpent.rpc.netio.recv_payload`), never to the length a header merely
claims; a frame that stalls for ``frame_timeout_s`` and a connection idle for
``idle_timeout_s`` are dropped; at most ``max_connections`` are served at once. On a server with
a token, a connection may send frames of at most :data:`~rpent.rpc.protocol.PREAUTH_MAX_BYTES`
until one of them carried the right token (the client sends a small ``healthz`` call with the
token as the first frame of every connection), so the token is checked before any large read.
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
from rpent.rpc.netio import close_gracefully as _close_gracefully
from rpent.rpc.netio import recv_exact_into, recv_payload, send_all, tune
from rpent.rpc.readwatch import ReadWatch, Watched
from rpent.rpc.protocol import PREAUTH_MAX_BYTES, ConnectionLimits, error_reply, make_request
from rpent.rpc.workers import WorkerPool

if TYPE_CHECKING:
    from rpent.rpc.server import RpcServer

MAGIC = b"RPNT"
FRAME = struct.Struct("<4sQQ")
_HTTP_METHODS = (b"GET ", b"POST", b"PUT ", b"HEAD", b"DELE", b"OPTI", b"PATC", b"CONN", b"TRAC")


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
        limits: connection count and timeouts (see the module docstring).
    """

    def __init__(self, server: "RpcServer", host: str, port: int, max_frame_bytes: int,
                 limits: ConnectionLimits | None = None) -> None:
        self._server = server
        self._max = max_frame_bytes
        self._limits = limits or ConnectionLimits()
        self._listener = TcpListener(host, port, name=f"rpc-{server.name}",
                                     max_connections=self._limits.max_connections)
        self._pool = WorkerPool(f"rpc-{server.name}-worker")
        self._watch = ReadWatch.create(self._take_over, f"rpc-{server.name}-readwatch")
        self.endpoint = Endpoint("socket", host, self._listener.port)

    def serve_forever(self) -> None:
        """Accept and serve until :meth:`close`."""
        try:
            self._listener.serve_forever(self._handle_connection, self._refuse)
        finally:
            self._pool.close()
            if self._watch is not None:
                self._watch.close()

    def close(self) -> None:
        """Stop serving (thread-safe)."""
        self._listener.close()

    def _refuse(self, conn: socket.socket) -> None:
        self._send(conn, threading.Lock(), frame_error(
            0, "RpcTooManyConnections",
            f"server {self._server.name!r} already serves {self._limits.max_connections} connections "
            "(--max-connections); close idle clients or start the server with a larger --max-connections",
        ))
        _close_gracefully(conn, FRAME.size)

    def _handle_connection(self, conn: socket.socket) -> None:
        st = _ConnState(conn, authenticated=self._server.token is None)
        watch = self._watch
        st.watched = watch.add(conn, st) if watch is not None else None
        try:
            if self._read_loop(st):
                st.finished.set()
            # else another thread reads this connection now: the listener closes the socket
            # once this thread returns, so wait for whichever reader ends the connection
            st.finished.wait()
        finally:
            if st.watched is not None and watch is not None:
                watch.remove(st.watched)

    def _take_over(self, w: Watched) -> None:
        """Watcher thread: bytes arrived on a connection whose reader runs a call: read it elsewhere."""
        st = w.data
        assert isinstance(st, _ConnState)
        try:
            self._pool.submit(lambda: self._continue(st))
        except RuntimeError:  # the pool is closed: the server is stopping
            st.finished.set()

    def _continue(self, st: "_ConnState") -> None:
        done = True
        try:
            done = self._read_loop(st)
        except OSError:
            pass
        finally:
            if done:
                st.finished.set()

    def _read_loop(self, st: "_ConnState") -> bool:
        """Read and serve frames of one connection. True: the connection is done (closed, idle,
        refused); False: a call ran here and meanwhile another thread took reading over."""
        conn, send_lock, running = st.sock, st.send_lock, st.running
        header = bytearray(FRAME.size)
        limits = self._limits
        while True:
            conn.settimeout(limits.idle_timeout_s)
            try:
                first = conn.recv_into(header, FRAME.size)
            except socket.timeout:
                if running.count:
                    continue  # a call of this connection is still running: waiting for it is not idling
                return True  # idle past idle_timeout_s
            if first == 0:
                return True  # closed cleanly
            conn.settimeout(limits.frame_timeout_s)
            try:
                got = first + (recv_exact_into(conn, memoryview(header)[first:]) if first < FRAME.size else 0)
            except socket.timeout:
                return True  # a header that stalled
            if got < FRAME.size:
                return True  # closed mid-header
            magic, rid, length = FRAME.unpack(header)
            if magic != MAGIC:
                self._wrong_magic(conn, send_lock, bytes(header))
                return True
            if length > self._max:
                self._send(conn, send_lock, frame_error(
                    rid, "RpcFrameTooLarge",
                    f"request frame of {length} bytes exceeds this server's max_frame_bytes={self._max}; "
                    "send less per call or start the server with a larger --max-frame-bytes",
                ))
                _close_gracefully(conn, length)
                return True
            if not st.authenticated and length > PREAUTH_MAX_BYTES:
                self._send(conn, send_lock, frame_error(
                    rid, "RpcAuthError",
                    f"server {self._server.name!r} requires a token: the first frame of a connection must be at "
                    f"most {PREAUTH_MAX_BYTES} bytes and carry it (rpent clients send a small authenticated call "
                    "first); set RPENT_RPC_TOKEN in the client's environment and use an up-to-date rpent client",
                ))
                _close_gracefully(conn, length)
                return True
            try:
                payload = recv_payload(conn, length)
            except socket.timeout:
                return True  # an incomplete frame stalled for frame_timeout_s
            if payload is None:
                return True  # truncated frame: peer went away
            if not st.authenticated:
                st.authenticated = self._carries_token(payload)
            running.add(1)
            w, watch = st.watched, self._watch
            ticket = watch.arm(w) if w is not None and watch is not None else None
            if ticket is None:
                self._pool.submit(lambda rid=rid, payload=payload: self._reply(conn, send_lock, rid, payload, running))
                continue
            # run the call here; the watch starts another reader if the client sends more meanwhile
            self._reply(conn, send_lock, rid, payload, running)
            if not watch.disarm(w, ticket):
                return False

    def _carries_token(self, payload: bytearray) -> bool:
        try:
            req = codec.decode(bytes(payload))
        except Exception:  # noqa: BLE001 - not a valid request: not authenticated (its own reply says why)
            return False
        return isinstance(req, dict) and self._server.check_token(req.get("token"))

    def _wrong_magic(self, conn: socket.socket, send_lock: threading.Lock, head: bytes) -> None:
        where = f"{self.endpoint}"
        if head[:4] in _HTTP_METHODS:
            text = (f"{where} is an rpent socket-transport server, not HTTP: use the endpoint "
                    f"'socket://{self.endpoint.host_for_url}:{self.endpoint.port}' (or start the server with "
                    "--transport http)\n").encode()
            reply = (b"HTTP/1.1 400 Bad Request\r\ncontent-type: text/plain\r\nconnection: close\r\n"
                     b"content-length: " + str(len(text)).encode() + b"\r\n\r\n" + text)
            self._send(conn, send_lock, [reply])
        else:
            self._send(conn, send_lock, frame_error(
                0, "RpcProtocolError",
                f"bad frame magic {head[:4]!r} (expected {MAGIC!r}); this is an rpent socket-transport "
                f"port: use a 'socket://' endpoint, or 'http://' for an HTTP server",
            ))
        _close_gracefully(conn, 1 << 16)

    def _reply(self, conn: socket.socket, send_lock: threading.Lock, rid: int, payload: bytearray,
               running: "_Running | None" = None) -> None:
        try:
            reply = self._server.handle_message(payload)
            self._send(conn, send_lock, [FRAME.pack(MAGIC, rid, reply.nbytes), *reply.segments])
        finally:
            if running is not None:
                running.add(-1)
        if reply.after_send is not None:
            reply.after_send()

    @staticmethod
    def _send(conn: socket.socket, lock: threading.Lock, segments: Sequence) -> None:
        try:
            with lock:
                send_all(conn, segments)
        except OSError:
            pass  # client gone; its reader sees the closed connection


class _ConnState:
    """One served connection: its socket, the lock its replies are sent under, its calls in flight,
    whether it authenticated, its :class:`Watched` entry, and ``finished`` (set by the reader that
    ends it)."""

    __slots__ = ("sock", "send_lock", "running", "authenticated", "watched", "finished")

    def __init__(self, sock: socket.socket, authenticated: bool) -> None:
        self.sock = sock
        self.send_lock = threading.Lock()
        self.running = _Running()
        self.authenticated = authenticated
        self.watched: Watched | None = None
        self.finished = threading.Event()


class _Running:
    """Calls of one connection submitted and not yet answered (thread-safe counter)."""

    __slots__ = ("count", "_lock")

    def __init__(self) -> None:
        self.count = 0
        self._lock = threading.Lock()

    def add(self, n: int) -> None:
        with self._lock:
            self.count += n


class _Slot:
    """One call waiting for its reply: ``done`` once ``payload`` or ``error`` is set; ``event`` wakes
    its caller (on delivery, or when the reader role becomes free)."""

    __slots__ = ("event", "done", "payload", "error")

    def __init__(self) -> None:
        self.event = threading.Event()
        self.done = False
        self.payload: bytearray | None = None
        self.error: BaseException | None = None


#: Seconds a reply may stall in the middle of its frame before the connection is given up, at least
#: (the caller's remaining timeout counts when it is longer): half a frame cannot be skipped.
MID_FRAME_STALL_S = 5.0


class _Connection:
    """One TCP connection whose callers read the reply frames themselves (leader/follower).

    The first caller waiting for a reply becomes the reader: it reads frames until its own
    arrives, handing other callers' replies to them on the way, then passes the reader role to
    another waiting caller. A lone caller therefore reads its own reply on its own thread: no
    hand-off to and from a reader thread on the round trip (two thread wake-ups per call less,
    each of which costs a scheduling delay on a loaded machine; ``benchmarks/rpc_bench.py``).
    """

    def __init__(self, endpoint: Endpoint, connect_timeout: float, max_frame_bytes: int) -> None:
        self._ep = endpoint
        self._max = max_frame_bytes
        try:
            sock = socket.create_connection((endpoint.host, endpoint.port), timeout=connect_timeout)
        except socket.timeout as exc:
            raise RpcTimeout(f"cannot connect to {endpoint} (socket transport): no answer within {connect_timeout:g} s") from exc
        except OSError as exc:
            raise RpcTransportError(f"cannot connect to {endpoint} (socket transport): {exc.strerror or exc}") from exc
        tune(sock)
        self.sock = sock
        self.send_lock = threading.Lock()
        self._pending: dict[int, _Slot] = {}
        self._plock = threading.Lock()
        self._reading = False
        self._header = bytearray(FRAME.size)
        self.dead: BaseException | None = None

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

    def wait(self, rid: int, slot: _Slot, timeout: float | None) -> bool:
        """Wait up to ``timeout`` s (None: forever) until ``slot`` (of request ``rid``) is done,
        reading frames while no other caller does. Returns False on timeout; the slot is then
        forgotten (a late reply is dropped) and the reader role passed on."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            with self._plock:
                if slot.done:
                    return True
                lead = not self._reading
                if lead:
                    self._reading = True
                else:
                    slot.event.clear()
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                with self._plock:
                    if slot.done:
                        return True
                    self._pending.pop(rid, None)
                    if lead:
                        self._reading = False
                    if not self._reading:
                        self._nudge()
                return False
            if not lead:
                slot.event.wait(remaining)
                continue
            try:
                self._read_frames(slot, remaining)
            finally:
                with self._plock:
                    self._reading = False
                    self._nudge()

    def _nudge(self) -> None:
        """Wake one waiting caller to take over reading (call with ``_plock`` held)."""
        for other in self._pending.values():
            if not other.done:
                other.event.set()
                break

    def _read_frames(self, slot: _Slot, timeout: float | None) -> None:
        """Read and deliver frames until ``slot`` is done or no frame starts within ``timeout`` s."""
        sock, header = self.sock, self._header
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            while not slot.done:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return
                sock.settimeout(remaining)
                try:
                    first = sock.recv_into(header, FRAME.size)
                except socket.timeout:
                    return  # no frame started in time: nothing consumed, the stream stays in step
                if first == 0:
                    self._fail(RpcTransportError(f"connection to {self._ep} (socket transport) closed by the server"))
                    return
                sock.settimeout(MID_FRAME_STALL_S if remaining is None else max(remaining, MID_FRAME_STALL_S))
                if first < FRAME.size and recv_exact_into(sock, memoryview(header)[first:]) < FRAME.size - first:
                    self._fail(RpcTransportError(f"connection to {self._ep} (socket transport) closed mid-reply"))
                    return
                magic, rid, length = FRAME.unpack(header)
                if magic != MAGIC:
                    self._fail(RpcTransportError(
                        f"{self._ep} (socket transport) sent a frame with bad magic {bytes(magic)!r}; "
                        "is it an HTTP server? use an 'http://' endpoint"
                    ))
                    return
                if length > self._max:
                    self._fail(RpcTransportError(
                        f"reply frame of {length} bytes from {self._ep} (socket transport) exceeds the client's "
                        f"max_frame_bytes={self._max}; raise RpcClient(max_frame_bytes=...)"
                    ))
                    return
                payload = recv_payload(sock, length)
                if payload is None:
                    self._fail(RpcTransportError(f"connection to {self._ep} (socket transport) closed mid-reply"))
                    return
                with self._plock:
                    other = self._pending.pop(rid, None)
                    if other is not None:
                        other.payload = payload
                        other.done = True
                        other.event.set()
                if other is None and rid == 0:
                    self._fail(_protocol_error(payload, self._ep))
                    return
        except socket.timeout:
            self._fail(RpcTimeout(f"a reply from {self._ep} (socket transport) stalled mid-frame; connection dropped"))
        except OSError as exc:
            self._fail(RpcTransportError(f"connection to {self._ep} (socket transport) failed: {exc}"))

    def _fail(self, reason: BaseException) -> None:
        with self._plock:
            if self.dead is None:
                self.dead = reason
            pending, self._pending = self._pending, {}
            for slot in pending.values():
                slot.error = self.dead
                slot.done = True
                slot.event.set()
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
        token: the shared RPC token, or None. With a token, the first frame of every new
            connection is a small ``healthz`` call carrying it (its reply is dropped), so a
            token-protected server accepts the large frames that follow.

    The connection opens on the first call and reopens on the next call after a failure.
    """

    def __init__(self, endpoint: Endpoint, connect_timeout: float, max_frame_bytes: int,
                 token: str | None = None) -> None:
        self.endpoint = endpoint
        self._token = token
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
                conn = _Connection(self.endpoint, connect, self._max)
                if self._token is not None:
                    segments, n = codec.encode(make_request("healthz", [], {}, self._token))
                    try:
                        with conn.send_lock:
                            send_all(conn.sock, [FRAME.pack(MAGIC, next(self._ids), n), *segments])
                    except OSError:
                        pass  # the call that follows reports the dead connection
                self._conn = conn
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
            # can already be here; prefer it to a bare connection error
            if conn.wait(rid, slot, 0.5) and slot.payload is not None:
                return slot.payload
            conn.forget(rid)
            conn.close()
            raise RpcTransportError(f"sending {method!r} to {self.endpoint} (socket transport) failed: {exc}") from exc
        if not conn.wait(rid, slot, timeout):
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
