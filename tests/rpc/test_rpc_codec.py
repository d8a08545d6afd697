"""Codec: every numeric dtype, 0-d/empty/non-contiguous arrays, scalars, containers, bad input."""

import msgpack
import numpy as np
import pytest

from rpent.rpc import RpcCodecError
from rpent.rpc.codec import ALIGN, decode, dumps, encode

NUMERIC_DTYPES = [
    np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
    np.float16, np.float32, np.float64, np.complex64, np.complex128,
]


def _sample(dtype, shape=(3, 4)):
    rng = np.random.default_rng(1)
    a = rng.standard_normal(shape) * 100
    if np.issubdtype(dtype, np.complexfloating):
        a = a + 1j * rng.standard_normal(shape)
    return np.asarray(a).astype(dtype)


def _roundtrip(obj, writable=True):
    msg = dumps(obj)
    return decode(bytearray(msg) if writable else msg)


@pytest.mark.parametrize("dtype", NUMERIC_DTYPES + [np.dtype(">i4"), np.dtype(">f8"), np.dtype("S5"), np.dtype("U3"),
                                                    np.dtype("M8[ns]")])
@pytest.mark.parametrize("shape", [(3, 4), (), (0,), (0, 3), (2, 1, 5)])
def test_array_roundtrip(dtype, shape):
    if np.dtype(dtype).kind in "SUM":
        a = np.zeros(shape, dtype=dtype)
    else:
        a = _sample(dtype, shape)
    for writable in (True, False):
        b = _roundtrip(a, writable)
        assert isinstance(b, np.ndarray)
        assert b.dtype == a.dtype and b.shape == a.shape
        np.testing.assert_array_equal(b, a)
        assert b.flags.writeable
        if b.size:
            assert b.ctypes.data % b.dtype.alignment == 0


@pytest.mark.parametrize("dtype", NUMERIC_DTYPES)
def test_numpy_scalar_roundtrip(dtype):
    s = _sample(dtype, (1,))[0]
    out = _roundtrip({"s": s})["s"]
    assert type(out) is type(s) and out == s


def test_non_contiguous_inputs():
    base = np.arange(60, dtype=np.float32).reshape(6, 10)
    cases = [base.T, base[::2, 1::3], np.asfortranarray(base), base[:, 4], np.broadcast_to(base[0], (3, 10))]
    out = _roundtrip(cases)
    for a, b in zip(cases, out):
        assert b.flags.c_contiguous
        np.testing.assert_array_equal(a, b)


def test_arrays_are_zero_copy_views_of_a_writable_buffer_and_aligned():
    arrays = [np.ones(5, np.uint8), np.arange(7, dtype=np.float64), np.ones((2, 3), np.complex128)]
    buf = bytearray(dumps(arrays))
    out = decode(buf)
    for b in out:
        assert b.ctypes.data % ALIGN == np.frombuffer(buf, np.uint8).ctypes.data % ALIGN
    out[1][0] = 42.0
    assert decode(buf)[1][0] == 42.0  # shares the buffer


def test_nested_containers_and_builtins():
    value = {
        "none": None, "t": True, "f": False, "i": -(2**63), "u": 2**64 - 1, "x": 1.5, "s": "ünïcode",
        "b": b"\x00\xff", "ba": bytearray(b"ab"), "tuple": (1, (2, 3)), "list": [[], {}, [np.zeros(2)]],
        "deep": {"a": {"b": {"c": [np.arange(3, dtype=np.int16)]}}}, 7: "int key",
    }
    out = _roundtrip(value)
    assert out["tuple"] == [1, [2, 3]]
    assert out["ba"] == b"ab" and out["b"] == b"\x00\xff"
    assert out["i"] == -(2**63) and out["u"] == 2**64 - 1 and out["s"] == "ünïcode"
    assert out[7] == "int key"
    np.testing.assert_array_equal(out["deep"]["a"]["b"]["c"][0], [0, 1, 2])


def test_builtin_subclasses_travel_as_base_types():
    import collections
    import enum

    class Color(enum.IntEnum):
        RED = 3

    out = _roundtrip({"e": Color.RED, "od": collections.OrderedDict(a=1)})
    assert out == {"e": 3, "od": {"a": 1}} and type(out["e"]) is int


def test_large_array_roundtrip():
    a = np.random.default_rng(0).integers(0, 255, (64, 1024, 1024), dtype=np.uint8)  # 64 MiB
    segments, n = encode(a)
    assert sum(len(memoryview(s).cast("B")) for s in segments) == n
    b = decode(bytearray(b"".join(segments)))
    assert np.array_equal(a, b)


def test_document_is_plain_msgpack():
    doc = msgpack.unpackb(dumps({"a": np.arange(3, dtype=np.int32)}), strict_map_key=False)
    assert isinstance(doc, list) and len(doc) == 4
    assert doc[3] == np.arange(3, dtype=np.int32).tobytes()


@pytest.mark.parametrize("bad", [np.array([object()]), np.zeros(2, dtype=[("a", "f4")]), object(), {1, 2}, 1 + 2j,
                                 2**70])
def test_unsupported_values_raise_clear_errors(bad):
    with pytest.raises(RpcCodecError) as info:
        dumps({"x": bad})
    assert "cannot" in str(info.value)


def test_object_dtype_message_names_the_fix():
    with pytest.raises(RpcCodecError, match="object dtype.*astype"):
        dumps(np.array([None, 1], dtype=object))


def test_never_unpickles():
    import pickle

    with pytest.raises(RpcCodecError):
        decode(pickle.dumps({"a": 1}))


@pytest.mark.parametrize("cut", [1, 5, 7, 20, -1])
def test_truncated_or_corrupt_messages_raise(cut):
    msg = dumps({"a": np.arange(100, dtype=np.float64), "b": "x" * 50})
    with pytest.raises(RpcCodecError):
        decode(msg[:cut])


def test_corrupt_array_metadata_raises():
    meta = msgpack.packb(["<f8", [1000], 0, 8000])
    env = msgpack.packb(msgpack.ExtType(1, meta))
    msg = b"\x94\xce" + len(env).to_bytes(4, "big") + env + b"\xc4\x00" + b"\xc6" + (8).to_bytes(4, "big") + bytes(8)
    with pytest.raises(RpcCodecError, match="outside"):
        decode(msg)
    meta = msgpack.packb(["|O", [1], 0, 8])
    env = msgpack.packb(msgpack.ExtType(1, meta))
    msg = b"\x94\xce" + len(env).to_bytes(4, "big") + env + b"\xc4\x00" + b"\xc6" + (8).to_bytes(4, "big") + bytes(8)
    with pytest.raises(RpcCodecError, match="object dtype"):
        decode(msg)


# --- errors name the key path and the accepted encoding; void dtypes refused -----

def _openpi_packed(a):
    """openpi-client msgpack_numpy's pack_array output for ``a`` (its documented wire form)."""
    return {b"__ndarray__": True, b"data": a.tobytes(), b"dtype": a.dtype.str, b"shape": a.shape}


def _msgpack_numpy_packed(a):
    """msgpack-numpy's encode() output for ``a``."""
    return {b"nd": True, b"type": a.dtype.str, b"kind": b"", b"shape": a.shape, b"data": a.tobytes()}


_IMG = np.zeros((1, 4, 4, 3), np.uint8)


@pytest.mark.parametrize("bad,what", [
    (_openpi_packed(_IMG), "openpi-client"),
    (_msgpack_numpy_packed(_IMG), "msgpack-numpy"),
    (np.array([object(), 1], dtype=object), "object dtype"),
    (np.zeros(2, dtype=[("a", "f4")]), "structured dtype"),
    (np.zeros(2, "V1"), "void dtype"),
])
@pytest.mark.parametrize("key", ["main_images", "states"])
def test_encode_error_names_key_path_and_accepted_encoding(bad, what, key):
    obs = {"main_images": _IMG, "states": np.zeros((1, 8), np.float32), "task_descriptions": ["x"]}
    obs[key] = bad
    with pytest.raises(RpcCodecError) as info:
        dumps({"method": "predict", "args": [obs], "kwargs": {}})
    msg = str(info.value)
    assert msg.startswith(f"at args[0].{key}: "), msg
    assert what in msg
    assert "\n" not in msg


def test_void_dtype_is_refused_at_the_codec_both_ends():
    with pytest.raises(RpcCodecError, match=r"at x\[1\]: .*void dtype \|V1"):
        dumps({"x": [1, np.zeros(3, "V1")]})
    with pytest.raises(RpcCodecError, match="void dtype"):
        dumps(np.void(b"\x00"))
    # A peer that is not rpent's encoder sends a |V1 array: the receiver names where it is.
    meta = msgpack.packb(["|V1", [2], 0, 2])
    env = msgpack.packb({"args": [{"states": msgpack.ExtType(1, meta)}]})
    msg = b"\x94\xce" + len(env).to_bytes(4, "big") + env + b"\xc4\x00" + b"\xc6" + (2).to_bytes(4, "big") + bytes(2)
    with pytest.raises(RpcCodecError, match=r"^at args\[0\]\.states: .*void dtype"):
        decode(msg)


def test_decode_names_the_path_of_a_foreign_array_dict():
    env = msgpack.packb({"args": [{"main_images": _openpi_packed(_IMG)}]}, use_bin_type=True)
    msg = b"\x94\xce" + len(env).to_bytes(4, "big") + env + b"\xc4\x00" + b"\xc6" + (0).to_bytes(4, "big")
    with pytest.raises(RpcCodecError, match=r"^at args\[0\]\.main_images: .*openpi-client.*pass the np.ndarray"):
        decode(msg)


def test_plain_dicts_with_similar_keys_still_travel():
    value = {"nd": 1, "data": b"x", "type": "t", "dtype": "f4", "shape": [1]}
    assert _roundtrip(value) == value
