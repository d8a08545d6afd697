"""RpcClient: synchronous, thread-safe calls to an rpent RPC server over either transport."""

from __future__ import annotations

import math
from typing import Any

from rpent.rpc import codec
from rpent.rpc.endpoint import Endpoint, parse_endpoint
from rpent.rpc.errors import RpcCodecError
from rpent.rpc.protocol import DEFAULT_MAX_FRAME_BYTES, env_token, make_request, unwrap_reply

DEFAULT_CONNECT_TIMEOUT = 10.0


class _Default:
    """Sentinel type: "use the client's default timeout"."""

    def __repr__(self) -> str:
        return "DEFAULT"


DEFAULT = _Default()


class RpcClient:
    """Call methods of a remote :class:`~rpent.rpc.server.RpcServer`.

    Args:
        endpoint: ``[protocol://]HOST:PORT`` (``http`` default, or ``socket``) or an Endpoint.
        timeout: default per-call timeout in seconds (None: wait forever).
        connect_timeout: seconds to wait for a TCP connection (capped by the call's timeout).
        token: shared RPC token sent with every call; default ``$RPENT_RPC_TOKEN``.
        max_frame_bytes: largest request/reply message accepted (bytes).

    One persistent connection per client (http: keep-alive pool; socket: one multiplexed
    connection with request ids), opened lazily and reopened after a failure. Safe to share
    between threads. ``with RpcClient(...) as c:`` closes it.

    Raises (from :meth:`call`):
        ValueError: malformed endpoint (at construction).
        RemoteError: the remote method raised (``.remote_type``, ``.remote_message``,
            ``.remote_traceback``).
        RpcTimeout: no reply within the timeout.
        RpcTransportError: the endpoint is unreachable or the connection failed (names the
            endpoint and the transport).
        RpcCodecError: an argument cannot cross the wire.
    """

    def __init__(
        self,
        endpoint: str | Endpoint,
        timeout: float | None = 30.0,
        *,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        token: str | None = None,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
    ) -> None:
        self.endpoint = parse_endpoint(endpoint)
        if self.endpoint.host in ("0.0.0.0", "::"):
            self.endpoint = Endpoint(self.endpoint.protocol, "127.0.0.1" if self.endpoint.host == "0.0.0.0" else "::1",
                                     self.endpoint.port)
        self.timeout = _check_timeout(timeout)
        self._token = token if token is not None else env_token()
        if self.endpoint.protocol == "socket":
            from rpent.rpc.socket import SocketClientTransport

            self._transport: Any = SocketClientTransport(self.endpoint, connect_timeout, max_frame_bytes,
                                                         token=self._token)
        else:
            from rpent.rpc.http import HttpClientTransport

            self._transport = HttpClientTransport(self.endpoint, connect_timeout, max_frame_bytes, token=self._token)

    def call(self, method: str, *args: Any, timeout: float | None | _Default = DEFAULT, **kwargs: Any) -> Any:
        """Call ``method(*args, **kwargs)`` on the server and return its result.

        Args:
            method: registered method name (e.g. ``"env.step"``).
            *args, **kwargs: wire values (see :mod:`rpent.rpc.codec`); tuples arrive as lists.
                A remote keyword argument cannot be named ``timeout`` (it is this call's).
            timeout: seconds for this call; default the client's ``timeout``; None waits forever.
                On timeout the remote handler keeps running; its late reply is dropped. (http: the
                limit applies to connecting and to each wait for reply bytes.)

        Returns:
            The method's return value; arrays arrive writable.
        """
        tmo = self.timeout if timeout is DEFAULT else _check_timeout(timeout)
        try:
            segments, nbytes = codec.encode(make_request(method, args, kwargs, self._token))
        except RpcCodecError as exc:
            raise RpcCodecError(f"cannot send arguments of {method!r}: {exc}") from exc
        reply = self._transport.request(segments, nbytes, tmo, method)
        return unwrap_reply(codec.decode(reply), method)

    def healthz(self, timeout: float | None | _Default = DEFAULT) -> dict:
        """Call the built-in ``healthz``: ``{"status": "ok", "name": str, "pid": int, "methods": [...]}``."""
        return self.call("healthz", timeout=timeout)

    def close(self) -> None:
        """Close the connection(s); further calls raise RpcTransportError (socket) or reconnect (http)."""
        self._transport.close()

    def __enter__(self) -> "RpcClient":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"RpcClient({str(self.endpoint)!r}, timeout={self.timeout})"


def _check_timeout(timeout: Any) -> float | None:
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or math.isnan(timeout) or timeout <= 0:
        raise ValueError(f"RPC timeout must be a positive number of seconds or None, got {timeout!r}")
    return None if math.isinf(timeout) else float(timeout)
