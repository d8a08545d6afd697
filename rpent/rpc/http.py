"""The ``http`` transport: one RPC per ``POST /rpc`` with msgpack bodies over keep-alive HTTP/1.1.

Server: a threaded HTTP/1.1 server built on ``h11`` (one thread per connection; the handler runs
on that thread, so a blocking handler never stops the server from accepting). Measured against
the alternatives in ``benchmarks/rpc_bench.py`` (see README). Routes:

    POST /rpc      body: request message (rpent.rpc.codec), ``content-type: application/x-msgpack``
                   reply: 200 + reply message; 413 + error envelope when the body is over the limit
    GET  /healthz  JSON ``{"status": "ok", "name": ..., "pid": ...}`` (401 when a token is set:
                   use the ``healthz`` RPC method, which carries the token)

Client: a persistent ``httpx.Client`` (keep-alive pool, ``trust_env=False`` so proxy variables
never reroute loopback calls).

Resources (:class:`~rpent.rpc.protocol.ConnectionLimits`): request heads are bounded by h11
(64 KiB), a body grows only with the bytes received; a request that stalls for
``frame_timeout_s`` and a keep-alive connection idle for ``idle_timeout_s`` are dropped; at most
``max_connections`` are served at once (one more gets 503). On a server with a token, a request
whose ``x-rpent-token`` header is missing or wrong may carry at most
:data:`~rpent.rpc.protocol.PREAUTH_MAX_BYTES` of body (else 401 before the body is read); the
client always sends the header.
"""

from __future__ import annotations

import json
import os
import socket
from typing import TYPE_CHECKING

import h11
import httpx

from rpent.rpc import codec
from rpent.rpc.endpoint import Endpoint
from rpent.rpc.errors import RpcTimeout, RpcTransportError
from rpent.rpc.listener import TcpListener
from rpent.rpc.netio import close_gracefully, send_all
from rpent.rpc.protocol import PREAUTH_MAX_BYTES, TOKEN_HEADER, ConnectionLimits, error_reply
from rpent.rpc.socket import MAGIC as SOCKET_MAGIC
from rpent.rpc.socket import frame_error as socket_error_frame

if TYPE_CHECKING:
    from rpent.rpc.server import RpcServer

CONTENT_TYPE = "application/x-msgpack"
_RECV = 1 << 20


class HttpServerTransport:
    """Serves an :class:`~rpent.rpc.server.RpcServer` over HTTP/1.1 (h11, threads).

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
                                     max_connections=self._limits.max_connections)
        self.endpoint = Endpoint("http", host, self._listener.port)

    def serve_forever(self) -> None:
        """Accept and serve until :meth:`close`."""
        self._listener.serve_forever(self._handle_connection, self._refuse)

    def close(self) -> None:
        """Stop serving (thread-safe)."""
        self._listener.close()

    def _respond(self, conn: socket.socket, h: h11.Connection, status: int, segments: list, nbytes: int,
                 content_type: str) -> None:
        head = h.send(h11.Response(status_code=status, headers=[
            ("content-type", content_type), ("content-length", str(nbytes)), ("server", "rpent"),
        ]))
        out = [head]
        for seg in segments:
            out.extend(h.send_with_data_passthrough(h11.Data(data=seg)))
        out.append(h.send(h11.EndOfMessage()))
        send_all(conn, out)

    def _respond_error(self, conn: socket.socket, h: h11.Connection, status: int, error_type: str, msg: str) -> None:
        segments, n = codec.encode(error_reply(error_type, msg))
        self._respond(conn, h, status, segments, n, CONTENT_TYPE)

    def _refuse(self, conn: socket.socket) -> None:
        h = h11.Connection(h11.SERVER)
        try:
            h.receive_data(conn.recv(_RECV))
            h.next_event()
        except (OSError, h11.RemoteProtocolError):
            pass
        try:
            self._respond_error(
                conn, h, 503, "RpcTooManyConnections",
                f"server {self._server.name!r} already serves {self._limits.max_connections} connections "
                "(--max-connections); close idle clients or start the server with a larger --max-connections")
        except (h11.LocalProtocolError, OSError):
            pass

    def _handle_connection(self, conn: socket.socket) -> None:
        h = h11.Connection(h11.SERVER, max_incomplete_event_size=64 * 1024)
        request: h11.Request | None = None
        body = bytearray()
        first = True
        limits = self._limits
        while True:
            try:
                event = h.next_event()
            except h11.RemoteProtocolError as exc:
                if h.our_state in (h11.IDLE, h11.SEND_RESPONSE):
                    try:
                        self._respond_error(conn, h, exc.error_status_hint, "RpcProtocolError", f"bad HTTP request: {exc}")
                    except (h11.LocalProtocolError, OSError):
                        pass
                return
            if event is h11.NEED_DATA:
                between = h.their_state is h11.IDLE and request is None
                conn.settimeout(limits.idle_timeout_s if between else limits.frame_timeout_s)
                try:
                    data = conn.recv(_RECV)
                except OSError:  # socket.timeout included: idle, or a request that stalled
                    return
                if first and data[:4] == SOCKET_MAGIC:
                    # An rpent socket-transport client dialled an http port: tell it in its own framing.
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
                    return
                first = False
                h.receive_data(data)
                continue
            if isinstance(event, h11.Request):
                request = event
                body = bytearray()
                try:
                    length = _content_length(event)
                except ValueError:
                    self._respond_error(conn, h, 400, "RpcProtocolError", "bad content-length header")
                    return
                if length is not None and length > self._max:
                    self._too_large(conn, h, length)
                    return
                if self._server.token is not None and not self._server.check_token(_header(event, TOKEN_HEADER)) \
                        and (length is None or length > PREAUTH_MAX_BYTES):
                    self._respond_error(
                        conn, h, 401, "RpcAuthError",
                        f"server {self._server.name!r} requires a token: send it in the {TOKEN_HEADER!r} header "
                        f"before a body over {PREAUTH_MAX_BYTES} bytes (rpent clients do: set RPENT_RPC_TOKEN in "
                        "the client's environment)")
                    close_gracefully(conn, min(length or PREAUTH_MAX_BYTES, self._max))
                    return
                continue
            if isinstance(event, h11.Data):
                body += event.data
                if len(body) > self._max:
                    self._too_large(conn, h, len(body))
                    return
                continue
            if isinstance(event, h11.EndOfMessage):
                assert request is not None
                after = self._route(conn, h, request, body)
                request, body = None, bytearray()
                if after is not None:
                    after()
                if h.our_state is h11.MUST_CLOSE or h.their_state is h11.MUST_CLOSE:
                    return
                try:
                    h.start_next_cycle()
                except h11.LocalProtocolError:
                    return
                continue
            if isinstance(event, h11.ConnectionClosed):
                return

    def _too_large(self, conn: socket.socket, h: h11.Connection, length: int) -> None:
        try:
            self._respond_error(
                conn, h, 413, "RpcFrameTooLarge",
                f"request body of {length} bytes exceeds this server's max_frame_bytes={self._max}; "
                "send less per call or start the server with a larger --max-frame-bytes",
            )
        except (h11.LocalProtocolError, OSError):
            pass

    def _route(self, conn: socket.socket, h: h11.Connection, request: h11.Request, body: bytearray):
        target = request.target.split(b"?", 1)[0]
        if request.method == b"POST" and target == b"/rpc":
            reply = self._server.handle_message(body)
            self._respond(conn, h, 200, reply.segments, reply.nbytes, CONTENT_TYPE)
            return reply.after_send
        if request.method == b"GET" and target == b"/healthz":
            if self._server.token is not None:
                doc = {"status": "unauthorized", "error": "a token is set: call the 'healthz' RPC method"}
                status = 401
            else:
                doc = {"status": "ok", "name": self._server.name, "pid": os.getpid()}
                status = 200
            data = json.dumps(doc).encode()
            self._respond(conn, h, status, [data], len(data), "application/json")
            return None
        data = json.dumps({"error": f"no route {request.method.decode()} {target.decode(errors='replace')}; "
                           "RPC calls are POST /rpc"}).encode()
        self._respond(conn, h, 404, [data], len(data), "application/json")
        return None


def _content_length(req: h11.Request) -> int | None:
    value = _header(req, "content-length")
    return None if value is None else int(value)


def _header(req: h11.Request, name: str) -> str | None:
    key = name.encode()
    for k, value in req.headers:
        if k == key:
            return value.decode("latin-1")
    return None


class HttpClientTransport:
    """Client side of the http transport: a persistent keep-alive ``httpx.Client``; thread-safe.

    Args:
        endpoint: server endpoint (protocol ``http``).
        connect_timeout: seconds to wait for a TCP connection.
        max_frame_bytes: largest accepted reply body (bytes).
        token: the shared RPC token, or None; sent in the ``x-rpent-token`` header too, so a
            token-protected server checks it before reading the body.
    """

    def __init__(self, endpoint: Endpoint, connect_timeout: float, max_frame_bytes: int,
                 token: str | None = None) -> None:
        self.endpoint = endpoint
        self._connect_timeout = connect_timeout
        self._max = max_frame_bytes
        self._url = f"http://{endpoint.host_for_url}:{endpoint.port}/rpc"
        self._client = httpx.Client(
            trust_env=False,
            http1=True,
            limits=httpx.Limits(max_connections=64, max_keepalive_connections=16),
            headers={"content-type": CONTENT_TYPE, "accept": CONTENT_TYPE,
                     **({TOKEN_HEADER: token} if token is not None else {})},
        )

    def request(self, segments: list, nbytes: int, timeout: float | None, method: str) -> bytearray:
        """POST one request message; return the reply message (a writable buffer).

        Raises:
            RpcTimeout: no complete reply within ``timeout`` s.
            RpcTransportError: connection failure or a non-rpent reply, naming endpoint and transport.
        """
        if nbytes > self._max:
            raise RpcTransportError(
                f"request to {method!r} is {nbytes} bytes, over the client's max_frame_bytes={self._max}"
            )
        body = segments[0] if len(segments) == 1 else b"".join(segments)
        connect = self._connect_timeout if timeout is None else min(timeout, self._connect_timeout)
        tmo = httpx.Timeout(timeout, connect=connect)
        where = f"{self.endpoint} (http transport)"
        try:
            with self._client.stream("POST", self._url, content=body, timeout=tmo) as resp:
                ctype = resp.headers.get("content-type", "")
                length = resp.headers.get("content-length")
                if length is not None and int(length) > self._max:
                    raise RpcTransportError(
                        f"reply of {length} bytes from {where} exceeds the client's max_frame_bytes={self._max}; "
                        "raise RpcClient(max_frame_bytes=...)"
                    )
                if length is not None:
                    buf = bytearray(int(length))
                    pos = 0
                    for chunk in resp.iter_raw():
                        buf[pos : pos + len(chunk)] = chunk
                        pos += len(chunk)
                    if pos != len(buf):
                        raise RpcTransportError(f"truncated reply from {where}: {pos} of {len(buf)} bytes")
                else:
                    buf = bytearray(resp.read())
                if not ctype.startswith(CONTENT_TYPE):
                    text = bytes(buf[:300]).decode(errors="replace")
                    raise RpcTransportError(
                        f"{where} answered HTTP {resp.status_code} with {ctype or 'no content-type'} instead of an "
                        f"rpent reply: {text!r}; is it an rpent RPC server (or a socket-transport port)?"
                    )
                return buf
        except httpx.TimeoutException as exc:
            limit = "no limit" if timeout is None else f"{timeout:g} s"
            raise RpcTimeout(f"{method!r} on {where} timed out after {limit} ({type(exc).__name__})") from exc
        except httpx.ConnectError as exc:
            raise RpcTransportError(f"cannot connect to {where}: {exc}") from exc
        except httpx.TransportError as exc:
            raise RpcTransportError(f"{method!r} on {where} failed: {type(exc).__name__}: {exc}") from exc

    def close(self) -> None:
        """Close pooled connections."""
        self._client.close()
