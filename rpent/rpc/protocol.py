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
