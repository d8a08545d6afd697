"""Wire codec: msgpack with numpy ndarrays as typed binary. Never pickles.

A message is one valid msgpack document, a 4-element array::

    [ envelope_len: uint32 (always 5 bytes, 0xce), envelope: any msgpack value,
      pad: bin8 (0-63 zero bytes), data: bin32 ]

``envelope`` carries the value. Every ndarray inside it is an ExtType(code 1) whose payload is
msgpack ``[dtype.str, shape, offset, nbytes]``; its bytes (C order) live in ``data`` at ``offset``
(each array 64-byte aligned from the message start). ``pad`` aligns ``data`` to 64 bytes. numpy
scalars are ExtType(code 2) with payload msgpack ``[dtype.str, raw bytes]`` (in-band).

Why this layout: the sender hands the array buffers to ``socket.sendmsg`` without copying them,
and a receiver that read the message into a writable buffer (``bytearray``) gets arrays that are
zero-copy, aligned, writable views of it. Any msgpack library can still read the document.

Supported values: None, bool, int (64-bit range), float, str, bytes/bytearray/memoryview (arrive as
bytes), list/tuple (arrive as list), dict (str or int keys), numpy ndarrays of any non-object dtype
(bool, ints, uints, float16/32/64, complex64/128, also bytes/str/datetime fixed-size dtypes;
any shape incl. 0-d and empty; non-contiguous inputs are copied to C order; arrays arrive writable)
and numpy scalars (arrive as numpy scalars of the same dtype). Subclasses of the builtin types
(IntEnum, OrderedDict, ...) travel as their base type.

Refused, at both ends, with the key path of the value (e.g. ``args[0].main_images``) and the
accepted encoding in the message: object, structured, sub-array and void (``|V*``) dtypes, and
arrays pre-packed by another library's msgpack convention (openpi-client's
``{"__ndarray__": True, "data", "dtype", "shape"}``, msgpack-numpy's ``{"nd", "type", "shape",
"data"}``): pass the ``np.ndarray`` itself and this codec encodes it.
"""

from __future__ import annotations

import math
import struct
import threading
from typing import Any

import msgpack
import numpy as np

from rpent.rpc.errors import RpcCodecError

EXT_NDARRAY = 1
EXT_NPSCALAR = 2
ALIGN = 64
MAX_BIN32 = 0xFFFFFFFF

_U32 = struct.Struct(">I")
_PREFIX = b"\x94\xce"  # fixarray(4), uint32


def _align(n: int) -> int:
    return (n + ALIGN - 1) & ~(ALIGN - 1)


ACCEPTED = (
    "rpent's codec sends numpy arrays of fixed-size dtypes (bool, int*, uint*, float*, complex*, S*, U*, "
    "datetime64) as msgpack ExtType 1 (see rpent.rpc.codec)"
)

_OPENPI_KEYS = {"__ndarray__"}
_MSGPACK_NUMPY_KEYS = {"nd", "type", "shape", "data"}


def _check_dtype(dt: np.dtype) -> None:
    if dt.kind == "V" and dt.fields is None and dt.subdtype is None:
        raise RpcCodecError(
            f"cannot send a numpy array of void dtype {dt.str} (raw bytes without a type): "
            "view it as a numeric dtype (arr.view(np.uint8)) or send bytes"
        )
    if dt.hasobject:
        raise RpcCodecError(
            f"cannot send a numpy array of dtype {dt} (object dtype): only fixed-size dtypes "
            "(bool, int*, uint*, float*, complex*, S*, U*, datetime) cross the wire; convert it "
            "with arr.astype(<numeric dtype>) or send a list"
        )
    if dt.fields is not None or dt.subdtype is not None:
        raise RpcCodecError(
            f"cannot send a numpy array of structured dtype {dt}; send a dict of plain arrays instead"
        )


def _foreign_array_dict(d: dict) -> str | None:
    """The convention name when ``d`` is an ndarray pre-packed by another msgpack library, else None."""
    if len(d) > 6:
        return None
    keyed = {k.decode("utf-8", "replace") if isinstance(k, (bytes, bytearray)) else k: v for k, v in d.items()}
    keys = set(keyed)
    if _OPENPI_KEYS <= keys and keyed["__ndarray__"] is True:
        return "openpi-client msgpack_numpy ({'__ndarray__': True, 'data', 'dtype', 'shape'})"
    if _MSGPACK_NUMPY_KEYS <= keys and isinstance(keyed["nd"], bool):
        return "msgpack-numpy ({'nd': True, 'type', 'kind', 'shape', 'data'})"
    return None


def _key_str(k: Any) -> str:
    if isinstance(k, (bytes, bytearray)):
        k = bytes(k).decode("utf-8", "replace")
    return f"[{k}]" if isinstance(k, int) else f".{k}"


def _walk(obj: Any, visit) -> tuple[str, str] | None:
    """Depth-first over dicts/lists/tuples; ``visit(value) -> problem | None``. First (path, problem)."""
    stack: list[tuple[str, Any]] = [("", obj)]
    while stack:
        path, v = stack.pop()
        problem = visit(v)
        if problem is not None:
            return path.lstrip(".") or "<top level>", problem
        if isinstance(v, dict):
            stack.extend((path + _key_str(k), x) for k, x in reversed(list(v.items())))
        elif isinstance(v, (list, tuple)):
            stack.extend((f"{path}[{i}]", x) for i, x in reversed(list(enumerate(v))))
    return None


def _has_foreign(obj: Any) -> bool:
    """Fast check (no paths) whether any dict inside ``obj`` is a pre-packed foreign array."""
    stack = [obj]
    pop, push = stack.pop, stack.extend
    while stack:
        v = pop()
        if isinstance(v, dict):
            if len(v) <= 6 and ("__ndarray__" in v or b"__ndarray__" in v or "nd" in v or b"nd" in v) \
                    and _foreign_array_dict(v) is not None:
                return True
            push(v.values())
        elif isinstance(v, (list, tuple)):
            push(v)
    return False


def _foreign_problem(v: Any) -> str | None:
    if isinstance(v, dict):
        conv = _foreign_array_dict(v)
        if conv is not None:
            return (
                f"an array pre-packed in the {conv} convention is not an rpent array; pass the np.ndarray "
                f"itself: {ACCEPTED}"
            )
    return None


def _codec_problem(v: Any) -> str | None:
    if isinstance(v, (np.ndarray, np.generic)):
        try:
            _check_dtype(v.dtype)
        except RpcCodecError as exc:
            return str(exc)
        return None
    if isinstance(v, (dict, list, tuple, str, bytes, bytearray, memoryview, bool, float, type(None))):
        return _foreign_problem(v)
    if isinstance(v, int):
        return None if -(2**63) <= v < 2**64 else f"cannot send int {v}: outside the 64-bit range"
    return (
        f"cannot send a value of type {type(v).__module__}.{type(v).__qualname__} over RPC; "
        "supported: None, bool, int, float, str, bytes, list/tuple, dict, numpy arrays and scalars"
    )


def _at(path: str, problem: str) -> RpcCodecError:
    return RpcCodecError(f"at {path}: {problem}")


_SENDABLE: set[np.dtype] = set()
"""dtypes already checked by :func:`_check_dtype` (the check is the same for every array of a dtype)."""
_TLS = threading.local()


def _packer() -> msgpack.Packer:
    """This thread's packer for array metadata (a Packer keeps a buffer: one per thread)."""
    p = getattr(_TLS, "packer", None)
    if p is None:
        p = _TLS.packer = msgpack.Packer(use_bin_type=True)
    return p


def _ext(code: int, data: bytes) -> msgpack.ExtType:
    """``msgpack.ExtType(code, data)`` without its argument checks (both are ours and valid)."""
    return tuple.__new__(msgpack.ExtType, (code, data))


class _Encoder:
    __slots__ = ("buffers", "cursor")

    def __init__(self) -> None:
        self.buffers: list[tuple[int, np.ndarray]] = []
        self.cursor = 0

    def default(self, o: Any) -> Any:
        if isinstance(o, np.ndarray):
            dt = o.dtype
            if dt not in _SENDABLE:
                _check_dtype(dt)
                _SENDABLE.add(dt)
            a = o if o.flags.c_contiguous else np.ascontiguousarray(o)
            off = (self.cursor + ALIGN - 1) & ~(ALIGN - 1)
            nbytes = a.nbytes
            if nbytes:
                self.buffers.append((off, a))
                self.cursor = off + nbytes
            return _ext(EXT_NDARRAY, _packer().pack([dt.str, list(a.shape), off, nbytes]))
        if isinstance(o, np.generic):
            _check_dtype(o.dtype)
            return _ext(EXT_NPSCALAR, _packer().pack([o.dtype.str, o.tobytes()]))
        # strict_types=True sends exact builtins natively; everything else lands here.
        if isinstance(o, tuple) or isinstance(o, list):
            return list(o)
        if isinstance(o, dict):
            return dict(o)
        if isinstance(o, bool):
            return bool(o)
        if isinstance(o, int):
            return int(o)
        if isinstance(o, float):
            return float(o)
        if isinstance(o, str):
            return str(o)
        if isinstance(o, (bytes, bytearray, memoryview)):
            return bytes(o)
        raise RpcCodecError(
            f"cannot send a value of type {type(o).__module__}.{type(o).__qualname__} over RPC; "
            "supported: None, bool, int, float, str, bytes, list/tuple, dict, numpy arrays and scalars"
        )


def encode(obj: Any) -> tuple[list[bytes | memoryview], int]:
    """Encode ``obj`` into message segments (no copy of array data).

    Returns:
        (segments, total_len): bytes-like segments whose concatenation is the message, ready for
        ``socket.sendmsg``; array segments are memoryviews of the caller's arrays (or of their
        C-order copies), so the arrays must not be mutated until the segments are sent.

    Raises:
        RpcCodecError: unsupported type, object/structured/void dtype, an array pre-packed by
            another msgpack convention, int outside 64 bits, or array data over 4 GiB; the message
            starts with the key path of the offending value (``at args[0].main_images: ...``).
    """
    if _has_foreign(obj):
        raise _at(*_walk(obj, _foreign_problem))
    enc = _Encoder()
    try:
        envelope = msgpack.packb(obj, default=enc.default, use_bin_type=True, strict_types=True, datetime=False)
    except (RpcCodecError, OverflowError, ValueError, TypeError) as exc:
        found = _walk(obj, _codec_problem)
        if found is not None:
            raise _at(*found) from exc
        if isinstance(exc, RpcCodecError):
            raise
        raise RpcCodecError(f"cannot encode RPC value: {exc}") from exc
    head_len = 2 + 4 + len(envelope)
    pad = (-(head_len + 2 + 5)) % ALIGN
    data_len = enc.cursor
    if data_len > MAX_BIN32:
        raise RpcCodecError(f"RPC message carries {data_len} bytes of array data; the limit is 4 GiB - 1")
    segments: list[bytes | memoryview] = [
        _PREFIX + _U32.pack(len(envelope)) + envelope + b"\xc4" + bytes((pad,)) + bytes(pad) + b"\xc6" + _U32.pack(data_len)
    ]
    pos = 0
    for off, a in enc.buffers:
        if off > pos:
            segments.append(bytes(off - pos))
        segments.append(memoryview(a.reshape(-1).view(np.uint8)))
        pos = off + a.nbytes
    return segments, head_len + 2 + pad + 5 + data_len


def dumps(obj: Any) -> bytes:
    """Encode ``obj`` into one ``bytes`` message (one copy of array data). See :func:`encode`."""
    segments, _ = encode(obj)
    return b"".join(segments)


def decode(buf: bytes | bytearray | memoryview) -> Any:
    """Decode one message produced by :func:`encode`.

    Args:
        buf: the whole message. If it is writable (``bytearray``, writable memoryview), decoded
            arrays are zero-copy views of it (keep it alive, do not reuse it); if read-only
            (``bytes``), arrays are copied so that they are always writable.

    Raises:
        RpcCodecError: truncated or malformed message, bad ndarray metadata (dtype, shape, range),
            object dtype.
    """
    mv = memoryview(buf)
    if mv.ndim != 1 or mv.itemsize != 1:
        mv = mv.cast("B")
    n = len(mv)
    try:
        if n < 6 or mv[0] != 0x94 or mv[1] != 0xCE:
            raise RpcCodecError("not an rpent RPC message (bad prefix); was it sent by an rpent RPC peer?")
        env_len = _U32.unpack_from(mv, 2)[0]
        env_end = 6 + env_len
        if env_end + 2 > n or mv[env_end] != 0xC4:
            raise RpcCodecError("truncated or malformed RPC message (envelope/pad)")
        pad = mv[env_end + 1]
        data_hdr = env_end + 2 + pad
        if data_hdr + 5 > n or mv[data_hdr] != 0xC6:
            raise RpcCodecError("truncated or malformed RPC message (data header)")
        data_len = _U32.unpack_from(mv, data_hdr + 1)[0]
        data_start = data_hdr + 5
        if data_start + data_len != n:
            raise RpcCodecError(
                f"RPC message length mismatch: header says {data_start + data_len} bytes, got {n}"
            )
    except (struct.error, IndexError) as exc:
        raise RpcCodecError(f"truncated RPC message: {exc}") from exc
    writable = not mv.readonly
    data = mv[data_start:]
    try:
        value = _unpack(mv[6:env_end], data, data_len, writable, strict=True)
    except RpcCodecError as exc:
        # Second, lenient pass: bad values become markers, so the error can name their key path.
        try:
            lenient = _unpack(mv[6:env_end], data, data_len, writable, strict=False)
        except Exception:  # noqa: BLE001 - the envelope itself is broken; the first error says so
            raise exc from None
        found = _walk(lenient, lambda v: v.problem if isinstance(v, _Bad) else None)
        if found is not None:
            raise _at(*found) from None
        raise
    if _has_foreign(value):
        raise _at(*_walk(value, _foreign_problem))
    return value


class _Bad:
    """A value the lenient decoding pass could not build (its ``problem`` is the error text)."""

    __slots__ = ("problem",)

    def __init__(self, problem: str):
        self.problem = problem


_RECEIVABLE: dict[Any, np.dtype] = {}
"""dtype strings already received and checked (bounded: a peer cannot grow it past 256 entries)."""


def _unpack(envelope: memoryview, data: memoryview, data_len: int, writable: bool, strict: bool) -> Any:
    def ext_hook(code: int, payload: bytes) -> Any:
        try:
            return _ext_value(code, payload)
        except RpcCodecError as exc:
            if strict:
                raise
            return _Bad(str(exc))

    def _ext_value(code: int, payload: bytes) -> Any:
        if code == EXT_NDARRAY:
            try:
                dtype_str, shape, off, nbytes = msgpack.unpackb(payload)
                dt = _RECEIVABLE.get(dtype_str)
                if dt is None:
                    dt = np.dtype(dtype_str)
                shape = tuple(map(int, shape))
                off, nbytes = int(off), int(nbytes)
            except Exception as exc:
                raise RpcCodecError(f"malformed ndarray metadata in RPC message: {exc}") from exc
            if dtype_str not in _RECEIVABLE:
                _check_dtype(dt)
                if len(_RECEIVABLE) < 256:
                    _RECEIVABLE[dtype_str] = dt
            if min(shape, default=0) < 0:
                raise RpcCodecError(f"negative dimension in ndarray shape {shape}")
            count = math.prod(shape)
            if count * dt.itemsize != nbytes:
                raise RpcCodecError(f"ndarray shape {shape} x {dt} does not match its {nbytes} bytes")
            if nbytes == 0:
                return np.empty(shape, dtype=dt)
            if off < 0 or off + nbytes > data_len:
                raise RpcCodecError(f"ndarray bytes [{off}, {off + nbytes}) lie outside the {data_len}-byte data block")
            arr = np.frombuffer(data, dtype=dt, count=count, offset=off).reshape(shape)
            return arr if writable else arr.copy()
        if code == EXT_NPSCALAR:
            try:
                dtype_str, raw = msgpack.unpackb(payload)
                dt = np.dtype(dtype_str)
            except Exception as exc:
                raise RpcCodecError(f"malformed numpy scalar in RPC message: {exc}") from exc
            _check_dtype(dt)
            if len(raw) != dt.itemsize:
                raise RpcCodecError(f"numpy scalar of {dt} needs {dt.itemsize} bytes, got {len(raw)}")
            return np.frombuffer(raw, dtype=dt)[0]
        return msgpack.ExtType(code, payload)

    try:
        return msgpack.unpackb(
            envelope, ext_hook=ext_hook, raw=False, strict_map_key=False, use_list=True, timestamp=0
        )
    except RpcCodecError:
        raise
    except Exception as exc:
        raise RpcCodecError(f"malformed RPC message envelope: {type(exc).__name__}: {exc}") from exc


def loads(buf: bytes | bytearray | memoryview) -> Any:
    """Alias of :func:`decode`."""
    return decode(buf)
