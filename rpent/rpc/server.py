"""RpcServer: a registry of named methods served over the http or socket transport.

Subclass it (or instantiate it) and ``register`` plain synchronous callables. Handlers may block
(MuJoCo stepping, torch inference): every call runs on a server thread, and the server keeps
accepting connections and serving other calls meanwhile. Read-only methods may run concurrently
with each other; mutating methods run alone (a writer-preferring RW lock, :class:`RWLock`).
``healthz`` and ``shutdown`` are built in and take no lock, so they answer while a long mutating
call runs.
"""

from __future__ import annotations

import hmac
import os
import threading
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable

from rpent.rpc import codec
from rpent.rpc.endpoint import Endpoint, is_loopback_host
from rpent.rpc.errors import RpcCodecError
from rpent.rpc.protocol import DEFAULT_MAX_FRAME_BYTES, TOKEN_ENV, ConnectionLimits, env_token, error_reply
from rpent.rpc.rwlock import RWLock

_BUILTIN = "builtin"


@dataclass
class Reply:
    """An encoded reply ready for a transport.

    Attributes:
        segments: bytes-like pieces of the message (see :func:`rpent.rpc.codec.encode`).
        nbytes: total length of the message in bytes.
        after_send: called by the transport once the reply was written (e.g. ``shutdown``).
    """

    segments: list
    nbytes: int
    after_send: Callable[[], None] | None = field(default=None)


@dataclass(frozen=True)
class _Method:
    fn: Callable[..., Any]
    mode: str  # "read" | "write" | "builtin"


class RpcServer:
    """Base class for rpent RPC servers.

    Args:
        name: service name reported by ``healthz`` (e.g. ``"env_server"``).
        token: shared secret every call must carry; default ``$RPENT_RPC_TOKEN`` (None if unset).
            Binding a non-loopback host without a token raises ``ValueError``.

    Built-in methods:
        ``healthz() -> {"status": "ok", "name": str, "pid": int, "methods": [str]}``
        ``shutdown() -> {"status": "shutting down"}`` (the server stops after replying).
    """

    def __init__(self, name: str, *, token: str | None = None) -> None:
        self.name = name
        self.token = token if token is not None else env_token()
        self._methods: dict[str, _Method] = {}
        self._lock = RWLock()
        self._transport: Any = None
        self._stopped = threading.Event()
        self._methods["healthz"] = _Method(self._healthz, _BUILTIN)
        self._methods["shutdown"] = _Method(self._shutdown_method, _BUILTIN)

    # ------------------------------------------------------------------ registry
    def register(self, name: str, fn: Callable[..., Any], *, readonly: bool) -> None:
        """Offer ``fn`` as method ``name``.

        Args:
            name: method name as clients call it (e.g. ``"env.step"``).
            fn: synchronous callable; its arguments and return value must be wire values
                (see :mod:`rpent.rpc.codec`). It may block; it runs on a server thread
                (the connection's reader, or a worker), never the accepting one.
            readonly: True if it does not change server state (may run concurrently with
                other read-only calls); False serialises it against every other call.

        Raises:
            ValueError: the name is empty, a builtin, or already registered.
        """
        if not name or not isinstance(name, str):
            raise ValueError("RPC method name must be a non-empty string")
        if name in self._methods:
            what = "a built-in method" if self._methods[name].mode == _BUILTIN else "already registered"
            raise ValueError(f"RPC method {name!r} is {what} on server {self.name!r}; pick another name")
        if not callable(fn):
            raise ValueError(f"RPC method {name!r}: handler {fn!r} is not callable")
        self._methods[name] = _Method(fn, "read" if readonly else "write")

    def method_names(self) -> list[str]:
        """Sorted names of every method, built-ins included."""
        return sorted(self._methods)

    # ------------------------------------------------------------------ builtins
    def _healthz(self) -> dict:
        return {"status": "ok", "name": self.name, "pid": os.getpid(), "methods": self.method_names()}

    def _shutdown_method(self) -> dict:
        return {"status": "shutting down"}

    # ------------------------------------------------------------------ dispatch
    def check_token(self, presented: Any) -> bool:
        """True if no token is configured or ``presented`` equals it (constant-time compare)."""
        if self.token is None:
            return True
        if not isinstance(presented, str):
            return False
        return hmac.compare_digest(presented.encode(), self.token.encode())

    def handle_message(self, buf: bytes | bytearray | memoryview) -> Reply:
        """Decode one request message, run the method, and encode the reply. Never raises.

        Args:
            buf: the request message (writable buffers give zero-copy argument arrays).

        Returns:
            Reply: ``{"ok": True, "result": ...}`` or an error envelope with ``error_type``
            (the handler's exception type, or ``RpcProtocolError`` / ``RpcAuthError`` /
            ``RpcMethodNotFound`` / ``RpcCodecError`` for problems of the call itself).
        """
        after: Callable[[], None] | None = None
        method = "?"
        try:
            try:
                req = codec.decode(buf)
            except RpcCodecError as exc:
                return self._encode(error_reply("RpcProtocolError", f"cannot decode request: {exc}"))
            if not isinstance(req, dict) or not isinstance(req.get("method"), str):
                return self._encode(error_reply("RpcProtocolError", "request must be a map with a str 'method'"))
            method = req["method"]
            args = req.get("args", [])
            kwargs = req.get("kwargs", {})
            if not isinstance(args, list) or not isinstance(kwargs, dict):
                return self._encode(error_reply("RpcProtocolError", "request 'args' must be a list and 'kwargs' a map"))
            if not self.check_token(req.get("token")):
                return self._encode(
                    error_reply(
                        "RpcAuthError",
                        f"missing or wrong RPC token for server {self.name!r}: set {TOKEN_ENV} to the "
                        "server's token in the client's environment",
                    )
                )
            entry = self._methods.get(method)
            if entry is None:
                return self._encode(
                    error_reply(
                        "RpcMethodNotFound",
                        f"server {self.name!r} has no method {method!r}; it offers: {', '.join(self.method_names())}",
                    )
                )
            try:
                if entry.mode == "read":
                    with self._lock.read():
                        result = entry.fn(*args, **kwargs)
                elif entry.mode == "write":
                    with self._lock.write():
                        result = entry.fn(*args, **kwargs)
                else:
                    result = entry.fn(*args, **kwargs)
                    if method == "shutdown":
                        after = self.shutdown
            except Exception as exc:  # noqa: BLE001 - every handler error goes back to the caller
                return self._encode(error_reply(_type_name(exc), str(exc), traceback.format_exc()))
            try:
                segments, n = codec.encode({"ok": True, "result": result})
            except RpcCodecError as exc:
                return self._encode(
                    error_reply("RpcCodecError", f"method {method!r} returned a value that cannot cross the wire: {exc}")
                )
            return Reply(segments, n, after)
        except BaseException as exc:  # noqa: BLE001 - the transport must always get a reply
            return self._encode(error_reply(_type_name(exc), f"internal error in {method!r}: {exc}", traceback.format_exc()))

    @staticmethod
    def _encode(envelope: dict) -> Reply:
        segments, n = codec.encode(envelope)
        return Reply(segments, n)

    # ------------------------------------------------------------------ serving
    def bind(
        self,
        *,
        transport: str = "http",
        host: str = "127.0.0.1",
        port: int = 0,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        limits: ConnectionLimits | None = None,
    ) -> Endpoint:
        """Bind the listening socket (port 0: the OS picks) and return the bound endpoint.

        Args:
            transport: ``"http"`` or ``"socket"``.
            host, port: address to bind.
            max_frame_bytes: largest request message, bytes.
            limits: connections served at once, idle and incomplete-request timeouts
                (:class:`~rpent.rpc.protocol.ConnectionLimits`; defaults 128, 600 s, 30 s).

        Raises:
            ValueError: unknown transport, bad max_frame_bytes, or a non-loopback host without
                a token (set ``RPENT_RPC_TOKEN``).
            OSError: the address cannot be bound (in use, not local).
        """
        if self._transport is not None:
            raise RuntimeError(f"server {self.name!r} is already bound to {self._transport.endpoint}")
        if max_frame_bytes < 1024:
            raise ValueError(f"max_frame_bytes={max_frame_bytes} is too small; use at least 1024")
        if not is_loopback_host(host) and self.token is None:
            raise ValueError(
                f"binding RPC server {self.name!r} to non-loopback host {host!r} requires a shared token: "
                f"set {TOKEN_ENV} in the server's and the clients' environment (or bind 127.0.0.1)"
            )
        if transport == "http":
            from rpent.rpc.http import HttpServerTransport as cls
        elif transport == "socket":
            from rpent.rpc.socket import SocketServerTransport as cls
        else:
            raise ValueError(f"unknown RPC transport {transport!r}; expected 'http' or 'socket'")
        self._transport = cls(self, host, port, max_frame_bytes, limits or ConnectionLimits())
        return self._transport.endpoint

    @property
    def endpoint(self) -> Endpoint | None:
        """The bound endpoint (host as bound, e.g. ``0.0.0.0``), or None before :meth:`bind`."""
        return None if self._transport is None else self._transport.endpoint

    def serve_forever(self) -> None:
        """Serve until :meth:`shutdown` (or the ``shutdown`` method). Call :meth:`bind` first."""
        if self._transport is None:
            raise RuntimeError("call bind() before serve_forever()")
        try:
            self._transport.serve_forever()
        finally:
            self._stopped.set()

    def start(self, **bind_kwargs: Any) -> Endpoint:
        """Bind (see :meth:`bind` for arguments) and serve on a daemon thread; return the endpoint.

        For in-process use and tests; stop with :meth:`shutdown`.
        """
        ep = self.bind(**bind_kwargs)
        threading.Thread(target=self.serve_forever, name=f"rpc-{self.name}", daemon=True).start()
        return ep

    def shutdown(self) -> None:
        """Stop accepting, close connections, and make :meth:`serve_forever` return. Thread-safe."""
        if self._transport is not None:
            self._transport.close()

    def wait_stopped(self, timeout: float | None = None) -> bool:
        """Block until serving has stopped (True) or ``timeout`` seconds passed (False)."""
        return self._stopped.wait(timeout)


def _type_name(exc: BaseException) -> str:
    t = type(exc)
    return t.__qualname__ if t.__module__ in ("builtins", "__main__") else f"{t.__module__}.{t.__qualname__}"
