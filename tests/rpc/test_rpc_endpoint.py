"""Endpoint parsing: accepted forms, canonical str, and errors that show the accepted form."""

import pytest

from rpent.rpc import Endpoint, parse_endpoint


@pytest.mark.parametrize(
    "text, expected",
    [
        ("127.0.0.1:5555", Endpoint("http", "127.0.0.1", 5555)),
        ("http://localhost:8000", Endpoint("http", "localhost", 8000)),
        ("socket://127.0.0.1:1", Endpoint("socket", "127.0.0.1", 1)),
        ("  SOCKET://gpu-box.lab:65535 ", Endpoint("socket", "gpu-box.lab", 65535)),
        ("socket://[::1]:80", Endpoint("socket", "::1", 80)),
        ("[::1]:80", Endpoint("http", "::1", 80)),
    ],
)
def test_accepted_forms(text, expected):
    ep = parse_endpoint(text)
    assert ep == expected
    assert parse_endpoint(str(ep)) == ep


def test_canonical_str():
    assert str(parse_endpoint("127.0.0.1:80")) == "http://127.0.0.1:80"
    assert str(parse_endpoint("socket://[::1]:9")) == "socket://[::1]:9"


@pytest.mark.parametrize(
    "text, why",
    [
        ("http//x", "'://'"),
        ("http//x:80", "'://'"),
        ("x:80:90", "too many ':'"),
        ("http:/x:80", "'://'"),
        ("127.0.0.1:70000", "out of range"),
        ("127.0.0.1:0", "out of range"),
        ("127.0.0.1:-1", "not a number"),
        ("127.0.0.1:http", "not a number"),
        ("grpc://127.0.0.1:80", "unknown protocol 'grpc'"),
        ("", "empty"),
        (":80", "empty host"),
        ("127.0.0.1", "missing ':PORT'"),
        ("::1:80", "brackets"),
        ("[::1:80", "unterminated"),
        ("[nothost]:80", "not an IPv6 address"),
        ("http://h:80/rpc", "no path"),
    ],
)
def test_malformed_is_rejected_with_accepted_form(text, why):
    with pytest.raises(ValueError) as info:
        parse_endpoint(text)
    msg = str(info.value)
    assert why in msg
    assert "[protocol://]HOST:PORT" in msg and "socket://127.0.0.1:5555" in msg
    assert repr(text) in msg


def test_port_zero_only_when_allowed():
    assert parse_endpoint("socket://127.0.0.1:0", allow_port_zero=True).port == 0


def test_loopback_detection():
    assert parse_endpoint("localhost:1").is_loopback
    assert parse_endpoint("127.3.4.5:1").is_loopback
    assert parse_endpoint("[::1]:1").is_loopback
    assert not parse_endpoint("0.0.0.0:1").is_loopback
    assert not parse_endpoint("10.0.0.2:1").is_loopback
