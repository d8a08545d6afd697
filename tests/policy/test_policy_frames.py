"""Length-prefixed msgpack frames over a real pipe."""

from __future__ import annotations

import os
import struct

import numpy as np
import pytest

from rpent.policy.frames import MAX_FRAME_BYTES, FrameError, encode_frame, read_frame, write_frame


@pytest.fixture
def pipe():
    r, w = os.pipe()
    yield r, w
    for fd in (r, w):
        try:
            os.close(fd)
        except OSError:
            pass


def test_round_trip_with_numpy_and_bytes(pipe):
    r, w = pipe
    write_frame(w, {"t": "call", "args": {"xyz": np.array([0.1, 0.2, 0.3]), "n": np.int64(3),
                                          "pair": (1, 2), "png": b"\x89PNG"}})
    got = read_frame(r)
    assert got == {"t": "call", "args": {"xyz": [0.1, 0.2, 0.3], "n": 3, "pair": [1, 2], "png": b"\x89PNG"}}


def test_end_of_file_and_broken_frames(pipe):
    r, w = pipe
    os.write(w, encode_frame({"t": "ok"})[:-1])
    os.close(w)
    with pytest.raises(FrameError, match="pipe closed after"):
        read_frame(r)


def test_clean_end_of_file_is_none(pipe):
    r, w = pipe
    os.close(w)
    assert read_frame(r) is None


def test_oversized_and_malformed_frames_are_refused(pipe):
    r, w = pipe
    os.write(w, struct.pack(">I", MAX_FRAME_BYTES + 1))
    with pytest.raises(FrameError, match="exceeds"):
        read_frame(r)
    body = b"\x93\x01\x02\x03"  # msgpack list, not a map
    os.write(w, struct.pack(">I", len(body)) + body)
    with pytest.raises(FrameError, match="must be a msgpack map"):
        read_frame(r)


def test_unknown_objects_raise_unless_lenient():
    with pytest.raises(TypeError, match="cannot send a builtins.object"):
        encode_frame({"t": "x", "v": object()})
    assert b"object object" in encode_frame({"t": "x", "v": object()}, lenient=True)
