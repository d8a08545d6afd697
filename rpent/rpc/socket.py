"""The ``socket`` transport: length-prefixed frames over one persistent TCP connection.

Frame = 20-byte header + message::

    magic b"RPNT" | request id: uint64 LE | message length: uint64 LE | message (rpent.rpc.codec)

Requests and replies use the same header; a reply carries its request's id, so one connection
carries many calls in flight at once and replies may come back in any order. The server reads
a connection's frames on one thread and runs each call on that same thread (no hand-off on the
round trip); if the client sends more frames while a call runs, :mod:`rpent.rpc.readwatch` starts
another reader for the connection on a worker thread, so its calls still run concurrently
(Linux; elsewhere every call goes to a worker thread).

Bad input: a frame with a wrong magic gets an error reply (id 0) and the connection is closed
(an HTTP request gets an HTTP 400 answer that names the mismatch); an oversized frame gets an
error reply with its id and the connection is closed (the stream cannot be resynchronised); a
truncated frame (peer closed mid-frame) just ends that connection; an undecodable message gets
an error reply and the connection stays open. Other clients are never affected.

Resources (:class:`~rpent.rpc.protocol.ConnectionLimits`): a message buffer grows only with the
bytes received (:func:`~rpent.rpc.netio.recv_payload`), never to the length a header merely
claims; a frame that stalls for ``frame_timeout_s`` and a connection idle for
``idle_timeout_s`` are dropped; at most ``max_connections`` are served at once. On a server with
a token, the first frame of a connection must carry the right token and be at most
:data:`~rpent.rpc.protocol.AUTH_MAX_BYTES` (the client sends a small ``healthz`` call with the
token as the first frame of every connection): until then the connection is pending
(:mod:`rpent.rpc.listener`: no thread, no connection slot, ``auth_timeout_s`` to send it), so the
token is checked before any large read and before any slot is granted.
"""

from __future__ import annotations

import itertools
import socket
import struct
import threading
from typing import TYPE_CHECKING, Callable, Sequence

from rpent.rpc import codec
from rpent.rpc.endpoint import Endpoint
from rpent.rpc.errors import RpcTimeout, RpcTransportError
from rpent.rpc.listener import TcpListener, Verdict
from rpent.rpc.netio import close_gracefully as _close_gracefully
from rpent.rpc.netio import recv_exact_into, recv_payload, send_all, tune
from rpent.rpc.readwatch import ReadWatch, Watched
from rpent.rpc.protocol import AUTH_MAX_BYTES, PREAUTH_MAX_BYTES, ConnectionLimits, error_reply, make_request
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
                                     max_connections=self._limits.max_connections,
                                     max_pending=self._limits.max_unauthenticated,
                                     auth_timeout_s=self._limits.auth_timeout_s)
        self._pool = WorkerPool(f"rpc-{server.name}-worker")
        self._watch = ReadWatch.create(self._take_over, f"rpc-{server.name}-readwatch")
        self.endpoint = Endpoint("socket", host, self._listener.port)

    def serve_forever(self) -> None:
        """Accept and serve until :meth:`close`."""
        auth = (lambda: _FirstFrameAuth(self)) if self._server.token is not None else None
        try:
            self._listener.serve_forever(self._handle_connection, self._refuse, auth)
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

    def _auth_error(self, why: str) -> Callable[[socket.socket], None]:
        """The refusal of a connection whose first frame did not authenticate it: an error frame
        with id 0 (the whole connection is refused; the client fails every call on it with it)."""
        def reply(conn: socket.socket) -> None:
            self._send(conn, threading.Lock(), frame_error(
                0, "RpcAuthError",
                f"server {self._server.name!r} requires a token: {why}; the first frame of a connection must be at "
                f"most {AUTH_MAX_BYTES} bytes and carry it (rpent clients send a small authenticated call first); "
                "set RPENT_RPC_TOKEN in the client's environment and use an up-to-date rpent client",
            ))
            _close_gracefully(conn, 1 << 16)
        return reply

    def _handle_connection(self, conn: socket.socket, first: bytes = b"") -> None:
        st = _ConnState(conn, authenticated=self._server.token is None or bool(first))
        if first:  # the authenticating frame the listener read: answer it here, then read on
            _magic, rid, length = FRAME.unpack_from(first)
            self._reply(conn, st.send_lock, rid, bytearray(first[FRAME.size:FRAME.size + length]))
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
            # run the call here; the watch starts another reader if the client sends more meanwhile.
            # Disarm before the reply goes out: a client that answers it with its next request at
            # once must find this thread still its reader, not wake the watch and a worker.
            if not self._reply(conn, send_lock, rid, payload, running, before_send=lambda: watch.disarm(w, ticket)):
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
               running: "_Running | None" = None, before_send: "Callable[[], bool] | None" = None) -> bool:
        """Run one call and send its reply; returns ``before_send()`` (called between the two), else True."""
        keep = True
        try:
            reply = self._server.handle_message(payload)
            if before_send is not None:
                keep = before_send()
            self._send(conn, send_lock, [FRAME.pack(MAGIC, rid, reply.nbytes), *reply.segments])
        finally:
            if running is not None:
                running.add(-1)
        if reply.after_send is not None:
            reply.after_send()
        return keep

    @staticmethod
    def _send(conn: socket.socket, lock: threading.Lock, segments: Sequence) -> None:
        try:
            with lock:
                send_all(conn, segments)
        except OSError:
            pass  # client gone; its reader sees the closed connection


class _FirstFrameAuth:
    """Reads the first frame of a pending connection exactly (header, then its message) and
    admits the connection when that message carries the server's token (see
    :class:`rpent.rpc.listener.Authenticator`)."""

    def __init__(self, transport: SocketServerTransport) -> None:
        self._t = transport
        self._length: int | None = None

    def want(self, received: int) -> int:
        if received < FRAME.size:
            return FRAME.size - received
        assert self._length is not None
        return FRAME.size + self._length - received

    def feed(self, data: bytes) -> Verdict | None:
        t = self._t
        if len(data) < FRAME.size:
            if not MAGIC.startswith(data[:4]):
                return self._wrong_magic(data)
            return None
        magic, rid, length = FRAME.unpack_from(data)
        if magic != MAGIC:
            return self._wrong_magic(data)
        if length > AUTH_MAX_BYTES:
            return Verdict(False, reply=t._auth_error(f"a first frame of {length} bytes"))
        self._length = length
        if len(data) < FRAME.size + length:
            return None
        if not t._carries_token(bytearray(data[FRAME.size:])):
            return Verdict(False, reply=t._auth_error("the first frame carried no token or a wrong one"))
        return Verdict(True, data)

    def _wrong_magic(self, data: bytes) -> Verdict:
        head = data[:FRAME.size]
        return Verdict(False, reply=lambda conn: self._t._wrong_magic(conn, threading.Lock(), head))


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
        #: the server's RpcAuthError envelope when it refused this connection's token
        self.refusal: bytearray | None = None
        threading.Thread(target=self._read_loop, name=f"rpc-client-{endpoint}", daemon=True).start()

    def add(self, rid: int) -> _Slot:
        """Register a waiter for request ``rid``; raises RpcTransportError if the connection died."""
        slot = _Slot()
        with self._plock:
            if self.refusal is not None:  # the server refused the token: that is every call's answer
                slot.payload = self.refusal
                slot.done.release()
                return slot
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
                payload = recv_payload(self.sock, length)  # grows with the bytes received, not the claim
                if payload is None:
                    reason = RpcTransportError(f"connection to {self._ep} (socket transport) closed mid-reply")
                    break
                with self._plock:
                    slot = self._pending.pop(rid, None)
                if slot is not None:
                    slot.payload = payload
                    slot.done.release()
                elif rid == 0:
                    reason = _protocol_error(payload, self._ep)
                    if _is_auth_error(payload):  # the token was refused: every call gets that answer
                        with self._plock:
                            self.refusal = payload
                            pending, self._pending = self._pending, {}
                        for waiting in pending.values():
                            waiting.payload = payload
                            waiting.done.release()
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


def _is_auth_error(payload: bytearray) -> bool:
    try:
        env = codec.decode(bytes(payload))
    except Exception:  # noqa: BLE001
        return False
    return isinstance(env, dict) and env.get("error_type") == "RpcAuthError"


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
