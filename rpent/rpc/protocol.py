"""RPC request/reply envelopes and limits shared by both transports.

Request (encoded with :mod:`rpent.rpc.codec`)::

    {"method": str, "args": list, "kwargs": dict, "token": str (only when a token is in use)}

Reply::

    {"ok": True,  "result": value}
    {"ok": False, "error_type": str, "error": str, "traceback": str}

Socket frames carry the request id in their header (see :mod:`rpent.rpc.socket`); HTTP carries one
request per POST body.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from rpent.rpc.errors import RemoteError, RpcProtocolError

DEFAULT_MAX_FRAME_BYTES = 256 * 1024 * 1024
"""Default limit (bytes) on one request/reply message, both transports. Override with
``--max-frame-bytes`` (servers) or ``RpcClient(max_frame_bytes=...)``."""

TOKEN_ENV = "RPENT_RPC_TOKEN"
"""Environment variable holding the shared RPC token (required when a server binds a
non-loopback address; checked on every call whenever it is set on the server)."""

READY_PREFIX = "RPC server listening on "
"""A server prints ``READY_PREFIX + "<protocol>://<host>:<port>"`` (flushed) once it is bound."""


def env_token() -> str | None:
    """The token from ``$RPENT_RPC_TOKEN``, or None when unset/empty."""
    tok = os.environ.get(TOKEN_ENV, "")
    return tok or None


def make_request(method: str, args: tuple | list, kwargs: dict, token: str | None) -> dict:
    """Build a request envelope (see module doc)."""
    req: dict[str, Any] = {"method": method, "args": list(args), "kwargs": kwargs}
    if token is not None:
        req["token"] = token
    return req


def error_reply(error_type: str, message: str, tb: str = "") -> dict:
    """Build an error reply envelope."""
    return {"ok": False, "error_type": error_type, "error": message, "traceback": tb}


def unwrap_reply(reply: Any, method: str) -> Any:
    """Return the result of a reply envelope, or raise.

    Raises:
        RemoteError: the envelope reports an error (carries type, message, remote traceback).
        RpcProtocolError: the reply is not a valid envelope.
    """
    if not isinstance(reply, dict) or "ok" not in reply:
        raise RpcProtocolError(f"malformed RPC reply to {method!r}: {type(reply).__name__} without 'ok'")
    if reply["ok"]:
        return reply.get("result")
    raise RemoteError(
        str(reply.get("error_type", "Error")),
        str(reply.get("error", "")),
        str(reply.get("traceback", "") or ""),
        method=method,
    )


DEFAULT_MAX_CONNECTIONS = 128
"""Default limit on connections a server serves at once (each holds one thread); one more gets
an ``RpcTooManyConnections`` error in its transport's protocol and is closed. ``--max-connections``."""

DEFAULT_IDLE_TIMEOUT_S = 600.0
"""Default seconds a connection may sit between requests before the server closes it (clients
reconnect on their next call). ``--idle-timeout-s``."""

DEFAULT_FRAME_TIMEOUT_S = 30.0
"""Default seconds without a byte in the middle of a request (an incomplete frame or body) before
the server drops the connection. ``--frame-timeout-s``."""

PREAUTH_MAX_BYTES = 64 * 1024
"""On a server with a token, the largest request a connection may send before one of its requests
carried the right token (socket) / without the token header (http): the token is checked before
any large read. rpent clients authenticate a new connection with a small first call (socket) or a
header (http)."""

AUTH_MAX_BYTES = 8 * 1024
"""On a server with a token, the largest first request of a connection (socket: its frame; http:
its head) read before the token is checked: a connection is admitted (takes a connection slot and
a thread) only once that request carried the right token."""

DEFAULT_AUTH_TIMEOUT_S = 10.0
"""Default seconds a new connection to a server with a token has to send its first, authenticating
request before it is closed. ``--auth-timeout-s``."""

DEFAULT_MAX_UNAUTHENTICATED = 1024
"""Default connections held while they authenticate (no thread, no connection slot each); past it
the oldest is closed. ``--max-unauthenticated``."""

TOKEN_HEADER = "x-rpent-token"
"""HTTP request header carrying the token, so the http server checks it before reading a body."""


@dataclass(frozen=True)
class ConnectionLimits:
    """Per-server connection limits, both transports (see the constants above for meaning).

    Attributes:
        max_connections: connections served at once.
        idle_timeout_s: seconds between requests before a connection is closed.
        frame_timeout_s: seconds without progress inside a request before it is dropped.
        auth_timeout_s: seconds a connection to a server with a token has to authenticate.
        max_unauthenticated: connections held while they authenticate.

    Raises:
        ValueError: a limit that is not positive (the message names the option).
    """

    max_connections: int = DEFAULT_MAX_CONNECTIONS
    idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S
    frame_timeout_s: float = DEFAULT_FRAME_TIMEOUT_S
    auth_timeout_s: float = DEFAULT_AUTH_TIMEOUT_S
    max_unauthenticated: int = DEFAULT_MAX_UNAUTHENTICATED

    def __post_init__(self) -> None:
        for name in ("max_connections", "max_unauthenticated"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"--{name.replace('_', '-')} must be an int >= 1, got {value!r}")
        for name in ("idle_timeout_s", "frame_timeout_s", "auth_timeout_s"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not value > 0:
                raise ValueError(f"--{name.replace('_', '-')} must be > 0 seconds, got {value!r}")
