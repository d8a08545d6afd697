"""Exceptions raised by the rpent RPC layer.

Hierarchy::

    RpcError                      base class of everything below
    ├── RemoteError               the remote handler raised; carries its type, message, traceback
    ├── RpcTransportError         connection refused/reset, malformed frame, endpoint unreachable
    │   └── RpcTimeout            no reply within the per-call timeout
    ├── RpcProtocolError          a peer sent bytes that do not decode as an rpent message
    └── RpcCodecError             a value cannot be encoded (e.g. object-dtype array) or decoded
"""

from __future__ import annotations


class RpcError(Exception):
    """Base class for every error raised by :mod:`rpent.rpc`."""


class RemoteError(RpcError):
    """The remote method raised an exception; the server sent back its error envelope.

    Attributes:
        remote_type: qualified exception type name on the server, e.g. ``"ValueError"``.
        remote_message: ``str(exc)`` on the server.
        remote_traceback: the formatted server-side traceback (may be ``""``).
        method: the method name that was called.
    """

    def __init__(self, remote_type: str, remote_message: str, remote_traceback: str = "", method: str = ""):
        self.remote_type = remote_type
        self.remote_message = remote_message
        self.remote_traceback = remote_traceback
        self.method = method
        where = f" in {method!r}" if method else ""
        super().__init__(f"remote {remote_type}{where}: {remote_message}")

    def __str__(self) -> str:
        base = super().__str__()
        if self.remote_traceback:
            return f"{base}\n--- remote traceback ---\n{self.remote_traceback.rstrip()}"
        return base

    def __reduce__(self):
        return (type(self), (self.remote_type, self.remote_message, self.remote_traceback, self.method))


class RpcTransportError(RpcError):
    """The call could not be carried: connection refused/closed, bad frame, unreachable endpoint.

    The message always names the endpoint (``protocol://host:port``) and the transport.
    """


class RpcTimeout(RpcTransportError):
    """No reply arrived within the call's timeout (seconds). Names endpoint, method and timeout."""


class RpcProtocolError(RpcError):
    """A peer sent a message that is not a valid rpent request/reply (server-side or client-side)."""


class RpcCodecError(RpcError, TypeError):
    """A value cannot cross the wire (unsupported type, object dtype, non-str dict key, corrupt ext)."""
