"""The session protocol: length-prefixed frames over a Unix socket, an authenticating hello, and the
wire form of the session model (TaskRuns, services, operator requests).

Frame: a 4-byte big-endian length, then that many bytes of one ``rpent.rpc.codec`` message (msgpack;
ndarrays as typed binary, never pickle). A reader checks the claimed length against its limit
*before* reading the body, so a peer can never make it allocate more than the limit
(``HELLO_MAX_BYTES`` before authentication, ``CLIENT_MAX_BYTES`` for commands, ``SERVER_MAX_BYTES``
for state sent to clients).

Conversation (protocol version ``PROTOCOL``)::

    client -> {"t": "hello", "protocol": 1, "token": "<session token>", "role": "events"|"commands"}
    server -> {"t": "welcome", ...} or {"t": "refused", "error": "..."} and closes
    events role:   server -> {"t": "snapshot", ...} once, then {"t": "delta", ...} as the session changes
    commands role: client -> {"t": "call", "id": n, "method": m, "args": {...}}
                   server -> {"t": "reply", "id": n, "ok": true, "result": ...}
                           | {"t": "reply", "id": n, "ok": false, "error_type": "SessionNotReady", "error": "..."}

The token is the content of ``<session dir>/token`` (0600); it is compared in constant time.
"""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rpent.rpc import codec

__all__ = [
    "PROTOCOL", "HELLO_MAX_BYTES", "CLIENT_MAX_BYTES", "SERVER_MAX_BYTES", "FrameError",
    "encode_frame", "read_frame_sync", "send_frame_sync", "receive_frame", "plain",
    "run_to_wire", "service_to_wire", "request_to_wire", "reply_to_wire",
]

#: Protocol version sent in the hello; a server refuses another version with a clear message.
PROTOCOL = 1
#: Limits (bytes) on one frame's body: the hello (before authentication), a client's command, and
#: a server message (a snapshot carries every TaskRun's transcript and the latest PNG frames).
HELLO_MAX_BYTES = 64 * 1024
CLIENT_MAX_BYTES = 1024 * 1024
SERVER_MAX_BYTES = 256 * 1024 * 1024
_LEN = struct.Struct(">I")


class FrameError(ValueError):
    """A frame that is too long, truncated, or not a valid message (the message says which)."""


def encode_frame(obj: Any) -> bytes:
    """One frame (length prefix + codec message) for ``obj``.

    Raises:
        rpent.rpc.errors.RpcCodecError: ``obj`` holds a value the codec cannot carry.
    """
    body = codec.dumps(obj)
    return _LEN.pack(len(body)) + body


def _decode(body: bytes | bytearray) -> Any:
    try:
        return codec.loads(bytes(body))
    except Exception as exc:  # noqa: BLE001 - any decoding failure is a bad frame
        raise FrameError(f"not a valid session message ({type(exc).__name__}: {exc})") from None


def _check_len(n: int, limit: int) -> None:
    if n > limit:
        raise FrameError(f"frame of {n} bytes exceeds the limit of {limit} bytes")


# -- blocking sockets (the client's command channel) -----------------------------------------------------
def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(min(n - len(buf), 1 << 20))
        if not chunk:
            raise ConnectionError("the session closed the connection")
        buf += chunk
    return bytes(buf)


def read_frame_sync(sock: socket.socket, limit: int) -> Any:
    """Read one frame from a blocking socket and decode it.

    Raises:
        FrameError: over ``limit`` bytes or undecodable. ConnectionError: the peer closed.
    """
    (n,) = _LEN.unpack(_recv_exact(sock, 4))
    _check_len(n, limit)
    return _decode(_recv_exact(sock, n))


def send_frame_sync(sock: socket.socket, obj: Any) -> None:
    """Encode ``obj`` and send it as one frame on a blocking socket."""
    sock.sendall(encode_frame(obj))


# -- trio streams (the server, and the client's event channel) --------------------------------------------
async def receive_frame(stream: Any, limit: int, buffer: bytearray) -> Any:
    """Read one frame from a trio stream (``buffer`` keeps bytes read past the frame between calls).

    Returns None at a clean end of stream (no partial frame buffered).

    Raises:
        FrameError: over ``limit`` bytes, truncated, or undecodable.
    """
    while True:
        if len(buffer) >= 4:
            (n,) = _LEN.unpack(buffer[:4])
            _check_len(n, limit)
            if len(buffer) >= 4 + n:
                body = bytes(buffer[4:4 + n])
                del buffer[:4 + n]
                return _decode(body)
            want = 4 + n - len(buffer)
        else:
            want = 4 - len(buffer)
        chunk = await stream.receive_some(min(max(want, 4096), 1 << 20))
        if not chunk:
            if buffer:
                raise FrameError(f"connection closed inside a frame ({len(buffer)} bytes buffered)")
            return None
        buffer += chunk


# -- the model on the wire -------------------------------------------------------------------------------
def plain(value: Any) -> Any:
    """``value`` with every part the codec cannot carry made plain: Paths and other objects become
    strings, tuples and sets lists, dict keys strings, numpy scalars Python numbers (ndarrays stay)."""
    if value is None or isinstance(value, (bool, int, float, str, bytes)):
        return value
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [plain(v) for v in value]
    try:
        import numpy as np

        if isinstance(value, np.ndarray) and not value.dtype.hasobject:
            return value
        if isinstance(value, np.generic):
            return value.item()
    except ImportError:  # pragma: no cover - numpy is a dependency
        pass
    return str(value)


def request_to_wire(request: Any) -> dict[str, Any] | None:
    """An ``OperatorRequest`` as a dict (frames as PNG bytes), or None."""
    if request is None:
        return None
    return {"id": request.id, "kind": request.kind, "prompt": request.prompt, "choices": list(request.choices),
            "frames": {str(k): bytes(v) for k, v in dict(request.frames).items()}, "created_at": request.created_at}


def reply_to_wire(reply: Any) -> dict[str, Any]:
    """An ``OperatorReply`` as a dict."""
    return {"id": reply.id, "answer": reply.answer, "notes": reply.notes}


#: TaskRunView fields that are not "meta": the growing lists and frames travel by index / when
#: they change, and command, output dir and operator request have their own wire form.
RUN_NOT_META = ("transcript", "timeline", "frames", "command", "output_dir", "operator")


def run_meta_fields(run: Any) -> list[str]:
    """The meta fields of a ``TaskRunView`` (every dataclass field but ``RUN_NOT_META``, so a field
    added to the model travels without a protocol change)."""
    import dataclasses

    return [f.name for f in dataclasses.fields(run) if f.name not in RUN_NOT_META]
#: ServiceView fields sent as "meta" (everything but the log ring).
SERVICE_META = ("name", "scope", "state", "endpoint", "pid", "started_at", "last_error", "total_lines")


def run_to_wire(run: Any) -> dict[str, Any]:
    """The meta fields of a ``TaskRunView`` (command, output dir, operator request included)."""
    data = {k: plain(getattr(run, k)) for k in run_meta_fields(run)}
    data["command"] = {"suite": run.command.suite, "task": int(run.command.task), "seed": int(run.command.seed)}
    data["output_dir"] = str(run.output_dir)
    data["operator"] = request_to_wire(run.operator)
    return data


def service_to_wire(view: Any) -> dict[str, Any]:
    """The meta fields of a ``ServiceView``."""
    data = {k: plain(getattr(view, k)) for k in SERVICE_META}
    data["log_path"] = str(view.log_path) if view.log_path else None
    return data


def now() -> float:
    """Wall-clock seconds since the epoch (state file and wire timestamps)."""
    return time.time()


def read_token(session_dir: Path) -> str:
    """The session's token (``<session_dir>/token``).

    Raises:
        PermissionError / FileNotFoundError: the token file is not readable (another user's session, or none).
    """
    return (Path(session_dir) / "token").read_text(encoding="utf-8").strip()
