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

worker -> parent: ``ready {pid, sandbox}``, ``out {stream: "stdout"|"stderr", text}``,
``call {id, tool, args}``, ``done {cell, value, exception, finished, killed_processes}``.

parent -> worker: ``hello {specs, operator_tools}``, ``run {cell, source, filename}``,
``result {id, result}`` or ``result {id, refused: {kind, message}}``.

The worker runs the cell's code, so everything that comes from it is treated as hostile
(:func:`read_worker_frame`): a frame is at most :data:`MAX_WORKER_FRAME_BYTES`, decodes to
at most :data:`MAX_WORKER_CONTAINERS` lists and maps, and must have one of the shapes above
(:func:`worker_message_problem`); anything else is a :class:`ProtocolViolation`. Decoding
``n`` bytes of msgpack builds at most about ``20 n`` bytes of Python objects once the
container budget holds (a 3-byte 2-character string becomes a ~59-byte ``str`` plus its list
slot; one-byte values are shared singletons), so one worker frame costs the parent at most
about 5 MiB.
"""

from __future__ import annotations

import os
import select
import struct
from typing import Any

import msgpack

#: Largest frame the worker accepts from the parent (bytes; results carry PNG images).
MAX_FRAME_BYTES = 64 * 1024 * 1024
#: Largest frame the parent accepts from the worker (bytes): robot-call arguments and output
#: chunks fit with room to spare; a bigger length prefix is a protocol violation.
MAX_WORKER_FRAME_BYTES = 256 * 1024
#: Lists + maps one worker frame may decode to (an empty one is a single msgpack byte that
#: becomes a 56-byte list or a 64-byte dict: the container budget bounds that expansion).
MAX_WORKER_CONTAINERS = 10_000

_HEADER = struct.Struct(">I")


class FrameError(Exception):
    """The peer sent something that is not a valid frame (bad length, bad msgpack), or
    the pipe closed in the middle of one."""


class ProtocolViolation(FrameError):
    """The worker sent a frame the protocol does not allow (too large, too many containers,
    an unknown message type, a field of the wrong type); the message names the problem."""


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


def encode_frame(message: dict[str, Any], *, lenient: bool = False, max_bytes: int = MAX_FRAME_BYTES) -> bytes:
    """Encode one message as header + msgpack body.

    Raises:
        TypeError: a value cannot be encoded (see :func:`to_wire`).
        FrameError: the encoded body exceeds ``max_bytes``.
    """
    body = msgpack.packb(to_wire(message, lenient=lenient), use_bin_type=True)
    if len(body) > max_bytes:
        what = f"a {message.get('t')!r} message" if isinstance(message, dict) else "a message"
        raise FrameError(f"{what} of {len(body)} bytes exceeds the {max_bytes}-byte frame limit"
                         + ("; send smaller robot-call arguments" if message.get("t") == "call" else ""))
    return _HEADER.pack(len(body)) + body


def write_frame(fd: int, message: dict[str, Any], *, lenient: bool = False, max_bytes: int = MAX_FRAME_BYTES,
                timeout_s: float | None = None) -> None:
    """Write one frame to file descriptor ``fd`` (complete write).

    Args:
        timeout_s: longest wait for the reader to make room in the pipe (None: no limit).

    Raises:
        BrokenPipeError / OSError: the reader is gone.
        TimeoutError: the reader took nothing for ``timeout_s`` seconds (the frame may be
            partly written: the stream is unusable afterwards).
        TypeError, FrameError: see :func:`encode_frame`.
    """
    data = memoryview(encode_frame(message, lenient=lenient, max_bytes=max_bytes))
    if timeout_s is None:
        while data:
            n = os.write(fd, data)
            data = data[n:]
        return
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    blocking = os.get_blocking(fd)
    os.set_blocking(fd, False)
    try:
        while data:
            if not poller.poll(timeout_s * 1000):
                raise TimeoutError(f"the peer read nothing for {timeout_s:g} s")
            try:
                n = os.write(fd, data)
            except BlockingIOError:
                continue
            data = data[n:]
    finally:
        os.set_blocking(fd, blocking)


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
    """Read one frame from ``fd`` (the worker's side: frames from the parent); ``None`` on a
    clean end of file (peer closed).

    Raises:
        FrameError: oversized length prefix, truncated frame, undecodable body, or a
            body that is not a msgpack map.
    """
    body = _read_body(fd, MAX_FRAME_BYTES, FrameError)
    if body is None:
        return None
    try:
        message = msgpack.unpackb(body, raw=False, strict_map_key=True)
    except Exception as exc:  # msgpack raises several unrelated types
        raise FrameError(f"undecodable frame: {type(exc).__name__}: {exc}") from None
    if not isinstance(message, dict) or not isinstance(message.get("t"), str):
        raise FrameError("a frame must be a msgpack map with a str 't' (message type)")
    return message


def _read_body(fd: int, max_bytes: int, error: type[FrameError]) -> bytes | None:
    header = _read_exact(fd, _HEADER.size)
    if header is None:
        return None
    (length,) = _HEADER.unpack(header)
    if length > max_bytes:
        raise error(f"frame length {length} exceeds the {max_bytes}-byte limit")
    body = _read_exact(fd, length) if length else b""
    if body is None:
        raise FrameError("pipe closed before a frame body")
    return body


class _ContainerBudget(Exception):
    pass


def decode_worker_body(body: bytes) -> dict[str, Any]:
    """Decode one worker frame body within the budgets of the module docstring and check its
    shape.

    Raises:
        ProtocolViolation: over :data:`MAX_WORKER_FRAME_BYTES` or :data:`MAX_WORKER_CONTAINERS`,
            undecodable, or not a message the worker may send (see :func:`worker_message_problem`).
    """
    if len(body) > MAX_WORKER_FRAME_BYTES:
        raise ProtocolViolation(f"frame length {len(body)} exceeds the {MAX_WORKER_FRAME_BYTES}-byte limit")
    count = 0

    def budget(container: Any) -> Any:
        nonlocal count
        count += 1
        if count > MAX_WORKER_CONTAINERS:
            raise _ContainerBudget()
        return container

    try:
        message = msgpack.unpackb(body, raw=False, strict_map_key=True, list_hook=budget, object_hook=budget,
                                  max_ext_len=0)
    except _ContainerBudget:
        raise ProtocolViolation(f"a frame of more than {MAX_WORKER_CONTAINERS} containers (lists and maps)") from None
    except Exception as exc:  # msgpack raises several unrelated types
        raise ProtocolViolation(f"undecodable frame: {type(exc).__name__}: {exc}") from None
    problem = worker_message_problem(message)
    if problem is not None:
        raise ProtocolViolation(problem)
    return message


def read_worker_frame(fd: int) -> dict[str, Any] | None:
    """Read one frame from the worker (the parent's side); ``None`` on a clean end of file.

    Raises:
        ProtocolViolation: see :func:`decode_worker_body` (and an oversized length prefix,
            refused before anything of the body is read).
        FrameError: the pipe closed in the middle of a frame.
    """
    body = _read_body(fd, MAX_WORKER_FRAME_BYTES, ProtocolViolation)
    return None if body is None else decode_worker_body(body)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _str_map_problem(value: Any, keys: tuple[str, ...], name: str) -> str | None:
    if not isinstance(value, dict) or set(value) - set(keys) or not all(isinstance(value.get(k), str) for k in keys):
        return f"{name} must be a map of str fields {', '.join(keys)}"
    return None


def worker_message_problem(message: Any) -> str | None:
    """What is wrong with a decoded message from the worker, or None when it has one of the
    shapes of the module docstring (``ready`` is accepted only as the first frame: the caller
    checks that)."""
    if not isinstance(message, dict) or not isinstance(message.get("t"), str):
        return "a frame must be a msgpack map with a str 't' (message type)"
    kind = message["t"]
    if kind == "out":
        if message.get("stream") not in ("stdout", "stderr"):
            return "an 'out' frame's stream must be 'stdout' or 'stderr'"
        if not isinstance(message.get("text"), str):
            return "an 'out' frame's text must be a str"
    elif kind == "call":
        if not _is_int(message.get("id")):
            return "a 'call' frame's id must be an int"
        if not isinstance(message.get("tool"), str) or not isinstance(message.get("args"), dict):
            return "a 'call' frame needs a str tool and a map of args"
    elif kind == "done":
        if not _is_int(message.get("cell")):
            return "a 'done' frame's cell must be an int"
        if message.get("value") is not None and not isinstance(message["value"], str):
            return "a 'done' frame's value must be a str or nil"
        if message.get("exception") is not None:
            problem = _str_map_problem(message["exception"], ("type", "message", "traceback"), "a 'done' exception")
            if problem:
                return problem
        if message.get("finished") is not None:
            problem = _str_map_problem(message["finished"], ("status", "summary"), "a 'done' frame's finished")
            if problem:
                return problem
        if message.get("killed_processes") is not None and not _is_int(message["killed_processes"]):
            return "a 'done' frame's killed_processes must be an int"
    elif kind == "ready":
        if not _is_int(message.get("pid")) or not isinstance(message.get("sandbox"), dict):
            return "a 'ready' frame needs an int pid and a sandbox map"
    else:
        return f"unknown message type {kind[:40]!r} (the worker sends ready, out, call, done)"
    return None
