"""Length-prefixed msgpack frames between the cell runner and its worker process.

Wire format: a 4-byte big-endian unsigned length ``n`` followed by ``n`` bytes of one
msgpack-encoded map (``msgpack`` library, ``use_bin_type=True``; strings are UTF-8 str,
PNG bytes are msgpack bin). Never pickle: the worker runs untrusted policy code, so the
parent must only ever *decode data* from it.

Values that travel: None, bool, int, float, str, bytes, list/tuple (arrive as list), dicts
with str keys. numpy arrays become nested lists and numpy scalars become Python numbers
on the way (see :func:`to_wire`); anything else is sent as its ``repr`` string when
``lenient`` is set (the toolkit side) and raises ``TypeError`` otherwise (policy side,
so policy code learns that its argument cannot travel).

Messages (``"t"`` is the type):

worker -> parent: ``ready {pid}``, ``out {stream: "stdout"|"stderr", text}``,
``call {id, tool, args}``, ``done {cell, value, exception, finished}``.

parent -> worker: ``hello {specs, operator_tools}``, ``run {cell, source, filename}``,
``result {id, result}`` or ``result {id, refused: {kind, message}}``.
"""

from __future__ import annotations

import os
import struct
from typing import Any

import msgpack

#: Largest frame either side accepts (bytes). A bigger length prefix is a protocol error.
MAX_FRAME_BYTES = 64 * 1024 * 1024

_HEADER = struct.Struct(">I")


class FrameError(Exception):
    """The peer sent something that is not a valid frame (bad length, bad msgpack), or
    the pipe closed in the middle of one."""


def to_wire(value: Any, *, lenient: bool = False) -> Any:
    """Convert ``value`` to msgpack-able plain data.

    numpy arrays -> nested lists (``ndarray.tolist()``), numpy scalars -> Python numbers,
    tuples/sets -> lists, ``os.PathLike`` -> str. Dict keys must be str.

    Raises:
        TypeError: for other objects when ``lenient`` is false (the message names the
            type); with ``lenient`` they become ``repr(value)``.
    """
    if value is None or isinstance(value, (bool, int, float, str, bytes)):
        return value
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                if lenient:
                    k = str(k)
                else:
                    raise TypeError(f"dict keys must be str to cross to the robot, got {type(k).__name__}")
            out[k] = to_wire(v, lenient=lenient)
        return out
    if isinstance(value, (list, tuple, set, frozenset)):
        return [to_wire(v, lenient=lenient) for v in value]
    tolist = getattr(value, "tolist", None)
    if callable(tolist) and type(value).__module__ == "numpy":
        return to_wire(tolist(), lenient=lenient)
    to_dict = getattr(value, "to_dict", None)
    if callable(to_dict) and type(value).__name__ == "ToolResult":
        return to_wire(to_dict(), lenient=lenient)
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if lenient:
        return repr(value)
    raise TypeError(
        f"cannot send a {type(value).__module__}.{type(value).__name__} to a robot tool; "
        "use numbers, strings, lists, dicts or numpy arrays"
    )


def encode_frame(message: dict[str, Any], *, lenient: bool = False) -> bytes:
    """Encode one message as header + msgpack body.

    Raises:
        TypeError: a value cannot be encoded (see :func:`to_wire`).
        FrameError: the encoded body exceeds :data:`MAX_FRAME_BYTES`.
    """
    body = msgpack.packb(to_wire(message, lenient=lenient), use_bin_type=True)
    if len(body) > MAX_FRAME_BYTES:
        raise FrameError(f"frame of {len(body)} bytes exceeds the {MAX_FRAME_BYTES}-byte limit")
    return _HEADER.pack(len(body)) + body


def write_frame(fd: int, message: dict[str, Any], *, lenient: bool = False) -> None:
    """Write one frame to file descriptor ``fd`` (blocking, complete write).

    Raises:
        BrokenPipeError / OSError: the reader is gone.
        TypeError, FrameError: see :func:`encode_frame`.
    """
    data = memoryview(encode_frame(message, lenient=lenient))
    while data:
        n = os.write(fd, data)
        data = data[n:]


def _read_exact(fd: int, n: int) -> bytes | None:
    chunks = []
    got = 0
    while got < n:
        chunk = os.read(fd, min(n - got, 1 << 20))
        if not chunk:
            if got == 0:
                return None
            raise FrameError(f"pipe closed after {got} of {n} bytes of a frame")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def read_frame(fd: int) -> dict[str, Any] | None:
    """Read one frame from ``fd``; ``None`` on a clean end of file (peer closed).

    Raises:
        FrameError: oversized length prefix, truncated frame, undecodable body, or a
            body that is not a msgpack map.
    """
    header = _read_exact(fd, _HEADER.size)
    if header is None:
        return None
    (length,) = _HEADER.unpack(header)
    if length > MAX_FRAME_BYTES:
        raise FrameError(f"frame length {length} exceeds the {MAX_FRAME_BYTES}-byte limit")
    body = _read_exact(fd, length) if length else b""
    if body is None:
        raise FrameError("pipe closed before a frame body")
    try:
        message = msgpack.unpackb(body, raw=False, strict_map_key=True)
    except Exception as exc:  # msgpack raises several unrelated types
        raise FrameError(f"undecodable frame: {type(exc).__name__}: {exc}") from None
    if not isinstance(message, dict) or not isinstance(message.get("t"), str):
        raise FrameError("a frame must be a msgpack map with a str 't' (message type)")
    return message
