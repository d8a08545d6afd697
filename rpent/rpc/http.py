"""The ``http`` transport: one RPC per ``POST /rpc`` with msgpack bodies over keep-alive HTTP/1.1.

Server: a threaded HTTP/1.1 server (one thread per connection; the handler runs on that thread,
so a blocking handler never stops the server from accepting). Heads are parsed and written by
:mod:`rpent.rpc.http1` (strict; ``content-length`` bodies only, ``expect: 100-continue`` honoured);
bodies go straight into the buffer the request is decoded from, and a reply is one ``sendmsg``
of head + message segments. Measured against the alternatives in ``benchmarks/rpc_bench.py``
(docs/results/rpc.md). Routes:

    POST /rpc      body: request message (rpent.rpc.codec), ``content-type: application/x-msgpack``
                   reply: 200 + reply message; 413 + error envelope when the body is over the limit
    GET  /healthz  JSON ``{"status": "ok", "name": ..., "pid": ...}`` (401 when a token is set:
                   use the ``healthz`` RPC method, which carries the token)

Client: keep-alive HTTP/1.1 over plain sockets (:class:`HttpClientTransport`): one ``sendmsg`` per
request, the reply body read straight into the buffer its arrays are decoded from; proxy
variables are never consulted, so loopback calls are never rerouted.

Resources (:class:`~rpent.rpc.protocol.ConnectionLimits`): request heads are bounded
(64 KiB, 431 beyond), a body grows only with the bytes received; a request that stalls for
``frame_timeout_s`` and a keep-alive connection idle for ``idle_timeout_s`` are dropped; at most
``max_connections`` are served at once (one more gets 503). On a server with a token, the first
request of a connection must carry the right ``x-rpent-token`` header in a head of at most
:data:`~rpent.rpc.protocol.AUTH_MAX_BYTES`: until then the connection is pending
(:mod:`rpent.rpc.listener`: no thread, no connection slot, ``auth_timeout_s`` to send it), and a
head without the right token gets 401 before any body is read. A later request of an admitted
connection whose header is missing or wrong may carry at most
:data:`~rpent.rpc.protocol.PREAUTH_MAX_BYTES` of body (else 401 before the body is read); the
client always sends the header.
"""

from __future__ import annotations

import json
import os
import select
import socket
import threading
from typing import TYPE_CHECKING

from rpent.rpc import codec, http1
from rpent.rpc.endpoint import Endpoint
from rpent.rpc.errors import RpcTimeout, RpcTransportError
from rpent.rpc.listener import TcpListener, Verdict
from rpent.rpc.netio import close_gracefully, recv_payload, send_all, tune
from rpent.rpc.protocol import AUTH_MAX_BYTES, PREAUTH_MAX_BYTES, TOKEN_HEADER, ConnectionLimits, error_reply
from rpent.rpc.socket import MAGIC as SOCKET_MAGIC
from rpent.rpc.socket import frame_error as socket_error_frame

if TYPE_CHECKING:
    from rpent.rpc.server import RpcServer

CONTENT_TYPE = "application/x-msgpack"
_HEAD_RECV = 4096  # a head and the start of its body; the rest of a body goes straight into its buffer


class HttpServerTransport:
    """Serves an :class:`~rpent.rpc.server.RpcServer` over HTTP/1.1 (keep-alive, one thread per connection).

    Args:
        server: the method registry/dispatcher.
        host, port: address to bind (port 0: OS-chosen).
        max_frame_bytes: largest accepted request body (bytes); larger gets 413 and a close.
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
        self.endpoint = Endpoint("http", host, self._listener.port)

    def serve_forever(self) -> None:
        """Accept and serve until :meth:`close`."""
        auth = (lambda: _FirstHeadAuth(self)) if self._server.token is not None else None
        self._listener.serve_forever(self._handle_connection, self._refuse, auth)

    def close(self) -> None:
        """Stop serving (thread-safe)."""
        self._listener.close()

    @staticmethod
    def _respond(conn: socket.socket, status: int, segments: list, nbytes: int, content_type: str,
                 close: bool = False) -> None:
        send_all(conn, [http1.response_head(status, content_type, nbytes, close=close), *segments])

    def _respond_error(self, conn: socket.socket, status: int, error_type: str, msg: str,
                       drain: int = 1 << 16) -> None:
        """An error envelope with ``status``; the connection is closed after it (``connection: close``).
        Up to ``drain`` unread request bytes are read and dropped first (at most ``DRAIN_S``), so
        the close does not reset the connection before the client has read the answer."""
        segments, n = codec.encode(error_reply(error_type, msg))
        try:
            self._respond(conn, status, segments, n, CONTENT_TYPE, close=True)
        except OSError:
            return
        if drain:
            close_gracefully(conn, drain)

    def _refuse(self, conn: socket.socket) -> None:
        try:
            conn.recv(_HEAD_RECV)
        except OSError:
            pass
        self._respond_error(
            conn, 503, "RpcTooManyConnections",
            f"server {self._server.name!r} already serves {self._limits.max_connections} connections "
            "(--max-connections); close idle clients or start the server with a larger --max-connections")

    def _read_head(self, conn: socket.socket, pending: bytes, first: bool) -> tuple[bytes, bytes] | None:
        """Receive until a complete request head; returns (head, bytes after it) or None when the
        connection is done (closed, idle or stalled past its timeout, or answered with an error)."""
        limits = self._limits
        data = pending
        while True:
            end = data.find(b"\r\n\r\n")
            if end >= 0:
                return data[:end], data[end + 4:]
            if len(data) > http1.MAX_HEAD_BYTES:
                self._respond_error(conn, 431, "RpcProtocolError",
                                    f"request head over {http1.MAX_HEAD_BYTES} bytes")
                return None
            if data and http1.bad_request_start(data):
                self._respond_error(conn, 400, "RpcProtocolError",
                                    f"bad HTTP request: {bytes(data[:60])!r} does not start an HTTP/1.1 request")
                return None
            conn.settimeout(limits.frame_timeout_s if data else limits.idle_timeout_s)
            try:
                chunk = conn.recv(_HEAD_RECV)
            except OSError:  # socket.timeout included: idle, or a request head that stalled
                return None
            if not chunk:
                return None
            if first and not data and chunk[:4] == SOCKET_MAGIC:
                self._tell_socket_client(conn)
                return None
            data += chunk

    def _tell_socket_client(self, conn: socket.socket) -> None:
        """An rpent socket-transport client dialled an http port: tell it in its own framing."""
        try:
            send_all(conn, socket_error_frame(
                0, "RpcProtocolError",
                f"{self.endpoint} is an rpent http-transport server, not the socket transport: use the "
                f"endpoint 'http://{self.endpoint.host_for_url}:{self.endpoint.port}' "
                "(or start the server with --transport socket)",
            ))
        except OSError:
            return
        close_gracefully(conn, 1 << 16)

    def _handle_connection(self, conn: socket.socket, pending: bytes = b"") -> None:
        first = not pending
        while True:
            got = self._read_head(conn, pending, first)
            if got is None:
                return
            first = False
            raw, pending = got
            try:
                req = http1.parse_request_head(raw)
            except http1.HttpError as exc:
                self._respond_error(conn, exc.status, "RpcProtocolError", f"bad HTTP request: {exc}")
                return
            length = req.content_length
            if length > self._max:
                self._too_large(conn, length)
                return
            if self._server.token is not None and length > PREAUTH_MAX_BYTES \
                    and not self._server.check_token(_header_text(req.headers.get(TOKEN_HEADER))):
                self._respond_error(
                    conn, 401, "RpcAuthError",
                    f"server {self._server.name!r} requires a token: send it in the {TOKEN_HEADER!r} header "
                    f"before a body over {PREAUTH_MAX_BYTES} bytes (rpent clients do: set RPENT_RPC_TOKEN in "
                    "the client's environment)", drain=0)
                close_gracefully(conn, min(length, self._max))
                return
            if len(pending) >= length:
                body = bytearray(pending[:length])
                pending = pending[length:]
            else:
                try:
                    if req.expect_continue:
                        conn.sendall(http1.CONTINUE)
                    conn.settimeout(self._limits.frame_timeout_s)
                    body = recv_payload(conn, length, pending)
                except OSError:  # socket.timeout included: a body that stalled for frame_timeout_s
                    return
                if body is None:
                    return  # truncated body: the peer went away
                pending = b""
            try:
                after = self._route(conn, req, body)
            except OSError:
                return
            if after is not None:
                after()
            if not req.keep_alive:
                return

    def _too_large(self, conn: socket.socket, length: int) -> None:
        self._respond_error(
            conn, 413, "RpcFrameTooLarge",
            f"request body of {length} bytes exceeds this server's max_frame_bytes={self._max}; "
            "send less per call or start the server with a larger --max-frame-bytes", drain=0,
        )
        close_gracefully(conn, length)

    def _route(self, conn: socket.socket, req: http1.RequestHead, body: bytearray):
        close = not req.keep_alive
        if req.method == b"POST" and req.target == b"/rpc":
            reply = self._server.handle_message(body)
            self._respond(conn, 200, reply.segments, reply.nbytes, CONTENT_TYPE, close)
            return reply.after_send
        if req.method == b"GET" and req.target == b"/healthz":
            if self._server.token is not None:
                doc = {"status": "unauthorized", "error": "a token is set: call the 'healthz' RPC method"}
                status = 401
            else:
                doc = {"status": "ok", "name": self._server.name, "pid": os.getpid()}
                status = 200
            data = json.dumps(doc).encode()
            self._respond(conn, status, [data], len(data), "application/json", close)
            return None
        data = json.dumps({"error": f"no route {req.method.decode()} {req.target.decode(errors='replace')}; "
                           "RPC calls are POST /rpc"}).encode()
        self._respond(conn, 404, [data], len(data), "application/json", close)
        return None


class _FirstHeadAuth:
    """Reads the first request head of a pending connection and admits the connection when its
    ``x-rpent-token`` header carries the server's token (see
    :class:`rpent.rpc.listener.Authenticator`); refusals are answered as the server answers."""

    def __init__(self, transport: HttpServerTransport) -> None:
        self._t = transport

    def want(self, received: int) -> int:
        return max(1, min(_HEAD_RECV, AUTH_MAX_BYTES + 4 - received))

    def feed(self, data: bytes) -> Verdict | None:
        t = self._t
        if data[:4] == SOCKET_MAGIC[:len(data[:4])]:
            if len(data) < 4:
                return None
            return Verdict(False, reply=t._tell_socket_client)
        end = data.find(b"\r\n\r\n")
        if end < 0:
            if http1.bad_request_start(data):
                return self._error(400, "RpcProtocolError",
                                   f"bad HTTP request: {bytes(data[:60])!r} does not start an HTTP/1.1 request")
            if len(data) > AUTH_MAX_BYTES:
                return self._error(401, "RpcAuthError", self._why(f"a first request head over {AUTH_MAX_BYTES} bytes"))
            return None
        try:
            req = http1.parse_request_head(data[:end])
        except http1.HttpError as exc:
            return self._error(exc.status, "RpcProtocolError", f"bad HTTP request: {exc}")
        if not t._server.check_token(_header_text(req.headers.get(TOKEN_HEADER))):
            return self._error(401, "RpcAuthError", self._why(f"no {TOKEN_HEADER!r} header or a wrong one"))
        return Verdict(True, data)

    def _why(self, what: str) -> str:
        return (f"server {self._t._server.name!r} requires a token: {what}; the first request of a connection must "
                f"send it in the {TOKEN_HEADER!r} header (rpent clients do: set RPENT_RPC_TOKEN in the client's "
                "environment)")

    def _error(self, status: int, error_type: str, message: str) -> Verdict:
        return Verdict(False, reply=lambda conn: self._t._respond_error(conn, status, error_type, message))


#: Idle keep-alive connections a client keeps for reuse.
MAX_IDLE_CONNECTIONS = 16


class _Head:
    """A parsed HTTP/1.1 response head: ``status`` (int), ``headers`` (lower-case name -> str;
    the last value wins), ``keep_alive`` (bool) and ``rest`` (bytes received after the head)."""

    __slots__ = ("status", "headers", "keep_alive", "rest")

    def __init__(self, status: int, headers: dict[str, str], keep_alive: bool, rest: bytes) -> None:
        self.status = status
        self.headers = headers
        self.keep_alive = keep_alive
        self.rest = rest


class HttpClientTransport:
    """Client side of the http transport: keep-alive HTTP/1.1 over plain sockets; thread-safe.

    Each call takes an idle keep-alive connection (or opens one), writes the request head and the
    message segments with one ``sendmsg`` (no joining copy), parses the response head and reads the
    body straight into the buffer the arrays are decoded from (zero copy). It speaks only what an
    rpent http server answers (``content-length`` bodies); any other answer is reported with its
    status, content type and first bytes, and its connection is closed. (It replaced an
    ``httpx.Client`` on this path: httpx's per-request machinery cost ~1.5 ms of CPU for a 393 KB
    reply, ``benchmarks/rpc_bench.py``; httpx stays for talking to HTTP servers in general.)
    Proxy variables are never consulted (loopback calls must not be rerouted).

    Args:
        endpoint: server endpoint (protocol ``http``).
        connect_timeout: seconds to wait for a TCP connection.
        max_frame_bytes: largest accepted reply body (bytes); the body buffer grows only with the
            bytes received (:func:`~rpent.rpc.netio.recv_payload`).
        token: the shared RPC token, or None; sent in the ``x-rpent-token`` header too, so a
            token-protected server checks it before reading the body.

    Raises:
        ValueError: the token contains a control character (it cannot travel in an HTTP header).
    """

    def __init__(self, endpoint: Endpoint, connect_timeout: float, max_frame_bytes: int,
                 token: str | None = None) -> None:
        self.endpoint = endpoint
        self._connect_timeout = connect_timeout
        self._max = max_frame_bytes
        host = f"{endpoint.host_for_url}:{endpoint.port}"
        head = (f"POST /rpc HTTP/1.1\r\nhost: {host}\r\ncontent-type: {CONTENT_TYPE}\r\n"
                f"accept: {CONTENT_TYPE}\r\nuser-agent: rpent\r\n").encode("ascii")
        if token is not None:
            if any(ord(ch) < 32 or ord(ch) == 127 for ch in token):
                raise ValueError("the RPC token ($RPENT_RPC_TOKEN) contains a control character; it must be "
                                 "printable text to travel in an HTTP header")
            head += f"{TOKEN_HEADER}: ".encode() + token.encode("utf-8") + b"\r\n"
        self._head = head + b"content-length: "
        self._idle: list[socket.socket] = []
        self._lock = threading.Lock()
        self._generation = 0
        self._where = f"{endpoint} (http transport)"

    # ------------------------------------------------------------------ connections
    def _take(self, timeout: float | None) -> socket.socket:
        with self._lock:
            while self._idle:
                sock = self._idle.pop()
                if _still_open(sock):
                    return sock
                sock.close()
        connect = self._connect_timeout if timeout is None else min(timeout, self._connect_timeout)
        try:
            sock = socket.create_connection((self.endpoint.host, self.endpoint.port), timeout=connect)
        except socket.timeout as exc:
            raise RpcTimeout(f"cannot connect to {self._where}: no answer within {connect:g} s") from exc
        except OSError as exc:
            raise RpcTransportError(f"cannot connect to {self._where}: {exc.strerror or exc}") from exc
        tune(sock)
        return sock

    def _give_back(self, sock: socket.socket, generation: int) -> None:
        with self._lock:
            if generation == self._generation and len(self._idle) < MAX_IDLE_CONNECTIONS:
                self._idle.append(sock)
                return
        sock.close()

    # ------------------------------------------------------------------ calls
    def request(self, segments: list, nbytes: int, timeout: float | None, method: str) -> bytearray:
        """POST one request message; return the reply message (a writable buffer).

        Args:
            segments, nbytes: the encoded request (:func:`rpent.rpc.codec.encode`).
            timeout: seconds for connecting and for each wait for reply bytes (None: no limit).
            method: the method name (for error messages).

        Raises:
            RpcTimeout: no complete reply within ``timeout`` s (the connection is closed).
            RpcTransportError: connection failure or a non-rpent reply, naming endpoint and transport.
        """
        if nbytes > self._max:
            raise RpcTransportError(
                f"request to {method!r} is {nbytes} bytes, over the client's max_frame_bytes={self._max}"
            )
        generation = self._generation
        sock = self._take(timeout)
        keep = False
        try:
            sock.settimeout(timeout)
            try:
                send_all(sock, [self._head + b"%d\r\n\r\n" % nbytes, *segments])
            except OSError:
                # the server may have refused the request (e.g. too large) and closed: its error
                # answer can already be here; prefer it to a bare connection error
                sock.settimeout(0.5)
                try:
                    head = self._read_head(sock)
                except (OSError, RpcTransportError):
                    head = None
                if head is None:
                    raise
                sock.settimeout(timeout)
                body, _ = self._read_body(sock, head)
                return body
            head = self._read_head(sock)
            body, keep = self._read_body(sock, head)
            return body
        except socket.timeout as exc:
            limit = "no limit" if timeout is None else f"{timeout:g} s"
            raise RpcTimeout(f"{method!r} on {self._where} timed out after {limit}") from exc
        except OSError as exc:
            raise RpcTransportError(f"{method!r} on {self._where} failed: {type(exc).__name__}: {exc}") from exc
        finally:
            if keep:
                self._give_back(sock, generation)
            else:
                sock.close()

    def _read_head(self, sock: socket.socket) -> _Head:
        data = b""
        while True:
            chunk = sock.recv(_HEAD_RECV)
            if not chunk:
                raise RpcTransportError(
                    f"{self._where} closed the connection " + ("before answering" if not data else "mid-answer"))
            data += chunk
            end = data.find(b"\r\n\r\n")
            if end >= 0:
                break
            if len(data) > http1.MAX_HEAD_BYTES:
                raise RpcTransportError(f"{self._where} sent a response head over {http1.MAX_HEAD_BYTES} bytes")
        try:
            status, headers, keep_alive = http1.parse_response_head(data[:end])
        except http1.HttpError as exc:
            raise RpcTransportError(
                f"{self._where} did not answer in HTTP ({exc}); is it an rpent http server? "
                "(a 'socket://' port answers in its own framing)") from None
        return _Head(status, headers, keep_alive, data[end + 4:])

    def _read_body(self, sock: socket.socket, head: _Head) -> tuple[bytearray, bool]:
        """The reply body and whether the connection may be reused; raises for a non-rpent answer."""
        ctype = head.headers.get("content-type", "")
        length_text = head.headers.get("content-length")
        chunked = "transfer-encoding" in head.headers
        length = None
        if length_text is not None and not chunked:
            try:
                length = int(length_text)
            except ValueError:
                raise RpcTransportError(f"{self._where} sent a bad content-length {length_text!r}") from None
            if length < 0:
                raise RpcTransportError(f"{self._where} sent a bad content-length {length_text!r}")
        if ctype.startswith(CONTENT_TYPE) and length is not None:
            if length > self._max:
                raise RpcTransportError(
                    f"reply of {length} bytes from {self._where} exceeds the client's max_frame_bytes={self._max}; "
                    "raise RpcClient(max_frame_bytes=...)"
                )
            if len(head.rest) > length:
                raise RpcTransportError(f"{self._where} sent {len(head.rest) - length} bytes after its reply")
            body = recv_payload(sock, length, head.rest)
            if body is None:
                raise RpcTransportError(f"truncated reply from {self._where}: the connection closed mid-body")
            return body, head.keep_alive
        # Not an rpent reply: report what answered (the first bytes of its body) and drop the connection.
        text = head.rest
        if length is not None and len(text) < min(length, 300):
            try:
                sock.settimeout(2.0)
                more = sock.recv(min(length, 300) - len(text))
                text += more
            except OSError:
                pass
        text = text[:300].decode(errors="replace")
        what = ctype or "no content-type"
        if not ctype.startswith(CONTENT_TYPE):
            raise RpcTransportError(
                f"{self._where} answered HTTP {head.status} with {what} instead of an rpent reply: {text!r}; "
                "is it an rpent RPC server (or a socket-transport port)?"
            )
        raise RpcTransportError(f"{self._where} answered HTTP {head.status} without a content-length; "
                                "an rpent http server always sends one")

    def close(self) -> None:
        """Close pooled connections (a later call reconnects; calls in flight finish on theirs)."""
        with self._lock:
            self._generation += 1
            idle, self._idle = self._idle, []
        for sock in idle:
            sock.close()


def _header_text(value: str | None) -> str | None:
    """A header value as the UTF-8 text the client encoded (header values are parsed as latin-1)."""
    return None if value is None else value.encode("latin-1").decode("utf-8", "replace")


def _still_open(sock: socket.socket) -> bool:
    """True if an idle keep-alive connection has nothing to read (a readable idle connection has
    been closed by the server, e.g. after its idle timeout, or carries junk: either way unusable)."""
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    try:
        return not poller.poll(0)
    except OSError:
        return False
